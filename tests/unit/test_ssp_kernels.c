/* test_ssp_kernels.c — the shifted softplus kernels (engine/model/
 * ssp_kernels.h, ssp_body.h):
 *   - AVX-512, AVX2 and the scalar reference give the same bits, values and
 *     σ, over a sweep of every binade of the whole float range (positive and
 *     negative, denormals, both saturations, ±inf, NaN);
 *   - run lengths 1..200 (four-vector blocks, single vectors, the masked last
 *     vector): each element is its scalar value, σ NULL gives the same
 *     values, nothing past the run is written;
 *   - pt_ssp_forward with a bias is the flat kernel on x + b, element for
 *     element;
 *   - pt_ssp_forward_stream_run (σ through non-temporal stores) gives the
 *     scalar bits for lengths 1..300 with σ aligned to a cache line and
 *     misaligned (plain stores then), σ NULL too, and writes nothing past
 *     the run;
 *   - pt_ssp_forward_copy_run (the values also into a second array, through
 *     non-temporal stores where it is aligned to a vector) gives the scalar
 *     bits in both arrays over the sweep and for lengths 1..300 with the
 *     copy at a cache line, one, four and eight floats past it (eight: a
 *     vector of AVX2 but not of AVX-512), writes nothing past the run in
 *     either, and is refused by OpenBLAS and by an absent instruction set;
 *   - the error against double over the whole finite float range (the
 *     filter's range is also swept more densely in test_schnet_ops_sweep.c)
 *     within the bounds stated in ssp_body.h, and the special values:
 *     ssp(0) = 0 exactly, σ(0) = ½, ssp(+inf) = +inf with σ = 1, ssp(−inf) =
 *     −ln 2 with σ ≈ e^−87, ssp(NaN) = NaN, ssp(v) = v − ln 2 rounded for
 *     huge v; and around every edge of the table's intervals, the same bits
 *     on every instruction set within the bound;
 *   - σ̃(s) = 1 − ½e^−s, the derivative recovered from s = ssp(v)
 *     (pt_ssp_dsig_run, pt_ssp_backward_s: the filter's backward): the
 *     same bits on every instruction set (sweep of s and of ssp(v), both
 *     with specials; lengths 1..200, nothing past the run), within its
 *     absolute bound of σ(v) over the whole range, σ̃ of the limits, and
 *     pt_ssp_backward_s = pt_ssp_backward on σ̃'s array, bit for bit.
 * On a CPU without AVX-512 (or AVX2) the corresponding checks assert that
 * the kernel is refused (-1), so no check is skipped. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/schnet_ops.h"
#include "engine/model/ssp_kernels.h"

#define PT_TEST_SEED 0x55A1u
#include "tests/unit/rand_fixture.h"

static const pt_sgemm_impl isas[] = {PT_SGEMM_AVX512, PT_SGEMM_AVX2};

/* every 2^s-th bit pattern of one sign, plus both signs of the specials */
static float *sweep(size_t *count, uint32_t stride)
{
    const float specials[] = {0.0f, 1e-45f, 1e-38f, 1e-20f, 0.5f, 1.0f, 86.99f, 87.0f,
                              87.01f, 88.0f, 104.0f, 1e30f, 3.4028235e38f, INFINITY, NAN};
    size_t cap = 2 * ((size_t)0x80000000u / stride + 1) + 64, n = 0;
    float *x = malloc(cap * sizeof(float));
    assert_non_null(x);
    for (uint64_t b = 0; b < 0x7F800000u; b += stride) {
        float v;
        uint32_t w = (uint32_t)b;
        memcpy(&v, &w, sizeof v);
        x[n++] = v;
        x[n++] = -v;
    }
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        x[n++] = specials[i];
        x[n++] = -specials[i];
    }
    *count = n;
    return x;
}

static void test_isa_bits(void **state)
{
    (void)state;
    size_t n;
    float *x = sweep(&n, (1u << 12) + 1u);
    float *ref = floats_copy(x, n), *ref_sig = floats_copy(x, n);
    assert_int_equal(pt_ssp_forward_run(PT_SGEMM_SCALAR, ref, ref_sig, n), 0);
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        float *got = floats_copy(x, n), *sig = floats_copy(x, n);
        if (!pt_sgemm_supported(isas[i])) {
            assert_int_equal(pt_ssp_forward_run(isas[i], got, sig, n), -1);
        } else {
            assert_int_equal(pt_ssp_forward_run(isas[i], got, sig, n), 0);
            for (size_t k = 0; k < n; k++)
                if (memcmp(&got[k], &ref[k], 4) || memcmp(&sig[k], &ref_sig[k], 4))
                    fail_msg("%s: ssp(%a) = %a σ %a, scalar %a σ %a",
                             pt_sgemm_impl_name(isas[i]), (double)x[k], (double)got[k],
                             (double)sig[k], (double)ref[k], (double)ref_sig[k]);
        }
        free(got);
        free(sig);
    }
    assert_int_equal(pt_ssp_forward_run(PT_SGEMM_OPENBLAS, ref, NULL, 1), -1);
    free(x);
    free(ref);
    free(ref_sig);
}

static void test_lengths(void **state)
{
    (void)state;
    enum { MAXLEN = 200, GUARD = 20 };
    float *src = rnd_floats(MAXLEN, 12.0f);
    float want[MAXLEN], want_sig[MAXLEN];
    memcpy(want, src, sizeof want);
    assert_int_equal(pt_ssp_forward_run(PT_SGEMM_SCALAR, want, want_sig, MAXLEN), 0);
    const pt_sgemm_impl all[] = {PT_SGEMM_AUTO, PT_SGEMM_AVX512, PT_SGEMM_AVX2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (!pt_sgemm_supported(all[i])) continue;   /* refusal: test_isa_bits */
        for (size_t len = 1; len <= MAXLEN; len++) {
            float x[MAXLEN + GUARD], sig[MAXLEN + GUARD], y[MAXLEN + GUARD];
            for (size_t k = 0; k < MAXLEN + GUARD; k++) x[k] = sig[k] = y[k] = -7.0f;
            memcpy(x, src, len * sizeof(float));
            memcpy(y, src, len * sizeof(float));
            assert_int_equal(pt_ssp_forward_run(all[i], x, sig, len), 0);
            assert_int_equal(pt_ssp_forward_run(all[i], y, NULL, len), 0);
            assert_memory_equal(x, want, len * sizeof(float));
            assert_memory_equal(sig, want_sig, len * sizeof(float));
            assert_memory_equal(y, want, len * sizeof(float));
            for (size_t k = len; k < MAXLEN + GUARD; k++) {
                assert_true(x[k] == -7.0f);
                assert_true(sig[k] == -7.0f);
                assert_true(y[k] == -7.0f);
            }
        }
    }
    free(src);
}

static void test_stream(void **state)
{
    (void)state;
    enum { MAXLEN = 300, GUARD = 20, SPAN = MAXLEN + GUARD + 16 };
    float *src = rnd_floats(MAXLEN, 12.0f);
    float want[MAXLEN], want_sig[MAXLEN];
    memcpy(want, src, sizeof want);
    assert_int_equal(pt_ssp_forward_run(PT_SGEMM_SCALAR, want, want_sig, MAXLEN), 0);
    /* σ at a cache line (the streaming blocks) and one and four floats past it */
    float *line = aligned_alloc(64, SPAN * sizeof(float));
    assert_non_null(line);
    const pt_sgemm_impl all[] = {PT_SGEMM_AUTO, PT_SGEMM_AVX512, PT_SGEMM_AVX2, PT_SGEMM_SCALAR};
    const size_t offs[] = {0, 1, 4};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        float x[MAXLEN + GUARD];
        if (!pt_sgemm_supported(all[i])) {
            assert_int_equal(pt_ssp_forward_stream_run(all[i], x, line, 1), -1);
            continue;
        }
        for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++)
            for (size_t len = 1; len <= MAXLEN; len++) {
                float *sig = line + offs[o];
                for (size_t k = 0; k < MAXLEN + GUARD; k++) x[k] = sig[k] = -7.0f;
                memcpy(x, src, len * sizeof(float));
                assert_int_equal(pt_ssp_forward_stream_run(all[i], x, sig, len), 0);
                if (memcmp(x, want, len * sizeof(float)) ||
                    memcmp(sig, want_sig, len * sizeof(float)))
                    fail_msg("%s, σ %zu floats past a line, length %zu: not the scalar bits",
                             pt_sgemm_impl_name(all[i]), offs[o], len);
                for (size_t k = len; k < MAXLEN + GUARD; k++)
                    assert_true(x[k] == -7.0f && sig[k] == -7.0f);
                memcpy(x, src, len * sizeof(float));
                assert_int_equal(pt_ssp_forward_stream_run(all[i], x, NULL, len), 0);
                assert_memory_equal(x, want, len * sizeof(float));
            }
    }
    free(line);
    free(src);
}

/* the copy's run and its guard after the scalar bits; x and copy after */
static void check_copy(pt_sgemm_impl impl, size_t off, const float *x, const float *copy,
                       const float *want, size_t len, size_t span)
{
    for (size_t k = 0; k < span; k++) {
        const float w = k < len ? want[k] : -7.0f;
        if (memcmp(&x[k], &w, 4) || memcmp(&copy[k], &w, 4))
            fail_msg("%s, copy %zu floats past a line, length %zu, element %zu: x %a copy %a, "
                     "want %a",
                     pt_sgemm_impl_name(impl), off, len, k, (double)x[k], (double)copy[k],
                     (double)w);
    }
}

static void test_copy(void **state)
{
    (void)state;
    enum { MAXLEN = 300, SPAN = MAXLEN + 20 };
    float *src = rnd_floats(MAXLEN, 12.0f), want[MAXLEN];
    memcpy(want, src, sizeof want);
    assert_int_equal(pt_ssp_forward_run(PT_SGEMM_SCALAR, want, NULL, MAXLEN), 0);
    size_t n;
    float *sw = sweep(&n, (1u << 14) + 1u), *sw_want = floats_copy(sw, n);
    assert_int_equal(pt_ssp_forward_run(PT_SGEMM_SCALAR, sw_want, NULL, n), 0);
    float *big = aligned_alloc(64, (n + 16) * sizeof(float));
    float *line = aligned_alloc(64, (SPAN + 16) * sizeof(float));
    assert_non_null(big);
    assert_non_null(line);
    float x[SPAN];
    assert_int_equal(pt_ssp_forward_copy_run(PT_SGEMM_OPENBLAS, x, line, 1), -1);
    const pt_sgemm_impl all[] = {PT_SGEMM_AUTO, PT_SGEMM_AVX512, PT_SGEMM_AVX2, PT_SGEMM_SCALAR};
    const size_t offs[] = {0, 1, 4, 8};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (!pt_sgemm_supported(all[i])) {
            assert_int_equal(pt_ssp_forward_copy_run(all[i], x, line, 1), -1);
            continue;
        }
        float *xs = floats_copy(sw, n);
        for (size_t k = 0; k < n + 16; k++) big[k] = -7.0f;
        assert_int_equal(pt_ssp_forward_copy_run(all[i], xs, big, n), 0);
        check_copy(all[i], 0, xs, big, sw_want, n, n);
        for (size_t k = n; k < n + 16; k++) assert_true(big[k] == -7.0f);
        free(xs);
        for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++)
            for (size_t len = 1; len <= MAXLEN; len++) {
                float *copy = line + offs[o];
                for (size_t k = 0; k < SPAN; k++) x[k] = copy[k] = -7.0f;
                memcpy(x, src, len * sizeof(float));
                assert_int_equal(pt_ssp_forward_copy_run(all[i], x, copy, len), 0);
                check_copy(all[i], offs[o], x, copy, want, len, SPAN);
            }
    }
    free(line);
    free(big);
    free(sw);
    free(sw_want);
    free(src);
}

static void test_bias_rows(void **state)
{
    (void)state;
    enum { N = 7, C = 37 };
    float *x = rnd_floats(N * C, 6.0f), *b = rnd_floats(C, 3.0f);
    float *flat = floats_copy(x, N * C);
    float sig[N * C], flat_sig[N * C];
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c++) flat[r * C + c] = x[r * C + c] + b[c];
    pt_ssp_forward(x, sig, b, N, C);
    assert_int_equal(pt_ssp_forward_run(PT_SGEMM_SCALAR, flat, flat_sig, N * C), 0);
    assert_memory_equal(x, flat, sizeof(float) * N * C);
    assert_memory_equal(sig, flat_sig, sizeof sig);
    free(x);
    free(b);
    free(flat);
}

static double ssp_ref(double x) { return log1p(exp(-fabs(x))) + fmax(x, 0.0) - PT_LN2; }
static double sig_ref(double x) { return 1.0 / (1.0 + exp(-x)); }

/* the accuracy tests' inputs: every 2^9+1-th bit pattern, both signs, and
 * the specials (x), s = ssp(x) and, unless sig is NULL, σ(x) */
static void accuracy_sweep(size_t *n, float **x, float **s, float **sig)
{
    *x = sweep(n, (1u << 9) + 1u);
    *s = floats_copy(*x, *n);
    if (sig) *sig = floats_copy(*x, *n);
    pt_ssp_forward(*s, sig ? *sig : NULL, NULL, 1, (int)*n);
}

/* The bounds of ssp_body.h over the whole finite range (every 2^9+1-th bit
 * pattern, both signs: ≈ 8.4 million inputs), in u = 2^−24:
 *   ssp: |got − want| ≤ SSP_BOUND u · max(|want|, ln 2) (8 degree-7
 *        polynomials, session 11: fit 0.39 + Horner 0.29 + 0.72 + clamp
 *        0.03 + the add 0.72; session 10's 32 degree-5 ones had 2.6 here,
 *        the exp + log1p form 3.7, 3.62 u over every float);
 *   σ:   |got − want| ≤ 3.0 u · want + 2e−38 (e^−|v| is clamped at e^−87).
 * Measured on this sweep (2026-11-26): ssp 1.47 u (session 10's table 1.70),
 * σ 2.80 u (σ 2.97 u over every float, v ≈ −12.5). */
#define SSP_BOUND 2.2
static void test_accuracy_and_specials(void **state)
{
    (void)state;
    size_t n;
    float *x, *s, *sig;
    accuracy_sweep(&n, &x, &s, &sig);
    const double u = ldexp(1.0, -24);
    double worst_s = 0.0, worst_g = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double v = x[i];
        if (isnan(v) || isinf(v)) continue;   /* below */
        const double ws = ssp_ref(v), wg = sig_ref(v);
        const double es = fabs(s[i] - ws) / (u * fmax(fabs(ws), PT_LN2));
        const double eg =
            fabs(sig[i] - wg) <= 2e-38 ? 0.0 : (fabs(sig[i] - wg) - 2e-38) / (u * wg);
        if (es > SSP_BOUND) fail_msg("ssp(%a) = %a, want %.9g (%.2f u)", v, (double)s[i], ws, es);
        if (eg > 3.0) fail_msg("σ(%a) = %a, want %.9g (%.2f u)", v, (double)sig[i], wg, eg);
        worst_s = fmax(worst_s, es);
        worst_g = fmax(worst_g, eg);
    }
    print_message("ssp whole range: %zu inputs, max error ssp %.2f u, sigma %.2f u\n", n,
                  worst_s, worst_g);
    float v[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 3.4028235e38f, 1e30f}, g[7];
    pt_ssp_forward(v, g, NULL, 1, 7);
    assert_true(v[0] == 0.0f && g[0] == 0.5f);
    assert_true(v[1] == 0.0f && g[1] == 0.5f);
    assert_true(isinf(v[2]) && v[2] > 0.0f && g[2] == 1.0f);
    assert_true(v[3] == -(float)PT_LN2 && g[3] > 0.0f && g[3] <= 2e-38f);
    assert_true(isnan(v[4]));   /* a diverged pre-activation is not hidden as −ln 2 */
    assert_true(v[5] == 3.4028235e38f && g[5] == 1.0f);
    assert_true(v[6] == 1e30f && g[6] == 1.0f);
    free(x);
    free(s);
    free(sig);
}

/* Around every boundary of the table's intervals (ssp_table.py: x = 1 + t S
 * crosses 1.5, 2, 3, … 12 at t = 0.6875 · 1, 2, 4, 6, 10, 14, 22; x's
 * rounding may put a t a few ulps to either side) and the clamp at 20.5:
 * 64 floats either side of each, both signs, every instruction set gives the
 * scalar bits and every value is within SSP_BOUND. */
static void test_interval_edges(void **state)
{
    (void)state;
    static const float edges[] = {0.6875f, 1.375f, 2.75f, 4.125f, 6.875f, 9.625f, 15.125f, 20.5f};
    enum { SIDE = 64, NE = sizeof edges / sizeof edges[0], N = NE * 2 * (2 * SIDE + 1) };
    float x[N], ref[N];
    size_t n = 0;
    for (size_t e = 0; e < NE; e++) {
        float t = edges[e];
        for (int k = 0; k < SIDE; k++) t = nextafterf(t, 0.0f);
        for (int k = 0; k <= 2 * SIDE; k++, t = nextafterf(t, INFINITY)) {
            x[n++] = t;
            x[n++] = -t;
        }
    }
    memcpy(ref, x, sizeof ref);
    assert_int_equal(pt_ssp_forward_run(PT_SGEMM_SCALAR, ref, NULL, N), 0);
    const double u = ldexp(1.0, -24);
    for (size_t i = 0; i < N; i++) {
        const double want = ssp_ref(x[i]);
        const double err = fabs(ref[i] - want) / (u * fmax(fabs(want), PT_LN2));
        if (err > SSP_BOUND)
            fail_msg("ssp(%a) = %a, want %.9g (%.2f u)", (double)x[i], (double)ref[i], want, err);
    }
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        float got[N];
        memcpy(got, x, sizeof got);
        if (!pt_sgemm_supported(isas[i])) {
            assert_int_equal(pt_ssp_forward_run(isas[i], got, NULL, N), -1);
            continue;
        }
        assert_int_equal(pt_ssp_forward_run(isas[i], got, NULL, N), 0);
        for (size_t k = 0; k < N; k++)
            if (memcmp(&got[k], &ref[k], 4))
                fail_msg("%s: ssp(%a) = %a, scalar %a", pt_sgemm_impl_name(isas[i]), (double)x[k],
                         (double)got[k], (double)ref[k]);
    }
}

/* σ̃ for every instruction set against the scalar reference: on raw sweep
 * values as s (any float, specials included) and on s = ssp(sweep), with
 * d = 1 (σ̃ itself) and d = the sweep (the product) */
static void test_dsig_isa_bits(void **state)
{
    (void)state;
    size_t n;
    float *x = sweep(&n, (1u << 12) + 1u);
    float *sv = floats_copy(x, n);
    pt_ssp_forward(sv, NULL, NULL, 1, (int)n);
    const float *ss[] = {x, sv};
    for (int which = 0; which < 2; which++)
        for (int ones = 0; ones < 2; ones++) {
            float *ref = floats_copy(x, n);
            if (ones)
                for (size_t k = 0; k < n; k++) ref[k] = 1.0f;
            float *src = floats_copy(ref, n);
            assert_int_equal(pt_ssp_dsig_run(PT_SGEMM_SCALAR, ref, ss[which], n), 0);
            for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
                float *got = floats_copy(src, n);
                if (!pt_sgemm_supported(isas[i])) {
                    assert_int_equal(pt_ssp_dsig_run(isas[i], got, ss[which], n), -1);
                } else {
                    assert_int_equal(pt_ssp_dsig_run(isas[i], got, ss[which], n), 0);
                    for (size_t k = 0; k < n; k++)
                        if (memcmp(&got[k], &ref[k], 4))
                            fail_msg("%s: d %a · σ̃(%a) = %a, scalar %a",
                                     pt_sgemm_impl_name(isas[i]), (double)src[k],
                                     (double)ss[which][k], (double)got[k], (double)ref[k]);
                }
                free(got);
            }
            free(ref);
            free(src);
        }
    assert_int_equal(pt_ssp_dsig_run(PT_SGEMM_OPENBLAS, x, sv, 1), -1);
    free(x);
    free(sv);
}

static void test_dsig_lengths(void **state)
{
    (void)state;
    enum { MAXLEN = 200, GUARD = 20 };
    float *s = rnd_floats(MAXLEN, 12.0f), *d = rnd_floats(MAXLEN, 3.0f);
    float want[MAXLEN];
    memcpy(want, d, sizeof want);
    assert_int_equal(pt_ssp_dsig_run(PT_SGEMM_SCALAR, want, s, MAXLEN), 0);
    const pt_sgemm_impl all[] = {PT_SGEMM_AUTO, PT_SGEMM_AVX512, PT_SGEMM_AVX2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (!pt_sgemm_supported(all[i])) continue;   /* refusal: test_dsig_isa_bits */
        for (size_t len = 1; len <= MAXLEN; len++) {
            float y[MAXLEN + GUARD];
            for (size_t k = 0; k < MAXLEN + GUARD; k++) y[k] = -7.0f;
            memcpy(y, d, len * sizeof(float));
            assert_int_equal(pt_ssp_dsig_run(all[i], y, s, len), 0);
            assert_memory_equal(y, want, len * sizeof(float));
            for (size_t k = len; k < MAXLEN + GUARD; k++) assert_true(y[k] == -7.0f);
        }
    }
    free(s);
    free(d);
}

/* pt_ssp_backward_s is pt_ssp_backward on the array of σ̃: the same
 * products and the same column sums, bit for bit (rows past one block of
 * 4·PT_SUM_BLOCK, a ragged last block) */
static void test_backward_s(void **state)
{
    (void)state;
    enum { N = 150, C = 37 };
    float *v = rnd_floats(N * C, 8.0f), *d = rnd_floats(N * C, 2.0f);
    float *d2 = floats_copy(d, N * C), *sig = floats_copy(v, N * C);
    pt_ssp_forward(v, NULL, NULL, N, C);   /* v ← s */
    for (int k = 0; k < N * C; k++) sig[k] = 1.0f;
    assert_int_equal(pt_ssp_dsig_run(PT_SGEMM_SCALAR, sig, v, N * C), 0);
    float db[C], db2[C];
    for (int c = 0; c < C; c++) db[c] = db2[c] = 0.25f * (float)c;
    pt_ssp_backward_s(d, db, v, N, C);
    pt_ssp_backward(d2, db2, sig, N, C);
    assert_memory_equal(d, d2, sizeof(float) * N * C);
    assert_memory_equal(db, db2, sizeof db);
    pt_ssp_backward_s(d, NULL, v, N, C);   /* no sums: only the product */
    pt_ssp_backward(d2, NULL, sig, N, C);
    assert_memory_equal(d, d2, sizeof(float) * N * C);
    free(v);
    free(d);
    free(d2);
    free(sig);
}

/* σ̃(ssp(v)) against σ(v) in double over the whole finite range (every
 * 2^9+1-th bit pattern, both signs), absolute, in u = 2^−24 (ssp_body.h):
 *   |σ̃ − σ| ≤ (1 − σ)(|δs| + |ε_e|) + ½ u,  δs ssp's error (≤ 2.3 u ·
 *   max(|s|, ln 2), and (1 − σ)·max(|s|, ln 2) ≤ ln 2), ε_e the exp's
 *   relative error (≤ 2 u) — together ≤ 4.1 u, asserted; and σ̃ ∈ [0, 1].
 * The limits: σ̃(ssp(+inf)) = 1, σ̃(ssp(−inf)) = σ̃(−ln 2) = 0,
 * σ̃(ssp(0)) = ½, σ̃(NaN) = NaN. */
static void test_dsig_accuracy(void **state)
{
    (void)state;
    size_t n;
    float *x, *s, *g;
    accuracy_sweep(&n, &x, &s, NULL);
    g = floats_copy(x, n);
    for (size_t k = 0; k < n; k++) g[k] = 1.0f;
    assert_int_equal(pt_ssp_dsig_run(PT_SGEMM_AUTO, g, s, n), 0);
    const double u = ldexp(1.0, -24);
    double worst = 0.0, worst_v = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double v = x[i];
        if (isnan(v) || isinf(v)) continue;   /* below */
        const double e = fabs(g[i] - sig_ref(v)) / u;
        if (e > 4.1 || !(g[i] >= 0.0f && g[i] <= 1.0f))
            fail_msg("σ̃(ssp(%a)) = %a, want %.9g (%.2f u)", v, (double)g[i], sig_ref(v), e);
        if (e > worst) {
            worst = e;
            worst_v = v;
        }
    }
    print_message("sigma from ssp whole range: %zu inputs, max error %.2f u absolute (v = %g)\n",
                  n, worst, worst_v);
    float v[] = {INFINITY, -INFINITY, 0.0f, NAN}, one[] = {1.0f, 1.0f, 1.0f, 1.0f};
    pt_ssp_forward(v, NULL, NULL, 1, 4);
    assert_int_equal(pt_ssp_dsig_run(PT_SGEMM_AUTO, one, v, 4), 0);
    assert_true(one[0] == 1.0f && one[1] == 0.0f && one[2] == 0.5f && isnan(one[3]));
    free(x);
    free(s);
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isa_bits),
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_bias_rows),
        cmocka_unit_test(test_accuracy_and_specials),
        cmocka_unit_test(test_interval_edges),
        cmocka_unit_test(test_dsig_isa_bits),
        cmocka_unit_test(test_dsig_lengths),
        cmocka_unit_test(test_backward_s),
        cmocka_unit_test(test_dsig_accuracy),
    };
    return cmocka_run_group_tests_name("ssp_kernels", tests, NULL, NULL);
}
