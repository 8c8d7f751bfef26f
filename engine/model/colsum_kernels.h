/* colsum_kernels.h — the blocked column sums behind every bias gradient
 * (pt_column_sums_total, schnet_ops_internal.h): total[k] += Σ_r m[r,k]
 * over an [n, c] row-major matrix, in float blocks of PT_SUM_BLOCK rows,
 * each block's float sum added to the double total.  Three
 * implementations of that one order, the same bits (every column is its own
 * chain; only how many columns go at once differs;
 * tests/unit/test_colsum_kernels.c):
 *   - the scalar reference (colsum_kernels.c), a loop over a float block
 *     array in L1 that gcc vectorises;
 *   - AVX-512F and AVX2 (colsum_avx512.c, colsum_avx2.c; colsum_body.h):
 *     a panel of the row's vectors (a 100-wide row: 7 zmm, or 13 ymm) held
 *     in registers over a block, so the block's 16 rows cost one add per
 *     vector a row, every column's chain running at once.  The loop over
 *     the array took ≈ 1.0-1.1 µs a 256 × 100 filter chunk, the filter's
 *     backward sums two such per chunk (da2, da1; session 15 (pipe3)).
 * pt_colsum_total runs the widest the CPU and OS have (sgemm_kernels.h's
 * detection). */
#ifndef PT_COLSUM_KERNELS_H
#define PT_COLSUM_KERNELS_H

#include "engine/model/sgemm_kernels.h"   /* pt_sgemm_impl: which instruction set */

/* Rows in a float block before the block joins the double total: short
 * enough that the float part stays accurate, long enough to vectorise.
 * Calls on consecutive runs of rows whose lengths are multiples of it give
 * the bits of one call over all of them (schnet_filter.c's chunks). */
#define PT_SUM_BLOCK 16

/* total[k] += Σ_r m[r,k] for k < c, r < n (rows c floats apart), in float
 * blocks of PT_SUM_BLOCK rows (the block starting at row 0), each block's
 * sum converted to double and added to total[k].  n ≤ 0 or c ≤ 0: nothing.
 * Through the widest instruction set the CPU has. */
void pt_colsum_total(double *restrict total, const float *restrict m, int n, int c);

/* The same through one implementation: PT_SGEMM_AVX512, PT_SGEMM_AVX2,
 * PT_SGEMM_SCALAR or PT_SGEMM_AUTO (the widest supported).  Returns 0, or
 * -1 (total untouched) when this CPU cannot run impl, or impl is OPENBLAS
 * (no column sums) or not an implementation. */
int pt_colsum_total_run(pt_sgemm_impl impl, double *restrict total, const float *restrict m,
                        int n, int c);

/* the per-instruction-set kernels (colsum_body.h); n > 0, c > 0 */
void pt_colsum_avx512(double *restrict total, const float *restrict m, int n, int c);
void pt_colsum_avx2(double *restrict total, const float *restrict m, int n, int c);

#endif
