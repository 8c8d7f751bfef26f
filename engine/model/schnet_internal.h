/* schnet_internal.h — what schnet.c (energy), schnet_block.c (an
 * interaction block) and schnet_forces.c (forces, stress, training on them)
 * share: the profile's stopwatch, and the part of
 * the forward pass that only arenas of mode ≥ FORCES run, and a head's
 * backward. */
#ifndef PT_SCHNET_INTERNAL_H
#define PT_SCHNET_INTERNAL_H

#include <time.h>

#include "engine/model/bf16.h"
#include "engine/model/schnet.h"

/* A stopwatch that charges the time since its last lap to an op; free when
 * the arena has no profile. */
typedef struct pt_stopwatch {
    pt_schnet_profile *p;
    struct timespec t;
} pt_stopwatch;

static inline void pt_stopwatch_start(pt_stopwatch *sw, pt_schnet_profile *p)
{
    sw->p = p;
    if (p) clock_gettime(CLOCK_MONOTONIC, &sw->t);
}

static inline void pt_lap(pt_stopwatch *sw, pt_schnet_op op)
{
    if (!sw->p) return;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    sw->p->seconds[op] +=
        (double)(t.tv_sec - sw->t.tv_sec) + 1e-9 * (double)(t.tv_nsec - sw->t.tv_nsec);
    sw->t = t;
}

/* In block t's forward, after P and W (schnet_forces.c): the filter's
 * derivative in its distance, W' = (A2 (σ1 ⊙ (A1 e'))) C + P C', into
 * a->block[t].wd (and s1' into the second half of s1 when training). */
void pt_schnet_filter_deriv(const pt_schnet *m, pt_schnet_acts *a, int t, pt_stopwatch *sw);

/* Where a forward's shifted softplus keeps its sigmoid: sig, or NULL (not
 * computed) when no backward will read it (pt_schnet_acts.no_grad, energy
 * only: the force passes read σ1 for W' and the second backward). */
static inline float *pt_schnet_keep_sig(const pt_schnet_acts *a, float *sig)
{
    return (a->no_grad || a->forward_only) && a->mode == PT_SCHNET_ENERGY ? NULL : sig;
}

/* Whether the forward stores the softplus layers' σ (the fp32 filter's σ1,
 * the node layers' σ2, the head's σ4): only for the force passes (W', the
 * tangents, the second backward); an energy arena carves none of them
 * (schnet_acts.c: NULL).  The backward of the energy multiplies
 * by σ̃ = 1 − ½e^−s, recovered from the layer's output s (s1, u, q;
 * ssp_body.h: within 4.1·2^−24 of σ, absolute), in every mode, so an
 * energy arena and a forces arena give the same energy gradient bits. */
static inline int pt_schnet_sig_stored(const pt_schnet_acts *a)
{
    return a->mode != PT_SCHNET_ENERGY;
}

/* Block t's filter network over the U filter rows, in cache-sized chunks
 * (schnet_filter.c): forward s1, σ1 = ssp(A1 e + a1), P = A2 s1 + a2,
 * W = P ⊙ C; backward from a->dp: ds1 into a->ds1, and ACCUMULATES the
 * gradients of A1, a1, A2, a2 into dw. */
void pt_schnet_filter_forward(const pt_schnet_block *w, pt_schnet_block_acts *k,
                              const pt_schnet_acts *a, int U, int G, int F, pt_stopwatch *sw);
void pt_schnet_filter_backward(const pt_schnet_block *w, pt_schnet_block *dw,
                               const pt_schnet_block_acts *k, pt_schnet_acts *a, int U, int G,
                               int F, pt_stopwatch *sw);
/* Their pieces: rows per chunk for the arena's precision (PT_FILTER_CHUNK,
 * or all U rows where chunks would change the bits), and one chunk of rows
 * r0 .. r0+n of each pass; the backward reads the chunk's dP rows from dp
 * ([n,F]), writes its ds1 to ds1 ([n,F]) and adds da2's blocks to total[F] (a double per column, zeroed by
 * the caller before the first chunk and added to da2 after the last). */
int pt_schnet_filter_chunk(pt_precision prec, int G, int F, int U);
/* 1 when bf16 steps fuse (energy mode, the AVX512-BF16 kernel,
 * pt_bf16_fusion): then s1 and u are kept only as bf16, in their own memory
 * (the products that read them round them anyway), and the products apply
 * bias, shifted softplus and cutoff as they store (schnet_filter.c,
 * schnet_block.c); the same bits as the unfused sequence. */
int pt_schnet_bf16_fused(const pt_schnet_acts *a);
/* Block k's s1 as the fused forward (pt_schnet_bf16_fused) keeps it: as
 * bf16 rows of F in s1's memory (pt_schnet_s1_bf16) when there is no room
 * for its pairs, else as pairs (bf16.h; pt_schnet_s1_pairs, pair row p at
 * p · pt_bf16_pairs_ld(F)) only; NULL for the form not kept (both NULL:
 * s1 is fp32). */
pt_bf16 *pt_schnet_s1_bf16(const pt_schnet_block_acts *k, const pt_schnet_acts *a, int G,
                           int F);
const uint32_t *pt_schnet_s1_pairs(const pt_schnet_block_acts *k, const pt_schnet_acts *a,
                                   int G, int F);
/* Block k's W as the fused forward keeps it: bf16 rows of F in W's memory
 * (the second filter product's epilogue rounds W = (A2 s1 + a2) ⊙ C once
 * as it stores), read by cfconv_bf16.h's convolution; NULL where W is
 * fp32 (not fused, or P apart from W: the forces arena). */
pt_bf16 *pt_schnet_w_bf16(const pt_schnet_block_acts *k, const pt_schnet_acts *a);
/* leave_p = 1 (the pipeline, fp32 in place: schnet_edges.c): P stays in
 * W's memory and the convolution applies the cutoff; the bf16 products
 * scale as they store whatever leave_p. */
void pt_schnet_filter_forward_rows(const pt_schnet_block *w, pt_schnet_block_acts *k,
                                   const pt_schnet_acts *a, int r0, int n, int G, int F,
                                   int leave_p, pt_stopwatch *sw);
void pt_schnet_filter_backward_rows(const pt_schnet_block *w, pt_schnet_block *dw,
                                    const pt_schnet_block_acts *k, const pt_schnet_acts *a,
                                    int r0, int n, int G, int F, const float *dp, float *ds1,
                                    double *total, pt_stopwatch *sw);

/* Block t's edge part as one pass over the filter rows (schnet_edges.c):
 * each chunk of the filter network followed by the convolution of the
 * receivers it completes, so W and dP are read back from L2.
 *   forward   W (as pt_schnet_filter_forward), then m = cfconv(x, W);
 *   backward  from a->dm: dx into a->dx, then the filter network's
 *             gradients as pt_schnet_filter_backward; a->dp and a->ds1 are
 *             scratch (dP in a window of the rows in flight, ds1 one
 *             chunk's).
 * The bits of the whole-batch sequence (filter, then convolution). */
void pt_schnet_edges_forward(const pt_schnet_block *w, pt_schnet_block_acts *k,
                             const pt_schnet_acts *a, const pt_batch *b, int G, int F,
                             pt_stopwatch *sw);
void pt_schnet_edges_backward(const pt_schnet_block *w, pt_schnet_block *dw,
                              const pt_schnet_block_acts *k, pt_schnet_acts *a,
                              const pt_batch *b, int G, int F, pt_stopwatch *sw);
/* The backward's dP window for this batch's rows (a->dp_ring) when it walks
 * senders: the same for every block, so the backward's first block
 * computes it once with the sender lists it depends on. */
int32_t pt_schnet_edges_ring(const pt_schnet_acts *a, const pt_batch *b, int G, int F);
/* a->bwd_made: the backward's tables this batch has, each made by the first
 * block whose backward reads it (pt_schnet_prepare_edges clears them; a
 * forces arena's passes read the lists, which it makes at once) */
enum {
    PT_SCHNET_BWD_LISTS = 1,   /* snd_offset, snd_edge, snd_close */
    PT_SCHNET_BWD_RING = 2,    /* dp_ring */
    PT_SCHNET_BWD_SEDGES = 4,  /* snd_rec (read by the AVX-512 kernels only) */
    PT_SCHNET_BWD_ROWS = 8     /* row_rec and rows_simple */
};
/* made + the filter rows receivers i0 ≤ i < i1 created (their first edges;
 * edge_rows.h numbers rows in order of first use in receiver order, so
 * from a boundary no edge crosses these are the rows the receivers read) */
int32_t pt_schnet_rows_made(const pt_schnet_acts *a, const pt_batch *b, int i0, int i1,
                            int32_t made);

/* Interaction block t (schnet_block.c): forward from a->h[t] to a->h[t+1];
 * backward from a->dh = dL/dh_{t+1} to dL/dh_t in place, ACCUMULATING the
 * block's gradients into d. */
void pt_schnet_block_forward(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b, int t,
                             pt_stopwatch *sw);
void pt_schnet_block_backward(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b, int t,
                              pt_schnet_params *d, pt_stopwatch *sw);

/* Head k's backward from its dy (schnet.c): ACCUMULATES its parameter
 * gradients into d and sets dh = beta·dh + ∂L_k/∂h_T ([N,H]). */
void pt_schnet_head_backward(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b, int k,
                             pt_schnet_params *d, float *dh, float beta, pt_stopwatch *sw);

#endif
