/* schnet_ops_internal.h — what the two files of SchNet's ops (schnet_ops.c:
 * the energy's forward/backward pairs; schnet_ops_forces.c: the derivatives
 * with respect to the distances) share: the AVX-512/AVX2 clone attribute and
 * the blocked column sums behind every bias gradient. */
#ifndef PT_SCHNET_OPS_INTERNAL_H
#define PT_SCHNET_OPS_INTERNAL_H

#include "engine/model/schnet_ops.h"

/* The elementwise kernels are built twice — for the build's instruction set
 * (x86-64-v3, AVX2) and for x86-64-v4 (AVX-512) — and the dynamic loader
 * picks one for the CPU it runs on (gcc's target_clones: an ifunc).  The
 * release build stays portable while an AVX-512 CPU runs 16 lanes per
 * instruction instead of 8.  Both clones perform the same operations in the
 * same order on each element (vector width only changes how many elements
 * go at once; every sum over rows keeps its row order), so a result does not
 * depend on the clone taken.  Not with clang (make fuzz builds with it):
 * clang 14 names a clone set's ifunc "NAME.ifunc", so calls from other files
 * do not link; there the build's instruction set alone is used. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PT_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "default")))
#else
#define PT_SIMD_CLONES
#endif

/* Rows in a float block before the block joins the double total: short
 * enough that the float part stays accurate, long enough to vectorise. */
#define PT_SUM_BLOCK 16

/* total[k] += Σ_r m[r,k], in float blocks of PT_SUM_BLOCK rows, each block
 * added to the double total; calls on consecutive runs of rows whose
 * lengths are multiples of PT_SUM_BLOCK give the bits of one call over all
 * of them (schnet_filter.c's chunks). */
static inline __attribute__((always_inline)) void pt_column_sums_total(double *restrict total,
                                                                       const float *restrict m,
                                                                       int n, int c)
{
    float part[PT_OPS_MAX_WIDTH];
    for (int r0 = 0; r0 < n; r0 += PT_SUM_BLOCK) {
        int r1 = r0 + PT_SUM_BLOCK < n ? r0 + PT_SUM_BLOCK : n;
        for (int k = 0; k < c; k++) part[k] = 0.0f;
        for (int r = r0; r < r1; r++) {
            const float *row = m + (size_t)r * c;
            for (int k = 0; k < c; k++) part[k] += row[k];
        }
        for (int k = 0; k < c; k++) total[k] += part[k];
    }
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
