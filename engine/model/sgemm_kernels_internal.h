/* sgemm_kernels_internal.h — the per-instruction-set entry points behind
 * sgemm_kernels.c (sgemm_avx512.c, sgemm_avx2.c; bodies in sgemm_body.h).
 * Arguments as cblas_sgemm's row-major NN and TN products with alpha = 1;
 * sizes positive and leading dimensions valid (the dispatcher checks); NN's
 * B packed by the dispatcher with 64-byte aligned rows, TN's B the caller's;
 * TN takes one pass of k ≤ PT_SGEMM_KC rows; NN's bias (NULL: none) is padded to whole vectors
 * and replaces beta·C as the start of every chain. */
#ifndef PT_SGEMM_KERNELS_INTERNAL_H
#define PT_SGEMM_KERNELS_INTERNAL_H

#include "engine/model/sgemm_kernels.h"

/* Rows of the reduction per pass: a pass of B (PT_SGEMM_KC × ≤ 128 floats,
 * 32 KiB) stays in L1 while every tile of C walks it.  Measured at 32, 48,
 * 64, 128 with bench/sgemm_kernels.c. */
#define PT_SGEMM_KC 64

/* Lines a product fetches for its caller while it runs
 * (pt_sgemm_prefetch): regions walked in order, `lines` of them in this
 * kernel call, spread evenly over its tiles (tile_lines a tile, set by the
 * kernel).  NULL: none. */
#define PT_SGEMM_PF_MAX 4
typedef struct pt_sgemm_pf {
    const char *p[PT_SGEMM_PF_MAX];
    long left[PT_SGEMM_PF_MAX]; /* lines still to fetch in each region */
    int n, cur;
    long lines, tile_lines;
    int keep; /* 1: prefetcht0, kept in cache (a TN product's own next pass) */
} pt_sgemm_pf;

/* the next tile's share: prefetchnta, a hint only (the bits do not depend
 * on it).  The regions are the filter's next chunk (s1, W, e: ~225 KB of a
 * 256-row chunk), read by the next product; as prefetcht1 they were brought
 * into L2, where the convolution's and the node products' arrays (x, dm,
 * dx: ~340 KB a water micro-batch) also live, and those parts are the ones
 * that slow most when another replica shares L3.  Measured on the Zen 5
 * (docs/performance.md, session 18 memz): two replicas' thread CPU a step
 * -1.3% (water, QM9), two profiles at once cfconv -7.7%, node_gemm -3.9%,
 * filter_gemm -1.8%; one thread even (water) to -1% (QM9).  No hardware
 * counters in that VM: which level keeps the lines is inferred, not seen. */
static inline void pt_sgemm_pf_tile(pt_sgemm_pf *pf)
{
    long todo = pf->tile_lines < pf->lines ? pf->tile_lines : pf->lines;
    pf->lines -= todo;
    while (todo > 0 && pf->cur < pf->n) {
        long take = pf->left[pf->cur] < todo ? pf->left[pf->cur] : todo;
        const char *q = pf->p[pf->cur];
        if (pf->keep)
            for (long i = 0; i < take; i++) __builtin_prefetch(q + 64 * i, 0, 3);
        else
            for (long i = 0; i < take; i++) __builtin_prefetch(q + 64 * i, 0, 0);
        pf->p[pf->cur] = q + 64 * take;
        pf->left[pf->cur] -= take;
        todo -= take;
        if (pf->left[pf->cur] == 0) pf->cur++;
    }
}

/* lines pt_sgemm_prefetch left for the thread's next product (tests) */
long pt_sgemm_prefetch_pending(void);

/* What NN's tiles fetch for the next tile as each starts (sgemm_body.h):
 * _START the rows its chains start from (c0's, or C's when beta ≠ 0 and
 * no bias), _A its rows of A.  Hints only: no result depends on them. */
#define PT_SGEMM_AHEAD_START 1
#define PT_SGEMM_AHEAD_A 2
/* An operand's size from which a forward (W_ONCE) fetches its next
 * tile's A rows, and a weight gradient (TN) its next pass's rows: a
 * quarter of the Zen 5's 1 MB L2 (sgemm_kernels.c) */
#define PT_SGEMM_AHEAD_A_BYTES ((size_t)256 << 10)

void pt_sgemm_avx512_nn(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                        float beta, const float *bias, float *c, int ldc, pt_sgemm_pf *pf,
                        int ahead);
/* NN from a residual: bias not NULL, chains from c0 + bias (sgemm_body.h) */
void pt_sgemm_avx512_nn_res(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                        const float *bias, const float *c0, int ldc0, float *c, int ldc,
                        pt_sgemm_pf *pf);
void pt_sgemm_avx512_tn(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                        float beta, float *c, int ldc, pt_sgemm_pf *pf);
/* dst[j·ldd + i] = src[i·lds + j], i < rows, j < cols (sgemm_avx512.c) */
void pt_sgemm_avx512_transpose(int rows, int cols, const float *src, int lds, float *dst,
                               int ldd);
void pt_sgemm_avx2_nn(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                      float beta, const float *bias, float *c, int ldc, pt_sgemm_pf *pf,
                      int ahead);
/* NN from a residual: bias not NULL, chains from c0 + bias (sgemm_body.h) */
void pt_sgemm_avx2_nn_res(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                        const float *bias, const float *c0, int ldc0, float *c, int ldc,
                        pt_sgemm_pf *pf);
void pt_sgemm_avx2_tn(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                      float beta, float *c, int ldc, pt_sgemm_pf *pf);

#endif
