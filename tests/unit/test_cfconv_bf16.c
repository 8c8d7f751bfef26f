/* test_cfconv_bf16.c — the convolution with W as bf16 rows
 * (engine/model/cfconv_bf16.h: the AVX-512 kernels of cfconv_bf16_avx512.c
 * and the scalar loops of cfconv_bf16.c, forced with pt_cfconv_force)
 * against a scalar reference in receiver order written here with explicit
 * fmaf on W̃ widened to fp32, bit for bit:
 *   - graphs built as batches are (test_cfconv_senders.c's kind):
 *     structures of a few nodes, each bond two edges on one row numbered as
 *     edge_rows.h numbers them, bonds cut on one side (a lone row), bonds at
 *     the cutoff (row −1), an atom's two edges to its own images on one row,
 *     padding edges, nodes without edges — so the backward's four dP parts
 *     (write, combine, add, dx only) all occur (checked);
 *   - W̃ with bf16 values of every kind the model makes: random, and
 *     zeros, subnormal halfs, ±huge (widened exactly, not flushed);
 *   - widths: whole vectors, masked tails (every tail length), the model's
 *     100 and 25, 128 (8 zmm, the most the kernels take) and past it (the
 *     scalar loops run: pt_cfconv_bf16_vector says which);
 *   - the forward over the whole batch and in consecutive receiver ranges
 *     (schnet_edges.c's pipeline), m written over poison, receivers without
 *     edges 0; the backward over the batch and per structure, dP ring on
 *     and off, dx added to; an empty range writes nothing.
 * The pipeline's use (filter product storing bf16 W, these kernels in
 * chunks) is test_schnet_edges.c's and test_schnet_filter.c's. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/cfconv_bf16.h"
#include "engine/model/cfconv_kernels.h"
#include "engine/model/edge_rows.h"
#include "engine/model/schnet_ops.h"

#define PT_TEST_SEED 0xbf16c0f5a11ce55ull
#include "tests/unit/rand_fixture.h"

enum { MAXS = 8 }; /* nodes per structure */

typedef struct graph {
    int n, e, u, ns;
    int32_t *off, *src, *dst, *row, *last, *start;
    uint8_t *first;
    float *cut;
} graph;

/* As test_cfconv_senders.c builds them: structures of 1..MAXS nodes, each
 * ordered pair bonded with probability 1/2 (both ways, one row; 1 in 7 cut
 * on one side, 1 in 9 at the cutoff), some atoms with two edges to their
 * own images, then three padding edges on the last node. */
static void graph_make(graph *g, int n)
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
    static uint8_t bond[MAXS][MAXS];
    static int32_t made[MAXS][MAXS];
    int e = 0, u = 0, ns = 0;
    for (int s0 = 0; s0 < n;) {
        int sz = 1 + (int)(rnd_u() % MAXS);
        if (sz > n - s0) sz = n - s0;
        g->start[ns++] = s0;
        for (int a = 0; a < sz; a++)
            for (int b = 0; b < sz; b++) made[a][b] = -1, bond[a][b] = 0;
        for (int a = 0; a < sz; a++)
            for (int b = a + 1; b < sz; b++) {
                if (rnd_u() % 2) continue;
                const uint8_t kind = rnd_u() % 9 == 0 ? 2 : 1;
                bond[a][b] = bond[b][a] = kind;
                if (kind == 1 && rnd_u() % 7 == 0) {
                    if (rnd_u() % 2) bond[a][b] = 0;
                    else bond[b][a] = 0;
                }
            }
        for (int i = 0; i < sz; i++) {
            g->off[s0 + i] = e;
            const int images = (s0 + i) % 5 == 2;
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
                    g->row[e] = made[i][j];
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

static void graph_close(graph *g)
{
    free(g->off), free(g->start), free(g->src), free(g->dst), free(g->row), free(g->last);
    free(g->first), free(g->cut);
}

/* W̃: random bf16 values, with zeros, subnormals, the largest finite and
 * the smallest normal sprinkled in (rows of f halfs) */
static pt_bf16 *rnd_w(size_t n)
{
    pt_bf16 *h = malloc((n ? n : 1) * sizeof(pt_bf16));
    assert_non_null(h);
    static const pt_bf16 special[] = {0x0000, 0x8000, 0x0001, 0x807f, 0x7f7f, 0xff7f, 0x0080};
    for (size_t i = 0; i < n; i++)
        h[i] = rnd_u() % 17 == 0 ? special[rnd_u() % (sizeof special / sizeof special[0])]
                                 : pt_bf16_from_float(rnd());
    return h;
}

static float widen(pt_bf16 h)
{
    const uint32_t b = (uint32_t)h << 16;
    float v;
    memcpy(&v, &b, sizeof v);
    return v;
}

/* ---- the scalar reference (receiver order) -------------------------------- */

static void ref_forward(float *m, const pt_bf16 *w, const float *x, const graph *g, int f)
{
    for (int i = 0; i < g->n; i++) {
        float *mi = m + (size_t)i * f;
        for (int c = 0; c < f; c++) mi[c] = 0.0f;
        for (int32_t k = g->off[i]; k < g->off[i + 1]; k++) {
            if (g->row[k] < 0) continue;
            for (int c = 0; c < f; c++)
                mi[c] = fmaf(x[(size_t)g->src[k] * f + c], widen(w[(size_t)g->row[k] * f + c]),
                             mi[c]);
        }
    }
}

/* dP (first edge writes t·C, later ones fma(t, C, dP)), dx += dm ⊙ W̃ */
static void ref_backward(float *dx, float *dp, const float *dm, const float *x, const pt_bf16 *w,
                         const graph *g, int f, int32_t ring)
{
    for (int i = 0; i < g->n; i++)
        for (int32_t k = g->off[i]; k < g->off[i + 1]; k++) {
            const int32_t u = g->row[k];
            if (u < 0) continue;
            const size_t j = (size_t)g->src[k] * f, pu = (size_t)(ring > 0 ? u % ring : u) * f;
            for (int c = 0; c < f; c++) {
                const float t = dm[(size_t)i * f + c] * x[j + c];
                dp[pu + c] = g->first[k] ? t * g->cut[u] : fmaf(t, g->cut[u], dp[pu + c]);
                dx[j + c] = fmaf(dm[(size_t)i * f + c], widen(w[(size_t)u * f + c]), dx[j + c]);
            }
        }
}

static const pt_cfconv_impl impls[] = {PT_CFCONV_GENERIC, PT_CFCONV_AVX512, PT_CFCONV_AUTO};

static void poison(float *p, size_t n) { memset(p, 0x7f, n * sizeof(float)); }

static void check_width(int n, int f)
{
    graph g;
    graph_make(&g, n);
    int32_t *so = malloc((size_t)(n + 1) * sizeof(int32_t));
    int32_t *se = malloc((size_t)(g.e ? g.e : 1) * sizeof(int32_t));
    int32_t *close = malloc((size_t)(n + 1) * sizeof(int32_t));
    assert_true(so && se && close);
    pt_cfconv_senders(so, se, close, g.row, g.src, g.dst, n, g.e);
    const size_t nf = (size_t)n * f, uf = (size_t)(g.u ? g.u : 1) * f;
    pt_bf16 *w = rnd_w(uf);
    float *x = rnd_floats(nf, 1.0f), *dm = rnd_floats(nf, 1.0f), *dx0 = rnd_floats(nf, 1.0f);
    float *m_ref = rnd_floats(nf, 1.0f), *m = rnd_floats(nf, 1.0f);
    float *dx_ref = rnd_floats(nf, 1.0f), *dx = rnd_floats(nf, 1.0f);
    float *dp_ref = rnd_floats(uf, 1.0f), *dp = rnd_floats(uf, 1.0f);
    ref_forward(m_ref, w, x, &g, f);
    for (size_t ii = 0; ii < sizeof impls / sizeof impls[0]; ii++) {
        pt_cfconv_force(impls[ii]);
        const int vector = pt_cfconv_bf16_vector(f);
        assert_int_equal(vector, impls[ii] != PT_CFCONV_GENERIC && f <= 128 &&
                                     pt_cfconv_supported(PT_CFCONV_AVX512) && pt_cpu_has_bf16());
        /* forward: one call, then consecutive ranges of 7 receivers */
        for (int split = 0; split <= 1; split++) {
            poison(m, nf);
            if (!split)
                pt_cfconv_bf16_forward_range(m, w, g.row, x, g.src, g.off, 0, n, f);
            else
                for (int i0 = 0; i0 < n; i0 += 7)
                    pt_cfconv_bf16_forward_range(m, w, g.row, x, g.src, g.off, i0,
                                                 i0 + 7 < n ? i0 + 7 : n, f);
            if (memcmp(m, m_ref, nf * sizeof(float)))
                fail_msg("m %s f=%d split=%d differs", pt_cfconv_impl_name(impls[ii]), f, split);
        }
        for (int mode = 0; mode < 3; mode++) {
            const int32_t ring = mode == 2 ? 64 : 0;
            memcpy(dx_ref, dx0, nf * sizeof(float));
            memcpy(dx, dx0, nf * sizeof(float));
            poison(dp_ref, uf);
            poison(dp, uf);
            ref_backward(dx_ref, dp_ref, dm, x, w, &g, f, ring);
            if (mode == 0)
                pt_cfconv_bf16_backward_senders(dx, dp, dm, x, w, g.cut, g.row, g.first, g.last,
                                                g.dst, so, se, 0, n, f, ring);
            else
                for (int s = 0; s < g.ns; s++)
                    pt_cfconv_bf16_backward_senders(dx, dp, dm, x, w, g.cut, g.row, g.first,
                                                    g.last, g.dst, so, se, g.start[s],
                                                    g.start[s + 1], f, ring);
            if (memcmp(dx, dx_ref, nf * sizeof(float)))
                fail_msg("dx %s f=%d mode=%d differs", pt_cfconv_impl_name(impls[ii]), f, mode);
            if (memcmp(dp, dp_ref, uf * sizeof(float)))
                fail_msg("dP %s f=%d mode=%d differs", pt_cfconv_impl_name(impls[ii]), f, mode);
        }
    }
    pt_cfconv_force(PT_CFCONV_AUTO);
    free(so), free(se), free(close), free(w), free(x), free(dm), free(dx0), free(m_ref), free(m);
    free(dx_ref), free(dx), free(dp_ref), free(dp);
    graph_close(&g);
}

static void test_widths_whole_vectors(void **state)
{
    (void)state;
    static const int fs[] = {16, 32, 48, 64, 80, 96, 112, 128};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) check_width(53, fs[i]);
}

static void test_widths_masked_tails(void **state)
{
    (void)state;
    /* every tail length 1..15, the model's 100 and 25, the largest masked */
    for (int f = 1; f < 16; f++) check_width(37, f);
    static const int fs[] = {100, 25, 17, 31, 63, 65, 127};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) check_width(61, fs[i]);
}

static void test_widths_past_the_kernels(void **state)
{
    (void)state;
    static const int fs[] = {129, 144, 200};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) check_width(29, fs[i]);
}

/* The graphs have every dP part the backward distinguishes (a check that
 * could not fail otherwise). */
static void test_graph_has_every_case(void **state)
{
    (void)state;
    graph g;
    graph_make(&g, 61);
    int write = 0, add = 0, dx_only = 0, combine = 0;
    for (int k = 0; k < g.e; k++) {
        const int32_t u = g.row[k];
        if (u < 0) continue;
        if (g.first[k] && g.last[u] == g.dst[k]) write++;
        else if (g.first[k]) combine++;
        else if (g.src[k] < g.dst[k]) dx_only++;
        else add++;
    }
    assert_true(write > 0 && add > 0 && dx_only > 0 && combine > 0);
    graph_close(&g);
}

/* Empty ranges write nothing; a range of padding edges only leaves dx and
 * dP, and writes m = 0. */
static void test_empty_and_padding(void **state)
{
    (void)state;
    enum { F = 100, N = 3 };
    const int32_t off[N + 1] = {0, 0, 2, 2}, src[2] = {1, 1}, dst[2] = {1, 1};
    const int32_t row[2] = {-1, -1};
    const uint8_t first[2] = {0, 0};
    int32_t last[2], so[N + 1], se[2], close[N + 1];
    const float cut[1] = {1.0f};
    float *x = rnd_floats(N * F, 1.0f), *dm = rnd_floats(N * F, 1.0f);
    pt_bf16 *w = rnd_w(F);
    float dx[N * F], dp[F], m[N * F];
    pt_edge_rows_last(last, row, off, N);
    pt_cfconv_senders(so, se, close, row, src, dst, N, 2);
    for (size_t ii = 0; ii < sizeof impls / sizeof impls[0]; ii++) {
        pt_cfconv_force(impls[ii]);
        poison(dx, N * F), poison(dp, F), poison(m, N * F);
        pt_cfconv_bf16_backward_senders(dx, dp, dm, x, w, cut, row, first, last, dst, so, se, 1,
                                        1, F, 0);
        pt_cfconv_bf16_backward_senders(dx, dp, dm, x, w, cut, row, first, last, dst, so, se, 2,
                                        1, F, 0);
        pt_cfconv_bf16_backward_senders(dx, dp, dm, x, w, cut, row, first, last, dst, so, se, 0,
                                        N, F, 0);
        pt_cfconv_bf16_forward_range(m, w, row, x, src, off, 2, 2, F);
        pt_cfconv_bf16_forward_range(m, w, row, x, src, off, 2, 1, F);
        for (int c = 0; c < N * F; c++) assert_true(dx[c] > 1e38f && m[c] > 1e38f);
        for (int c = 0; c < F; c++) assert_true(dp[c] > 1e38f);
        pt_cfconv_bf16_forward_range(m, w, row, x, src, off, 0, N, F);
        for (int c = 0; c < N * F; c++) assert_true(m[c] == 0.0f);
    }
    pt_cfconv_force(PT_CFCONV_AUTO);
    free(x), free(dm), free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_widths_whole_vectors),
        cmocka_unit_test(test_widths_masked_tails),
        cmocka_unit_test(test_widths_past_the_kernels),
        cmocka_unit_test(test_graph_has_every_case),
        cmocka_unit_test(test_empty_and_padding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
