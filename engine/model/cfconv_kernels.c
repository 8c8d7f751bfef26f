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
static void generic_forward(float *m, const float *w, const int32_t *row, const float *x,
                            const int32_t *src, const int32_t *dst_offset, int i0, int i1, int f)
{
    for (int i = i0; i < i1; i++) {
        float *restrict mi = m + (size_t)i * f;
        memset(mi, 0, (size_t)f * sizeof(float));
        for (int32_t k = dst_offset[i]; k < dst_offset[i + 1]; k++) {
            if (row[k] < 0) continue;
            const float *restrict xj = x + (size_t)src[k] * f;
            const float *restrict wk = w + (size_t)row[k] * f;
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

/* --- schnet_ops.h's entry points -------------------------------------------- */

void pt_cfconv_forward_range(float *m, const float *w, const int32_t *row, const float *x,
                             const int32_t *src, const int32_t *dst_offset, int i0, int i1,
                             int f)
{
    switch (pt_cfconv_choice()) {
    case PT_CFCONV_AVX512:
        pt_cfconv_avx512_forward(m, w, row, x, src, dst_offset, i0, i1, f);
        return;
    case PT_CFCONV_AVX2:
        pt_cfconv_avx2_forward(m, w, row, x, src, dst_offset, i0, i1, f);
        return;
    default:
        generic_forward(m, w, row, x, src, dst_offset, i0, i1, f);
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
    pt_cfconv_forward_range(m, w, row, x, src, dst_offset, 0, n_nodes, f);
}

void pt_cfconv_backward(float *dx, float *dp, const float *dm, const float *x, const float *w,
                        const float *cut, const int32_t *row, const uint8_t *first,
                        const int32_t *src, const int32_t *dst_offset, int n_nodes, int f)
{
    memset(dx, 0, (size_t)n_nodes * f * sizeof(float));
    pt_cfconv_backward_range(dx, dp, dm, x, w, cut, row, first, src, dst_offset, 0, n_nodes, f,
                             0);
}
