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

/* The two halves of pt_linear_backward, for passes that need one of them or
 * that sum a weight gradient over more rows than its bias gradient:
 *   din[n,i] = din_beta·din + dout[n,o]·w[o,i]
 *   dw[o,i] += dout[n,o]ᵀ·in[n,i];  db[o] += Σ_{r < n_bias} dout[r,o]  (db may be NULL) */
void pt_linear_backward_input(float *din, const float *dout, const float *w, int n, int in_dim,
                              int out_dim, float din_beta, pt_precision prec);
void pt_linear_backward_weight(float *dw, float *db, const float *dout, const float *in, int n,
                               int n_bias, int in_dim, int out_dim, pt_precision prec);

/* In place, x[n,c] ← ssp(x + b) = log1p(exp(−|x'|)) + max(x',0) − ln 2 with
 * x' = x + b, and sig = σ(x') = ssp'(x').  In place because that is how the
 * model uses it.  b may be NULL (no bias: the model adds it in the
 * product, so the pass is one flat run); sig may be NULL (no gradient will
 * be taken: x gets the same bits, without the sigmoid's division).  One
 * arithmetic for every instruction set and path (ssp_body.h; errors there). */
void pt_ssp_forward(float *x, float *sig, const float *b, int n, int c);
/* In place, d ← d ⊙ sig (dL/ds becomes dL/dx');  db[c] += Σ_n d (db may be NULL).
 * sig NULL: d is dL/dx' already (the bf16 filter's product multiplied it as
 * it stored it), only db's sums, in the same blocks (the same bits). */
void pt_ssp_backward(float *d, float *db, const float *sig, int n, int c);

/* Weight-independent edge features, once per batch:
 *   e[k,g] = exp(γ (d_k − μ_g)²),  μ = linspace(0, r_c, G),  γ = −0.5/(μ_1 − μ_0)²
 *   C[k]   = 0.5 (cos(π d_k / r_c) + 1)  for d_k < r_c, else 0  (padding edges). */
void pt_edge_basis_forward(float *e, float *cut, const float *dist, int n_edges,
                           int n_gauss, float cutoff);

/* The filter's cosine cutoff, per filter row (engine/pack/edge_rows.h):
 *   W_u = P_u · C_u    (P = A2 s1 + a2 already holds the bias).
 * w may be p (in place: energy only); the force passes keep P apart because
 * ∂W/∂d needs it (see the section on distance derivatives below). */
void pt_filter_cutoff_forward(float *w, const float *p, const float *cut, int n_rows, int f);

/* Continuous-filter convolution over CSR receivers, with the filter read
 * through the edge → row table (row[k] < 0: edge k carries nothing):
 *   m_i = Σ_{k: dst_k = i, row_k ≥ 0} x[src_k] ⊙ W[row_k]
 * m has n_nodes rows; every row is written.  Implementations (AVX-512,
 * AVX2, generic; same bits) and their bound: engine/model/cfconv_kernels.h. */
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
/* The two over receivers i0 ≤ i < i1 only (m rows i0..i1 written; dx is
 * added to, not zeroed: the caller zeroes it once), for a pass that
 * convolves the batch in pieces as their filter rows are ready
 * (schnet_edges.c).  Consecutive ranges covering 0..n_nodes in ascending
 * order give the bits of the whole-batch call: every sum runs in the same
 * edge order.  ring > 0: dP row u is kept in dp row u mod ring (a window of
 * the rows in flight that stays in cache); 0: in dp row u.
 * The forward's wcut (NULL: w holds W): w holds P = W before the cutoff,
 * and every edge forms W_u = P_u · wcut[u] in registers, rounded once as
 * pt_filter_cutoff_forward rounds it: the same m bits without the cutoff's
 * own pass over the rows, and nothing written to w (schnet_edges.c, fp32:
 * the backward by rows forms W_u from P again, pt_cfconv_backward_rows'
 * pc).  w is read only either way. */
void pt_cfconv_forward_range(float *m, const float *w, const float *wcut, const int32_t *row,
                             const float *x, const int32_t *src, const int32_t *dst_offset,
                             int i0, int i1, int f);
void pt_cfconv_backward_range(float *dx, float *dp, const float *dm, const float *x,
                              const float *w, const float *cut, const int32_t *row,
                              const uint8_t *first, const int32_t *src,
                              const int32_t *dst_offset, int i0, int i1, int f, int32_t ring);
/* One edge of the sender lists as the backward by senders reads it, at the
 * list's position (sr[t] for se[t]): what the kernel would otherwise look
 * up through se[t] → k → row[k], dst[k], first[k] → row_last[u], cut[u]
 * and u % ring, a chain of dependent loads of scattered entries on every
 * edge, now one sequential 16-byte read (docs/performance.md, session 12
 * bwd).  dp: dP's row (u, or u % ring with the ring) in the low 30 bits,
 * the edge's part (PT_SEDGE_*) in the top 2. */
typedef struct pt_cfconv_sedge {
    int32_t row;  /* u: W's row */
    int32_t dst;  /* i: the receiver */
    uint32_t dp;  /* dP's row | part << 30 */
    float cut;    /* C_u */
} pt_cfconv_sedge;
enum {
    PT_SEDGE_WRITE = 0,   /* the row's only edge: dP = (dm_i ⊙ x_j)·C_u */
    PT_SEDGE_ADD = 1,     /* a later edge whose row was written: dP += … */
    PT_SEDGE_DX = 2,      /* the other edge of a row whose first edge comes later: dx only */
    PT_SEDGE_COMBINE = 3, /* a first edge forming both products */
    PT_SEDGE_ROW_BITS = 30
};
/* sr[so[j] .. so[j+1]) for senders 0 ≤ j < n_nodes from the lists of
 * pt_cfconv_senders, the rows, cut and the dP ring (0: none) the backward
 * will use; rows must be below 2^30 (W alone would then exceed 400 GB). */
void pt_cfconv_sender_edges(pt_cfconv_sedge *sr, const int32_t *so, const int32_t *se,
                            const int32_t *row, const uint8_t *first, const int32_t *row_last,
                            const int32_t *dst, const float *cut, int32_t ring, int n_nodes);
/* The backward by senders (the model's for batches pt_cfconv_row_edges
 * refuses; fp32 W and bf16's W̃ rows otherwise walk rows): pt_cfconv_backward_range's
 * results bit for bit
 * (dx added to, dP rows, ring alike) over receivers j0 ≤ i < j1, walking
 * the senders j0 ≤ j < j1 in ascending order with x_j and dx_j in
 * registers instead of adding to dx_j in memory once per edge.  j0 and j1
 * must be boundaries no edge with a row crosses (close[b] == b below), so
 * the range's senders are its receivers.  so / se / close: the lists of
 * pt_cfconv_senders for this batch (built once per batch: every block's
 * backward shares them); row_last: edge_rows.h's last receiver of each
 * row; src, dst, dst_offset: the batch's edges (AVX2 runs the receiver-order
 * kernel on the range: cfconv_avx2.c says why).  dx_j sums its edges in receiver order
 * as before; each dP row still gets (first edge's product) · C_u, then
 * fma(other's product, C_u, ·) — when the other edge comes first in
 * sender order (its sender is the smaller), the first edge forms both
 * products when it comes (cfconv_kernels.h).  sr: the same lists as
 * pt_cfconv_sender_edges made them for this batch, cut and ring (AVX-512
 * reads them instead of se, row, dst, first, row_last and cut). */
void pt_cfconv_backward_senders(float *dx, float *dp, const float *dm, const float *x,
                                const float *w, const float *cut, const int32_t *row,
                                const uint8_t *first, const int32_t *row_last,
                                const int32_t *src, const int32_t *dst,
                                const int32_t *dst_offset, const int32_t *so,
                                const int32_t *se, const pt_cfconv_sedge *sr, int j0,
                                int j1, int f, int32_t ring);
/* The backward by rows: each filter row (a bond, edge_rows.h) once, in
 * ascending order, with both its edges.  Row u's first edge is receiver i,
 * sender j; its other edge, if any, is the reverse (receiver j, sender i):
 *   dx_j += dm_i ⊙ W_u,   dx_i += dm_j ⊙ W_u (with the reverse),
 *   dP_u  = (dm_i ⊙ x_j)·C_u, or fma(dm_j ⊙ x_i, C_u, (dm_i ⊙ x_j)·C_u)
 * (dP as the receiver order forms it: the same bits).  W_u is read once and
 * dP_u written once, in row order (docs/performance.md, session 13 rows).
 * dx_k sums its terms in ascending row order: the receiver order's except
 * where a one-sided row of a truncated neighbour list (or an atom's image)
 * comes later than in receiver order, so dx's bits may differ from
 * pt_cfconv_backward_range's by the reordering of a sum of n terms:
 * |Δ| ≤ 2·γ(n−1)·Σ|dm ⊙ W|, γ(m) = m·2⁻²⁴/(1 − m·2⁻²⁴) (tests/unit/
 * test_cfconv_rows.c checks it).  Same bits whatever the implementation
 * and however the rows are cut into calls. */
typedef struct pt_cfconv_redge {
    int32_t i;     /* the first edge's receiver */
    int32_t j;     /* its sender */
    float cut;     /* C_u */
    uint32_t part; /* PT_REDGE_* */
} pt_cfconv_redge;
enum {
    PT_REDGE_ONE = 0,       /* the row's only edge (j ≠ i) */
    PT_REDGE_BOTH = 1,      /* and its reverse (j ≠ i) */
    PT_REDGE_ONE_SELF = 2,  /* an atom's image alone (j = i) */
    PT_REDGE_BOTH_SELF = 3, /* an atom's two images (i←i and its reverse) */
};
/* re[u] for the rows of a batch's table (edge_rows.h: row, first; src,
 * dst_offset the edges).  Returns 1, or 0 when a row has an edge that is
 * neither its first nor that edge's reverse (duplicate edges: a row of
 * three): then the batch needs the backward by senders. */
int pt_cfconv_row_edges(pt_cfconv_redge *re, const int32_t *row, const uint8_t *first,
                        const int32_t *src, const int32_t *dst_offset, const float *cut,
                        int n_nodes);
/* Rows r0 ≤ u < r1 of the backward by rows: dx added to (the caller zeroes
 * it once), dP_u written at dp row u − r0 (a chunk's scratch), W_u at w
 * row u, or with pc (w holds P, as the forward with wcut leaves it)
 * W_u = P_u · re[u].cut, rounded once as pt_filter_cutoff_forward rounds it
 * (the same bits as on W).  Consecutive calls over ascending ranges give
 * the bits of one call over all rows. */
void pt_cfconv_backward_rows(float *dx, float *dp, const float *dm, const float *x,
                             const float *w, int pc, const pt_cfconv_redge *re, int32_t r0,
                             int32_t r1, int f);
/* Sender lists: the edges with a row (row[k] ≥ 0) of sender j, ascending,
 * are se[so[j] .. so[j+1]) (so: [n_nodes + 1], se: [n_edges]).  close[b]
 * (b ≤ n_nodes; [n_nodes + 1]) is the first node boundary at or after b
 * that no edge with a row crosses (a structure's end at least). */
void pt_cfconv_senders(int32_t *so, int32_t *se, int32_t *close, const int32_t *row,
                       const int32_t *src, const int32_t *dst, int n_nodes, int32_t n_edges);

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

/* An atom head's output (no pooling):
 *   y_i = o_i · std + mean + atomref[z_i]   for real nodes (node_graph ≥ 0), 0 for padding
 * (atomref may be NULL). */
void pt_atom_output_forward(double *y, const float *o, const uint8_t *z,
                            const int32_t *node_graph, const float *atomref, double mean,
                            double std, int n_nodes);
/* do_i = dy_i · std, datomref[z_i] += dy_i (datomref may be NULL); padding
 * nodes get do = 0. */
void pt_atom_output_backward(float *dout, float *datomref, const double *dy,
                             const int32_t *node_graph, const uint8_t *z, double std,
                             int n_nodes);

/* ---- derivatives with respect to the distances -----------------------------
 * Forces and stress come from g_u = ∂Y/∂d_u, the derivative of the summed
 * energy Y = Σ_g y_g with respect to each filter row's distance (one row per
 * bond, engine/pack/edge_rows.h).  Training on them needs ∂L/∂θ of a loss that
 * depends on g: with λ_u = ∂L/∂g_u that is ∂/∂θ (Σ_u λ_u g_u), the parameter
 * gradient of Y's directional derivative along λ.  schnet_forces.c computes
 * it with the ops below; its header states the passes.  Names: ā ("bar") is
 * ∂Y/∂a from the distance backward (seed 1 on every graph), ȧ ("dot") the
 * tangent of a along ḋ = λ, â ("hat") the adjoint of a in the second
 * backward pass, a' the derivative of a row's a in its own distance.
 *
 * The filter W_u is a function of d_u alone, so its tangent is W'_u λ_u with
 *   W'_u = (A2 (σ1 ⊙ (A1 e'_u))) C_u + P_u C'_u
 * independent of λ: the forward pass computes it once (two products), and
 * neither the distance backward nor the tangent pass runs the filter
 * network again:  g_u = Σ_t Σ_{k ∈ u} ⟨m̄[dst_k] ⊙ x[src_k], W'_u⟩.
 *
 * The shifted softplus s = ssp(z), σ = ssp'(z), has σ' = σ(1 − σ), so its
 * second-order term needs no exponential: σ'·ż·s̄ = ṡ·s̄·(1 − σ), ṡ = σ ż. */

/* Weight-independent, per row: the derivatives of the edge basis in d,
 *   de[k,g] = e[k,g] · 2γ (d_k − μ_g)
 *   dcut[k] = −(π / 2r_c) sin(π d_k / r_c)  for d_k < r_c, else 0
 * (e from pt_edge_basis_forward with the same d, G, r_c). */
void pt_edge_basis_deriv(float *de, float *dcut, const float *e, const float *dist, int n_rows,
                         int n_gauss, float cutoff);

/* out[n,c] = in[n,c] · s[n] (out may be in): a row's tangent from its
 * derivative in d (ė = e' λ, ṡ1 = s1' λ). */
void pt_rows_scale(float *out, const float *in, const float *s, int n, int c);

/* z̄ = s̄ ⊙ σ (pt_ssp_backward that keeps s̄). */
void pt_ssp_backward_to(float *dz, const float *ds, const float *sig, int n, int c);
/* In place, ż ← σ ⊙ ż: the tangent (or d-derivative) ṡ of s = ssp(z). */
void pt_ssp_tangent(float *zdot, const float *sig, int n, int c);
/* Second backward of s = ssp(z), ṡ = σ ż, on a pair, in place: on entry
 * hat = ŝ and bar = s̄, on return
 *   hat = ẑ = ŝ ⊙ σ + s̄ ⊙ (1 − σ) ⊙ ṡ,   bar = z̄ = s̄ ⊙ σ,
 * and db[c] += Σ_n ẑ (db may be NULL). */
void pt_ssp_backward2(float *hat, float *bar, float *db, const float *sig, const float *sdot,
                      int n, int c);

/* The d-derivative of W = P · C, in place: wd (holding P') ← W' = P' C + P C'. */
void pt_filter_cutoff_deriv(float *wd, const float *p, const float *cut, const float *dcut,
                            int n_rows, int f);

/* Distance backward of the convolution:
 *   dx[j] = Σ_{k: src_k = j, row_k ≥ 0} dm[dst_k] ⊙ W[row_k]        (written)
 *   g[u] += Σ_{k: row_k = u} ⟨dm[dst_k] ⊙ x[src_k], W'_u⟩           (added) */
void pt_cfconv_backward_dist(float *dx, float *g, const float *dm, const float *x,
                             const float *w, const float *wd, const int32_t *row,
                             const int32_t *src, const int32_t *dst_offset, int n_nodes, int f);

/* Tangent of the convolution along ḋ = λ (xdot NULL: ẋ = 0, the first block):
 *   ṁ_i = Σ_{k: dst_k = i, row_k ≥ 0} ẋ[src_k] ⊙ W[row_k] + x[src_k] ⊙ W'[row_k] λ[row_k] */
void pt_cfconv_tangent(float *mdot, const float *w, const float *wd, const float *lambda,
                       const int32_t *row, const float *x, const float *xdot,
                       const int32_t *src, const int32_t *dst_offset, int n_nodes, int f);
/* Second backward of the convolution and of W = P · C, given m̂ and the
 * distance backward's m̄ (xdot NULL: ẋ = 0), with Ẇ = W' λ, Ċ = C' λ:
 *   x̂_j = Σ_{k: src_k = j} m̂[dst_k] ⊙ W[row_k] + m̄[dst_k] ⊙ Ẇ[row_k]
 *   P̂_u = Σ_{k: row_k = u} (m̂[dst_k] ⊙ x[src_k] + m̄[dst_k] ⊙ ẋ[src_k]) C_u
 *                         + (m̄[dst_k] ⊙ x[src_k]) Ċ_u
 *   P̄_u = Σ_{k: row_k = u} (m̄[dst_k] ⊙ x[src_k]) C_u
 * dxhat is fully written; dphat, dpbar rows by their first edge, as
 * pt_cfconv_backward.  Walks senders (x_j, ẋ_j and x̂_j in registers on
 * AVX-512) with the batch's lists (pt_cfconv_senders: so, se; row_last of
 * edge_rows.h; dst[k] edge k's receiver), the bits of a receiver-order
 * walk (cfconv_kernels.h). */
void pt_cfconv_backward2(float *dxhat, float *dphat, float *dpbar, const float *mhat,
                         const float *mbar, const float *x, const float *xdot, const float *w,
                         const float *wd, const float *lambda, const float *cut,
                         const float *dcut, const int32_t *row, const uint8_t *first,
                         const int32_t *row_last, const int32_t *dst, const int32_t *so,
                         const int32_t *se, int n_nodes, int f);

#endif
