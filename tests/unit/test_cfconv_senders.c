/* test_cfconv_senders.c — the convolution's passes that walk senders
 * (schnet_ops.h: pt_cfconv_senders, pt_cfconv_sender_edges,
 * pt_cfconv_backward_senders, pt_cfconv_backward2;
 * engine/model/cfconv_kernels.h) for every implementation (generic, AVX2,
 * AVX-512 and the policy, forced with pt_cfconv_force), bit for bit against
 * a scalar reference in receiver order written here with explicit fmaf:
 *   - graphs built as batches are: structures of a few nodes side by side,
 *     each bond as two edges sharing one row numbered as edge_rows.h numbers
 *     them (the reverse comes first when its receiver is the smaller),
 *     bonds cut on one side (a truncated neighbour list: a lone row), bonds
 *     at the cutoff (row −1 both ways), an atom's pairs of edges to its own
 *     images (i←i twice on one row), padding edges, nodes without edges;
 *   - the lists (each sender's edges with a row, ascending) and close[]
 *     against a brute-force scan of the boundaries no edge crosses, and
 *     the lists' edges as the backward reads them (row, receiver, cutoff,
 *     dP row with and without a ring, part) against the graph itself;
 *   - widths: one to eight whole vectors of 8 and 16 lanes, masked tails,
 *     several panels, the model's 100 and 25;
 *   - one call over the batch, one call per structure (closed ranges, as
 *     schnet_edges.c calls it) with the dP ring on and off, dx added to
 *     (not zeroed), and an empty range or one of padding edges only writes
 *     nothing;
 *   - the force passes' second backward pt_cfconv_backward2 (senders too),
 *     with ẋ and without, against its receiver-order reference.
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
#include "engine/pack/edge_rows.h"
#include "engine/model/schnet_ops.h"

#define PT_TEST_SEED 0x5eedc0f5a11ce55ull
#include "tests/unit/rand_fixture.h"
#include "tests/unit/cfconv_graph.h"

/* the force passes' second backward, receiver order, per element as
 * schnet_ops.h's pt_cfconv_backward2 forms it */
static void ref_backward2(float *dxh, float *ph, float *pb, const float *mh, const float *mb,
                          const float *x, const float *xd, const float *w, const float *wd,
                          const float *lam, const float *dcut, const graph *g, int f)
{
    memset(dxh, 0, (size_t)g->n * f * sizeof(float));
    for (int i = 0; i < g->n; i++)
        for (int32_t k = g->off[i]; k < g->off[i + 1]; k++) {
            const int32_t u = g->row[k];
            if (u < 0) continue;
            const size_t j = (size_t)g->src[k] * f, uf = (size_t)u * f, io = (size_t)i * f;
            const float l = lam[u], cu = g->cut[u], cd = dcut[u] * l;
            for (int c = 0; c < f; c++) {
                const float t = mb[io + c] * x[j + c];
                const float sv = xd ? fmaf(mh[io + c], x[j + c], xd[j + c] * mb[io + c])
                                    : mh[io + c] * x[j + c];
                const float vh = fmaf(sv, cu, t * cd);
                ph[uf + c] = g->first[k] ? vh : ph[uf + c] + vh;
                pb[uf + c] = g->first[k] ? t * cu : fmaf(t, cu, pb[uf + c]);
                dxh[j + c] = dxh[j + c] + fmaf(mh[io + c], w[uf + c], mb[io + c] * (wd[uf + c] * l));
            }
        }
}

static const pt_cfconv_impl impls[] = {PT_CFCONV_GENERIC, PT_CFCONV_AVX2, PT_CFCONV_AVX512,
                                       PT_CFCONV_AUTO};

/* ---- the lists -------------------------------------------------------------- */

static void check_lists(const graph *g, const int32_t *so, const int32_t *se,
                        const int32_t *close)
{
    int32_t real = 0;
    for (int k = 0; k < g->e; k++) real += g->row[k] >= 0;
    assert_int_equal(so[0], 0);
    assert_int_equal(so[g->n], real);
    for (int j = 0; j < g->n; j++)
        for (int32_t t = so[j]; t < so[j + 1]; t++) {
            assert_int_equal(g->src[se[t]], j);
            assert_true(g->row[se[t]] >= 0);
            if (t > so[j]) assert_true(se[t] > se[t - 1]);
        }
    /* close[b]: the first boundary at or after b that no edge with a row crosses */
    for (int b = 0; b <= g->n; b++) {
        int want = b;
        for (;; want++) {
            int crossed = 0;
            for (int k = 0; k < g->e && !crossed; k++) {
                const int lo = g->src[k] < g->dst[k] ? g->src[k] : g->dst[k];
                const int hi = g->src[k] < g->dst[k] ? g->dst[k] : g->src[k];
                crossed = g->row[k] >= 0 && lo < want && want <= hi;
            }
            if (!crossed) break;
        }
        assert_int_equal(close[b], want);
    }
    for (int s = 0; s <= g->ns; s++) assert_int_equal(close[g->start[s]], g->start[s]);
}

/* ---- the comparisons --------------------------------------------------------- */

/* Every implementation against the reference: one call over the batch
 * (ring off) and one call per structure (ring off and a ring of 64 rows,
 * more than a structure's rows, so only rows of different structures
 * share a slot, one after the other as in the reference). */
static void check_width(int n, int f)
{
    graph g;
    graph_make(&g, n);
    int32_t *so, *se, *close;
    graph_senders(&g, &so, &se, &close);
    check_lists(&g, so, se, close);
    pt_cfconv_sedge *sr = malloc((size_t)(g.e ? g.e : 1) * sizeof *sr);
    assert_non_null(sr);
    const size_t nf = (size_t)n * f, uf = (size_t)(g.u ? g.u : 1) * f;
    float *x = rnd_floats(nf, 1.0f), *w = rnd_floats(uf, 1.0f), *dm = rnd_floats(nf, 1.0f);
    float *dx0 = rnd_floats(nf, 1.0f);
    float *dx_ref = rnd_floats(nf, 1.0f), *dx = rnd_floats(nf, 1.0f);
    float *dp_ref = rnd_floats(uf, 1.0f), *dp = rnd_floats(uf, 1.0f);
    for (size_t ii = 0; ii < sizeof impls / sizeof impls[0]; ii++) {
        pt_cfconv_force(impls[ii]);
        for (int mode = 0; mode < 3; mode++) {
            const int32_t ring = mode == 2 ? 64 : 0;
            pt_cfconv_sender_edges(sr, so, se, g.row, g.first, g.last, g.dst, g.cut, ring, n);
            ref_backward_from(dx_ref, dp_ref, dx, dp, dx0, dm, x, w, &g, f, ring);
            if (mode == 0)
                pt_cfconv_backward_senders(dx, dp, dm, x, w, g.cut, g.row, g.first, g.last,
                                           g.src, g.dst, g.off, so, se, sr, 0, n, f, ring);
            else
                for (int s = 0; s < g.ns; s++)
                    pt_cfconv_backward_senders(dx, dp, dm, x, w, g.cut, g.row, g.first,
                                               g.last, g.src, g.dst, g.off, so, se, sr,
                                               g.start[s], g.start[s + 1], f, ring);
            if (memcmp(dx, dx_ref, nf * sizeof(float)))
                fail_msg("dx %s f=%d mode=%d differs", pt_cfconv_impl_name(impls[ii]), f, mode);
            /* rows never written stay poisoned in both */
            if (memcmp(dp, dp_ref, uf * sizeof(float)))
                fail_msg("dP %s f=%d mode=%d differs", pt_cfconv_impl_name(impls[ii]), f, mode);
        }
    }
    /* the second backward of the force passes, with ẋ and without */
    float *wd = rnd_floats(uf, 1.0f), *lam = rnd_floats(g.u ? (size_t)g.u : 1, 1.0f);
    float *dcut = rnd_floats(g.u ? (size_t)g.u : 1, 1.0f), *xd = rnd_floats(nf, 1.0f);
    float *mb = rnd_floats(nf, 1.0f), *pb_ref = rnd_floats(uf, 1.0f), *pb = rnd_floats(uf, 1.0f);
    for (size_t ii = 0; ii < sizeof impls / sizeof impls[0]; ii++) {
        pt_cfconv_force(impls[ii]);
        for (int with_xd = 0; with_xd <= 1; with_xd++) {
            poison(dp_ref, uf), poison(dp, uf), poison(pb_ref, uf), poison(pb, uf);
            poison(dx, nf);
            ref_backward2(dx_ref, dp_ref, pb_ref, dm, mb, x, with_xd ? xd : NULL, w, wd, lam, dcut,
                          &g, f);
            pt_cfconv_backward2(dx, dp, pb, dm, mb, x, with_xd ? xd : NULL, w, wd, lam, g.cut, dcut,
                                g.row, g.first, g.last, g.dst, so, se, n, f);
            if (memcmp(dx, dx_ref, nf * sizeof(float)) || memcmp(dp, dp_ref, uf * sizeof(float)) ||
                memcmp(pb, pb_ref, uf * sizeof(float)))
                fail_msg("backward2 %s f=%d xdot=%d differs", pt_cfconv_impl_name(impls[ii]), f,
                         with_xd);
        }
    }
    free(wd), free(lam), free(dcut), free(xd), free(mb), free(pb_ref), free(pb);
    pt_cfconv_force(PT_CFCONV_AUTO);
    free(so), free(se), free(sr), free(close), free(x), free(w), free(dm), free(dx0);
    free(dx_ref), free(dx), free(dp_ref), free(dp);
    graph_close(&g);
}

static void test_widths_whole_vectors(void **state)
{
    (void)state;
    static const int fs[] = {8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) check_width(53, fs[i]);
}

static void test_widths_masked_tails(void **state)
{
    (void)state;
    static const int fs[] = {100, 25, 1, 3, 7, 9, 15, 17, 63, 65, 127, 129};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) check_width(61, fs[i]);
}

static void test_widths_several_panels(void **state)
{
    (void)state;
    static const int fs[] = {144, 200, 256, 300, 515};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) check_width(29, fs[i]);
}

/* The visit order the kernels rely on holds on these graphs: every row's
 * first edge has a sender at least that of its other edge, the same sender
 * only with the smaller edge id (so a row's other edge, dx_only below:
 * dx only in the backward, its products stashed in the second backward,
 * and the combining first edge are exercised: a check that could not fail
 * otherwise). */
static void test_graph_has_every_case(void **state)
{
    (void)state;
    const graph_cases n = graph_has_every_case(61);
    assert_int_equal(n.dx_only, n.combine);
}

/* The lists' edges as the backward reads them (pt_cfconv_sender_edges)
 * against the graph read directly: each entry's row, receiver, cutoff and
 * dP row (with and without a ring) at its list position, and its part
 * from the row's edges themselves — first edge: write when every edge of
 * the row has its receiver (alone, or an atom's pair of images), else
 * combine; later edge: dx only from a smaller sender, else add — with
 * every part present. */
static void check_sender_edges(int n, int32_t ring)
{
    graph g;
    graph_make(&g, n);
    int32_t *so, *se, *close;
    graph_senders(&g, &so, &se, &close);
    pt_cfconv_sedge *sr = malloc((size_t)(g.e ? g.e : 1) * sizeof *sr);
    assert_non_null(sr);
    pt_cfconv_sender_edges(sr, so, se, g.row, g.first, g.last, g.dst, g.cut, ring, n);
    int seen[4] = {0, 0, 0, 0};
    for (int j = 0; j < n; j++)
        for (int32_t t = so[j]; t < so[j + 1]; t++) {
            const int32_t k = se[t], u = g.row[k], i = g.dst[k];
            assert_int_equal(sr[t].row, u);
            assert_int_equal(sr[t].dst, i);
            assert_true(sr[t].cut == g.cut[u]);
            assert_int_equal(sr[t].dp & ((1u << PT_SEDGE_ROW_BITS) - 1), ring ? u % ring : u);
            int alone = 1;
            for (int q = 0; q < g.e; q++) alone &= g.row[q] != u || g.dst[q] == i;
            const unsigned want = g.first[k] ? (alone ? PT_SEDGE_WRITE : PT_SEDGE_COMBINE)
                                             : (j < i ? PT_SEDGE_DX : PT_SEDGE_ADD);
            assert_int_equal(sr[t].dp >> PT_SEDGE_ROW_BITS, want);
            seen[want]++;
        }
    for (int c = 0; c < 4; c++)
        if (!seen[c]) fail_msg("no edge of part %d (n=%d)", c, n);
    free(so), free(se), free(close), free(sr);
    graph_close(&g);
}

static void test_sender_edges(void **state)
{
    (void)state;
    check_sender_edges(61, 0);
    check_sender_edges(61, 64);
    check_sender_edges(53, 7);
}

/* An empty range writes nothing; a range whose edges are all padding (or
 * at the cutoff) leaves dx and dP as they were. */
static void test_empty_and_padding(void **state)
{
    (void)state;
    enum { F = PAD_F, N = PAD_N };
    pad_graph p;
    pad_graph_make(&p);
    float *x = rnd_floats(N * F, 1.0f), *w = rnd_floats(F, 1.0f), *dm = rnd_floats(N * F, 1.0f);
    float dx[N * F], dp[F];
    pt_cfconv_sedge sr[2];
    pt_cfconv_sender_edges(sr, p.so, p.se, p.row, p.first, p.last, p.dst, p.cut, 0, N);
    for (int b = 0; b <= N; b++) assert_int_equal(p.close[b], b);
    for (int j = 0; j <= N; j++) assert_int_equal(p.so[j], 0);
    for (size_t ii = 0; ii < sizeof impls / sizeof impls[0]; ii++) {
        pt_cfconv_force(impls[ii]);
        poison(dx, N * F);
        poison(dp, F);
        pt_cfconv_backward_senders(dx, dp, dm, x, w, p.cut, p.row, p.first, p.last, p.src,
                                   p.dst, p.off, p.so, p.se, sr, 1, 1, F, 0);
        pt_cfconv_backward_senders(dx, dp, dm, x, w, p.cut, p.row, p.first, p.last, p.src,
                                   p.dst, p.off, p.so, p.se, sr, 2, 1, F, 0);
        pt_cfconv_backward_senders(dx, dp, dm, x, w, p.cut, p.row, p.first, p.last, p.src,
                                   p.dst, p.off, p.so, p.se, sr, 0, N, F, 0);
        for (int c = 0; c < N * F; c++) assert_true(dx[c] > 1e38f);
        for (int c = 0; c < F; c++) assert_true(dp[c] > 1e38f);
    }
    pt_cfconv_force(PT_CFCONV_AUTO);
    free(x), free(w), free(dm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_widths_whole_vectors),
        cmocka_unit_test(test_widths_masked_tails),
        cmocka_unit_test(test_widths_several_panels),
        cmocka_unit_test(test_graph_has_every_case),
        cmocka_unit_test(test_sender_edges),
        cmocka_unit_test(test_empty_and_padding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
