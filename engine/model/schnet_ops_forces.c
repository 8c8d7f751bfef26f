/* schnet_ops_forces.c — the ops of the derivatives with respect to the
 * distances (forces, stress, and the parameter gradient of a loss on them):
 * distance backward, tangent and second backward of the basis, the shifted
 * softplus and the cutoff.  Equations in schnet_ops.h; the convolution's
 * (pt_cfconv_backward_dist, _tangent, _backward2) are in cfconv_kernels.c.
 *
 * Every op here is one pass over its rows or edges, written (restrict
 * pointers, no calls in the inner loops) so that gcc vectorises it, and built
 * for AVX2 and AVX-512 like schnet_ops.c's elementwise ops. */
#pragma GCC optimize("no-trapping-math", "fp-contract=fast")

#include <math.h>
#include <stddef.h>

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

/* pt_cfconv_backward_dist, pt_cfconv_tangent and pt_cfconv_backward2 run on
 * the convolution's kernels (cfconv_kernels.c). */
