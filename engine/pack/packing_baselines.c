/* packing_baselines.c — the batching methods packing is compared against:
 * padding, jraph-style static batching (static64, static2n) and jraph's
 * dynamic batching.
 *
 * Our reading of the sources (jraph utils.py, and the jraph_MPEU code behind
 * Speckhard et al., "Training speedups via batching for geometric learning"):
 *   - jraph.pad_with_graphs needs one padding node and one padding graph, so
 *     a batch of n_node / n_graph slots holds at most n_node-1 real nodes and
 *     n_graph-1 real graphs; edges need no reserve.
 *   - dynamic: budget n_node = 64 * (1 + floor(max(mean_nodes * B, largest)
 *     / 64)) (strictly above, as jraph_MPEU's next_multiple_of_64), n_edge
 *     likewise from edges, n_graph = B; jraph.dynamically_batch then adds
 *     graphs in order and closes a batch when one more would exceed a limit.
 *     jraph_MPEU estimates the means on the first 1000 graphs; we use all.
 *   - static: B-1 graphs per batch, each batch padded to its own shape:
 *     nodes to the next multiple of 64 (or power of two, at least 2) >=
 *     nodes+1, edges likewise >= edges, B graph slots.  (jraph_MPEU's loop
 *     also drops the graph that closes each batch; we keep it.)
 * Our batches have a fixed capacity, so static methods get a capacity that
 * holds the largest possible batch (the B-1 largest graphs by nodes, and by
 * edges), while their efficiency is measured against each batch's own shape. */
#include "engine/pack/packing_plan.h"

#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"

static uint64_t up_to_64(uint64_t x)
{
    return x <= 64 ? 64 : (x + 63) / 64 * 64;
}

static uint64_t up_to_pow2(uint64_t x)
{
    uint64_t p = 2;
    while (p < x) p *= 2;
    return p;
}

void pt_static_shape(pt_pack_method m, uint64_t nodes, uint64_t edges, uint64_t *pad_nodes,
                     uint64_t *pad_edges)
{
    if (m == PT_PACK_STATIC2N) {
        *pad_nodes = up_to_pow2(nodes + 1);
        *pad_edges = up_to_pow2(edges);
    } else {
        *pad_nodes = up_to_64(nodes + 1);
        *pad_edges = up_to_64(edges);
    }
}

static int cmp_desc(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x < y) - (x > y);
}

/* Sum of the `take` largest values of size[ids[k]]. */
static int64_t sum_largest(const pt_packer *pk, const uint32_t *size, uint32_t take)
{
    uint32_t *v = malloc(((size_t)pk->n_ids + 1) * sizeof(uint32_t));
    if (!v) return -1;
    for (uint32_t k = 0; k < pk->n_ids; k++) v[k] = size[pk->ids[k]];
    qsort(v, pk->n_ids, sizeof(uint32_t), cmp_desc);
    int64_t s = 0;
    for (uint32_t k = 0; k < take && k < pk->n_ids; k++) s += v[k];
    free(v);
    return s;
}

static uint64_t next_multiple_of_64_above(double v)
{
    return 64 * (1 + (uint64_t)(v / 64.0));
}

static int set_limits(pt_packer *pk, uint64_t n, uint64_t e, uint64_t g, pt_errors *errs)
{
    if (n > INT32_MAX || e > INT32_MAX || g > INT32_MAX) {
        pt_errors_add(errs, "", 0, "batch_size",
                      "%s capacity of %llu nodes, %llu edges does not fit 2^31-1 slots: lower "
                      "batch_size", pt_pack_method_name(pk->req.method), (unsigned long long)n,
                      (unsigned long long)e);
        return -1;
    }
    pk->limits.max_nodes = (int32_t)n;
    pk->limits.max_edges = (int32_t)e;
    pk->limits.max_graphs = (int32_t)g;
    pk->req.max_nodes = (int32_t)n;
    pk->req.max_edges = (int32_t)e;
    return 0;
}

int pt_baseline_plan(pt_packer *pk, pt_errors *errs)
{
    uint32_t B = (uint32_t)pk->req.batch_size;
    switch (pk->req.method) {
    case PT_PACK_PAD: {
        uint64_t n = pk->req.max_nodes ? (uint64_t)pk->req.max_nodes : pk->max_nodes_seen;
        uint64_t e = pk->req.max_edges ? (uint64_t)pk->req.max_edges : pk->max_edges_seen;
        pk->n_packs = pk->n_ids;
        return set_limits(pk, n, e, 1, errs);
    }
    case PT_PACK_STATIC64:
    case PT_PACK_STATIC2N: {
        int64_t n = sum_largest(pk, pk->natoms, B - 1);
        int64_t e = sum_largest(pk, pk->nedges, B - 1);
        if (n < 0 || e < 0) break;
        uint64_t pn, pe;
        pt_static_shape(pk->req.method, (uint64_t)n, (uint64_t)e, &pn, &pe);
        pk->n_packs = (pk->n_ids + B - 2) / (B - 1);
        return set_limits(pk, pn, pe, B, errs);
    }
    case PT_PACK_DYNAMIC: {
        double mean_n = (double)pk->total_nodes / pk->n_ids;
        double mean_e = (double)pk->total_edges / pk->n_ids;
        double big_n = mean_n * B > pk->max_nodes_seen ? mean_n * B : pk->max_nodes_seen;
        double big_e = mean_e * B > pk->max_edges_seen ? mean_e * B : pk->max_edges_seen;
        uint64_t n = pk->req.max_nodes ? (uint64_t)pk->req.max_nodes
                                       : next_multiple_of_64_above(big_n);
        uint64_t e = pk->req.max_edges ? (uint64_t)pk->req.max_edges
                                       : next_multiple_of_64_above(big_e);
        if (set_limits(pk, n, e, B, errs)) return -1;
        pk->budget_nodes = (uint32_t)n - 1;
        pk->budget_edges = (uint32_t)e;
        pk->budget_graphs = B - 1;
        pk->n_packs = 0;
        return 0;
    }
    default: break;
    }
    pt_errors_add(errs, "", 0, "", "out of memory planning %s batches",
                  pt_pack_method_name(pk->req.method));
    return -1;
}

int pt_baseline_epoch(const pt_packer *pk, uint64_t seed, uint32_t epoch, pt_packs *out)
{
    uint32_t n = pk->n_ids;
    uint32_t *order = malloc(((size_t)n + 1) * sizeof(uint32_t));
    uint32_t *off = realloc(out->graph_offset, ((size_t)n + 1) * sizeof(uint32_t));
    if (off) out->graph_offset = off;
    uint32_t *g = off ? realloc(out->graphs, ((size_t)n + 1) * sizeof(uint32_t)) : NULL;
    if (g) out->graphs = g;
    if (!order || !off || !g) {
        free(order);
        return -1;
    }
    for (uint32_t k = 0; k < n; k++) order[k] = k;
    pt_rng rng;
    pt_rng_init(&rng, seed, PT_PACK_RNG_STREAM + epoch);
    pt_rng_shuffle_u32(&rng, order, n);
    for (uint32_t k = 0; k < n; k++) out->graphs[k] = pk->ids[order[k]];
    free(order);

    uint32_t np = 0;
    if (pk->req.method == PT_PACK_PAD) {
        for (uint32_t k = 0; k < n; k++) out->graph_offset[np++] = k;
    } else if (pk->req.method == PT_PACK_DYNAMIC) {
        uint64_t nodes = 0, edges = 0, graphs = 0;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t id = out->graphs[k];
            if (graphs == 0 || nodes + pk->natoms[id] > pk->budget_nodes ||
                edges + pk->nedges[id] > pk->budget_edges || graphs + 1 > pk->budget_graphs) {
                out->graph_offset[np++] = k;
                nodes = edges = graphs = 0;
            }
            nodes += pk->natoms[id];
            edges += pk->nedges[id];
            graphs++;
        }
    } else {
        uint32_t per = (uint32_t)pk->req.batch_size - 1;
        for (uint32_t k = 0; k < n; k += per) out->graph_offset[np++] = k;
    }
    out->graph_offset[np] = n;
    out->n_packs = np;
    return 0;
}
