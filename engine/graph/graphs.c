/* graphs.c — neighbour graphs of a whole dataset (graph.h): every
 * structure through the molecular (neighbors.c) or the periodic
 * (neighbors_pbc.c) search, into one flat edge list per dataset. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/graph/graph.h"
#include "engine/graph/neighbors.h"

int pt_graph_params_check(const pt_graph_params *p, pt_errors *errs)
{
    int bad = 0;
    if (!isfinite(p->cutoff) || p->cutoff <= 0.0f) {
        pt_errors_add(errs, "", 0, "cutoff", "must be a finite distance > 0 Å, got %g",
                      (double)p->cutoff);
        bad = 1;
    }
    if (p->max_neighbors < 0 || (p->max_neighbors == PT_GRAPH_UNLIMITED && p->mode == PT_GRAPH_KNN)) {
        pt_errors_add(errs, "", 0, "max_neighbors",
                      p->max_neighbors < 0 ? "must be >= 1, or unlimited (null), got %d"
                                           : "the knn mode needs a number of neighbours k >= 1, got %d "
                                             "(unlimited)",
                      (int)p->max_neighbors);
        bad = 1;
    }
    if (p->mode != PT_GRAPH_RADIUS && p->mode != PT_GRAPH_KNN) {
        pt_errors_add(errs, "", 0, "mode", "unknown neighbour mode %d (radius or knn)",
                      (int)p->mode);
        bad = 1;
    }
    return bad ? -1 : 0;
}

/* A molecule's edge count is bounded up front: n (n - 1) or n k. */
static int edges_fit(const pt_dataset *ds, uint32_t s, const pt_graph_params *p,
                     pt_errors *errs)
{
    uint64_t n = pt_dataset_natoms(ds, s);
    uint64_t cap = p->max_neighbors == PT_GRAPH_UNLIMITED ? UINT64_MAX : (uint64_t)p->max_neighbors;
    uint64_t k = n > 0 && cap > n - 1 ? n - 1 : cap;
    if (n * k > UINT32_MAX) {
        pt_errors_add(errs, "", 0, "structure",
                      "structure %u has %llu atoms: up to %llu edges, more than one graph "
                      "may hold (4294967295)", s, (unsigned long long)n,
                      (unsigned long long)(n * k));
        return -1;
    }
    return 0;
}

/* Searches structure s into nl; 0, or -1 with the error added. */
static int search(pt_neighbor_list *nl, const pt_dataset *ds, uint32_t s, const pt_graph_params *p,
                  pt_errors *errs)
{
    const float *pos = ds->pos + 3 * ds->atom_offset[s];
    const uint32_t n = pt_dataset_natoms(ds, s);
    const unsigned pbc = pt_dataset_pbc(ds, s);
    int rc;
    if (!pbc) {
        if (edges_fit(ds, s, p, errs)) return -1;
        rc = pt_neighbor_list_build(nl, pos, n, p, PT_NEIGHBOR_AUTO);
    } else {
        rc = pt_neighbor_list_build_pbc(nl, pos, n, ds->cell + 9 * (size_t)s, pbc, p, PT_NEIGHBOR_AUTO);
    }
    if (rc == PT_NEIGHBOR_OK) return 0;
    long line = ds->source_line ? (long)ds->source_line[s] : 0;
    if (rc == PT_NEIGHBOR_ELIMIT)
        pt_errors_add(errs, "", line, "structure", "structure %u (line %ld of the source): %s", s, line,
                      nl->limit_msg);
    else
        pt_errors_add(errs, "", 0, "", "out of memory building neighbour graphs");
    return -1;
}

void pt_graphs_close(pt_graphs *g)
{
    free(g->edge_offset);
    free(g->src);
    free(g->dst);
    free(g->dist);
    free(g->shift);
    memset(g, 0, sizeof(*g));
}

static int any_periodic(const pt_dataset *ds)
{
    for (uint32_t s = 0; ds->pbc && s < ds->n_structs; s++)
        if (ds->pbc[s]) return 1;
    return 0;
}

/* Two passes: count every structure's edges, allocate the exact arrays,
 * then search again and copy.  The second search costs less than the slack
 * of growing arrays (up to 2x of ~500 MB on the water clusters). */
int pt_graphs_build(pt_graphs *g, const pt_dataset *ds, const pt_graph_params *p,
                    pt_errors *errs)
{
    memset(g, 0, sizeof(*g));
    if (pt_graph_params_check(p, errs)) return -1;
    g->params = *p;
    g->n_structs = ds->n_structs;
    g->edge_offset = calloc((size_t)ds->n_structs + 1, sizeof(uint64_t));
    uint32_t *counts = malloc(((size_t)ds->n_structs + 1) * sizeof(uint32_t));
    pt_neighbor_list nl;
    pt_neighbor_list_init(&nl);
    if (!g->edge_offset || !counts) goto oom;
    if (pt_graphs_count(counts, ds, p, errs)) goto fail;
    for (uint32_t s = 0; s < ds->n_structs; s++)
        g->edge_offset[s + 1] = g->edge_offset[s] + counts[s];
    g->n_edges = g->edge_offset[ds->n_structs];
    g->src = malloc(g->n_edges * sizeof(uint32_t) + 1);
    g->dst = malloc(g->n_edges * sizeof(uint32_t) + 1);
    g->dist = malloc(g->n_edges * sizeof(float) + 1);
    if (!g->src || !g->dst || !g->dist) goto oom;
    const int periodic = any_periodic(ds);
    if (periodic && !(g->shift = malloc(3 * g->n_edges * sizeof(int16_t) + 1))) goto oom;
    for (uint32_t s = 0; s < ds->n_structs; s++) {
        if (!counts[s]) continue;
        if (search(&nl, ds, s, p, errs)) goto fail;
        uint64_t at = g->edge_offset[s];
        memcpy(g->src + at, nl.src, nl.n_edges * sizeof(uint32_t));
        memcpy(g->dst + at, nl.dst, nl.n_edges * sizeof(uint32_t));
        memcpy(g->dist + at, nl.dist, nl.n_edges * sizeof(float));
        if (!periodic) continue;
        if (pt_dataset_pbc(ds, s)) memcpy(g->shift + 3 * at, nl.shift, 3 * nl.n_edges * sizeof(int16_t));
        else memset(g->shift + 3 * at, 0, 3 * nl.n_edges * sizeof(int16_t));
    }
    free(counts);
    pt_neighbor_list_close(&nl);
    return 0;
oom:
    pt_errors_add(errs, "", 0, "", "out of memory building neighbour graphs");
fail:
    free(counts);
    pt_neighbor_list_close(&nl);
    pt_graphs_close(g);
    return -1;
}

int pt_graphs_count(uint32_t *nedges, const pt_dataset *ds, const pt_graph_params *p,
                    pt_errors *errs)
{
    if (pt_graph_params_check(p, errs)) return -1;
    pt_neighbor_list nl;
    pt_neighbor_list_init(&nl);
    int rc = 0;
    for (uint32_t s = 0; s < ds->n_structs && rc == 0; s++) {
        rc = search(&nl, ds, s, p, errs);
        nedges[s] = nl.n_edges;
    }
    pt_neighbor_list_close(&nl);
    return rc;
}
