/* test_bf16_amx.c — the AMX kernel (bf16_amx.c) and its scalar reference:
 *   - pt_bf16_gemm_ref_amx computes what Intel's SDM says tdpbf16ps does
 *     (even and odd products summed apart within a tile of 16 pairs, then
 *     added to the sum; inputs' subnormals read as 0, results' flushed):
 *     hand-computed cases that tell it from pt_bf16_gemm_ref (vdpbf16ps);
 *     runs on every CPU;
 *   - where AMX is usable: products on the AMX kernel equal the reference
 *     bit for bit for every operand format of pt_bf16_gemm_ex (fp32, bf16
 *     rows, padded rows, pairs, B transposed or not), m, n and k off the
 *     tiles' 16 / 32 (k = 1, 25, 100, 256, 257, 513), leading dimensions
 *     past the width, alpha / beta, a bias, and split over two threads,
 *     op(A) transposed (weight gradients) with A and B as fp32, bf16 or
 *     pairs; the
 *     fused epilogues are tested on both kernels by test_bf16_fast.c and
 *     test_bf16_pairs.c (bf16_native.h);
 *   - the AMX and the vdpbf16ps references agree within the bound of two
 *     orders of fp32 summation: |c_amx − c_vdp| ≤ 2·k·2^-24·Σ|a·b| + 2^-126;
 *   - PACKTRAIN_CPU_HIDE_AMX=1 (a child process, detection runs fresh)
 *     makes AUTO choose AVX512-BF16 and refuses forcing AMX; without AMX
 *     forcing it is refused and AUTO is not AMX. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/bf16.h"

#define PT_TEST_SEED 0x9e3779b97f4a7c15ull
#include "tests/unit/rand_fixture.h"
#include "tests/unit/bf16_native.h"
#include "tests/unit/child_run.h"

static pt_bf16 h(float x) { return pt_bf16_from_float(x); }

/* one element: C = a·b over k steps, both references */
static void dot_both(const float *a, const float *b, int k, float *amx, float *vdp)
{
    pt_bf16 ah[600], bh[600];
    for (int i = 0; i < k; i++) ah[i] = h(a[i]), bh[i] = h(b[i]);
    pt_bf16_gemm_ref_amx(CblasNoTrans, CblasNoTrans, 1, 1, k, 1.0f, ah, k, bh, 1, 0.0f, amx, 1);
    pt_bf16_gemm_ref(CblasNoTrans, CblasNoTrans, 1, 1, k, 1.0f, ah, k, bh, 1, 0.0f, vdp, 1);
}

static void test_ref_arithmetic(void **state)
{
    (void)state;
    float amx, vdp;
    /* even steps 1 + 0, odd steps 2^-24 + 2^-24: AMX sums the odd ones
     * apart (2^-23, then 1 + 2^-23 exactly); vdpbf16ps adds each to the
     * running 1, where 2^-24 is lost (ties to even) */
    const float a1[4] = {1, 1, 1, 1}, b1[4] = {1, 0x1p-24f, 0, 0x1p-24f};
    dot_both(a1, b1, 4, &amx, &vdp);
    assert_true(amx == 1.0f + 0x1p-23f);
    assert_true(vdp == 1.0f);
    /* a new tile every 16 pairs: steps 0..31 hold 1 then 2^-24 31 times
     * (evens 1 + 15·2^-24 → 1; odds 16·2^-24 = 2^-20), step 32 holds
     * 2^-24 (tile 2's even: 2^-24): (1 + 2^-20) + 2^-24 → 1 + 2^-20 */
    float a2[33], b2[33];
    for (int i = 0; i < 33; i++) a2[i] = 1.0f, b2[i] = i == 0 ? 1.0f : 0x1p-24f;
    dot_both(a2, b2, 33, &amx, &vdp);
    assert_true(amx == 1.0f + 0x1p-20f);
    assert_true(vdp == 1.0f);
    /* within one tile the same 33 values as 32 steps: the odd sum 2^-20 and
     * the even 1 + 15·2^-24 → 1: 1 + 2^-20 as well; with the 2^-24 steps
     * first, the even sum keeps them: 15·2^-24 + 1 → 1 + 2^-20 (rounded
     * from 1 + 15·2^-24: 1 + 2^-23·8 = 1 + 2^-20) */
    float a3[32], b3[32];
    for (int i = 0; i < 32; i++) a3[i] = 1.0f, b3[i] = i == 30 ? 1.0f : 0x1p-24f;
    dot_both(a3, b3, 32, &amx, &vdp);
    /* even: 15·2^-24 (exact) then + 1 → 1 + 2^-20 (15·2^-24 rounds to
     * 16·2^-24 at 1's ulp 2^-23: 7.5 ulps → 8, ties to even); odd 2^-20 */
    assert_true(amx == (1.0f + 0x1p-20f) + 0x1p-20f);
    /* bf16 subnormal inputs read as 0; a subnormal result is flushed */
    const float tiny = 0x1p-130f; /* a bf16 subnormal */
    const float a4[2] = {tiny, 0x1p-63f}, b4[2] = {1.0f, 0x1p-64f};
    dot_both(a4, b4, 2, &amx, &vdp);
    assert_true(amx == 0.0f && vdp == 0.0f);
    const float a5[2] = {0x1p-100f, 1.0f}, b5[2] = {0x1p-20f, 1.0f};
    dot_both(a5, b5, 2, &amx, &vdp);
    assert_true(amx == 1.0f);
    /* an odd k: the last pair's high half is 0·0 */
    const float a6[3] = {2, 3, 4}, b6[3] = {5, 6, 7};
    dot_both(a6, b6, 3, &amx, &vdp);
    assert_true(amx == 56.0f && vdp == 56.0f);
    /* alpha, beta and K blocks of PT_BF16_KC: as pt_bf16_gemm_ref */
    float c1 = 3.0f, c2 = 3.0f;
    pt_bf16 ah[300], bh[300];
    for (int i = 0; i < 300; i++) ah[i] = h(1.0f), bh[i] = h(0.5f);
    pt_bf16_gemm_ref_amx(CblasNoTrans, CblasNoTrans, 1, 1, 300, 2.0f, ah, 300, bh, 1, 0.5f, &c1,
                         1);
    pt_bf16_gemm_ref(CblasNoTrans, CblasNoTrans, 1, 1, 300, 2.0f, ah, 300, bh, 1, 0.5f, &c2, 1);
    assert_true(c1 == 301.5f && c2 == 301.5f);
    /* the kernel choice of the reference */
    float r1 = 0, r2 = 0;
    pt_bf16_gemm_ref_kernel(PT_BF16_KERNEL_AMX, CblasNoTrans, CblasNoTrans, 1, 1, 4, 1.0f,
                            (pt_bf16[]){h(1), h(1), h(1), h(1)}, 4,
                            (pt_bf16[]){h(1), h(0x1p-24f), h(0), h(0x1p-24f)}, 1, 0.0f, &r1, 1);
    assert_true(r1 == 1.0f + 0x1p-23f);
    pt_bf16_gemm_ref_kernel(PT_BF16_KERNEL_AMX, CblasTrans, CblasNoTrans, 1, 1, 4, 1.0f,
                            (pt_bf16[]){h(1), h(1), h(1), h(1)}, 1,
                            (pt_bf16[]){h(1), h(0x1p-24f), h(0), h(0x1p-24f)}, 1, 0.0f, &r2, 1);
    assert_true(r2 == 1.0f + 0x1p-23f); /* op(A) transposed: tiles too */
    pt_bf16_gemm_ref_kernel(PT_BF16_KERNEL_AVX512, CblasTrans, CblasNoTrans, 1, 1, 4, 1.0f,
                            (pt_bf16[]){h(1), h(1), h(1), h(1)}, 1,
                            (pt_bf16[]){h(1), h(0x1p-24f), h(0), h(0x1p-24f)}, 1, 0.0f, &r2, 1);
    assert_true(r2 == 1.0f);
}

/* The references agree within two summation orders' bound. */
static void test_refs_agree_within_bound(void **state)
{
    (void)state;
    const int ks[] = {1, 25, 100, 256, 513};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        const int m = 20, n = 30, k = ks[ki];
        float *a = rnd_floats((size_t)m * k, 4.0f), *b = rnd_floats((size_t)k * n, 4.0f);
        pt_bf16 *ah = malloc((size_t)m * k * 2), *bh = malloc((size_t)k * n * 2);
        float *c1 = calloc((size_t)m * n, 4), *c2 = calloc((size_t)m * n, 4);
        assert_true(ah && bh && c1 && c2);
        pt_bf16_from_floats(ah, a, (size_t)m * k);
        pt_bf16_from_floats(bh, b, (size_t)k * n);
        pt_bf16_gemm_ref_amx(CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, ah, k, bh, n, 0.0f, c1, n);
        pt_bf16_gemm_ref(CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, ah, k, bh, n, 0.0f, c2, n);
        double worst = 0;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double s = 0;
                for (int kk = 0; kk < k; kk++)
                    s += fabs((double)pt_bf16_to_float(ah[(size_t)i * k + kk]) *
                              pt_bf16_to_float(bh[(size_t)kk * n + j]));
                const double d = fabs((double)c1[i * n + j] - c2[i * n + j]);
                assert_true(d <= 2.0 * k * 0x1p-24 * s + 0x1p-126);
                if (s > 0 && d / s > worst) worst = d / s;
            }
        print_message("k=%d: largest |amx - vdp| / sum|a b| = %.3g\n", k, worst);
        free(a), free(b), free(ah), free(bh), free(c1), free(c2);
    }
}

/* The AMX kernel against its reference for one shape and format. */
static void check_amx(int m, int n, int k, int afmt, int bfmt, int tb, int pad, float alpha,
                      float beta, int bias_on)
{
    const int lda = afmt == PT_BF16_FMT_ROWS_PAD ? (k + 2) / 2 * 2 : k + pad * 3;
    const int bw = tb ? k : n, brows = tb ? n : k;
    const int ldb_plain = bw + pad * 5, ldc = n + pad * 2;
    float *a = rnd_floats((size_t)m * lda, 2.0f), *b = rnd_floats((size_t)brows * ldb_plain, 2.0f);
    sprinkle(a, (size_t)m * lda, (size_t)m * lda / 2);
    sprinkle(b, (size_t)brows * ldb_plain, 0);
    pt_bf16 *ah = malloc((size_t)m * lda * 2), *bh = malloc((size_t)brows * ldb_plain * 2);
    assert_true(ah && bh);
    pt_bf16_from_floats(ah, a, (size_t)m * lda);
    pt_bf16_from_floats(bh, b, (size_t)brows * ldb_plain);
    if (afmt == PT_BF16_FMT_ROWS_PAD)
        for (int i = 0; i < m; i++)
            for (int j = k; j < lda; j++) ah[(size_t)i * lda + j] = 0;
    /* B as pairs (NoTrans only) */
    const int ldp = pt_bf16_pairs_ld(n);
    uint32_t *bp = calloc((size_t)(k + 1) / 2 * ldp + 1, 4);
    assert_non_null(bp);
    if (bfmt == PT_BF16_FMT_PAIRS) pt_bf16_pairs_pack(bp, b, ldb_plain, k, n, NULL, 0);
    float *bias = rnd_floats((size_t)n, 1.0f);
    float *c = rnd_floats((size_t)m * ldc, 1.0f), *cr = malloc((size_t)m * ldc * 4);
    assert_non_null(cr);
    memcpy(cr, c, (size_t)m * ldc * 4);
    if (bias_on) /* C = bias, then C += the product: the kernel's bias mode */
        for (int i = 0; i < m; i++) memcpy(cr + (size_t)i * ldc, bias, (size_t)n * 4);
    pt_bf16_gemm_ref_amx(CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, ah, lda,
                         bh, ldb_plain, bias_on ? 1.0f : beta, cr, ldc);
    const void *ao = afmt == PT_BF16_FMT_F32 ? (const void *)a : ah;
    const void *bo = bfmt == PT_BF16_FMT_F32 ? (const void *)b
                     : bfmt == PT_BF16_FMT_PAIRS ? (const void *)bp : bh;
    const pt_bf16_epilogue e = {.bias = bias_on ? bias : NULL};
    int rc = pt_bf16_gemm_ex(CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, ao,
                             afmt, lda, bo, bfmt, bfmt == PT_BF16_FMT_PAIRS ? ldp : ldb_plain,
                             beta, c, ldc, &e);
    assert_int_equal(rc, PT_BF16_OK);
    for (int i = 0; i < m; i++)
        if (memcmp(c + (size_t)i * ldc, cr + (size_t)i * ldc, (size_t)n * 4) != 0)
            fail_msg("amx m=%d n=%d k=%d A fmt %d B fmt %d tb=%d pad=%d alpha=%g beta=%g bias=%d "
                     "threads=%d: row %d differs from pt_bf16_gemm_ref_amx",
                     m, n, k, afmt, bfmt, tb, pad, (double)alpha, (double)beta, bias_on,
                     pt_bf16_get_threads(), i);
    /* the padding of C untouched */
    for (int i = 0; i < m; i++)
        assert_memory_equal(c + (size_t)i * ldc + n, cr + (size_t)i * ldc + n,
                            (size_t)(ldc - n) * 4);
    free(a), free(b), free(ah), free(bh), free(bp), free(bias), free(c), free(cr);
}

/* op(A) transposed (a weight gradient: A stored [k][m]) as fp32, bf16 or
 * pairs, B as fp32, bf16 rows or pairs, against the reference. */
static void check_amx_t(int m, int n, int k, int afmt, int bfmt, float beta)
{
    const int lda = m, ldb = n, ldpa = pt_bf16_pairs_ld(m), ldpb = pt_bf16_pairs_ld(n);
    float *a = rnd_floats((size_t)k * lda, 2.0f), *b = rnd_floats((size_t)k * ldb, 2.0f);
    sprinkle(a, (size_t)k * lda, (size_t)k * lda / 3);
    pt_bf16 *ah = malloc((size_t)k * lda * 2), *bh = malloc((size_t)k * ldb * 2);
    uint32_t *ap = calloc((size_t)(k + 1) / 2 * ldpa + 1, 4);
    uint32_t *bp = calloc((size_t)(k + 1) / 2 * ldpb + 1, 4);
    assert_true(ah && bh && ap && bp);
    pt_bf16_from_floats(ah, a, (size_t)k * lda);
    pt_bf16_from_floats(bh, b, (size_t)k * ldb);
    pt_bf16_pairs_pack(ap, a, lda, k, m, NULL, 0);
    pt_bf16_pairs_pack(bp, b, ldb, k, n, NULL, 0);
    float *c = rnd_floats((size_t)m * n, 1.0f), *cr = malloc((size_t)m * n * 4);
    assert_non_null(cr);
    memcpy(cr, c, (size_t)m * n * 4);
    pt_bf16_gemm_ref_amx(CblasTrans, CblasNoTrans, m, n, k, 0.75f, ah, lda, bh, ldb, beta, cr, n);
    const void *ao = afmt == PT_BF16_FMT_F32 ? (const void *)a
                     : afmt == PT_BF16_FMT_PAIRS ? (const void *)ap : ah;
    const void *bo = bfmt == PT_BF16_FMT_F32 ? (const void *)b
                     : bfmt == PT_BF16_FMT_PAIRS ? (const void *)bp : bh;
    assert_int_equal(pt_bf16_gemm_ex(CblasTrans, CblasNoTrans, m, n, k, 0.75f, ao, afmt,
                                     afmt == PT_BF16_FMT_PAIRS ? ldpa : lda, bo, bfmt,
                                     bfmt == PT_BF16_FMT_PAIRS ? ldpb : ldb, beta, c, n, NULL),
                     PT_BF16_OK);
    if (memcmp(c, cr, (size_t)m * n * 4) != 0)
        fail_msg("amx transposed A m=%d n=%d k=%d A fmt %d B fmt %d beta=%g threads=%d: differs "
                 "from pt_bf16_gemm_ref_amx",
                 m, n, k, afmt, bfmt, (double)beta, pt_bf16_get_threads());
    free(a), free(b), free(ah), free(bh), free(ap), free(bp), free(c), free(cr);
}

static void test_amx_kernel_matches_ref(void **state)
{
    (void)state;
    if (amx_refused_here()) return;
    assert_int_equal(pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO), PT_BF16_OK);
    assert_int_equal(pt_bf16_kernel_active(), PT_BF16_KERNEL_AMX);
    assert_int_equal(pt_bf16_set_kernel(PT_BF16_KERNEL_AMX), PT_BF16_OK);
    const int ms[] = {1, 15, 17, 48, 49, 241, 300}, ns[] = {1, 16, 17, 100, 130};
    const int ks[] = {1, 2, 25, 32, 33, 100, 256, 257, 513};
    const float ab[][2] = {{1.0f, 0.0f}, {-0.5f, 1.0f}, {2.0f, 0.25f}};
    for (int threads = 1; threads <= 2; threads++) {
        pt_bf16_set_threads(threads);
        int v = 0;
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++, v++) {
                    const int m = ms[mi], n = ns[ni], k = ks[ki];
                    if (threads == 2 && m < 241) continue;
                    const int afmt = v % 3 == 0   ? PT_BF16_FMT_F32
                                     : v % 3 == 1 ? PT_BF16_FMT_ROWS
                                                  : PT_BF16_FMT_ROWS_PAD;
                    const int bfmt = v % 4 == 3 ? PT_BF16_FMT_PAIRS : v % 2;
                    const int tb = bfmt != PT_BF16_FMT_PAIRS && v / 3 % 2;
                    check_amx(m, n, k, afmt, bfmt, tb, v % 5 == 1, ab[v % 3][0], ab[v % 3][1],
                              v % 7 == 2);
                    /* transposed A: m and n are the weight's (k the rows) */
                    if (m <= 130 || threads == 2)
                        check_amx_t(n, m, k, v % 3 == 2 ? PT_BF16_FMT_PAIRS : v % 2,
                                    v % 4 == 1 ? PT_BF16_FMT_F32
                                               : v % 4 == 2 ? PT_BF16_FMT_ROWS : PT_BF16_FMT_PAIRS,
                                    v % 2 ? 1.0f : 0.0f);
                }
    }
    pt_bf16_set_threads(1);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* Child mode (PACKTRAIN_CPU_HIDE_AMX=1, detection fresh) */
static int child_hidden(void)
{
    pt_cpu_features f;
    pt_cpu_features_get(&f);
    printf("hidden=%d amx=%d has=%d\n", f.amx_hidden, f.amx, pt_cpu_has_amx());
    printf("force=%d\n", pt_bf16_set_kernel(PT_BF16_KERNEL_AMX));
    printf("active=%d\n", (int)pt_bf16_kernel_active());
    printf("bf16=%d\n", pt_cpu_has_bf16());
    return 0;
}

static void test_hide_amx(void **state)
{
    (void)state;
    char text[1024];
    child_run("test_bf16_amx", "--child-hidden", "PACKTRAIN_CPU_HIDE_AMX=1", text, sizeof text);
    assert_non_null(strstr(text, "hidden=1 amx=0 has=0\n"));
    char want[64];
    snprintf(want, sizeof want, "force=%d\n", PT_BF16_ENOCPU);
    assert_non_null(strstr(text, want));
    /* AUTO: AVX512-BF16 where the CPU has it, else portable */
    snprintf(want, sizeof want, "active=%d\n",
             pt_cpu_has_bf16() ? PT_BF16_KERNEL_AVX512 : PT_BF16_KERNEL_PORTABLE);
    assert_non_null(strstr(text, want));
    /* here, unhidden: AMX is what AUTO picks where usable */
    pt_cpu_features f;
    pt_cpu_features_get(&f);
    assert_int_equal(f.amx_hidden, 0);
    assert_int_equal(pt_bf16_kernel_active() == PT_BF16_KERNEL_AMX, pt_cpu_has_amx());
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child-hidden") == 0) return child_hidden();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_arithmetic),
        cmocka_unit_test(test_refs_agree_within_bound),
        cmocka_unit_test(test_amx_kernel_matches_ref),
        cmocka_unit_test(test_hide_amx),
    };
    return cmocka_run_group_tests_name("bf16_amx", tests, NULL, NULL);
}
