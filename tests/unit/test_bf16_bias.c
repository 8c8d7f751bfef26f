/* test_bf16_bias.c — the bf16 kernel's paths added for the training step's
 * speed (issue 18), each against what it replaces, bit for bit:
 *   - pt_bf16_sgemm_bias (the bias added as C is stored) equals filling C's
 *     rows with the bias and calling pt_bf16_sgemm with beta = 1, and the
 *     scalar reference pt_bf16_gemm_ref on the pre-rounded operands, for
 *     every transpose pair, odd sizes (one row, a ragged last panel, more
 *     rows than one cache block, k past one K block), padded leading
 *     dimensions (C's padding never written), alpha ≠ 1, k = 0 and
 *     alpha = 0, on the AVX-512 kernel and the portable path; NULL bias is
 *     an error;
 *   - the vector rounding of fp32 operands (vcvtneps2bf16 with the integer
 *     path for subnormals) equals pt_bf16_from_float on ties, NaN, ±inf,
 *     ±0, subnormals that round to zero and up to the smallest normal, and
 *     the largest finite values, in every packer (A as stored and
 *     transposed, B as stored and transposed);
 *   - the vector packer of a transposed B (a Linear's weights: 16 × 16
 *     blocks transposed in registers) writes the layout of the scalar one,
 *     pairs past 16, odd k and ragged columns included, and split over two
 *     threads at an odd pair row gives the bits of one;
 *   - a reduction split into calls of whole K blocks (PT_BF16_KC) with
 *     beta = 1 gives the bits of one call: what lets the filter network run
 *     in chunks of rows in bf16 (engine/model/schnet_filter.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/bf16.h"
#include "tests/unit/bf16_native.h"

#define PT_TEST_SEED 0x9e3779b97f4a7c15ull
#include "tests/unit/rand_fixture.h"

static CBLAS_TRANSPOSE tr(int t) { return t ? CblasTrans : CblasNoTrans; }

typedef struct shape {
    int m, n, k;
} shape;

/* one row; a ragged last panel (n = 65, 100, 129); more rows than one block
 * of A (241 > PT_BF16_MC); k past one K block (257, 600); odd k */
static const shape SHAPES[] = {{1, 1, 1},    {7, 17, 3},    {13, 100, 25}, {6, 64, 100},
                               {241, 100, 100}, {37, 129, 257}, {12, 65, 600}};

/* pt_bf16_sgemm_bias against fill + sgemm(beta = 1) and the reference. */
static void bias_check(int reference)
{
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++)
        for (int t = 0; t < 4; t++) {
            const int ta = t & 1, tb = t >> 1, m = SHAPES[s].m, n = SHAPES[s].n, k = SHAPES[s].k;
            const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
            const size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb;
            const size_t nc = (size_t)m * ldc;
            float *a = rnd_floats(na, 1.0f), *b = rnd_floats(nb, 1.0f), *bias = rnd_floats((size_t)n, 1.0f), *c0 = rnd_floats(nc, 1.0f);
            float *cb = malloc(nc * sizeof(float)), *cf = malloc(nc * sizeof(float));
            float *cr = malloc(nc * sizeof(float));
            pt_bf16 *a16 = malloc(na * sizeof(pt_bf16)), *b16 = malloc(nb * sizeof(pt_bf16));
            assert_true(cb && cf && cr && a16 && b16);
            pt_bf16_from_floats(a16, a, na);
            pt_bf16_from_floats(b16, b, nb);
            const float alphas[] = {1.0f, -0.75f};
            for (int al = 0; al < 2; al++) {
                float alpha = alphas[al];
                memcpy(cb, c0, nc * sizeof(float));
                memcpy(cf, c0, nc * sizeof(float));
                for (int i = 0; i < m; i++) memcpy(cf + (size_t)i * ldc, bias, n * sizeof(float));
                memcpy(cr, cf, nc * sizeof(float));
                assert_int_equal(pt_bf16_sgemm_bias(tr(ta), tr(tb), m, n, k, alpha, a, lda, b, ldb,
                                                    bias, cb, ldc),
                                 PT_BF16_OK);
                assert_int_equal(pt_bf16_sgemm(tr(ta), tr(tb), m, n, k, alpha, a, lda, b, ldb,
                                               1.0f, cf, ldc),
                                 PT_BF16_OK);
                if (memcmp(cb, cf, nc * sizeof(float)) != 0)
                    fail_msg("bias m=%d n=%d k=%d ta=%d tb=%d alpha=%g differs from fill + beta 1",
                             m, n, k, ta, tb, (double)alpha);
                for (int i = 0; i < m; i++) /* C's padding columns untouched */
                    assert_memory_equal(cb + (size_t)i * ldc + n, c0 + (size_t)i * ldc + n,
                                        (size_t)(ldc - n) * sizeof(float));
                if (reference) {
                    pt_bf16_gemm_ref_kernel(native, tr(ta), tr(tb), m, n, k, alpha, a16, lda, b16, ldb, 1.0f, cr,
                                     ldc);
                    for (int i = 0; i < m; i++)
                        if (memcmp(cb + (size_t)i * ldc, cr + (size_t)i * ldc,
                                   (size_t)n * sizeof(float)) != 0)
                            fail_msg("bias m=%d n=%d k=%d ta=%d tb=%d: row %d != reference", m, n,
                                     k, ta, tb, i);
                }
            }
            free(a), free(b), free(bias), free(c0), free(cb), free(cf), free(cr);
            free(a16), free(b16);
        }
}

static void test_bias_avx512(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) skip();
    assert_int_equal(pt_bf16_set_kernel(native), PT_BF16_OK);
    bias_check(1);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

static void test_bias_portable(void **state)
{
    (void)state;
    assert_int_equal(pt_bf16_set_kernel(PT_BF16_KERNEL_PORTABLE), PT_BF16_OK);
    bias_check(0);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* k = 0 or alpha = 0: every row of C is the bias; C's old values never read */
static void test_bias_degenerate(void **state)
{
    (void)state;
    const float bias[3] = {1.5f, -2.0f, 0.25f}, a[6] = {1, 2, 3, 4, 5, 6};
    for (int kernel = 1; kernel <= 2; kernel++) {
        if (kernel == PT_BF16_KERNEL_AVX512 && !pt_cpu_has_bf16()) continue;
        pt_bf16_set_kernel((pt_bf16_kernel)kernel);
        float c[8];
        for (int i = 0; i < 8; i++) c[i] = NAN;
        assert_int_equal(pt_bf16_sgemm_bias(CblasNoTrans, CblasNoTrans, 2, 3, 0, 1.0f, a, 1, a, 3,
                                            bias, c, 4),
                         PT_BF16_OK);
        for (int i = 0; i < 2; i++) assert_memory_equal(c + 4 * i, bias, sizeof bias);
        assert_true(isnan(c[3]) && isnan(c[7])); /* ldc padding */
        for (int i = 0; i < 8; i++) c[i] = NAN;
        assert_int_equal(pt_bf16_sgemm_bias(CblasNoTrans, CblasNoTrans, 2, 3, 2, 0.0f, NULL, 2,
                                            NULL, 3, bias, c, 4),
                         PT_BF16_OK);
        for (int i = 0; i < 2; i++) assert_memory_equal(c + 4 * i, bias, sizeof bias);
        assert_int_equal(pt_bf16_sgemm_bias(CblasNoTrans, CblasNoTrans, 2, 3, 2, 1.0f, a, 2, a, 3,
                                            NULL, c, 4),
                         PT_BF16_ENULL);
        assert_int_equal(pt_bf16_sgemm_bias(CblasNoTrans, CblasNoTrans, 2, 3, 2, 1.0f, a, 1, a, 3,
                                            bias, c, 4),
                         PT_BF16_ELDA);
        /* m = 0: nothing to do, a NULL bias is fine */
        assert_int_equal(pt_bf16_sgemm_bias(CblasNoTrans, CblasNoTrans, 0, 3, 2, 1.0f, a, 2, a, 3,
                                            NULL, c, 4),
                         PT_BF16_OK);
    }
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* fp32 values whose rounding is easy to get wrong */
static const uint32_t SPECIAL[] = {
    0x3f808000, /* tie, even below: stays 0x3f80 */
    0x3f818000, /* tie, odd below: up to 0x3f82 */
    0x3f808001, 0x3f807fff, 0xbf818000,
    0x7f800000, 0xff800000,                         /* ±inf */
    0x7fc00000, 0x7f800001, 0xffa00000, 0xffffffff, /* NaNs, signalling ones too */
    0x00000000, 0x80000000,                         /* ±0 */
    0x00000001, 0x00008000, 0x00018000,             /* subnormals rounding within bf16's */
    0x007fffff, 0x807f8000,                         /* subnormals rounding up to ±smallest normal */
    0x00800000, 0x7f7fffff, 0x7f7f7fff, 0xff7fffff, /* smallest normal, largest finite */
};
#define NSPECIAL (sizeof SPECIAL / sizeof SPECIAL[0])

/* The kernel on fp32 operands holding the special values equals the kernel
 * on the same operands rounded by pt_bf16_from_float first: every packer's
 * vector rounding is the scalar one.  Operands are mostly ordinary numbers
 * with the special values scattered in (NaN and inf poison whole rows and
 * columns, so bits are compared, not values). */
static void test_rounding_special_values(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) skip();
    pt_bf16_set_kernel(native);
    const shape sh[] = {{19, 37, 41}, {9, 100, 100}};
    for (size_t s = 0; s < 2; s++)
        for (int t = 0; t < 4; t++) {
            const int ta = t & 1, tb = t >> 1, m = sh[s].m, n = sh[s].n, k = sh[s].k;
            const int lda = ta ? m : k, ldb = tb ? k : n;
            const size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
            float *a = rnd_floats(na, 1.0f), *b = rnd_floats(nb, 1.0f), *c32 = rnd_floats(nc, 1.0f), *c16 = malloc(nc * sizeof(float));
            pt_bf16 *a16 = malloc(na * sizeof(pt_bf16)), *b16 = malloc(nb * sizeof(pt_bf16));
            assert_true(c16 && a16 && b16);
            /* a few special values each, spread so most rows stay finite */
            for (size_t i = 0; i < NSPECIAL; i++) {
                a[(i * 131 + 7) % na] = bits_float(SPECIAL[i]);
                b[(i * 173 + 3) % nb] = bits_float(SPECIAL[i]);
            }
            /* runs of subnormals and ties, so whole 16-lane vectors hold them */
            static const uint32_t run[] = {0x3f808000, 0x3f818000, 0x00000001, 0x00008000,
                                           0x00018000, 0x007fffff, 0x807f8000};
            for (size_t i = 0; i < 40; i++) {
                a[(i * 3) % na] = bits_float(run[i % 7]);
                b[(i * 5) % nb] = bits_float(run[(i + 3) % 7]);
            }
            pt_bf16_from_floats(a16, a, na);
            pt_bf16_from_floats(b16, b, nb);
            assert_int_equal(pt_bf16_sgemm(tr(ta), tr(tb), m, n, k, 1.0f, a, lda, b, ldb, 0.0f,
                                           c32, n),
                             PT_BF16_OK);
            assert_int_equal(pt_bf16_gemm(tr(ta), tr(tb), m, n, k, 1.0f, a16, lda, b16, ldb,
                                          0.0f, c16, n),
                             PT_BF16_OK);
            if (memcmp(c32, c16, nc * sizeof(float)) != 0)
                fail_msg("special values m=%d n=%d k=%d ta=%d tb=%d: fp32 operands round "
                         "differently from pt_bf16_from_float", m, n, k, ta, tb);
            free(a), free(b), free(c32), free(c16), free(a16), free(b16);
        }
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* The AVX-512 packer of B (both storages) writes the scalar packer's bytes,
 * special values included, for k across several 16-pair groups. */
static void test_packers_agree_wide(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) skip();
    const int ks[] = {1, 2, 31, 32, 33, 100}, ns[] = {1, 16, 81, 100};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (int tb = 0; tb < 2; tb++) {
                const int k = ks[ki], n = ns[ni], ldb = (tb ? k : n) + 1;
                const size_t nb = (size_t)(tb ? n : k) * ldb;
                float *b = rnd_floats(nb, 1.0f);
                for (size_t i = 0; i < NSPECIAL; i++) b[(i * 37) % nb] = bits_float(SPECIAL[i]);
                pt_bf16_packed pv, ps;
                pt_bf16_set_kernel(native);
                assert_int_equal(pt_bf16_pack_init(&pv, tr(tb), k, n, b, ldb), PT_BF16_OK);
                pt_bf16_set_kernel(PT_BF16_KERNEL_PORTABLE);
                assert_int_equal(pt_bf16_pack_init(&ps, tr(tb), k, n, b, ldb), PT_BF16_OK);
                pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
                assert_int_equal(pv.pairs, ps.pairs);
                if (memcmp(pv.data, ps.data, pv.pairs * sizeof(uint32_t)) != 0)
                    fail_msg("packers differ at k=%d n=%d tb=%d", k, n, tb);
                pt_bf16_pack_close(&pv);
                pt_bf16_pack_close(&ps);
                free(b);
            }
}

/* dW = dYᵀ·X over U rows in one call, and over chunks of whole K blocks
 * (the last one ragged) with beta = 1: the same bits. */
static void test_reduction_in_chunks(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) skip();
    pt_bf16_set_kernel(native);
    const int U = 3 * PT_BF16_KC + 37;
    const int widths[][2] = {{100, 25}, {100, 100}, {7, 33}};
    for (int w = 0; w < 3; w++) {
        const int out = widths[w][0], in = widths[w][1];
        const size_t nc = (size_t)out * in;
        float *dy = rnd_floats((size_t)U * out, 1.0f), *x = rnd_floats((size_t)U * in, 1.0f), *c1 = rnd_floats(nc, 1.0f);
        float *c2 = malloc(nc * sizeof(float));
        assert_non_null(c2);
        memcpy(c2, c1, nc * sizeof(float));
        assert_int_equal(pt_bf16_sgemm(CblasTrans, CblasNoTrans, out, in, U, 1.0f, dy, out, x, in,
                                       1.0f, c1, in),
                         PT_BF16_OK);
        for (int r0 = 0; r0 < U; r0 += PT_BF16_KC) {
            int n = U - r0 < PT_BF16_KC ? U - r0 : PT_BF16_KC;
            assert_int_equal(pt_bf16_sgemm(CblasTrans, CblasNoTrans, out, in, n, 1.0f,
                                           dy + (size_t)r0 * out, out, x + (size_t)r0 * in, in,
                                           1.0f, c2, in),
                             PT_BF16_OK);
        }
        assert_memory_equal(c1, c2, nc * sizeof(float));
        free(dy), free(x), free(c1), free(c2);
    }
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* A transposed B big enough to be packed by two threads (pair rows split
 * at an arbitrary row, not a multiple of 16) gives the bits of one thread. */
static void test_transposed_b_packed_by_threads(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) skip();
    pt_bf16_set_kernel(native);
    const int m = 50, n = 100, k = 2 * 1337 + 1; /* kp·n ≥ 65536: packing is split */
    float *a = rnd_floats((size_t)m * k, 1.0f), *b = rnd_floats((size_t)n * k, 1.0f), *c1 = rnd_floats((size_t)m * n, 1.0f);
    float *c2 = malloc((size_t)m * n * sizeof(float));
    assert_non_null(c2);
    memcpy(c2, c1, (size_t)m * n * sizeof(float));
    pt_bf16_set_threads(1);
    assert_int_equal(pt_bf16_sgemm(CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.5f, c1,
                                   n),
                     PT_BF16_OK);
    pt_bf16_set_threads(2);
    assert_int_equal(pt_bf16_sgemm(CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.5f, c2,
                                   n),
                     PT_BF16_OK);
    pt_bf16_set_threads(1);
    assert_memory_equal(c1, c2, (size_t)m * n * sizeof(float));
    free(a), free(b), free(c1), free(c2);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        NATIVE_TESTS(test_bias_avx512),
        NATIVE_TESTS(test_bias_portable),
        cmocka_unit_test(test_bias_degenerate),
        NATIVE_TESTS(test_rounding_special_values),
        NATIVE_TESTS(test_packers_agree_wide),
        NATIVE_TESTS(test_reduction_in_chunks),
        NATIVE_TESTS(test_transposed_b_packed_by_threads),
    };
    return cmocka_run_group_tests_name("bf16_bias", tests, NULL, NULL);
}
