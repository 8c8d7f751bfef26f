/* schnet_ops_internal.h — what the two files of SchNet's ops (schnet_ops.c:
 * the energy's forward/backward pairs; schnet_ops_forces.c: the derivatives
 * with respect to the distances) share: the AVX-512/AVX2 clone attribute and
 * the blocked column sums behind every bias gradient (colsum_kernels.h). */
#ifndef PT_SCHNET_OPS_INTERNAL_H
#define PT_SCHNET_OPS_INTERNAL_H

#include "engine/core/simd.h"
#include "engine/model/colsum_kernels.h"
#include "engine/model/schnet_ops.h"

/* The elementwise kernels are built for AVX-512 and AVX2 (engine/core/simd.h). */

/* A bf16 product's return code: the kernel fails only on arguments the ops
 * never pass or when its scratch cannot be allocated on the first step;
 * training cannot continue either way, so a failure prints the code's
 * message with the shape (m x n x k) and aborts. */
void pt_bf16_check(int rc, int m, int n, int k);

/* total[k] += Σ_r m[r,k], in float blocks of PT_SUM_BLOCK rows, each block
 * added to the double total (colsum_kernels.h: the widest instruction set,
 * the same bits on every one); calls on consecutive runs of rows whose
 * lengths are multiples of PT_SUM_BLOCK give the bits of one call over all
 * of them (schnet_filter.c's chunks). */
static inline __attribute__((always_inline)) void pt_column_sums_total(double *restrict total,
                                                                       const float *restrict m,
                                                                       int n, int c)
{
    pt_colsum_total(total, m, n, c);
}

/* db[k] += Σ_r m[r,k], in float blocks of PT_SUM_BLOCK rows gathered in a
 * double total (see PT_OPS_MAX_WIDTH in schnet_ops.h). */
static inline __attribute__((always_inline)) void pt_column_sums_add(float *restrict db,
                                                                     const float *restrict m,
                                                                     int n, int c)
{
    double total[PT_OPS_MAX_WIDTH];
    for (int k = 0; k < c; k++) total[k] = 0.0;
    pt_column_sums_total(total, m, n, c);
    for (int k = 0; k < c; k++) db[k] += (float)total[k];
}

#endif
