/* test_sgemm_once.c — a Linear layer's forward with its weight laid out
 * for the one call (pt_sgemm_small_once, engine/model/sgemm_kernels.h):
 *   - every own kernel (AVX-512, AVX2, and the scalar reference when forced)
 *     gives the reference's bits (pt_sgemm_run / pt_sgemm_bias_run with
 *     SCALAR), with and without a bias, beta 0, 1 and 0.5, widths and
 *     reductions at every edge of the 16 × 16 transpose blocks and the
 *     panels, row counts around the tiles, padded A, W and C (C's padding
 *     untouched);
 *   - a weight changed in place between calls is seen (nothing is cached);
 *   - what it does not take is left to the caller (0): the policy's
 *     OpenBLAS (n < 16, or forced), widths past PT_SGEMM_MAX_DIM, short
 *     leading dimensions.
 *   - the residual forward (pt_sgemm_small_once_residual): C = in + bias +
 *     A·Wᵀ has the bits of the pass C = in + bias followed by the reference
 *     with beta 1, through every kernel, at the tiles' row and column edges
 *     (the packed last 4 columns, AVX2's masked last vector), with padded
 *     operands (C's padding untouched), in place (in == C), k = 0; and its
 *     refusals (C untouched);
 *   - the rows fetched ahead for the next tile change no bit (row counts
 *     around the A rows' threshold, the residual, NN with beta 1).
 * On a CPU without AVX-512 (or AVX2) the kernel is not supported and the
 * check asserts so instead. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/sgemm_kernels.h"

#define PT_TEST_SEED 0x51ed270b27f1a3c5ull
#include "tests/unit/rand_fixture.h"

/* C = A·Wᵀ (+ bias | + beta·C0) through impl (forced), compared with the
 * scalar reference bit for bit, C's padding untouched.  residual (bias
 * then given): pt_sgemm_small_once_residual's C = in + bias + A·Wᵀ against
 * the pass C = in + bias and the reference with beta 1; RES_INPLACE: in is
 * C itself. */
enum { RES_NONE, RES_APART, RES_INPLACE };
static void check_case(int m, int n, int k, int pad, float beta, int with_bias, int residual)
{
    const int lda = k + pad, ldw = k + pad, ldc = n + pad;
    const int ldin = residual == RES_INPLACE ? ldc : n + 2 * pad;
    float *a = rnd_floats((size_t)m * lda + 1, 1.0f), *w = rnd_floats((size_t)n * ldw + 1, 1.0f);
    float *c0 = rnd_floats((size_t)m * ldc, 1.0f), *bias = with_bias ? rnd_floats((size_t)n, 1.0f) : NULL;
    float *in = residual == RES_APART ? rnd_floats((size_t)m * ldin, 1.0f) : c0;
    float *ref = malloc(sizeof(float) * (size_t)m * ldc), *c = malloc(sizeof(float) * (size_t)m * ldc);
    assert_non_null(ref);
    assert_non_null(c);
    memcpy(ref, c0, sizeof(float) * (size_t)m * ldc);
    for (int i = 0; residual && i < m; i++)
        for (int j = 0; j < n; j++) ref[(size_t)i * ldc + j] = in[(size_t)i * ldin + j] + bias[j];
    if (bias && !residual)
        assert_int_equal(pt_sgemm_bias_run(PT_SGEMM_SCALAR, CblasNoTrans, CblasTrans, m, n, k, a,
                                           lda, w, ldw, bias, ref, ldc), 0);
    else
        assert_int_equal(pt_sgemm_run(PT_SGEMM_SCALAR, CblasNoTrans, CblasTrans, m, n, k, a, lda,
                                      w, ldw, residual ? 1.0f : beta, ref, ldc), 0);
    const pt_sgemm_impl impls[] = {PT_SGEMM_AVX512, PT_SGEMM_AVX2, PT_SGEMM_SCALAR};
    for (int i = 0; i < 3; i++) {
        if (!pt_sgemm_supported(impls[i])) {
            assert_true(impls[i] != PT_SGEMM_SCALAR);
            continue;
        }
        pt_sgemm_force(impls[i]);
        memcpy(c, c0, sizeof(float) * (size_t)m * ldc);
        const int ran =
            residual ? pt_sgemm_small_once_residual(m, n, k, a, lda, w, ldw,
                                                    residual == RES_INPLACE ? c : in, ldin, bias,
                                                    c, ldc)
                     : pt_sgemm_small_once(m, n, k, a, lda, w, ldw, beta, bias, c, ldc);
        pt_sgemm_force(PT_SGEMM_AUTO);
        assert_int_equal(ran, 1);
        for (long q = 0; q < (long)m * ldc; q++)
            if (memcmp(&c[q], &ref[q], sizeof(float)))
                fail_msg("%s %dx%dx%d pad %d beta %g bias %d residual %d: element %ld: %.9g, "
                         "reference %.9g",
                         pt_sgemm_impl_name(impls[i]), m, n, k, pad, (double)beta, with_bias,
                         residual, q, (double)c[q], (double)ref[q]);
    }
    if (in != c0) free(in);
    free(a), free(w), free(c0), free(bias), free(ref), free(c);
}

static void check_once(int m, int n, int k, int pad, float beta, int with_bias)
{
    check_case(m, n, k, pad, beta, with_bias, RES_NONE);
}

static void test_once_matches_reference(void **state)
{
    (void)state;
    /* widths and reductions at the transpose's 16-blocks and the panels */
    const int dims[] = {1, 15, 16, 17, 25, 33, 50, 100, 112, 127, 128};
    const int nd = (int)(sizeof dims / sizeof dims[0]);
    for (int i = 0; i < nd; i++)
        for (int j = 0; j < nd; j++) check_once(4, dims[i], dims[j], 3, 0.0f, 1);
    /* the node layers' shapes over row counts around the 3-row tiles */
    const int rows[] = {1, 2, 3, 5, 7, 37, 288};
    const float betas[] = {0.0f, 1.0f, 0.5f};
    for (int r = 0; r < (int)(sizeof rows / sizeof rows[0]); r++)
        for (int b = 0; b < 3; b++)
            for (int pad = 0; pad <= 3; pad += 3) {
                check_once(rows[r], 100, 100, pad, betas[b], 0);
                check_once(rows[r], 50, 100, pad, betas[b], b == 0);
            }
    check_once(9, 100, 100, 0, 0.0f, 1);
}

/* Nothing is kept between calls: a weight changed in place (an optimizer
 * step) is read as it is now, at its first, middle and last element. */
static void test_once_sees_changed_weight(void **state)
{
    (void)state;
    enum { M = 10, N = 100, K = 100 };
    float *a = rnd_floats((size_t)M * K, 1.0f), *w = rnd_floats((size_t)N * K, 1.0f), *bias = rnd_floats(N, 1.0f);
    float ref[M * N], c[M * N];
    const long at[] = {0, N * K / 2 + 7, N * K - 1};
    for (int s = 0; s <= 3; s++) {
        if (s > 0) w[at[s - 1]] += 0.25f;
        assert_int_equal(pt_sgemm_bias_run(PT_SGEMM_SCALAR, CblasNoTrans, CblasTrans, M, N, K, a,
                                           K, w, K, bias, ref, N), 0);
        if (!pt_sgemm_small_once(M, N, K, a, K, w, K, 0.0f, bias, c, N)) {
            /* only when the policy gives this CPU no own kernel */
            assert_int_equal(pt_sgemm_choice(CblasNoTrans, CblasTrans, M, N, K),
                             PT_SGEMM_OPENBLAS);
            continue;
        }
        assert_memory_equal(c, ref, sizeof c);
    }
    free(a), free(w), free(bias);
}

/* What it does not take: 0, C untouched. */
static void test_once_refusals(void **state)
{
    (void)state;
    static float a[4 * 129], w[129 * 129], c[4 * 129];
    static const float zero[4 * 129];
    /* the policy leaves narrow rows (a readout column) to OpenBLAS */
    assert_int_equal(pt_sgemm_small_once(4, 1, 50, a, 50, w, 50, 0.0f, NULL, c, 1), 0);
    assert_int_equal(pt_sgemm_small_once(4, 15, 50, a, 50, w, 50, 0.0f, NULL, c, 15), 0);
    /* wider than the kernels take, short leading dimensions */
    assert_int_equal(pt_sgemm_small_once(4, 129, 100, a, 100, w, 100, 0.0f, NULL, c, 129), 0);
    assert_int_equal(pt_sgemm_small_once(4, 100, 129, a, 129, w, 129, 0.0f, NULL, c, 100), 0);
    assert_int_equal(pt_sgemm_small_once(4, 100, 100, a, 99, w, 100, 0.0f, NULL, c, 100), 0);
    assert_int_equal(pt_sgemm_small_once(4, 100, 100, a, 100, w, 99, 0.0f, NULL, c, 100), 0);
    assert_int_equal(pt_sgemm_small_once(4, 100, 100, a, 100, w, 100, 0.0f, NULL, c, 99), 0);
    assert_int_equal(pt_sgemm_small_once(0, 100, 100, a, 100, w, 100, 0.0f, NULL, c, 100), 0);
    assert_int_equal(pt_sgemm_small_once(-1, 100, 100, a, 100, w, 100, 0.0f, NULL, c, 100), 0);
    /* OpenBLAS forced */
    pt_sgemm_force(PT_SGEMM_OPENBLAS);
    assert_int_equal(pt_sgemm_small_once(4, 100, 100, a, 100, w, 100, 0.0f, NULL, c, 100), 0);
    pt_sgemm_force(PT_SGEMM_AUTO);
    assert_memory_equal(c, zero, sizeof zero);
}

static void test_residual_matches_reference(void **state)
{
    (void)state;
    const int dims[] = {16, 17, 20, 33, 50, 100, 112, 116, 128};
    const int nd = (int)(sizeof dims / sizeof dims[0]);
    for (int i = 0; i < nd; i++)
        for (int j = 0; j < nd; j += 2) check_case(5, dims[i], dims[j], 3, 0.0f, 1, RES_APART);
    /* the node layers' shape over row counts around the tiles (3 rows
     * AVX-512, 6 AVX2), padded or not, in place or not; no reduction */
    const int rows[] = {1, 2, 3, 4, 5, 6, 7, 13, 37, 288};
    for (int r = 0; r < (int)(sizeof rows / sizeof rows[0]); r++)
        for (int pad = 0; pad <= 3; pad += 3)
            for (int res = RES_APART; res <= RES_INPLACE; res++)
                check_case(rows[r], 100, 100, pad, 0.0f, 1, res);
    check_case(7, 100, 0, 1, 0.0f, 1, RES_APART);
}

/* The next tile's rows fetched ahead (sgemm_body.h, PT_SGEMM_AHEAD_*) are
 * hints: the bits stay the reference's on both sides of the A rows'
 * threshold (PT_SGEMM_AHEAD_A_BYTES: 656 rows of 100 floats), for the
 * residual forward (c0's rows) and an accumulating NN (C's rows with
 * beta 1, as the node input gradient dh += dx W1ᵀ), at every impl, with
 * row counts ending in a short tile. */
static void test_ahead_matches_reference(void **state)
{
    (void)state;
    const int rows[] = {655, 656, 700, 1128};
    for (int r = 0; r < 4; r++)
        for (int pad = 0; pad <= 3; pad += 3) {
            check_once(rows[r], 100, 100, pad, 0.0f, 1);
            check_once(rows[r], 100, 100, pad, 1.0f, 0);
            check_case(rows[r], 100, 100, pad, 0.0f, 1, RES_APART);
        }
    /* NN with beta 1 and no bias (pt_sgemm_run, B as given) */
    enum { M = 1127, N = 100, K = 100 };
    float *a = rnd_floats((size_t)M * K, 1.0f), *b = rnd_floats((size_t)K * N, 1.0f);
    float *c0 = rnd_floats((size_t)M * N, 1.0f);
    float *ref = malloc(sizeof(float) * M * N), *c = malloc(sizeof(float) * M * N);
    assert_non_null(ref);
    assert_non_null(c);
    memcpy(ref, c0, sizeof(float) * M * N);
    assert_int_equal(pt_sgemm_run(PT_SGEMM_SCALAR, CblasNoTrans, CblasNoTrans, M, N, K, a, K, b,
                                  N, 1.0f, ref, N), 0);
    const pt_sgemm_impl impls[] = {PT_SGEMM_AVX512, PT_SGEMM_AVX2};
    for (int i = 0; i < 2; i++) {
        if (!pt_sgemm_supported(impls[i])) continue;
        memcpy(c, c0, sizeof(float) * M * N);
        assert_int_equal(pt_sgemm_run(impls[i], CblasNoTrans, CblasNoTrans, M, N, K, a, K, b, N,
                                      1.0f, c, N), 0);
        assert_memory_equal(c, ref, sizeof(float) * M * N);
    }
    free(a), free(b), free(c0), free(ref), free(c);
}

/* What it does not take: 0, C untouched. */
static void test_residual_refusals(void **state)
{
    (void)state;
    static float a[4 * 129], w[129 * 129], in[4 * 129], bias[129], c[4 * 129];
    static const float zero[4 * 129];
    /* no bias or no residual, a short residual stride */
    assert_int_equal(pt_sgemm_small_once_residual(4, 100, 100, a, 100, w, 100, in, 100, NULL, c, 100), 0);
    assert_int_equal(pt_sgemm_small_once_residual(4, 100, 100, a, 100, w, 100, NULL, 100, bias, c, 100), 0);
    assert_int_equal(pt_sgemm_small_once_residual(4, 100, 100, a, 100, w, 100, in, 99, bias, c, 100), 0);
    /* as pt_sgemm_small_once: narrow rows, too wide, short strides, no rows */
    assert_int_equal(pt_sgemm_small_once_residual(4, 15, 50, a, 50, w, 50, in, 15, bias, c, 15), 0);
    assert_int_equal(pt_sgemm_small_once_residual(4, 129, 100, a, 100, w, 100, in, 129, bias, c, 129), 0);
    assert_int_equal(pt_sgemm_small_once_residual(4, 100, 100, a, 99, w, 100, in, 100, bias, c, 100), 0);
    assert_int_equal(pt_sgemm_small_once_residual(4, 100, 100, a, 100, w, 100, in, 100, bias, c, 99), 0);
    assert_int_equal(pt_sgemm_small_once_residual(0, 100, 100, a, 100, w, 100, in, 100, bias, c, 100), 0);
    pt_sgemm_force(PT_SGEMM_OPENBLAS);
    assert_int_equal(pt_sgemm_small_once_residual(4, 100, 100, a, 100, w, 100, in, 100, bias, c, 100), 0);
    pt_sgemm_force(PT_SGEMM_AUTO);
    assert_memory_equal(c, zero, sizeof zero);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_once_matches_reference),
        cmocka_unit_test(test_once_sees_changed_weight),
        cmocka_unit_test(test_once_refusals),
        cmocka_unit_test(test_residual_matches_reference),
        cmocka_unit_test(test_residual_refusals),
        cmocka_unit_test(test_ahead_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
