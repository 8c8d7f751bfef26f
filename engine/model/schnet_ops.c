/* schnet_ops.c — SchNet's layers as forward/backward pairs (see schnet_ops.h).
 *
 * Matrix products go to the own kernels or OpenBLAS; everything else is a
 * single pass over the data written so that gcc -O3 vectorises it.  The
 * shifted softplus and the Gaussian basis need exp/log1p on every edge ×
 * filter element (millions per batch): glibc only exposes its vector exp/log
 * to code compiled with -ffast-math, which the project does not use, so the
 * small polynomial kernels below (Cody-Waite reduction with a minimax e^r,
 * a polynomial cosine cutoff) keep those loops vectorised within ~4 u
 * (u = 2^−24; test_schnet_ops_sweep.c).  The softplus has its own kernels
 * (ssp_kernels.c, ssp_body.h: the same e^r, spelled once for every
 * instruction set). */
/* Floating-point traps are never enabled in packtrain; telling gcc so lets it
 * if-convert the selects (clamp, sign of x) in the exp/softplus loops, which it
 * otherwise refuses to vectorise because a speculated multiply "might trap".
 * -std=c11 also turns off fused multiply-add contraction; the polynomials
 * and the segmented sums want it back (one rounding instead of two, half the
 * instructions). */
#pragma GCC optimize("no-trapping-math", "fp-contract=fast")

#include "engine/model/schnet_ops.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/bf16.h"
#include "engine/model/schnet_ops_internal.h"
#include "engine/model/sgemm_kernels.h"

/* exp(−a) for a ≥ 0.  Range reduction a = n ln2 − r with |r| ≤ ln2/2 (ln2 in
 * two parts so n·ln2 is exact), e^r = 1 + r + r²·P(r) with P a degree-4
 * minimax fit (relative error 3.1e−9 on [−ln2/2, ln2/2], a Lawson-weighted
 * least-squares fit: one degree below Cephes' polynomial for the same
 * float accuracy), and n added to its exponent field.  n comes out of
 * the rounding itself: x·log2 e + 1.5·2^23 (one fused multiply-add) holds
 * round(x·log2 e) in its low mantissa bits, so no float→int conversion.
 * a is clamped at 87 so 2^n stays a normal float; e^−87 ≈ 1.6e−38 is 0 for
 * every use here. */
static inline float exp_neg(float a)
{
    const float magic = 12582912.0f;   /* 1.5·2^23, bits 0x4B400000 */
    float x = -(a < 87.0f ? a : 87.0f);
    float big = x * 1.44269504088896341f + magic;
    float fn = big - magic;
    float r = x - fn * 0.693359375f;
    r = r - fn * -2.12194440e-4f;
    float p = 1.381461276e-3f;
    p = p * r + 8.368710056e-3f;
    p = p * r + 4.166838899e-2f;
    p = p * r + 1.666652113e-1f;
    p = p * r + 4.999999404e-1f;
    p = p * r * r + r + 1.0f;
    /* p·2^n as an integer add of n to p's exponent field: the bits of the
     * product (a power-of-two scaling of a normal result is exact) with an
     * integer operation instead of one more on the multiply pipes.  The
     * result stays normal: n = −126 only when x·log2 e < −125.5, and then
     * r > 0.34, so p > 1.4. */
    int32_t bits, pb;
    memcpy(&bits, &big, sizeof bits);
    memcpy(&pb, &p, sizeof pb);
    pb += (int32_t)((uint32_t)(bits - 0x4B400000) << 23);   /* n << 23, n in [−126, 0] */
    memcpy(&p, &pb, sizeof p);
    return p;
}

/* schnet_ops_internal.h */
void pt_bf16_check(int rc, int m, int n, int k)
{
    if (!rc) return;
    fprintf(stderr, "packtrain: %s (%d x %d x %d)\n", pt_bf16_strerror(rc), m, n, k);
    abort();
}

/* Row-major C = op(A)·op(B) + beta·C in the requested arithmetic. */
static void gemm(pt_precision prec, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c,
                 int ldc)
{
    if (prec == PT_PRECISION_BF16) {
        pt_bf16_check(pt_bf16_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc), m, n,
                      k);
        return;
    }
    /* fp32: the model's skinny shapes go to the own kernels where they beat
     * OpenBLAS (engine/model/sgemm_kernels.h), the rest to OpenBLAS */
    if (pt_sgemm_small(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc)) return;
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

void pt_linear_forward(float *out, const float *in, const float *w, const float *b,
                       int n, int in_dim, int out_dim, float beta, pt_precision prec)
{
    if (n <= 0) return;
    /* fp32 on the own kernels: the chains start from the bias, no fill
     * pass; the weight laid out for this call only (pt_sgemm_small_once:
     * a Linear layer's forward runs once an optimizer step) */
    if ((!b || beta == 0.0f) && prec == PT_PRECISION_FP32 &&
        pt_sgemm_small_once(n, out_dim, in_dim, in, in_dim, w, in_dim, beta, b, out, out_dim))
        return;
    /* bf16: the bias is added as C is stored (the same bits), no fill pass */
    if (b && beta == 0.0f && prec == PT_PRECISION_BF16) {
        pt_bf16_check(pt_bf16_sgemm_bias(CblasNoTrans, CblasTrans, n, out_dim, in_dim, 1.0f, in,
                                         in_dim, w, in_dim, b, out, out_dim),
                      n, out_dim, in_dim);
        return;
    }
    if (b) {
        /* the bias rides in C so the product needs no second pass */
        for (int r = 0; r < n; r++) {
            float *row = out + (size_t)r * out_dim;
            if (beta == 0.0f)
                memcpy(row, b, (size_t)out_dim * sizeof(float));
            else
                for (int c = 0; c < out_dim; c++) row[c] = beta * row[c] + b[c];
        }
        beta = 1.0f;
    }
    gemm(prec, CblasNoTrans, CblasTrans, n, out_dim, in_dim, in, in_dim, w, in_dim, beta, out,
         out_dim);
}

void pt_linear_backward_weight(float *dw, float *db, const float *dout, const float *in, int n,
                               int n_bias, int in_dim, int out_dim, pt_precision prec)
{
    if (n <= 0) return;
    gemm(prec, CblasTrans, CblasNoTrans, out_dim, in_dim, n, dout, out_dim, in, in_dim, 1.0f,
         dw, in_dim);
    if (db && n_bias > 0) pt_column_sums_add(db, dout, n_bias, out_dim);
}

void pt_linear_backward_input(float *din, const float *dout, const float *w, int n, int in_dim,
                              int out_dim, float din_beta, pt_precision prec)
{
    if (n <= 0) return;
    gemm(prec, CblasNoTrans, CblasNoTrans, n, in_dim, out_dim, dout, out_dim, w, in_dim, din_beta,
         din, in_dim);
}

void pt_linear_backward(float *din, float *dw, float *db, const float *dout,
                        const float *in, const float *w, int n, int in_dim, int out_dim,
                        float din_beta, pt_precision prec)
{
    pt_linear_backward_weight(dw, db, dout, in, n, n, in_dim, out_dim, prec);
    if (din) pt_linear_backward_input(din, dout, w, n, in_dim, out_dim, din_beta, prec);
}

/* The shifted softplus forward (pt_ssp_forward) is in ssp_kernels.c. */

static inline __attribute__((always_inline)) void mul_rows(float *restrict d,
                                                           const float *restrict sig,
                                                           size_t len)
{
    for (size_t k = 0; k < len; k++) d[k] *= sig[k];
}

PT_SIMD_CLONES
void pt_ssp_backward(float *d, float *db, const float *sig, int n, int c)
{
    /* in blocks, so the column sums read rows still in cache */
    for (int r0 = 0; r0 < n; r0 += 4 * PT_SUM_BLOCK) {
        int rows = n - r0 < 4 * PT_SUM_BLOCK ? n - r0 : 4 * PT_SUM_BLOCK;
        size_t o = (size_t)r0 * c;
        if (sig) mul_rows(d + o, sig + o, (size_t)rows * c);
        if (db) pt_column_sums_add(db, d + o, rows, c);
    }
}

/* C(d) = ½(cos(π d/r_c) + 1) = cos²(π x/2), x = d/r_c, for d < r_c, else 0.
 * In float with polynomials instead of double cos (which took two thirds of
 * the basis' time): C = 1 + Σ a_k x^2k for x ≤ ½ and C = w² Σ b_k w^2k =
 * sin²(π w/2) with w = (r_c − d)/r_c for x > ½ (degree-5 minimax fits in x²
 * and w², relative errors 1.7e−10 and 7.9e−10): near the cutoff C is small
 * and w is formed without cancellation (r_c − d is exact there), so C keeps
 * its relative accuracy all the way to r_c.  C(0) = 1 and C = 0 from r_c on,
 * exactly. */
static inline __attribute__((always_inline)) float cosine_cutoff(float d, float rc)
{
    float x = d / rc, w = (rc - d) / rc;
    float x2 = x * x, w2 = w * w;
    float cx = 1.174651086e-1f + x2 * -1.219115779e-2f;
    cx = -6.676055193e-1f + x2 * cx;
    cx = 2.029354572f + x2 * cx;
    cx = -2.467401028f + x2 * cx;
    cx = 1.0f + x2 * cx;
    float cw = -1.175343320e-1f + w2 * 1.230787858e-2f;
    cw = 6.676195264e-1f + w2 * cw;
    cw = -2.029355764f + w2 * cw;
    cw = 2.467401028f + w2 * cw;
    cw = w2 * cw;
    float c = d <= 0.5f * rc ? cx : cw;
    return d < rc ? c : 0.0f;
}

PT_SIMD_CLONES
void pt_edge_basis_forward(float *e, float *cut, const float *dist, int n_edges,
                           int n_gauss, float cutoff)
{
    /* μ and γ as PyG's GaussianSmearing builds them: linspace in float32, the
     * coefficient from the first spacing. */
    float step = cutoff / (float)(n_gauss - 1);
    double spacing = (double)step;
    float gamma = (float)(-0.5 / (spacing * spacing));
    /* Two passes per block of rows: the differences d − μ_g row by row
     * (cheap, 25 columns), then the exponentials over the block as one flat
     * run — a row of 25 is one full vector plus a remainder, and the
     * remainder's exponentials ran at a fraction of the vector rate. */
    enum { BLOCK = 64 };
    for (int k0 = 0; k0 < n_edges; k0 += BLOCK) {
        const int k1 = k0 + BLOCK < n_edges ? k0 + BLOCK : n_edges;
        for (int k = k0; k < k1; k++) {
            const float d = dist[k];
            float *restrict row = e + (size_t)k * n_gauss;
            for (int g = 0; g < n_gauss; g++) row[g] = d - step * (float)g;
        }
        float *restrict blk = e + (size_t)k0 * n_gauss;
        const size_t len = (size_t)(k1 - k0) * (size_t)n_gauss;
        for (size_t i = 0; i < len; i++) blk[i] = exp_neg(-gamma * blk[i] * blk[i]);
    }
    for (int k = 0; k < n_edges; k++) cut[k] = cosine_cutoff(dist[k], cutoff);
}

/* W_u = P_u · C_u is a row scale; one kernel (pt_rows_scale, with its
 * restrict-per-branch loops) serves the energy and the force passes. */
void pt_filter_cutoff_forward(float *w, const float *p, const float *cut, int n_rows, int f)
{
    pt_rows_scale(w, p, cut, n_rows, f);
}

/* The convolution (pt_cfconv_*) is in cfconv_kernels.c. */

void pt_embedding_forward(float *h, const float *table, const uint8_t *z, int n, int dim)
{
    for (int i = 0; i < n; i++)
        memcpy(h + (size_t)i * dim, table + (size_t)z[i] * dim, (size_t)dim * sizeof(float));
}

void pt_embedding_backward(float *dtable, const float *dh, const uint8_t *z, int n, int dim)
{
    for (int i = 0; i < n; i++) {
        if (z[i] == 0) continue;
        float *restrict row = dtable + (size_t)z[i] * dim;
        const float *restrict g = dh + (size_t)i * dim;
        for (int c = 0; c < dim; c++) row[c] += g[c];
    }
}

void pt_readout_forward(double *y, int32_t *count, const float *o, const uint8_t *z,
                        const int32_t *node_graph, const float *atomref, double mean,
                        double std, pt_readout mode, int n_nodes, int n_graphs)
{
    for (int g = 0; g < n_graphs; g++) {
        y[g] = 0.0;
        count[g] = 0;
    }
    for (int i = 0; i < n_nodes; i++) {
        int32_t g = node_graph[i];
        if (g < 0) continue;
        double v = (double)o[i] * std + mean;
        if (atomref) v += (double)atomref[z[i]];
        y[g] += v;
        count[g]++;
    }
    if (mode == PT_READOUT_MEAN)
        for (int g = 0; g < n_graphs; g++)
            if (count[g] > 0) y[g] /= (double)count[g];
}

void pt_atom_output_forward(double *y, const float *o, const uint8_t *z,
                            const int32_t *node_graph, const float *atomref, double mean,
                            double std, int n_nodes)
{
    for (int i = 0; i < n_nodes; i++) {
        if (node_graph[i] < 0) {
            y[i] = 0.0;
            continue;
        }
        y[i] = (double)o[i] * std + mean + (atomref ? (double)atomref[z[i]] : 0.0);
    }
}

void pt_atom_output_backward(float *dout, float *datomref, const double *dy,
                             const int32_t *node_graph, const uint8_t *z, double std,
                             int n_nodes)
{
    for (int i = 0; i < n_nodes; i++) {
        if (node_graph[i] < 0) {
            dout[i] = 0.0f;
            continue;
        }
        dout[i] = (float)(dy[i] * std);
        if (datomref) datomref[z[i]] += (float)dy[i];
    }
}

void pt_readout_backward(float *dout, float *datomref, const double *dy, const int32_t *count,
                         const uint8_t *z, const int32_t *node_graph, double std,
                         pt_readout mode, int n_nodes)
{
    for (int i = 0; i < n_nodes; i++) {
        int32_t g = node_graph[i];
        if (g < 0) {
            dout[i] = 0.0f;
            continue;
        }
        double d = mode == PT_READOUT_MEAN ? dy[g] / (double)count[g] : dy[g];
        dout[i] = (float)(d * std);
        if (datomref) datomref[z[i]] += (float)d;
    }
}
