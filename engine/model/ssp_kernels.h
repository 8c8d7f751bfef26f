/* ssp_kernels.h — the shifted softplus forward (pt_ssp_forward,
 * schnet_ops.h) through one instruction set: AVX-512F, AVX2 + FMA, or the
 * scalar reference, each from the one spelling in ssp_body.h, so every
 * implementation gives the same bits (tests/unit/test_ssp_kernels.c).
 * pt_ssp_forward runs the widest the CPU and OS have (sgemm_kernels.h's
 * detection). */
#ifndef PT_SSP_KERNELS_H
#define PT_SSP_KERNELS_H

#include <stddef.h>

#include "engine/model/sgemm_kernels.h"   /* pt_sgemm_impl: which instruction set */

/* x[len] ← ssp(x), sig[len] ← σ(x) = ssp'(x) (sig NULL: only the values, the
 * same bits).  impl: PT_SGEMM_AVX512, PT_SGEMM_AVX2, PT_SGEMM_SCALAR, or
 * PT_SGEMM_AUTO (the widest supported).  Returns 0, or -1 when this CPU
 * cannot run impl (or impl is OPENBLAS, which has no softplus). */
int pt_ssp_forward_run(pt_sgemm_impl impl, float *x, float *sig, size_t len);

/* the per-instruction-set loops (ssp_avx512.c, ssp_avx2.c; ssp_vec_loop.h) */
void pt_ssp_avx512(float *x, float *sig, size_t len);
void pt_ssp_avx2(float *x, float *sig, size_t len);

#endif
