/* batch.c — the fixed-shape batch: allocated once for a job's pack limits,
 * then filled from consecutive packs of an epoch with no allocation, exactly
 * in batch.h's layout (real content first in each pack's slots, explicit
 * padding, CSR row pointer over edge receivers). */
#include "engine/pack/batch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/dataset.h"
#include "engine/graph/graph.h"
#include "engine/pack/edge_rows.h"

const char *pt_batch_strerror(int rc)
{
    switch (rc) {
    case PT_BATCH_OK: return "ok";
    case PT_BATCH_ELIMITS: return "pack limits or pack count invalid, or batch too large for int32 slots";
    case PT_BATCH_ENOMEM: return "out of memory allocating the batch";
    case PT_BATCH_ERANGE: return "more packs offered than the batch holds, or past the epoch's packs";
    case PT_BATCH_EGRAPH:
        return "a pack names a graph that is not in the dataset or its neighbour graphs, "
               "or a periodic structure whose graphs carry no image shifts";
    case PT_BATCH_ENODES: return "a pack holds more atoms than max_nodes";
    case PT_BATCH_EEDGES: return "a pack holds more edges than max_edges";
    case PT_BATCH_EGRAPHS: return "a pack holds more graphs than max_graphs";
    case PT_BATCH_ETARGET: return "target index is not a key of the dataset";
    }
    return "unknown batch error";
}

void pt_batch_close(pt_batch *b)
{
    free(b->z);
    free(b->node_graph);
    free(b->edge_src);
    free(b->edge_dst);
    free(b->edge_dist);
    free(b->dst_offset);
    free(b->graph_id);
    free(b->graph_natoms);
    free(b->target);
    free(b->edge_vec);
    free(b->node_force);
    free(b->graph_has_forces);
    free(b->graph_stress);
    free(b->graph_has_stress);
    free(b->graph_volume);
    free(b->key_target);
    free(b->atom_target);
    free(b->edge_row);
    free(b->edge_first);
    free(b->row_last);
    free(b->row_dist);
    free(b->row_cursor);
    memset(b, 0, sizeof(*b));
    b->n_rows = -1;
}

int pt_batch_set_keys(pt_batch *b, const uint32_t *keys, int32_t n)
{
    return pt_batch_set_keys_atom(b, keys, NULL, n);
}

int pt_batch_set_keys_atom(pt_batch *b, const uint32_t *keys, const uint8_t *atom, int32_t n)
{
    if (n < 0 || n > PT_BATCH_MAX_KEYS) return PT_BATCH_ELIMITS;
    free(b->key_target);
    free(b->atom_target);
    b->key_target = NULL;
    b->atom_target = NULL;
    b->n_keys = 0;
    memset(b->key_atom, 0, sizeof b->key_atom);
    if (n == 0) return PT_BATCH_OK;
    int any_atom = 0;
    for (int32_t j = 0; atom && j < n; j++) any_atom |= atom[j] != 0;
    b->key_target = calloc((size_t)n * (size_t)b->cap_graphs, sizeof(double));
    if (any_atom) b->atom_target = calloc((size_t)n * (size_t)b->cap_nodes, sizeof(double));
    if (!b->key_target || (any_atom && !b->atom_target)) {
        free(b->key_target);
        b->key_target = NULL;
        return PT_BATCH_ENOMEM;
    }
    memcpy(b->key_index, keys, (size_t)n * sizeof(*keys));
    for (int32_t j = 0; atom && j < n; j++) b->key_atom[j] = atom[j] != 0;
    b->n_keys = n;
    return PT_BATCH_OK;
}

/* Key j of structure s: its per-structure value (0 for a per-atom key, whose
 * values are per node), and a per-atom key's values into atom_target from
 * node slot n0. */
static double fill_key(pt_batch *b, const pt_dataset *ds, int32_t j, uint32_t s, int32_t n0)
{
    if (!b->key_atom[j]) return ds->targets[(size_t)b->key_index[j] * ds->n_structs + s];
    const float *col = ds->atom_cols + (size_t)b->key_index[j] * ds->n_atoms + ds->atom_offset[s];
    double *dst = b->atom_target + (size_t)j * b->cap_nodes + n0;
    for (uint32_t a = 0; a < pt_dataset_natoms(ds, s); a++) dst[a] = col[a];
    return 0.0;
}

int pt_batch_init(pt_batch *b, pt_pack_limits limits, int32_t n_packs, float cutoff)
{
    memset(b, 0, sizeof(*b));
    b->n_rows = -1;
    int64_t nodes = (int64_t)n_packs * limits.max_nodes;
    int64_t edges = (int64_t)n_packs * limits.max_edges;
    int64_t graphs = (int64_t)n_packs * limits.max_graphs;
    if (n_packs < 1 || limits.max_nodes < 1 || limits.max_edges < 0 || limits.max_graphs < 1 ||
        nodes >= INT32_MAX || edges >= INT32_MAX || graphs >= INT32_MAX)
        return PT_BATCH_ELIMITS;
    b->limits = limits;
    b->n_packs = n_packs;
    b->cap_nodes = (int32_t)nodes;
    b->cap_edges = (int32_t)edges;
    b->cap_graphs = (int32_t)graphs;
    b->cutoff = cutoff;
    size_t n = (size_t)nodes, e = (size_t)edges + 1, g = (size_t)graphs;
    b->z = calloc(n, sizeof(*b->z));
    b->node_graph = calloc(n, sizeof(*b->node_graph));
    b->edge_src = calloc(e, sizeof(*b->edge_src));
    b->edge_dst = calloc(e, sizeof(*b->edge_dst));
    b->edge_dist = calloc(e, sizeof(*b->edge_dist));
    b->dst_offset = calloc(n + 1, sizeof(*b->dst_offset));
    b->graph_id = calloc(g, sizeof(*b->graph_id));
    b->graph_natoms = calloc(g, sizeof(*b->graph_natoms));
    b->target = calloc(g, sizeof(*b->target));
    b->edge_vec = calloc(3 * e, sizeof(*b->edge_vec));
    b->node_force = calloc(3 * n, sizeof(*b->node_force));
    b->graph_has_forces = calloc(g, sizeof(*b->graph_has_forces));
    b->graph_stress = calloc(9 * g, sizeof(*b->graph_stress));
    b->graph_has_stress = calloc(g, sizeof(*b->graph_has_stress));
    b->graph_volume = calloc(g, sizeof(*b->graph_volume));
    b->edge_row = calloc(e, sizeof(*b->edge_row));
    b->edge_first = calloc(e, sizeof(*b->edge_first));
    b->row_last = calloc(e, sizeof(*b->row_last));
    b->row_dist = calloc(e, sizeof(*b->row_dist));
    b->row_cursor = calloc(n, sizeof(*b->row_cursor));
    if (!b->z || !b->node_graph || !b->edge_src || !b->edge_dst || !b->edge_dist ||
        !b->dst_offset || !b->graph_id || !b->graph_natoms || !b->target || !b->edge_vec ||
        !b->node_force || !b->graph_has_forces || !b->graph_stress || !b->graph_has_stress ||
        !b->graph_volume || !b->edge_row || !b->edge_first || !b->row_last || !b->row_dist ||
        !b->row_cursor) {
        pt_batch_close(b);
        return PT_BATCH_ENOMEM;
    }
    return PT_BATCH_OK;
}

/* Checks pack k against the dataset and the batch's limits before anything
 * is written, so a bad pack never leaves a half-filled batch behind. */
static int check_pack(const pt_batch *b, const pt_dataset *ds, const pt_graphs *g,
                      const pt_packs *packs, uint32_t k)
{
    int64_t nodes = 0, edges = 0;
    uint32_t first = packs->graph_offset[k], end = packs->graph_offset[k + 1];
    for (uint32_t q = first; q < end; q++) {
        uint32_t s = packs->graphs[q];
        if (s >= ds->n_structs || s >= g->n_structs) return PT_BATCH_EGRAPH;
        if (pt_dataset_pbc(ds, s) && !g->shift) return PT_BATCH_EGRAPH;  /* graphs of other data */
        nodes += pt_dataset_natoms(ds, s);
        edges += pt_graphs_nedges(g, s);
    }
    if ((int64_t)(end - first) > b->limits.max_graphs) return PT_BATCH_EGRAPHS;
    if (nodes > b->limits.max_nodes) return PT_BATCH_ENODES;
    if (edges > b->limits.max_edges) return PT_BATCH_EEDGES;
    return PT_BATCH_OK;
}

/* |det cell|: the volume of a structure periodic along a, b and c. */
static double cell_volume(const double *m)
{
    double det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
                 m[2] * (m[3] * m[7] - m[4] * m[6]);
    return fabs(det);
}

/* Edges of structure s, shifted to batch node slot base and edge slot at. */
static void fill_edges(pt_batch *b, const pt_dataset *ds, const pt_graphs *g, uint32_t s,
                       int32_t base, int32_t at)
{
    const float *pos = ds->pos + 3 * ds->atom_offset[s];
    const double *cell = pt_dataset_pbc(ds, s) ? ds->cell + 9 * (size_t)s : NULL;
    for (uint64_t e = g->edge_offset[s]; e < g->edge_offset[s + 1]; e++, at++) {
        const uint32_t j = g->src[e], i = g->dst[e];
        float *v = b->edge_vec + 3 * (size_t)at;
        b->edge_src[at] = base + (int32_t)j;
        b->edge_dst[at] = base + (int32_t)i;
        b->edge_dist[at] = g->dist[e];
        if (cell) {   /* the graph's own expression, rounded once */
            double w[3];
            pt_edge_vector(pos + 3 * j, pos + 3 * i, cell, g->shift + 3 * e, w);
            for (int c = 0; c < 3; c++) v[c] = (float)w[c];
        } else {      /* the float differences the distance was computed from */
            for (int c = 0; c < 3; c++) v[c] = pos[3 * j + c] - pos[3 * i + c];
        }
    }
}

/* Force and stress labels and the volume of structure s in graph slot gs,
 * its atoms starting at node slot n0. */
static void fill_labels(pt_batch *b, const pt_dataset *ds, uint32_t s, int32_t gs, int32_t n0)
{
    const uint32_t na = pt_dataset_natoms(ds, s);
    const float *f = ds->forces ? ds->forces + 3 * ds->atom_offset[s] : NULL;
    int has_f = f && !isnan(f[0]);   /* NaN only ever marks absence */
    if (has_f) memcpy(b->node_force + 3 * (size_t)n0, f, 3 * (size_t)na * sizeof(float));
    else memset(b->node_force + 3 * (size_t)n0, 0, 3 * (size_t)na * sizeof(float));
    b->graph_has_forces[gs] = (uint8_t)has_f;
    const double *st = ds->stress ? ds->stress + 9 * (size_t)s : NULL;
    int has_s = st && !isnan(st[0]);
    for (int c = 0; c < 9; c++) b->graph_stress[9 * (size_t)gs + c] = has_s ? st[c] : 0.0;
    b->graph_has_stress[gs] = (uint8_t)has_s;
    b->graph_volume[gs] =
        pt_dataset_pbc(ds, s) == PT_PBC_ALL ? cell_volume(ds->cell + 9 * (size_t)s) : 0.0;
}

/* Pack slot p gets pack *k (or only padding when k is NULL). */
static void fill_pack(pt_batch *b, const pt_dataset *ds, const pt_graphs *g,
                      const pt_packs *packs, int32_t p, const uint32_t *k, int target_index)
{
    const pt_pack_limits L = b->limits;
    const int32_t node0 = p * L.max_nodes, edge0 = p * L.max_edges, graph0 = p * L.max_graphs;
    int32_t nn = 0, ne = 0, ng = 0;
    uint32_t first = k ? packs->graph_offset[*k] : 0, end = k ? packs->graph_offset[*k + 1] : 0;
    for (uint32_t q = first; q < end; q++, ng++) {
        uint32_t s = packs->graphs[q];
        int32_t na = (int32_t)pt_dataset_natoms(ds, s);
        memcpy(b->z + node0 + nn, ds->z + ds->atom_offset[s], (size_t)na);
        for (int32_t a = 0; a < na; a++) b->node_graph[node0 + nn + a] = graph0 + ng;
        /* a structure's edges are sorted by receiver and structures follow
         * each other in node order, so the pack's edges stay sorted */
        fill_edges(b, ds, g, s, node0 + nn, edge0 + ne);
        ne += (int32_t)pt_graphs_nedges(g, s);
        b->graph_id[graph0 + ng] = (int32_t)s;
        b->graph_natoms[graph0 + ng] = na;
        b->target[graph0 + ng] =
            target_index < 0 ? 0.0 : ds->targets[(size_t)target_index * ds->n_structs + s];
        for (int32_t j = 0; j < b->n_keys; j++)
            b->key_target[(size_t)j * b->cap_graphs + graph0 + ng] = fill_key(b, ds, j, s, node0 + nn);
        fill_labels(b, ds, s, graph0 + ng, node0 + nn);
        nn += na;
    }
    b->n_real_nodes += nn;
    b->n_real_edges += ne;
    b->n_real_graphs += ng;
    memset(b->z + node0 + nn, 0, (size_t)(L.max_nodes - nn));
    for (int32_t a = nn; a < L.max_nodes; a++) b->node_graph[node0 + a] = -1;
    memset(b->node_force + 3 * (size_t)(node0 + nn), 0,
           3 * (size_t)(L.max_nodes - nn) * sizeof(float));
    for (int32_t j = 0; b->atom_target && j < b->n_keys; j++)
        memset(b->atom_target + (size_t)j * b->cap_nodes + node0 + nn, 0,
               (size_t)(L.max_nodes - nn) * sizeof(double));
    const int32_t last = node0 + L.max_nodes - 1;
    for (int32_t e = ne; e < L.max_edges; e++) {
        b->edge_src[edge0 + e] = last;
        b->edge_dst[edge0 + e] = last;
        b->edge_dist[edge0 + e] = b->cutoff;
        float *v = b->edge_vec + 3 * (size_t)(edge0 + e);
        v[0] = b->cutoff;
        v[1] = v[2] = 0.0f;
    }
    for (int32_t s = ng; s < L.max_graphs; s++) {
        b->graph_id[graph0 + s] = -1;
        b->graph_natoms[graph0 + s] = 0;
        b->target[graph0 + s] = 0.0;
        for (int32_t j = 0; j < b->n_keys; j++)
            b->key_target[(size_t)j * b->cap_graphs + graph0 + s] = 0.0;
        b->graph_has_forces[graph0 + s] = 0;
        b->graph_has_stress[graph0 + s] = 0;
        b->graph_volume[graph0 + s] = 0.0;
        memset(b->graph_stress + 9 * (size_t)(graph0 + s), 0, 9 * sizeof(double));
    }
}

/* The one fill: pack slot p gets pack ids[p] (or first + p when ids is
 * NULL) for p < n, padding after that. */
static int fill_batch(pt_batch *b, const pt_dataset *ds, const pt_graphs *g, const pt_packs *packs,
                      uint32_t first, const uint32_t *ids, int32_t n, int target_index)
{
    if (n < 0 || n > b->n_packs) return PT_BATCH_ERANGE;
    if (!ids && (uint64_t)first + (uint64_t)n > packs->n_packs) return PT_BATCH_ERANGE;
    if (target_index >= 0 && (uint32_t)target_index >= ds->n_targets) return PT_BATCH_ETARGET;
    for (int32_t j = 0; j < b->n_keys; j++)
        if (b->key_index[j] >= (b->key_atom[j] ? ds->n_atom_cols : ds->n_targets)) return PT_BATCH_ETARGET;
    for (int32_t p = 0; p < n; p++) {
        uint32_t k = ids ? ids[p] : first + (uint32_t)p;
        if (k >= packs->n_packs) return PT_BATCH_ERANGE;
        int rc = check_pack(b, ds, g, packs, k);
        if (rc != PT_BATCH_OK) return rc;
    }
    b->n_real_nodes = b->n_real_edges = b->n_real_graphs = 0;
    b->n_rows = -1;
    for (int32_t p = 0; p < b->n_packs; p++) {
        uint32_t k = p < n ? (ids ? ids[p] : first + (uint32_t)p) : 0;
        fill_pack(b, ds, g, packs, p, p < n ? &k : NULL, target_index);
    }
    /* CSR row pointer: edge_dst is non-decreasing, so one merge pass */
    int32_t e = 0;
    for (int32_t i = 0; i <= b->cap_nodes; i++) {
        while (e < b->cap_edges && b->edge_dst[e] < i) e++;
        b->dst_offset[i] = e;
    }
    /* the filter-row table, while the edges just written are in this
     * core's cache (before: by the replica, on its step's critical path) */
    b->n_rows = pt_edge_rows_build(b->edge_row, b->edge_first, b->row_dist, b->row_cursor,
                                   b->edge_src, b->dst_offset, b->edge_dist, b->edge_vec,
                                   b->cap_nodes, b->cutoff);
    pt_edge_rows_last(b->row_last, b->edge_row, b->dst_offset, b->cap_nodes);
    return PT_BATCH_OK;
}

int pt_batch_fill(pt_batch *b, const pt_dataset *ds, const pt_graphs *g, const pt_packs *packs,
                  uint32_t first_pack, int32_t n_packs_avail, int target_index)
{
    return fill_batch(b, ds, g, packs, first_pack, NULL, n_packs_avail, target_index);
}

int pt_batch_fill_ids(pt_batch *b, const pt_dataset *ds, const pt_graphs *g, const pt_packs *packs,
                      const uint32_t *ids, int32_t n, int target_index)
{
    return fill_batch(b, ds, g, packs, 0, ids, n, target_index);
}

/* Sizes of pack k, for error messages that say which pack and by how much. */
void pt_batch_pack_sizes(const pt_dataset *ds, const pt_graphs *g, const pt_packs *packs,
                         uint32_t k, int64_t *graphs, int64_t *nodes, int64_t *edges)
{
    uint32_t first = packs->graph_offset[k], end = packs->graph_offset[k + 1];
    *graphs = end - first;
    *nodes = *edges = 0;
    for (uint32_t q = first; q < end; q++) {
        uint32_t s = packs->graphs[q];
        if (s >= ds->n_structs || s >= g->n_structs) continue;
        *nodes += pt_dataset_natoms(ds, s);
        *edges += pt_graphs_nedges(g, s);
    }
}
