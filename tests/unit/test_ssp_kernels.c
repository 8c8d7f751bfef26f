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
 *   - the error against double over the whole finite float range (the
 *     filter's range is also swept more densely in test_schnet_ops_sweep.c)
 *     within the bounds stated in ssp_body.h, and the special values:
 *     ssp(0) = 0 exactly, σ(0) = ½, ssp(+inf) = +inf with σ = 1, ssp(−inf) =
 *     −ln 2 with σ ≈ e^−87, ssp(NaN) = NaN, ssp(v) = v − ln 2 rounded for
 *     huge v.
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

/* The bounds of ssp_body.h over the whole finite range (every 2^9+1-th bit
 * pattern, both signs: ≈ 8.4 million inputs), in u = 2^−24:
 *   ssp: |got − want| ≤ 3.7 u · max(|want|, ln 2);
 *   σ:   |got − want| ≤ 3.0 u · want + 2e−38 (e^−|v| is clamped at e^−87).
 * Measured over every float (all 2^32, 2026-11-26): ssp 3.62 u (v ≈
 * −2.8e−3, the shift's cancellation), σ 2.97 u (v ≈ −12.5); this sweep's
 * inputs reach 3.43 u and 2.80 u. */
static void test_accuracy_and_specials(void **state)
{
    (void)state;
    size_t n;
    float *x = sweep(&n, (1u << 9) + 1u);
    float *s = floats_copy(x, n), *sig = floats_copy(x, n);
    pt_ssp_forward(s, sig, NULL, 1, (int)n);
    const double u = ldexp(1.0, -24);
    double worst_s = 0.0, worst_g = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double v = x[i];
        if (isnan(v) || isinf(v)) continue;   /* below */
        const double ws = ssp_ref(v), wg = sig_ref(v);
        const double es = fabs(s[i] - ws) / (u * fmax(fabs(ws), PT_LN2));
        const double eg =
            fabs(sig[i] - wg) <= 2e-38 ? 0.0 : (fabs(sig[i] - wg) - 2e-38) / (u * wg);
        if (es > 3.7) fail_msg("ssp(%a) = %a, want %.9g (%.2f u)", v, (double)s[i], ws, es);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isa_bits),
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_bias_rows),
        cmocka_unit_test(test_accuracy_and_specials),
    };
    return cmocka_run_group_tests_name("ssp_kernels", tests, NULL, NULL);
}
