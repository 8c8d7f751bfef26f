/* sgemm_kernels.h — packtrain's own fp32 kernels for the model's skinny
 * matrix products (issue 18): a Linear layer's three products over rows of
 * width ≤ 128 (rows × 25 × 100, rows × 100 × 100, the node products and
 * their backward shapes), register-blocked for AVX-512 where the CPU and OS
 * have it and for AVX2 + FMA otherwise, chosen at run time.  OpenBLAS keeps
 * every other shape, and every shape when neither instruction set is there.
 *
 * Row-major, alpha = 1, the operand layouts of engine/model/schnet_ops.c:
 *   NT  C[m,n] = A[m,k] · B[n,k]ᵀ + beta·C   (forward: B is W[out][in])
 *   NN  C[m,n] = A[m,k] · B[k,n]  + beta·C   (input gradient: B is W)
 *   TN  C[m,n] = A[k,m]ᵀ · B[k,n] + beta·C   (weight gradient, k = rows)
 *
 * Numerics: every element of C is one fused multiply-add chain over k in
 * ascending order, started from 0 (beta = 0), C (beta = 1) or beta·C
 * (rounded once); each SIMD lane is one element, so the result is
 * bit-for-bit that of the scalar reference (pt_sgemm_run with
 * PT_SGEMM_SCALAR: the same chain with fmaf) whatever the instruction set
 * (tests/unit/test_sgemm_kernels.c).  Against OpenBLAS (another summation
 * order and blocking) elements differ by float rounding: |Δ| ≤ k·2⁻²³·Σ|a·b|
 * per element, checked there at k·2⁻²⁴·4.
 *
 * The kernels allocate nothing: they pack B into per-thread buffers
 * (thread-local storage, ≈ 0.6 MiB a thread: NN's copy, the layouts of the
 * last three weights with the copies they were made from, for reuse while
 * the weight is bit for bit unchanged, sgemm_kernels.c). */
#ifndef PT_SGEMM_KERNELS_H
#define PT_SGEMM_KERNELS_H

#include <cblas.h>
#include <stddef.h>

/* Widest n (and k of NT/NN, m of TN) the own kernels take. */
#define PT_SGEMM_MAX_DIM 128

typedef enum pt_sgemm_impl {
    PT_SGEMM_AUTO = 0,   /* the policy below */
    PT_SGEMM_OPENBLAS,   /* cblas_sgemm */
    PT_SGEMM_AVX512,
    PT_SGEMM_AVX2,       /* AVX2 + FMA */
    PT_SGEMM_SCALAR      /* the reference: fmaf chains (tests, benches) */
} pt_sgemm_impl;

/* The product through the implementation the policy picks for this shape;
 * returns 1 when it ran it, 0 when the caller is to call cblas_sgemm (the
 * policy chose OpenBLAS, or the shape or layout is not one the kernels
 * take: TT, dimensions over PT_SGEMM_MAX_DIM, negative sizes, short
 * leading dimensions).
 * Policy (measured with bench/sgemm_kernels.c, docs/performance.md): the
 * widest own kernel the CPU runs (AVX-512, else AVX2 + FMA) for n ≥ 16 and
 * the size limits above, whatever kernel set OpenBLAS runs (the own AVX-512
 * kernel is faster than OpenBLAS's AVX-512 sets on these shapes too);
 * OpenBLAS otherwise.  PACKTRAIN_SGEMM=openblas |
 * avx512 | avx2 | auto in the environment (read once) forces a choice for
 * comparisons; a kernel the CPU lacks falls back to the policy. */
int pt_sgemm_small(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* The same product through one given implementation, whatever the policy
 * says (tests, benches).  Returns 0, or -1 when this CPU cannot run impl or
 * the shape/layout is outside what the kernels take (see above; OPENBLAS
 * takes every shape but TT-free layouts are all this accepts). */
int pt_sgemm_run(pt_sgemm_impl impl, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* A Linear layer's forward product with its bias: C[m,n] = A·op(B) + bias
 * on every row (NT or NN), the chains started from the bias instead of a C
 * first filled with it (one pass over C less; the same bits as filling C
 * and running with beta = 1).  Returns 1 when the own kernel ran it, 0 when
 * the caller is to fill C and call cblas_sgemm (as pt_sgemm_small). */
int pt_sgemm_small_bias(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k,
                        const float *a, int lda, const float *b, int ldb, const float *bias,
                        float *c, int ldc);

/* The same through one given implementation (OPENBLAS: C filled with the
 * bias, then cblas_sgemm with beta = 1).  0, or -1 as pt_sgemm_run (and for
 * a TN layout or a NULL bias). */
int pt_sgemm_bias_run(pt_sgemm_impl impl, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n,
                      int k, const float *a, int lda, const float *b, int ldb, const float *bias,
                      float *c, int ldc);

/* A Linear layer's product whose B is its weight (NT: the forward, NN: the
 * input gradient), C[m,n] = A·op(B) + beta·C, or + bias on every row when
 * bias is not NULL (beta unused; as pt_sgemm_small_bias), through the
 * own kernel the policy picks, with op(B)'s layout kept per thread across
 * calls.  held = 0: B is compared with the copy the layout was made from
 * (a weight changed in place is seen); held = 1: the caller promises B has
 * not changed since this thread's last pt_sgemm_weights_hold(), and a
 * layout compared or made on this thread since then is reused without
 * comparing (the filter network starts a hold on a pass's first chunk and
 * holds its weights over the other chunks: schnet_filter.c).  The same bits
 * as pt_sgemm_small / pt_sgemm_small_bias.  Returns 1 when it ran the
 * product, 0 when the caller is to run it another way (the policy chose
 * OpenBLAS, or the shape is one pt_sgemm_small does not take; tb not NT/NN). */
int pt_sgemm_small_weight(CBLAS_TRANSPOSE tb, int m, int n, int k, const float *a, int lda,
                          const float *b, int ldb, float beta, const float *bias, float *c,
                          int ldc, int held);

/* A Linear layer's forward whose weight is read once before it changes
 * (the node layers and the head: one forward an optimizer step, thirteen
 * weights, more than the cache of pt_sgemm_small_weight keeps, so each
 * missed it and was copied for a comparison that never came):
 * C[m,n] = A·Wᵀ + bias on every row (bias not NULL; beta unused) or
 * + beta·C, W[n,k] of row stride ldw, Wᵀ laid out in the thread's scratch
 * on every call, no cache entry.  The bits of pt_sgemm_small /
 * pt_sgemm_small_bias (NT), through the kernel the policy picks (or
 * pt_sgemm_force: SCALAR runs the reference).  1 when it ran the product,
 * 0 when the caller is to run it another way (as pt_sgemm_small). */
int pt_sgemm_small_once(int m, int n, int k, const float *a, int lda, const float *w, int ldw,
                        float beta, const float *bias, float *c, int ldc);

/* A residual layer's forward, C[m,n] = (in + bias) + A·Wᵀ (in[m,n] of row
 * stride ldin, bias[n] not NULL, W[n,k] read once as pt_sgemm_small_once's):
 * the bits of C = in + bias row by row and then pt_sgemm_small_once with
 * beta 1 (every chain starts from the same float in[i,j] + bias[j]), made
 * in blocks of rows so that each block's sum is read back from L1 and the
 * next block's in and C are fetched into L2 while this block's tiles run
 * (SchNet's h_{t+1} = h_t + c3 + L3 u: h_t is cold after the block's edge
 * pipeline).  in may not overlap C unless in == C with ldin == ldc.  1 when
 * it ran, 0 when the caller is to run it another way (as
 * pt_sgemm_small_once; also bias NULL or ldin < n), C untouched then. */
int pt_sgemm_small_once_residual(int m, int n, int k, const float *a, int lda, const float *w,
                                 int ldw, const float *in, int ldin, const float *bias, float *c,
                                 int ldc);

/* A residual layer's forward, C[m,n] = (in + bias) + A·Wᵀ (in[m,n] of row
 * stride ldin, bias[n] not NULL, W[n,k] read once as pt_sgemm_small_once's):
 * the bits of C = in + bias row by row followed by pt_sgemm_small_once with
 * beta 1 (every chain starts from the same float in[i,j] + bias[j]), with
 * in read as each register tile starts instead of in a pass of its own
 * (SchNet's h_{t+1} = h_t + c3 + L3 u: h_t is cold after the block's edge
 * pipeline, and the pass read it and wrote C only for the product to read
 * C back).  in may be C itself (ldin == ldc), not overlap it otherwise.  1
 * when it ran, 0 when the caller is to run it another way (as
 * pt_sgemm_small_once; also bias or in NULL, ldin < n), C untouched then. */
int pt_sgemm_small_once_residual(int m, int n, int k, const float *a, int lda, const float *w,
                                 int ldw, const float *in, int ldin, const float *bias, float *c,
                                 int ldc);

/* Starts a hold on the calling thread (see pt_sgemm_small_weight). */
void pt_sgemm_weights_hold(void);

/* Asks the calling thread's next product on an own kernel to fetch
 * [p, p + bytes) while it runs, a few lines per register tile (prefetchnta
 * hints, kept out of L2: sgemm_kernels_internal.h; no fault, no effect on
 * any result), for data the caller reads next from memory: the product is
 * bound by its FMAs, the fetch then costs it little and the next pass
 * finds the data in cache.  Up to
 * PT_SGEMM_PF_MAX (4) regions, taken (and forgotten) by that product; more
 * are ignored.  A product OpenBLAS runs leaves them to the next. */
void pt_sgemm_prefetch(const void *p, size_t bytes);

/* No fused epilogues: the filter's elementwise ops (cutoff, ssp and its
 * derivative) run as passes over each chunk.  Fused into the stores
 * (session 5, removed in session 6) they were 0.87-1.06x the passes on
 * isolated chunks under load and made water's pipelined step slower
 * (docs/performance.md, "Fused epilogues in the fp32 kernels"). */

/* 1 when this CPU (and OS) can run impl; AUTO, OPENBLAS and SCALAR always. */
int pt_sgemm_supported(pt_sgemm_impl impl);

/* What the policy runs for a shape: OPENBLAS, AVX512 or AVX2. */
pt_sgemm_impl pt_sgemm_choice(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k);

/* 1 when OpenBLAS runs its AVX-512 kernels (its core name is SkylakeX,
 * Cooperlake or SapphireRapids: OPENBLAS_CORETYPE, or its own detection). */
int pt_sgemm_openblas_avx512(void);

/* Forces impl for every later pt_sgemm_small call of the process (AUTO
 * restores the policy and the environment's choice); benches compare
 * implementations with it in one binary.  Not for use while products run. */
void pt_sgemm_force(pt_sgemm_impl impl);

/* "openblas", "avx512", "avx2", "scalar", "auto". */
const char *pt_sgemm_impl_name(pt_sgemm_impl impl);

#endif
