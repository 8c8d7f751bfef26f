/* packing_auto.c — automatic pack limits: the smallest limits, searched
 * upward from the dataset maxima, at which the plan reaches the target
 * efficiency on every component it packs (issue 2, after seed 001 §2.5).
 *
 * LPFHP: max_nodes = largest graph, +1, +1, ... until node efficiency >= t.
 * Tuple: max_nodes scans upward the same way; for each, max_edges scans
 * upward in steps of 1% of the balanced value rho*N (rho = total edges /
 * total nodes) until node efficiency reaches t, and the pair is taken if edge
 * efficiency is >= t there too (beyond it more edge room lowers edge
 * efficiency, so the scan moves to the next max_nodes).  Bounds skip
 * hopeless pairs without planning: a plan has at least total_nodes / N
 * packs, so edge efficiency <= rho * N / E, and symmetrically node efficiency
 * <= E / (rho * N). */
#include "engine/pack/packing_plan.h"

#include <math.h>
#include <stdlib.h>

/* Search reach: limits up to this many times the largest graph. */
#define AUTO_REACH 8

typedef struct auto_ctx {
    pt_packer *pk;
    uint32_t *count;     /* graphs per bin */
    uint32_t max_graphs;
} auto_ctx;

static int ctx_init(auto_ctx *a, pt_packer *pk)
{
    a->pk = pk;
    a->max_graphs = (uint32_t)pk->req.max_graphs;
    return pt_bin_counts(pk, &a->count);
}

/* Plans at (N, E) (E = 0: nodes only) and measures both efficiencies. */
static int evaluate(const auto_ctx *a, uint32_t N, uint32_t E, double *node_eff,
                    double *edge_eff)
{
    const pt_packer *pk = a->pk;
    pt_strategy st;
    int rc = E ? pt_tuple_strategy(&st, pk, a->count, N, E, a->max_graphs, pk->req.heuristic)
               : pt_lpfhp_strategy(&st, pk, a->count, N, a->max_graphs);
    if (rc) return -1;
    *node_eff = (double)pk->total_nodes / ((double)st.n_packs * N);
    *edge_eff = E ? (double)pk->total_edges / ((double)st.n_packs * E) : 0.0;
    pt_strategy_close(&st);
    return 0;
}

static uint32_t reach(uint32_t max_seen)
{
    uint64_t r = (uint64_t)max_seen * AUTO_REACH;
    if (r < (uint64_t)max_seen + 64) r = (uint64_t)max_seen + 64;
    return r > INT32_MAX ? INT32_MAX : (uint32_t)r;
}

int pt_auto_lpfhp_nodes(pt_packer *pk, uint32_t *max_nodes, pt_errors *errs)
{
    auto_ctx a;
    if (ctx_init(&a, pk)) goto oom;
    double t = pk->req.target_efficiency, best = 0, ne, ee;
    uint32_t best_n = 0, hi = reach(pk->max_nodes_seen);
    for (uint32_t N = pk->max_nodes_seen; N <= hi; N++) {
        if (evaluate(&a, N, 0, &ne, &ee)) {
            free(a.count);
            goto oom;
        }
        if (ne >= t) {
            free(a.count);
            *max_nodes = N;
            return 0;
        }
        if (ne > best) {
            best = ne;
            best_n = N;
        }
    }
    free(a.count);
    pt_errors_add(errs, "", 0, "max_nodes",
                  "no max_nodes from %u to %u reaches %.1f%% node efficiency with LPFHP (best "
                  "%.1f%% at %u): lower target_efficiency or give max_nodes",
                  pk->max_nodes_seen, hi, 100 * t, 100 * best, best_n);
    return -1;
oom:
    pt_errors_add(errs, "", 0, "", "out of memory searching LPFHP limits");
    return -1;
}

int pt_auto_tuple_limits(pt_packer *pk, uint32_t *max_nodes, uint32_t *max_edges,
                         pt_errors *errs)
{
    if (pk->total_edges == 0) {
        pt_errors_add(errs, "", 0, "max_edges",
                      "none of the graphs has an edge, so no edge limit can reach a target "
                      "efficiency: give max_edges or use lpfhp");
        return -1;
    }
    auto_ctx a;
    if (ctx_init(&a, pk)) goto oom;
    double t = pk->req.target_efficiency;
    double rho = (double)pk->total_edges / (double)pk->total_nodes;
    uint32_t n_lo = *max_nodes ? *max_nodes : pk->max_nodes_seen;
    uint32_t n_hi = *max_nodes ? *max_nodes : reach(pk->max_nodes_seen);
    uint32_t e_min = pk->max_edges_seen ? pk->max_edges_seen : 1;
    for (uint32_t N = n_lo; N <= n_hi; N++) {
        /* nodes reach t only if edges leave room for t*N nodes' worth, and
         * edges reach t only below rho*N/t (see the top of the file) */
        double balanced = rho * N;
        double e_lo = balanced * t, e_hi = balanced / t;
        if (e_hi > INT32_MAX) e_hi = INT32_MAX;
        uint32_t lo = *max_edges ? *max_edges : (e_lo > e_min ? (uint32_t)e_lo : e_min);
        uint32_t hi = *max_edges ? *max_edges : (uint32_t)e_hi;
        if (lo > e_hi || lo > hi) continue;
        if (!pt_tuple_table_fits(pk, N, a.max_graphs)) break;
        uint32_t step = (uint32_t)(balanced / 100.0);
        if (step < 1) step = 1;
        for (uint32_t E = lo; E <= hi; E += step) {
            double ne, ee;
            if (evaluate(&a, N, E, &ne, &ee)) {
                free(a.count);
                goto oom;
            }
            if (ne >= t && ee >= t) {
                free(a.count);
                *max_nodes = N;
                *max_edges = E;
                return 0;
            }
            if (ne >= t) break; /* more edge room would lower edge efficiency */
        }
    }
    free(a.count);
    if (*max_nodes && !*max_edges)
        pt_errors_add(errs, "", 0, "max_edges",
                      "no max_edges reaches %.1f%% efficiency on nodes and edges with max_nodes "
                      "%u: lower target_efficiency or leave max_nodes auto", 100 * t, *max_nodes);
    else if (*max_edges && !*max_nodes)
        pt_errors_add(errs, "", 0, "max_nodes",
                      "no max_nodes from %u to %u reaches %.1f%% efficiency on nodes and edges "
                      "with max_edges %u: lower target_efficiency or leave max_edges auto",
                      n_lo, n_hi, 100 * t, *max_edges);
    else
        pt_errors_add(errs, "", 0, "max_nodes",
                      "no (max_nodes, max_edges) with max_nodes from %u to %u reaches %.1f%% "
                      "efficiency on nodes and edges: lower target_efficiency or give limits",
                      n_lo, n_hi, 100 * t);
    return -1;
oom:
    pt_errors_add(errs, "", 0, "", "out of memory searching tuple-packing limits");
    return -1;
}
