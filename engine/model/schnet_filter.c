/* schnet_filter.c — block t's filter network over the batch's filter rows
 * (issue 18 item 3), forward and backward, in cache-sized chunks of rows:
 *
 *   forward   s1 = ssp(A1 e + a1), σ1 = ssp'(·);  P = A2 s1 + a2;  W = P ⊙ C
 *   backward  given dP:  ds1 = (dP A2) ⊙ σ1;  dA2 += dPᵀ s1, da2 += Σ dP;
 *             dA1 += ds1ᵀ e,  da1 += Σ ds1   (e is data: no gradient)
 *
 * Each step reads the previous one's output, so over the whole batch at once
 * every op streams its [rows, F] arrays through memory: a water batch has
 * ~20,000 rows, 8 MB per array, far beyond L2.  Run over PT_FILTER_CHUNK rows
 * at a time, a chunk's e, s1, σ1, P and W (≈330 KB) stay in L2 from the first
 * product to the cutoff multiply, so each edge row is brought in once per
 * pass (the products themselves keep their operands in L1 through their own
 * blocking, sgemm_kernels.h).
 *
 * Same bits as the whole-batch sequence of ops (tests/unit/test_schnet_filter.c):
 * the forward is row by row (every element of a product is one chain over
 * its own row's inputs); in the backward the weight gradients are chains
 * over rows in ascending order that the own kernels keep across calls
 * (beta = 1 continues a chain exactly), and the bias gradients' float
 * blocks of PT_SUM_BLOCK rows are gathered in one double total across the
 * chunks as pt_column_sums_add does in one call (a chunk is a multiple of
 * both block lengths).  That holds for the own kernels and for the bf16
 * kernel (its reduction blocks of PT_BF16_KC rows divide a chunk);
 * OpenBLAS blocks a product's rows and its reduction its own way (a chunk's
 * rows can round differently from the same rows in a whole batch:
 * measured), so where the policy gives a product of the filter network to
 * OpenBLAS (PACKTRAIN_SGEMM=openblas, or a CPU without AVX2 + FMA) or bf16
 * runs on its portable path (cblas_sgemm), the whole-batch sequence runs.
 * The pieces (one chunk of each pass) are what schnet_edges.c interleaves
 * with the convolution; the two functions over all U rows below run the
 * chunks one after the other. */
#include <stdint.h>
#include <string.h>

#include "engine/core/fpflush.h"
#include "engine/model/bf16.h"
#include "engine/model/bf16_ssp.h"
#include "engine/model/schnet_internal.h"
#include "engine/model/schnet_ops_internal.h"
#include "engine/model/sgemm_kernels.h"
#include "engine/model/ssp_kernels.h"

/* Rows per chunk: a multiple of PT_SGEMM_KC (64, the own TN kernel's pass)
 * and of 4·PT_SUM_BLOCK (pt_ssp_backward's block).  256 rows × (25 + 3·100)
 * floats ≈ 330 KB. */
#define PT_FILTER_CHUNK 256

/* 1 when the chunks give the whole-batch bits: fp32, and every product of
 * the filter network on the own kernels (see the file comment); or bf16 on
 * the AVX512-BF16 kernel, whose chains restart every PT_BF16_KC rows of a
 * reduction and continue across calls with beta = 1 (bf16.h), so chunks of
 * whole K blocks round as the whole batch does. */
static int chunked(pt_precision prec, int G, int F)
{
    const int r = PT_FILTER_CHUNK;
    if (prec == PT_PRECISION_BF16)
        return r % PT_BF16_KC == 0 && pt_bf16_kernel_native();
    return prec == PT_PRECISION_FP32 &&
           pt_sgemm_choice(CblasNoTrans, CblasTrans, r, F, G) != PT_SGEMM_OPENBLAS &&
           pt_sgemm_choice(CblasNoTrans, CblasTrans, r, F, F) != PT_SGEMM_OPENBLAS &&
           pt_sgemm_choice(CblasNoTrans, CblasNoTrans, r, F, F) != PT_SGEMM_OPENBLAS &&
           pt_sgemm_choice(CblasTrans, CblasNoTrans, F, F, r) != PT_SGEMM_OPENBLAS &&
           pt_sgemm_choice(CblasTrans, CblasNoTrans, F, G, r) != PT_SGEMM_OPENBLAS;
}

int pt_schnet_filter_chunk(pt_precision prec, int G, int F, int U)
{
    return chunked(prec, G, F) ? PT_FILTER_CHUNK : (U > 0 ? U : 1);
}

/* bf16 training of the energy on the AVX512-BF16 kernel: s1 is kept only
 * as bf16, in s1's memory (as pairs, or rows of F halfs without room for
 * those: pt_schnet_s1_pairs / _bf16), because the only readers of s1 are
 * the two bf16 products (P = A2 s1 + a2, dA2 += dPᵀ s1), which would round
 * it anyway; the forces' passes read s1 in fp32
 * and keep the unfused sequence.  The first product's stores then apply a1,
 * the shifted softplus at bf16's precision (bf16_ssp.h: no division, on
 * bands of rows still in L1) and round to bf16; the second's add a2 and the
 * cutoff (W = P ⊙ C, when P is W's own array: then W is kept only as the
 * bf16 rows cfconv_bf16.h reads, pt_schnet_w_bf16).  No σ1 is kept: the
 * backward's ds1 product derives σ1 from s1's bf16 values as it stores
 * (8 MB a water block neither streamed out nor read back).  The unfused
 * sequence's bits, with bf16_ssp.h's ssp~ and σ̃ in place of pt_ssp_forward's
 * (tests/unit/test_schnet_filter.c); against the unfused sequence with the
 * fp32 softplus (pt_bf16_fusion off) within bf16_ssp.h's error bounds
 * (test_schnet_bf16.c), a third of the forward's row traffic. */
int pt_schnet_bf16_fused(const pt_schnet_acts *a)
{
    return a->precision == PT_PRECISION_BF16 && a->mode == PT_SCHNET_ENERGY &&
           pt_bf16_kernel_native() && pt_bf16_fusion();
}


/* The bf16 forward keeps, in the half of s1's fp32 memory (cap_edges rows
 * of F floats) that s1's bf16 rows leave free, what the products would
 * otherwise lay out again on every chunk:
 *   s1p  s1 as pairs (bf16.h), read in place by dA2 += dPᵀ s1 — every
 *        block, in its own s1 memory;
 *   eh   the Gaussian basis as bf16 rows padded to an even ld (the first
 *        product's A, PT_BF16_FMT_ROWS_PAD) and
 *   ep   the basis as pairs (dA1 += ds1ᵀ e's B) — the same for every block,
 *        so rounded once per forward by block 0 chunk by chunk, in block
 *        0's s1 memory (which lives until block 0's backward, the last).
 * Each is NULL where it does not fit (n_rows close to cap_edges), or for a
 * block outside a->block (a caller's lone block: no block 0 to share), s1p
 * also without a backward to read it (no_grad; a forward-only arena's
 * blocks share one s1, whose σ1 is not kept: the regions still do not
 * overlap); the products then round and lay out their operands as before.
 * Pair row p of the batch at p · ld (a chunk starts at an even row). */
typedef struct spare {
    uint32_t *s1p, *ep;
    pt_bf16 *eh;
    int ldeh;
} spare;

static size_t up64(size_t x) { return (x + 63) / 64 * 64; }
static spare spare_of(const pt_schnet_block_acts *k, const pt_schnet_acts *a, int G, int F)
{
    spare sp = {0};
    if (a->n_rows <= 0 || a->n_rows > a->cap_edges) return sp;
    const size_t U = (size_t)a->n_rows, pairs = (U + 1) / 2;
    const size_t room = (size_t)a->cap_edges * (size_t)F * sizeof(float);
    const size_t s1p = up64(U * (size_t)F * sizeof(pt_bf16));
    const size_t eh = up64(s1p + pairs * (size_t)pt_bf16_pairs_ld(F) * sizeof(uint32_t));
    if (eh > room) return sp;
    if (!a->no_grad) sp.s1p = (uint32_t *)((char *)k->s1 + s1p); /* a backward's only */
    const uintptr_t at = (uintptr_t)k, first = (uintptr_t)a->block;
    const int in_blocks = at >= first &&
                          at < first + sizeof(a->block[0]) * PT_SCHNET_MAX_INTERACTIONS &&
                          a->block[0].s1 != NULL;
    sp.ldeh = G + G % 2;
    const size_t ep = up64(eh + U * (size_t)sp.ldeh * sizeof(pt_bf16));
    const size_t end = ep + pairs * (size_t)pt_bf16_pairs_ld(G) * sizeof(uint32_t);
    if (!in_blocks || end > room) return sp;
    char *base = (char *)a->block[0].s1;
    sp.eh = (pt_bf16 *)(base + eh);
    sp.ep = (uint32_t *)(base + ep);
    return sp;
}

/* Where the fused forward keeps s1 (schnet_internal.h): with room for the
 * pairs, as pairs only (the backward's dA2 reads them; the second product
 * reads its chunk's bf16 rows from the thread's operand scratch, in cache,
 * and they are not kept: 4 MB a water block no longer written to memory),
 * else as bf16 rows in s1's memory (both products read those). */
pt_bf16 *pt_schnet_s1_bf16(const pt_schnet_block_acts *k, const pt_schnet_acts *a, int G, int F)
{
    if (!pt_schnet_bf16_fused(a)) return NULL;
    return spare_of(k, a, G, F).s1p ? NULL : (pt_bf16 *)k->s1;
}

const uint32_t *pt_schnet_s1_pairs(const pt_schnet_block_acts *k, const pt_schnet_acts *a,
                                   int G, int F)
{
    return pt_schnet_bf16_fused(a) ? spare_of(k, a, G, F).s1p : NULL;
}

pt_bf16 *pt_schnet_w_bf16(const pt_schnet_block_acts *k, const pt_schnet_acts *a)
{
    return pt_schnet_bf16_fused(a) && k->p == k->w ? (pt_bf16 *)k->w : NULL;
}

static void forward_rows_bf16(const pt_schnet_block *w, pt_schnet_block_acts *k,
                              const pt_schnet_acts *a, int r0, int n, int G, int F,
                              pt_stopwatch *sw)
{
    const size_t o = (size_t)r0 * (size_t)F;
    const spare sp = spare_of(k, a, G, F);
    pt_bf16 *s1h = sp.s1p ? pt_bf16_operand_scratch((size_t)n * F * sizeof(pt_bf16))
                          : (pt_bf16 *)k->s1 + o;
    if (!s1h) pt_bf16_check(PT_BF16_ENOMEM, n, F, G);
    const float *e = a->e + (size_t)r0 * G;
    pt_bf16 *eh = sp.eh ? sp.eh + (size_t)r0 * sp.ldeh : NULL;
    if (eh && k == &a->block[0])
        pt_bf16_pairs_pack(sp.ep + (size_t)(r0 / 2) * pt_bf16_pairs_ld(G), e, G, n, G, eh,
                           sp.ldeh);
    /* the first chunk's products compare A1, A2 with their packings, the
     * others reuse them (unchanged over the pass: bf16.h) */
    const int held = r0 > 0;
    if (!held) pt_bf16_weights_hold();
    /* the first product's epilogue: a1, then bf16_ssp.h's softplus (s1 is
     * rounded to bf16 as it is stored, so bf16's precision is enough: no
     * division), no σ1 (the backward derives it from s1's bf16 values) */
    const pt_bf16_epilogue ssp = {.bias = w->mlp0_b, .map = pt_bf16_ssp_map, .b_held = held,
                                  .h = s1h, .ldh = F,
                                  .pairs = sp.s1p ? sp.s1p + (size_t)(r0 / 2) * pt_bf16_pairs_ld(F)
                                                  : NULL};
    if (eh)
        pt_bf16_check(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, n, F, G, 1.0f, eh,
                                      PT_BF16_FMT_ROWS_PAD, sp.ldeh, w->mlp0_w, 0, G, 0.0f, NULL,
                                      F, &ssp),
                      n, F, G);
    else
        pt_bf16_check(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, n, F, G, 1.0f, e, 0, G,
                                      w->mlp0_w, 0, G, 0.0f, NULL, F, &ssp),
                      n, F, G);
    pt_lap(sw, PT_SCHNET_OP_FILTER_GEMM);
    /* in place (energy): W = P ⊙ C as the product stores, kept only as
     * bf16 rows for the convolution (cfconv_bf16.h: half its reads) */
    const int in_place = k->p == k->w;
    pt_bf16 *wh = pt_schnet_w_bf16(k, a);
    const pt_bf16_epilogue cut = {.bias = w->mlp2_b, .row_scale = in_place ? a->cut + r0 : NULL,
                                  .b_held = held, .h = wh ? wh + o : NULL, .ldh = F};
    pt_bf16_check(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, n, F, F, 1.0f, s1h, 1, F, w->mlp2_w,
                                  0, F, 0.0f, wh ? NULL : k->p + o, F, &cut),
                  n, F, F);
    pt_lap(sw, PT_SCHNET_OP_FILTER_GEMM);
    if (!in_place) {
        pt_filter_cutoff_forward(k->w + o, k->p + o, a->cut + r0, n, F);
        pt_lap(sw, PT_SCHNET_OP_CFCONV);
    }
}

/* fp32 on the own kernels (chunked): 0 on a pass's first chunk, after
 * starting a hold (its products compare the weights with their layouts),
 * 1 on the others (sgemm_kernels.h); -1 otherwise (pt_linear_*). */
static int held_fp32(pt_precision prec, int r0, int G, int F)
{
    if (prec != PT_PRECISION_FP32 || !chunked(prec, G, F)) return -1;
    if (r0 == 0) pt_sgemm_weights_hold();
    return r0 > 0;
}

/* Where an fp32 chunk's s1 is computed, or NULL for its rows of k->s1.
 * Energy training on the own kernels (held ≥ 0): the first rows of a->ds1
 * (the backward's one-chunk scratch, unused in the forward: 100 KB, in L2
 * after the first chunk), and pt_ssp_forward_copy_run writes the values
 * to k->s1 with non-temporal stores.  The product's plain stores into
 * k->s1 (8 MB a water block, read back only by the backward, after every
 * block's forward) read each line for ownership first (session 11: the
 * first product at 63-68% of its isolated rate in the step); now the
 * softplus reads the chunk from L2 and the second product reads s1 from
 * there.  The bits are the same (the same operations, another address).
 * Not for the force passes (σ1 stored; a->ds1 is a shared row array
 * there) nor without a backward (no_grad: k->s1 is read by nothing, but
 * kept as the tests read it). */
static float *s1_scratch(const pt_schnet_acts *a, int held)
{
    return held >= 0 && a->mode == PT_SCHNET_ENERGY && !a->no_grad && !a->forward_only
               ? a->ds1
               : NULL;
}

/* A Linear layer's product on the rows [n, k] of A with its weight W
 * (NT: the forward, W[nout,k], with the bias; NN: the input gradient,
 * W[k,nout], no bias), rows of nout into C, through
 * pt_sgemm_small_weight; 0 when it did not run (held -1, or the policy
 * chose OpenBLAS): the caller's pt_linear_* runs it. */
static int held_product(CBLAS_TRANSPOSE tb, int n, int nout, int k, const float *x,
                        const float *wt, const float *bias, float *c, int held)
{
    return held >= 0 && pt_sgemm_small_weight(tb, n, nout, k, x, k, wt, tb == CblasTrans ? k : nout,
                                              0.0f, bias, c, nout, held);
}

void pt_schnet_filter_forward_rows(const pt_schnet_block *w, pt_schnet_block_acts *k,
                                   const pt_schnet_acts *a, int r0, int n, int G, int F,
                                   int leave_p, pt_stopwatch *sw)
{
    const pt_precision prec = a->precision;
    const size_t o = (size_t)r0 * (size_t)F;
    if (pt_schnet_bf16_fused(a)) {
        forward_rows_bf16(w, k, a, r0, n, G, F, sw);
        return;
    }
    /* fp32 chunks: the first compares A1, A2 with their layouts, the
     * others reuse them (unchanged over the pass: sgemm_kernels.h) */
    const int held = held_fp32(prec, r0, G, F);
    float *scratch = s1_scratch(a, held);
    float *s1 = scratch ? scratch : k->s1 + o;
    if (!held_product(CblasTrans, n, F, G, a->e + (size_t)r0 * G, w->mlp0_w, w->mlp0_b, s1,
                      held))
        pt_linear_forward(s1, a->e + (size_t)r0 * G, w->mlp0_w, w->mlp0_b, n, G, F, 0.0f, prec);
    pt_lap(sw, PT_SCHNET_OP_FILTER_GEMM);
    /* σ1 only for the force passes (pt_schnet_sig_stored; the backward
     * recovers it from s1: σ1's 8 MB a water block were streamed out here
     * and fetched back there, and its exp and division cost the forward
     * more than the exp costs the backward).  Where kept, it is read only
     * after every block's forward: its stores skip the caches.  With a
     * scratch, s1 goes to its array the same way (s1_scratch). */
    if (scratch)
        pt_ssp_forward_copy_run(PT_SGEMM_AUTO, s1, k->s1 + o, (size_t)n * (size_t)F);
    else
        pt_ssp_forward_stream_run(PT_SGEMM_AUTO, s1,
                                  pt_schnet_sig_stored(a) ? pt_schnet_keep_sig(a, k->sig1 + o)
                                                           : NULL,
                                  (size_t)n * (size_t)F);
    pt_lap(sw, PT_SCHNET_OP_FILTER_SSP);
    /* The cutoff stays a pass: as the product's epilogue (session 5's
     * ROW_SCALE, removed in session 6: sgemm_kernels.h) the same bits cost
     * more in this pipeline than the pass (water fp32 schnet_profile
     * 43.7-44.5 -> 46.4-46.6 ms a step with it and the ssp backward's MUL,
     * load 1.4-1.6), though 1-2% less on isolated chunks. */
    if (!held_product(CblasTrans, n, F, F, s1, w->mlp2_w, w->mlp2_b, k->p + o, held))
        pt_linear_forward(k->p + o, s1, w->mlp2_w, w->mlp2_b, n, F, F, 0.0f, prec);
    pt_lap(sw, PT_SCHNET_OP_FILTER_GEMM);
    if (leave_p) return; /* the pipeline's convolution applies C (schnet_edges.c) */
    pt_filter_cutoff_forward(k->w + o, k->p + o, a->cut + r0, n, F);
    pt_lap(sw, PT_SCHNET_OP_CFCONV);
}

/* bf16: dA2 += dPᵀ s1 and ds1 = (dP A2) ⊙ σ1 from one rounding of the
 * chunk's dP, as pairs (dA2's A) and as rows (ds1's A, read in place),
 * where each product used to round and lay out dP itself: the same values
 * in the same order, so the same bits; s1 as the forward's pairs where it
 * kept them.  ds1's product multiplies by σ̃1, derived from s1's bf16
 * values (pairs, or rows without room for them; bf16_ssp.h), as it stores
 * the rows (the multiply pt_ssp_backward made a pass of, with no σ1 array
 * to read) and rounds them, once, into the
 * pairs dA1 += ds1ᵀ e reads in place (that product rounded and laid out
 * ds1 itself on every chunk): returned, on the thread's operand scratch
 * (no allocation after the first step) with dP's.  The same stores add ds1
 * into da1's sums (pt_ssp_backward's pass over ds1's fp32 rows, which are no
 * longer stored, is gone). */
static const uint32_t *backward_dp_bf16(const pt_schnet_block *w, pt_schnet_block *dw,
                                        const pt_schnet_block_acts *k, const pt_schnet_acts *a,
                                        int r0, int n, int G, int F, const float *dp)
{
    const int ldp = pt_bf16_pairs_ld(F);
    const size_t pair_bytes = ((size_t)(n + 1) / 2 * ldp * sizeof(uint32_t) + 63) / 64 * 64;
    const size_t row_bytes = ((size_t)n * F * sizeof(pt_bf16) + 63) / 64 * 64;
    char *mem = pt_bf16_operand_scratch(2 * pair_bytes + row_bytes);
    if (!mem) pt_bf16_check(PT_BF16_ENOMEM, n, F, F);
    uint32_t *dpp = (uint32_t *)mem, *ds1p = (uint32_t *)(mem + pair_bytes + row_bytes);
    pt_bf16 *dph = (pt_bf16 *)(mem + pair_bytes);
    pt_bf16_pairs_pack(dpp, dp, F, n, F, dph, F);
    /* da1 = Σ ds1 over the chunk's rows as the product stores them (runs
     * of PT_BF16_EPI_ROWS rows in float, their sums in double: bf16.h;
     * F ≤ PT_OPS_MAX_WIDTH), into da1 once a chunk */
    double total[PT_OPS_MAX_WIDTH];
    for (int c = 0; c < F; c++) total[c] = 0.0;
    const uint32_t *s1p = spare_of(k, a, G, F).s1p;
    if (s1p)
        pt_bf16_check(pt_bf16_gemm_ex(CblasTrans, CblasNoTrans, F, F, n, 1.0f, dpp,
                                      PT_BF16_FMT_PAIRS, ldp, s1p + (size_t)(r0 / 2) * ldp,
                                      PT_BF16_FMT_PAIRS, ldp, 1.0f, dw->mlp2_w, F, NULL),
                      F, F, n);
    else
        pt_bf16_check(pt_bf16_gemm_ex(CblasTrans, CblasNoTrans, F, F, n, 1.0f, dpp,
                                      PT_BF16_FMT_PAIRS, ldp,
                                      (const pt_bf16 *)k->s1 + (size_t)r0 * F, PT_BF16_FMT_ROWS,
                                      F, 1.0f, dw->mlp2_w, F, NULL),
                      F, F, n);
    /* A2 held over the pass's chunks as in the forward */
    if (r0 == 0) pt_bf16_weights_hold();
    const pt_bf16_epilogue sig = {.dssp_s1 = s1p ? (const void *)(s1p + (size_t)(r0 / 2) * ldp)
                                               : (const void *)((const pt_bf16 *)k->s1 +
                                                                (size_t)r0 * F),
                                  .dssp_fmt = s1p ? PT_BF16_FMT_PAIRS : PT_BF16_FMT_ROWS,
                                  .dssp_ld = s1p ? ldp : F, .pairs = ds1p, .b_held = r0 > 0,
                                  .col_sums = total};
    pt_bf16_check(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, n, F, F, 1.0f, dph,
                                  PT_BF16_FMT_ROWS, F, w->mlp2_w, PT_BF16_FMT_F32, F, 0.0f, NULL,
                                  F, &sig),
                  n, F, F);
    for (int c = 0; c < F; c++) dw->mlp0_b[c] += (float)total[c];
    return ds1p;
}

/* One chunk of the backward from its dP rows dp ([n,F]), ds1 into ds1
 * ([n,F]); both where the chunk's rows are in a->dp and a->ds1, or in
 * windows of them (schnet_edges.c).  da2's float blocks go to a double total the
 * caller keeps across the chunks and adds to da2 at the end, as
 * pt_column_sums_add keeps it over one call's rows (so one chunk of all U
 * rows is pt_linear_backward's sequence, bit for bit). */
void pt_schnet_filter_backward_rows(const pt_schnet_block *w, pt_schnet_block *dw,
                                    const pt_schnet_block_acts *k, const pt_schnet_acts *a,
                                    int r0, int n, int G, int F, const float *dp, float *ds1,
                                    double *total, pt_stopwatch *sw)
{
    const pt_precision prec = a->precision;
    const size_t o = (size_t)r0 * (size_t)F;
    if (pt_schnet_bf16_fused(a)) {
        /* ds1 is kept only as the pairs dA1 reads (its fp32 rows stay in
         * the product's band): ds1 unused here */
        const uint32_t *ds1p = backward_dp_bf16(w, dw, k, a, r0, n, G, F, dp);
        pt_column_sums_total(total, dp, n, F);
        pt_lap(sw, PT_SCHNET_OP_FILTER_GEMM);
        /* the basis as the forward's block 0 kept it (pairs), else as fp32 */
        const spare sp = spare_of(k, a, G, F);
        const int ldp = pt_bf16_pairs_ld(F);
        if (sp.ep)
            pt_bf16_check(pt_bf16_gemm_ex(CblasTrans, CblasNoTrans, F, G, n, 1.0f, ds1p,
                                          PT_BF16_FMT_PAIRS, ldp,
                                          sp.ep + (size_t)(r0 / 2) * pt_bf16_pairs_ld(G),
                                          PT_BF16_FMT_PAIRS, pt_bf16_pairs_ld(G), 1.0f,
                                          dw->mlp0_w, G, NULL),
                          F, G, n);
        else
            pt_bf16_check(pt_bf16_gemm_ex(CblasTrans, CblasNoTrans, F, G, n, 1.0f, ds1p,
                                          PT_BF16_FMT_PAIRS, ldp, a->e + (size_t)r0 * G,
                                          PT_BF16_FMT_F32, G, 1.0f, dw->mlp0_w, G, NULL),
                          F, G, n);
        pt_lap(sw, PT_SCHNET_OP_FILTER_GEMM);
        return;
    }
    pt_linear_backward_weight(dw->mlp2_w, NULL, dp, k->s1 + o, n, 0, F, F, prec);
    /* ds1 = (dP A2) ⊙ σ1 as a pass: a MUL epilogue in the fp32 kernels
     * cost more in this pipeline (see the forward) */
    /* ds1 ⊙= σ̃1 below from s1, which dA2 has just read (in L2) */
    const int held = held_fp32(prec, r0, G, F);
    /* The next chunk's rows, fetched into L2 by this chunk's products
     * (pt_sgemm_prefetch; a hint: the bits do not depend on it): its W by
     * dA2 (schnet_edges.c), its s1 (dA2's B, 100 KB, from memory: the
     * forward streamed it out) by dS1 here, its e (dA1's B, 25 KB) by dA1.
     * One line per ~65 cycles of a 28 µs product: s1 and e together in
     * dA1 (≈ 10 µs) were more than its fill buffers bring in (session 14:
     * dA1 at 57% of its isolated rate in the step, 17 µs against 9.6). */
    const int next = a->n_rows - (r0 + n) < n ? a->n_rows - (r0 + n) : n;
    if (held >= 0 && next > 0)
        pt_sgemm_prefetch(k->s1 + o + (size_t)n * F, (size_t)next * F * sizeof(float));
    if (!held_product(CblasNoTrans, n, F, F, dp, w->mlp2_w, NULL, ds1, held))
        pt_linear_backward_input(ds1, dp, w->mlp2_w, n, F, F, 0.0f, prec);
    pt_column_sums_total(total, dp, n, F);
    pt_lap(sw, PT_SCHNET_OP_FILTER_GEMM);
    pt_ssp_backward_s(ds1, dw->mlp0_b, k->s1 + o, n, F);
    pt_lap(sw, PT_SCHNET_OP_FILTER_SSP);
    if (held >= 0 && next > 0)
        pt_sgemm_prefetch(a->e + (size_t)(r0 + n) * G, (size_t)next * G * sizeof(float));
    /* dA1 += ds1ᵀ e meets subnormals: over a row's Gaussians far from its
     * distance e sits at the basis' floor (e^-87 ≈ 2^-125.5, exp_neg in
     * schnet_ops.c), so its products with ds1 — and the partial sums they
     * start or feed — fall below 2^-126, each such result a microcode assist
     * on the Intel Xeon (engine/core/fpflush.h).  In the flush scope: water
     * fp32, per call in the step (TSC medians, one binary, the scope on
     * every other two chunks, 3 runs at load 5) 12.0-12.6 -> 10.5-11.0 us,
     * the other products unchanged: ≈ -0.45 ms a water step.  The same bits
     * as IEEE: a flushed term is below 2^-126 against gradient sums of normal
     * size (bit for bit on real energy steps: test_schnet_forces_flush.c). */
    const unsigned fp = pt_flush_begin(!a->ieee_subnormals);
    pt_linear_backward_weight(dw->mlp0_w, NULL, ds1, a->e + (size_t)r0 * G, n, 0, G, F, prec);
    pt_flush_end(fp);
    pt_lap(sw, PT_SCHNET_OP_FILTER_GEMM);
}

void pt_schnet_filter_forward(const pt_schnet_block *w, pt_schnet_block_acts *k,
                              const pt_schnet_acts *a, int U, int G, int F, pt_stopwatch *sw)
{
    const int chunk = pt_schnet_filter_chunk(a->precision, G, F, U);
    for (int r0 = 0; r0 < U; r0 += chunk)
        pt_schnet_filter_forward_rows(w, k, a, r0, U - r0 < chunk ? U - r0 : chunk, G, F, 0,
                                      sw);
}

void pt_schnet_filter_backward(const pt_schnet_block *w, pt_schnet_block *dw,
                               const pt_schnet_block_acts *k, pt_schnet_acts *a, int U, int G,
                               int F, pt_stopwatch *sw)
{
    /* F ≤ PT_OPS_MAX_WIDTH: pt_schnet_config_check */
    double total[PT_OPS_MAX_WIDTH];
    for (int c = 0; c < F; c++) total[c] = 0.0;
    const int chunk = pt_schnet_filter_chunk(a->precision, G, F, U);
    for (int r0 = 0; r0 < U; r0 += chunk)
        pt_schnet_filter_backward_rows(w, dw, k, a, r0, U - r0 < chunk ? U - r0 : chunk, G, F,
                                       a->dp + (size_t)r0 * F, a->ds1 + (size_t)r0 * F, total,
                                       sw);
    for (int c = 0; c < F; c++) dw->mlp2_b[c] += (float)total[c];
}
