/* cfconv_kernels.c — the continuous-filter convolution of schnet_ops.h
 * (pt_cfconv_forward / _backward and their _range forms): which
 * implementation runs it (policy, the PACKTRAIN_CFCONV override) and the
 * generic loops; see cfconv_kernels.h for the numerics and the bound.  The
 * register-resident kernels are in cfconv_avx512.c and cfconv_avx2.c. */
#include "engine/model/cfconv_kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/simd.h"
#include "engine/model/cfconv_kernels_internal.h"
#include "engine/model/schnet_ops.h"
#include "engine/model/sgemm_kernels.h"   /* the CPU check: pt_sgemm_supported */

/* --- the CPU and the environment, once ------------------------------------- */

static pt_cfconv_impl g_env = PT_CFCONV_AUTO;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static _Atomic int g_forced = PT_CFCONV_AUTO;

static void read_env(void)
{
    const char *e = getenv("PACKTRAIN_CFCONV");
    if (e && !strcmp(e, "generic")) g_env = PT_CFCONV_GENERIC;
    else if (e && !strcmp(e, "avx512")) g_env = PT_CFCONV_AVX512;
    else if (e && !strcmp(e, "avx2")) g_env = PT_CFCONV_AVX2;
}

int pt_cfconv_supported(pt_cfconv_impl impl)
{
    /* the same CPU and OS checks as the sgemm kernels (one place) */
    if (impl == PT_CFCONV_AVX512) return pt_sgemm_supported(PT_SGEMM_AVX512);
    if (impl == PT_CFCONV_AVX2) return pt_sgemm_supported(PT_SGEMM_AVX2);
    return impl == PT_CFCONV_AUTO || impl == PT_CFCONV_GENERIC;
}

pt_cfconv_impl pt_cfconv_choice(void)
{
    pthread_once(&g_once, read_env);
    pt_cfconv_impl want = (pt_cfconv_impl)atomic_load(&g_forced);
    if (want == PT_CFCONV_AUTO) want = g_env;
    if (want != PT_CFCONV_AUTO && pt_cfconv_supported(want)) return want;
    if (pt_cfconv_supported(PT_CFCONV_AVX512)) return PT_CFCONV_AVX512;
    if (pt_cfconv_supported(PT_CFCONV_AVX2)) return PT_CFCONV_AVX2;
    return PT_CFCONV_GENERIC;
}

void pt_cfconv_force(pt_cfconv_impl impl)
{
    atomic_store(&g_forced, (int)impl);
}

const char *pt_cfconv_impl_name(pt_cfconv_impl impl)
{
    static const char *const names[] = {"auto", "generic", "avx512", "avx2"};
    return impl >= PT_CFCONV_AUTO && impl <= PT_CFCONV_AVX2 ? names[impl] : "?";
}

/* --- the generic loops ------------------------------------------------------ */

/* For CPUs without AVX2 + FMA (and as the peer in tests and benches): m_i
 * accumulates in memory, the fused multiply-adds written out (fmaf), so the
 * bits are the kernels' on any target. */
PT_SIMD_CLONES
static void generic_forward(float *m, const float *w, const float *wcut, const int32_t *row,
                            const float *x, const int32_t *src, const int32_t *dst_offset,
                            int i0, int i1, int f)
{
    for (int i = i0; i < i1; i++) {
        float *restrict mi = m + (size_t)i * f;
        memset(mi, 0, (size_t)f * sizeof(float));
        for (int32_t k = dst_offset[i]; k < dst_offset[i + 1]; k++) {
            if (row[k] < 0) continue;
            const float *restrict xj = x + (size_t)src[k] * f;
            const float *restrict wk = w + (size_t)row[k] * f;
            if (wcut) /* w holds P: W = P·C, rounded, then the fma */
                for (int c = 0; c < f; c++) mi[c] = fmaf(xj[c], wk[c] * wcut[row[k]], mi[c]);
            else
                for (int c = 0; c < f; c++) mi[c] = fmaf(xj[c], wk[c], mi[c]);
        }
    }
}

PT_SIMD_CLONES
static void generic_backward(float *dx, float *dp, const float *dm, const float *x,
                             const float *w, const float *cut, const int32_t *row,
                             const uint8_t *first, const int32_t *src,
                             const int32_t *dst_offset, int i0, int i1, int f, int32_t ring)
{
    for (int i = i0; i < i1; i++) {
        const float *restrict dmi = dm + (size_t)i * f;
        for (int32_t k = dst_offset[i]; k < dst_offset[i + 1]; k++) {
            const int32_t u = row[k];
            if (u < 0) continue;
            const float *restrict xj = x + (size_t)src[k] * f;
            float *restrict dxj = dx + (size_t)src[k] * f;
            const float *restrict wu = w + (size_t)u * f;
            float *restrict dpu = dp + (size_t)(ring > 0 ? u % ring : u) * f;
            const float cu = cut[u];
            /* the row's first edge writes its gradient, later ones add */
            if (first[k])
                for (int c = 0; c < f; c++) {
                    dpu[c] = dmi[c] * xj[c] * cu;
                    dxj[c] = fmaf(dmi[c], wu[c], dxj[c]);
                }
            else
                for (int c = 0; c < f; c++) {
                    dpu[c] = fmaf(dmi[c] * xj[c], cu, dpu[c]);
                    dxj[c] = fmaf(dmi[c], wu[c], dxj[c]);
                }
        }
    }
}

/* The backward by senders (cfconv_kernels.h): dx_j accumulates in place
 * over sender j's edges, the fused multiply-adds written out as above.
 * W's rows are fp32 (w) or, for cfconv_bf16.h's scalar path, bf16 (wh,
 * w NULL): chosen once an edge, outside the loops over the row. */
PT_SIMD_CLONES
void pt_cfconv_generic_backward_senders(float *dx, float *dp, const float *dm, const float *x,
                                        const float *w, const pt_bf16 *wh, const float *cut,
                                        const int32_t *row, const uint8_t *first,
                                        const int32_t *row_last, const int32_t *dst,
                                        const int32_t *so, const int32_t *se, int j0, int j1,
                                        int f, int32_t ring)
{
    for (int j = j0; j < j1; j++) {
        const float *restrict xj = x + (size_t)j * f, *restrict dmj = dm + (size_t)j * f;
        float *restrict dxj = dx + (size_t)j * f;
        for (int32_t e = so[j]; e < so[j + 1]; e++) {
            const int32_t k = se[e], u = row[k], i = dst[k];
            const float *restrict dmi = dm + (size_t)i * f, *restrict xi = x + (size_t)i * f;
            float *restrict dpu = dp + (size_t)(ring > 0 ? u % ring : u) * f;
            const float cu = cut[u];
            if (w) {
                const float *restrict wu = w + (size_t)u * f;
                for (int c = 0; c < f; c++) dxj[c] = fmaf(dmi[c], wu[c], dxj[c]);
            } else {
                const pt_bf16 *restrict wu = wh + (size_t)u * f;
                for (int c = 0; c < f; c++) dxj[c] = fmaf(dmi[c], pt_bf16_widen(wu[c]), dxj[c]);
            }
            if (first[k] && row_last[u] == i) /* write */
                for (int c = 0; c < f; c++) dpu[c] = dmi[c] * xj[c] * cu;
            else if (first[k]) /* combine: the other edge's product dm_j ⊙ x_i too */
                for (int c = 0; c < f; c++) dpu[c] = fmaf(dmj[c] * xi[c], cu, dmi[c] * xj[c] * cu);
            else if (j >= i) /* add (an atom's other image) */
                for (int c = 0; c < f; c++) dpu[c] = fmaf(dmi[c] * xj[c], cu, dpu[c]);
            /* else the other edge of a row whose first edge comes later in
             * sender order and forms both products: dx only */
        }
    }
}

/* The backward by rows (schnet_ops.h), dx in memory: per element the
 * first edge's dx_j = fma(dm_i, W, dx_j) and t = (dm_i·x_j)·C, then with
 * the reverse dx_i = fma(dm_j, W, dx_i) and dP = fma(dm_j·x_i, C, t) —
 * receiver order's dP bits; pc: W = P·C from w's P, rounded first.  W's
 * rows are fp32 (wu) or, for cfconv_bf16.h's scalar path, bf16 (whu,
 * widened exactly; bf constant 1, pc 0).  One row: both, pc and bf are
 * constants at every call site, so each use is one straight vector loop;
 * j ≠ i (restrict holds). */
static inline __attribute__((always_inline)) void rows_edge(
    float *restrict dxi, float *restrict dxj, float *restrict dpu, const float *restrict dmi,
    const float *restrict xi, const float *restrict dmj, const float *restrict xj,
    const float *restrict wu, const pt_bf16 *restrict whu, float cu, int f, const int both,
    const int pc, const int bf)
{
    for (int c = 0; c < f; c++) {
        const float t = dmi[c] * xj[c] * cu;
        const float wc = bf ? pt_bf16_widen(whu[c]) : pc ? wu[c] * cu : wu[c];
        dxj[c] = fmaf(dmi[c], wc, dxj[c]);
        if (both) dxi[c] = fmaf(dmj[c], wc, dxi[c]);
        dpu[c] = both ? fmaf(dmj[c] * xi[c], cu, t) : t;
    }
}

/* j = i (an atom's image, alone or both ways): both terms into dx_i, in
 * order; W's rows as in rows_edge */
static inline __attribute__((always_inline)) void rows_self(
    float *restrict dxi, float *restrict dpu, const float *restrict dmi,
    const float *restrict xi, const float *restrict wu, const pt_bf16 *restrict whu, float cu,
    int f, const int both, const int pc, const int bf)
{
    for (int c = 0; c < f; c++) {
        const float t = dmi[c] * xi[c] * cu;
        const float wc = bf ? pt_bf16_widen(whu[c]) : pc ? wu[c] * cu : wu[c];
        dxi[c] = fmaf(dmi[c], wc, dxi[c]);
        if (both) dxi[c] = fmaf(dmi[c], wc, dxi[c]);
        dpu[c] = both ? fmaf(dmi[c] * xi[c], cu, t) : t;
    }
}

/* One row u of the walk with its part's loop; bf and pc constants. */
static inline __attribute__((always_inline)) void rows_row(
    float *dx, float *dpu, const float *dm, const float *x, const float *wu,
    const pt_bf16 *whu, const pt_cfconv_redge *e, int f, const int pc, const int bf)
{
    const float *dmi = dm + (size_t)e->i * f, *xi = x + (size_t)e->i * f;
    const float *dmj = dm + (size_t)e->j * f, *xj = x + (size_t)e->j * f;
    float *dxi = dx + (size_t)e->i * f, *dxj = dx + (size_t)e->j * f;
    const float cu = e->cut;
    switch (e->part) {
    case PT_REDGE_BOTH: rows_edge(dxi, dxj, dpu, dmi, xi, dmj, xj, wu, whu, cu, f, 1, pc, bf); break;
    case PT_REDGE_ONE: rows_edge(dxi, dxj, dpu, dmi, xi, dmj, xj, wu, whu, cu, f, 0, pc, bf); break;
    case PT_REDGE_BOTH_SELF: rows_self(dxi, dpu, dmi, xi, wu, whu, cu, f, 1, pc, bf); break;
    default: rows_self(dxi, dpu, dmi, xi, wu, whu, cu, f, 0, pc, bf); break;
    }
}

PT_SIMD_CLONES
void pt_cfconv_generic_backward_rows(float *dx, float *dp, const float *dm, const float *x,
                                     const float *w, const pt_bf16 *wh, int pc,
                                     const pt_cfconv_redge *re, int32_t r0, int32_t r1, int f)
{
    for (int32_t u = r0; u < r1; u++) {
        float *dpu = dp + (size_t)(u - r0) * f;
        if (!w)
            rows_row(dx, dpu, dm, x, NULL, wh + (size_t)u * f, re + u, f, 0, 1);
        else if (pc)
            rows_row(dx, dpu, dm, x, w + (size_t)u * f, NULL, re + u, f, 1, 0);
        else
            rows_row(dx, dpu, dm, x, w + (size_t)u * f, NULL, re + u, f, 0, 0);
    }
}

/* The force passes' tangent (cfconv_body.h's tan_panel): per element the
 * operations gcc made of the loop it replaced (schnet_ops_forces.c, built
 * with fp-contract=fast): ṁ + fma(ẋ, W, x·(W'·λ)), or fma(x, W'·λ, ṁ). */
PT_SIMD_CLONES
static void generic_tangent(float *mdot, const float *w, const float *wd, const float *lambda,
                            const int32_t *row, const float *x, const float *xdot,
                            const int32_t *src, const int32_t *dst_offset, int i0, int i1, int f)
{
    for (int i = i0; i < i1; i++) {
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
                for (int c = 0; c < f; c++) mi[c] = mi[c] + fmaf(xdj[c], wu[c], xj[c] * (wdu[c] * l));
            } else {
                for (int c = 0; c < f; c++) mi[c] = fmaf(xj[c], wdu[c] * l, mi[c]);
            }
        }
    }
}

/* The force passes' second backward by senders (cfconv_body.h's
 * b2s_panel): per element the operations gcc made of the receiver-order
 * loop it replaced (schnet_ops_forces.c, fp-contract=fast), in sender order
 * with a stash / combine (cfconv_body.h's b2s_panel).  One edge: mode and
 * xdj are constants at every call site, so each use is one straight vector
 * loop (a test inside the loop keeps gcc from vectorising it). */
static inline __attribute__((always_inline)) void b2_edge(
    float *restrict dxj, float *restrict phu, float *restrict pbu, const float *restrict mhi,
    const float *restrict mbi, const float *restrict xj, const float *restrict xdj,
    const float *restrict wu, const float *restrict wdu, float l, float cu, float cd, int f,
    const int mode)
{
    for (int c = 0; c < f; c++) {
        const float t = mbi[c] * xj[c];
        const float sv = xdj ? fmaf(mhi[c], xj[c], xdj[c] * mbi[c]) : mhi[c] * xj[c];
        const float vh = fmaf(sv, cu, t * cd);
        if (mode == 0) { /* write */
            phu[c] = vh;
            pbu[c] = t * cu;
        } else if (mode == 1) { /* add */
            phu[c] = phu[c] + vh;
            pbu[c] = fmaf(t, cu, pbu[c]);
        } else if (mode == 2) { /* stash */
            phu[c] = vh;
            pbu[c] = t;
        } else { /* combine */
            phu[c] = vh + phu[c];
            pbu[c] = fmaf(pbu[c], cu, t * cu);
        }
        dxj[c] = dxj[c] + fmaf(mhi[c], wu[c], mbi[c] * (wdu[c] * l));
    }
}

PT_SIMD_CLONES
static void generic_backward2_senders(float *dxh, float *ph, float *pb, const float *mh,
                                      const float *mb, const float *x, const float *xd,
                                      const float *w, const float *wd, const float *lambda,
                                      const float *cut, const float *dcut, const int32_t *row,
                                      const uint8_t *first, const int32_t *row_last,
                                      const int32_t *dst, const int32_t *so, const int32_t *se,
                                      int j0, int j1, int f)
{
    for (int j = j0; j < j1; j++) {
        const float *xj = x + (size_t)j * f, *xdj = xd ? xd + (size_t)j * f : NULL;
        float *dxj = dxh + (size_t)j * f;
        for (int32_t e = so[j]; e < so[j + 1]; e++) {
            const int32_t k = se[e], u = row[k], i = dst[k];
            const float *mhi = mh + (size_t)i * f, *mbi = mb + (size_t)i * f;
            const float *wu = w + (size_t)u * f, *wdu = wd + (size_t)u * f;
            float *phu = ph + (size_t)u * f, *pbu = pb + (size_t)u * f;
            const float l = lambda[u], cu = cut[u], cd = dcut[u] * l;
            const int mode = first[k] ? (row_last[u] == i ? 0 : 3) : (j < i ? 2 : 1);
#define B2_EDGE(XD, MODE) b2_edge(dxj, phu, pbu, mhi, mbi, xj, XD, wu, wdu, l, cu, cd, f, MODE)
#define B2_MODES(XD)                                                                     \
    switch (mode) {                                                                      \
    case 0: B2_EDGE(XD, 0); break;                                                       \
    case 1: B2_EDGE(XD, 1); break;                                                       \
    case 2: B2_EDGE(XD, 2); break;                                                       \
    default: B2_EDGE(XD, 3); break;                                                      \
    }
            if (xdj) {
                B2_MODES(xdj)
            } else {
                B2_MODES(NULL)
            }
        }
    }
}

/* The force passes' distance backward (cfconv_body.h's dist_panel says how
 * the dot product is formed: the loop it replaced, written out). */
PT_SIMD_CLONES
static void generic_backward_dist(float *dx, float *g, const float *dm, const float *x,
                                  const float *w, const float *wd, const int32_t *row,
                                  const int32_t *src, const int32_t *dst_offset, int n_nodes,
                                  int f)
{
    const int nfull = f / 16, rest = f - 16 * nfull;
    for (int i = 0; i < n_nodes; i++) {
        const float *restrict dmi = dm + (size_t)i * f;
        for (int32_t k = dst_offset[i]; k < dst_offset[i + 1]; k++) {
            const int32_t u = row[k];
            if (u < 0) continue;
            const float *restrict xj = x + (size_t)src[k] * f;
            float *restrict dxj = dx + (size_t)src[k] * f;
            const float *restrict wu = w + (size_t)u * f;
            const float *restrict wdu = wd + (size_t)u * f;
            /* the blocks' dx and partials in one loop of 16 independent
             * lanes (vectorised), the rest after */
            float part[16] = {0};
            int c = 0;
            for (; c < 16 * nfull; c += 16)
                for (int l = 0; l < 16; l++) {
                    part[l] = fmaf(dmi[c + l] * xj[c + l], wdu[c + l], part[l]);
                    dxj[c + l] = fmaf(dmi[c + l], wu[c + l], dxj[c + l]);
                }
            for (int t = c; t < f; t++) dxj[t] = fmaf(dmi[t], wu[t], dxj[t]);
            float s = 0.0f;
            if (rest >= 8)
                for (; c < 16 * nfull + 8; c++) s = s + dmi[c] * xj[c] * wdu[c];
            for (; c < f; c++) s = fmaf(dmi[c] * xj[c], wdu[c], s);
            for (int l = 0; l < 16; l++) s += part[l];
            g[u] = g[u] + s;
        }
    }
}

/* --- schnet_ops.h's entry points -------------------------------------------- */

void pt_cfconv_backward_dist(float *dx, float *g, const float *dm, const float *x,
                             const float *w, const float *wd, const int32_t *row,
                             const int32_t *src, const int32_t *dst_offset, int n_nodes, int f)
{
    memset(dx, 0, (size_t)n_nodes * f * sizeof(float));
    if (pt_cfconv_choice() == PT_CFCONV_AVX512 &&
        pt_cfconv_avx512_backward_dist(dx, g, dm, x, w, wd, row, src, dst_offset, n_nodes, f))
        return;
    generic_backward_dist(dx, g, dm, x, w, wd, row, src, dst_offset, n_nodes, f);
}

void pt_cfconv_backward2(float *dxhat, float *dphat, float *dpbar, const float *mhat,
                         const float *mbar, const float *x, const float *xdot, const float *w,
                         const float *wd, const float *lambda, const float *cut,
                         const float *dcut, const int32_t *row, const uint8_t *first,
                         const int32_t *row_last, const int32_t *dst, const int32_t *so,
                         const int32_t *se, int n_nodes, int f)
{
    memset(dxhat, 0, (size_t)n_nodes * f * sizeof(float));
    if (pt_cfconv_choice() == PT_CFCONV_AVX512)
        pt_cfconv_avx512_backward2_senders(dxhat, dphat, dpbar, mhat, mbar, x, xdot, w, wd,
                                           lambda, cut, dcut, row, first, row_last, dst, so,
                                           se, 0, n_nodes, f);
    else
        generic_backward2_senders(dxhat, dphat, dpbar, mhat, mbar, x, xdot, w, wd, lambda, cut,
                                  dcut, row, first, row_last, dst, so, se, 0, n_nodes, f);
}

void pt_cfconv_tangent(float *mdot, const float *w, const float *wd, const float *lambda,
                       const int32_t *row, const float *x, const float *xdot,
                       const int32_t *src, const int32_t *dst_offset, int n_nodes, int f)
{
    switch (pt_cfconv_choice()) {
    case PT_CFCONV_AVX512:
        pt_cfconv_avx512_tangent(mdot, w, wd, lambda, row, x, xdot, src, dst_offset, 0, n_nodes,
                                 f);
        return;
    case PT_CFCONV_AVX2:
        pt_cfconv_avx2_tangent(mdot, w, wd, lambda, row, x, xdot, src, dst_offset, 0, n_nodes,
                               f);
        return;
    default:
        generic_tangent(mdot, w, wd, lambda, row, x, xdot, src, dst_offset, 0, n_nodes, f);
    }
}

void pt_cfconv_forward_range(float *m, const float *w, const float *wcut, const int32_t *row,
                             const float *x, const int32_t *src, const int32_t *dst_offset,
                             int i0, int i1, int f)
{
    switch (pt_cfconv_choice()) {
    case PT_CFCONV_AVX512:
        pt_cfconv_avx512_forward(m, w, wcut, row, x, src, dst_offset, i0, i1, f);
        return;
    case PT_CFCONV_AVX2:
        pt_cfconv_avx2_forward(m, w, wcut, row, x, src, dst_offset, i0, i1, f);
        return;
    default:
        generic_forward(m, w, wcut, row, x, src, dst_offset, i0, i1, f);
    }
}

void pt_cfconv_backward_range(float *dx, float *dp, const float *dm, const float *x,
                              const float *w, const float *cut, const int32_t *row,
                              const uint8_t *first, const int32_t *src,
                              const int32_t *dst_offset, int i0, int i1, int f, int32_t ring)
{
    switch (pt_cfconv_choice()) {
    case PT_CFCONV_AVX512:
        pt_cfconv_avx512_backward(dx, dp, dm, x, w, cut, row, first, src, dst_offset, i0, i1, f,
                                  ring);
        return;
    case PT_CFCONV_AVX2:
        pt_cfconv_avx2_backward(dx, dp, dm, x, w, cut, row, first, src, dst_offset, i0, i1, f,
                                ring);
        return;
    default:
        generic_backward(dx, dp, dm, x, w, cut, row, first, src, dst_offset, i0, i1, f, ring);
    }
}

void pt_cfconv_forward(float *m, const float *w, const int32_t *row, const float *x,
                       const int32_t *src, const int32_t *dst_offset, int n_nodes, int f)
{
    pt_cfconv_forward_range(m, w, NULL, row, x, src, dst_offset, 0, n_nodes, f);
}

void pt_cfconv_backward(float *dx, float *dp, const float *dm, const float *x, const float *w,
                        const float *cut, const int32_t *row, const uint8_t *first,
                        const int32_t *src, const int32_t *dst_offset, int n_nodes, int f)
{
    memset(dx, 0, (size_t)n_nodes * f * sizeof(float));
    pt_cfconv_backward_range(dx, dp, dm, x, w, cut, row, first, src, dst_offset, 0, n_nodes, f,
                             0);
}

int pt_cfconv_row_edges(pt_cfconv_redge *re, const int32_t *row, const uint8_t *first,
                        const int32_t *src, const int32_t *dst_offset, const float *cut,
                        int n_nodes)
{
    /* a row's first edge comes first in receiver order (edge_rows.h), so
     * its entry is made before any other edge of the row is seen; written
     * in row order (rows are numbered by first use) */
    int simple = 1;
    for (int i = 0; i < n_nodes; i++)
        for (int32_t k = dst_offset[i]; k < dst_offset[i + 1]; k++) {
            const int32_t u = row[k], j = src[k];
            if (u < 0) continue;
            pt_cfconv_redge *e = re + u;
            if (first[k])
                *e = (pt_cfconv_redge){.i = i, .j = j, .cut = cut[u],
                                       .part = j == i ? PT_REDGE_ONE_SELF : PT_REDGE_ONE};
            else if (!(e->part & PT_REDGE_BOTH) && e->i == j && e->j == i)
                e->part |= PT_REDGE_BOTH; /* its reverse */
            else
                simple = 0;
        }
    return simple;
}

void pt_cfconv_backward_rows(float *dx, float *dp, const float *dm, const float *x,
                             const float *w, int pc, const pt_cfconv_redge *re, int32_t r0,
                             int32_t r1, int f)
{
    switch (pt_cfconv_choice()) {
    case PT_CFCONV_AVX512:
        pt_cfconv_avx512_backward_rows(dx, dp, dm, x, w, pc, re, r0, r1, f);
        return;
    case PT_CFCONV_AVX2:
        pt_cfconv_avx2_backward_rows(dx, dp, dm, x, w, pc, re, r0, r1, f);
        return;
    default:
        pt_cfconv_generic_backward_rows(dx, dp, dm, x, w, NULL, pc, re, r0, r1, f);
    }
}

void pt_cfconv_senders(int32_t *so, int32_t *se, int32_t *close, const int32_t *row,
                       const int32_t *src, const int32_t *dst, int n_nodes, int32_t n_edges)
{
    /* one pass over the edges: close counts how many edges cross each
     * boundary (a difference array over the span of each edge), so the
     * list lengths by sender (a counting sort, stable in k) */
    memset(close, 0, (size_t)(n_nodes + 1) * sizeof(int32_t));
    memset(so, 0, (size_t)(n_nodes + 1) * sizeof(int32_t));
    for (int32_t k = 0; k < n_edges; k++) {
        if (row[k] < 0) continue;
        const int32_t s = src[k], d = dst[k];
        so[s + 1]++;
        if (s == d) continue;
        close[(s < d ? s : d) + 1]++;
        close[(s < d ? d : s) + 1]--;
    }
    /* then the next boundary that none crosses */
    for (int b = 0; b < n_nodes; b++) close[b + 1] += close[b];
    for (int b = n_nodes, next = n_nodes; b >= 0; b--) {
        if (close[b] == 0) next = b;
        close[b] = next;
    }
    for (int j = 0; j < n_nodes; j++) so[j + 1] += so[j];
    /* so[j] is now list j's start; filling moves it to list j's end, which
     * is list j + 1's start */
    for (int32_t k = 0; k < n_edges; k++)
        if (row[k] >= 0) se[so[src[k]]++] = k;
    for (int j = n_nodes; j > 0; j--) so[j] = so[j - 1];
    so[0] = 0;
}

/* The parts are the generic loop's branches below, decided once a batch. */
void pt_cfconv_sender_edges(pt_cfconv_sedge *sr, const int32_t *so, const int32_t *se,
                            const int32_t *row, const uint8_t *first, const int32_t *row_last,
                            const int32_t *dst, const float *cut, int32_t ring, int n_nodes)
{
    for (int j = 0; j < n_nodes; j++)
        for (int32_t t = so[j]; t < so[j + 1]; t++) {
            const int32_t k = se[t], u = row[k], i = dst[k];
            const uint32_t part = first[k] ? (row_last[u] == i ? PT_SEDGE_WRITE : PT_SEDGE_COMBINE)
                                           : (j < i ? PT_SEDGE_DX : PT_SEDGE_ADD);
            sr[t] = (pt_cfconv_sedge){.row = u, .dst = i,
                                      .dp = (uint32_t)(ring > 0 ? u % ring : u) |
                                            part << PT_SEDGE_ROW_BITS,
                                      .cut = cut[u]};
        }
}

void pt_cfconv_backward_senders(float *dx, float *dp, const float *dm, const float *x,
                                const float *w, const float *cut, const int32_t *row,
                                const uint8_t *first, const int32_t *row_last,
                                const int32_t *src, const int32_t *dst,
                                const int32_t *dst_offset, const int32_t *so,
                                const int32_t *se, const pt_cfconv_sedge *sr, int j0, int j1,
                                int f, int32_t ring)
{
    switch (pt_cfconv_choice()) {
    case PT_CFCONV_AVX512:
        pt_cfconv_avx512_backward_senders(dx, dp, dm, x, w, so, sr, j0, j1, f);
        return;
    case PT_CFCONV_AVX2:
        /* the receiver-order kernel: the same bits (the range is closed),
         * faster with AVX2's 16 registers (cfconv_avx2.c) */
        pt_cfconv_avx2_backward(dx, dp, dm, x, w, cut, row, first, src, dst_offset, j0, j1, f,
                                ring);
        return;
    default:
        pt_cfconv_generic_backward_senders(dx, dp, dm, x, w, NULL, cut, row, first, row_last,
                                           dst, so, se, j0, j1, f, ring);
    }
}
