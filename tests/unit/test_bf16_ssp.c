/* test_bf16_ssp.c — the bf16 filter network's softplus and σ̃
 * (engine/model/bf16_ssp.h, bf16_ssp_body.h):
 *   - error against double over a sweep of every binade of the whole float
 *     range (both signs; every 257th bit pattern, 16.7 M values) within the
 *     bounds bf16_ssp_body.h states: ssp~ within 3e-6 + 2^-23|v|; σ̃ of
 *     the bf16-rounded ssp~ within (1 − σ)(e^δ − 1) + 1e-6, δ = 2^-8 |ssp| +
 *     3e-6 + 2^-23 |v|; the measured maxima are printed;
 *   - the limits: no NaN or inf for finite input, ssp~(v) → v − ln 2 for
 *     large v (v ≥ 18 and up to FLT_MAX), → −ln 2 for very negative v (and
 *     −inf), +inf → +inf, NaN → NaN, σ̃ ∈ [0, 1], σ̃(+inf) = 1, σ̃(NaN) = NaN;
 *   - the AVX-512 loops give the scalar reference's bits: pt_bf16_ssp_run
 *     over run lengths 1..300 (blocks, single vectors, the masked last one;
 *     nothing past the run written) and over the sweep; pt_bf16_dssp_mul
 *     from pairs and from rows, widths 1..130, odd and even row counts,
 *     padded leading dimensions, nothing outside the rows × n written;
 *   - pt_bf16_ssp_map is the run over rows × n;
 *   - as the forward product's epilogue with C not kept (ssp~ applied as
 *     the band is rounded): bf16 rows and pairs equal the product,
 *     pt_bf16_ssp_run and pt_bf16_pairs_pack in sequence;
 *   - as the product's epilogue (bf16.h dssp_s1, the filter's dS1): C and
 *     its pairs equal the product, pt_bf16_dssp_mul and pt_bf16_pairs_pack
 *     in sequence, s1 as pairs and rows, odd rows, two threads; with C not
 *     kept, the pairs alone and the column sums (col_sums: runs of 12 rows
 *     in float, added in double); an s1 format
 *     or ld it cannot read is PT_BF16_EFORMAT, the portable kernel
 *     PT_BF16_EFUSED, C untouched.
 * On a CPU without AVX512-BF16 the same entry points run the reference,
 * and the comparisons hold trivially (the bounds still bind). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/bf16_ssp.h"

#define PT_TEST_SEED 0xB55Fu
#include "tests/unit/rand_fixture.h"

static const double LN2 = 0.69314718055994530942;

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static uint32_t f_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* the double references */
static double ssp_d(double v) { return fmax(v, 0.0) + log1p(exp(-fabs(v))) - LN2; }
static double sig_d(double v) { return v >= 0 ? 1.0 / (1.0 + exp(-v)) : exp(v) / (1.0 + exp(v)); }
/* 1 − σ without cancellation */
static double one_minus_sig_d(double v) { return sig_d(-v); }

static float bf16_round(float x) { return pt_bf16_to_float(pt_bf16_from_float(x)); }

static void test_accuracy(void **state)
{
    (void)state;
    double worst_ssp = 0, worst_sig = 0, worst_sig_abs = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 257) {
        const float v = bits_f((uint32_t)u);
        if (!isfinite(v)) continue;
        const float s = pt_bf16_ssp_ref(v);
        assert_true(isfinite(s));
        const double want = ssp_d(v), err = fabs((double)s - want);
        const double room_ssp = 3e-6 + ldexp(fabs(v), -23);
        if (err > room_ssp) {
            printf("ssp~(%.9g) = %.9g, want %.9g\n", v, s, want);
            fail();
        }
        if (err - ldexp(fabs(v), -23) > worst_ssp) worst_ssp = err - ldexp(fabs(v), -23);
        const float sg = pt_bf16_dssp_ref(bf16_round(s));
        assert_true(sg >= 0.0f && sg <= 1.0f);
        const double delta = ldexp(fabs(want), -8) + room_ssp;
        const double room = one_minus_sig_d(v) * expm1(delta) + 1e-6;
        const double e2 = fabs((double)sg - sig_d(v));
        if (e2 > room) {
            printf("σ~(%.9g) = %.9g, want %.9g (room %.3g)\n", v, sg, sig_d(v), room);
            fail();
        }
        if (e2 - one_minus_sig_d(v) * expm1(delta) > worst_sig)
            worst_sig = e2 - one_minus_sig_d(v) * expm1(delta);
        if (e2 > worst_sig_abs) worst_sig_abs = e2;
    }
    printf("# ssp~ worst |err| - 2^-23|v|: %.3g; σ~ worst past the rounding term: %.3g, "
           "worst absolute: %.3g\n",
           worst_ssp, worst_sig, worst_sig_abs);
}

static void test_limits(void **state)
{
    (void)state;
    /* large v: v − ln 2 to v's own rounding */
    for (float v = 18.0f; v < 3e38f; v *= 1.37f) {
        const float s = pt_bf16_ssp_ref(v);
        assert_true(isfinite(s));
        assert_true(fabs((double)s - ((double)v - LN2)) <= 1e-5 + ldexp(v, -23));
        assert_true(pt_bf16_dssp_ref(bf16_round(s)) == 1.0f);
    }
    assert_true(pt_bf16_ssp_ref(FLT_MAX) == FLT_MAX);
    /* very negative v: −ln 2 */
    for (float v = -18.0f; v > -3e38f; v *= 1.37f) {
        const float s = pt_bf16_ssp_ref(v);
        assert_true(fabs((double)s + LN2) <= 1e-5);
        const float sg = pt_bf16_dssp_ref(bf16_round(s));
        assert_true(sg >= 0.0f && sg <= 2e-3f); /* bf16(s) = −0.6914: σ~ = 1.7e-3 */
    }
    assert_true(fabs((double)pt_bf16_ssp_ref(-INFINITY) + LN2) <= 1e-5);
    assert_true(isinf(pt_bf16_ssp_ref(INFINITY)) && pt_bf16_ssp_ref(INFINITY) > 0);
    assert_true(isnan(pt_bf16_ssp_ref(NAN)));
    assert_true(isnan(pt_bf16_ssp_ref(-NAN)));
    assert_true(fabsf(pt_bf16_ssp_ref(0.0f)) <= 1e-5f);
    assert_true(pt_bf16_dssp_ref(INFINITY) == 1.0f);
    assert_true(isnan(pt_bf16_dssp_ref(NAN)));
    assert_true(fabsf(pt_bf16_dssp_ref(0.0f) - 0.5f) <= 1e-5f);
}

/* the sweep's values through the vector loop: the reference's bits (NaN:
 * a NaN) */
static void test_vector_bits(void **state)
{
    (void)state;
    const size_t n = 1u << 16;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    assert_non_null(x);
    assert_non_null(y);
    uint64_t u = 0;
    while (u < (1ull << 32)) {
        size_t m = 0;
        for (; m < n && u < (1ull << 32); m++, u += 257) x[m] = bits_f((uint32_t)u);
        memcpy(y, x, m * sizeof(float));
        pt_bf16_ssp_run(y, m);
        for (size_t i = 0; i < m; i++) {
            const float want = pt_bf16_ssp_ref(x[i]);
            if (isnan(want))
                assert_true(isnan(y[i]));
            else
                assert_int_equal(f_bits(y[i]), f_bits(want));
        }
    }
    /* lengths: blocks, vectors, masked tails; nothing past the run */
    for (size_t len = 1; len <= 300; len++) {
        for (size_t i = 0; i < len + 20; i++) x[i] = (rnd() - 0.5f) * 40.0f;
        memcpy(y, x, (len + 20) * sizeof(float));
        pt_bf16_ssp_run(y, len);
        for (size_t i = 0; i < len; i++)
            assert_int_equal(f_bits(y[i]), f_bits(pt_bf16_ssp_ref(x[i])));
        assert_memory_equal(y + len, x + len, 20 * sizeof(float));
    }
    /* the map: rows × n */
    for (size_t i = 0; i < 37 * 100; i++) x[i] = (rnd() - 0.5f) * 20.0f;
    memcpy(y, x, 37 * 100 * sizeof(float));
    pt_bf16_ssp_map(y, NULL, NULL, 37, 100);
    for (size_t i = 0; i < 37 * 100; i++)
        assert_int_equal(f_bits(y[i]), f_bits(pt_bf16_ssp_ref(x[i])));
    free(x);
    free(y);
}

/* pt_bf16_dssp_mul against c[r][j] * σ~(s1[r][j]) one at a time, from pairs
 * and from rows */
static void check_mul(int rows, int n, int fmt, int ldc, int lds)
{
    const size_t cn = (size_t)(rows + 1) * (size_t)ldc;
    float *c = malloc(cn * sizeof(float)), *want = malloc(cn * sizeof(float));
    float *s = malloc((size_t)rows * (size_t)n * sizeof(float));
    const size_t sn = fmt == PT_BF16_FMT_PAIRS ? (size_t)(rows + 1) / 2 * (size_t)lds
                                               : (size_t)rows * (size_t)lds;
    void *s1 = calloc(sn, fmt == PT_BF16_FMT_PAIRS ? sizeof(uint32_t) : sizeof(pt_bf16));
    assert_non_null(c);
    assert_non_null(want);
    assert_non_null(s);
    assert_non_null(s1);
    for (size_t i = 0; i < cn; i++) c[i] = want[i] = rnd() - 0.5f;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j++) {
            /* s1 values as the forward leaves them: ssp~ of a pre-activation */
            const float v = pt_bf16_ssp_ref((rnd() - 0.5f) * 24.0f);
            const pt_bf16 h = pt_bf16_from_float(v);
            s[(size_t)r * n + j] = pt_bf16_to_float(h);
            if (fmt == PT_BF16_FMT_PAIRS)
                ((uint32_t *)s1)[(size_t)(r / 2) * lds + j] |= (uint32_t)h << (r % 2 * 16);
            else
                ((pt_bf16 *)s1)[(size_t)r * lds + j] = h;
            want[(size_t)r * ldc + j] *= pt_bf16_dssp_ref(s[(size_t)r * n + j]);
        }
    pt_bf16_dssp_mul(c, (size_t)ldc, rows, n, s1, fmt, (size_t)lds);
    assert_memory_equal(c, want, cn * sizeof(float));
    free(c);
    free(want);
    free(s);
    free(s1);
}

static void test_dssp_mul(void **state)
{
    (void)state;
    /* 4, 20, 100, 116: a tail of 4 lanes, stored as one xmm (the model's 100) */
    static const int widths[] = {1, 4, 7, 16, 17, 20, 25, 64, 100, 112, 116, 130};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        const int n = widths[w];
        for (int rows = 1; rows <= 13; rows += 3) {
            check_mul(rows, n, PT_BF16_FMT_PAIRS, n, pt_bf16_pairs_ld(n));
            check_mul(rows, n, PT_BF16_FMT_PAIRS, n + 3, pt_bf16_pairs_ld(n) + 16);
            check_mul(rows, n, PT_BF16_FMT_ROWS, n, n);
            check_mul(rows, n, PT_BF16_FMT_ROWS, n + 5, n + 2);
        }
    }
}

/* The product epilogue (bf16.h's dssp_s1, the filter's dS1): C = (X·W) ⊙
 * σ̃(s1) kept, and its pairs, equal the product, pt_bf16_dssp_mul and
 * pt_bf16_pairs_pack one after the other, s1 as pairs and as rows, odd row
 * counts, one and two threads. */
static void check_epilogue(int m, int n, int k, int fmt)
{
    const size_t nx = (size_t)m * k, nw = (size_t)k * n, nc = (size_t)m * n;
    float *xf = rnd_floats(nx, 1.0f), *w = rnd_floats(nw, 1.0f), *want = rnd_floats(nc, 1.0f);
    float *c = rnd_floats(nc, 1.0f), *s = rnd_floats(nc, 6.0f);
    pt_bf16 *x = malloc(nx * sizeof(pt_bf16)), *s1h = malloc(nc * sizeof(pt_bf16));
    const int ld = pt_bf16_pairs_ld(n);
    const size_t np = (size_t)(m + 1) / 2 * ld;
    uint32_t *s1p = malloc(np * sizeof(uint32_t)), *p = malloc(np * sizeof(uint32_t));
    uint32_t *pw = malloc(np * sizeof(uint32_t));
    assert_true(x && s1h && s1p && p && pw);
    for (size_t i = 0; i < nc; i++) s[i] = pt_bf16_ssp_ref(s[i]);
    pt_bf16_from_floats(x, xf, nx);
    pt_bf16_pairs_pack(s1p, s, n, m, n, s1h, n);
    const void *s1 = fmt == PT_BF16_FMT_PAIRS ? (const void *)s1p : (const void *)s1h;
    const int lds = fmt == PT_BF16_FMT_PAIRS ? ld : n;
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, x,
                                     PT_BF16_FMT_ROWS, k, w, 0, n, 0.0f, want, n, NULL),
                     PT_BF16_OK);
    pt_bf16_dssp_mul(want, (size_t)n, m, n, s1, fmt, (size_t)lds);
    pt_bf16_pairs_pack(pw, want, n, m, n, NULL, 0);
    memset(p, 0xab, np * sizeof(uint32_t));
    const pt_bf16_epilogue e = {.dssp_s1 = s1, .dssp_fmt = fmt, .dssp_ld = lds, .pairs = p};
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, x,
                                     PT_BF16_FMT_ROWS, k, w, 0, n, 0.0f, c, n, &e),
                     PT_BF16_OK);
    if (memcmp(c, want, nc * sizeof(float)) != 0 || memcmp(p, pw, np * sizeof(uint32_t)) != 0)
        fail_msg("dssp epilogue m=%d n=%d k=%d fmt=%d threads=%d differs", m, n, k, fmt,
                 pt_bf16_get_threads());
    /* C not kept (its rows in the product's band), only the pairs, and the
     * column sums: runs of PT_BF16_EPI_ROWS rows in float, each run's sum in
     * double (one thread even when two are set) */
    double sums[130], sums_want[130];
    for (int j = 0; j < n; j++) sums[j] = sums_want[j] = 0.5 * j;
    for (int g = 0; g < m; g += PT_BF16_EPI_ROWS)
        for (int j = 0; j < n; j++) {
            float part = want[(size_t)g * n + j];
            for (int r = g + 1; r < m && r < g + PT_BF16_EPI_ROWS; r++)
                part += want[(size_t)r * n + j];
            sums_want[j] += part;
        }
    memset(p, 0xab, np * sizeof(uint32_t));
    const pt_bf16_epilogue e2 = {.dssp_s1 = s1, .dssp_fmt = fmt, .dssp_ld = lds, .pairs = p,
                                 .col_sums = sums};
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, x,
                                     PT_BF16_FMT_ROWS, k, w, 0, n, 0.0f, NULL, n, &e2),
                     PT_BF16_OK);
    assert_memory_equal(p, pw, np * sizeof(uint32_t));
    assert_memory_equal(sums, sums_want, (size_t)n * sizeof(double));
    free(xf), free(w), free(want), free(c), free(s), free(x), free(s1h), free(s1p), free(p);
    free(pw);
}

static void test_epilogue(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) {
        /* the epilogue needs the AVX512-BF16 kernel: refused below */
        return;
    }
    pt_bf16_set_kernel(PT_BF16_KERNEL_AVX512);
    const int shapes[][3] = {{256, 100, 100}, {1, 100, 100}, {37, 100, 100}, {7, 17, 2},
                             {13, 130, 31}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        check_epilogue(shapes[i][0], shapes[i][1], shapes[i][2], PT_BF16_FMT_PAIRS);
        check_epilogue(shapes[i][0], shapes[i][1], shapes[i][2], PT_BF16_FMT_ROWS);
    }
    pt_bf16_set_threads(2);
    check_epilogue(1001, 100, 100, PT_BF16_FMT_PAIRS);
    check_epilogue(1001, 100, 100, PT_BF16_FMT_ROWS);
    pt_bf16_set_threads(1);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* The softplus as the forward's epilogue (the filter's first product, the
 * node layer's u): with C not kept, bf16_avx512.c applies ssp~ as it
 * rounds the band (pt_bf16_avx512_ssp_pairs_rows / _ssp_round_rows); its
 * bf16 rows and pairs equal the product with its bias, pt_bf16_ssp_run and
 * pt_bf16_pairs_pack in sequence, bit for bit: pairs and rows, pairs
 * alone, rows alone (flat and with ldh > n), odd rows, widths with tails,
 * large and non-finite pre-activations, one and two threads. */
static void check_ssp_epilogue(int m, int n, int k, int ldh, int scale)
{
    const size_t nx = (size_t)m * k, nw = (size_t)n * k, nc = (size_t)m * n;
    float *xf = rnd_floats(nx, 1.0f), *w = rnd_floats(nw, (float)scale);
    float *bias = rnd_floats((size_t)n, 4.0f), *c = rnd_floats(nc, 1.0f);
    pt_bf16 *x = malloc(nx * sizeof(pt_bf16));
    const int ld = pt_bf16_pairs_ld(n);
    const size_t np = (size_t)(m + 1) / 2 * ld, nh = (size_t)m * ldh;
    uint32_t *p = malloc(np * sizeof(uint32_t)), *pw = malloc(np * sizeof(uint32_t));
    pt_bf16 *h = malloc(nh * sizeof(pt_bf16)), *hw = malloc(nh * sizeof(pt_bf16));
    assert_true(x && p && pw && h && hw);
    if (n > 3) bias[3] = INFINITY, bias[2] = -INFINITY;
    if (n > 5) bias[5] = NAN;
    pt_bf16_from_floats(x, xf, nx);
    const pt_bf16_epilogue plain = {.bias = bias};
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, m, n, k, 1.0f, x,
                                     PT_BF16_FMT_ROWS, k, w, 0, k, 0.0f, c, n, &plain),
                     PT_BF16_OK);
    pt_bf16_ssp_run(c, nc);
    memset(hw, 0x5a, nh * sizeof(pt_bf16));
    pt_bf16_pairs_pack(pw, c, n, m, n, hw, ldh);
    for (int mode = 0; mode < 3; mode++) { /* pairs and rows, pairs, rows */
        memset(p, 0xab, np * sizeof(uint32_t));
        memset(h, 0x5a, nh * sizeof(pt_bf16));
        const pt_bf16_epilogue e = {.bias = bias, .map = pt_bf16_ssp_map,
                                    .pairs = mode < 2 ? p : NULL, .h = mode != 1 ? h : NULL,
                                    .ldh = ldh};
        assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, m, n, k, 1.0f, x,
                                         PT_BF16_FMT_ROWS, k, w, 0, k, 0.0f, NULL, n, &e),
                         PT_BF16_OK);
        if (mode < 2 && memcmp(p, pw, np * sizeof(uint32_t)) != 0)
            fail_msg("ssp epilogue pairs m=%d n=%d k=%d mode=%d threads=%d differ", m, n, k,
                     mode, pt_bf16_get_threads());
        if (mode != 1)
            for (int r = 0; r < m; r++)
                if (memcmp(h + (size_t)r * ldh, hw + (size_t)r * ldh, (size_t)n * 2) != 0)
                    fail_msg("ssp epilogue row %d m=%d n=%d k=%d mode=%d differs", r, m, n, k,
                             mode);
    }
    free(xf), free(w), free(bias), free(c), free(x), free(p), free(pw), free(h), free(hw);
}

static void test_ssp_epilogue(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) return; /* the portable kernel maps then rounds: nothing fused */
    pt_bf16_set_kernel(PT_BF16_KERNEL_AVX512);
    const int shapes[][4] = {{256, 100, 25, 100}, {1, 100, 25, 100}, {37, 100, 100, 100},
                             {7, 17, 2, 17},      {13, 130, 31, 130}, {25, 100, 25, 104},
                             {12, 64, 26, 70},    {5, 3, 4, 3}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int scale = 1; scale <= 40; scale *= 40)
            check_ssp_epilogue(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], scale);
    pt_bf16_set_threads(2);
    check_ssp_epilogue(1001, 100, 25, 100, 1);
    pt_bf16_set_threads(1);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* an s1 the epilogue cannot read (a format other than pairs or rows, ld
 * too small) is PT_BF16_EFORMAT, the portable kernel PT_BF16_EFUSED; C
 * untouched */
static void test_epilogue_refusals(void **state)
{
    (void)state;
    uint32_t s1[64] = {0};
    float x[64] = {0}, c[4] = {1, 2, 3, 4};
    const float keep[4] = {1, 2, 3, 4};
    if (pt_cpu_has_bf16()) {
        pt_bf16_set_kernel(PT_BF16_KERNEL_AVX512);
        const pt_bf16_epilogue bad[] = {
            {.dssp_s1 = s1, .dssp_fmt = PT_BF16_FMT_F32, .dssp_ld = 16},
            {.dssp_s1 = s1, .dssp_fmt = PT_BF16_FMT_ROWS_PAD, .dssp_ld = 16},
            {.dssp_s1 = s1, .dssp_fmt = 7, .dssp_ld = 16},
            {.dssp_s1 = s1, .dssp_fmt = PT_BF16_FMT_PAIRS, .dssp_ld = pt_bf16_pairs_ld(2) - 1},
            {.dssp_s1 = s1, .dssp_fmt = PT_BF16_FMT_ROWS, .dssp_ld = 1},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
            assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, x, 0, 2,
                                             x, 0, 2, 0.0f, c, 2, &bad[i]),
                             PT_BF16_EFORMAT);
    }
    pt_bf16_set_kernel(PT_BF16_KERNEL_PORTABLE);
    const pt_bf16_epilogue good = {.dssp_s1 = s1, .dssp_fmt = PT_BF16_FMT_ROWS, .dssp_ld = 2};
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, x, 0, 2, x, 0, 2,
                                     0.0f, c, 2, &good),
                     PT_BF16_EFUSED);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
    assert_memory_equal(c, keep, sizeof keep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accuracy),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_vector_bits),
        cmocka_unit_test(test_dssp_mul),
        cmocka_unit_test(test_epilogue),
        cmocka_unit_test(test_ssp_epilogue),
        cmocka_unit_test(test_epilogue_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
