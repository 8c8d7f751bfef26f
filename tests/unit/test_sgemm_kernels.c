/* test_sgemm_kernels.c — the own fp32 product kernels (engine/model/
 * sgemm_kernels.h) for the three layouts the model uses (NT, NN, TN):
 *   - AVX-512 and AVX2 results equal the scalar fmaf reference bit for bit
 *     (each element is the same fused chain over k in the same order), on
 *     the model's shapes, odd widths around the 8/16-lane and 112-column
 *     panel edges, reductions across the 128-row passes of TN, every beta
 *     kind, padded leading dimensions (the padding must stay untouched);
 *   - the reference against a double-precision product within
 *     γ·(Σ_p |a b| + |β c|), γ = (k+2)u/(1-(k+2)u), u = 2^-24, and OpenBLAS
 *     within twice that (two float results each within γ of the truth);
 *   - the forward product with its bias (pt_sgemm_bias_run): chains from
 *     the bias equal C filled with it and beta = 1, bit for bit;
 *   - refusals (TT, too wide, short leading dimensions, negative sizes),
 *     k = 0, the policy, pt_sgemm_force, the PACKTRAIN_SGEMM variable (in a
 *     child process: it is read once), and two threads at once (NT's
 *     per-thread transpose buffer);
 *   - NT's cache of transposed weights never serves a stale one (a weight
 *     changed in place, several weights in turn, another shape);
 *   - a weight gradient in chunks of rows (TN, beta = 1 after the first)
 *     equals one call over all rows, bit for bit;
 *   - the AVX-512 transpose (the narrow gradient's C in and out) moves
 *     every element of every size around its 16 × 16 blocks, with strides,
 *     and writes nothing else.
 * Row counts cover the tile remainders (m mod 3 and mod 6, one to five
 * rows past a whole number of tiles); widths 16q + 4 the packed last
 * columns of the AVX-512 tiles.
 * On a CPU without AVX-512 (or AVX2) the corresponding checks assert that
 * the kernel is refused instead (-1), so no check is skipped. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/model/sgemm_kernels.h"
#include "engine/model/sgemm_kernels_internal.h"   /* the AVX-512 transpose */

extern char **environ;

#define PT_TEST_SEED 0x9e3779b97f4a7c15ull
#include "tests/unit/rand_fixture.h"

typedef struct prob {
    CBLAS_TRANSPOSE ta, tb;
    int m, n, k, lda, ldb, ldc;
    float beta;
    float *a, *b, *c0;
} prob;

/* Random operands (with leading dimensions pad wider than needed). */
static prob make(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, int pad, float beta)
{
    prob p = {ta, tb, m, n, k, 0, 0, n + pad, beta, NULL, NULL, NULL};
    int ar = ta == CblasTrans ? k : m, ac = ta == CblasTrans ? m : k;
    int br = tb == CblasTrans ? n : k, bc = tb == CblasTrans ? k : n;
    p.lda = ac + pad;
    p.ldb = bc + pad;
    p.a = malloc(sizeof(float) * (size_t)(ar > 0 ? ar : 1) * p.lda);
    p.b = malloc(sizeof(float) * (size_t)(br > 0 ? br : 1) * p.ldb);
    p.c0 = malloc(sizeof(float) * (size_t)m * p.ldc);
    assert_non_null(p.a);
    assert_non_null(p.b);
    assert_non_null(p.c0);
    for (long i = 0; i < (long)(ar > 0 ? ar : 1) * p.lda; i++) p.a[i] = rnd();
    for (long i = 0; i < (long)(br > 0 ? br : 1) * p.ldb; i++) p.b[i] = rnd();
    for (long i = 0; i < (long)m * p.ldc; i++) p.c0[i] = rnd();
    return p;
}

static void drop(prob *p)
{
    free(p->a);
    free(p->b);
    free(p->c0);
}

/* C through impl (from a copy of c0); NULL when impl refused the problem. */
static float *run(const prob *p, pt_sgemm_impl impl)
{
    float *c = malloc(sizeof(float) * (size_t)p->m * p->ldc);
    assert_non_null(c);
    memcpy(c, p->c0, sizeof(float) * (size_t)p->m * p->ldc);
    if (pt_sgemm_run(impl, p->ta, p->tb, p->m, p->n, p->k, p->a, p->lda, p->b, p->ldb, p->beta,
                     c, p->ldc) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

static double av(const prob *p, int i, int q)
{
    return p->ta == CblasTrans ? p->a[(long)q * p->lda + i] : p->a[(long)i * p->lda + q];
}

static double bv(const prob *p, int q, int j)
{
    return p->tb == CblasTrans ? p->b[(long)j * p->ldb + q] : p->b[(long)q * p->ldb + j];
}

/* |c - exact| ≤ factor·γ·(Σ|ab| + |βc0|) everywhere, padding untouched. */
static void check_bound(const prob *p, const float *c, double factor)
{
    const double u = 1.0 / 16777216.0, g = (p->k + 2) * u / (1.0 - (p->k + 2) * u);
    for (int i = 0; i < p->m; i++)
        for (int j = 0; j < p->ldc; j++) {
            long at = (long)i * p->ldc + j;
            if (j >= p->n) {
                assert_memory_equal(&c[at], &p->c0[at], sizeof(float));
                continue;
            }
            double exact = (double)p->beta * p->c0[at], mag = fabs(exact);
            for (int q = 0; q < p->k; q++) {
                exact += av(p, i, q) * bv(p, q, j);
                mag += fabs(av(p, i, q) * bv(p, q, j));
            }
            double err = fabs((double)c[at] - exact), lim = factor * g * mag + 1e-30;
            if (err > lim) fail_msg("(%d,%d) of %dx%dx%d: |%g - %g| = %g > %g", i, j, p->m, p->n,
                                    p->k, (double)c[at], exact, err, lim);
        }
}

/* Every own kernel equals the scalar reference bit for bit, or is refused
 * because the CPU lacks it; the reference and OpenBLAS are within bounds. */
static void check_all(const prob *p)
{
    float *ref = run(p, PT_SGEMM_SCALAR), *blas = run(p, PT_SGEMM_OPENBLAS);
    assert_non_null(ref);
    assert_non_null(blas);
    check_bound(p, ref, 1.0);
    check_bound(p, blas, 2.0);
    const pt_sgemm_impl vec[] = {PT_SGEMM_AVX512, PT_SGEMM_AVX2};
    for (int v = 0; v < 2; v++) {
        float *c = run(p, vec[v]);
        if (!pt_sgemm_supported(vec[v])) {
            assert_null(c);
            continue;
        }
        assert_non_null(c);
        if (memcmp(c, ref, sizeof(float) * (size_t)p->m * p->ldc) != 0) {
            for (long i = 0; i < (long)p->m * p->ldc; i++)
                if (memcmp(&c[i], &ref[i], sizeof(float)))
                    fail_msg("%s %c%c %dx%dx%d beta %g: element %ld: %.9g vs reference %.9g",
                             pt_sgemm_impl_name(vec[v]), p->ta == CblasTrans ? 'T' : 'N',
                             p->tb == CblasTrans ? 'T' : 'N', p->m, p->n, p->k, (double)p->beta,
                             i, (double)c[i], (double)ref[i]);
        }
        free(c);
    }
    free(ref);
    free(blas);
}

static void sweep(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, const int (*shapes)[3], int count)
{
    const float betas[] = {0.0f, 1.0f, 0.5f};
    for (int s = 0; s < count; s++)
        for (int bi = 0; bi < 3; bi++)
            for (int pad = 0; pad <= 3; pad += 3) {
                prob p = make(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], pad, betas[bi]);
                check_all(&p);
                drop(&p);
            }
}

/* m, n, k: the model's shapes (filter rows × 25 / 100 → 100, node rows ×
 * 100 → 100 / 50) and widths at the lane and panel edges. */
static const int rows_shapes[][3] = {
    {37, 100, 25}, {37, 100, 100}, {29, 50, 100}, {13, 100, 50}, {1, 1, 1}, {5, 7, 3},
    {6, 8, 9}, {7, 15, 16}, {4, 16, 17}, {9, 17, 31}, {3, 33, 64}, {11, 112, 128},
    {2, 113, 127}, {8, 128, 1}, {1, 100, 100}, {10, 100, 100}, {16, 100, 25}, {14, 64, 7},
    /* a last vector of 4 columns (AVX-512 packs them for up to 3 rows:
     * sgemm_body.h), one to five rows, and a 4-column second panel */
    {2, 100, 7}, {3, 100, 100}, {4, 100, 25}, {5, 20, 9}, {7, 36, 40}, {3, 52, 100},
    {4, 116, 33},
};

static void test_nt_matches_reference(void **state)
{
    (void)state;
    sweep(CblasNoTrans, CblasTrans, rows_shapes, sizeof rows_shapes / sizeof rows_shapes[0]);
}

static void test_nn_matches_reference(void **state)
{
    (void)state;
    sweep(CblasNoTrans, CblasNoTrans, rows_shapes, sizeof rows_shapes / sizeof rows_shapes[0]);
}

/* TN: m, n ≤ 128 (the weight gradient's [out, in]), k = rows: across the
 * 128-row passes (127, 128, 129, 300). */
static void test_tn_matches_reference(void **state)
{
    (void)state;
    static const int shapes[][3] = {
        {100, 25, 300}, {100, 100, 129}, {50, 100, 128}, {1, 50, 127}, {7, 17, 5},
        {128, 113, 40}, {3, 1, 260}, {100, 100, 1}, {4, 100, 70}, {10, 64, 65}, {25, 100, 64},
        {5, 20, 70}, {100, 36, 65}, {2, 100, 129}, {25, 116, 30},
        /* narrow gradients (n < 64 ≤ m: computed as the transpose) */
        {64, 1, 70}, {77, 33, 65}, {128, 63, 10}, {100, 17, 3},
    };
    sweep(CblasTrans, CblasNoTrans, shapes, sizeof shapes / sizeof shapes[0]);
}

/* The forward product with its bias: chains started from the bias equal
 * C filled with the bias and beta = 1, bit for bit, in every own kernel;
 * OpenBLAS within the bound. */
static void test_bias_forward(void **state)
{
    (void)state;
    const CBLAS_TRANSPOSE tbs[] = {CblasTrans, CblasNoTrans};
    const int n_shapes = (int)(sizeof rows_shapes / sizeof rows_shapes[0]);
    const pt_sgemm_impl all[] = {PT_SGEMM_SCALAR, PT_SGEMM_OPENBLAS, PT_SGEMM_AVX512, PT_SGEMM_AVX2};
    for (int t = 0; t < 2; t++)
        for (int sh = 0; sh < n_shapes; sh++) {
            prob p = make(CblasNoTrans, tbs[t], rows_shapes[sh][0], rows_shapes[sh][1],
                          rows_shapes[sh][2], 3, 1.0f);
            float *bias = malloc(sizeof(float) * (size_t)p.n);
            assert_non_null(bias);
            for (int j = 0; j < p.n; j++) bias[j] = rnd();
            /* the definition: C filled with the bias, then beta = 1 */
            for (int i = 0; i < p.m; i++) memcpy(p.c0 + (long)i * p.ldc, bias, sizeof(float) * p.n);
            float *ref = run(&p, PT_SGEMM_SCALAR);
            assert_non_null(ref);
            check_bound(&p, ref, 1.0);
            for (int i = 0; i < 4; i++) {
                float *c = malloc(sizeof(float) * (size_t)p.m * p.ldc);
                assert_non_null(c);
                for (long q = 0; q < (long)p.m * p.ldc; q++) c[q] = (q % p.ldc) < p.n ? NAN : p.c0[q];
                int rc = pt_sgemm_bias_run(all[i], p.ta, p.tb, p.m, p.n, p.k, p.a, p.lda, p.b, p.ldb,
                                           bias, c, p.ldc);
                if (!pt_sgemm_supported(all[i])) {
                    assert_int_equal(rc, -1);
                } else if (all[i] == PT_SGEMM_OPENBLAS) {
                    assert_int_equal(rc, 0);
                    check_bound(&p, c, 2.0);
                } else {
                    assert_int_equal(rc, 0);
                    if (memcmp(c, ref, sizeof(float) * (size_t)p.m * p.ldc))
                        fail_msg("%s bias %dx%dx%d differs from the filled-C reference",
                                 pt_sgemm_impl_name(all[i]), p.m, p.n, p.k);
                }
                free(c);
            }
            free(ref);
            free(bias);
            drop(&p);
        }
    /* no bias for TN, none without a bias */
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4}, c[4] = {0}, bias[2] = {1, 1};
    assert_int_equal(pt_sgemm_bias_run(PT_SGEMM_SCALAR, CblasTrans, CblasNoTrans, 2, 2, 2, a, 2, b,
                                       2, bias, c, 2), -1);
    assert_int_equal(pt_sgemm_bias_run(PT_SGEMM_SCALAR, CblasNoTrans, CblasNoTrans, 2, 2, 2, a, 2,
                                       b, 2, NULL, c, 2), -1);
    assert_int_equal(pt_sgemm_small_bias(CblasTrans, CblasNoTrans, 2, 2, 2, a, 2, b, 2, bias, c,
                                         2), 0);
    /* k = 0: every row is the bias */
    assert_int_equal(pt_sgemm_bias_run(PT_SGEMM_SCALAR, CblasNoTrans, CblasTrans, 2, 2, 0, a, 1, b,
                                       1, bias, c, 2), 0);
    const float ones[4] = {1, 1, 1, 1};
    assert_memory_equal(c, ones, sizeof ones);
}

static void test_refusals(void **state)
{
    (void)state;
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4}, c[4] = {0};
    static float big[129 * 129];
    const pt_sgemm_impl own[] = {PT_SGEMM_SCALAR, PT_SGEMM_AVX512, PT_SGEMM_AVX2};
    for (int i = 0; i < 3; i++) {
        pt_sgemm_impl im = own[i];
        /* TT is no layout of the model */
        assert_int_equal(pt_sgemm_run(im, CblasTrans, CblasTrans, 2, 2, 2, a, 2, b, 2, 0, c, 2), -1);
        /* n over PT_SGEMM_MAX_DIM; NN/NT k over it; TN m over it */
        assert_int_equal(pt_sgemm_run(im, CblasNoTrans, CblasNoTrans, 1, 129, 1, big, 1, big, 129,
                                      0, big, 129), -1);
        assert_int_equal(pt_sgemm_run(im, CblasNoTrans, CblasTrans, 1, 1, 129, big, 129, big, 129,
                                      0, big, 1), -1);
        assert_int_equal(pt_sgemm_run(im, CblasTrans, CblasNoTrans, 129, 1, 1, big, 129, big, 1, 0,
                                      big, 1), -1);
        /* short leading dimensions, negative sizes */
        assert_int_equal(pt_sgemm_run(im, CblasNoTrans, CblasNoTrans, 2, 2, 2, a, 1, b, 2, 0, c, 2), -1);
        assert_int_equal(pt_sgemm_run(im, CblasNoTrans, CblasNoTrans, 2, 2, 2, a, 2, b, 2, 0, c, 1), -1);
        assert_int_equal(pt_sgemm_run(im, CblasNoTrans, CblasNoTrans, -1, 2, 2, a, 2, b, 2, 0, c, 2), -1);
    }
    /* pt_sgemm_small leaves what it does not take to the caller */
    assert_int_equal(pt_sgemm_small(CblasTrans, CblasTrans, 2, 2, 2, a, 2, b, 2, 0, c, 2), 0);
    assert_int_equal(pt_sgemm_small(CblasNoTrans, CblasNoTrans, 1, 129, 1, big, 1, big, 129, 0,
                                    big, 129), 0);
}

/* k = 0: C = beta C, as cblas_sgemm. */
static void test_empty_reduction(void **state)
{
    (void)state;
    const pt_sgemm_impl all[] = {PT_SGEMM_SCALAR, PT_SGEMM_AVX512, PT_SGEMM_AVX2};
    for (int i = 0; i < 3; i++) {
        if (!pt_sgemm_supported(all[i])) continue;   /* refusal checked in the sweeps */
        float c[6] = {1, 2, 3, 4, 5, 6}, a[1] = {0}, b[1] = {0};
        assert_int_equal(pt_sgemm_run(all[i], CblasNoTrans, CblasTrans, 2, 3, 0, a, 1, b, 1, 0.5f,
                                      c, 3), 0);
        const float want[6] = {0.5f, 1, 1.5f, 2, 2.5f, 3};
        assert_memory_equal(c, want, sizeof want);
    }
}

static void test_policy(void **state)
{
    (void)state;
    pt_sgemm_impl best = pt_sgemm_supported(PT_SGEMM_AVX512) ? PT_SGEMM_AVX512
                         : pt_sgemm_supported(PT_SGEMM_AVX2) && !pt_sgemm_openblas_avx512()
                             ? PT_SGEMM_AVX2
                             : PT_SGEMM_OPENBLAS;
    assert_int_equal(pt_sgemm_choice(CblasNoTrans, CblasTrans, 4000, 100, 25), best);
    assert_int_equal(pt_sgemm_choice(CblasNoTrans, CblasNoTrans, 4000, 100, 100), best);
    assert_int_equal(pt_sgemm_choice(CblasTrans, CblasNoTrans, 100, 100, 4000), best);
    /* the readout's one column, a too-wide product, TT: OpenBLAS */
    assert_int_equal(pt_sgemm_choice(CblasNoTrans, CblasTrans, 4000, 1, 50), PT_SGEMM_OPENBLAS);
    assert_int_equal(pt_sgemm_choice(CblasNoTrans, CblasTrans, 4000, 256, 100), PT_SGEMM_OPENBLAS);
    assert_int_equal(pt_sgemm_choice(CblasTrans, CblasTrans, 10, 10, 10), PT_SGEMM_OPENBLAS);
    pt_sgemm_force(PT_SGEMM_OPENBLAS);
    assert_int_equal(pt_sgemm_choice(CblasNoTrans, CblasTrans, 4000, 100, 25), PT_SGEMM_OPENBLAS);
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4}, c[4] = {0};
    assert_int_equal(pt_sgemm_small(CblasNoTrans, CblasNoTrans, 2, 2, 2, a, 2, b, 2, 0, c, 2), 0);
    pt_sgemm_force(PT_SGEMM_SCALAR);   /* forced, and narrow rows allowed */
    assert_int_equal(pt_sgemm_choice(CblasNoTrans, CblasNoTrans, 2, 2, 2), PT_SGEMM_SCALAR);
    assert_int_equal(pt_sgemm_small(CblasNoTrans, CblasNoTrans, 2, 2, 2, a, 2, b, 2, 0, c, 2), 1);
    const float want[4] = {7, 10, 15, 22};
    assert_memory_equal(c, want, sizeof want);
    pt_sgemm_force(PT_SGEMM_AVX2);
    assert_int_equal(pt_sgemm_choice(CblasNoTrans, CblasNoTrans, 40, 100, 100),
                     pt_sgemm_supported(PT_SGEMM_AVX2) ? PT_SGEMM_AVX2 : best);
    pt_sgemm_force(PT_SGEMM_AUTO);
    assert_int_equal(pt_sgemm_choice(CblasNoTrans, CblasTrans, 4000, 100, 25), best);
    assert_string_equal(pt_sgemm_impl_name(PT_SGEMM_AVX512), "avx512");
    assert_string_equal(pt_sgemm_impl_name((pt_sgemm_impl)42), "?");
}

/* PACKTRAIN_SGEMM is read once per process: a child with it set (and the
 * parent's OPENBLAS_CORETYPE) reports its choice for a model shape as its
 * exit status. */
static int child_choice(const char *value)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = '\0';
    char env_var[64];
    snprintf(env_var, sizeof env_var, "PACKTRAIN_SGEMM=%s", value);
    char *argv[] = {self, "--sgemm-choice", NULL};
    /* the parent's OpenBLAS kernel set, which the policy looks at */
    const char *core = getenv("OPENBLAS_CORETYPE");
    char core_var[128];
    snprintf(core_var, sizeof core_var, "OPENBLAS_CORETYPE=%s", core ? core : "");
    char *envp[] = {env_var, core ? core_var : NULL, NULL};
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
    pt_sgemm_impl best = pt_sgemm_choice(CblasNoTrans, CblasTrans, 4000, 100, 25);
    assert_int_equal(child_choice("openblas"), PT_SGEMM_OPENBLAS);
    assert_int_equal(child_choice("auto"), best);
    assert_int_equal(child_choice("bogus"), best);
    assert_int_equal(child_choice("avx2"),
                     pt_sgemm_supported(PT_SGEMM_AVX2) ? PT_SGEMM_AVX2 : best);
}

/* The own AVX-512 kernel takes the products whatever kernel set OpenBLAS
 * runs: with its AVX-512 kernels (SkylakeX) as with its Haswell ones. */
static void test_policy_whatever_openblas_set(void **state)
{
    (void)state;
    if (!pt_sgemm_supported(PT_SGEMM_AVX512)) {
        assert_int_equal(pt_sgemm_supported(PT_SGEMM_AVX2) ? PT_SGEMM_AVX2 : PT_SGEMM_OPENBLAS,
                         pt_sgemm_choice(CblasNoTrans, CblasTrans, 4000, 100, 25));
        return;
    }
    const char *saved = getenv("OPENBLAS_CORETYPE");
    char keep[64] = "";
    if (saved) snprintf(keep, sizeof keep, "%s", saved);
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    assert_int_equal(child_choice("auto"), PT_SGEMM_AVX512);
    setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    assert_int_equal(child_choice("auto"), PT_SGEMM_AVX512);
    if (saved) setenv("OPENBLAS_CORETYPE", keep, 1);
    else unsetenv("OPENBLAS_CORETYPE");
}

/* NT's cache of transposed weights: a weight changed in place (first,
 * middle or last element; the optimizer keeps its address), three weights
 * in turn (more than the cache keeps), the same address with another
 * shape: every call equals the scalar reference of the weight as it is. */
static void check_nt_now(const prob *p)
{
    float *ref = run(p, PT_SGEMM_SCALAR);
    assert_non_null(ref);
    const pt_sgemm_impl vec[] = {PT_SGEMM_AVX512, PT_SGEMM_AVX2};
    for (int v = 0; v < 2; v++) {
        float *c = run(p, vec[v]);
        if (!pt_sgemm_supported(vec[v])) {
            assert_null(c);
            continue;
        }
        assert_non_null(c);
        if (memcmp(c, ref, sizeof(float) * (size_t)p->m * p->ldc))
            fail_msg("%s NT %dx%dx%d: a stale transposed weight", pt_sgemm_impl_name(vec[v]),
                     p->m, p->n, p->k);
        free(c);
    }
    free(ref);
}

static void test_nt_weight_cache(void **state)
{
    (void)state;
    prob w[3];
    for (int i = 0; i < 3; i++) w[i] = make(CblasNoTrans, CblasTrans, 10, 100, 25 + i, 3, 0.0f);
    check_nt_now(&w[0]);
    check_nt_now(&w[0]);   /* the cached transpose */
    const long last = (long)(w[0].n - 1) * w[0].ldb + w[0].k - 1;
    const long at[] = {0, last / 2, last};
    for (int i = 0; i < 3; i++) {
        w[0].b[at[i]] += 1.0f;   /* an optimizer step, in place */
        check_nt_now(&w[0]);
    }
    for (int r = 0; r < 7; r++) check_nt_now(&w[r % 3]);
    /* the same weight buffer read as another shape */
    prob other = w[1];
    other.n = 25;
    other.k = 26;
    other.ldb = 26;
    other.ldc = 100;
    check_nt_now(&other);
    check_nt_now(&w[1]);
    for (int i = 0; i < 3; i++) drop(&w[i]);
}

/* NT's weight laid out transposed (sgemm_kernels.c: 16 x 16 register
 * blocks for the AVX-512 kernel, a scalar loop otherwise) at every edge of
 * the blocks, in both dimensions, with a padded B: bit for bit the
 * reference's product in every kernel. */
static void test_nt_layout_edges(void **state)
{
    (void)state;
    const int dims[] = {1, 15, 16, 17, 25, 33, 100, 112, 127, 128};
    const int nd = (int)(sizeof dims / sizeof dims[0]);
    for (int i = 0; i < nd; i++)
        for (int j = 0; j < nd; j++) {
            prob p = make(CblasNoTrans, CblasTrans, 4, dims[i], dims[j], 3, 0.0f);
            check_all(&p);
            drop(&p);
        }
}

/* A weight gradient over chunks of rows (schnet_filter.c): TN continued
 * with beta = 1 over the next rows gives the bits of one call over all rows,
 * in every own kernel (each element is one chain over the rows in order),
 * for chunks that are and are not multiples of the 64-row pass, and for the
 * narrow gradient computed as its transpose. */
static void test_tn_chunks(void **state)
{
    (void)state;
    static const int shapes[][2] = {{100, 100}, {100, 25}, {50, 100}, {7, 33}};
    static const int chunks[] = {64, 100, 1, 256};
    const pt_sgemm_impl own[] = {PT_SGEMM_SCALAR, PT_SGEMM_AVX512, PT_SGEMM_AVX2};
    const int rows = 300;
    for (int s = 0; s < 4; s++)
        for (int ci = 0; ci < 4; ci++)
            for (int i = 0; i < 3; i++) {
                if (!pt_sgemm_supported(own[i])) continue;   /* refusals: the sweeps */
                prob p = make(CblasTrans, CblasNoTrans, shapes[s][0], shapes[s][1], rows, 1,
                              1.0f);
                float *whole = run(&p, own[i]);
                assert_non_null(whole);
                float *c = malloc(sizeof(float) * (size_t)p.m * p.ldc);
                assert_non_null(c);
                memcpy(c, p.c0, sizeof(float) * (size_t)p.m * p.ldc);
                for (int r0 = 0; r0 < rows; r0 += chunks[ci]) {
                    int n = rows - r0 < chunks[ci] ? rows - r0 : chunks[ci];
                    assert_int_equal(pt_sgemm_run(own[i], CblasTrans, CblasNoTrans, p.m, p.n, n,
                                                  p.a + (long)r0 * p.lda, p.lda,
                                                  p.b + (long)r0 * p.ldb, p.ldb, 1.0f, c, p.ldc),
                                     0);
                }
                if (memcmp(c, whole, sizeof(float) * (size_t)p.m * p.ldc))
                    fail_msg("%s TN %dx%d over %d rows in chunks of %d differs from one call",
                             pt_sgemm_impl_name(own[i]), p.m, p.n, rows, chunks[ci]);
                free(c);
                free(whole);
                drop(&p);
            }
}

/* pt_sgemm_avx512_transpose: dst[j·ldd + i] = src[i·lds + j] for sizes at
 * and around its 16 × 16 blocks, padded strides; dst's padding untouched.
 * Without AVX-512 the narrow gradient that uses it is refused instead. */
static void test_transpose(void **state)
{
    (void)state;
    if (!pt_sgemm_supported(PT_SGEMM_AVX512)) {
        float x[4] = {0};
        assert_int_equal(pt_sgemm_run(PT_SGEMM_AVX512, CblasTrans, CblasNoTrans, 64, 1, 1, x, 64,
                                      x, 1, 0.0f, x, 1), -1);
        return;
    }
    static const int sizes[] = {1, 3, 15, 16, 17, 25, 33, 100, 128};
    const int ns = (int)(sizeof sizes / sizeof sizes[0]);
    for (int a = 0; a < ns; a++)
        for (int b = 0; b < ns; b++)
            for (int pad = 0; pad <= 5; pad += 5) {
                const int rows = sizes[a], cols = sizes[b], lds = cols + pad, ldd = rows + pad;
                float *src = malloc(sizeof(float) * (size_t)rows * lds);
                float *dst = malloc(sizeof(float) * (size_t)cols * ldd);
                assert_non_null(src);
                assert_non_null(dst);
                for (long q = 0; q < (long)rows * lds; q++) src[q] = (float)q + 0.25f;
                for (long q = 0; q < (long)cols * ldd; q++) dst[q] = -1.0f;
                pt_sgemm_avx512_transpose(rows, cols, src, lds, dst, ldd);
                for (int j = 0; j < cols; j++)
                    for (int i = 0; i < ldd; i++) {
                        float want = i < rows ? src[(long)i * lds + j] : -1.0f;
                        if (memcmp(&dst[(long)j * ldd + i], &want, sizeof want))
                            fail_msg("transpose %dx%d (lds %d, ldd %d): dst[%d][%d] = %g, want %g",
                                     rows, cols, lds, ldd, j, i, (double)dst[(long)j * ldd + i],
                                     (double)want);
                    }
                free(src);
                free(dst);
            }
}

/* Two threads at once, NT (the per-thread transpose) with different B. */
static void *thread_nt(void *arg)
{
    prob *p = arg;
    for (int r = 0; r < 50; r++) {
        float *c = run(p, PT_SGEMM_AUTO), *ref = run(p, PT_SGEMM_SCALAR);
        pt_sgemm_impl ch = pt_sgemm_choice(p->ta, p->tb, p->m, p->n, p->k);
        int same = ch == PT_SGEMM_OPENBLAS ||
                   !memcmp(c, ref, sizeof(float) * (size_t)p->m * p->ldc);
        free(c);
        free(ref);
        if (!same) return (void *)1;
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    prob p1 = make(CblasNoTrans, CblasTrans, 64, 100, 100, 0, 1.0f);
    prob p2 = make(CblasNoTrans, CblasTrans, 64, 100, 25, 0, 0.0f);
    pthread_t t1, t2;
    void *r1, *r2;
    assert_int_equal(pthread_create(&t1, NULL, thread_nt, &p1), 0);
    assert_int_equal(pthread_create(&t2, NULL, thread_nt, &p2), 0);
    pthread_join(t1, &r1);
    pthread_join(t2, &r2);
    assert_null(r1);
    assert_null(r2);
    drop(&p1);
    drop(&p2);
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--sgemm-choice"))
        return (int)pt_sgemm_choice(CblasNoTrans, CblasTrans, 4000, 100, 25);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nt_matches_reference),
        cmocka_unit_test(test_nn_matches_reference),
        cmocka_unit_test(test_tn_matches_reference),
        cmocka_unit_test(test_bias_forward),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_empty_reduction),
        cmocka_unit_test(test_policy),
        cmocka_unit_test(test_environment_override),
        cmocka_unit_test(test_policy_whatever_openblas_set),
        cmocka_unit_test(test_nt_weight_cache),
        cmocka_unit_test(test_nt_layout_edges),
        cmocka_unit_test(test_tn_chunks),
        cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
