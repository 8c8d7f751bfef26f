/* test_cfconv_kernels.c — the continuous-filter convolution's
 * implementations (engine/model/cfconv_kernels.h: AVX-512, AVX2 + FMA, the
 * generic loops) against a scalar reference written here with explicit
 * fmaf, bit for bit:
 *   - forward m and backward dx, dP on random CSR graphs for every width
 *     class: one to eight whole vectors of 8 and 16 lanes, masked tails,
 *     several panels (f > 64 for AVX2, > 128 for AVX-512), the model's 100
 *     and 25, and tails of exactly 4 lanes (stored as one xmm, not masked);
 *   - the graphs have receivers without edges (m written 0 over poison),
 *     padding edges (row < 0: no message, no gradient), rows shared by
 *     several edges (first edge writes dP, later ones add), a sender
 *     repeated within one receiver and a self edge (periodic images: the
 *     same dx_j updated twice in a row), and the dP ring on and off;
 *   - the force passes' tangent pt_cfconv_tangent (ṁ in registers), with
 *     and without ẋ, and distance backward pt_cfconv_backward_dist (dm in
 *     registers, its dot product's order of additions), on the same graphs
 *     and widths;
 *   - the forward in ranges on P with the cutoff applied by every edge
 *     (wcut: the pipeline's fp32 path) against the reference on W = P ⊙ C
 *     rounded by the scalar loop, and P left as it was (nothing stored);
 *   - consecutive receiver ranges give the bits of one call (the pipeline
 *     of schnet_edges.c relies on it), an empty range writes nothing, and
 *     the whole-batch forms zero dx;
 *   - the policy, pt_cfconv_force, the names and the PACKTRAIN_CFCONV
 *     variable (in a child process: it is read once).
 * On a CPU without AVX-512 (or AVX2) forcing it must fall back to the
 * policy, which the same comparisons then check, so no check is skipped. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/model/cfconv_kernels.h"
#include "engine/model/schnet_ops.h"

#define PT_TEST_SEED 0x9e3779b97f4a7c15ull
#include "tests/unit/rand_fixture.h"
#include "tests/unit/cfconv_graph.h"

static float *floats(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    return p;
}

static void fill(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = rnd();
}

/* ---- a random graph with the features of real batches ------------------- */

/* n receivers; receiver 0 has no edges, receiver 1 has a sender twice and
 * an edge to itself, the last receivers only padding edges or none; about
 * half the edges reuse a row made by an earlier edge (a bond's reverse),
 * rows numbered in order of first use as edge_rows.h numbers them. */
static void graph_make_random(graph *g, int n)
{
    *g = (graph){.n = n};   /* no dst, last or structures: receiver order only */
    g->off = malloc((size_t)(n + 1) * sizeof(int32_t));
    const int cap = n * 12 + 8;
    g->src = malloc((size_t)cap * sizeof(int32_t));
    g->row = malloc((size_t)cap * sizeof(int32_t));
    g->first = malloc((size_t)cap);
    assert_true(g->off && g->src && g->row && g->first);
    int e = 0, u = 0;
    for (int i = 0; i < n; i++) {
        g->off[i] = e;
        int deg = i == 0 ? 0 : i == n - 1 ? 0 : i == n - 2 ? 2 : 1 + (int)(rnd_u() % 11);
        for (int d = 0; d < deg; d++, e++) {
            g->src[e] = i == 1 && d < 2 ? 3 : i == 1 && d == 2 ? 1 : (int32_t)(rnd_u() % n);
            if (i == n - 2 || rnd_u() % 13 == 0) {
                g->row[e] = -1;   /* padding edge: carries nothing */
                g->first[e] = 0;
            } else if (u > 0 && rnd_u() % 2 == 0) {
                /* a row made recently (within ~16 rows: a structure's span) */
                int back = 1 + (int)(rnd_u() % (u < 16 ? u : 16));
                g->row[e] = u - back;
                g->first[e] = 0;
            } else {
                g->row[e] = u++;
                g->first[e] = 1;
            }
        }
    }
    g->off[n] = e;
    g->e = e;
    g->u = u;
    g->cut = floats((size_t)u);
    for (int r = 0; r < u; r++) g->cut[r] = 0.5f + 0.5f * rnd();
}

/* ---- the scalar reference (forward and backward: cfconv_graph.h) ----------- */

/* the force passes' tangent, per element as schnet_ops.h's
 * pt_cfconv_tangent forms it: ṁ + fma(ẋ, W, x·(W'·λ)), or fma(x, W'·λ, ṁ) */
static void ref_tangent(float *m, const float *w, const float *wd, const float *lam,
                        const float *x, const float *xd, const graph *g, int f)
{
    for (int i = 0; i < g->n; i++)
        for (int c = 0; c < f; c++) {
            float acc = 0.0f;
            for (int32_t k = g->off[i]; k < g->off[i + 1]; k++) {
                const int32_t u = g->row[k];
                if (u < 0) continue;
                const size_t j = (size_t)g->src[k] * f + c, uc = (size_t)u * f + c;
                const float t = wd[uc] * lam[u];
                acc = xd ? acc + fmaf(xd[j], w[uc], x[j] * t) : fmaf(x[j], t, acc);
            }
            m[(size_t)i * f + c] = acc;
        }
}

/* the force passes' distance backward: dx_j += dm_i ⊙ W_u (fma), and g_u
 * += s with s formed as pt_cfconv_backward_dist forms it: 16 partials
 * fma(dm·x, W', p_l) over the whole 16-lane blocks, the rest in order from
 * 0 (of a rest of 8 or more the first 8 as s + (dm·x)·W', then fma), then
 * s += p_0 .. p_15 */
static void ref_backward_dist(float *dx, float *gr, const float *dm, const float *x,
                              const float *w, const float *wd, const graph *g, int f)
{
    const int nfull = f / 16, rest = f % 16;
    memset(dx, 0, (size_t)g->n * f * sizeof(float));
    for (int i = 0; i < g->n; i++)
        for (int32_t k = g->off[i]; k < g->off[i + 1]; k++) {
            const int32_t u = g->row[k];
            if (u < 0) continue;
            const float *d = dm + (size_t)i * f, *xj = x + (size_t)g->src[k] * f;
            const float *wu = w + (size_t)u * f, *wdu = wd + (size_t)u * f;
            float *dxj = dx + (size_t)g->src[k] * f, p[16] = {0}, s = 0.0f;
            for (int c = 0; c < 16 * nfull; c++) p[c % 16] = fmaf(d[c] * xj[c], wdu[c], p[c % 16]);
            for (int c = 16 * nfull; c < f; c++)
                s = rest >= 8 && c < 16 * nfull + 8 ? s + d[c] * xj[c] * wdu[c]
                                                     : fmaf(d[c] * xj[c], wdu[c], s);
            for (int l = 0; l < 16; l++) s += p[l];
            gr[u] = gr[u] + s;
            for (int c = 0; c < f; c++) dxj[c] = fmaf(d[c], wu[c], dxj[c]);
        }
}

/* ---- the comparisons --------------------------------------------------------------- */

static const pt_cfconv_impl impls[] = {PT_CFCONV_GENERIC, PT_CFCONV_AVX2, PT_CFCONV_AVX512,
                                       PT_CFCONV_AUTO};

/* Every implementation against the reference on one graph and width, the
 * whole range at once and in three pieces; ring 0 and a ring of 32 rows. */
static void check_width(int n, int f)
{
    graph g;
    graph_make_random(&g, n);
    const size_t nf = (size_t)n * f, uf = (size_t)(g.u ? g.u : 1) * f;
    float *x = floats(nf), *w = floats(uf), *dm = floats(nf), *dx0 = floats(nf);
    fill(x, nf), fill(w, uf), fill(dm, nf), fill(dx0, nf);
    float *m_ref = floats(nf), *m = floats(nf);
    float *wd = floats(uf), *xd = floats(nf), *lam = floats(g.u ? (size_t)g.u : 1);
    fill(wd, uf), fill(xd, nf), fill(lam, g.u ? (size_t)g.u : 1);
    float *dx_ref = floats(nf), *dx = floats(nf), *dp_ref = floats(uf), *dp = floats(uf);
    /* P, W = P ⊙ C on the rows an edge uses (others keep P: unread), and
     * the m the forward with wcut forms from P */
    float *p = floats(uf), *pw = floats(uf), *wp = floats(uf), *mp_ref = floats(nf);
    fill(p, uf);
    memcpy(wp, p, uf * sizeof(float));
    for (int32_t k = 0; k < g.off[n]; k++)
        if (g.row[k] >= 0)
            for (int c = 0; c < f; c++)
                wp[(size_t)g.row[k] * f + c] = p[(size_t)g.row[k] * f + c] * g.cut[g.row[k]];
    ref_forward(mp_ref, wp, x, &g, f);
    ref_forward(m_ref, w, x, &g, f);
    for (size_t ii = 0; ii < sizeof impls / sizeof impls[0]; ii++) {
        pt_cfconv_force(impls[ii]);
        const int expect = pt_cfconv_supported(impls[ii]) && impls[ii] != PT_CFCONV_AUTO
                               ? (int)impls[ii]
                               : -1;
        if (expect >= 0) assert_int_equal(pt_cfconv_choice(), expect);
        for (int pieces = 1; pieces <= 3; pieces += 2) {
            poison(m, nf);   /* every row written, receiver 0 (no edges) with zeros */
            const int cut1 = n / 3, cut2 = 2 * n / 3;
            if (pieces == 1) {
                pt_cfconv_forward(m, w, g.row, x, g.src, g.off, n, f);
            } else {
                pt_cfconv_forward_range(m, w, NULL, g.row, x, g.src, g.off, 0, cut1, f);
                pt_cfconv_forward_range(m, w, NULL, g.row, x, g.src, g.off, cut1, cut1, f);
                pt_cfconv_forward_range(m, w, NULL, g.row, x, g.src, g.off, cut1, cut2, f);
                pt_cfconv_forward_range(m, w, NULL, g.row, x, g.src, g.off, cut2, n, f);
            }
            if (memcmp(m, m_ref, nf * sizeof(float)))
                fail_msg("forward %s f=%d pieces=%d differs", pt_cfconv_impl_name(impls[ii]), f,
                         pieces);
            for (int c = 0; c < f; c++) assert_true(m[c] == 0.0f && !signbit(m[c]));
            /* the same pieces on P, the cutoff applied by every edge */
            poison(m, nf);
            memcpy(pw, p, uf * sizeof(float));
            const int32_t at[4] = {0, cut1, pieces == 1 ? n : cut2, n};
            for (int q = 0; q < 3; q++)
                pt_cfconv_forward_range(m, pw, g.cut, g.row, x, g.src, g.off, at[q], at[q + 1],
                                        f);
            if (memcmp(m, mp_ref, nf * sizeof(float)) || memcmp(pw, p, uf * sizeof(float)))
                fail_msg("forward with the cutoff %s f=%d pieces=%d differs",
                         pt_cfconv_impl_name(impls[ii]), f, pieces);
            for (int32_t ring = 0; ring <= 32; ring += 32) {
                ref_backward_from(dx_ref, dp_ref, dx, dp, dx0, dm, x, w, &g, f, ring);
                if (pieces == 1) {
                    pt_cfconv_backward_range(dx, dp, dm, x, w, g.cut, g.row, g.first, g.src,
                                             g.off, 0, n, f, ring);
                } else {
                    pt_cfconv_backward_range(dx, dp, dm, x, w, g.cut, g.row, g.first, g.src,
                                             g.off, 0, cut1, f, ring);
                    pt_cfconv_backward_range(dx, dp, dm, x, w, g.cut, g.row, g.first, g.src,
                                             g.off, cut1, cut2, f, ring);
                    pt_cfconv_backward_range(dx, dp, dm, x, w, g.cut, g.row, g.first, g.src,
                                             g.off, cut2, n, f, ring);
                }
                if (memcmp(dx, dx_ref, nf * sizeof(float)))
                    fail_msg("backward dx %s f=%d ring=%d differs",
                             pt_cfconv_impl_name(impls[ii]), f, (int)ring);
                /* rows never written stay poisoned in both */
                if (memcmp(dp, dp_ref, uf * sizeof(float)))
                    fail_msg("backward dP %s f=%d ring=%d differs",
                             pt_cfconv_impl_name(impls[ii]), f, (int)ring);
            }
        }
        /* the tangent, with ẋ and without (the first block) */
        for (int with_xd = 0; with_xd <= 1; with_xd++) {
            ref_tangent(m_ref, w, wd, lam, x, with_xd ? xd : NULL, &g, f);
            poison(m, nf);
            pt_cfconv_tangent(m, w, wd, lam, g.row, x, with_xd ? xd : NULL, g.src, g.off, n, f);
            if (memcmp(m, m_ref, nf * sizeof(float)))
                fail_msg("tangent %s f=%d xdot=%d differs", pt_cfconv_impl_name(impls[ii]), f,
                         with_xd);
        }
        ref_forward(m_ref, w, x, &g, f);
        /* the distance backward: dx written, g added to */
        float *g_ref = floats(g.u ? (size_t)g.u : 1), *gk = floats(g.u ? (size_t)g.u : 1);
        memcpy(g_ref, lam, (g.u ? (size_t)g.u : 1) * sizeof(float));
        memcpy(gk, lam, (g.u ? (size_t)g.u : 1) * sizeof(float));
        ref_backward_dist(dx_ref, g_ref, dm, x, w, wd, &g, f);
        poison(dx, nf);
        pt_cfconv_backward_dist(dx, gk, dm, x, w, wd, g.row, g.src, g.off, n, f);
        if (memcmp(dx, dx_ref, nf * sizeof(float)) ||
            memcmp(gk, g_ref, (size_t)g.u * sizeof(float)))
            fail_msg("backward_dist %s f=%d differs", pt_cfconv_impl_name(impls[ii]), f);
        free(g_ref), free(gk);
        /* the whole-batch backward zeroes dx first */
        poison(dx, nf);
        memset(dx_ref, 0, nf * sizeof(float));
        ref_backward(dx_ref, dp_ref, dm, x, w, &g, f, 0);
        pt_cfconv_backward(dx, dp, dm, x, w, g.cut, g.row, g.first, g.src, g.off, n, f);
        assert_memory_equal(dx, dx_ref, nf * sizeof(float));
    }
    pt_cfconv_force(PT_CFCONV_AUTO);
    free(x), free(w), free(dm), free(dx0), free(m_ref), free(m), free(wd), free(xd), free(lam);
    free(dx_ref), free(dx), free(dp_ref), free(dp), free(p), free(pw), free(wp), free(mp_ref);
    graph_close(&g);
}

static void test_widths_whole_vectors(void **state)
{
    (void)state;
    /* 1..8 vectors of 8 lanes and of 16 lanes, no tail */
    static const int fs[] = {8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) check_width(37, fs[i]);
}

static void test_widths_masked_tails(void **state)
{
    (void)state;
    /* the model's 100 and 25, narrow rows, one lane short of and past the
     * vector and panel edges */
    static const int fs[] = {100, 25, 1, 3, 7, 9, 15, 17, 63, 65, 127, 129};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) check_width(41, fs[i]);
}

/* tails of exactly 4 lanes, loaded and stored as one xmm
 * (cfconv_body.h's CK_TAIL: 100 is one of them) rather than masked: one
 * vector, several, several panels (AVX-512 past 128, AVX2 past 64) */
static void test_widths_four_lane_tails(void **state)
{
    (void)state;
    static const int fs[] = {4, 12, 20, 36, 52, 68, 84, 116, 132, 260};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) check_width(29, fs[i]);
}

static void test_widths_several_panels(void **state)
{
    (void)state;
    static const int fs[] = {144, 200, 256, 300, 515};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) check_width(23, fs[i]);
}

/* An empty range and receivers without edges write nothing but their own
 * m rows; a range of only padding edges leaves dx and dP untouched. */
static void test_empty_and_padding(void **state)
{
    (void)state;
    enum { F = 100, N = 3 };
    const int32_t off[N + 1] = {0, 0, 2, 2}, src[2] = {0, 2}, row[2] = {-1, -1};
    const uint8_t first[2] = {0, 0};
    const float cut[1] = {1.0f};
    float x[N * F], w[F], dm[N * F], m[N * F], dx[N * F], dp[F];
    fill(x, N * F), fill(w, F), fill(dm, N * F);
    for (size_t ii = 0; ii < sizeof impls / sizeof impls[0]; ii++) {
        pt_cfconv_force(impls[ii]);
        poison(m, N * F);
        pt_cfconv_forward_range(m, w, NULL, row, x, src, off, 1, 1, F);
        pt_cfconv_forward_range(m, w, NULL, row, x, src, off, 2, 1, F);
        for (int c = 0; c < N * F; c++) assert_true(isnan(m[c]) || m[c] > 1e38f);
        pt_cfconv_forward_range(m, w, NULL, row, x, src, off, 1, 2, F);
        for (int c = 0; c < F; c++) assert_true(m[F + c] == 0.0f);   /* padding only */
        assert_true(m[0] > 1e38f && m[2 * F] > 1e38f);                /* outside the range */
        /* with the cutoff applied by the edges: padding edges have none */
        float w0[F];
        memcpy(w0, w, sizeof w0);
        pt_cfconv_forward_range(m, w, cut, row, x, src, off, 0, N, F);
        for (int c = 0; c < N * F; c++) assert_true(m[c] == 0.0f);
        assert_memory_equal(w, w0, sizeof w0);
        poison(dx, N * F);
        poison(dp, F);
        pt_cfconv_backward_range(dx, dp, dm, x, w, cut, row, first, src, off, 0, N, F, 0);
        for (int c = 0; c < N * F; c++) assert_true(dx[c] > 1e38f);
        for (int c = 0; c < F; c++) assert_true(dp[c] > 1e38f);
    }
    pt_cfconv_force(PT_CFCONV_AUTO);
}

/* ---- policy, force, names, environment ----------------------------------------- */

static void test_policy_and_force(void **state)
{
    (void)state;
    pt_cfconv_force(PT_CFCONV_AUTO);
    const pt_cfconv_impl best = pt_cfconv_choice();
    if (pt_cfconv_supported(PT_CFCONV_AVX512))
        assert_int_equal(best, PT_CFCONV_AVX512);
    else if (pt_cfconv_supported(PT_CFCONV_AVX2))
        assert_int_equal(best, PT_CFCONV_AVX2);
    else
        assert_int_equal(best, PT_CFCONV_GENERIC);
    assert_true(pt_cfconv_supported(PT_CFCONV_AUTO));
    assert_true(pt_cfconv_supported(PT_CFCONV_GENERIC));
    assert_false(pt_cfconv_supported((pt_cfconv_impl)42));
    pt_cfconv_force(PT_CFCONV_GENERIC);
    assert_int_equal(pt_cfconv_choice(), PT_CFCONV_GENERIC);
    pt_cfconv_force(PT_CFCONV_AVX2);
    assert_int_equal(pt_cfconv_choice(),
                     pt_cfconv_supported(PT_CFCONV_AVX2) ? PT_CFCONV_AVX2 : best);
    pt_cfconv_force(PT_CFCONV_AUTO);
    assert_int_equal(pt_cfconv_choice(), best);
    assert_string_equal(pt_cfconv_impl_name(PT_CFCONV_AUTO), "auto");
    assert_string_equal(pt_cfconv_impl_name(PT_CFCONV_GENERIC), "generic");
    assert_string_equal(pt_cfconv_impl_name(PT_CFCONV_AVX512), "avx512");
    assert_string_equal(pt_cfconv_impl_name(PT_CFCONV_AVX2), "avx2");
    assert_string_equal(pt_cfconv_impl_name((pt_cfconv_impl)42), "?");
}

/* PACKTRAIN_CFCONV is read once per process: a child with it set reports
 * its choice as its exit status. */
static int child_choice(const char *value)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = '\0';
    char env_var[64];
    snprintf(env_var, sizeof env_var, "PACKTRAIN_CFCONV=%s", value);
    char *argv[] = {self, "--cfconv-choice", NULL};
    char *envp[] = {env_var, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, self, NULL, NULL, argv, envp), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void test_environment_override(void **state)
{
    (void)state;
    pt_cfconv_force(PT_CFCONV_AUTO);
    const pt_cfconv_impl best = pt_cfconv_choice();
    assert_int_equal(child_choice("generic"), PT_CFCONV_GENERIC);
    assert_int_equal(child_choice("auto"), best);
    assert_int_equal(child_choice("bogus"), best);
    assert_int_equal(child_choice("avx2"),
                     pt_cfconv_supported(PT_CFCONV_AVX2) ? PT_CFCONV_AVX2 : best);
    assert_int_equal(child_choice("avx512"),
                     pt_cfconv_supported(PT_CFCONV_AVX512) ? PT_CFCONV_AVX512 : best);
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--cfconv-choice")) return (int)pt_cfconv_choice();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_widths_whole_vectors),
        cmocka_unit_test(test_widths_masked_tails),
        cmocka_unit_test(test_widths_four_lane_tails),
        cmocka_unit_test(test_widths_several_panels),
        cmocka_unit_test(test_empty_and_padding),
        cmocka_unit_test(test_policy_and_force),
        cmocka_unit_test(test_environment_override),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
