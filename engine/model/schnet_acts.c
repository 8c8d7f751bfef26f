/* schnet_acts.c — SchNet's activation arena (schnet.h, pt_schnet_acts): one
 * allocation sized once from a batch shape and an arena mode, carved into
 * the arrays of the forward pass, the energy backward and, for the forces
 * modes, of schnet_forces.c.  Sizing and carving are one walk
 * (acts_layout), so the memory plan's byte count is the allocation's. */
#include "engine/model/schnet.h"

#include <stdlib.h>
#include <string.h>

/* Carves 64-byte aligned pieces off the arena; with base == NULL it only
 * counts, so sizing and assignment share one walk. */
typedef struct carver {
    char *base;
    size_t used;
} carver;

static void *carve(carver *c, size_t bytes)
{
    size_t start = (c->used + 63) & ~(size_t)63;
    c->used = start + bytes;
    return c->base ? c->base + start : NULL;
}

/* The energy's arrays, then (mode ≥ FORCES) those of schnet_forces.c;
 * pairs (schnet.h) get twice the rows. */
static void acts_layout(pt_schnet_acts *a, const pt_schnet_config *c, carver *cv)
{
    const size_t N = (size_t)a->cap_nodes, E = (size_t)a->cap_edges, B = (size_t)a->cap_graphs;
    const size_t H = (size_t)c->hidden, F = (size_t)c->filters, G = (size_t)c->gaussians;
    const size_t H2 = H / 2, fs = sizeof(float), ds = sizeof(double);
    const int forces = a->mode >= PT_SCHNET_FORCES, train = a->mode == PT_SCHNET_FORCES_TRAIN;
    const size_t pair = train ? 2 : 1; /* arrays with a second (tangent or bar) half */
    a->row = carve(cv, E * sizeof(int32_t));
    a->first = carve(cv, E);
    a->row_last = carve(cv, E * sizeof(int32_t));
    a->row_dist = carve(cv, E * fs);
    a->e = carve(cv, pair * E * G * fs);
    a->cut = carve(cv, E * fs);
    if (forces) {
        /* shared row scratch: the forward's P and s1' (FORCES), the second
         * backward's [P̂; P̄] and [ŝ1; s̄1] (FORCES_TRAIN), and the energy
         * backward's dp and ds1 should it run on this arena */
        a->rows_a = carve(cv, pair * E * F * fs);
        a->rows_b = carve(cv, pair * E * F * fs);
    }
    for (int t = 0; t <= c->interactions; t++) a->h[t] = carve(cv, pair * N * H * fs);
    for (int t = 0; t < c->interactions; t++) {
        pt_schnet_block_acts *k = &a->block[t];
        k->sig1 = carve(cv, E * F * fs);
        k->s1 = carve(cv, pair * E * F * fs);
        k->w = carve(cv, E * F * fs);
        k->p = forces ? a->rows_a : k->w;
        k->x = carve(cv, N * F * fs);
        k->m = carve(cv, pair * N * F * fs);
        k->sig2 = carve(cv, N * H * fs);
        k->u = carve(cv, pair * N * H * fs);
        if (!forces) continue;
        k->wd = carve(cv, E * F * fs);
        k->z2 = carve(cv, pair * N * H * fs);
        k->mbar = carve(cv, N * F * fs);
        k->xb = carve(cv, pair * N * F * fs);
        if (train) k->xdot = carve(cv, N * F * fs);
    }
    /* heads: head 0's q is a pair (forces come from head 0); y and dy per
     * graph or per atom */
    for (int k = 0; k < pt_schnet_head_count(c); k++) {
        pt_schnet_head_acts *h = &a->head[k];
        const size_t out = c->n_heads > 0 && c->heads[k].level == PT_HEAD_ATOM ? N : B;
        h->sig4 = carve(cv, N * H2 * fs);
        h->q = carve(cv, (k ? 1 : pair) * N * H2 * fs);
        h->o = carve(cv, N * fs);
        h->y = carve(cv, out * ds);
        h->dy = carve(cv, out * ds);
    }
    a->sig4 = a->head[0].sig4;
    a->q = a->head[0].q;
    a->o = a->head[0].o;
    a->y = a->head[0].y;
    a->dy = a->head[0].dy;
    a->count = carve(cv, B * sizeof(int32_t));
    a->dh = carve(cv, N * H * fs);
    a->du = carve(cv, N * H * fs);
    a->dm = carve(cv, N * F * fs);
    a->dx = carve(cv, N * F * fs);
    a->dp = forces ? a->rows_a : carve(cv, E * F * fs);
    a->ds1 = forces ? a->rows_b : carve(cv, E * F * fs);
    a->dq = carve(cv, N * H2 * fs);
    a->dout = carve(cv, N * fs);
    if (!forces) return;
    a->de = carve(cv, E * G * fs);
    a->dcut = carve(cv, E * fs);
    a->dist_grad = carve(cv, E * fs);
    for (int t = 0; t <= c->interactions; t++) a->hb[t] = carve(cv, pair * N * H * fs);
    a->z4 = carve(cv, pair * N * H2 * fs);
    a->ob = carve(cv, pair * N * fs);
    a->zs = carve(cv, N * H * fs);
    a->ones = carve(cv, B * ds);
    a->force = carve(cv, N * 3 * ds);
    a->stress = carve(cv, B * 9 * ds);
    if (!train) return;
    a->force_bar = carve(cv, N * 3 * ds);
    a->stress_bar = carve(cv, B * 9 * ds);
    a->lambda = carve(cv, E * fs);
    a->mhat = carve(cv, N * F * fs);
}


size_t pt_schnet_acts_bytes_mode(const pt_schnet_config *cfg, int32_t cap_nodes,
                                 int32_t cap_edges, int32_t cap_graphs, pt_schnet_mode mode)
{
    pt_schnet_acts probe = {.cap_nodes = cap_nodes, .cap_edges = cap_edges,
                            .cap_graphs = cap_graphs, .mode = mode};
    carver cv = {NULL, 0};
    acts_layout(&probe, cfg, &cv);
    return (cv.used + 63) & ~(size_t)63;
}

size_t pt_schnet_acts_bytes(const pt_schnet_config *cfg, int32_t cap_nodes, int32_t cap_edges,
                            int32_t cap_graphs)
{
    return pt_schnet_acts_bytes_mode(cfg, cap_nodes, cap_edges, cap_graphs, PT_SCHNET_ENERGY);
}

int pt_schnet_acts_init(pt_schnet_acts *a, const pt_schnet *m, int32_t cap_nodes,
                        int32_t cap_edges, int32_t cap_graphs, pt_errors *errs)
{
    return pt_schnet_acts_init_mode(a, m, cap_nodes, cap_edges, cap_graphs, PT_SCHNET_ENERGY,
                                    errs);
}

int pt_schnet_acts_init_mode(pt_schnet_acts *a, const pt_schnet *m, int32_t cap_nodes,
                             int32_t cap_edges, int32_t cap_graphs, pt_schnet_mode mode,
                             pt_errors *errs)
{
    memset(a, 0, sizeof(*a));
    if (cap_nodes < 1 || cap_edges < 0 || cap_graphs < 1) {
        if (errs)
            pt_errors_add(errs, "", 0, "batch",
                          "capacities must be nodes >= 1, edges >= 0, graphs >= 1 "
                          "(got %d, %d, %d)", cap_nodes, cap_edges, cap_graphs);
        return -1;
    }
    if (mode != PT_SCHNET_ENERGY && mode != PT_SCHNET_FORCES && mode != PT_SCHNET_FORCES_TRAIN) {
        if (errs) pt_errors_add(errs, "", 0, "mode", "unknown arena mode %d", (int)mode);
        return -1;
    }
    if (mode != PT_SCHNET_ENERGY && m->head[0].level != PT_HEAD_GRAPH) {
        if (errs)
            pt_errors_add(errs, "", 0, "mode", "forces are -d/dr of head 0, which predicts "
                          "per atom ('%s'): they need a graph head (the energy) first",
                          m->head[0].key);
        return -1;
    }
    a->cap_nodes = cap_nodes;
    a->cap_edges = cap_edges;
    a->cap_graphs = cap_graphs;
    a->mode = mode;
    a->bytes = pt_schnet_acts_bytes_mode(&m->cfg, cap_nodes, cap_edges, cap_graphs, mode);
    a->memory = aligned_alloc(64, a->bytes);
    if (!a->memory) {
        if (errs)
            pt_errors_add(errs, "", 0, "batch", "out of memory for a %zu-byte activation arena",
                          a->bytes);
        memset(a, 0, sizeof(*a));
        return -1;
    }
    /* zeroed once so that slots a short batch never writes are still finite */
    memset(a->memory, 0, a->bytes);
    carver cv = {a->memory, 0};
    acts_layout(a, &m->cfg, &cv);
    return 0;
}

void pt_schnet_acts_close(pt_schnet_acts *a)
{
    free(a->memory);
    memset(a, 0, sizeof(*a));
}

