/* packing.c — the packer's life cycle: request checks, the order of
 * planning ("auto" limits resolved before a strategy is called), the epoch
 * draws of a strategy, efficiency reports.  The planning itself lives in
 * packing_auto.c, packing_lpfhp.c, packing_tuple.c and packing_baselines.c,
 * on the shared pieces of packing_plan.c. */
#include "engine/pack/packing.h"

#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"

/* --- request checks ------------------------------------------------------- */

static int is_static(pt_pack_method m)
{
    return m == PT_PACK_STATIC64 || m == PT_PACK_STATIC2N;
}

static void check_request(const pt_pack_request *r, pt_errors *errs)
{
    if ((unsigned)r->method >= PT_PACK_N_METHODS) {
        pt_errors_add(errs, "", 0, "method",
                      "unknown packing method %d (lpfhp, tuple, pad, static64, static2n, "
                      "dynamic)", (int)r->method);
        return;
    }
    if ((unsigned)r->heuristic >= PT_PACK_N_HEURISTICS)
        pt_errors_add(errs, "", 0, "heuristic",
                      "unknown tuple heuristic %d (product, sum, max, min, nodes, edges)",
                      (int)r->heuristic);
    if (r->max_nodes < 0)
        pt_errors_add(errs, "", 0, "max_nodes", "must be >= 0 (0 = auto), got %d", r->max_nodes);
    if (r->max_edges < 0)
        pt_errors_add(errs, "", 0, "max_edges", "must be >= 0 (0 = auto), got %d", r->max_edges);
    if (r->max_graphs < 0)
        pt_errors_add(errs, "", 0, "max_graphs", "must be >= 0 (0 = no limit), got %d",
                      r->max_graphs);
    if (!(r->target_efficiency > 0.0 && r->target_efficiency <= 1.0))
        pt_errors_add(errs, "", 0, "target_efficiency", "must be in (0, 1], got %g",
                      r->target_efficiency);
    if (r->method == PT_PACK_PAD && r->max_graphs > 1)
        pt_errors_add(errs, "", 0, "max_graphs",
                      "pad puts one graph in each pack; max_graphs must be 0 or 1, got %d",
                      r->max_graphs);
    if (is_static(r->method) || r->method == PT_PACK_DYNAMIC) {
        if (r->batch_size < 2)
            pt_errors_add(errs, "", 0, "batch_size",
                          "must be >= 2 for %s batching (one graph slot is the padding "
                          "graph), got %d", pt_pack_method_name(r->method), r->batch_size);
        if (r->max_graphs > 0)
            pt_errors_add(errs, "", 0, "max_graphs",
                          "%s batching has batch_size graph slots; set batch_size, not "
                          "max_graphs", pt_pack_method_name(r->method));
    }
    if (is_static(r->method) && (r->max_nodes > 0 || r->max_edges > 0))
        pt_errors_add(errs, "", 0, "max_nodes",
                      "%s pads every batch to its own size; max_nodes and max_edges must be "
                      "auto", pt_pack_method_name(r->method));
}

/* Every id once, known, non-empty and within explicit limits. */
static void check_ids(const pt_pack_request *r, const uint32_t *natoms, const uint32_t *nedges,
                      uint32_t n_structs, const uint32_t *ids, uint32_t n_ids, pt_errors *errs)
{
    if (n_ids == 0) {
        pt_errors_add(errs, "", 0, "ids", "nothing to pack: the list of graph ids is empty");
        return;
    }
    unsigned char *seen = calloc((size_t)n_structs + 1, 1);
    if (!seen) {
        pt_errors_add(errs, "", 0, "ids", "out of memory checking graph ids");
        return;
    }
    int dyn = r->method == PT_PACK_DYNAMIC;
    int edge_cap = r->max_edges > 0 && (r->method == PT_PACK_TUPLE || r->method == PT_PACK_PAD ||
                                        dyn);
    for (uint32_t k = 0; k < n_ids; k++) {
        uint32_t id = ids[k];
        if (id >= n_structs) {
            pt_errors_add(errs, "", 0, "ids", "graph id %u is not in the dataset (%u structures)",
                          id, n_structs);
            continue;
        }
        if (seen[id]++) {
            if (seen[id] == 2)
                pt_errors_add(errs, "", 0, "ids", "graph %u is listed more than once", id);
            continue;
        }
        if (natoms[id] == 0)
            pt_errors_add(errs, "", 0, "ids", "graph %u has no atoms", id);
        else if (dyn && r->max_nodes > 0 && natoms[id] > (uint32_t)r->max_nodes - 1)
            pt_errors_add(errs, "", 0, "max_nodes",
                          "graph %u has %u atoms; a dynamic batch of max_nodes %d holds %d "
                          "(one node is the padding graph's)", id, natoms[id], r->max_nodes,
                          r->max_nodes - 1);
        else if (!dyn && r->max_nodes > 0 && natoms[id] > (uint32_t)r->max_nodes)
            pt_errors_add(errs, "", 0, "max_nodes", "graph %u has %u atoms, more than max_nodes %d",
                          id, natoms[id], r->max_nodes);
        if (edge_cap && nedges[id] > (uint32_t)r->max_edges)
            pt_errors_add(errs, "", 0, "max_edges", "graph %u has %u edges, more than max_edges %d",
                          id, nedges[id], r->max_edges);
    }
    free(seen);
}

/* --- life cycle ------------------------------------------------------------ */

/* "auto" limits first (packing_auto.c), then the method's strategy with
 * concrete ones. */
static int plan(pt_packer *pk, pt_errors *errs)
{
    const pt_pack_method m = pk->req.method;
    if (m != PT_PACK_LPFHP && m != PT_PACK_TUPLE) return pt_baseline_plan(pk, errs);
    int tuple = m == PT_PACK_TUPLE;
    if (pt_packer_bins(pk, tuple)) {
        pt_errors_add(errs, "", 0, "", "out of memory planning %s packs", pt_pack_method_name(m));
        return -1;
    }
    uint32_t N = (uint32_t)pk->req.max_nodes, E = (uint32_t)pk->req.max_edges;
    if (!tuple) {
        if (N == 0 && pt_auto_lpfhp_nodes(pk, &N, errs)) return -1;
        return pt_lpfhp_plan(pk, N, errs);
    }
    if ((N == 0 || E == 0) && pt_auto_tuple_limits(pk, &N, &E, errs)) return -1;
    return pt_tuple_plan(pk, N, E, errs);
}

int pt_packer_init(pt_packer *pk, const pt_pack_request *req, const uint32_t *natoms,
                   const uint32_t *nedges, uint32_t n_structs, const uint32_t *ids,
                   uint32_t n_ids, pt_errors *errs)
{
    memset(pk, 0, sizeof(*pk));
    pk->req = *req;
    if (pk->req.target_efficiency == 0.0) pk->req.target_efficiency = PT_PACK_TARGET_DEFAULT;
    if (pk->req.batch_size == 0) pk->req.batch_size = PT_PACK_BATCH_DEFAULT;
    size_t before = errs->total;
    check_request(&pk->req, errs);
    if (errs->total == before)
        check_ids(&pk->req, natoms, nedges, n_structs, ids, n_ids, errs);
    if (errs->total != before) return -1;

    pk->n_ids = n_ids;
    pk->n_structs = n_structs;
    pk->ids = malloc((size_t)n_ids * sizeof(uint32_t));
    pk->natoms = malloc((size_t)n_structs * sizeof(uint32_t));
    pk->nedges = malloc((size_t)n_structs * sizeof(uint32_t));
    if (!pk->ids || !pk->natoms || !pk->nedges) {
        pt_errors_add(errs, "", 0, "", "out of memory planning packs");
        pt_packer_close(pk);
        return -1;
    }
    memcpy(pk->ids, ids, (size_t)n_ids * sizeof(uint32_t));
    memcpy(pk->natoms, natoms, (size_t)n_structs * sizeof(uint32_t));
    memcpy(pk->nedges, nedges, (size_t)n_structs * sizeof(uint32_t));
    pk->min_nodes = UINT32_MAX;
    for (uint32_t k = 0; k < n_ids; k++) {
        uint32_t n = natoms[ids[k]], e = nedges[ids[k]];
        pk->total_nodes += n;
        pk->total_edges += e;
        if (n < pk->min_nodes) pk->min_nodes = n;
        if (n > pk->max_nodes_seen) pk->max_nodes_seen = n;
        if (e > pk->max_edges_seen) pk->max_edges_seen = e;
    }
    if (plan(pk, errs) == 0) return 0;
    pt_packer_close(pk);
    return -1;
}

void pt_packer_close(pt_packer *pk)
{
    free(pk->ids);
    free(pk->natoms);
    free(pk->nedges);
    free(pk->bin_nodes);
    free(pk->bin_edges);
    free(pk->bin_offset);
    free(pk->bin_members);
    free(pk->comp_offset);
    free(pk->comp_bins);
    free(pk->comp_count);
    memset(pk, 0, sizeof(*pk));
}

/* --- epochs ------------------------------------------------------------------ */

static int packs_resize(pt_packs *out, uint32_t n_packs, uint32_t n_graphs)
{
    uint32_t *off = realloc(out->graph_offset, ((size_t)n_packs + 1) * sizeof(uint32_t));
    if (!off) return -1;
    out->graph_offset = off;
    uint32_t *g = realloc(out->graphs, ((size_t)n_graphs + 1) * sizeof(uint32_t));
    if (!g) return -1;
    out->graphs = g;
    out->n_packs = n_packs;
    return 0;
}

/* Fills the strategy: per-bin queues shuffled, compositions drawn in plan
 * order, then the pack order shuffled. */
static int strategy_epoch(const pt_packer *pk, uint64_t seed, uint32_t epoch, pt_packs *out)
{
    uint32_t np = pk->n_packs;
    uint32_t *queue = malloc(((size_t)pk->n_ids + 1) * sizeof(uint32_t));
    uint32_t *cursor = malloc(((size_t)pk->n_bins + 1) * sizeof(uint32_t));
    uint32_t *flat = malloc(((size_t)pk->n_ids + 1) * sizeof(uint32_t));
    uint32_t *flat_off = malloc(((size_t)np + 1) * sizeof(uint32_t));
    uint32_t *perm = malloc(((size_t)np + 1) * sizeof(uint32_t));
    int rc = -1;
    if (!queue || !cursor || !flat || !flat_off || !perm || packs_resize(out, np, pk->n_ids))
        goto done;
    pt_rng rng;
    pt_rng_init(&rng, seed, PT_PACK_RNG_STREAM + epoch);
    memcpy(queue, pk->bin_members, (size_t)pk->n_ids * sizeof(uint32_t));
    for (uint32_t b = 0; b < pk->n_bins; b++) {
        pt_rng_shuffle_u32(&rng, queue + pk->bin_offset[b], pk->bin_offset[b + 1] - pk->bin_offset[b]);
        cursor[b] = pk->bin_offset[b];
    }
    uint32_t p = 0, at = 0;
    for (uint32_t c = 0; c < pk->n_comps; c++)
        for (uint32_t r = 0; r < pk->comp_count[c]; r++) {
            flat_off[p++] = at;
            for (uint32_t s = pk->comp_offset[c]; s < pk->comp_offset[c + 1]; s++)
                flat[at++] = pk->ids[queue[cursor[pk->comp_bins[s]]++]];
        }
    flat_off[p] = at;
    for (uint32_t i = 0; i < np; i++) perm[i] = i;
    pt_rng_shuffle_u32(&rng, perm, np);
    at = 0;
    for (uint32_t i = 0; i < np; i++) {
        out->graph_offset[i] = at;
        uint32_t src = perm[i];
        uint32_t len = flat_off[src + 1] - flat_off[src];
        memcpy(out->graphs + at, flat + flat_off[src], (size_t)len * sizeof(uint32_t));
        at += len;
    }
    out->graph_offset[np] = at;
    rc = 0;
done:
    free(queue);
    free(cursor);
    free(flat);
    free(flat_off);
    free(perm);
    return rc;
}

int pt_packer_epoch(const pt_packer *pk, uint64_t seed, uint32_t epoch, pt_packs *out)
{
    out->limits = pk->limits;
    if (pk->req.method == PT_PACK_LPFHP || pk->req.method == PT_PACK_TUPLE)
        return strategy_epoch(pk, seed, epoch, out);
    return pt_baseline_epoch(pk, seed, epoch, out);
}

int pt_packs_consecutive(pt_packs *pk, const pt_dataset *ds, const pt_graphs *g, uint32_t n,
                         uint32_t per_pack, pt_errors *errs)
{
    memset(pk, 0, sizeof(*pk));
    if (per_pack == 0 || n > ds->n_structs || n > g->n_structs) {
        pt_errors_add(errs, NULL, 0, "", "consecutive packs: %u structures of %u, %u per pack",
                      n, ds->n_structs, per_pack);
        return -1;
    }
    uint32_t np = (n + per_pack - 1) / per_pack;
    pk->graph_offset = malloc(sizeof(uint32_t) * ((size_t)np + 1));
    pk->graphs = malloc(sizeof(uint32_t) * (n ? (size_t)n : 1));
    if (!pk->graph_offset || !pk->graphs) {
        pt_packs_close(pk);
        pt_errors_add(errs, NULL, 0, "", "out of memory");
        return -1;
    }
    int64_t nodes = 0, edges = 0;
    for (uint32_t k = 0; k < np; k++) {
        uint32_t first = k * per_pack, end = first + per_pack < n ? first + per_pack : n;
        pk->graph_offset[k] = first;
        int64_t nn = (int64_t)(ds->atom_offset[end] - ds->atom_offset[first]);
        int64_t ne = (int64_t)(g->edge_offset[end] - g->edge_offset[first]);
        if (nn > nodes) nodes = nn;
        if (ne > edges) edges = ne;
    }
    pk->graph_offset[np] = n;
    for (uint32_t s = 0; s < n; s++) pk->graphs[s] = s;
    pk->n_packs = np;
    if (nodes + 1 > INT32_MAX / 4 || edges + 1 > INT32_MAX / 4) {
        pt_packs_close(pk);
        pt_errors_add(errs, NULL, 0, "", "a pack of %u structures is too large", per_pack);
        return -1;
    }
    pk->limits = (pt_pack_limits){(int32_t)nodes + 1, (int32_t)edges + 1, (int32_t)per_pack};
    return 0;
}

void pt_packs_close(pt_packs *packs)
{
    free(packs->graph_offset);
    free(packs->graphs);
    memset(packs, 0, sizeof(*packs));
}

/* --- reports ----------------------------------------------------------------- */

static double ratio(uint64_t a, uint64_t b)
{
    return b ? (double)a / (double)b : 0.0;
}

void pt_packs_measure(const pt_packer *pk, const pt_packs *packs, pt_pack_report *out)
{
    memset(out, 0, sizeof(*out));
    out->method = pk->req.method;
    out->limits = pk->limits;
    out->n_packs = packs->n_packs;
    out->n_compositions = pk->n_comps;
    for (uint32_t p = 0; p < packs->n_packs; p++) {
        uint64_t n = 0, e = 0;
        for (uint32_t s = packs->graph_offset[p]; s < packs->graph_offset[p + 1]; s++) {
            n += pk->natoms[packs->graphs[s]];
            e += pk->nedges[packs->graphs[s]];
        }
        out->real_nodes += n;
        out->real_edges += e;
        out->n_graphs += packs->graph_offset[p + 1] - packs->graph_offset[p];
        if (is_static(pk->req.method)) {
            uint64_t pn, pe;
            pt_static_shape(pk->req.method, n, e, &pn, &pe);
            out->slot_nodes += pn;
            out->slot_edges += pe;
        } else {
            out->slot_nodes += (uint64_t)pk->limits.max_nodes;
            out->slot_edges += (uint64_t)pk->limits.max_edges;
        }
        out->slot_graphs += (uint64_t)pk->limits.max_graphs;
    }
    out->node_efficiency = ratio(out->real_nodes, out->slot_nodes);
    out->edge_efficiency = ratio(out->real_edges, out->slot_edges);
    out->graph_efficiency = ratio(out->n_graphs, out->slot_graphs);
    out->node_padding = 1.0 - out->node_efficiency;
    out->edge_padding = 1.0 - out->edge_efficiency;
    out->node_capacity_efficiency =
        ratio(out->real_nodes, (uint64_t)packs->n_packs * (uint64_t)pk->limits.max_nodes);
    out->edge_capacity_efficiency =
        ratio(out->real_edges, (uint64_t)packs->n_packs * (uint64_t)pk->limits.max_edges);
    out->graphs_per_pack = ratio(out->n_graphs, packs->n_packs);
}

int pt_packer_report(const pt_packer *pk, uint64_t seed, pt_pack_report *out)
{
    pt_packs packs = {0};
    if (pt_packer_epoch(pk, seed, 0, &packs)) {
        pt_packs_close(&packs);
        return -1;
    }
    pt_packs_measure(pk, &packs, out);
    pt_packs_close(&packs);
    return 0;
}
