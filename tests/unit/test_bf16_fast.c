/* test_bf16_fast.c — the bf16 kernel's shortcuts for the filter network's
 * shapes (issue 18), each against the path it bypasses, bit for bit:
 *   - rows of an fp32 A that lie back to back (lda = k, k even) are rounded
 *     as one run, and rows of 17-32 elements (the Gaussian basis, k = 25)
 *     two vectors at a time: equal to pt_bf16_gemm on operands rounded by
 *     pt_bf16_from_float and to the scalar reference, for row counts that
 *     are not multiples of the micro-kernel's 6 or of a 64-element vector
 *     group, more rows than one packed block, k past one K block, and runs
 *     holding subnormals and ties;
 *   - two fp32 rows interleaved into pairs in one vcvtne2ps2bf16 (a weight
 *     gradient's operands): the same, with subnormals in whole vectors, at
 *     the start, middle and end of a row;
 *   - packed weights kept per thread across calls: a product after the
 *     weight changed in place (same address; a change that moves its bf16
 *     value and one that does not), after more weights than the cache holds,
 *     with the same address read under another shape, leading dimension or
 *     transpose, and split over two threads, equals a product on freshly
 *     rounded operands. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/bf16.h"

static uint64_t lcg = 0x2545f4914f6cdd1dull;

static float rnd(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((lcg >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

static float *arr(size_t n)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = rnd();
    return p;
}

static float bits_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static CBLAS_TRANSPOSE tr(int t) { return t ? CblasTrans : CblasNoTrans; }

/* subnormals (smallest, a tie that rounds up, the largest), ties to even,
 * −0 (NaN and inf: test_bf16_bias.c; their NaN payloads need not match the
 * scalar reference) */
static const uint32_t ODD[] = {0x00000001, 0x00008000, 0x007fffff, 0x80018000, 0x3f808000,
                               0x3f818000, 0x80000000};
#define NODD (sizeof ODD / sizeof ODD[0])

/* A whole 16-lane vector of subnormals at element `at`, and the odd values
 * scattered. */
static void sprinkle(float *x, size_t n, size_t at)
{
    for (size_t i = 0; i < 16 && at + i < n; i++) x[at + i] = bits_float(ODD[i % 3]);
    for (size_t i = 0; i < NODD; i++) x[(i * 97 + 11) % n] = bits_float(ODD[i]);
}

/* C = alpha·op(A)·op(B) + beta·C on fp32 operands (rounded by the kernel)
 * equals the kernel and the scalar reference on operands rounded first. */
static void check_same(int ta, int tb, int m, int n, int k, int lda, int ldb, float beta,
                       const float *a, const float *b)
{
    const size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb;
    const size_t nc = (size_t)m * n;
    float *c32 = arr(nc), *c16 = malloc(nc * sizeof(float)), *cr = malloc(nc * sizeof(float));
    pt_bf16 *a16 = malloc(na * sizeof(pt_bf16)), *b16 = malloc(nb * sizeof(pt_bf16));
    assert_true(c16 && cr && a16 && b16);
    memcpy(c16, c32, nc * sizeof(float));
    memcpy(cr, c32, nc * sizeof(float));
    pt_bf16_from_floats(a16, a, na);
    pt_bf16_from_floats(b16, b, nb);
    assert_int_equal(pt_bf16_sgemm(tr(ta), tr(tb), m, n, k, -0.5f, a, lda, b, ldb, beta, c32, n),
                     PT_BF16_OK);
    assert_int_equal(pt_bf16_gemm(tr(ta), tr(tb), m, n, k, -0.5f, a16, lda, b16, ldb, beta, c16,
                                  n),
                     PT_BF16_OK);
    pt_bf16_gemm_ref(tr(ta), tr(tb), m, n, k, -0.5f, a16, lda, b16, ldb, beta, cr, n);
    if (memcmp(c32, c16, nc * sizeof(float)) != 0)
        fail_msg("m=%d n=%d k=%d ta=%d tb=%d: fp32 operands differ from pre-rounded ones", m, n,
                 k, ta, tb);
    if (memcmp(c16, cr, nc * sizeof(float)) != 0)
        fail_msg("m=%d n=%d k=%d ta=%d tb=%d: kernel differs from the reference", m, n, k, ta,
                 tb);
    free(c32), free(c16), free(cr), free(a16), free(b16);
}

static void test_contiguous_rows_of_a(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) skip();
    pt_bf16_set_kernel(PT_BF16_KERNEL_AVX512);
    const int ms[] = {1, 5, 7, 43, 241, 256}, ks[] = {2, 17, 24, 25, 26, 31, 32, 33, 100, 300};
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (int tb = 0; tb < 2; tb++) {
                const int m = ms[mi], k = ks[ki], n = 100;
                float *a = arr((size_t)m * k), *b = arr((size_t)n * k);
                sprinkle(a, (size_t)m * k, (size_t)m * k / 2);
                check_same(0, tb, m, n, k, k, tb ? k : n, mi % 2 ? 1.0f : 0.0f, a, b);
                free(a), free(b);
            }
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

static void test_interleaved_pairs_of_rows(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) skip();
    pt_bf16_set_kernel(PT_BF16_KERNEL_AVX512);
    const int shapes[][3] = {{100, 100, 256}, {100, 25, 256}, {100, 25, 255},
                             {17, 33, 513},   {16, 16, 2},    {100, 100, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int at = 0; at < 3; at++) {
            const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            const size_t na = (size_t)k * m, nb = (size_t)k * n;
            float *a = arr(na), *b = arr(nb);
            /* a subnormal vector at a row's start, inside one, at the end */
            size_t where[] = {0, na / 2 + 3, na > 16 ? na - 16 : 0};
            sprinkle(a, na, where[at]);
            sprinkle(b, nb, at == 1 ? nb / 3 : 0);
            check_same(1, 0, m, n, k, m, n, 1.0f, a, b);
            check_same(1, 1, m, n, k, m, k, 0.0f, a, b);
            free(a), free(b);
        }
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* op(A)·op(W) for a weight W[out][in] as a Linear uses it: the forward
 * (NoTrans, Trans) and the input gradient (NoTrans, NoTrans, W as [k][n]). */
static void weight_products(float *w, int out, int in, int ldw)
{
    const int rows = 37;
    float *x = arr((size_t)rows * in), *dy = arr((size_t)rows * out);
    check_same(0, 1, rows, out, in, in, ldw, 0.0f, x, w);
    check_same(0, 0, rows, in, out, out, ldw, 1.0f, dy, w);
    free(x), free(dy);
}

static void test_cached_weights_follow_changes(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) skip();
    pt_bf16_set_kernel(PT_BF16_KERNEL_AVX512);
    enum { NW = 6 }; /* more weights than the cache keeps */
    const int out = 100, in = 25;
    float *w[NW];
    for (int i = 0; i < NW; i++) w[i] = arr((size_t)out * 100);
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < NW; i++) {
            weight_products(w[i], out, in, in);
            weight_products(w[i], out, in, in); /* a hit */
            /* in place: a change below bf16's precision, then one above */
            w[i][(size_t)(round * 7 + i) % ((size_t)out * in)] *= 1.0f + 0x1p-20f;
            weight_products(w[i], out, in, in);
            w[i][(size_t)(round * 13 + i + 1) % ((size_t)out * in)] += 0.25f;
            weight_products(w[i], out, in, in);
        }
    /* the same address as another shape, leading dimension, transpose */
    weight_products(w[0], out, in, in);
    weight_products(w[0], 50, in, in);
    weight_products(w[0], out, in, in + 3);
    weight_products(w[0], in, in, in);
    weight_products(w[0], 100, 100, 100);
    /* split over two threads: every thread reads the caller's packed copy */
    pt_bf16_set_threads(2);
    float *x = arr((size_t)2000 * 100);
    check_same(0, 1, 2000, 100, 100, 100, 100, 0.0f, x, w[1]);
    check_same(0, 1, 2000, 100, 100, 100, 100, 0.0f, x, w[1]);
    pt_bf16_set_threads(1);
    free(x);
    for (int i = 0; i < NW; i++) free(w[i]);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contiguous_rows_of_a),
        cmocka_unit_test(test_interleaved_pairs_of_rows),
        cmocka_unit_test(test_cached_weights_follow_changes),
    };
    return cmocka_run_group_tests_name("bf16_fast", tests, NULL, NULL);
}
