/* schnet_ops_forces.c — the ops of the derivatives with respect to the
 * distances (forces, stress, and the parameter gradient of a loss on them):
 * distance backward, tangent and second backward of the basis, the shifted
 * softplus, the cutoff and the convolution.  Equations in schnet_ops.h.
 *
 * Every op here is one pass over its rows or edges, written (restrict
 * pointers, no calls in the inner loops) so that gcc vectorises it, and built
 * for AVX2 and AVX-512 like schnet_ops.c's elementwise ops. */
#pragma GCC optimize("no-trapping-math", "fp-contract=fast")

#include <math.h>
#include <string.h>

#include "engine/model/schnet_ops.h"
#include "engine/model/schnet_ops_internal.h"

/* Lanes of a vectorised dot product: gcc does not reorder a float sum
 * (no -ffast-math), so sums are kept in this many independent partials. */
#define PT_DOT_LANES 16

PT_SIMD_CLONES
void pt_edge_basis_deriv(float *de, float *dcut, const float *e, const float *dist, int n_rows,
                         int n_gauss, float cutoff)
{
    /* μ_g = step·g and γ exactly as pt_edge_basis_forward builds them, so
     * de is the derivative of the e that the forward pass used */
    float step = cutoff / (float)(n_gauss - 1);
    double spacing = (double)step;
    float two_gamma = (float)(2.0 * (-0.5 / (spacing * spacing)));
    for (int k = 0; k < n_rows; k++) {
        const float d = dist[k];
        const float *restrict ek = e + (size_t)k * n_gauss;
        float *restrict dk = de + (size_t)k * n_gauss;
        for (int g = 0; g < n_gauss; g++) dk[g] = ek[g] * two_gamma * (d - step * (float)g);
    }
    /* C'(d) = −(π/2r_c) sin(π x), x = d/r_c: in float, as the forward's C
     * (a double sin per row cost ~8 ns).  sin(π x) = sin(π y) with
     * y = min(x, (r_c − d)/r_c) ≤ ½, y·S(y²) with S a degree-5 minimax fit
     * (relative error 2.1e−11), so C' keeps its relative accuracy at both
     * ends, where it goes to 0. */
    const float k_pi = (float)(-0.5 * 3.14159265358979323846 / (double)cutoff);
    for (int k = 0; k < n_rows; k++) {
        const float d = dist[k];
        float x = d / cutoff, w = (cutoff - d) / cutoff;
        float y = x < w ? x : w;
        float y2 = y * y;
        float sv = 8.204647899e-2f + y2 * -7.022166159e-3f;
        sv = -5.992513299e-1f + y2 * sv;
        sv = 2.550163269f + y2 * sv;
        sv = -5.167712688f + y2 * sv;
        sv = 3.141592741f + y2 * sv;
        dcut[k] = d < cutoff ? k_pi * (y * sv) : 0.0f;
    }
}

PT_SIMD_CLONES
void pt_rows_scale(float *out, const float *in, const float *s, int n, int c)
{
    /* restrict in each branch: one loop on possibly aliased pointers would
     * be versioned by gcc and run scalar in place */
    if (out == in) {
        for (int r = 0; r < n; r++) {
            float *restrict o = out + (size_t)r * c;
            const float v = s[r];
            for (int k = 0; k < c; k++) o[k] *= v;
        }
        return;
    }
    for (int r = 0; r < n; r++) {
        float *restrict o = out + (size_t)r * c;
        const float *restrict i = in + (size_t)r * c;
        const float v = s[r];
        for (int k = 0; k < c; k++) o[k] = i[k] * v;
    }
}

PT_SIMD_CLONES
void pt_ssp_backward_to(float *dz, const float *ds, const float *sig, int n, int c)
{
    const size_t len = (size_t)n * (size_t)c;
    float *restrict o = dz;
    const float *restrict a = ds, *restrict s = sig;
    for (size_t k = 0; k < len; k++) o[k] = a[k] * s[k];
}

PT_SIMD_CLONES
void pt_ssp_tangent(float *zdot, const float *sig, int n, int c)
{
    const size_t len = (size_t)n * (size_t)c;
    float *restrict o = zdot;
    const float *restrict s = sig;
    for (size_t k = 0; k < len; k++) o[k] *= s[k];
}

PT_SIMD_CLONES
void pt_ssp_backward2(float *hat, float *bar, float *db, const float *sig, const float *sdot,
                      int n, int c)
{
    /* in blocks, so the column sums read rows still in cache */
    for (int r0 = 0; r0 < n; r0 += 4 * PT_SUM_BLOCK) {
        int rows = n - r0 < 4 * PT_SUM_BLOCK ? n - r0 : 4 * PT_SUM_BLOCK;
        size_t o = (size_t)r0 * c, len = (size_t)rows * c;
        float *restrict h = hat + o, *restrict b = bar + o;
        const float *restrict s = sig + o, *restrict sd = sdot + o;
        for (size_t k = 0; k < len; k++) {
            float sb = b[k], zb = sb * s[k];
            h[k] = h[k] * s[k] + (sb - zb) * sd[k];
            b[k] = zb;
        }
        if (db) pt_column_sums_add(db, h, rows, c);
    }
}

PT_SIMD_CLONES
void pt_filter_cutoff_deriv(float *wd, const float *p, const float *cut, const float *dcut,
                            int n_rows, int f)
{
    for (int u = 0; u < n_rows; u++) {
        float *restrict wu = wd + (size_t)u * f;
        const float *restrict pu = p + (size_t)u * f;
        const float cu = cut[u], du = dcut[u];
        for (int c = 0; c < f; c++) wu[c] = wu[c] * cu + pu[c] * du;
    }
}

PT_SIMD_CLONES
void pt_cfconv_backward_dist(float *dx, float *g, const float *dm, const float *x,
                             const float *w, const float *wd, const int32_t *row,
                             const int32_t *src, const int32_t *dst_offset, int n_nodes, int f)
{
    memset(dx, 0, (size_t)n_nodes * f * sizeof(float));
    for (int i = 0; i < n_nodes; i++) {
        const float *restrict dmi = dm + (size_t)i * f;
        for (int32_t k = dst_offset[i]; k < dst_offset[i + 1]; k++) {
            const int32_t u = row[k];
            if (u < 0) continue;
            const float *restrict xj = x + (size_t)src[k] * f;
            float *restrict dxj = dx + (size_t)src[k] * f;
            const float *restrict wu = w + (size_t)u * f;
            const float *restrict wdu = wd + (size_t)u * f;
            /* the dot product in PT_DOT_LANES fixed partial sums, added in a
             * fixed order: vectorised, and the same sum for every clone */
            float part[PT_DOT_LANES] = {0};
            int c = 0;
            for (; c + PT_DOT_LANES <= f; c += PT_DOT_LANES)
                for (int l = 0; l < PT_DOT_LANES; l++) {
                    part[l] += dmi[c + l] * xj[c + l] * wdu[c + l];
                    dxj[c + l] += dmi[c + l] * wu[c + l];
                }
            float acc = 0.0f;
            for (; c < f; c++) {
                acc += dmi[c] * xj[c] * wdu[c];
                dxj[c] += dmi[c] * wu[c];
            }
            for (int l = 0; l < PT_DOT_LANES; l++) acc += part[l];
            g[u] += acc;
        }
    }
}

PT_SIMD_CLONES
void pt_cfconv_tangent(float *mdot, const float *w, const float *wd, const float *lambda,
                       const int32_t *row, const float *x, const float *xdot,
                       const int32_t *src, const int32_t *dst_offset, int n_nodes, int f)
{
    for (int i = 0; i < n_nodes; i++) {
        float *restrict mi = mdot + (size_t)i * f;
        memset(mi, 0, (size_t)f * sizeof(float));
        for (int32_t k = dst_offset[i]; k < dst_offset[i + 1]; k++) {
            const int32_t u = row[k];
            if (u < 0) continue;
            const float *restrict xj = x + (size_t)src[k] * f;
            const float *restrict wdu = wd + (size_t)u * f;
            const float l = lambda[u];
            if (xdot) {
                const float *restrict xdj = xdot + (size_t)src[k] * f;
                const float *restrict wu = w + (size_t)u * f;
                for (int c = 0; c < f; c++) mi[c] += xdj[c] * wu[c] + xj[c] * (wdu[c] * l);
            } else {
                for (int c = 0; c < f; c++) mi[c] += xj[c] * (wdu[c] * l);
            }
        }
    }
}

/* One edge of pt_cfconv_backward2; add and xdj are constants at every call
 * site, so each of the four uses compiles to one straight vector loop. */
static inline __attribute__((always_inline)) void backward2_edge(
    float *restrict dxj, float *restrict ph, float *restrict pb, const float *restrict mh,
    const float *restrict mb, const float *restrict xj, const float *restrict xdj,
    const float *restrict wu, const float *restrict wdu, float l, float cu, float cd, int f,
    int add)
{
    for (int c = 0; c < f; c++) {
        float t = mb[c] * xj[c];
        float vh = (xdj ? mh[c] * xj[c] + mb[c] * xdj[c] : mh[c] * xj[c]) * cu + t * cd;
        float vb = t * cu;
        if (add) {
            ph[c] += vh;
            pb[c] += vb;
        } else {
            ph[c] = vh;
            pb[c] = vb;
        }
        dxj[c] += mh[c] * wu[c] + mb[c] * (wdu[c] * l);
    }
}

PT_SIMD_CLONES
void pt_cfconv_backward2(float *dxhat, float *dphat, float *dpbar, const float *mhat,
                         const float *mbar, const float *x, const float *xdot, const float *w,
                         const float *wd, const float *lambda, const float *cut,
                         const float *dcut, const int32_t *row, const uint8_t *first,
                         const int32_t *src, const int32_t *dst_offset, int n_nodes, int f)
{
    memset(dxhat, 0, (size_t)n_nodes * f * sizeof(float));
    for (int i = 0; i < n_nodes; i++) {
        const float *mh = mhat + (size_t)i * f, *mb = mbar + (size_t)i * f;
        for (int32_t k = dst_offset[i]; k < dst_offset[i + 1]; k++) {
            const int32_t u = row[k];
            if (u < 0) continue;
            const size_t j = (size_t)src[k] * f, uf = (size_t)u * f;
            const float l = lambda[u], cu = cut[u], cd = dcut[u] * l;
            float *dxj = dxhat + j, *ph = dphat + uf, *pb = dpbar + uf;
            const float *xj = x + j, *wu = w + uf, *wdu = wd + uf;
            /* the row's first edge writes its gradients, later ones add */
            if (xdot) {
                if (first[k])
                    backward2_edge(dxj, ph, pb, mh, mb, xj, xdot + j, wu, wdu, l, cu, cd, f, 0);
                else
                    backward2_edge(dxj, ph, pb, mh, mb, xj, xdot + j, wu, wdu, l, cu, cd, f, 1);
            } else {
                if (first[k])
                    backward2_edge(dxj, ph, pb, mh, mb, xj, NULL, wu, wdu, l, cu, cd, f, 0);
                else
                    backward2_edge(dxj, ph, pb, mh, mb, xj, NULL, wu, wdu, l, cu, cd, f, 1);
            }
        }
    }
}
