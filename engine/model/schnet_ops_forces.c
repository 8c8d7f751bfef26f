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
    const double pi = 3.14159265358979323846, rc = (double)cutoff;
    for (int k = 0; k < n_rows; k++) {
        double d = (double)dist[k];
        dcut[k] = d < rc ? (float)(-0.5 * pi / rc * sin(pi * d / rc)) : 0.0f;
    }
}

PT_SIMD_CLONES
void pt_edge_basis_tangent(float *edot, float *cdot, const float *de, const float *dcut,
                           const float *lambda, int n_rows, int n_gauss)
{
    for (int k = 0; k < n_rows; k++) {
        const float l = lambda[k];
        const float *restrict dk = de + (size_t)k * n_gauss;
        float *restrict ok = edot + (size_t)k * n_gauss;
        for (int g = 0; g < n_gauss; g++) ok[g] = dk[g] * l;
        cdot[k] = dcut[k] * l;
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
void pt_ssp_backward2(float *dz, float *db, const float *sig, const float *sbar,
                      const float *zbar, const float *sdot, int n, int c)
{
    /* in blocks, so the column sums read rows still in cache */
    for (int r0 = 0; r0 < n; r0 += 4 * PT_SUM_BLOCK) {
        int rows = n - r0 < 4 * PT_SUM_BLOCK ? n - r0 : 4 * PT_SUM_BLOCK;
        size_t o = (size_t)r0 * c, len = (size_t)rows * c;
        float *restrict d = dz + o;
        const float *restrict s = sig + o, *restrict sb = sbar + o, *restrict zb = zbar + o,
                              *restrict sd = sdot + o;
        for (size_t k = 0; k < len; k++) d[k] = d[k] * s[k] + (sb[k] - zb[k]) * sd[k];
        if (db) pt_column_sums_add(db, d, rows, c);
    }
}

PT_SIMD_CLONES
void pt_filter_cutoff_tangent(float *wdot, const float *p, const float *cut, const float *cdot,
                              int n_rows, int f)
{
    for (int u = 0; u < n_rows; u++) {
        float *restrict wu = wdot + (size_t)u * f;
        const float *restrict pu = p + (size_t)u * f;
        const float cu = cut[u], du = cdot[u];
        for (int c = 0; c < f; c++) wu[c] = wu[c] * cu + pu[c] * du;
    }
}

PT_SIMD_CLONES
void pt_cfconv_backward_dist(float *dx, float *dp, float *cbar, const float *dm, const float *x,
                             const float *w, const float *p, const float *cut,
                             const int32_t *row, const uint8_t *first, const int32_t *src,
                             const int32_t *dst_offset, int n_nodes, int f)
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
            const float *restrict pu = p + (size_t)u * f;
            float *restrict dpu = dp + (size_t)u * f;
            const float cu = cut[u];
            float cb = 0.0f;
            /* the row's first edge writes its gradient, later ones add */
            if (first[k])
                for (int c = 0; c < f; c++) {
                    float t = dmi[c] * xj[c];
                    dpu[c] = t * cu;
                    cb += t * pu[c];
                }
            else
                for (int c = 0; c < f; c++) {
                    float t = dmi[c] * xj[c];
                    dpu[c] += t * cu;
                    cb += t * pu[c];
                }
            cbar[u] += cb;
            for (int c = 0; c < f; c++) dxj[c] += dmi[c] * wu[c];
        }
    }
}

PT_SIMD_CLONES
void pt_dist_grad(float *g, const float *ebar, const float *de, const float *cbar,
                  const float *dcut, int n_rows, int n_gauss)
{
    for (int u = 0; u < n_rows; u++) {
        const float *restrict eb = ebar + (size_t)u * n_gauss;
        const float *restrict d = de + (size_t)u * n_gauss;
        float s = 0.0f;
        for (int k = 0; k < n_gauss; k++) s += eb[k] * d[k];
        g[u] = s + cbar[u] * dcut[u];
    }
}

PT_SIMD_CLONES
void pt_cfconv_tangent(float *mdot, const float *w, const float *wdot, const int32_t *row,
                       const float *x, const float *xdot, const int32_t *src,
                       const int32_t *dst_offset, int n_nodes, int f)
{
    for (int i = 0; i < n_nodes; i++) {
        float *restrict mi = mdot + (size_t)i * f;
        memset(mi, 0, (size_t)f * sizeof(float));
        for (int32_t k = dst_offset[i]; k < dst_offset[i + 1]; k++) {
            const int32_t u = row[k];
            if (u < 0) continue;
            const float *restrict xj = x + (size_t)src[k] * f;
            const float *restrict wdu = wdot + (size_t)u * f;
            if (xdot) {
                const float *restrict xdj = xdot + (size_t)src[k] * f;
                const float *restrict wu = w + (size_t)u * f;
                for (int c = 0; c < f; c++) mi[c] += xdj[c] * wu[c] + xj[c] * wdu[c];
            } else {
                for (int c = 0; c < f; c++) mi[c] += xj[c] * wdu[c];
            }
        }
    }
}

PT_SIMD_CLONES
void pt_cfconv_backward2(float *dxhat, float *dphat, const float *mhat, const float *mbar,
                         const float *x, const float *xdot, const float *w, const float *wdot,
                         const float *cut, const float *cdot, const int32_t *row,
                         const uint8_t *first, const int32_t *src, const int32_t *dst_offset,
                         int n_nodes, int f)
{
    memset(dxhat, 0, (size_t)n_nodes * f * sizeof(float));
    for (int i = 0; i < n_nodes; i++) {
        const float *restrict mh = mhat + (size_t)i * f;
        const float *restrict mb = mbar + (size_t)i * f;
        for (int32_t k = dst_offset[i]; k < dst_offset[i + 1]; k++) {
            const int32_t u = row[k];
            if (u < 0) continue;
            const int32_t j = src[k];
            const float *restrict xj = x + (size_t)j * f;
            float *restrict dxj = dxhat + (size_t)j * f;
            const float *restrict wu = w + (size_t)u * f;
            const float *restrict wdu = wdot + (size_t)u * f;
            float *restrict dpu = dphat + (size_t)u * f;
            const float cu = cut[u], cd = cdot[u];
            const int add = !first[k];
            if (xdot) {
                const float *restrict xdj = xdot + (size_t)j * f;
                for (int c = 0; c < f; c++) {
                    float v = (mh[c] * xj[c] + mb[c] * xdj[c]) * cu + mb[c] * xj[c] * cd;
                    dpu[c] = add ? dpu[c] + v : v;
                }
            } else {
                for (int c = 0; c < f; c++) {
                    float v = mh[c] * xj[c] * cu + mb[c] * xj[c] * cd;
                    dpu[c] = add ? dpu[c] + v : v;
                }
            }
            for (int c = 0; c < f; c++) dxj[c] += mh[c] * wu[c] + mb[c] * wdu[c];
        }
    }
}
