/* ssp_kernels.c — the shifted softplus forward: the scalar reference (the
 * one spelling in ssp_body.h over plain floats; also the kernel of CPUs
 * without AVX2 + FMA), the choice of instruction set, and pt_ssp_forward
 * (schnet_ops.h), which every forward of the model calls (filter, node and
 * output layers, fp32 and the bf16 kernel's fused store). */
#include "engine/model/ssp_kernels.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/model/schnet_ops.h"
#include "engine/model/schnet_ops_internal.h"
#include "engine/model/ssp_table.h"

/* p·2^n with n in big's low bits (ssp_body.h): an integer add to the
 * exponent field, as the vector kernels do it */
static inline float scale_scalar(float p, float big)
{
    uint32_t pb, bb;
    memcpy(&pb, &p, sizeof pb);
    memcpy(&bb, &big, sizeof bb);
    pb += bb << 23;
    memcpy(&p, &pb, sizeof p);
    return p;
}

/* the interval's slot, x's bits >> 22 (as a float's bits, like the vector
 * kernels' keys), and the table entry it picks (ssp_table.h) */
static inline float key_scalar(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    b >>= 22;
    memcpy(&x, &b, sizeof x);
    return x;
}

static inline float lut_scalar(const float *row, float key)
{
    uint32_t b;
    memcpy(&b, &key, sizeof b);
    return row[b & 15u];
}

#define T float
#define VSET1(x) (x)
#define VFMA(a, b, c) fmaf((a), (b), (c))
#define VMUL(a, b) ((a) * (b))
#define VADD(a, b) ((a) + (b))
#define VSUB(a, b) ((a) - (b))
#define VDIV(a, b) ((a) / (b))
#define VMAX(a, b) ((a) > (b) ? (a) : (b))
#define VNEGABS(a) (-fabsf(a))
#define VSCALE(p, big) scale_scalar((p), (big))
#define VSEL_GE0(v, a, b) ((v) >= 0.0f ? (a) : (b))
#define VKEY(x) key_scalar(x)
#define VLUT(row, key) lut_scalar((row), (key))
#define SSP_U 1
#define SSP_FN(name) ssp_scalar_##name
#include "engine/model/ssp_body.h"

static void ssp_scalar(float *x, float *copy, float *sig, size_t len)
{
    for (size_t k = 0; k < len; k++) {
        ssp_scalar_step(x + k, x + k, sig ? sig + k : NULL);
        if (copy) copy[k] = x[k];
    }
}

static void dsig_scalar(float *d, const float *s, size_t len)
{
    for (size_t k = 0; k < len; k++) ssp_scalar_dsig(s + k, d + k);
}

static pt_sgemm_impl widest(pt_sgemm_impl impl)
{
    if (impl != PT_SGEMM_AUTO) return impl;
    return pt_sgemm_supported(PT_SGEMM_AVX512) ? PT_SGEMM_AVX512
           : pt_sgemm_supported(PT_SGEMM_AVX2) ? PT_SGEMM_AVX2
                                               : PT_SGEMM_SCALAR;
}

/* stream: σ through the non-temporal kernels (the scalar one has none);
 * copy (NULL: none, sig then NULL): pt_ssp_forward_copy_run's */
static int run(pt_sgemm_impl impl, float *x, float *copy, float *sig, size_t len, int stream)
{
    impl = widest(impl);
    if (impl == PT_SGEMM_OPENBLAS || !pt_sgemm_supported(impl)) return -1;
    if (impl == PT_SGEMM_AVX512 && copy)
        pt_ssp_avx512_copy_nt(x, copy, len);
    else if (impl == PT_SGEMM_AVX512)
        (stream ? pt_ssp_avx512_nt : pt_ssp_avx512)(x, sig, len);
    else if (impl == PT_SGEMM_AVX2 && copy)
        pt_ssp_avx2_copy_nt(x, copy, len);
    else if (impl == PT_SGEMM_AVX2)
        (stream ? pt_ssp_avx2_nt : pt_ssp_avx2)(x, sig, len);
    else
        ssp_scalar(x, copy, sig, len);
    return 0;
}

int pt_ssp_forward_run(pt_sgemm_impl impl, float *x, float *sig, size_t len)
{
    return run(impl, x, NULL, sig, len, 0);
}

int pt_ssp_forward_stream_run(pt_sgemm_impl impl, float *x, float *sig, size_t len)
{
    return run(impl, x, NULL, sig, len, 1);
}

int pt_ssp_forward_copy_run(pt_sgemm_impl impl, float *x, float *copy, size_t len)
{
    return run(impl, x, copy, NULL, len, 1);
}

int pt_ssp_dsig_run(pt_sgemm_impl impl, float *d, const float *s, size_t len)
{
    impl = widest(impl);
    if (impl == PT_SGEMM_OPENBLAS || !pt_sgemm_supported(impl)) return -1;
    if (impl == PT_SGEMM_AVX512)
        pt_ssp_dsig_avx512(d, s, len);
    else if (impl == PT_SGEMM_AVX2)
        pt_ssp_dsig_avx2(d, s, len);
    else
        dsig_scalar(d, s, len);
    return 0;
}

void pt_ssp_backward_s(float *d, float *db, const float *s, int n, int c)
{
    /* in blocks, so the column sums read rows still in cache (as
     * pt_ssp_backward: the same sums in the same order) */
    for (int r0 = 0; r0 < n; r0 += 4 * PT_SUM_BLOCK) {
        const int rows = n - r0 < 4 * PT_SUM_BLOCK ? n - r0 : 4 * PT_SUM_BLOCK;
        const size_t o = (size_t)r0 * (size_t)c;
        pt_ssp_dsig_run(PT_SGEMM_AUTO, d + o, s + o, (size_t)rows * (size_t)c);
        if (db) pt_column_sums_add(db, d + o, rows, c);
    }
}

void pt_ssp_forward(float *x, float *sig, const float *b, int n, int c)
{
    if (n <= 0 || c <= 0) return;
    if (!b) {
        pt_ssp_forward_run(PT_SGEMM_AUTO, x, sig, (size_t)n * (size_t)c);
        return;
    }
    for (int r = 0; r < n; r++) {
        const size_t o = (size_t)r * (size_t)c;
        for (int k = 0; k < c; k++) x[o + k] += b[k];
        pt_ssp_forward_run(PT_SGEMM_AUTO, x + o, sig ? sig + o : NULL, (size_t)c);
    }
}
