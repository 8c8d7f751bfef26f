/* test_bf16_pairs.c — bf16 operands rounded once, in pairs along the
 * reduction (bf16.h: pt_bf16_pairs_pack, PT_BF16_FMT_PAIRS, the epilogue's
 * pairs), each against a scalar reference, bit for bit:
 *   - pt_bf16_pairs_ld: a multiple of 16 that covers the width and the
 *     6-row tiles reading the pairs as A;
 *   - pt_bf16_pairs_pack on the AVX512-BF16 and the portable kernel equals
 *     pairs built element by element from pt_bf16_from_float (zero padding
 *     past the width, the high half 0 for an odd last row, the plain rows
 *     it also writes, zero-padded), for widths around a 16-lane vector, odd
 *     row counts, rows longer than the width, whole vectors of subnormals
 *     and ties;
 *   - A as padded bf16 rows (PT_BF16_FMT_ROWS_PAD: odd k read in place,
 *     the basis' k = 25) equals A as fp32, with and without an epilogue, k
 *     past one block, one and two threads;
 *   - products with A and/or B given as pairs equal pt_bf16_gemm_ref on the
 *     same rounded values (the portable kernel: its product on bf16 rows),
 *     for k past one reduction block, odd k, row and column counts off the
 *     6-row tile and the 16-lane vector, beta 0 and 1, one and two threads;
 *   - the fused epilogue's pairs (C's bf16 copy also as pairs) equal the
 *     pairs of the C the same product keeps, for odd row counts and two
 *     threads; pairs alone where C is kept (the filter's ds1: C ⊙ aux by
 *     the map, then its pairs) equal the unfused product, multiply and
 *     pt_bf16_pairs_pack, C and the aux operand included;
 *   - what cannot be read as pairs is refused with PT_BF16_EFORMAT (pairs A
 *     not transposed, pairs B transposed, ld too small, an unknown format),
 *     an epilogue with neither C nor a bf16 copy (rows or pairs) with
 *     PT_BF16_ENULL, pairs on the portable kernel with PT_BF16_EFUSED, C
 *     untouched. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/bf16.h"
#include "tests/unit/bf16_native.h"
#include "engine/model/schnet_ops.h"

#define PT_TEST_SEED 0x9e3779b97f4a7c15ull
#include "tests/unit/rand_fixture.h"

/* the pairs of x (rows of lds), element by element */
static uint32_t *ref_pairs(const float *x, int lds, int rows, int w)
{
    const int ld = pt_bf16_pairs_ld(w);
    uint32_t *p = calloc((size_t)(rows + 1) / 2 * ld + 1, sizeof(uint32_t));
    assert_non_null(p);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < w; j++)
            p[(size_t)(r / 2) * ld + j] |= (uint32_t)pt_bf16_from_float(x[(size_t)r * lds + j])
                                           << (16 * (r % 2));
    return p;
}

static void test_pairs_ld(void **state)
{
    (void)state;
    for (int w = 1; w <= 300; w++) {
        const int ld = pt_bf16_pairs_ld(w);
        assert_int_equal(ld % 16, 0);
        assert_true(ld >= w && ld >= (w + 5) / 6 * 6 && ld <= w + 32);
    }
    assert_int_equal(pt_bf16_pairs_ld(100), 112);
    assert_int_equal(pt_bf16_pairs_ld(25), 32);
    assert_int_equal(pt_bf16_pairs_ld(16), 32); /* rows 16, 17 of a 6-row tile */
}

static void check_pack(int rows, int w, int lds, int with_rows)
{
    const size_t nx = (size_t)rows * lds;
    float *x = rnd_floats(nx, 1.0f);
    sprinkle(x, nx, nx / 2);
    const int ld = pt_bf16_pairs_ld(w);
    const size_t np = (size_t)(rows + 1) / 2 * ld;
    uint32_t *want = ref_pairs(x, lds, rows, w), *got = malloc(np * sizeof(uint32_t));
    pt_bf16 *h = malloc((size_t)rows * (w + 3) * sizeof(pt_bf16));
    assert_true(got && h);
    memset(got, 0xab, np * sizeof(uint32_t));
    for (size_t i = 0; i < (size_t)rows * (w + 3); i++) h[i] = 0x5555;
    pt_bf16_pairs_pack(got, x, lds, rows, w, with_rows ? h : NULL, w + 3);
    if (memcmp(got, want, np * sizeof(uint32_t)) != 0)
        fail_msg("pairs rows=%d w=%d lds=%d kernel=%d differ", rows, w, lds,
                 (int)pt_bf16_kernel_active());
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < w + 3; j++) {
            pt_bf16 v = h[(size_t)r * (w + 3) + j];
            pt_bf16 e = !with_rows ? 0x5555 : j < w ? pt_bf16_from_float(x[(size_t)r * lds + j]) : 0;
            if (v != e) fail_msg("rows rows=%d w=%d r=%d j=%d: %04x, want %04x", rows, w, r, j, v, e);
        }
    free(x), free(want), free(got), free(h);
}

static void test_pairs_pack(void **state)
{
    (void)state;
    const int kernels[2] = {native, PT_BF16_KERNEL_PORTABLE};
    const int rows[] = {1, 2, 7, 256, 257}, ws[] = {1, 15, 16, 17, 25, 100, 130};
    for (int ki = pt_cpu_has_bf16() ? 0 : 1; ki < 2; ki++) {
        assert_int_equal(pt_bf16_set_kernel((pt_bf16_kernel)kernels[ki]), PT_BF16_OK);
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
            for (size_t wi = 0; wi < sizeof ws / sizeof ws[0]; wi++) {
                check_pack(rows[ri], ws[wi], ws[wi], (int)(ri + wi) % 2);
                check_pack(rows[ri], ws[wi], ws[wi] + 5, 1);
            }
    }
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* C = alpha·op(A)·op(B) + beta·C with A (stored [k][m], transposed) and B
 * (stored [k][n]) each as fp32 rows or as pairs: equals the reference on
 * the rounded values. */
static void check_product(int m, int n, int k, float beta, int a_pairs, int b_pairs)
{
    const size_t na = (size_t)k * m, nb = (size_t)k * n, nc = (size_t)m * n;
    float *a = rnd_floats(na, 1.0f), *b = rnd_floats(nb, 1.0f), *c = rnd_floats(nc, 1.0f);
    sprinkle(a, na, na / 3);
    float *cr = floats_copy(c, nc);
    pt_bf16 *a16 = malloc(na * sizeof(pt_bf16)), *b16 = malloc(nb * sizeof(pt_bf16));
    assert_true(a16 && b16);
    pt_bf16_from_floats(a16, a, na);
    pt_bf16_from_floats(b16, b, nb);
    uint32_t *ap = ref_pairs(a, m, k, m), *bp = ref_pairs(b, n, k, n);
    const void *ao = a_pairs ? (const void *)ap : a, *bo = b_pairs ? (const void *)bp : b;
    const int lda = a_pairs ? pt_bf16_pairs_ld(m) : m, ldb = b_pairs ? pt_bf16_pairs_ld(n) : n;
    assert_int_equal(pt_bf16_gemm_ex(CblasTrans, CblasNoTrans, m, n, k, 0.75f, ao,
                                     a_pairs ? PT_BF16_FMT_PAIRS : PT_BF16_FMT_F32, lda, bo,
                                     b_pairs ? PT_BF16_FMT_PAIRS : PT_BF16_FMT_F32, ldb, beta, c,
                                     n, NULL),
                     PT_BF16_OK);
    if (pt_bf16_kernel_active() == native)
        pt_bf16_gemm_ref_kernel(native, CblasTrans, CblasNoTrans, m, n, k, 0.75f, a16, m, b16, n, beta, cr, n);
    else /* the portable path: cblas_sgemm on the widened values, whatever their layout */
        assert_int_equal(pt_bf16_gemm(CblasTrans, CblasNoTrans, m, n, k, 0.75f, a16, m, b16, n,
                                      beta, cr, n),
                         PT_BF16_OK);
    if (memcmp(c, cr, nc * sizeof(float)) != 0)
        fail_msg("m=%d n=%d k=%d beta=%g pairs A=%d B=%d kernel=%d threads=%d: differs from the "
                 "reference", m, n, k, (double)beta, a_pairs, b_pairs,
                 (int)pt_bf16_kernel_active(), pt_bf16_get_threads());
    free(a), free(b), free(c), free(cr), free(a16), free(b16), free(ap), free(bp);
}

static void test_pairs_products(void **state)
{
    (void)state;
    const int kernels[2] = {native, PT_BF16_KERNEL_PORTABLE};
    const int shapes[][3] = {{100, 100, 256}, {100, 25, 256}, {100, 100, 255}, {17, 33, 513},
                             {16, 16, 2},     {1, 1, 1},      {7, 130, 37},   {250, 70, 300}};
    for (int ki = pt_cpu_has_bf16() ? 0 : 1; ki < 2; ki++) {
        assert_int_equal(pt_bf16_set_kernel((pt_bf16_kernel)kernels[ki]), PT_BF16_OK);
        for (int threads = 1; threads <= 2; threads++) {
            pt_bf16_set_threads(threads);
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int v = 1; v < 8; v++) {
                    if ((v & 3) == 0) continue;
                    check_product(shapes[s][0], shapes[s][1], shapes[s][2], v & 4 ? 1.0f : 0.0f,
                                  v & 1, v >> 1 & 1);
                }
        }
    }
    pt_bf16_set_threads(1);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* X·Wᵀ + bias, shifted softplus, bf16 copy and pairs: the pairs are those
 * of the C the same product keeps (and the copy its rounding). */
static void check_epilogue_pairs(int m, int n, int k)
{
    const size_t nx = (size_t)m * k, nw = (size_t)n * k, nc = (size_t)m * n;
    float *x = rnd_floats(nx, 1.0f), *w = rnd_floats(nw, 1.0f), *bias = rnd_floats(n, 1.0f);
    float *c = rnd_floats(nc, 1.0f), *aux = rnd_floats(nc, 1.0f), *aux2 = rnd_floats(nc, 1.0f);
    const int ld = pt_bf16_pairs_ld(n);
    const size_t np = (size_t)(m + 1) / 2 * ld;
    pt_bf16 *h = malloc(nc * sizeof(pt_bf16)), *h2 = malloc(nc * sizeof(pt_bf16));
    uint32_t *p = malloc(np * sizeof(uint32_t));
    assert_true(h && h2 && p);
    memset(p, 0xab, np * sizeof(uint32_t));
    const pt_bf16_epilogue kept = {.bias = bias, .map = pt_ssp_forward, .aux = aux, .h = h,
                                   .ldh = n};
    const pt_bf16_epilogue paired = {.bias = bias, .map = pt_ssp_forward, .aux = aux2, .h = h2,
                                     .ldh = n, .pairs = p};
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, 0, k, w, 0, k,
                                     0.0f, c, n, &kept),
                     PT_BF16_OK);
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, 0, k, w, 0, k,
                                     0.0f, NULL, n, &paired),
                     PT_BF16_OK);
    uint32_t *want = ref_pairs(c, n, m, n);
    if (memcmp(p, want, np * sizeof(uint32_t)) != 0)
        fail_msg("epilogue pairs m=%d n=%d k=%d threads=%d differ", m, n, k,
                 pt_bf16_get_threads());
    assert_memory_equal(h2, h, nc * sizeof(pt_bf16));
    assert_memory_equal(aux2, aux, nc * sizeof(float));
    free(x), free(w), free(bias), free(c), free(aux), free(aux2), free(h), free(h2), free(p);
    free(want);
}

static void test_epilogue_pairs(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) skip();
    pt_bf16_set_kernel(native);
    const int shapes[][3] = {{256, 100, 25}, {1, 100, 25}, {37, 100, 25}, {7, 17, 2},
                             {13, 130, 31},  {255, 64, 100}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_epilogue_pairs(shapes[s][0], shapes[s][1], shapes[s][2]);
    pt_bf16_set_threads(2);
    check_epilogue_pairs(1001, 100, 25);
    pt_bf16_set_threads(1);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* the map of the filter's ds1: x ⊙= aux */
static void mul_aux(float *x, float *aux, const float *bias, int rows, int n)
{
    (void)bias;
    for (size_t i = 0; i < (size_t)rows * (size_t)n; i++) x[i] *= aux[i];
}

/* C = (X·W) ⊙ S with X as bf16 rows (dS1's dP), C kept and only its pairs
 * as the bf16 copy: C and the pairs equal the unfused sequence's. */
static void check_pairs_kept(int m, int n, int k)
{
    const size_t nx = (size_t)m * k, nw = (size_t)k * n, nc = (size_t)m * n;
    float *xf = rnd_floats(nx, 1.0f), *w = rnd_floats(nw, 1.0f), *sig = rnd_floats(nc, 1.0f);
    float *sig_keep = floats_copy(sig, nc), *want = rnd_floats(nc, 1.0f);
    float *c = rnd_floats(nc, 1.0f);
    pt_bf16 *x = malloc(nx * sizeof(pt_bf16));
    const int ld = pt_bf16_pairs_ld(n);
    const size_t np = (size_t)(m + 1) / 2 * ld;
    uint32_t *p = malloc(np * sizeof(uint32_t)), *pw = malloc(np * sizeof(uint32_t));
    assert_true(x && p && pw);
    pt_bf16_from_floats(x, xf, nx);
    memset(p, 0xab, np * sizeof(uint32_t));
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, x,
                                     PT_BF16_FMT_ROWS, k, w, 0, n, 0.0f, want, n, NULL),
                     PT_BF16_OK);
    mul_aux(want, sig, NULL, m, n);
    pt_bf16_pairs_pack(pw, want, n, m, n, NULL, 0);
    const pt_bf16_epilogue e = {.map = mul_aux, .aux = sig, .pairs = p};
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, x,
                                     PT_BF16_FMT_ROWS, k, w, 0, n, 0.0f, c, n, &e),
                     PT_BF16_OK);
    if (memcmp(c, want, nc * sizeof(float)) != 0 || memcmp(p, pw, np * sizeof(uint32_t)) != 0)
        fail_msg("pairs of a kept C m=%d n=%d k=%d threads=%d differ", m, n, k,
                 pt_bf16_get_threads());
    assert_memory_equal(sig, sig_keep, nc * sizeof(float));
    free(xf), free(w), free(sig), free(sig_keep), free(want), free(c), free(x), free(p);
    free(pw);
}

static void test_pairs_kept(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) skip();
    pt_bf16_set_kernel(native);
    const int shapes[][3] = {{256, 100, 100}, {1, 100, 100}, {37, 100, 100}, {7, 17, 2},
                             {13, 130, 31},   {255, 64, 100}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_pairs_kept(shapes[s][0], shapes[s][1], shapes[s][2]);
    pt_bf16_set_threads(2);
    check_pairs_kept(1001, 100, 100);
    pt_bf16_set_threads(1);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* X·Wᵀ with X as fp32 and as rows_h of pt_bf16_pairs_pack (zero-padded to
 * an even ld), plain and with the bias + ssp + bf16 epilogue. */
static void check_rows_pad(int m, int n, int k)
{
    const int ldx = k + 1 + (k % 2 == 0); /* even, past k */
    float *x = rnd_floats((size_t)m * k, 1.0f), *w = rnd_floats((size_t)n * k, 1.0f);
    float *bias = rnd_floats(n, 1.0f);
    pt_bf16 *xh = malloc((size_t)m * ldx * sizeof(pt_bf16));
    uint32_t *xp = malloc(((size_t)m + 1) / 2 * pt_bf16_pairs_ld(k) * sizeof(uint32_t));
    float *c0 = malloc((size_t)m * n * sizeof(float)), *c1 = malloc((size_t)m * n * sizeof(float));
    float *s0 = malloc((size_t)m * n * sizeof(float)), *s1 = malloc((size_t)m * n * sizeof(float));
    pt_bf16 *h0 = malloc((size_t)m * n * sizeof(pt_bf16)), *h1 = malloc((size_t)m * n * sizeof(pt_bf16));
    assert_true(xh && xp && c0 && c1 && s0 && s1 && h0 && h1);
    pt_bf16_pairs_pack(xp, x, k, m, k, xh, ldx);
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, 0, k, w, 0, k,
                                     0.0f, c0, n, NULL),
                     PT_BF16_OK);
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, m, n, k, 1.0f, xh,
                                     PT_BF16_FMT_ROWS_PAD, ldx, w, 0, k, 0.0f, c1, n, NULL),
                     PT_BF16_OK);
    if (memcmp(c0, c1, (size_t)m * n * sizeof(float)) != 0)
        fail_msg("padded rows m=%d n=%d k=%d threads=%d differ", m, n, k, pt_bf16_get_threads());
    if (k <= PT_BF16_KC) {
        const pt_bf16_epilogue e0 = {.bias = bias, .map = pt_ssp_forward, .aux = s0, .h = h0,
                                     .ldh = n};
        const pt_bf16_epilogue e1 = {.bias = bias, .map = pt_ssp_forward, .aux = s1, .h = h1,
                                     .ldh = n};
        assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, 0, k, w, 0,
                                         k, 0.0f, NULL, n, &e0),
                         PT_BF16_OK);
        assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, m, n, k, 1.0f, xh,
                                         PT_BF16_FMT_ROWS_PAD, ldx, w, 0, k, 0.0f, NULL, n, &e1),
                         PT_BF16_OK);
        assert_memory_equal(h0, h1, (size_t)m * n * sizeof(pt_bf16));
        assert_memory_equal(s0, s1, (size_t)m * n * sizeof(float));
    }
    free(x), free(w), free(bias), free(xh), free(xp), free(c0), free(c1), free(s0), free(s1);
    free(h0), free(h1);
}

static void test_rows_pad(void **state)
{
    (void)state;
    const int kernels[2] = {native, PT_BF16_KERNEL_PORTABLE};
    const int shapes[][3] = {{256, 100, 25}, {1, 100, 25}, {37, 100, 25}, {7, 17, 1},
                             {13, 130, 31},  {40, 64, 100}, {11, 20, 301}};
    for (int ki = pt_cpu_has_bf16() ? 0 : 1; ki < 2; ki++) {
        assert_int_equal(pt_bf16_set_kernel((pt_bf16_kernel)kernels[ki]), PT_BF16_OK);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            if (ki == 0 || shapes[s][2] > PT_BF16_KC) /* portable: no epilogue */
                check_rows_pad(shapes[s][0], shapes[s][1], shapes[s][2]);
        if (ki == 0) {
            pt_bf16_set_threads(2);
            check_rows_pad(1001, 100, 25);
            pt_bf16_set_threads(1);
        }
    }
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

static void test_pairs_refusals(void **state)
{
    (void)state;
    uint32_t p[64 * 2] = {0};
    float x[64] = {0}, c[4] = {1, 2, 3, 4};
    const float keep[4] = {1, 2, 3, 4};
    pt_bf16 h[4];
    const int ld = pt_bf16_pairs_ld(2);
    /* pairs A must be op(A) = Aᵀ, pairs B op(B) = B */
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, p,
                                     PT_BF16_FMT_PAIRS, ld, x, 0, 2, 0.0f, c, 2, NULL),
                     PT_BF16_EFORMAT);
    assert_int_equal(pt_bf16_gemm_ex(CblasTrans, CblasTrans, 2, 2, 2, 1.0f, x, 0, 2, p,
                                     PT_BF16_FMT_PAIRS, ld, 0.0f, c, 2, NULL),
                     PT_BF16_EFORMAT);
    /* ld below pt_bf16_pairs_ld */
    assert_int_equal(pt_bf16_gemm_ex(CblasTrans, CblasNoTrans, 2, 2, 2, 1.0f, p,
                                     PT_BF16_FMT_PAIRS, ld - 1, x, 0, 2, 0.0f, c, 2, NULL),
                     PT_BF16_EFORMAT);
    assert_int_equal(pt_bf16_gemm_ex(CblasTrans, CblasNoTrans, 2, 2, 2, 1.0f, x, 0, 2, p,
                                     PT_BF16_FMT_PAIRS, 2, 0.0f, c, 2, NULL),
                     PT_BF16_EFORMAT);
    /* unknown formats */
    assert_int_equal(pt_bf16_gemm_ex(CblasTrans, CblasNoTrans, 2, 2, 2, 1.0f, x, 3, 2, x, 0, 2,
                                     0.0f, c, 2, NULL),
                     PT_BF16_EFORMAT);
    assert_int_equal(pt_bf16_gemm_ex(CblasTrans, CblasNoTrans, 2, 2, 2, 1.0f, x, 0, 2, x, -1, 2,
                                     0.0f, c, 2, NULL),
                     PT_BF16_EFORMAT);
    /* padded rows: A only, not transposed, an even ld past an odd k */
    assert_int_equal(pt_bf16_gemm_ex(CblasTrans, CblasNoTrans, 2, 2, 3, 1.0f, x, PT_BF16_FMT_ROWS_PAD,
                                     4, x, 0, 2, 0.0f, c, 2, NULL),
                     PT_BF16_EFORMAT);
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 3, 1.0f, x,
                                     PT_BF16_FMT_ROWS_PAD, 5, x, 0, 2, 0.0f, c, 2, NULL),
                     PT_BF16_EFORMAT);
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 3, 1.0f, x,
                                     PT_BF16_FMT_ROWS_PAD, 3, x, 0, 2, 0.0f, c, 2, NULL),
                     PT_BF16_EFORMAT);
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, x, 0, 2, x,
                                     PT_BF16_FMT_ROWS_PAD, 2, 0.0f, c, 2, NULL),
                     PT_BF16_EFORMAT);
    /* an epilogue without C needs a bf16 copy (rows or pairs) to keep; the
     * portable kernel has no epilogue */
    if (pt_cpu_has_bf16()) pt_bf16_set_kernel(native);
    const float scale[2] = {1, 1};
    const pt_bf16_epilogue no_copy = {.row_scale = scale};
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, x, 0, 2, x, 0, 2,
                                     0.0f, NULL, 2, &no_copy),
                     PT_BF16_ENULL);
    const pt_bf16_epilogue no_h = {.pairs = p};
    pt_bf16_set_kernel(PT_BF16_KERNEL_PORTABLE);
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, x, 0, 2, x, 0, 2,
                                     0.0f, c, 2, &no_h),
                     PT_BF16_EFUSED);
    const pt_bf16_epilogue with_h = {.h = h, .ldh = 2, .pairs = p};
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, x, 0, 2, x, 0, 2,
                                     0.0f, c, 2, &with_h),
                     PT_BF16_EFUSED);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
    assert_memory_equal(c, keep, sizeof keep);
    assert_non_null(strstr(pt_bf16_strerror(PT_BF16_EFORMAT), "pairs"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pairs_ld),
        NATIVE_TESTS(test_pairs_pack),
        NATIVE_TESTS(test_pairs_products),
        NATIVE_TESTS(test_epilogue_pairs),
        NATIVE_TESTS(test_pairs_kept),
        NATIVE_TESTS(test_rows_pad),
        NATIVE_TESTS(test_pairs_refusals),
    };
    return cmocka_run_group_tests_name("bf16_pairs", tests, NULL, NULL);
}
