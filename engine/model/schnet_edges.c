/* schnet_edges.c — an interaction block's edge part (filter network, cutoff
 * and convolution) as one pass over the filter rows that keeps W and dP in
 * L2 (issue 18):
 *
 *   forward   for each chunk of rows: s1, P (schnet_filter.c), then
 *             m_i = Σ_{k→i} x[src_k] ⊙ W[row_k] for every receiver i
 *             whose rows are now all computed, W = P ⊙ C formed per edge
 *             (fp32: conv_cut);
 *   backward  for each chunk of rows: each row's two edges at once,
 *             dx[j] += dm_i ⊙ W_u, dx[i] += dm_j ⊙ W_u and dP_u into the
 *             chunk's scratch (pt_cfconv_backward_rows; bf16's W̃ rows:
 *             pt_cfconv_bf16_backward_rows), or by senders dx[src_k] +=
 *             dm_i ⊙ W[row_k] and dP[row_k] (+)= dm_i ⊙ x[src_k] · C for the
 *             receivers up to the last one using a row of the chunk (rows
 *             of three edges); then the chunk's filter backward from dP.
 *
 * Run one after the other over a whole batch, the filter network writes W
 * (water: ~20,000 rows × 100 floats = 8 MB per block) and the convolution
 * reads it back from memory, and the backward does the same with dP.  Here
 * a chunk's W is read by the convolution right after it is written, and
 * the rows a receiver shares with an earlier one (the reverse of a bond)
 * were written one structure back at most: edges never leave a structure,
 * so what the convolution reads stays within one structure's rows and
 * nodes (water: ~1,000 rows, 400 KB).
 *
 * dP is kept in one chunk's scratch (by rows) or a window of the rows in
 * flight (dp_ring, by senders) and ds1 in one chunk's scratch, so the
 * backward writes neither to an 8 MB array that the caches would have to
 * write back and fetch again.
 *
 * Which receivers a chunk completes follows from edge_rows.h's numbering:
 * rows are numbered in order of first use in receiver order, so receiver i
 * uses no row at or above the count of rows that receivers 0..i created; in
 * the backward, row u has all its edges behind it once receiver
 * row_last[u] is done.
 *
 * bf16 energy (pt_schnet_bf16_fused) keeps W as bf16 rows
 * (pt_schnet_w_bf16), which cfconv_bf16.h's convolution reads: half the
 * bytes per edge row, in the forward and in the backward (from memory).
 *
 * Bits: the same as the whole-batch sequence (tests/unit/test_schnet_edges.c:
 * the forward and the walk by senders against receiver order, the walk by
 * rows against its own whole-batch call, and that within a stated bound of
 * receiver order: cfconv_kernels.h).  The filter chunks are
 * schnet_filter.c's; the convolution runs receivers (rows) in ascending
 * order whatever the pieces, so each m_i, each dx_j and each dP row (first
 * edge writes, the other adds) is formed by the same operations in the
 * same order. */
#include <stdlib.h>
#include <string.h>

#include "engine/model/cfconv_bf16.h"
#include "engine/model/cfconv_kernels.h"
#include "engine/model/schnet_internal.h"
#include "engine/model/sgemm_kernels.h"

/* The cutoff the convolution applies itself, or NULL when W's memory holds
 * W.  fp32 (and bf16 without the fused products) with P in W's memory
 * (energy): the filter leaves P there, and every edge of the forward and
 * every row of the backward by rows forms W_u = P_u · C_u in registers
 * (pt_cfconv_forward_range's wcut, pt_cfconv_backward_rows' pc), rounded
 * as the cutoff pass rounds it (the same bits): that pass read and wrote
 * every row once more, and W stored by the forward's first edges cost it
 * more than the multiplies (docs/performance.md, session 15 conv).  The
 * bf16 products scale as they store. */
static const float *conv_cut(const pt_schnet_block_acts *k, const pt_schnet_acts *a)
{
    return !pt_schnet_bf16_fused(a) && k->p == k->w ? a->cut : NULL;
}

/* The first receiver from i on that uses a row at or above r1 (n: none). */
static int ready_until(const int32_t *row, const int32_t *dst_offset, int i, int n, int32_t r1)
{
    for (; i < n; i++)
        for (int32_t k = dst_offset[i]; k < dst_offset[i + 1]; k++)
            if (row[k] >= r1) return i;
    return n;
}

/* m_i for receivers i0 ≤ i < i1: W as bf16 rows (wh) or fp32 */
static void convolve(pt_schnet_block_acts *k, const pt_schnet_acts *a, const pt_batch *b,
                     const pt_bf16 *wh, const float *wcut, int i0, int i1, int F)
{
    if (wh)
        pt_cfconv_bf16_forward_range(k->m, wh, a->row, k->x, b->edge_src, b->dst_offset, i0, i1,
                                     F);
    else
        pt_cfconv_forward_range(k->m, k->w, wcut, a->row, k->x, b->edge_src, b->dst_offset, i0,
                                i1, F);
}

void pt_schnet_edges_forward(const pt_schnet_block *w, pt_schnet_block_acts *k,
                             const pt_schnet_acts *a, const pt_batch *b, int G, int F,
                             pt_stopwatch *sw)
{
    const int U = a->n_rows, N = b->cap_nodes;
    const int chunk = pt_schnet_filter_chunk(a->precision, G, F, U);
    const float *wcut = conv_cut(k, a);
    const pt_bf16 *wh = pt_schnet_w_bf16(k, a);
    int i = 0; /* receivers below i are convolved */
    for (int r0 = 0; r0 < U; r0 += chunk) {
        const int n = U - r0 < chunk ? U - r0 : chunk;
        pt_schnet_filter_forward_rows(w, k, a, r0, n, G, F, wcut != NULL, sw);
        const int i1 = ready_until(a->row, b->dst_offset, i, N, r0 + n);
        convolve(k, a, b, wh, wcut, i, i1, F);
        pt_lap(sw, PT_SCHNET_OP_CFCONV);
        i = i1;
    }
    /* receivers without rows (padding nodes; every row when U = 0) */
    convolve(k, a, b, wh, wcut, i, N, F);
    pt_lap(sw, PT_SCHNET_OP_CFCONV);
}

/* The dP rows in flight: when the backward reaches the chunk at r0, rows
 * below r0 are consumed and the receivers up to the last one using a row
 * of the chunk have written the rows below `made`.  Returns the smallest
 * multiple of the chunk that holds [r0, made) for every chunk (so a chunk's
 * rows are contiguous in it), or 0 when that is not below U (then dP row u
 * stays at row u). */
int32_t pt_schnet_edges_ring(const pt_schnet_acts *a, const pt_batch *b, int G, int F)
{
    const int U = a->n_rows;
    const int chunk = pt_schnet_filter_chunk(a->precision, G, F, U);
    int32_t made = 0, need = 0;
    int i = 0, last = -1;
    for (int r0 = 0; r0 < U; r0 += chunk) {
        const int r1 = U - r0 < chunk ? U : r0 + chunk;
        for (int u = r0; u < r1; u++)
            if (a->row_last[u] > last) last = a->row_last[u];
        const int end = last < 0 ? 0 : a->snd_close[last + 1];
        for (; i < end; i++)
            for (int32_t k = b->dst_offset[i]; k < b->dst_offset[i + 1]; k++) made += a->first[k];
        if (made - r0 > need) need = made - r0;
    }
    const int32_t ring = (need + chunk - 1) / chunk * chunk;
    return ring < U ? ring : 0;
}

int32_t pt_schnet_rows_made(const pt_schnet_acts *a, const pt_batch *b, int i0, int i1,
                            int32_t made)
{
    for (int32_t k = b->dst_offset[i0]; k < b->dst_offset[i1]; k++) made += a->first[k];
    return made;
}

/* The W rows the backward's next convolution call reads, fetched into L2
 * by the chunk's filter products (pt_sgemm_prefetch) while they compute:
 * W was written by the forward long before and comes from L3 (water: 8 MB
 * a block), and the convolution by senders reads its rows in sender order,
 * one at a time (a row prefetched 8 edges ahead still misses: ~12 ns an
 * edge of ~44 in the pipeline's backward).  Receivers i ≤ r < end2 (i a
 * boundary no edge crosses) read exactly the rows they created, which are
 * contiguous: [made, made + their first edges) (edge_rows.h).  A hint
 * only: the bits do not depend on it. */
static void prefetch_next_w(const pt_schnet_block_acts *k, const pt_schnet_acts *a,
                            const pt_batch *b, int i, int end2, int32_t made, int F)
{
    const int32_t made2 = pt_schnet_rows_made(a, b, i, end2, made);
    pt_sgemm_prefetch(k->w + (size_t)made * F, (size_t)(made2 - made) * F * sizeof(float));
}

/* The tables the backward reads for this batch, made by its first block
 * (a->bwd_made; pt_schnet_prepare_edges clears it) and only those a
 * reader uses.  Returns 1 to walk rows (every row an edge and at most its
 * reverse: pt_cfconv_row_edges; fp32 W, or bf16's W̃ rows since session
 * 17), 0 to walk senders (rows of three edges).  The senders' entries
 * (pt_cfconv_sender_edges, ~0.1 ms a water batch) are made only where an
 * AVX-512 kernel reads them. */
static int backward_tables(pt_schnet_acts *a, const pt_batch *b, int G, int F)
{
    if (!(a->bwd_made & PT_SCHNET_BWD_ROWS)) {
        a->rows_simple = pt_cfconv_row_edges(a->row_rec, a->row, a->first, b->edge_src,
                                             b->dst_offset, a->cut, b->cap_nodes);
        a->bwd_made |= PT_SCHNET_BWD_ROWS;
    }
    if (a->rows_simple) return 1;
    if (!(a->bwd_made & PT_SCHNET_BWD_LISTS)) {
        pt_cfconv_senders(a->snd_offset, a->snd_edge, a->snd_close, a->row, b->edge_src,
                          b->edge_dst, b->cap_nodes, b->cap_edges);
        a->bwd_made |= PT_SCHNET_BWD_LISTS;
    }
    if (!(a->bwd_made & PT_SCHNET_BWD_RING)) {
        a->dp_ring = pt_schnet_edges_ring(a, b, G, F);
        a->bwd_made |= PT_SCHNET_BWD_RING;
    }
    if (!(a->bwd_made & PT_SCHNET_BWD_SEDGES) && pt_cfconv_choice() == PT_CFCONV_AVX512) {
        pt_cfconv_sender_edges(a->snd_rec, a->snd_offset, a->snd_edge, a->row, a->first,
                               a->row_last, b->edge_dst, a->cut, a->dp_ring, b->cap_nodes);
        a->bwd_made |= PT_SCHNET_BWD_SEDGES;
    }
    return 0;
}

/* By rows: each chunk's rows [r0, r0 + n) once, both edges of a bond
 * together, dP into the chunk's scratch (a->dp's first rows, in L2 like
 * ds1), so W is read once in ascending order and no ring is needed; fp32's
 * next chunk's W rows are fetched by this chunk's filter products.  bf16's
 * W̃ rows (wh) walked by senders until session 17: each row read twice, in
 * sender order, from L3 or memory (water: 2.6 ms a step against fp32's
 * 1.6 by rows, docs/performance.md). */
static void backward_rows(const pt_schnet_block *w, pt_schnet_block *dw,
                          const pt_schnet_block_acts *k, pt_schnet_acts *a, const pt_bf16 *wh,
                          int G, int F, double *total, pt_stopwatch *sw)
{
    const int U = a->n_rows, pc = conv_cut(k, a) != NULL;
    const int chunk = pt_schnet_filter_chunk(a->precision, G, F, U);
    for (int r0 = 0; r0 < U; r0 += chunk) {
        const int n = U - r0 < chunk ? U - r0 : chunk, r1 = r0 + n;
        if (wh)
            pt_cfconv_bf16_backward_rows(a->dx, a->dp, a->dm, k->x, wh, a->row_rec, r0, r1, F);
        else
            pt_cfconv_backward_rows(a->dx, a->dp, a->dm, k->x, k->w, pc, a->row_rec, r0, r1, F);
        if (!wh && r1 < U) {
            const int n2 = U - r1 < chunk ? U - r1 : chunk;
            pt_sgemm_prefetch(k->w + (size_t)r1 * F, (size_t)n2 * F * sizeof(float));
        }
        pt_lap(sw, PT_SCHNET_OP_CFCONV);
        pt_schnet_filter_backward_rows(w, dw, k, a, r0, n, G, F, a->dp, a->ds1, total, sw);
    }
}

void pt_schnet_edges_backward(const pt_schnet_block *w, pt_schnet_block *dw,
                              const pt_schnet_block_acts *k, pt_schnet_acts *a,
                              const pt_batch *b, int G, int F, pt_stopwatch *sw)
{
    const int U = a->n_rows, N = b->cap_nodes;
    const int chunk = pt_schnet_filter_chunk(a->precision, G, F, U);
    const pt_bf16 *wh = pt_schnet_w_bf16(k, a);
    /* da2's double total across the chunks (F ≤ PT_OPS_MAX_WIDTH:
     * pt_schnet_config_check) */
    double total[PT_OPS_MAX_WIDTH];
    for (int c = 0; c < F; c++) total[c] = 0.0;
    memset(a->dx, 0, (size_t)N * (size_t)F * sizeof(float));
    if (backward_tables(a, b, G, F)) {
        backward_rows(w, dw, k, a, wh, G, F, total, sw);
        for (int c = 0; c < F; c++) dw->mlp2_b[c] += (float)total[c];
        return;
    }
    /* By senders, whose kernels read W: where the forward left P
     * (conv_cut), W = P ⊙ C in place first, the cutoff pass's bits — a pass
     * more, only for fp32 batches with a row of three edges (duplicates) */
    if (conv_cut(k, a)) pt_filter_cutoff_forward(k->w, k->w, a->cut, U, F);
    pt_lap(sw, PT_SCHNET_OP_CFCONV);
    /* dP in a window of the rows in flight (water: ~1,300 rows), so its
     * lines are reused in cache instead of streaming 8 MB through memory */
    const int32_t ring = a->dp_ring;
    int i = 0;        /* receivers below i are done */
    int last = -1;    /* the last receiver using a row below r0 + n */
    int32_t made = 0; /* the rows receivers below i created */
    for (int r0 = 0; r0 < U; r0 += chunk) {
        const int n = U - r0 < chunk ? U - r0 : chunk;
        for (int u = r0; u < r0 + n; u++)
            if (a->row_last[u] > last) last = a->row_last[u];
        /* on to a boundary no edge crosses (a structure's end at least),
         * so each sender's edges are walked in one piece */
        const int end = last < 0 ? 0 : a->snd_close[last + 1], i0 = i;
        if (end > i && wh) {
            pt_cfconv_bf16_backward_senders(a->dx, a->dp, a->dm, k->x, wh, a->cut, a->row,
                                            a->first, a->row_last, b->edge_dst, a->snd_offset,
                                            a->snd_edge, a->snd_rec, i, end, F, ring);
            i = end;
        } else if (end > i) {
            pt_cfconv_backward_senders(a->dx, a->dp, a->dm, k->x, k->w, a->cut, a->row,
                                       a->first, a->row_last, b->edge_src, b->edge_dst,
                                       b->dst_offset, a->snd_offset, a->snd_edge, a->snd_rec,
                                       i, end, F, ring);
            i = end;
        }
        made = pt_schnet_rows_made(a, b, i0, i, made);
        /* fp32 W (bf16's rows are cfconv_bf16.h's): the next call's rows
         * while this chunk's filter backward computes */
        if (!wh && r0 + n < U) {
            const int r1 = r0 + n, n2 = U - r1 < chunk ? U - r1 : chunk;
            int last2 = last;
            for (int u = r1; u < r1 + n2; u++)
                if (a->row_last[u] > last2) last2 = a->row_last[u];
            const int end2 = last2 < 0 ? 0 : a->snd_close[last2 + 1];
            if (end2 > i) prefetch_next_w(k, a, b, i, end2, made, F);
        }
        pt_lap(sw, PT_SCHNET_OP_CFCONV);
        /* ds1 lives one chunk: the first rows of a->ds1 stay in L2 */
        const float *dp = a->dp + (size_t)(ring > 0 ? r0 % ring : r0) * F;
        pt_schnet_filter_backward_rows(w, dw, k, a, r0, n, G, F, dp, a->ds1, total, sw);
    }
    for (int c = 0; c < F; c++) dw->mlp2_b[c] += (float)total[c];
    /* the receivers after the last one with rows add nothing (their edges
     * carry no message): dx stays as it is */
}
