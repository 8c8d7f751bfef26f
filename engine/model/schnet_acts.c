/* schnet_acts.c — SchNet's activation arena (schnet.h, pt_schnet_acts): one
 * allocation sized once from a batch shape and an arena mode, carved into
 * the arrays of the forward pass, the energy backward and, for the forces
 * modes, of schnet_forces.c.  Sizing and carving are one walk
 * (acts_layout), so the memory plan's byte count is the allocation's.
 *
 * A forward-only arena (evaluation, prediction) keeps what a forward with
 * no backward after it reads: block t reads only h[t] and its own arrays,
 * so the T blocks share one set of them and h alternates between two
 * buffers; no sigmoids (no_grad) and no backward scratch.  Water at 8
 * packs: 218 MB -> ~35 MB per evaluating core. */
#include "engine/model/schnet.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/model/schnet_internal.h"

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

/* Heads: head 0's q is a pair (forces come from head 0); y and dy per
 * graph or per atom; the readout's counts.  sig4 only where the forward
 * stores it (pt_schnet_sig_stored: NULL in an energy arena), but a
 * forward-only arena's aliases q (never written: pt_schnet_keep_sig). */
static void heads_layout(pt_schnet_acts *a, const pt_schnet_config *c, carver *cv, size_t pair)
{
    const size_t N = (size_t)a->cap_nodes, B = (size_t)a->cap_graphs;
    const size_t H2 = (size_t)c->hidden / 2, fs = sizeof(float), ds = sizeof(double);
    for (int k = 0; k < pt_schnet_head_count(c); k++) {
        pt_schnet_head_acts *h = &a->head[k];
        const size_t out = c->n_heads > 0 && c->heads[k].level == PT_HEAD_ATOM ? N : B;
        h->sig4 = pt_schnet_sig_stored(a) ? carve(cv, N * H2 * fs) : NULL;
        h->q = carve(cv, (k ? 1 : pair) * N * H2 * fs);
        if (a->forward_only) h->sig4 = h->q;
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
}

/* The forward-only rest (energy mode; see the file comment): h[t] in two
 * buffers, every block pointing at one set of arrays, the sigmoids aliasing
 * arrays of their shape (pt_schnet_keep_sig never hands them out: the
 * pointer arithmetic of the forward stays inside real arrays), no backward
 * scratch (NULL). */
static void forward_layout(pt_schnet_acts *a, const pt_schnet_config *c, carver *cv)
{
    const size_t N = (size_t)a->cap_nodes, E = (size_t)a->cap_edges;
    const size_t H = (size_t)c->hidden, F = (size_t)c->filters, fs = sizeof(float);
    float *h2[2];
    h2[0] = carve(cv, N * H * fs);
    h2[1] = carve(cv, N * H * fs);
    for (int t = 0; t <= c->interactions; t++) a->h[t] = h2[t & 1];
    pt_schnet_block_acts k = {0};
    k.s1 = carve(cv, E * F * fs);
    k.w = carve(cv, E * F * fs);
    k.p = k.w;
    k.sig1 = k.s1;
    k.x = carve(cv, N * F * fs);
    k.m = carve(cv, N * F * fs);
    k.u = carve(cv, N * H * fs);
    k.sig2 = k.u;
    for (int t = 0; t < c->interactions; t++) a->block[t] = k;
    heads_layout(a, c, cv, 1);
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
    a->row = a->own_row = carve(cv, E * sizeof(int32_t));
    a->first = a->own_first = carve(cv, E);
    a->row_last = a->own_row_last = carve(cv, E * sizeof(int32_t));
    a->snd_offset = carve(cv, (N + 1) * sizeof(int32_t));
    a->snd_edge = carve(cv, E * sizeof(int32_t));
    a->snd_close = carve(cv, (N + 1) * sizeof(int32_t));
    a->snd_rec = a->forward_only ? NULL : carve(cv, E * sizeof(pt_cfconv_sedge));
    a->row_rec = a->forward_only ? NULL : carve(cv, E * sizeof(pt_cfconv_redge));
    a->row_dist = a->own_row_dist = carve(cv, E * fs);
    a->e = carve(cv, pair * E * G * fs);
    a->cut = carve(cv, E * fs);
    if (forces) {
        /* shared row scratch: the forward's P and s1' (FORCES), the second
         * backward's [P̂; P̄] and [ŝ1; s̄1] (FORCES_TRAIN), and the energy
         * backward's dp and ds1 should it run on this arena */
        a->rows_a = carve(cv, pair * E * F * fs);
        a->rows_b = carve(cv, pair * E * F * fs);
    }
    if (a->forward_only) {
        forward_layout(a, c, cv);
        return;
    }
    const int sig = pt_schnet_sig_stored(a);
    for (int t = 0; t <= c->interactions; t++) a->h[t] = carve(cv, pair * N * H * fs);
    for (int t = 0; t < c->interactions; t++) {
        pt_schnet_block_acts *k = &a->block[t];
        /* σ1 and σ2 only where the forward stores them (the force passes:
         * pt_schnet_sig_stored); an energy arena has none (NULL), its
         * backward recovers σ from s1 and u */
        k->sig1 = sig ? carve(cv, E * F * fs) : NULL;
        k->s1 = carve(cv, pair * E * F * fs);
        k->w = carve(cv, E * F * fs);
        k->p = forces ? a->rows_a : k->w;
        k->x = carve(cv, N * F * fs);
        k->m = carve(cv, pair * N * F * fs);
        k->sig2 = sig ? carve(cv, N * H * fs) : NULL;
        k->u = carve(cv, pair * N * H * fs);
        if (!forces) continue;
        k->wd = carve(cv, E * F * fs);
        k->z2 = carve(cv, pair * N * H * fs);
        k->mbar = carve(cv, N * F * fs);
        k->xb = carve(cv, pair * N * F * fs);
        if (train) k->xdot = carve(cv, N * F * fs);
    }
    heads_layout(a, c, cv, pair);
    a->dh = carve(cv, N * H * fs);
    a->dm = carve(cv, N * F * fs);
    /* du lives in dx's memory: the block's backward is done with du before
     * the convolution's backward clears dx, and dx is then in cache (the
     * block above's dL1 products just read it), so du's stores find their
     * lines there instead of fetching a cold array for ownership */
    a->dx = carve(cv, N * (F > H ? F : H) * fs);
    a->du = a->dx;
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


static size_t layout_bytes(const pt_schnet_config *cfg, int32_t cap_nodes, int32_t cap_edges,
                           int32_t cap_graphs, pt_schnet_mode mode, int forward_only)
{
    pt_schnet_acts probe = {.cap_nodes = cap_nodes, .cap_edges = cap_edges,
                            .cap_graphs = cap_graphs, .mode = mode, .forward_only = forward_only};
    carver cv = {NULL, 0};
    acts_layout(&probe, cfg, &cv);
    return (cv.used + 63) & ~(size_t)63;
}

size_t pt_schnet_acts_bytes_mode(const pt_schnet_config *cfg, int32_t cap_nodes,
                                 int32_t cap_edges, int32_t cap_graphs, pt_schnet_mode mode)
{
    return layout_bytes(cfg, cap_nodes, cap_edges, cap_graphs, mode, 0);
}

size_t pt_schnet_acts_bytes(const pt_schnet_config *cfg, int32_t cap_nodes, int32_t cap_edges,
                            int32_t cap_graphs)
{
    return pt_schnet_acts_bytes_mode(cfg, cap_nodes, cap_edges, cap_graphs, PT_SCHNET_ENERGY);
}

size_t pt_schnet_acts_bytes_forward(const pt_schnet_config *cfg, int32_t cap_nodes,
                                    int32_t cap_edges, int32_t cap_graphs)
{
    return layout_bytes(cfg, cap_nodes, cap_edges, cap_graphs, PT_SCHNET_ENERGY, 1);
}

int pt_schnet_acts_init(pt_schnet_acts *a, const pt_schnet *m, int32_t cap_nodes,
                        int32_t cap_edges, int32_t cap_graphs, pt_errors *errs)
{
    return pt_schnet_acts_init_mode(a, m, cap_nodes, cap_edges, cap_graphs, PT_SCHNET_ENERGY,
                                    errs);
}

/* Arenas of 2 MB and more start on a 2 MB boundary, rounded up to whole
 * 2 MB pages, and ask for transparent huge pages (MADV_HUGEPAGE: this
 * kernel's default, "madvise", gives them only to regions that ask).  A
 * water step streams ~100 MB of filter rows per replica out and back in
 * (3 [rows,F] arrays per block); on 4 KB pages that is a TLB miss every
 * 4 KB, each a two-level page walk under a hypervisor.  The rounding adds
 * under 2 MB to the arena (not counted in a->bytes, the layout's size).
 * *huge is 1 when the kernel took the advice.  PACKTRAIN_HUGEPAGES=0 gives
 * the plain 64-byte aligned allocation instead (what bench/bench_scaling.sh
 * compares against; other values are the default).  The default stays on:
 * session 7, water, 14 interleaved pairs of packtrain bench (one thread and
 * two replicas, fp32 and bf16, load 3.5-7): a replica's thread CPU per step
 * was 0.3-1.8 ms (1-4%) lower with huge pages in 13, 0.1 ms higher in one;
 * bench_scaling (load 5.6-6.6) lower in fp32, within 1% either way in
 * bf16.  Session 6's one-thread softplus penalty went with σ1's
 * non-temporal stores (4d5d0eb). */
#define PT_ARENA_HUGE ((size_t)2 << 20)
static void *arena_alloc(size_t bytes, int32_t *huge)
{
    *huge = 0;
    const char *env = getenv("PACKTRAIN_HUGEPAGES");
    if (bytes < PT_ARENA_HUGE || (env && !strcmp(env, "0"))) return aligned_alloc(64, bytes);
    const size_t whole = (bytes + PT_ARENA_HUGE - 1) & ~(PT_ARENA_HUGE - 1);
    void *p = aligned_alloc(PT_ARENA_HUGE, whole);
#ifdef MADV_HUGEPAGE
    if (p) *huge = madvise(p, whole, MADV_HUGEPAGE) == 0;
#endif
    return p;
}

static int arena_init(pt_schnet_acts *a, const pt_schnet *m, int32_t cap_nodes,
                      int32_t cap_edges, int32_t cap_graphs, pt_schnet_mode mode,
                      int forward_only, pt_errors *errs)
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
    a->forward_only = forward_only;
    a->no_grad = forward_only;
    a->bytes = layout_bytes(&m->cfg, cap_nodes, cap_edges, cap_graphs, mode, forward_only);
    a->memory = arena_alloc(a->bytes, &a->huge_pages);
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

int pt_schnet_acts_init_mode(pt_schnet_acts *a, const pt_schnet *m, int32_t cap_nodes,
                             int32_t cap_edges, int32_t cap_graphs, pt_schnet_mode mode,
                             pt_errors *errs)
{
    return arena_init(a, m, cap_nodes, cap_edges, cap_graphs, mode, 0, errs);
}

int pt_schnet_acts_init_forward(pt_schnet_acts *a, const pt_schnet *m, int32_t cap_nodes,
                                int32_t cap_edges, int32_t cap_graphs, pt_errors *errs)
{
    return arena_init(a, m, cap_nodes, cap_edges, cap_graphs, PT_SCHNET_ENERGY, 1, errs);
}

void pt_schnet_acts_close(pt_schnet_acts *a)
{
    free(a->memory);
    memset(a, 0, sizeof(*a));
}

