/* test_colsum_kernels.c — the bias gradients' blocked column sums
 * (engine/model/colsum_kernels.h):
 *   - the scalar reference keeps the order the ops always had: per column,
 *     a float chain from +0.0f over each block of PT_SUM_BLOCK rows (the
 *     first at row 0), each block's sum added to the double total — against
 *     an oracle spelled column by column here, on random operands whose
 *     magnitudes span 2^±20 (so another order rounds differently), and on
 *     columns built so that a float chain over all rows, a double sum or
 *     blocks of another length give other values;
 *   - AVX-512 and AVX2 give the reference's bits for every width 1..300 (one
 *     panel, several, the masked last vector of each) and row counts from 1
 *     to past several blocks (a ragged last block), onto totals that are
 *     not zero, and write nothing past column c;
 *   - calls over consecutive runs of whole blocks give one call's bits;
 *   - infinities, NaN and signed zeros as the reference has them;
 *   - refusals: OpenBLAS, a value that is no implementation, an instruction
 *     set the CPU lacks (-1, total untouched); n or c ≤ 0 change nothing.
 * On a CPU without AVX-512 (or AVX2) the check for that set asserts that
 * it is refused, so no check is skipped. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/colsum_kernels.h"

#define PT_TEST_SEED 0xC5C5u
#include "tests/unit/rand_fixture.h"

static const pt_sgemm_impl isas[] = {PT_SGEMM_AVX512, PT_SGEMM_AVX2};

/* n × c floats, each rnd() · 2^e with e uniform in [-20, 20] */
static float *spread(int n, int c)
{
    float *m = rnd_floats((size_t)n * (size_t)c, 1.0f);
    for (size_t i = 0; i < (size_t)n * (size_t)c; i++)
        m[i] = ldexpf(m[i], (int)(rnd_u() % 41u) - 20);
    return m;
}

/* c + guard doubles: random starting totals, then the guard's sentinel */
static double *totals(int c, int guard)
{
    double *t = malloc(sizeof(double) * (size_t)(c + guard));
    assert_non_null(t);
    for (int k = 0; k < c; k++) t[k] = (double)rnd() * 1e3;
    for (int k = c; k < c + guard; k++) t[k] = -777.0;
    return t;
}

/* the order, column by column: the oracle the reference is held to */
static void oracle(double *total, const float *m, int n, int c)
{
    for (int k = 0; k < c; k++)
        for (int r0 = 0; r0 < n; r0 += PT_SUM_BLOCK) {
            float part = 0.0f;
            for (int r = r0; r < n && r < r0 + PT_SUM_BLOCK; r++) part += m[(size_t)r * c + k];
            total[k] += (double)part;
        }
}

static void test_reference_order(void **state)
{
    (void)state;
    const int widths[] = {1, 3, 16, 25, 100, 257, 300};
    const int rows[] = {1, 15, 16, 17, 64, 100};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++)
        for (size_t h = 0; h < sizeof rows / sizeof rows[0]; h++) {
            const int c = widths[w], n = rows[h];
            float *m = spread(n, c);
            double *want = totals(c, 0), *got = malloc(sizeof(double) * (size_t)c);
            assert_non_null(got);
            memcpy(got, want, sizeof(double) * (size_t)c);
            oracle(want, m, n, c);
            assert_int_equal(pt_colsum_total_run(PT_SGEMM_SCALAR, got, m, n, c), 0);
            assert_memory_equal(got, want, sizeof(double) * (size_t)c);
            free(m);
            free(want);
            free(got);
        }
    /* Column 0: 1 then 2^-24 × 31 — each float chain absorbs its 2^-24s
     * after the 1 (ties to even) and the second block's 16 sum exactly, so
     * the order gives 1 + 2^-20; one float chain over all rows or blocks of
     * 32 give 1, a double sum 1 + 31·2^-24.  Column 1: 2^-24 × 16 (2^-20
     * exactly), then 1 and 2^-24 × 15 (1): 1 + 2^-20, a double sum again
     * 1 + 31·2^-24. */
    enum { N = 32 };
    float m[N * 2];
    for (int r = 0; r < N; r++) {
        m[r * 2] = r == 0 ? 1.0f : 0x1p-24f;
        m[r * 2 + 1] = r == 16 ? 1.0f : 0x1p-24f;
    }
    const pt_sgemm_impl all[] = {PT_SGEMM_SCALAR, PT_SGEMM_AVX512, PT_SGEMM_AVX2, PT_SGEMM_AUTO};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (!pt_sgemm_supported(all[i])) continue; /* refusal: test_isa_bits */
        double t[2] = {0.0, 0.0};
        assert_int_equal(pt_colsum_total_run(all[i], t, m, N, 2), 0);
        assert_true(t[0] == 1.0 + 0x1p-20);
        assert_true(t[1] == 1.0 + 0x1p-20);
    }
}

static void test_isa_bits(void **state)
{
    (void)state;
    enum { MAXC = 300, GUARD = 9 };
    const int rows[] = {1, 2, 7, 15, 16, 17, 33, 64, 100, 256, 257};
    for (size_t h = 0; h < sizeof rows / sizeof rows[0]; h++) {
        const int n = rows[h];
        for (int c = 1; c <= MAXC; c += (n > 64 ? 7 : 1)) {
            float *m = spread(n, c);
            double *want = totals(c, GUARD), *got = malloc(sizeof(double) * (size_t)(c + GUARD));
            assert_non_null(got);
            double *start = malloc(sizeof(double) * (size_t)(c + GUARD));
            assert_non_null(start);
            memcpy(start, want, sizeof(double) * (size_t)(c + GUARD));
            assert_int_equal(pt_colsum_total_run(PT_SGEMM_SCALAR, want, m, n, c), 0);
            for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
                memcpy(got, start, sizeof(double) * (size_t)(c + GUARD));
                if (!pt_sgemm_supported(isas[i])) {
                    assert_int_equal(pt_colsum_total_run(isas[i], got, m, n, c), -1);
                    assert_memory_equal(got, start, sizeof(double) * (size_t)(c + GUARD));
                    continue;
                }
                assert_int_equal(pt_colsum_total_run(isas[i], got, m, n, c), 0);
                if (memcmp(got, want, sizeof(double) * (size_t)(c + GUARD)))
                    fail_msg("%s: n %d c %d: the sums differ from the scalar reference",
                             pt_sgemm_impl_name(isas[i]), n, c);
            }
            for (int k = c; k < c + GUARD; k++) assert_true(want[k] == -777.0);
            /* the widest, as the ops call it */
            memcpy(got, start, sizeof(double) * (size_t)(c + GUARD));
            pt_colsum_total(got, m, n, c);
            assert_memory_equal(got, want, sizeof(double) * (size_t)(c + GUARD));
            free(m);
            free(want);
            free(got);
            free(start);
        }
    }
}

/* the filter's chunks: runs of whole blocks in turn, one call's bits */
static void test_chunks(void **state)
{
    (void)state;
    const int n = 256 + 64 + 37, c = 100;
    const int cuts[] = {0, 64, 256, 256 + 64, n};
    float *m = spread(n, c);
    const pt_sgemm_impl all[] = {PT_SGEMM_SCALAR, PT_SGEMM_AVX512, PT_SGEMM_AVX2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (!pt_sgemm_supported(all[i])) continue; /* refusal: test_isa_bits */
        double whole[100] = {0}, parts[100] = {0};
        assert_int_equal(pt_colsum_total_run(all[i], whole, m, n, c), 0);
        for (size_t k = 0; k + 1 < sizeof cuts / sizeof cuts[0]; k++)
            assert_int_equal(pt_colsum_total_run(all[i], parts, m + (size_t)cuts[k] * c,
                                                 cuts[k + 1] - cuts[k], c),
                             0);
        assert_memory_equal(parts, whole, sizeof whole);
    }
    free(m);
}

static void test_specials(void **state)
{
    (void)state;
    enum { N = 40, C = 21 };
    float m[N * C];
    for (int r = 0; r < N; r++)
        for (int k = 0; k < C; k++) {
            float v = 0.25f * (float)(r - k);
            if (k == 0) v = -0.0f;                                /* all -0: +0 */
            if (k == 1 && r == 3) v = INFINITY;                   /* +inf */
            if (k == 2 && r == 5) v = -INFINITY;                  /* -inf */
            if (k == 3) v = r == 2 ? INFINITY : r == 20 ? -INFINITY : v; /* NaN */
            if (k == 4 && r == 17) v = NAN;                       /* NaN */
            if (k == 5) v = 3.0e38f;                              /* float overflow: inf */
            m[r * C + k] = v;
        }
    double want[C];
    for (int k = 0; k < C; k++) want[k] = k == 0 ? -0.0 : 1.0;
    oracle(want, m, N, C);
    assert_true(want[0] == 0.0 && !signbit(want[0]));
    assert_true(isinf(want[1]) && want[1] > 0 && isinf(want[2]) && want[2] < 0);
    assert_true(isnan(want[3]) && isnan(want[4]) && isinf(want[5]));
    const pt_sgemm_impl all[] = {PT_SGEMM_SCALAR, PT_SGEMM_AVX512, PT_SGEMM_AVX2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (!pt_sgemm_supported(all[i])) continue; /* refusal: test_isa_bits */
        double got[C];
        for (int k = 0; k < C; k++) got[k] = k == 0 ? -0.0 : 1.0;
        assert_int_equal(pt_colsum_total_run(all[i], got, m, N, C), 0);
        for (int k = 0; k < C; k++)
            if (isnan(want[k]))
                assert_true(isnan(got[k])); /* which NaN's payload: not specified */
            else
                assert_memory_equal(&got[k], &want[k], sizeof(double));
    }
}

static void test_refusals(void **state)
{
    (void)state;
    float m[4 * 3] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    double t[3] = {0.5, 0.5, 0.5};
    const double start[3] = {0.5, 0.5, 0.5};
    assert_int_equal(pt_colsum_total_run(PT_SGEMM_OPENBLAS, t, m, 4, 3), -1);
    assert_int_equal(pt_colsum_total_run((pt_sgemm_impl)99, t, m, 4, 3), -1);
    assert_int_equal(pt_colsum_total_run((pt_sgemm_impl)-1, t, m, 4, 3), -1);
    assert_memory_equal(t, start, sizeof t);
    const pt_sgemm_impl all[] = {PT_SGEMM_AUTO, PT_SGEMM_SCALAR, PT_SGEMM_AVX512, PT_SGEMM_AVX2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (!pt_sgemm_supported(all[i])) continue; /* refusal: test_isa_bits */
        assert_int_equal(pt_colsum_total_run(all[i], t, m, 0, 3), 0);
        assert_int_equal(pt_colsum_total_run(all[i], t, m, -2, 3), 0);
        assert_int_equal(pt_colsum_total_run(all[i], t, m, 4, 0), 0);
        assert_int_equal(pt_colsum_total_run(all[i], t, m, 4, -1), 0);
        pt_colsum_total(t, m, 0, 3);
        assert_memory_equal(t, start, sizeof t);
        assert_int_equal(pt_colsum_total_run(all[i], t, m, 4, 3), 0);
        assert_true(t[0] == 22.5 && t[1] == 26.5 && t[2] == 30.5);
        memcpy(t, start, sizeof t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_order),
        cmocka_unit_test(test_isa_bits),
        cmocka_unit_test(test_chunks),
        cmocka_unit_test(test_specials),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests_name("colsum_kernels", tests, NULL, NULL);
}
