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
 *     rounded operands; a weight held (pt_bf16_weights_hold, b_held) is
 *     compared once per hold;
 *   - pt_bf16_gemm_ex with fp32 and bf16 operands in every combination and
 *     its fused epilogues (bias + shifted softplus + bf16 copy with C not
 *     kept, bias + row scale, row scale + copy, map alone) equals the
 *     unfused sequence (product, scale, pt_ssp_forward, rounding) for row
 *     counts off the 6-row tile, one row, odd k, k = 256, n past one panel,
 *     bf16 A read in place, and split over two threads; what it cannot fuse
 *     is refused with its code, C untouched. */
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

#define PT_TEST_SEED 0x2545f4914f6cdd1dull
#include "tests/unit/rand_fixture.h"

static CBLAS_TRANSPOSE tr(int t) { return t ? CblasTrans : CblasNoTrans; }

/* C = alpha·op(A)·op(B) + beta·C on fp32 operands (rounded by the kernel)
 * equals the kernel and the scalar reference on operands rounded first. */
static void check_same(int ta, int tb, int m, int n, int k, int lda, int ldb, float beta,
                       const float *a, const float *b)
{
    const size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb;
    const size_t nc = (size_t)m * n;
    float *c32 = rnd_floats(nc, 1.0f), *c16 = malloc(nc * sizeof(float)), *cr = malloc(nc * sizeof(float));
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
    pt_bf16_gemm_ref_kernel(native, tr(ta), tr(tb), m, n, k, -0.5f, a16, lda, b16, ldb, beta, cr, n);
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
    pt_bf16_set_kernel(native);
    const int ms[] = {1, 5, 7, 43, 241, 256}, ks[] = {2, 17, 24, 25, 26, 31, 32, 33, 100, 300};
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (int tb = 0; tb < 2; tb++) {
                const int m = ms[mi], k = ks[ki], n = 100;
                float *a = rnd_floats((size_t)m * k, 1.0f), *b = rnd_floats((size_t)n * k, 1.0f);
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
    pt_bf16_set_kernel(native);
    const int shapes[][3] = {{100, 100, 256}, {100, 25, 256}, {100, 25, 255},
                             {17, 33, 513},   {16, 16, 2},    {100, 100, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int at = 0; at < 3; at++) {
            const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            const size_t na = (size_t)k * m, nb = (size_t)k * n;
            float *a = rnd_floats(na, 1.0f), *b = rnd_floats(nb, 1.0f);
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
    float *x = rnd_floats((size_t)rows * in, 1.0f), *dy = rnd_floats((size_t)rows * out, 1.0f);
    check_same(0, 1, rows, out, in, in, ldw, 0.0f, x, w);
    check_same(0, 0, rows, in, out, out, ldw, 1.0f, dy, w);
    free(x), free(dy);
}

static void test_cached_weights_follow_changes(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) skip();
    pt_bf16_set_kernel(native);
    enum { NW = 6 }; /* more weights than the cache keeps */
    const int out = 100, in = 25;
    float *w[NW];
    for (int i = 0; i < NW; i++) w[i] = rnd_floats((size_t)out * 100, 1.0f);
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
    float *x = rnd_floats((size_t)2000 * 100, 1.0f);
    check_same(0, 1, 2000, 100, 100, 100, 100, 0.0f, x, w[1]);
    check_same(0, 1, 2000, 100, 100, 100, 100, 0.0f, x, w[1]);
    pt_bf16_set_threads(1);
    free(x);
    for (int i = 0; i < NW; i++) free(w[i]);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* C = X·Wᵀ through pt_bf16_gemm_ex, the weight held or not. */
static void held_product(const float *x, const float *w, float *c, int held)
{
    const pt_bf16_epilogue e = {.b_held = held};
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, 37, 100, 100, 1.0f, x, 0, 100, w,
                                     0, 100, 0.0f, c, 100, &e),
                     PT_BF16_OK);
}

/* A held weight is compared once per hold: a product saying b_held after
 * the hold's first comparison reuses that packing without comparing (so a
 * change the caller promised not to make is not seen: that is the skipped
 * comparison); one that does not say so, or the first after a new hold,
 * compares and sees the change. */
static void test_held_weights(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) skip();
    pt_bf16_set_kernel(native);
    const size_t nc = (size_t)37 * 100;
    float *x = rnd_floats((size_t)37 * 100, 1.0f), *w = rnd_floats((size_t)100 * 100, 1.0f);
    float *old_w = floats_copy(w, (size_t)100 * 100);
    float *c_old = malloc(nc * sizeof(float)), *c_new = malloc(nc * sizeof(float));
    float *c = malloc(nc * sizeof(float));
    assert_true(c_old && c_new && c);
    held_product(x, w, c_old, 0);
    w[17] += 0.5f;
    held_product(x, w, c_new, 0);
    assert_memory_not_equal(c_new, c_old, nc * sizeof(float));
    memcpy(w, old_w, 100 * 100 * sizeof(float));

    pt_bf16_weights_hold();
    held_product(x, w, c, 0); /* compares: the hold's packing of w */
    assert_memory_equal(c, c_old, nc * sizeof(float));
    w[17] += 0.5f;            /* a change the holder promised not to make */
    held_product(x, w, c, 1); /* reused without comparing */
    assert_memory_equal(c, c_old, nc * sizeof(float));
    held_product(x, w, c, 0); /* not held: compared, repacked */
    assert_memory_equal(c, c_new, nc * sizeof(float));
    held_product(x, w, c, 1);
    assert_memory_equal(c, c_new, nc * sizeof(float));

    memcpy(w, old_w, 100 * 100 * sizeof(float));
    pt_bf16_weights_hold();   /* a new hold: its first held product compares */
    held_product(x, w, c, 1);
    assert_memory_equal(c, c_old, nc * sizeof(float));
    /* a weight never compared in the hold is packed, then held */
    float *w2 = rnd_floats((size_t)100 * 100, 1.0f), *c2 = malloc(nc * sizeof(float));
    assert_non_null(c2);
    held_product(x, w2, c, 1);
    held_product(x, w2, c2, 0);
    assert_memory_equal(c, c2, nc * sizeof(float));
    free(x), free(w), free(old_w), free(c_old), free(c_new), free(c), free(w2), free(c2);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* --- pt_bf16_gemm_ex: mixed operands and the fused epilogue ------------- */

/* The unfused sequence: the product on fp32 copies of the operands (the
 * bf16 ones widened exactly), then C[r] *= scale[r], map, rounding. */
static void unfused(int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b,
                    int ldb, const pt_bf16_epilogue *e, float beta, float *c, float *aux,
                    pt_bf16 *h)
{
    if (e->bias)
        assert_int_equal(pt_bf16_sgemm_bias(tr(ta), tr(tb), m, n, k, 1.0f, a, lda, b, ldb,
                                            e->bias, c, n),
                         PT_BF16_OK);
    else
        assert_int_equal(pt_bf16_sgemm(tr(ta), tr(tb), m, n, k, 1.0f, a, lda, b, ldb, beta, c, n),
                         PT_BF16_OK);
    for (int r = 0; r < m && e->row_scale; r++)
        for (int j = 0; j < n; j++) c[(size_t)r * n + j] *= e->row_scale[r];
    if (e->map) e->map(c, aux, NULL, m, n);
    if (h) pt_bf16_from_floats(h, c, (size_t)m * n);
}

static void test_gemm_ex_fused_equals_unfused(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) skip();
    pt_bf16_set_kernel(native);
    const int shapes[][3] = {{1, 1, 1},   {7, 17, 2},    {37, 100, 25}, {256, 100, 100},
                             {241, 128, 256}, {13, 65, 31}, {700, 100, 100}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int variant = 0; variant < 16; variant++) {
            const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            const int a16 = variant & 1, b16 = variant >> 1 & 1, keep_c = variant >> 2 & 1;
            const int tb = variant >> 3 & 1, ta = 0; /* the fused products: X·Wᵀ, dY·W */
            const int lda = k, ldb = tb ? k : n;
            const size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
            float *a = rnd_floats(na, 1.0f), *b = rnd_floats(nb, 1.0f), *bias = rnd_floats((size_t)n, 1.0f), *scale = rnd_floats((size_t)m, 1.0f);
            float *c0 = rnd_floats(nc, 1.0f), *aux0 = rnd_floats(nc, 1.0f), *cf = rnd_floats(nc, 1.0f), *auxf = rnd_floats(nc, 1.0f);
            pt_bf16 *a_h = malloc(na * sizeof(pt_bf16)), *b_h = malloc(nb * sizeof(pt_bf16));
            pt_bf16 *h0 = malloc(nc * sizeof(pt_bf16)), *hf = malloc(nc * sizeof(pt_bf16));
            assert_true(a_h && b_h && h0 && hf);
            pt_bf16_from_floats(a_h, a, na);
            pt_bf16_from_floats(b_h, b, nb);
            /* the fp32 operands hold the bf16 values, so both calls see the same numbers */
            pt_bf16_to_floats(a, a_h, na);
            pt_bf16_to_floats(b, b_h, nb);
            const pt_bf16_epilogue eps[] = {
                {.bias = bias, .map = pt_ssp_forward, .aux = auxf, .h = hf, .ldh = n},
                {.bias = bias, .row_scale = scale},
                {.row_scale = scale, .h = hf, .ldh = n},
                {.map = pt_ssp_forward, .aux = auxf},
            };
            for (size_t ei = 0; ei < sizeof eps / sizeof eps[0]; ei++) {
                const pt_bf16_epilogue *e = &eps[ei];
                const int c_kept = keep_c || !e->h;
                const float beta = e->bias || !c_kept ? 0.0f : 0.5f;
                float *cu = rnd_floats(nc, 1.0f), *auxu = rnd_floats(nc, 1.0f);
                memcpy(cu, c0, nc * sizeof(float));
                memcpy(cf, c0, nc * sizeof(float));
                memset(h0, 0, nc * sizeof(pt_bf16));
                memset(hf, 0, nc * sizeof(pt_bf16));
                unfused(ta, tb, m, n, k, a, lda, b, ldb, e, beta, cu, auxu, e->h ? h0 : NULL);
                int rc = pt_bf16_gemm_ex(tr(ta), tr(tb), m, n, k, 1.0f, a16 ? (void *)a_h : a,
                                         a16, lda, b16 ? (void *)b_h : b, b16, ldb, beta,
                                         c_kept ? cf : NULL, n, e);
                assert_int_equal(rc, PT_BF16_OK);
                if (c_kept && memcmp(cf, cu, nc * sizeof(float)) != 0)
                    fail_msg("gemm_ex m=%d n=%d k=%d variant=%d epilogue=%zu: C differs", m, n,
                             k, variant, ei);
                if (e->map && memcmp(auxf, auxu, nc * sizeof(float)) != 0)
                    fail_msg("gemm_ex m=%d n=%d k=%d variant=%d epilogue=%zu: aux differs", m, n,
                             k, variant, ei);
                if (e->h && memcmp(hf, h0, nc * sizeof(pt_bf16)) != 0)
                    fail_msg("gemm_ex m=%d n=%d k=%d variant=%d epilogue=%zu: bf16 copy differs",
                             m, n, k, variant, ei);
                free(cu), free(auxu);
            }
            /* no epilogue, A transposed (a weight gradient with bf16 B) */
            float *cu = rnd_floats(nc, 1.0f), *cg = malloc(nc * sizeof(float));
            assert_non_null(cg);
            memcpy(cg, cu, nc * sizeof(float));
            float *at = rnd_floats(na, 1.0f);
            pt_bf16 *at_h = malloc(na * sizeof(pt_bf16));
            assert_non_null(at_h);
            pt_bf16_from_floats(at_h, at, na);
            pt_bf16_to_floats(at, at_h, na);
            assert_int_equal(pt_bf16_sgemm(CblasTrans, tr(tb), m, n, k, 1.0f, at, m, b, ldb, 1.0f,
                                           cu, n),
                             PT_BF16_OK);
            assert_int_equal(pt_bf16_gemm_ex(CblasTrans, tr(tb), m, n, k, 1.0f,
                                             a16 ? (void *)at_h : at, a16, m,
                                             b16 ? (void *)b_h : b, b16, ldb, 1.0f, cg, n, NULL),
                             PT_BF16_OK);
            assert_memory_equal(cg, cu, nc * sizeof(float));
            free(cu), free(cg), free(at), free(at_h);
            free(a), free(b), free(bias), free(scale), free(c0), free(aux0), free(cf), free(auxf);
            free(a_h), free(b_h), free(h0), free(hf);
        }
    /* split over two threads: each worker's rows get their epilogue */
    pt_bf16_set_threads(2);
    {
        const int m = 1000, n = 100, k = 100;
        float *a = rnd_floats((size_t)m * k, 1.0f), *b = rnd_floats((size_t)n * k, 1.0f), *bias = rnd_floats(n, 1.0f);
        float *cu = rnd_floats((size_t)m * n, 1.0f), *auxu = rnd_floats((size_t)m * n, 1.0f), *auxf = rnd_floats((size_t)m * n, 1.0f);
        pt_bf16 *hu = malloc((size_t)m * n * sizeof(pt_bf16));
        pt_bf16 *hf = malloc((size_t)m * n * sizeof(pt_bf16));
        assert_true(hu && hf);
        const pt_bf16_epilogue e = {.bias = bias, .map = pt_ssp_forward, .aux = auxf, .h = hf,
                                    .ldh = n};
        unfused(0, 1, m, n, k, a, k, b, k, &e, 0.0f, cu, auxu, hu);
        assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, 0, k, b, 0,
                                         k, 0.0f, NULL, n, &e),
                         PT_BF16_OK);
        assert_memory_equal(hf, hu, (size_t)m * n * sizeof(pt_bf16));
        assert_memory_equal(auxf, auxu, (size_t)m * n * sizeof(float));
        free(a), free(b), free(bias), free(cu), free(auxu), free(auxf), free(hu), free(hf);
    }
    pt_bf16_set_threads(1);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* What the fused epilogue cannot do is refused with PT_BF16_EFUSED (or
 * ENULL), C untouched, and the message says what it needs. */
static void test_gemm_ex_refusals(void **state)
{
    (void)state;
    float a[300 * 2], b[300 * 2], c[4] = {1, 2, 3, 4}, aux[4], scale[2] = {1, 1};
    pt_bf16 h[4];
    for (int i = 0; i < 600; i++) a[i] = b[i] = 0.5f;
    const pt_bf16_epilogue with_h = {.h = h, .ldh = 2}, with_scale = {.row_scale = scale};
    const pt_bf16_epilogue map_no_aux = {.map = pt_ssp_forward};
    const pt_bf16_epilogue map_aux = {.map = pt_ssp_forward, .aux = aux};
    const pt_bf16_epilogue short_h = {.h = h, .ldh = 1};
    const float keep[4] = {1, 2, 3, 4};
    if (pt_cpu_has_bf16()) pt_bf16_set_kernel(native);
    if (pt_cpu_has_bf16()) {
        /* k past one reduction block */
        assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 257, 1.0f, a, 0, 257,
                                         b, 0, 2, 0.0f, c, 2, &with_scale),
                         PT_BF16_EFUSED);
        /* k = 0, alpha = 0 */
        assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 0, 1.0f, a, 0, 1, b, 0,
                                         2, 0.0f, c, 2, &with_scale),
                         PT_BF16_EFUSED);
        assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 2, 0.0f, a, 0, 2, b, 0,
                                         2, 0.0f, c, 2, &with_scale),
                         PT_BF16_EFUSED);
        /* map needs ldc = n */
        assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 1, 2, 2, 1.0f, a, 0, 2, b, 0,
                                         2, 0.0f, c, 3, &map_aux),
                         PT_BF16_EFUSED);
        /* C not kept, beta != 0 and no bias: nothing to add beta·C to */
        assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 0, 2, b, 0,
                                         2, 1.0f, NULL, 2, &with_h),
                         PT_BF16_EFUSED);
        /* the bf16 copy's rows shorter than n */
        assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 0, 2, b, 0,
                                         2, 0.0f, c, 2, &short_h),
                         PT_BF16_EFUSED);
        /* map without aux is passed NULL (the ssp's value alone): not a refusal */
        float cm[4], cu[4];
        assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 0, 2, b, 0,
                                         2, 0.0f, cm, 2, &map_no_aux),
                         PT_BF16_OK);
        assert_int_equal(pt_bf16_sgemm(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, b, 2,
                                       0.0f, cu, 2),
                         PT_BF16_OK);
        pt_ssp_forward(cu, NULL, NULL, 2, 2);
        assert_memory_equal(cm, cu, sizeof cu);
    }
    /* C NULL without a bf16 copy */
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 0, 2, b, 0, 2,
                                     0.0f, NULL, 2, &with_scale),
                     PT_BF16_ENULL);
    /* the portable kernel fuses nothing */
    pt_bf16_set_kernel(PT_BF16_KERNEL_PORTABLE);
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 0, 2, b, 0, 2,
                                     0.0f, c, 2, &with_scale),
                     PT_BF16_EFUSED);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
    assert_memory_equal(c, keep, sizeof keep);
    assert_non_null(strstr(pt_bf16_strerror(PT_BF16_EFUSED), "AVX512-BF16"));
    /* bad shapes are the plain products' errors */
    assert_int_equal(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, -1, 2, 2, 1.0f, a, 0, 2, b, 0,
                                     2, 0.0f, c, 2, NULL),
                     PT_BF16_EDIM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        NATIVE_TESTS(test_contiguous_rows_of_a),
        NATIVE_TESTS(test_interleaved_pairs_of_rows),
        NATIVE_TESTS(test_cached_weights_follow_changes),
        NATIVE_TESTS(test_held_weights),
        NATIVE_TESTS(test_gemm_ex_fused_equals_unfused),
        NATIVE_TESTS(test_gemm_ex_refusals),
    };
    return cmocka_run_group_tests_name("bf16_fast", tests, NULL, NULL);
}
