/* bf16_ref.c — the scalar references of the kernels' arithmetic (bf16.h):
 * pt_bf16_gemm_ref for AVX512-BF16's vdpbf16ps, pt_bf16_gemm_ref_amx for
 * AMX's tdpbf16ps, one element of C at a time, for the tests. */
#include "engine/model/bf16.h"
#include "engine/model/bf16_internal.h"

#include <math.h>

/* --- reference ------------------------------------------------------------ */

/* vdpbf16ps reads bf16 subnormals as zero (DAZ) and flushes subnormal sums (FTZ) */
static float flush(float x) { return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x; }

void pt_bf16_gemm_ref(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                      const pt_bf16 *a, int lda, const pt_bf16 *b, int ldb, float beta, float *c,
                      int ldc)
{
    pt_bf16_operand oa = {.p = a, .trans = (ta == CblasTrans || ta == CblasConjTrans), .ld = lda};
    pt_bf16_operand ob = {.p = b, .trans = (tb == CblasTrans || tb == CblasConjTrans), .ld = ldb};
    if (k == 0 || alpha == 0.0f) {
        pt_bf16_scale_c(c, ldc, m, n, beta);
        return;
    }
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float *cij = c + (size_t)i * ldc + j;
            for (int pc = 0; pc < k; pc += PT_BF16_KC) {
                int end = k - pc < PT_BF16_KC ? k : pc + PT_BF16_KC;
                float acc = 0.0f;
                for (int kk = pc; kk < end; kk += 2) {
                    float a1 = 0.0f, b1 = 0.0f;
                    if (kk + 1 < end) {
                        a1 = flush(pt_bf16_operand_get(&oa, (size_t)i, (size_t)kk + 1));
                        b1 = flush(pt_bf16_operand_get(&ob, (size_t)kk + 1, (size_t)j));
                    }
                    acc = flush(fmaf(a1, b1, acc));
                    acc = flush(fmaf(flush(pt_bf16_operand_get(&oa, (size_t)i, (size_t)kk)),
                                   flush(pt_bf16_operand_get(&ob, (size_t)kk, (size_t)j)), acc));
                }
                if (pc > 0)
                    *cij = fmaf(alpha, acc, *cij);
                else
                    *cij = beta == 0.0f ? alpha * acc : fmaf(alpha, acc, beta * *cij);
            }
        }
}

/* one element of C from its K block's sum, as both kernels store it */
static void store(float *cij, int pc, float alpha, float acc, float beta)
{
    if (pc > 0)
        *cij = fmaf(alpha, acc, *cij);
    else
        *cij = beta == 0.0f ? alpha * acc : fmaf(alpha, acc, beta * *cij);
}

void pt_bf16_gemm_ref_amx(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k,
                          float alpha, const pt_bf16 *a, int lda, const pt_bf16 *b, int ldb,
                          float beta, float *c, int ldc)
{
    pt_bf16_operand oa = {.p = a, .trans = ta == CblasTrans || ta == CblasConjTrans, .ld = lda};
    pt_bf16_operand ob = {.p = b, .trans = tb == CblasTrans || tb == CblasConjTrans, .ld = ldb};
    if (k == 0 || alpha == 0.0f) {
        pt_bf16_scale_c(c, ldc, m, n, beta);
        return;
    }
    const int tk = 2 * PT_BF16_AMX_TK; /* reduction steps per tile */
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float *cij = c + (size_t)i * ldc + j;
            for (int pc = 0; pc < k; pc += PT_BF16_KC) {
                const int end = k - pc < PT_BF16_KC ? k : pc + PT_BF16_KC;
                float acc = 0.0f;
                for (int t0 = pc; t0 < end; t0 += tk) {
                    const int t1 = end - t0 < tk ? end : t0 + tk;
                    float even = 0.0f, odd = 0.0f;
                    for (int kk = t0; kk < t1; kk += 2) {
                        even = flush(fmaf(flush(pt_bf16_operand_get(&oa, (size_t)i, (size_t)kk)),
                                          flush(pt_bf16_operand_get(&ob, (size_t)kk, (size_t)j)),
                                          even));
                        if (kk + 1 < t1)
                            odd = flush(fmaf(
                                flush(pt_bf16_operand_get(&oa, (size_t)i, (size_t)kk + 1)),
                                flush(pt_bf16_operand_get(&ob, (size_t)kk + 1, (size_t)j)), odd));
                        else /* the pad of an odd k: 0 · 0 */
                            odd = flush(fmaf(0.0f, 0.0f, odd));
                    }
                    acc = flush(acc + flush(even + odd));
                }
                store(cij, pc, alpha, acc, beta);
            }
        }
}

void pt_bf16_gemm_ref_kernel(pt_bf16_kernel kernel, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb,
                             int m, int n, int k, float alpha, const pt_bf16 *a, int lda,
                             const pt_bf16 *b, int ldb, float beta, float *c, int ldc)
{
    if (kernel == PT_BF16_KERNEL_AMX)
        pt_bf16_gemm_ref_amx(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        pt_bf16_gemm_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
