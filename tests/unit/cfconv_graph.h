/* cfconv_graph.h — shared by the convolution's kernel tests
 * (test_cfconv_kernels.c, test_cfconv_senders.c, test_cfconv_bf16.c): the
 * CSR graph they run the kernels on, a batch-like way to build one (as
 * batches are, with every case the backward by senders tells apart), the
 * scalar reference in receiver order written with explicit fmaf (W as fp32;
 * the bf16 tests widen W̃ first, which is exact), and the tiny graph of
 * padding edges the empty-range tests use.  Header-only, static inline: a
 * file takes what it uses.  Include after <cmocka.h> and rand_fixture.h
 * (rnd_u, rnd_floats). */
#ifndef PT_TEST_CFCONV_GRAPH_H
#define PT_TEST_CFCONV_GRAPH_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/pack/edge_rows.h"
#include "engine/model/schnet_ops.h"

enum { MAXS = 8 }; /* nodes per structure */

/* receivers' edges in CSR (off), each edge's sender, receiver and W row
 * (−1: padding or at the cutoff), whether it is its row's first edge, the
 * rows' cutoff values; last and start only where graph_make built them */
typedef struct graph {
    int n, e, u, ns;           /* nodes, edges, rows, structures */
    int32_t *off, *src, *dst, *row, *last;
    uint8_t *first;
    float *cut;
    int32_t *start;            /* [ns + 1] structure node ranges */
} graph;

/* n nodes cut into structures of 1..MAXS; in each, every ordered pair is a
 * bond with probability 1/2 (both directions), a few cut on one side or at
 * the cutoff; some atoms have two edges to their own images; receivers in
 * ascending order, each receiver's edges by sender, then padding edges on
 * the batch's last node.  Rows numbered as edge_rows.h numbers them (the
 * reverse comes first when its receiver is the smaller). */
static inline void graph_make(graph *g, int n)
{
    g->n = n;
    const int cap = n * (MAXS + 2) + 8;
    g->off = malloc((size_t)(n + 1) * sizeof(int32_t));
    g->start = malloc((size_t)(n + 1) * sizeof(int32_t));
    g->src = malloc((size_t)cap * sizeof(int32_t));
    g->dst = malloc((size_t)cap * sizeof(int32_t));
    g->row = malloc((size_t)cap * sizeof(int32_t));
    g->last = malloc((size_t)cap * sizeof(int32_t));
    g->first = malloc((size_t)cap);
    assert_true(g->off && g->start && g->src && g->dst && g->row && g->last && g->first);
    /* bond[a][b] per structure: 0 none, 1 edge b←a with a row, 2 at the cutoff */
    static uint8_t bond[MAXS][MAXS];
    static int32_t made[MAXS][MAXS];   /* row of edge b←a once made, −1 none */
    int e = 0, u = 0, ns = 0;
    for (int s0 = 0; s0 < n;) {
        int sz = 1 + (int)(rnd_u() % MAXS);
        if (sz > n - s0) sz = n - s0;
        g->start[ns++] = s0;
        for (int a = 0; a < sz; a++)
            for (int b = 0; b < sz; b++) {
                made[a][b] = -1;
                bond[a][b] = 0;
            }
        for (int a = 0; a < sz; a++)
            for (int b = a + 1; b < sz; b++) {
                if (rnd_u() % 2) continue;
                const uint8_t kind = rnd_u() % 9 == 0 ? 2 : 1;
                bond[a][b] = bond[b][a] = kind;
                if (kind == 1 && rnd_u() % 7 == 0) {
                    /* one side cut: the other edge gets a row of its own */
                    if (rnd_u() % 2) bond[a][b] = 0;
                    else bond[b][a] = 0;
                }
            }
        for (int i = 0; i < sz; i++) {
            g->off[s0 + i] = e;
            const int images = (s0 + i) % 5 == 2;   /* i←i twice, one row */
            for (int j = 0; j < sz; j++) {
                if (j == i && images) {
                    for (int t = 0; t < 2; t++, e++) {
                        g->src[e] = g->dst[e] = s0 + i;
                        g->row[e] = t == 0 ? u : u - 1;
                        g->first[e] = t == 0;
                        if (t == 0) u++;
                    }
                    continue;
                }
                if (j == i || !bond[j][i]) continue;
                g->src[e] = s0 + j;
                g->dst[e] = s0 + i;
                if (bond[j][i] == 2) {
                    g->row[e] = -1;
                    g->first[e] = 0;
                } else if (j < i && made[i][j] >= 0) {
                    g->row[e] = made[i][j];   /* the reverse came first */
                    g->first[e] = 0;
                } else {
                    g->row[e] = made[j][i] = u++;
                    g->first[e] = 1;
                }
                e++;
            }
        }
        s0 += sz;
    }
    g->start[ns] = n;
    g->ns = ns;
    /* padding edges: from and to the last node, no row */
    for (int t = 0; t < 3; t++, e++) {
        g->src[e] = g->dst[e] = n - 1;
        g->row[e] = -1;
        g->first[e] = 0;
    }
    g->off[n] = e;
    g->e = e;
    g->u = u;
    pt_edge_rows_last(g->last, g->row, g->off, n);
    g->cut = rnd_floats((size_t)(u ? u : 1), 1.0f);
}

static inline void graph_close(graph *g)
{
    free(g->off), free(g->start), free(g->src), free(g->dst), free(g->row), free(g->last);
    free(g->first), free(g->cut);
}

/* each sender's edges with a row and close[] (pt_cfconv_senders), allocated */
static inline void graph_senders(const graph *g, int32_t **so, int32_t **se, int32_t **close)
{
    *so = malloc((size_t)(g->n + 1) * sizeof(int32_t));
    *se = malloc((size_t)(g->e ? g->e : 1) * sizeof(int32_t));
    *close = malloc((size_t)(g->n + 1) * sizeof(int32_t));
    assert_true(*so && *se && *close);
    pt_cfconv_senders(*so, *se, *close, g->row, g->src, g->dst, g->n, g->e);
}

/* The edges with a row by what the backward by senders does with their dP
 * row: the first edge writes it (alone) or combines both edges' products;
 * a later edge from a smaller sender only adds to dx (its row's first edge
 * comes later in sender order), from a larger one adds to dP. */
typedef struct graph_cases {
    int write, combine, dx_only, add;
} graph_cases;

/* A graph of n nodes as graph_make builds them has edges of every case
 * (checked: a comparison could not fail on a case that never occurs);
 * returns how many of each. */
static inline graph_cases graph_has_every_case(int n)
{
    graph g;
    graph_make(&g, n);
    graph_cases c = {0, 0, 0, 0};
    for (int k = 0; k < g.e; k++) {
        const int32_t u = g.row[k];
        if (u < 0) continue;
        if (g.first[k] && g.last[u] == g.dst[k]) c.write++;
        else if (g.first[k]) c.combine++;
        else if (g.src[k] < g.dst[k]) c.dx_only++;
        else c.add++;
    }
    assert_true(c.write > 0 && c.add > 0 && c.dx_only > 0 && c.combine > 0);
    graph_close(&g);
    return c;
}

/* ---- the scalar reference (receiver order) ------------------------------- */

static inline void poison(float *p, size_t n)
{
    memset(p, 0x7f, n * sizeof(float));
}

static inline void ref_forward(float *m, const float *w, const float *x, const graph *g, int f)
{
    for (int i = 0; i < g->n; i++)
        for (int c = 0; c < f; c++) {
            float acc = 0.0f;
            for (int32_t k = g->off[i]; k < g->off[i + 1]; k++)
                if (g->row[k] >= 0)
                    acc = fmaf(x[(size_t)g->src[k] * f + c], w[(size_t)g->row[k] * f + c], acc);
            m[(size_t)i * f + c] = acc;
        }
}

/* dP (first edge writes t·C, later ones fma(t, C, dP)), dx += dm ⊙ W */
static inline void ref_backward(float *dx, float *dp, const float *dm, const float *x,
                                const float *w, const graph *g, int f, int32_t ring)
{
    for (int i = 0; i < g->n; i++)
        for (int32_t k = g->off[i]; k < g->off[i + 1]; k++) {
            const int32_t u = g->row[k];
            if (u < 0) continue;
            const size_t j = (size_t)g->src[k] * f, pu = (size_t)(ring > 0 ? u % ring : u) * f;
            for (int c = 0; c < f; c++) {
                const float t = dm[(size_t)i * f + c] * x[j + c];
                dp[pu + c] = g->first[k] ? t * g->cut[u] : fmaf(t, g->cut[u], dp[pu + c]);
                dx[j + c] = fmaf(dm[(size_t)i * f + c], w[(size_t)u * f + c], dx[j + c]);
            }
        }
}

/* A backward comparison's start: dx from dx0 on both sides (the kernels
 * add to it), dP poisoned on both (rows no edge writes stay poisoned in
 * both), then the reference into dx_ref and dp_ref. */
static inline void ref_backward_from(float *dx_ref, float *dp_ref, float *dx, float *dp,
                                     const float *dx0, const float *dm, const float *x,
                                     const float *w, const graph *g, int f, int32_t ring)
{
    const size_t nf = (size_t)g->n * f, uf = (size_t)(g->u ? g->u : 1) * f;
    memcpy(dx_ref, dx0, nf * sizeof(float));
    memcpy(dx, dx0, nf * sizeof(float));
    poison(dp_ref, uf);
    poison(dp, uf);
    ref_backward(dx_ref, dp_ref, dm, x, w, g, f, ring);
}


/* ---- ranges with nothing to do ------------------------------------------- */

/* Three nodes: node 1 has two padding edges from itself (no row), nodes 0
 * and 2 none; with its last rows and sender lists (all empty). */
enum { PAD_F = 100, PAD_N = 3 };

typedef struct pad_graph {
    int32_t off[PAD_N + 1], src[2], dst[2], row[2], last[2], so[PAD_N + 1], se[2];
    int32_t close[PAD_N + 1];
    uint8_t first[2];
    float cut[1];
} pad_graph;

static inline void pad_graph_make(pad_graph *p)
{
    *p = (pad_graph){.off = {0, 0, 2, 2}, .src = {1, 1}, .dst = {1, 1}, .row = {-1, -1},
                     .first = {0, 0}, .cut = {1.0f}};
    pt_edge_rows_last(p->last, p->row, p->off, PAD_N);
    pt_cfconv_senders(p->so, p->se, p->close, p->row, p->src, p->dst, PAD_N, 2);
}

#endif
