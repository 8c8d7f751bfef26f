/* colsum_kernels.c — the column sums' scalar reference (the order every
 * implementation keeps, colsum_kernels.h) and the choice of instruction
 * set. */
#include "engine/model/colsum_kernels.h"

/* One float block array in L1, each block added to the double total: the
 * order the vector kernels keep per column (part starts at +0.0f, as theirs). */
static void colsum_scalar(double *restrict total, const float *restrict m, int n, int c)
{
    float part[256];
    for (int k0 = 0; k0 < c; k0 += 256) {
        const int w = c - k0 < 256 ? c - k0 : 256;
        for (int r0 = 0; r0 < n; r0 += PT_SUM_BLOCK) {
            const int r1 = r0 + PT_SUM_BLOCK < n ? r0 + PT_SUM_BLOCK : n;
            for (int k = 0; k < w; k++) part[k] = 0.0f;
            for (int r = r0; r < r1; r++) {
                const float *row = m + (size_t)r * (size_t)c + k0;
                for (int k = 0; k < w; k++) part[k] += row[k];
            }
            for (int k = 0; k < w; k++) total[k0 + k] += (double)part[k];
        }
    }
}

int pt_colsum_total_run(pt_sgemm_impl impl, double *restrict total, const float *restrict m,
                        int n, int c)
{
    if (impl == PT_SGEMM_AUTO)
        impl = pt_sgemm_supported(PT_SGEMM_AVX512) ? PT_SGEMM_AVX512
               : pt_sgemm_supported(PT_SGEMM_AVX2) ? PT_SGEMM_AVX2
                                                   : PT_SGEMM_SCALAR;
    if (impl == PT_SGEMM_OPENBLAS || !pt_sgemm_supported(impl)) return -1;
    if (n <= 0 || c <= 0) return 0;
    if (impl == PT_SGEMM_AVX512)
        pt_colsum_avx512(total, m, n, c);
    else if (impl == PT_SGEMM_AVX2)
        pt_colsum_avx2(total, m, n, c);
    else
        colsum_scalar(total, m, n, c);
    return 0;
}

void pt_colsum_total(double *restrict total, const float *restrict m, int n, int c)
{
    (void)pt_colsum_total_run(PT_SGEMM_AUTO, total, m, n, c);
}
