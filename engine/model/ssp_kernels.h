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

/* The same, σ written with non-temporal stores (past the caches, without
 * reading its lines first) where sig is aligned to a vector; the same bits
 * in x and sig.  For a σ array nothing reads before the backward, long
 * after: the filter network's σ1 (water: 8 MB per block), whose stores
 * otherwise fetch every line from memory before overwriting it
 * (schnet_profile water fp32 filter_ssp 4.8-5.0 -> 3.2-3.3 ms, one thread).
 * The node layers' σ (a few hundred KB, read back while still in cache)
 * keep pt_ssp_forward_run. */
int pt_ssp_forward_stream_run(pt_sgemm_impl impl, float *x, float *sig, size_t len);

/* x[len] ← ssp(x) in place and the same values into copy[len], copy's
 * through non-temporal stores where it is aligned to a vector (vector
 * kernels; plain stores otherwise and in scalar code): the same bits in
 * both.  For a chunk computed in a cache-resident scratch whose values a
 * whole-batch array keeps for a reader long after: the filter's s1
 * (schnet_filter.c), whose plain stores into the 8 MB array (water, per
 * block) read every line for ownership first.  impl and the result as
 * pt_ssp_forward_run. */
int pt_ssp_forward_copy_run(pt_sgemm_impl impl, float *x, float *copy, size_t len);

/* d[len] ← d ⊙ σ̃(s), σ̃(s) = 1 − ½e^−s the derivative recovered from the
 * softplus s = ssp(v) alone (ssp_body.h: |σ̃ − σ| ≤ 4.1·2^−24 absolute, not
 * relative where σ is small).  impl and the result as pt_ssp_forward_run. */
int pt_ssp_dsig_run(pt_sgemm_impl impl, float *d, const float *s, size_t len);

/* pt_ssp_backward (schnet_ops.h) with σ̃(s) in place of a stored σ: d[n,c]
 * ← d ⊙ σ̃(s), db[c] += Σ_rows d (db NULL: not summed), the same column
 * sums in the same order.  The filter's backward (no σ1 array). */
void pt_ssp_backward_s(float *d, float *db, const float *s, int n, int c);

/* the per-instruction-set loops (ssp_avx512.c, ssp_avx2.c; ssp_vec_loop.h);
 * _nt: σ through non-temporal stores when sig is aligned to a vector;
 * _copy_nt: pt_ssp_forward_copy_run's */
void pt_ssp_avx512(float *x, float *sig, size_t len);
void pt_ssp_avx2(float *x, float *sig, size_t len);
void pt_ssp_avx512_nt(float *x, float *sig, size_t len);
void pt_ssp_avx2_nt(float *x, float *sig, size_t len);
void pt_ssp_avx512_copy_nt(float *x, float *copy, size_t len);
void pt_ssp_avx2_copy_nt(float *x, float *copy, size_t len);
void pt_ssp_dsig_avx512(float *d, const float *s, size_t len);
void pt_ssp_dsig_avx2(float *d, const float *s, size_t len);

#endif
