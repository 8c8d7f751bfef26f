/* schnet_block.c — interaction block t of SchNet, forward and backward
 * (the equations are schnet.c's; schnet.c runs the blocks in turn):
 *
 *   forward   x = L1 h_t;  W = filter(e) ⊙ C (schnet_filter.c);
 *             m_i = Σ_{j→i} x_j ⊙ W_ij;  u = ssp(L2 m + c2);  h_{t+1} = h_t + L3 u + c3
 *   backward  from dh = dL/dh_{t+1} (in place to dL/dh_t: the residual path
 *             is the identity) through L3, ssp, L2, the convolution, the
 *             filter network and L1, accumulating the block's gradients.
 *
 * Node products run over the whole batch ([N,H]·[H,F] …); the edge part
 * (filter network and convolution) over the filter rows (engine/pack/edge_rows.h).
 * bf16 energy steps fuse the second node product with c2 and the shifted
 * softplus (bf16_ssp.h's, no σ2 kept) and keep u only as bf16
 * (pt_schnet_bf16_fused). */
#include "engine/model/bf16_ssp.h"
#include "engine/model/schnet_internal.h"
#include "engine/model/schnet_ops_internal.h"
#include "engine/model/sgemm_kernels.h"
#include "engine/model/ssp_kernels.h"

/* h_{t+1} = h_t + c3 row by row, before the product adds L3 u (one pass
 * instead of a copy and a bias pass). */
static void residual_init(float *restrict out, const float *restrict in,
                          const float *restrict bias, int n, int c)
{
    for (int r = 0; r < n; r++)
        for (int k = 0; k < c; k++)
            out[(size_t)r * c + k] = in[(size_t)r * c + k] + bias[k];
}

void pt_schnet_block_forward(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b, int t,
                             pt_stopwatch *sw)
{
    const pt_schnet_config *c = &m->cfg;
    const pt_schnet_block *w = &m->params.block[t];
    pt_schnet_block_acts *k = &a->block[t];
    const int N = b->cap_nodes, H = c->hidden, F = c->filters, G = c->gaussians;
    const int U = a->n_rows;
    const pt_precision prec = a->precision;

    pt_linear_forward(k->x, a->h[t], w->conv_lin1_w, NULL, N, H, F, 0.0f, prec);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
    if (a->mode == PT_SCHNET_ENERGY) {
        /* filter network and convolution chunk by chunk (schnet_edges.c) */
        pt_schnet_edges_forward(w, k, a, b, G, F, sw);
    } else {
        /* W' (schnet_forces.c) is computed over all rows at once, so the
         * convolution follows the whole filter network here */
        pt_schnet_filter_forward(w, k, a, U, G, F, sw);
        pt_schnet_filter_deriv(m, a, t, sw);
        pt_cfconv_forward(k->m, k->w, a->row, k->x, b->edge_src, b->dst_offset, N, F);
        pt_lap(sw, PT_SCHNET_OP_CFCONV);
    }
    if (pt_schnet_bf16_fused(a)) {
        /* bf16: u = ssp(L2 m + c2) as the product stores it, kept only as
         * bf16 in u's memory (its readers, L3's products, round it anyway;
         * schnet_internal.h), so at bf16's precision (bf16_ssp.h's ssp~: no
         * division) and without σ2: the backward derives σ̃2 from u's bf16
         * values, as the filter network's does from s1's */
        pt_bf16 *uh = (pt_bf16 *)k->u;
        const pt_bf16_epilogue ssp = {.bias = w->conv_lin2_b, .map = pt_bf16_ssp_map, .h = uh,
                                      .ldh = H};
        pt_bf16_check(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, N, H, F, 1.0f, k->m, 0, F,
                                      w->conv_lin2_w, 0, F, 0.0f, NULL, H, &ssp),
                      N, H, F);
        pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
        residual_init(a->h[t + 1], a->h[t], w->lin_b, N, H);
        pt_lap(sw, PT_SCHNET_OP_OTHER);
        pt_bf16_check(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, N, H, H, 1.0f, uh, 1, H,
                                      w->lin_w, 0, H, 1.0f, a->h[t + 1], H, NULL),
                      N, H, H);
        pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
        return;
    }
    pt_linear_forward(k->u, k->m, w->conv_lin2_w, w->conv_lin2_b, N, F, H, 0.0f, prec);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
    /* σ2 only for the force passes: the backward recovers it from u */
    pt_ssp_forward(k->u, pt_schnet_sig_stored(a) ? pt_schnet_keep_sig(a, k->sig2) : NULL, NULL,
                   N, H);
    pt_lap(sw, PT_SCHNET_OP_NODE_SSP);
    /* fp32 on the own kernels: every chain of L3's product starts from
     * h_t + c3, h_t read as each register tile starts (cold after the edge
     * pipeline: the pass below fetched it and wrote h_{t+1} only for the
     * product to read it back); the same bits (sgemm_kernels.h) */
    if (prec == PT_PRECISION_FP32 &&
        pt_sgemm_small_once_residual(N, H, H, k->u, H, w->lin_w, H, a->h[t], H, w->lin_b,
                                     a->h[t + 1], H)) {
        pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
        return;
    }
    residual_init(a->h[t + 1], a->h[t], w->lin_b, N, H);
    pt_lap(sw, PT_SCHNET_OP_OTHER);
    pt_linear_forward(a->h[t + 1], k->u, w->lin_w, NULL, N, H, H, 1.0f, prec);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
}

/* bf16 (fused): pt_linear_backward's dW += doutᵀ · in and din = dout · W
 * + din_beta · din from one rounding of dout, as pairs (dW's A, read in
 * place) and as rows (din's A, read in place), where each product rounded
 * and laid out the fp32 dout itself: the same values in the same order, so
 * the same bits.  in is fp32, or bf16 rows (in_h: u as the forward kept
 * it); din NULL: dW only; din_epi: din's product's epilogue (bf16.h) or
 * NULL.  On the thread's operand scratch (no allocation after the first
 * step). */
static void linear_backward_bf16(float *din, float *dw, const float *dout, const float *in,
                                 const pt_bf16 *in_h, const float *w, int n, int in_dim,
                                 int out_dim, float din_beta, const pt_bf16_epilogue *din_epi)
{
    const int ldp = pt_bf16_pairs_ld(out_dim);
    const size_t pair_bytes = ((size_t)(n + 1) / 2 * ldp * sizeof(uint32_t) + 63) / 64 * 64;
    char *mem = pt_bf16_operand_scratch(pair_bytes + (size_t)n * out_dim * sizeof(pt_bf16));
    if (!mem) pt_bf16_check(PT_BF16_ENOMEM, out_dim, in_dim, n);
    uint32_t *pairs = (uint32_t *)mem;
    pt_bf16 *rows = (pt_bf16 *)(mem + pair_bytes);
    pt_bf16_pairs_pack(pairs, dout, out_dim, n, out_dim, din ? rows : NULL, out_dim);
    pt_bf16_check(pt_bf16_gemm_ex(CblasTrans, CblasNoTrans, out_dim, in_dim, n, 1.0f, pairs,
                                  PT_BF16_FMT_PAIRS, ldp, in_h ? (const void *)in_h : in,
                                  in_h ? PT_BF16_FMT_ROWS : PT_BF16_FMT_F32, in_dim, 1.0f, dw,
                                  in_dim, NULL),
                  out_dim, in_dim, n);
    if (din)
        pt_bf16_check(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, n, in_dim, out_dim, 1.0f, rows,
                                      PT_BF16_FMT_ROWS, out_dim, w, PT_BF16_FMT_F32, in_dim,
                                      din_beta, din, in_dim, din_epi),
                      n, in_dim, out_dim);
}

/* dh holds dL/dh_{t+1} on entry and dL/dh_t on return (in place: the
 * residual path is the identity). */
void pt_schnet_block_backward(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b, int t,
                              pt_schnet_params *d, pt_stopwatch *sw)
{
    const pt_schnet_config *c = &m->cfg;
    const pt_schnet_block *w = &m->params.block[t];
    pt_schnet_block *dw = &d->block[t];
    pt_schnet_block_acts *k = &a->block[t];
    const int N = b->cap_nodes, H = c->hidden, F = c->filters, G = c->gaussians;
    const pt_precision prec = a->precision;

    const int fused = pt_schnet_bf16_fused(a);
    if (fused) {
        /* pt_linear_backward's sequence with u read as the bf16 the forward
         * kept; du's product applies the softplus' backward as it stores:
         * du ⊙= σ̃2 derived from u's bf16 values (bf16_ssp.h: no σ2 array)
         * and dc2 += Σ du (runs of PT_BF16_EPI_ROWS rows in float, their
         * sums in double: bf16.h), while the rows are in L1 — the filter's
         * ds1 product does the same with s1 */
        double total[PT_OPS_MAX_WIDTH];
        for (int j = 0; j < H; j++) total[j] = 0.0;
        const pt_bf16_epilogue dssp = {.dssp_s1 = k->u, .dssp_fmt = PT_BF16_FMT_ROWS,
                                       .dssp_ld = H, .col_sums = total};
        /* an epilogue needs the reduction in one block (bf16.h): wider
         * layers multiply and sum in passes, the same operations */
        const int in_epi = H <= PT_BF16_KC;
        linear_backward_bf16(a->du, dw->lin_w, a->dh, NULL, (const pt_bf16 *)k->u, w->lin_w, N,
                             H, H, 0.0f, in_epi ? &dssp : NULL);
        pt_column_sums_add(dw->lin_b, a->dh, N, H);
        if (in_epi) {
            for (int j = 0; j < H; j++) dw->conv_lin2_b[j] += (float)total[j];
        } else {
            pt_bf16_dssp_mul(a->du, (size_t)H, N, H, k->u, PT_BF16_FMT_ROWS, (size_t)H);
            pt_ssp_backward(a->du, dw->conv_lin2_b, NULL, N, H);
        }
        pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
    } else {
        pt_linear_backward(a->du, dw->lin_w, dw->lin_b, a->dh, k->u, w->lin_w, N, H, H, 0.0f,
                           prec);
        pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
        pt_ssp_backward_s(a->du, dw->conv_lin2_b, k->u, N, H);
        pt_lap(sw, PT_SCHNET_OP_NODE_SSP);
    }
    if (fused)
        linear_backward_bf16(a->dm, dw->conv_lin2_w, a->du, k->m, NULL, w->conv_lin2_w, N, F, H,
                             0.0f, NULL);
    else
        pt_linear_backward(a->dm, dw->conv_lin2_w, NULL, a->du, k->m, w->conv_lin2_w, N, F, H,
                           0.0f, prec);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
    /* dm → dx and dP (per filter row, cutoff included), then the filter
     * network: A2, a2 → ssp → A1, a1 (e needs no gradient), chunk by chunk */
    pt_schnet_edges_backward(w, dw, k, a, b, G, F, sw);
    if (fused)
        linear_backward_bf16(a->dh, dw->conv_lin1_w, a->dx, a->h[t], NULL, w->conv_lin1_w, N, H,
                             F, 1.0f, NULL);
    else {
        /* dh += dx W before dW += dxᵀ h_t (pt_linear_backward runs them the
         * other way; neither reads what the other writes: the same bits).
         * Per call in the step (TSC around the pair, the order switched every
         * step in one binary, schnet_profile water fp32 30-40 steps, 5 runs
         * at load 4.5-5, medians): 1,286-1,410 -> 1,104-1,190 kcycles, ≈ -75
         * µs a block, ≈ -0.3 ms a water step; QM9 (N = 288, in L2) unchanged.
         * Both products stream a cold operand (dh, last read by this block's
         * L3 before the edge pipeline; h_t, written by the forward); why this
         * order overlaps them better is not established.  L3's and L2's pairs
         * moved no more than the noise the same way (docs/performance.md,
         * session 16 (sums)). */
        pt_linear_backward_input(a->dh, a->dx, w->conv_lin1_w, N, H, F, 1.0f, prec);
        pt_linear_backward_weight(dw->conv_lin1_w, NULL, a->dx, a->h[t], N, N, H, F, prec);
    }
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
}
