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
 *     and off, dx added to; an empty range writes nothing;
 *   - the backward by rows (pt_cfconv_bf16_backward_rows, the model's walk
 *     since session 17) against the fp32 walk by rows on W̃ widened
 *     (pt_cfconv_backward_rows, pc = 0: its own bits and bound are
 *     test_cfconv_rows.c's), bit for bit, in one call and in chunks of 1, 7
 *     and 64 rows, dx added to.
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
#include "engine/pack/edge_rows.h"
#include "engine/model/schnet_ops.h"

#define PT_TEST_SEED 0xbf16c0f5a11ce55ull
#include "tests/unit/rand_fixture.h"
#include "tests/unit/cfconv_graph.h"

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

/* W̃ widened to fp32 for the reference (exact: bf16 is fp32's upper half) */
static float *widen_all(const pt_bf16 *h, size_t n)
{
    float *v = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(v);
    for (size_t i = 0; i < n; i++) v[i] = bits_float((uint32_t)h[i] << 16);
    return v;
}

static const pt_cfconv_impl impls[] = {PT_CFCONV_GENERIC, PT_CFCONV_AVX512, PT_CFCONV_AUTO};

static void check_width(int n, int f)
{
    graph g;
    graph_make(&g, n);
    int32_t *so, *se, *close;
    graph_senders(&g, &so, &se, &close);
    const size_t nf = (size_t)n * f, uf = (size_t)(g.u ? g.u : 1) * f;
    pt_bf16 *w = rnd_w(uf);
    float *wf = widen_all(w, uf);
    /* the lists' entries, made per ring below */
    pt_cfconv_sedge *sr = malloc((size_t)(g.e ? g.e : 1) * sizeof *sr);
    assert_non_null(sr);
    float *x = rnd_floats(nf, 1.0f), *dm = rnd_floats(nf, 1.0f), *dx0 = rnd_floats(nf, 1.0f);
    float *m_ref = rnd_floats(nf, 1.0f), *m = rnd_floats(nf, 1.0f);
    float *dx_ref = rnd_floats(nf, 1.0f), *dx = rnd_floats(nf, 1.0f);
    float *dp_ref = rnd_floats(uf, 1.0f), *dp = rnd_floats(uf, 1.0f);
    ref_forward(m_ref, wf, x, &g, f);
    /* the backward by rows' reference: the fp32 walk by rows (its generic
     * loop, test_cfconv_rows.c's subject) on W̃ widened, pc = 0, dx added
     * to dx0, every row's dP at its own row */
    pt_cfconv_redge *re = malloc((size_t)(g.u ? g.u : 1) * sizeof *re);
    float *dxr_ref = malloc(nf * sizeof(float)), *dpr_ref = malloc(uf * sizeof(float));
    assert_true(re && dxr_ref && dpr_ref);
    assert_int_equal(pt_cfconv_row_edges(re, g.row, g.first, g.src, g.off, g.cut, n), 1);
    memcpy(dxr_ref, dx0, nf * sizeof(float));
    poison(dpr_ref, uf);
    pt_cfconv_force(PT_CFCONV_GENERIC);
    pt_cfconv_backward_rows(dxr_ref, dpr_ref, dm, x, wf, 0, re, 0, g.u, f);
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
            pt_cfconv_sender_edges(sr, so, se, g.row, g.first, g.last, g.dst, g.cut, ring, n);
            ref_backward_from(dx_ref, dp_ref, dx, dp, dx0, dm, x, wf, &g, f, ring);
            if (mode == 0)
                pt_cfconv_bf16_backward_senders(dx, dp, dm, x, w, g.cut, g.row, g.first, g.last,
                                                g.dst, so, se, sr, 0, n, f, ring);
            else
                for (int s = 0; s < g.ns; s++)
                    pt_cfconv_bf16_backward_senders(dx, dp, dm, x, w, g.cut, g.row, g.first,
                                                    g.last, g.dst, so, se, sr, g.start[s],
                                                    g.start[s + 1], f, ring);
            if (memcmp(dx, dx_ref, nf * sizeof(float)))
                fail_msg("dx %s f=%d mode=%d differs", pt_cfconv_impl_name(impls[ii]), f, mode);
            if (memcmp(dp, dp_ref, uf * sizeof(float)))
                fail_msg("dP %s f=%d mode=%d differs", pt_cfconv_impl_name(impls[ii]), f, mode);
        }
        /* the backward by rows: one call, then chunks of 1, 7 and 64 rows,
         * each chunk's dP at its row u − r0 (the base moved by r0 here, so
         * every row lands at u) */
        static const int chunks[] = {0, 1, 7, 64};
        for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++) {
            const int step = chunks[ci] ? chunks[ci] : (g.u ? g.u : 1);
            memcpy(dx, dx0, nf * sizeof(float));
            poison(dp, uf);
            for (int r0 = 0; r0 < g.u; r0 += step)
                pt_cfconv_bf16_backward_rows(dx, dp + (size_t)r0 * f, dm, x, w, re, r0,
                                             r0 + step < g.u ? r0 + step : g.u, f);
            if (memcmp(dx, dxr_ref, nf * sizeof(float)))
                fail_msg("rows dx %s f=%d chunk=%d differs", pt_cfconv_impl_name(impls[ii]), f,
                         chunks[ci]);
            if (memcmp(dp, dpr_ref, uf * sizeof(float)))
                fail_msg("rows dP %s f=%d chunk=%d differs", pt_cfconv_impl_name(impls[ii]), f,
                         chunks[ci]);
        }
    }
    pt_cfconv_force(PT_CFCONV_AUTO);
    free(re), free(dxr_ref), free(dpr_ref);
    free(so), free(se), free(sr), free(close), free(w), free(wf), free(x), free(dm), free(dx0);
    free(m_ref), free(m), free(dx_ref), free(dx), free(dp_ref), free(dp);
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

/* a tail of exactly 4 lanes at every vector count (the model's 100 among
 * them): the fp32 rows' tail is loaded and stored as one xmm and W̃'s as 8
 * bytes (cfconv_bf16_avx512.c BLD / BST / BLDW), not through the mask */
static void test_widths_four_lane_tails(void **state)
{
    (void)state;
    static const int fs[] = {4, 20, 36, 52, 68, 84, 100, 116};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) check_width(41, fs[i]);
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
    graph_has_every_case(61);
}

/* Empty ranges write nothing (the walk by rows' too: its entries are not
 * read); a range of padding edges only leaves dx and dP, and writes m = 0. */
static void test_empty_and_padding(void **state)
{
    (void)state;
    enum { F = PAD_F, N = PAD_N };
    pad_graph p;
    pad_graph_make(&p);
    float *x = rnd_floats(N * F, 1.0f), *dm = rnd_floats(N * F, 1.0f);
    pt_bf16 *w = rnd_w(F);
    float dx[N * F], dp[F], m[N * F];
    pt_cfconv_sedge sr[2];
    pt_cfconv_sender_edges(sr, p.so, p.se, p.row, p.first, p.last, p.dst, p.cut, 0, N);
    for (size_t ii = 0; ii < sizeof impls / sizeof impls[0]; ii++) {
        pt_cfconv_force(impls[ii]);
        poison(dx, N * F), poison(dp, F), poison(m, N * F);
        pt_cfconv_bf16_backward_senders(dx, dp, dm, x, w, p.cut, p.row, p.first, p.last, p.dst,
                                        p.so, p.se, sr, 1, 1, F, 0);
        pt_cfconv_bf16_backward_senders(dx, dp, dm, x, w, p.cut, p.row, p.first, p.last, p.dst,
                                        p.so, p.se, sr, 2, 1, F, 0);
        pt_cfconv_bf16_backward_senders(dx, dp, dm, x, w, p.cut, p.row, p.first, p.last, p.dst,
                                        p.so, p.se, sr, 0, N, F, 0);
        pt_cfconv_bf16_backward_rows(dx, dp, dm, x, w, NULL, 1, 1, F);
        pt_cfconv_bf16_backward_rows(dx, dp, dm, x, w, NULL, 2, 1, F);
        pt_cfconv_bf16_forward_range(m, w, p.row, x, p.src, p.off, 2, 2, F);
        pt_cfconv_bf16_forward_range(m, w, p.row, x, p.src, p.off, 2, 1, F);
        for (int c = 0; c < N * F; c++) assert_true(dx[c] > 1e38f && m[c] > 1e38f);
        for (int c = 0; c < F; c++) assert_true(dp[c] > 1e38f);
        pt_cfconv_bf16_forward_range(m, w, p.row, x, p.src, p.off, 0, N, F);
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
        cmocka_unit_test(test_widths_four_lane_tails),
        cmocka_unit_test(test_widths_past_the_kernels),
        cmocka_unit_test(test_graph_has_every_case),
        cmocka_unit_test(test_empty_and_padding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
