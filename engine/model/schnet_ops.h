/* schnet_ops.h — the layers of SchNet as forward/backward pairs over flat
 * float32 buffers (the llm.c layout: row-major [rows x cols], no allocation).
 *
 * Conventions shared by every op:
 *   - weights are stored as PyTorch stores them: W[out][in], so a Linear is
 *     out = in · Wᵀ + b;
 *   - backward ops ACCUMULATE (+=) into parameter gradients (dw, db, dtable),
 *     so gradient accumulation over micro-batches is free; gradients with
 *     respect to activations are written, or accumulated when a `beta` says so;
 *   - the shifted softplus keeps its derivative (the sigmoid) in the forward
 *     pass so the backward pass never recomputes an exponential. */
#ifndef PT_SCHNET_OPS_H
#define PT_SCHNET_OPS_H

#include <stdint.h>

#define PT_LN2 0.69314718055994530942

/* Arithmetic of the matrix products (training.precision).  FP32: OpenBLAS
 * sgemm.  BF16: both operands rounded to bfloat16, products accumulated in
 * fp32 (engine/bf16.h); weights, biases, gradients and every elementwise op
 * stay fp32. */
typedef enum pt_precision {
    PT_PRECISION_FP32 = 0,
    PT_PRECISION_BF16 = 1
} pt_precision;

/* Widest row (columns) an op that sums over rows accepts: bias gradients are
 * summed over thousands of edges in float blocks of a few rows gathered in a
 * double total on the stack, so a bias gradient is as accurate as a pairwise
 * sum instead of losing ~n·ε to one long float sum.  The model's widths are
 * capped at this by pt_schnet_config_check. */
#define PT_OPS_MAX_WIDTH 4096

/* out[n,o] = beta·out + in[n,i]·w[o,i]ᵀ + b[o]   (b may be NULL); the
 * product in `prec` arithmetic, the bias added in fp32. */
void pt_linear_forward(float *out, const float *in, const float *w, const float *b,
                       int n, int in_dim, int out_dim, float beta, pt_precision prec);
/* dw[o,i] += dout[n,o]ᵀ·in[n,i];  db[o] += Σ_n dout  (db may be NULL);
 * din[n,i] = din_beta·din + dout·w    (din may be NULL) */
void pt_linear_backward(float *din, float *dw, float *db, const float *dout,
                        const float *in, const float *w, int n, int in_dim, int out_dim,
                        float din_beta, pt_precision prec);

/* In place, x[n,c] ← ssp(x + b) = log1p(exp(−|x'|)) + max(x',0) − ln 2 with
 * x' = x + b, and sig = σ(x') = ssp'(x').  In place because that is how the
 * model uses it and because a separate-but-maybe-aliased output would make
 * gcc fall back to scalar code at run time.  b may be NULL (no bias: the
 * model adds it in the product, so the pass is one flat vector loop). */
void pt_ssp_forward(float *x, float *sig, const float *b, int n, int c);
/* In place, d ← d ⊙ sig (dL/ds becomes dL/dx');  db[c] += Σ_n d (db may be NULL). */
void pt_ssp_backward(float *d, float *db, const float *sig, int n, int c);

/* Weight-independent edge features, once per batch:
 *   e[k,g] = exp(γ (d_k − μ_g)²),  μ = linspace(0, r_c, G),  γ = −0.5/(μ_1 − μ_0)²
 *   C[k]   = 0.5 (cos(π d_k / r_c) + 1)  for d_k < r_c, else 0  (padding edges). */
void pt_edge_basis_forward(float *e, float *cut, const float *dist, int n_edges,
                           int n_gauss, float cutoff);

/* The filter's cosine cutoff, per filter row (engine/edge_rows.h):
 *   W_u = P_u · C_u    in place (P = A2 s1 + a2 already holds the bias). */
void pt_filter_cutoff_forward(float *w, const float *cut, int n_rows, int f);

/* Continuous-filter convolution over CSR receivers, with the filter read
 * through the edge → row table (row[k] < 0: edge k carries nothing):
 *   m_i = Σ_{k: dst_k = i, row_k ≥ 0} x[src_k] ⊙ W[row_k]
 * m has n_nodes rows; every row is written. */
void pt_cfconv_forward(float *m, const float *w, const int32_t *row, const float *x,
                       const int32_t *src, const int32_t *dst_offset, int n_nodes, int f);
/* Given dm, the gradients of the convolution and of the cutoff together:
 *   dP_u  = Σ_{k: row_k = u} (dm[dst_k] ⊙ x[src_k]) · C_u   (dL/dP, P as above)
 *   dx[j] = Σ_{k: src_k = j, row_k ≥ 0} dm[dst_k] ⊙ W[row_k]
 * dp rows are written by the row's first edge (first[k] = 1) and added to by
 * the others; dx is fully written. */
void pt_cfconv_backward(float *dx, float *dp, const float *dm, const float *x, const float *w,
                        const float *cut, const int32_t *row, const uint8_t *first,
                        const int32_t *src, const int32_t *dst_offset, int n_nodes, int f);

/* h[i] = table[z_i]  (row 0 is the padding row) */
void pt_embedding_forward(float *h, const float *table, const uint8_t *z, int n, int dim);
/* dtable[z_i] += dh[i] for z_i ≠ 0: the padding row never gets a gradient. */
void pt_embedding_backward(float *dtable, const float *dh, const uint8_t *z, int n, int dim);

typedef enum pt_readout {
    PT_READOUT_SUM = 0,
    PT_READOUT_MEAN = 1
} pt_readout;

/* Per-atom affine output and pooling, as PyG does it:
 *   o'_i = o_i · std + mean + atomref[z_i]     (atomref may be NULL)
 *   y_g  = Σ_{i: node_graph_i = g} o'_i        (mean: divided by the atom count)
 * Nodes with node_graph = −1 (padding) are skipped; count[g] receives the
 * number of real atoms of slot g.  y and count have n_graphs entries. */
void pt_readout_forward(double *y, int32_t *count, const float *o, const uint8_t *z,
                        const int32_t *node_graph, const float *atomref, double mean,
                        double std, pt_readout mode, int n_nodes, int n_graphs);
/* do_i = dy_g' · std with dy_g' = dy_g (sum) or dy_g / count_g (mean);
 * datomref[z_i] += dy_g' (datomref may be NULL); padding nodes get do = 0. */
void pt_readout_backward(float *dout, float *datomref, const double *dy, const int32_t *count,
                         const uint8_t *z, const int32_t *node_graph, double std,
                         pt_readout mode, int n_nodes);

#endif
