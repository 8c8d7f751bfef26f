/* test_sgemm_epilogue.c — the fused epilogues of the own fp32 kernels
 * (engine/model/sgemm_kernels.h: pt_sgemm_fused_run, pt_sgemm_small_fused):
 *   - for every implementation (AVX-512, AVX2, the scalar reference,
 *     OpenBLAS; a kernel the CPU lacks must be refused with -1), NT and NN,
 *     with and without a bias, every epilogue (the row scale into a second
 *     array or in place, the product with a second matrix): the result
 *     equals the unfused sequence built here from the public calls
 *     (pt_sgemm_bias_run or pt_sgemm_run through the same implementation,
 *     then pt_rows_scale / pt_ssp_backward as their own pass, the model's
 *     ops) bit for bit, padding columns of C and of the second array
 *     untouched;
 *   - shapes: the filter network's (rows × 25 → 100, rows × 100 → 100), row
 *     counts over the tile remainders, widths at the 8/16-lane and
 *     112-column panel edges, k = 0;
 *   - refusals (TN, no epilogue) and the policy entry point;
 *   - the ssp entry points the model uses with them: pt_ssp_backward without
 *     a sigmoid (d already multiplied) gives the same bias gradient;
 *     pt_ssp_forward without a sigmoid (passes that take no gradient) the
 *     bits it gives with one. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/schnet_ops.h"
#include "engine/model/sgemm_kernels.h"

#define PT_TEST_SEED 0x2545f4914f6cdd1dull
#include "tests/unit/rand_fixture.h"

typedef struct prob {
    CBLAS_TRANSPOSE tb;
    int m, n, k, lda, ldb, ldc;
    float *a, *b, *bias, *c0, *aux0, *scale, *mul;
} prob;

static prob make(CBLAS_TRANSPOSE tb, int m, int n, int k, int pad)
{
    /* leading dimensions at least 1 (cblas_sgemm's rule, k = 0 included) */
    const int k1 = k > 0 ? k : 1;
    prob p = {tb, m, n, k, k1 + pad, (tb == CblasTrans ? k1 : n) + pad, n + pad,
              NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    const int brows = tb == CblasTrans ? n : k;
    p.a = rnd_floats((size_t)m * p.lda, 1.0f);
    p.b = rnd_floats((size_t)brows * p.ldb, 3.0f);
    p.bias = rnd_floats((size_t)n, 30.0f);
    p.c0 = rnd_floats((size_t)m * p.ldc, 1.0f);
    p.aux0 = rnd_floats((size_t)m * p.ldc, 1.0f);
    p.scale = rnd_floats((size_t)m, 1.0f);
    p.mul = rnd_floats((size_t)m * p.ldc, 1.0f);
    return p;
}

static void drop(prob *p)
{
    free(p->a), free(p->b), free(p->bias), free(p->c0), free(p->aux0), free(p->scale),
        free(p->mul);
}

enum { SCALE_AUX, SCALE_IN_PLACE, MUL, N_EPI };
static const char *const epi_name[] = {"scale->aux", "scale", "mul"};

static pt_sgemm_epilogue epilogue(const prob *p, int kind, float *aux)
{
    pt_sgemm_epilogue e = {.kind = PT_SGEMM_EPI_ROW_SCALE, .scale = p->scale,
                           .aux = kind == SCALE_AUX ? aux : NULL};
    if (kind == MUL) e = (pt_sgemm_epilogue){.kind = PT_SGEMM_EPI_MUL, .mul = p->mul};
    return e;
}

/* The unfused sequence: the product through impl, then the op as a pass. */
static int unfused(const prob *p, pt_sgemm_impl impl, int kind, int with_bias, float *c,
                   float *aux)
{
    int rc = with_bias ? pt_sgemm_bias_run(impl, CblasNoTrans, p->tb, p->m, p->n, p->k, p->a,
                                           p->lda, p->b, p->ldb, p->bias, c, p->ldc)
                       : pt_sgemm_run(impl, CblasNoTrans, p->tb, p->m, p->n, p->k, p->a, p->lda,
                                      p->b, p->ldb, 0.0f, c, p->ldc);
    if (rc) return rc;
    if (kind == SCALE_AUX)
        for (int i = 0; i < p->m; i++)
            pt_rows_scale(aux + (long)i * p->ldc, c + (long)i * p->ldc, p->scale + i, 1, p->n);
    if (kind == SCALE_IN_PLACE)
        for (int i = 0; i < p->m; i++)
            pt_rows_scale(c + (long)i * p->ldc, c + (long)i * p->ldc, p->scale + i, 1, p->n);
    if (kind == MUL)
        for (int i = 0; i < p->m; i++)
            pt_ssp_backward(c + (long)i * p->ldc, NULL, p->mul + (long)i * p->ldc, 1, p->n);
    return 0;
}

static void same(const float *x, const float *y, size_t n, const char *what, const prob *p,
                 pt_sgemm_impl impl, int kind, int with_bias)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&x[i], &y[i], sizeof(float)))
            fail_msg("%s N%c %dx%dx%d ldc %d %s %s: %s element %zu: %.9g vs unfused %.9g",
                     pt_sgemm_impl_name(impl), p->tb == CblasTrans ? 'T' : 'N', p->m, p->n,
                     p->k, p->ldc, epi_name[kind], with_bias ? "bias" : "no bias", what, i,
                     (double)x[i], (double)y[i]);
}

static const pt_sgemm_impl impls[] = {PT_SGEMM_AVX512, PT_SGEMM_AVX2, PT_SGEMM_SCALAR,
                                      PT_SGEMM_OPENBLAS};

/* Fused against unfused through every implementation, every epilogue. */
static void check(const prob *p)
{
    const size_t len = (size_t)p->m * p->ldc;
    for (size_t v = 0; v < sizeof impls / sizeof impls[0]; v++)
        for (int kind = 0; kind < N_EPI; kind++)
            for (int with_bias = 0; with_bias <= 1; with_bias++) {
                float *c = floats_copy(p->c0, len), *aux = floats_copy(p->aux0, len);
                float *uc = floats_copy(p->c0, len), *uaux = floats_copy(p->aux0, len);
                pt_sgemm_epilogue e = epilogue(p, kind, aux);
                int rc = pt_sgemm_fused_run(impls[v], CblasNoTrans, p->tb, p->m, p->n, p->k,
                                            p->a, p->lda, p->b, p->ldb, 0.0f,
                                            with_bias ? p->bias : NULL, c, p->ldc, &e);
                if (!pt_sgemm_supported(impls[v])) {
                    assert_int_equal(rc, -1);
                } else {
                    assert_int_equal(rc, 0);
                    assert_int_equal(unfused(p, impls[v], kind, with_bias, uc, uaux), 0);
                    same(c, uc, len, "C", p, impls[v], kind, with_bias);
                    same(aux, uaux, len, "aux", p, impls[v], kind, with_bias);
                }
                free(c), free(aux), free(uc), free(uaux);
            }
}

static void sweep(CBLAS_TRANSPOSE tb, const int (*shapes)[3], int count)
{
    for (int s = 0; s < count; s++)
        for (int pad = 0; pad <= 5; pad += 5) {
            prob p = make(tb, shapes[s][0], shapes[s][1], shapes[s][2], pad);
            check(&p);
            drop(&p);
        }
}

/* m, n, k: the filter network's shapes (256-row chunks and remainders),
 * row counts around the 3-row (AVX-512) and 6-row (AVX2) tiles, widths at
 * the lane and panel edges (112 = 7 × 16: n = 113 starts a second panel). */
static const int shapes[][3] = {
    {256, 100, 25}, {256, 100, 100}, {37, 100, 25}, {1, 100, 100}, {2, 100, 100},
    {4, 100, 25}, {5, 100, 100}, {7, 100, 25}, {13, 100, 100}, {3, 16, 5}, {6, 17, 9},
    {8, 31, 31}, {9, 33, 64}, {11, 112, 128}, {10, 113, 127}, {12, 128, 1}, {5, 100, 0},
};

static void test_nt(void **state)
{
    (void)state;
    sweep(CblasTrans, shapes, (int)(sizeof shapes / sizeof shapes[0]));
}

static void test_nn(void **state)
{
    (void)state;
    sweep(CblasNoTrans, shapes, (int)(sizeof shapes / sizeof shapes[0]));
}

/* The policy's entry point: the own kernel's answer when it takes the
 * shape (1), the unfused sequence left to the caller (0) when OpenBLAS is
 * chosen or the layout is not one the epilogues take. */
static void test_policy_entry(void **state)
{
    (void)state;
    prob p = make(CblasTrans, 40, 100, 25, 0);
    const size_t len = (size_t)p.m * p.ldc;
    float *c = floats_copy(p.c0, len), *aux = floats_copy(p.aux0, len), *uc = floats_copy(p.c0, len),
          *uaux = floats_copy(p.aux0, len);
    pt_sgemm_epilogue e = epilogue(&p, SCALE_AUX, aux);
    pt_sgemm_force(PT_SGEMM_AUTO);
    int own = pt_sgemm_choice(CblasNoTrans, CblasTrans, p.m, p.n, p.k) != PT_SGEMM_OPENBLAS;
    assert_int_equal(pt_sgemm_small_fused(CblasNoTrans, CblasTrans, p.m, p.n, p.k, p.a, p.lda,
                                          p.b, p.ldb, 0.0f, p.bias, c, p.ldc, &e),
                     own);
    if (own) {
        assert_int_equal(unfused(&p, PT_SGEMM_SCALAR, SCALE_AUX, 1, uc, uaux), 0);
        same(c, uc, len, "C", &p, PT_SGEMM_AUTO, SCALE_AUX, 1);
        same(aux, uaux, len, "aux", &p, PT_SGEMM_AUTO, SCALE_AUX, 1);
    }
    /* OpenBLAS forced: nothing runs, the caller is told to run it unfused */
    memcpy(c, p.c0, sizeof(float) * len);
    pt_sgemm_force(PT_SGEMM_OPENBLAS);
    assert_int_equal(pt_sgemm_small_fused(CblasNoTrans, CblasTrans, p.m, p.n, p.k, p.a, p.lda,
                                          p.b, p.ldb, 0.0f, p.bias, c, p.ldc, &e),
                     0);
    assert_memory_equal(c, p.c0, sizeof(float) * len);
    pt_sgemm_force(PT_SGEMM_AUTO);
    /* AUTO through pt_sgemm_fused_run: the same bits as the scalar sequence */
    assert_int_equal(pt_sgemm_fused_run(PT_SGEMM_AUTO, CblasNoTrans, CblasTrans, p.m, p.n, p.k,
                                        p.a, p.lda, p.b, p.ldb, 0.0f, p.bias, c, p.ldc, &e),
                     0);
    assert_int_equal(unfused(&p, PT_SGEMM_SCALAR, SCALE_AUX, 1, uc, uaux), 0);
    same(c, uc, len, "C", &p, PT_SGEMM_AUTO, SCALE_AUX, 1);
    free(c), free(aux), free(uc), free(uaux);
    drop(&p);
}

static void test_refusals(void **state)
{
    (void)state;
    float a[64] = {0}, b[64] = {0}, c[64] = {0};
    pt_sgemm_epilogue e = {.kind = PT_SGEMM_EPI_MUL, .mul = c};
    for (size_t v = 0; v < sizeof impls / sizeof impls[0]; v++) {
        /* TN (a weight gradient) has no epilogue; nor does a call without one */
        assert_int_equal(pt_sgemm_fused_run(impls[v], CblasTrans, CblasNoTrans, 4, 4, 4, a, 4, b,
                                            4, 0.0f, NULL, c, 4, &e),
                         -1);
        assert_int_equal(pt_sgemm_fused_run(impls[v], CblasNoTrans, CblasNoTrans, 4, 4, 4, a, 4,
                                            b, 4, 0.0f, NULL, c, 4, NULL),
                         -1);
        /* short leading dimension, too wide */
        assert_int_equal(pt_sgemm_fused_run(impls[v], CblasNoTrans, CblasNoTrans, 4, 4, 4, a, 3,
                                            b, 4, 0.0f, NULL, c, 4, &e),
                         -1);
        assert_int_equal(pt_sgemm_fused_run(impls[v], CblasNoTrans, CblasNoTrans, 1, 129, 1, a,
                                            1, b, 129, 0.0f, NULL, c, 129, &e),
                         -1);
    }
    assert_int_equal(pt_sgemm_fused_run(PT_SGEMM_AUTO, CblasTrans, CblasNoTrans, 4, 4, 4, a, 4,
                                        b, 4, 0.0f, NULL, c, 4, &e),
                     -1);
    assert_int_equal(pt_sgemm_small_fused(CblasTrans, CblasNoTrans, 4, 4, 4, a, 4, b, 4, 0.0f,
                                          NULL, c, 4, &e),
                     0);
    assert_int_equal(pt_sgemm_small_fused(CblasNoTrans, CblasNoTrans, 4, 16, 4, a, 4, b, 16,
                                          0.0f, NULL, c, 16, NULL),
                     0);
}

/* pt_ssp_forward without the sigmoid: the value's bits are unchanged (a
 * pass that takes no gradient); pt_ssp_backward without the
 * sigmoid sums the bias gradient of an already multiplied d the same way. */
static void test_ssp_entry_points(void **state)
{
    (void)state;
    enum { R = 300, C = 100 };
    float *x = rnd_floats((size_t)R * C, 40.0f), *y = floats_copy(x, (size_t)R * C);
    float *sig = rnd_floats((size_t)R * C, 1.0f);
    pt_ssp_forward(x, sig, NULL, R, C);
    pt_ssp_forward(y, NULL, NULL, R, C);
    assert_memory_equal(x, y, sizeof(float) * R * C);
    float *d = rnd_floats((size_t)R * C, 1.0f), *dm = floats_copy(d, (size_t)R * C);
    for (size_t i = 0; i < (size_t)R * C; i++) dm[i] = d[i] * sig[i];
    float db[C], dbm[C];
    for (int k = 0; k < C; k++) db[k] = dbm[k] = 0.25f * (float)k;
    pt_ssp_backward(d, db, sig, R, C);
    pt_ssp_backward(dm, dbm, NULL, R, C);
    assert_memory_equal(d, dm, sizeof(float) * R * C);
    assert_memory_equal(db, dbm, sizeof db);
    free(x), free(y), free(sig), free(d), free(dm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nt),
        cmocka_unit_test(test_nn),
        cmocka_unit_test(test_policy_entry),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_ssp_entry_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
