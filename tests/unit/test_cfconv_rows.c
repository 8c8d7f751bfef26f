/* test_cfconv_rows.c — the convolution's backward by rows (schnet_ops.h:
 * pt_cfconv_row_edges, pt_cfconv_backward_rows; engine/model/cfconv_body.h's
 * rows_panel, cfconv_kernels.c's generic loop) for every implementation
 * (generic, AVX2, AVX-512 and the policy, forced with pt_cfconv_force):
 *   - bit for bit against a scalar reference written here from the graph
 *     itself (rows ascending; a row's edges in receiver order, the first
 *     dx_j = fma(dm_i, W_u, dx_j), P = (dm_i·x_j)·C_u, each later one
 *     dx_s = fma(dm_r, W_u, dx_s), P = fma(dm_r·x_s, C_u, P)), on graphs
 *     built as batches are (cfconv_graph.h: two-sided bonds, one-sided rows,
 *     an atom's two images on one row, rows at the cutoff, padding), dx
 *     added to (not zeroed);
 *   - one call over all rows and calls over chunks of 1, 7 and 64 rows with
 *     dP in a chunk's scratch (row u at u − r0): the same bits;
 *   - the same calls on P with pc (W_u = P_u · C_u formed by the kernel, as
 *     the forward with wcut leaves W's memory): the bits of the calls on
 *     W = P ⊙ C rounded by the scalar loop (a kernel ignoring pc, or
 *     applying C twice, fails);
 *   - against receiver order (cfconv_graph.h's ref_backward, the kernels'
 *     bits before the walk by rows): dP bit for bit, dx within the bound of
 *     reordering a sum of n terms each rounded once, 2·γ(n)·Σ|dm ⊙ W|;
 *   - widths: one to eight whole vectors of 8 and 16 lanes, masked and
 *     4-lane tails, several panels, the model's 100 and 25;
 *   - the entries (receiver, sender, cutoff, part) against the graph, every
 *     part present; an atom's lone image (ONE_SELF); a row of three edges
 *     refused; an empty range writes nothing.
 * On a CPU without AVX-512 (or AVX2) forcing it falls back to the policy,
 * which the same comparisons then check, so no check is skipped. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/cfconv_kernels.h"
#include "engine/model/schnet_ops.h"

#define PT_TEST_SEED 0x0dd5eed5c0ffee11ull
#include "tests/unit/rand_fixture.h"
#include "tests/unit/cfconv_graph.h"
#include "tests/unit/sum_order_bound.h"

static const pt_cfconv_impl impls[] = {PT_CFCONV_GENERIC, PT_CFCONV_AVX2, PT_CFCONV_AVX512,
                                       PT_CFCONV_AUTO};
enum { NIMPL = sizeof impls / sizeof impls[0] };

/* The reference: rows ascending, each row's edges in receiver order. */
static void ref_rows(float *dx, float *dp, const float *dm, const float *x, const float *w,
                     const graph *g, int f)
{
    for (int32_t u = 0; u < g->u; u++)
        for (int i = 0; i < g->n; i++)
            for (int32_t k = g->off[i]; k < g->off[i + 1]; k++) {
                if (g->row[k] != u) continue;
                const size_t r = (size_t)i * f, s = (size_t)g->src[k] * f, uf = (size_t)u * f;
                const float cu = g->cut[u];
                for (int c = 0; c < f; c++) {
                    dx[s + c] = fmaf(dm[r + c], w[uf + c], dx[s + c]);
                    const float t = dm[r + c] * x[s + c];
                    dp[uf + c] = g->first[k] ? t * cu : fmaf(t, cu, dp[uf + c]);
                }
            }
}

/* Entries against the graph: the first edge's receiver and sender, the
 * cutoff, and the part from the row's other edge (its reverse or none). */
static void check_entries(const graph *g, const pt_cfconv_redge *re, int *seen)
{
    for (int i = 0; i < g->n; i++)
        for (int32_t k = g->off[i]; k < g->off[i + 1]; k++) {
            const int32_t u = g->row[k];
            if (u < 0 || !g->first[k]) continue;
            int others = 0;
            for (int32_t q = 0; q < g->e; q++)
                if (g->row[q] == u && q != k) {
                    assert_int_equal(g->dst[q], g->src[k]);
                    assert_int_equal(g->src[q], i);
                    others++;
                }
            assert_true(others <= 1);
            assert_int_equal(re[u].i, i);
            assert_int_equal(re[u].j, g->src[k]);
            assert_memory_equal(&re[u].cut, &g->cut[u], sizeof(float));
            const uint32_t want = (g->src[k] == i ? PT_REDGE_ONE_SELF : PT_REDGE_ONE) |
                                  (others ? PT_REDGE_BOTH : 0);
            assert_int_equal(re[u].part, want);
            seen[want]++;
        }
}

/* chunk 0: one call over all rows; else calls of `chunk` rows, dP into a
 * scratch of that many rows, copied out to row u (the pipeline's use); pc:
 * w holds P */
static void run_rows(float *dx, float *dp, const float *dm, const float *x, const float *w,
                     int pc, const pt_cfconv_redge *re, int u_rows, int f, int chunk)
{
    if (chunk == 0) {
        pt_cfconv_backward_rows(dx, dp, dm, x, w, pc, re, 0, u_rows, f);
        return;
    }
    float *scratch = malloc((size_t)chunk * f * sizeof(float));
    assert_non_null(scratch);
    for (int r0 = 0; r0 < u_rows; r0 += chunk) {
        const int n = u_rows - r0 < chunk ? u_rows - r0 : chunk;
        poison(scratch, (size_t)chunk * f);
        pt_cfconv_backward_rows(dx, scratch, dm, x, w, pc, re, r0, r0 + n, f);
        memcpy(dp + (size_t)r0 * f, scratch, (size_t)n * f * sizeof(float));
        /* nothing past the chunk's rows */
        for (size_t o = (size_t)n * f; o < (size_t)chunk * f; o++)
            assert_int_equal(((uint32_t *)scratch)[o], 0x7f7f7f7fu);
    }
    free(scratch);
}

/* dx from 0 by rows against receiver order (cfconv_graph.h's
 * ref_backward): within sum_order_bound.h's bound; returns how many
 * elements differ. */
static int check_reorder_bound(const float *dx_rows, const float *dm, const float *w,
                               const graph *g, int f)
{
    const size_t nf = (size_t)g->n * f, uf = (size_t)(g->u ? g->u : 1) * f;
    float *dx_recv = calloc(nf, sizeof(float)), *dp = malloc(uf * sizeof(float));
    assert_true(dx_recv && dp);
    float *x = rnd_floats(nf, 1.0f);   /* dP unused here */
    ref_backward(dx_recv, dp, dm, x, w, g, f, 0);
    int moved;
    sum_order_check(dx_rows, dx_recv, dm, w, g->off, g->src, g->row, g->n, f, &moved);
    free(dx_recv), free(dp), free(x);
    return moved;
}

static void check_width(int n, int f)
{
    graph g;
    graph_make(&g, n);
    pt_cfconv_redge *re = malloc((size_t)(g.u ? g.u : 1) * sizeof *re);
    assert_non_null(re);
    assert_int_equal(pt_cfconv_row_edges(re, g.row, g.first, g.src, g.off, g.cut, n), 1);
    int seen[4] = {0, 0, 0, 0};
    check_entries(&g, re, seen);
    assert_true(seen[PT_REDGE_ONE] > 0 && seen[PT_REDGE_BOTH] > 0 &&
                seen[PT_REDGE_BOTH_SELF] > 0);
    const size_t nf = (size_t)n * f, uf = (size_t)(g.u ? g.u : 1) * f;
    /* P, and W = P ⊙ C as the cutoff pass rounds it */
    float *x = rnd_floats(nf, 1.0f), *p = rnd_floats(uf, 1.0f), *dm = rnd_floats(nf, 1.0f);
    float *w = malloc(uf * sizeof(float));
    assert_non_null(w);
    for (int32_t u = 0; u < g.u; u++)
        for (int c = 0; c < f; c++) w[(size_t)u * f + c] = p[(size_t)u * f + c] * g.cut[u];
    float *dx0 = rnd_floats(nf, 1.0f), *dx_ref = malloc(nf * sizeof(float));
    float *dx = malloc(nf * sizeof(float)), *dp_ref = malloc(uf * sizeof(float));
    float *dp = malloc(uf * sizeof(float));
    assert_true(dx_ref && dx && dp_ref && dp);
    memcpy(dx_ref, dx0, nf * sizeof(float));
    poison(dp_ref, uf);
    ref_rows(dx_ref, dp_ref, dm, x, w, &g, f);
    /* dP as receiver order forms it, bit for bit */
    float *dx_recv = calloc(nf, sizeof(float)), *dp_recv = malloc(uf * sizeof(float));
    assert_true(dx_recv && dp_recv);
    poison(dp_recv, uf);
    ref_backward(dx_recv, dp_recv, dm, x, w, &g, f, 0);
    assert_memory_equal(dp_recv, dp_ref, uf * sizeof(float));
    static const int chunks[] = {0, 1, 7, 64};
    for (int ii = 0; ii < NIMPL; ii++) {
        pt_cfconv_force(impls[ii]);
        for (size_t c = 0; c < 2 * sizeof chunks / sizeof chunks[0]; c++) {
            const int pc = (int)(c & 1), chunk = chunks[c / 2];
            memcpy(dx, dx0, nf * sizeof(float));
            poison(dp, uf);
            run_rows(dx, dp, dm, x, pc ? p : w, pc, re, g.u, f, chunk);
            if (memcmp(dx, dx_ref, nf * sizeof(float)))
                fail_msg("dx %s f=%d chunk=%d pc=%d differs", pt_cfconv_impl_name(impls[ii]), f,
                         chunk, pc);
            if (memcmp(dp, dp_ref, uf * sizeof(float)))
                fail_msg("dP %s f=%d chunk=%d pc=%d differs", pt_cfconv_impl_name(impls[ii]), f,
                         chunk, pc);
        }
        /* from 0, against receiver order's sums */
        memset(dx, 0, nf * sizeof(float));
        pt_cfconv_backward_rows(dx, dp, dm, x, w, 0, re, 0, g.u, f);
        check_reorder_bound(dx, dm, w, &g, f);
    }
    pt_cfconv_force(PT_CFCONV_AUTO);
    free(re), free(x), free(p), free(w), free(dm), free(dx0), free(dx_ref), free(dx);
    free(dp_ref), free(dp), free(dx_recv), free(dp_recv);
    graph_close(&g);
}

/* Whole vectors of 8 and 16 lanes (one to eight), masked tails, 4-lane
 * tails (loaded and stored as one xmm), the model's 25 and 100, and rows
 * of several panels (fewer nodes: the reference is quadratic). */
static void test_widths(void **state)
{
    (void)state;
    static const int fs[] = {8,  16, 24, 32, 40, 48, 56, 64,  80,  96,  112, 128, 1,   3,
                             4,  5,  7,  12, 15, 17, 20, 25,  31,  36,  52,  68,  100, 116,
                             129, 132, 136, 200, 256, 260, 300};
    for (size_t t = 0; t < sizeof fs / sizeof fs[0]; t++) check_width(fs[t] > 128 ? 40 : 60, fs[t]);
}

/* Sums from 0 really reorder on these graphs (one-sided rows), within the
 * bound; on a graph without them no bit moves. */
static void test_reorder_moves_bits(void **state)
{
    (void)state;
    const int n = 200, f = 100;
    graph g;
    graph_make(&g, n);
    pt_cfconv_redge *re = malloc((size_t)g.u * sizeof *re);
    assert_non_null(re);
    assert_int_equal(pt_cfconv_row_edges(re, g.row, g.first, g.src, g.off, g.cut, n), 1);
    const size_t nf = (size_t)n * f, uf = (size_t)g.u * f;
    float *x = rnd_floats(nf, 1.0f), *w = rnd_floats(uf, 1.0f), *dm = rnd_floats(nf, 1.0f);
    float *dx = calloc(nf, sizeof(float)), *dp = malloc(uf * sizeof(float));
    assert_true(dx && dp);
    pt_cfconv_backward_rows(dx, dp, dm, x, w, 0, re, 0, g.u, f);
    const int moved = check_reorder_bound(dx, dm, w, &g, f);
    print_message("%d of %zu dx elements moved by the row order\n", moved, nf);
    assert_true(moved > 0);
    free(re), free(x), free(w), free(dm), free(dx), free(dp);
    graph_close(&g);
}

/* Four nodes: 0←1 with its reverse 1←0 (BOTH), 2←2 alone (an atom's
 * image without its reverse: ONE_SELF), 3←2 alone (ONE); then the same
 * with a second 1←0 on the row (three edges): refused. */
static void test_small_graphs(void **state)
{
    (void)state;
    int32_t off[5] = {0, 1, 2, 3, 4}, src[4] = {1, 0, 2, 2}, row[4] = {0, 0, 1, 2};
    uint8_t first[4] = {1, 0, 1, 1};
    float cut[3] = {0.5f, 0.25f, 0.75f};
    pt_cfconv_redge re[3];
    assert_int_equal(pt_cfconv_row_edges(re, row, first, src, off, cut, 4), 1);
    assert_int_equal(re[0].part, PT_REDGE_BOTH);
    assert_int_equal(re[1].part, PT_REDGE_ONE_SELF);
    assert_int_equal(re[2].part, PT_REDGE_ONE);
    const int f = 20;
    float *x = rnd_floats(4 * f, 1.0f), *w = rnd_floats(3 * f, 1.0f), *dm = rnd_floats(4 * f, 1.0f);
    float dx_ref[4 * 20], dp_ref[3 * 20], dx[4 * 20], dp[3 * 20];
    graph g = {.n = 4, .e = 4, .u = 3, .off = off, .src = src, .row = row, .first = first,
               .cut = cut};
    memset(dx_ref, 0, sizeof dx_ref);
    ref_rows(dx_ref, dp_ref, dm, x, w, &g, f);
    for (int ii = 0; ii < NIMPL; ii++) {
        pt_cfconv_force(impls[ii]);
        memset(dx, 0, sizeof dx);
        poison(dp, 3 * f);
        pt_cfconv_backward_rows(dx, dp, dm, x, w, 0, re, 0, 3, f);
        assert_memory_equal(dx, dx_ref, sizeof dx);
        assert_memory_equal(dp, dp_ref, sizeof dp);
        /* an empty range writes nothing */
        poison(dx, 4 * f);
        poison(dp, 3 * f);
        pt_cfconv_backward_rows(dx, dp, dm, x, w, 1, re, 2, 2, f);
        for (int c = 0; c < 4 * f; c++) assert_int_equal(((uint32_t *)dx)[c], 0x7f7f7f7fu);
        for (int c = 0; c < 3 * f; c++) assert_int_equal(((uint32_t *)dp)[c], 0x7f7f7f7fu);
    }
    pt_cfconv_force(PT_CFCONV_AUTO);
    /* a duplicate of 1←0 on row 0: three edges, for the walk by senders */
    int32_t off3[5] = {0, 1, 3, 4, 5}, src3[5] = {1, 0, 0, 2, 2}, row3[5] = {0, 0, 0, 1, 2};
    uint8_t first3[5] = {1, 0, 0, 1, 1};
    assert_int_equal(pt_cfconv_row_edges(re, row3, first3, src3, off3, cut, 4), 0);
    /* a later edge of a row that is not the first's reverse: refused too */
    int32_t src4[4] = {1, 2, 2, 2};
    assert_int_equal(pt_cfconv_row_edges(re, row, first, src4, off, cut, 4), 0);
    free(x), free(w), free(dm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_widths),
        cmocka_unit_test(test_reorder_moves_bits),
        cmocka_unit_test(test_small_graphs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
