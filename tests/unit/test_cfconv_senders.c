/* test_cfconv_senders.c — the convolution's passes that walk senders
 * (schnet_ops.h: pt_cfconv_senders, pt_cfconv_backward_senders,
 * pt_cfconv_backward2;
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
 *     against a brute-force scan of the boundaries no edge crosses;
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
#include "engine/model/edge_rows.h"
#include "engine/model/schnet_ops.h"

#define PT_TEST_SEED 0x5eedc0f5a11ce55ull
#include "tests/unit/rand_fixture.h"

/* ---- a batch-like graph ------------------------------------------------------ */

enum { MAXS = 8 };   /* nodes per structure */

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
 * the batch's last node. */
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

static void graph_close(graph *g)
{
    free(g->off), free(g->start), free(g->src), free(g->dst), free(g->row), free(g->last);
    free(g->first), free(g->cut);
}

/* ---- the scalar reference (receiver order) ---------------------------------- */

static void ref_backward(float *dx, float *dp, const float *dm, const float *x, const float *w,
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
                dx[j + c] = fmaf(dm[(size_t)i * f + c], w[(size_t)u * f + c], dx[j + c]);
            }
        }
}

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

static void poison(float *p, size_t n)
{
    memset(p, 0x7f, n * sizeof(float));
}

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
    int32_t *so = malloc((size_t)(n + 1) * sizeof(int32_t));
    int32_t *se = malloc((size_t)(g.e ? g.e : 1) * sizeof(int32_t));
    int32_t *close = malloc((size_t)(n + 1) * sizeof(int32_t));
    assert_true(so && se && close);
    pt_cfconv_senders(so, se, close, g.row, g.src, g.dst, n, g.e);
    check_lists(&g, so, se, close);
    const size_t nf = (size_t)n * f, uf = (size_t)(g.u ? g.u : 1) * f;
    float *x = rnd_floats(nf, 1.0f), *w = rnd_floats(uf, 1.0f), *dm = rnd_floats(nf, 1.0f);
    float *dx0 = rnd_floats(nf, 1.0f);
    float *dx_ref = rnd_floats(nf, 1.0f), *dx = rnd_floats(nf, 1.0f);
    float *dp_ref = rnd_floats(uf, 1.0f), *dp = rnd_floats(uf, 1.0f);
    for (size_t ii = 0; ii < sizeof impls / sizeof impls[0]; ii++) {
        pt_cfconv_force(impls[ii]);
        for (int mode = 0; mode < 3; mode++) {
            const int32_t ring = mode == 2 ? 64 : 0;
            memcpy(dx_ref, dx0, nf * sizeof(float));
            memcpy(dx, dx0, nf * sizeof(float));
            poison(dp_ref, uf);
            poison(dp, uf);
            ref_backward(dx_ref, dp_ref, dm, x, w, &g, f, ring);
            if (mode == 0)
                pt_cfconv_backward_senders(dx, dp, dm, x, w, g.cut, g.row, g.first, g.last,
                                           g.src, g.dst, g.off, so, se, 0, n, f, ring);
            else
                for (int s = 0; s < g.ns; s++)
                    pt_cfconv_backward_senders(dx, dp, dm, x, w, g.cut, g.row, g.first,
                                               g.last, g.src, g.dst, g.off, so, se,
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
    free(so), free(se), free(close), free(x), free(w), free(dm), free(dx0);
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
 * only with the smaller edge id (so a row's other edge, "stash" below:
 * dx only in the backward, its products stashed in the second backward,
 * and the combining first edge are exercised: a check that could not fail
 * otherwise). */
static void test_graph_has_every_case(void **state)
{
    (void)state;
    graph g;
    graph_make(&g, 61);
    int write = 0, add = 0, stash = 0, combine = 0;
    for (int k = 0; k < g.e; k++) {
        const int32_t u = g.row[k];
        if (u < 0) continue;
        if (g.first[k] && g.last[u] == g.dst[k]) write++;
        else if (g.first[k]) combine++;
        else if (g.src[k] < g.dst[k]) stash++;
        else add++;
    }
    assert_true(write > 0 && add > 0 && stash > 0 && combine > 0);
    assert_int_equal(stash, combine);
    graph_close(&g);
}

/* An empty range writes nothing; a range whose edges are all padding (or
 * at the cutoff) leaves dx and dP as they were. */
static void test_empty_and_padding(void **state)
{
    (void)state;
    enum { F = 100, N = 3 };
    const int32_t off[N + 1] = {0, 0, 2, 2}, src[2] = {1, 1}, dst[2] = {1, 1};
    const int32_t row[2] = {-1, -1};
    const uint8_t first[2] = {0, 0};
    int32_t last[2], so[N + 1], se[2], close[N + 1];
    const float cut[1] = {1.0f};
    float *x = rnd_floats(N * F, 1.0f), *w = rnd_floats(F, 1.0f), *dm = rnd_floats(N * F, 1.0f);
    float dx[N * F], dp[F];
    pt_edge_rows_last(last, row, off, N);
    pt_cfconv_senders(so, se, close, row, src, dst, N, 2);
    for (int b = 0; b <= N; b++) assert_int_equal(close[b], b);
    for (int j = 0; j <= N; j++) assert_int_equal(so[j], 0);
    for (size_t ii = 0; ii < sizeof impls / sizeof impls[0]; ii++) {
        pt_cfconv_force(impls[ii]);
        poison(dx, N * F);
        poison(dp, F);
        pt_cfconv_backward_senders(dx, dp, dm, x, w, cut, row, first, last, src, dst, off,
                                   so, se, 1, 1, F, 0);
        pt_cfconv_backward_senders(dx, dp, dm, x, w, cut, row, first, last, src, dst, off,
                                   so, se, 2, 1, F, 0);
        pt_cfconv_backward_senders(dx, dp, dm, x, w, cut, row, first, last, src, dst, off,
                                   so, se, 0, N, F, 0);
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
        cmocka_unit_test(test_empty_and_padding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
