/* sgemm_kernels.c — which implementation runs an fp32 product of the model
 * (policy, CPU check, the PACKTRAIN_SGEMM override), the NT layout's
 * transpose, and the scalar reference; see sgemm_kernels.h.  The vector
 * kernels are in sgemm_avx512.c and sgemm_avx2.c. */
#include "engine/model/sgemm_kernels.h"

#include <cpuid.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/model/bf16.h"   /* pt_cpu_features: AVX-512F and its OS support */
#include "engine/model/sgemm_kernels_internal.h"

/* --- the CPU and the environment, once ------------------------------------- */

static int g_avx512, g_avx2, g_blas_avx512;
static pt_sgemm_impl g_env = PT_SGEMM_AUTO;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static _Atomic int g_forced = PT_SGEMM_AUTO;

/* XCR0 bits 1 and 2: the OS saves SSE and AVX (ymm) state. */
#define XCR0_AVX 0x6u

static void detect(void)
{
    pt_cpu_features f;
    pt_cpu_features_get(&f);
    g_avx512 = f.avx512f && f.os_avx512;
    unsigned a, b, c, d, os_avx = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) && (c >> 27 & 1u)) {   /* OSXSAVE */
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        os_avx = (lo & XCR0_AVX) == XCR0_AVX;
    }
    int fma = __get_cpuid(1, &a, &b, &c, &d) && (c >> 12 & 1u);
    int avx2 = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 5 & 1u);
    g_avx2 = os_avx && fma && avx2;
    /* OpenBLAS's kernel set (OPENBLAS_CORETYPE or its own detection) */
    static const char *const blas512[] = {"skylakex", "cooperlake", "sapphirerapids"};
    const char *core = openblas_get_corename();
    for (size_t i = 0; core && i < sizeof blas512 / sizeof blas512[0]; i++)
        if (!strcasecmp(core, blas512[i])) g_blas_avx512 = 1;
    const char *e = getenv("PACKTRAIN_SGEMM");
    if (e && !strcmp(e, "openblas")) g_env = PT_SGEMM_OPENBLAS;
    else if (e && !strcmp(e, "avx512")) g_env = PT_SGEMM_AVX512;
    else if (e && !strcmp(e, "avx2")) g_env = PT_SGEMM_AVX2;
}

int pt_sgemm_supported(pt_sgemm_impl impl)
{
    pthread_once(&g_once, detect);
    if (impl == PT_SGEMM_AVX512) return g_avx512;
    if (impl == PT_SGEMM_AVX2) return g_avx2;
    return impl >= PT_SGEMM_AUTO && impl <= PT_SGEMM_SCALAR;
}

int pt_sgemm_openblas_avx512(void)
{
    pthread_once(&g_once, detect);
    return g_blas_avx512;
}

const char *pt_sgemm_impl_name(pt_sgemm_impl impl)
{
    static const char *const names[] = {"auto", "openblas", "avx512", "avx2", "scalar"};
    return impl >= PT_SGEMM_AUTO && impl <= PT_SGEMM_SCALAR ? names[impl] : "?";
}

void pt_sgemm_force(pt_sgemm_impl impl)
{
    atomic_store(&g_forced, (int)impl);
}

/* --- shapes ---------------------------------------------------------------- */

/* 1 when the layout is NT, NN or TN and the sizes and leading dimensions are
 * what the own kernels take. */
static int shape_ok(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, int lda,
                    int ldb, int ldc)
{
    if (m <= 0 || n <= 0 || k < 0 || n > PT_SGEMM_MAX_DIM || ldc < n) return 0;
    if (ta == CblasNoTrans && tb == CblasTrans)      /* NT: A[m,k], B[n,k] */
        return k <= PT_SGEMM_MAX_DIM && lda >= k && ldb >= k;
    if (ta == CblasNoTrans && tb == CblasNoTrans)    /* NN: A[m,k], B[k,n] */
        return k <= PT_SGEMM_MAX_DIM && lda >= k && ldb >= n;
    if (ta == CblasTrans && tb == CblasNoTrans)      /* TN: A[k,m], B[k,n] */
        return m <= PT_SGEMM_MAX_DIM && lda >= m && ldb >= n;
    return 0;
}

pt_sgemm_impl pt_sgemm_choice(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k)
{
    pthread_once(&g_once, detect);
    pt_sgemm_impl want = (pt_sgemm_impl)atomic_load(&g_forced);
    if (want == PT_SGEMM_AUTO) want = g_env;
    if (want == PT_SGEMM_OPENBLAS) return PT_SGEMM_OPENBLAS;
    int lda = ta == CblasTrans ? m : k, ldb = tb == CblasTrans ? k : n;
    if (!shape_ok(ta, tb, m, n, k, lda, ldb, n)) return PT_SGEMM_OPENBLAS;
    if (want != PT_SGEMM_AUTO && pt_sgemm_supported(want)) return want;
    /* the policy: narrow rows (a readout column) leave most lanes empty;
     * the own AVX-512 kernel beats OpenBLAS's AVX-512 sets too (SkylakeX
     * 202 against 222 GF/s step-weighted, docs/performance.md), and gives
     * the same bits whatever kernel set OpenBLAS runs */
    if (n < 16) return PT_SGEMM_OPENBLAS;
    if (g_avx512) return PT_SGEMM_AVX512;
    if (g_avx2 && !g_blas_avx512) return PT_SGEMM_AVX2;
    return PT_SGEMM_OPENBLAS;
}

/* --- the scalar reference -------------------------------------------------- */

static void scalar(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const float *a,
                   int lda, const float *b, int ldb, float beta, const float *bias, float *c,
                   int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float *cp = c + (long)i * ldc + j;
            float acc = bias ? bias[j] : beta == 0.0f ? 0.0f : beta == 1.0f ? *cp : beta * *cp;
            for (int p = 0; p < k; p++) {
                float x = ta == CblasTrans ? a[(long)p * lda + i] : a[(long)i * lda + p];
                float y = tb == CblasTrans ? b[(long)j * ldb + p] : b[(long)p * ldb + j];
                acc = fmaf(x, y, acc);
            }
            *cp = acc;
        }
}

/* --- dispatch -------------------------------------------------------------- */

/* NN's B copied with rows 64-byte aligned (stride a multiple of 16 floats),
 * per thread so that replicas never share it.  Unaligned rows (a 100-float
 * row starts 16 bytes off a cache line) make most vector loads split two
 * lines.  (TN reads its B in place: there B is the long operand, the copy
 * cost more than the split loads, with B's vectors held in registers.) */
static _Thread_local float bpack[PT_SGEMM_MAX_DIM * PT_SGEMM_MAX_DIM]
    __attribute__((aligned(64)));

/* op(B) (NT: B[n,k] of row stride ldb transposed; NN: B[k,n] copied) into
 * dst with rows of ldp floats.  The transpose in 16 x 16 blocks in
 * registers for the AVX-512 kernel (the same values; session 11: QM9 node
 * forward products 44-46 -> 42-43 us in the step). */
static void lay_out(int avx512, int trans, const float *b, int n, int k, int ldb, float *dst,
                    int ldp)
{
    if (trans && avx512)
        pt_sgemm_avx512_transpose(n, k, b, ldb, dst, ldp);
    else if (trans)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++) dst[p * ldp + j] = b[(long)j * ldb + p];
    else
        for (int p = 0; p < k; p++) memcpy(dst + (long)p * ldp, b + (long)p * ldb, sizeof(float) * n);
}

/* A weight's op(B) laid out as NN's B is (rows of k, stride ldp), cached:
 * the filter network runs the same two weights over every 256-row chunk of
 * a batch (schnet_filter.c), and the scalar transpose of a 100 × 100 weight
 * took ≈ 3 µs against ≈ 22 µs for a chunk's product.  NT's B is kept
 * transposed (every NT product goes through the cache); NN's copy only for
 * products that name their B a weight (pt_sgemm_small_weight: dS1's A2),
 * the others copy it into bpack.  An entry is reused only when the weight
 * is bit for bit the one it was made from (memcmp against the entry's
 * copy: the optimizer updates weights in place, at the same address), so a
 * hit gives exactly what a fresh layout would — or, for a product that
 * says its weight is held, when the entry was compared (or made) on this
 * thread since the thread's last pt_sgemm_weights_hold(): the comparison
 * (40 KB a 100 × 100 weight) is then paid on a pass's first chunk only. */
typedef struct w_entry {
    float packed[PT_SGEMM_MAX_DIM * PT_SGEMM_MAX_DIM] __attribute__((aligned(64)));
    float src[PT_SGEMM_MAX_DIM * PT_SGEMM_MAX_DIM];   /* B as it was, rows of width */
    const float *b;
    int n, k, ldb, trans, valid;
    unsigned long used, held;   /* last use (LRU), the hold it was last compared in */
} w_entry;
/* a block's forward A1, A2 (NT) and backward A2 (NN) */
#define W_ENTRIES 3
static _Thread_local w_entry w_cache[W_ENTRIES];
static _Thread_local unsigned long w_clock, w_hold;

void pt_sgemm_weights_hold(void)
{
    w_hold++;
}

/* op(B) (NT: B[n,k] of row stride ldb transposed; NN: B[k,n] copied) with
 * rows of ldp floats: a cached entry, laid out now if the weight changed
 * or is not in the cache.  held: the caller promises B is unchanged since
 * this thread's current hold began; avx512: the product runs the AVX-512
 * kernel (so the CPU has it). */
static const float *w_packed(int avx512, int trans, const float *b, int n, int k, int ldb,
                             int ldp, int held)
{
    const int rows = trans ? n : k, width = trans ? k : n;
    w_entry *e = NULL, *old = &w_cache[0];
    for (int i = 0; i < W_ENTRIES; i++) {
        w_entry *x = &w_cache[i];
        if (x->valid && x->b == b && x->n == n && x->k == k && x->ldb == ldb &&
            x->trans == trans) {
            e = x;
            break;
        }
        if (!x->valid || x->used < old->used) old = x;
    }
    w_clock++;
    if (e && held && w_hold && e->held == w_hold) {
        e->used = w_clock;
        return e->packed;
    }
    int same = e != NULL;
    for (int r = 0; r < rows && same; r++)
        same = !memcmp(e->src + (long)r * width, b + (long)r * ldb, sizeof(float) * width);
    if (!e) e = old;
    e->used = w_clock;
    e->held = w_hold;
    if (same) return e->packed;
    for (int r = 0; r < rows; r++)
        memcpy(e->src + (long)r * width, b + (long)r * ldb, sizeof(float) * width);
    lay_out(avx512, trans, b, n, k, ldb, e->packed, ldp);
    e->b = b;
    e->n = n;
    e->k = k;
    e->ldb = ldb;
    e->trans = trans;
    e->valid = 1;
    return e->packed;
}

/* C transposed, for narrow weight gradients (below); a bias padded to whole
 * vectors. */
static _Thread_local float ct[PT_SGEMM_MAX_DIM * PT_SGEMM_MAX_DIM];
static _Thread_local float biaspad[PT_SGEMM_MAX_DIM] __attribute__((aligned(64)));

/* bias: NULL, or (NT/NN only) the row every chain starts from instead of C */
/* The regions the thread's next product prefetches (pt_sgemm_prefetch). */
static _Thread_local pt_sgemm_pf pf_next;

/* [p, p + bytes) as pf's next region, in whole lines (the caller checks
 * there is room) */
static void pf_add(pt_sgemm_pf *pf, const void *p, size_t bytes)
{
    const uintptr_t lo = (uintptr_t)p & ~(uintptr_t)63, hi = (uintptr_t)p + bytes;
    pf->p[pf->n] = (const char *)lo;
    pf->left[pf->n] = (long)((hi - lo + 63) / 64);
    pf->lines += pf->left[pf->n];
    pf->n++;
}

void pt_sgemm_prefetch(const void *p, size_t bytes)
{
    if (!p || !bytes || pf_next.n == PT_SGEMM_PF_MAX) return;
    pf_add(&pf_next, p, bytes);
}

long pt_sgemm_prefetch_pending(void)
{
    return pf_next.lines;
}

/* the pending regions, taken by a product (NULL: none) */
static pt_sgemm_pf *pf_take(pt_sgemm_pf *mine)
{
    if (!pf_next.n) return NULL;
    *mine = pf_next;
    memset(&pf_next, 0, sizeof pf_next);
    return mine;
}

/* weight: 0 for plain products, 1 when B is a weight to cache (NN too),
 * 2 when it is also held (pt_sgemm_small_weight), W_ONCE when it is a
 * weight read once (pt_sgemm_small_once: laid out in bpack, not cached) */
#define W_ONCE 3
static void run_vec(int avx512, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k,
                    const float *a, int lda, const float *b, int ldb, float beta,
                    const float *bias, float *c, int ldc, int weight)
{
    pt_sgemm_pf own, *pf = pf_take(&own);
    if (k == 0) {   /* no products: C = beta C (or the bias), as cblas_sgemm does */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                float *cp = c + (long)i * ldc + j;
                *cp = bias ? bias[j] : beta == 0.0f ? 0.0f : beta == 1.0f ? *cp : beta * *cp;
            }
        return;
    }
    if (ta == CblasTrans && n < 64 && m >= 64) {
        /* a narrow weight gradient (100 x 25) fills few lanes per row of C:
         * compute its transpose Cᵀ[n,m] = Bᵀ A instead (same products, same
         * order per element, so the same bits) and transpose back */
        if (pf) pf_next = *pf; /* for the product below */
        if (avx512) { /* (beta = 0 reads no C: nothing to transpose in) */
            if (beta != 0.0f) pt_sgemm_avx512_transpose(m, n, c, ldc, ct, m);
            run_vec(avx512, CblasTrans, CblasNoTrans, n, m, k, b, ldb, a, lda, beta, NULL, ct, m,
                    0);
            pt_sgemm_avx512_transpose(n, m, ct, m, c, ldc);
            return;
        }
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) ct[(long)j * m + i] = c[(long)i * ldc + j];
        run_vec(avx512, CblasTrans, CblasNoTrans, n, m, k, b, ldb, a, lda, beta, NULL, ct, m, 0);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) c[(long)i * ldc + j] = ct[(long)j * m + i];
        return;
    }
    const int ldp = (n + 15) & ~15;
    if (ta == CblasTrans) {
        const int passes = (k + PT_SGEMM_KC - 1) / PT_SGEMM_KC;
        const long total = pf ? pf->lines : 0;
        /* a weight gradient over more rows than L2 kept (a node layer's
         * after the edge pipeline, water's 8 packs: u, m, h_t 451 KB)
         * fetches each next pass's rows of A and B while this pass's tiles
         * run, kept in cache (prefetcht0); not when the caller gave regions
         * (the filter's chunks), nor for operands L2 holds */
        const int ahead =
            !pf && (size_t)k * (size_t)ldb * sizeof(float) >= PT_SGEMM_AHEAD_A_BYTES;
        for (int r0 = 0, i = 1; r0 < k; r0 += PT_SGEMM_KC, i++) {
            int kc = k - r0 < PT_SGEMM_KC ? k - r0 : PT_SGEMM_KC;
            if (pf) /* an even share of the lines per pass */
                pf->lines = (total * i + passes - 1) / passes -
                            (total * (i - 1) + passes - 1) / passes;
            pt_sgemm_pf next, *use = pf;
            if (ahead && r0 + kc < k) {
                const int kc2 = k - r0 - kc < PT_SGEMM_KC ? k - r0 - kc : PT_SGEMM_KC;
                memset(&next, 0, sizeof next);
                next.keep = 1;
                pf_add(&next, a + (long)(r0 + kc) * lda, (size_t)kc2 * lda * sizeof(float));
                pf_add(&next, b + (long)(r0 + kc) * ldb, (size_t)kc2 * ldb * sizeof(float));
                use = &next;
            }
            (avx512 ? pt_sgemm_avx512_tn : pt_sgemm_avx2_tn)(m, n, kc, a + (long)r0 * lda, lda,
                                                             b + (long)r0 * ldb, ldb,
                                                             r0 == 0 ? beta : 1.0f, c, ldc, use);
        }
        return;
    }
    const float *bp = bpack;
    if (weight == W_ONCE || (!weight && tb != CblasTrans))
        lay_out(avx512, tb == CblasTrans, b, n, k, ldb, bpack, ldp);
    else
        bp = w_packed(avx512, tb == CblasTrans, b, n, k, ldb, ldp, weight == 2);
    if (bias) {
        memcpy(biaspad, bias, sizeof(float) * n);
        bias = biaspad;
    }
    /* the next tile's rows fetched ahead where they come from L3 or memory:
     * C's rows of an accumulating NN (the node input gradient dh += dx W1ᵀ:
     * dh last touched before the edge pipeline), and a node layer's input
     * rows in its one forward when they are too many for L2 to have kept
     * (m after the convolution, water's 8 packs: 451 KB); from L3 (2 packs:
     * 113 KB) out-of-order execution covers A's loads and the fetch cost
     * the forwards 1-4%.  Not the filter's products (no bias-less
     * accumulating NN; their chunk is fetched by pt_sgemm_prefetch). */
    const int ahead =
        (beta != 0.0f && !bias ? PT_SGEMM_AHEAD_START : 0) |
        (weight == W_ONCE && (size_t)m * (size_t)lda * sizeof(float) >= PT_SGEMM_AHEAD_A_BYTES
             ? PT_SGEMM_AHEAD_A
             : 0);
    (avx512 ? pt_sgemm_avx512_nn : pt_sgemm_avx2_nn)(m, n, k, a, lda, bp, ldp, beta, bias, c,
                                                     ldc, pf, ahead);
}

int pt_sgemm_run(pt_sgemm_impl impl, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    if (impl == PT_SGEMM_AUTO) {
        if (!pt_sgemm_small(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc))
            cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
        return 0;
    }
    if (!pt_sgemm_supported(impl) || !shape_ok(ta, tb, m, n, k, lda, ldb, ldc)) return -1;
    if (impl == PT_SGEMM_OPENBLAS)
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    else if (impl == PT_SGEMM_SCALAR)
        scalar(ta, tb, m, n, k, a, lda, b, ldb, beta, NULL, c, ldc);
    else
        run_vec(impl == PT_SGEMM_AVX512, ta, tb, m, n, k, a, lda, b, ldb, beta, NULL, c, ldc, 0);
    return 0;
}

int pt_sgemm_small(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    pt_sgemm_impl impl = pt_sgemm_choice(ta, tb, m, n, k);
    if (impl == PT_SGEMM_OPENBLAS || !shape_ok(ta, tb, m, n, k, lda, ldb, ldc)) return 0;
    run_vec(impl == PT_SGEMM_AVX512, ta, tb, m, n, k, a, lda, b, ldb, beta, NULL, c, ldc, 0);
    return 1;
}

int pt_sgemm_bias_run(pt_sgemm_impl impl, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n,
                      int k, const float *a, int lda, const float *b, int ldb, const float *bias,
                      float *c, int ldc)
{
    if (ta != CblasNoTrans || !bias) return -1;
    if (impl == PT_SGEMM_AUTO) {
        if (!pt_sgemm_small_bias(ta, tb, m, n, k, a, lda, b, ldb, bias, c, ldc)) {
            if (m <= 0 || n <= 0 || ldc < n) return -1;
            for (int i = 0; i < m; i++) memcpy(c + (long)i * ldc, bias, sizeof(float) * n);
            cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 1.0f, c, ldc);
        }
        return 0;
    }
    if (!pt_sgemm_supported(impl) || !shape_ok(ta, tb, m, n, k, lda, ldb, ldc)) return -1;
    if (impl == PT_SGEMM_OPENBLAS) {
        for (int i = 0; i < m; i++) memcpy(c + (long)i * ldc, bias, sizeof(float) * n);
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 1.0f, c, ldc);
    } else if (impl == PT_SGEMM_SCALAR)
        scalar(ta, tb, m, n, k, a, lda, b, ldb, 0.0f, bias, c, ldc);
    else
        run_vec(impl == PT_SGEMM_AVX512, ta, tb, m, n, k, a, lda, b, ldb, 0.0f, bias, c, ldc, 0);
    return 0;
}

int pt_sgemm_small_bias(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k,
                        const float *a, int lda, const float *b, int ldb, const float *bias,
                        float *c, int ldc)
{
    if (ta != CblasNoTrans || !bias) return 0;
    pt_sgemm_impl impl = pt_sgemm_choice(ta, tb, m, n, k);
    if (impl == PT_SGEMM_OPENBLAS || !shape_ok(ta, tb, m, n, k, lda, ldb, ldc)) return 0;
    run_vec(impl == PT_SGEMM_AVX512, ta, tb, m, n, k, a, lda, b, ldb, 0.0f, bias, c, ldc, 0);
    return 1;
}

int pt_sgemm_small_weight(CBLAS_TRANSPOSE tb, int m, int n, int k, const float *a, int lda,
                          const float *b, int ldb, float beta, const float *bias, float *c,
                          int ldc, int held)
{
    if (tb != CblasTrans && tb != CblasNoTrans) return 0;
    pt_sgemm_impl impl = pt_sgemm_choice(CblasNoTrans, tb, m, n, k);
    if (impl == PT_SGEMM_OPENBLAS || !shape_ok(CblasNoTrans, tb, m, n, k, lda, ldb, ldc))
        return 0;
    run_vec(impl == PT_SGEMM_AVX512, CblasNoTrans, tb, m, n, k, a, lda, b, ldb,
            bias ? 0.0f : beta, bias, c, ldc, held ? 2 : 1);
    return 1;
}

int pt_sgemm_small_once(int m, int n, int k, const float *a, int lda, const float *w, int ldw,
                        float beta, const float *bias, float *c, int ldc)
{
    pt_sgemm_impl impl = pt_sgemm_choice(CblasNoTrans, CblasTrans, m, n, k);
    if (impl == PT_SGEMM_OPENBLAS || !shape_ok(CblasNoTrans, CblasTrans, m, n, k, lda, ldw, ldc))
        return 0;
    if (bias) beta = 0.0f;
    if (impl == PT_SGEMM_SCALAR)
        scalar(CblasNoTrans, CblasTrans, m, n, k, a, lda, w, ldw, beta, bias, c, ldc);
    else
        run_vec(impl == PT_SGEMM_AVX512, CblasNoTrans, CblasTrans, m, n, k, a, lda, w, ldw, beta,
                bias, c, ldc, W_ONCE);
    return 1;
}

int pt_sgemm_small_once_residual(int m, int n, int k, const float *a, int lda, const float *w,
                                 int ldw, const float *in, int ldin, const float *bias, float *c,
                                 int ldc)
{
    pt_sgemm_impl impl = pt_sgemm_choice(CblasNoTrans, CblasTrans, m, n, k);
    if (impl == PT_SGEMM_OPENBLAS || !bias || !in || ldin < n ||
        !shape_ok(CblasNoTrans, CblasTrans, m, n, k, lda, ldw, ldc))
        return 0;
    if (impl == PT_SGEMM_SCALAR || k == 0) {   /* C = in + bias, then the products */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) c[(long)i * ldc + j] = in[(long)i * ldin + j] + bias[j];
        if (impl == PT_SGEMM_SCALAR)
            scalar(CblasNoTrans, CblasTrans, m, n, k, a, lda, w, ldw, 1.0f, NULL, c, ldc);
        return 1;
    }
    const int avx512 = impl == PT_SGEMM_AVX512, ldp = (n + 15) & ~15;
    pt_sgemm_pf own, *pf = pf_take(&own);
    lay_out(avx512, 1, w, n, k, ldw, bpack, ldp);
    memcpy(biaspad, bias, sizeof(float) * n);
    (avx512 ? pt_sgemm_avx512_nn_res : pt_sgemm_avx2_nn_res)(m, n, k, a, lda, bpack, ldp, biaspad,
                                                             in, ldin, c, ldc, pf);
    return 1;
}
