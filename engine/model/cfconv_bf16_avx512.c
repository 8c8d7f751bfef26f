/* cfconv_bf16_avx512.c — cfconv_bf16.h's convolution for AVX-512 (F, BW and
 * VL: the bf16 path needs AVX512-BF16, which comes with them): a row of
 * f ≤ 128 floats is one panel of nv ≤ 8 zmm, the last masked when f is not
 * a multiple of 16, and W̃'s row is read as nv ymm of 16 halfs (the tail
 * masked per half), widened exactly to fp32 in registers (zero-extend to
 * 32 bits, shift left 16).  The structure is cfconv_body.h's (fwd_panel,
 * bws_panel: m_i, or x_j, dx_j and dm_j, in named registers; panels
 * instantiated per vector count so every guard folds); only W's loads
 * differ, so the per-element operations are the scalar loops' of
 * cfconv_bf16.c.  The backward by rows (bwr_panel) is cfconv_body.h's rows_panel
 * the same way.  Called only when the CPU and OS have AVX-512. */
#pragma GCC target("avx512f,avx512bw,avx512vl")
#include <immintrin.h>
#include <stdint.h>

#include "engine/model/cfconv_bf16_internal.h"
#include "engine/model/cfconv_kernels_internal.h"

#define BV8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
/* vector v of an fp32 row at p: whole, or the tail: tail 2 (f % 16 = 4,
 * the model's 100) as one xmm, tail 1 any other count through the mask.
 * As cfconv_body.h's CK_TAIL: a masked store's footprint is the whole
 * 64-byte vector, 48 bytes into the next row, and a load of those bytes
 * while the store is in flight waits for it to reach the cache — the
 * backward loads sender j + 1's dx row right after storing j's, and an
 * edge's dP row after an earlier edge stored the row before it. */
#define BLD(p, v)                                                                        \
    ((tail == 2 && (v) == nv - 1)                                                        \
         ? _mm512_zextps128_ps512(_mm_loadu_ps((p) + (v) * 16))                          \
     : (tail && (v) == nv - 1) ? _mm512_maskz_loadu_ps(last, (p) + (v) * 16)            \
                               : _mm512_loadu_ps((p) + (v) * 16))
#define BST(p, v, x)                                                                     \
    do {                                                                                 \
        if (tail == 2 && (v) == nv - 1)                                                  \
            _mm_storeu_ps((p) + (v) * 16, _mm512_castps512_ps128(x));                    \
        else if (tail && (v) == nv - 1)                                                  \
            _mm512_mask_storeu_ps((p) + (v) * 16, last, (x));                            \
        else                                                                             \
            _mm512_storeu_ps((p) + (v) * 16, (x));                                       \
    } while (0)

/* vector v of a bf16 row at p, widened (exact); a tail of 4 halfs as one
 * 8-byte load */
static inline __attribute__((always_inline)) __m512 widen(__m256i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
#define BLDW(p, v)                                                                       \
    widen((tail == 2 && (v) == nv - 1)                                                   \
              ? _mm256_zextsi128_si256(_mm_loadl_epi64((const __m128i *)((p) + (v) * 16))) \
          : (tail && (v) == nv - 1)                                                      \
              ? _mm256_maskz_loadu_epi16(last, (p) + (v) * 16)                           \
              : _mm256_loadu_si256((const __m256i *)((p) + (v) * 16)))

/* Edges ahead whose W̃ row is prefetched (cfconv_body.h's CK_PF: the
 * backward reads every row from memory, the forward rows written one
 * structure back) */
#define BPF 8
static inline __attribute__((always_inline)) void prefetch_row(const pt_bf16 *p, int f)
{
    const char *c = (const char *)p;
    for (int o = 0; o < 2 * f; o += 64) _mm_prefetch(c + o, _MM_HINT_T0);
    _mm_prefetch(c + 2 * f - 1, _MM_HINT_T0);
}

static inline __attribute__((always_inline)) void fwd_panel(
    const int nv, const int tail, const __mmask16 last, float *m, const pt_bf16 *w,
    const int32_t *row, const float *x, const int32_t *src, const int32_t *off, int i0,
    int i1, long f)
{
    const int32_t kend = off[i1];
    for (int i = i0; i < i1; i++) {
#define BZERO(v) __m512 a##v = _mm512_setzero_ps();
        BV8(BZERO)
        for (int32_t k = off[i]; k < off[i + 1]; k++) {
            const int32_t u = row[k];
            if (u < 0) continue;
            if (k + BPF < kend && row[k + BPF] >= 0) prefetch_row(w + row[k + BPF] * f, (int)f);
            const float *xp = x + src[k] * f;
            const pt_bf16 *wp = w + u * f;
#define BFMA(v) if ((v) < nv) a##v = _mm512_fmadd_ps(BLD(xp, v), BLDW(wp, v), a##v);
            BV8(BFMA)
        }
        float *mp = m + i * f;
#define BSTORE(v) if ((v) < nv) BST(mp, v, a##v);
        BV8(BSTORE)
    }
}

/* cfconv_body.h's bws_panel with W̃: x_j, dm_j and dx_j's accumulator in
 * registers; each edge's row, receiver, dP row, part (write, combine, add,
 * dx only) and cutoff from its list entry sr[e] (schnet_ops.h's
 * pt_cfconv_sender_edges), read in order. */
static inline __attribute__((always_inline)) void bws_panel(
    const int nv, const int tail, const __mmask16 last, float *dx, float *dp, const float *dm,
    const float *x, const pt_bf16 *w, const int32_t *so, const pt_cfconv_sedge *sr, int j0,
    int j1, long f)
{
    const int32_t eend = so[j1];
    for (int j = j0; j < j1; j++) {
        if (so[j] == so[j + 1]) continue;
        const float *xp = x + j * f, *dmj = dm + j * f;
        float *dxp = dx + j * f;
#define BXS(v) const __m512 x##v = (v) < nv ? BLD(xp, v) : _mm512_setzero_ps();
        BV8(BXS)
#define BACC(v) __m512 a##v = (v) < nv ? BLD(dxp, v) : _mm512_setzero_ps();
        BV8(BACC)
#define BDMJ(v) const __m512 m##v = (v) < nv ? BLD(dmj, v) : _mm512_setzero_ps();
        BV8(BDMJ)
        for (int32_t e = so[j]; e < so[j + 1]; e++) {
            const pt_cfconv_sedge s = sr[e];
            if (e + BPF < eend) prefetch_row(w + sr[e + BPF].row * f, (int)f);
            const float *dmp = dm + s.dst * f;
            const pt_bf16 *wp = w + s.row * f;
            float *dpp = dp + PT_SEDGE_DP(s) * f;
            const __m512 cu = _mm512_set1_ps(s.cut);
#define BS(v, DP)                                                                        \
    if ((v) < nv) {                                                                      \
        const __m512 d_ = BLD(dmp, v);                                                   \
        a##v = _mm512_fmadd_ps(d_, BLDW(wp, v), a##v);                                   \
        const __m512 t_ = _mm512_mul_ps(d_, x##v);                                       \
        BST(dpp, v, DP);                                                                 \
    }
#define BS_WRITE(v) BS(v, _mm512_mul_ps(t_, cu))
#define BS_ADD(v) BS(v, _mm512_fmadd_ps(t_, cu, BLD(dpp, v)))
#define BS_COMBINE(v)                                                                    \
    BS(v, _mm512_fmadd_ps(_mm512_mul_ps(m##v, BLD(xip, v)), cu, _mm512_mul_ps(t_, cu)))
#define BS_DX(v) if ((v) < nv) a##v = _mm512_fmadd_ps(BLD(dmp, v), BLDW(wp, v), a##v);
            PT_SEDGE_EDGE(s, BV8, BS_WRITE, BS_ADD, BS_DX, BS_COMBINE, x, f)
        }
#define BSTACC(v) if ((v) < nv) BST(dxp, v, a##v);
        BV8(BSTACC)
    }
}

#define BCASES(CALL)                                                                     \
    BCASE(CALL, 1) BCASE(CALL, 2) BCASE(CALL, 3) BCASE(CALL, 4)                          \
    BCASE(CALL, 5) BCASE(CALL, 6) BCASE(CALL, 7) BCASE(CALL, 8)
#define BCASE(CALL, n)                                                                   \
    case 3 * (n): CALL((n), 0); break;                                                   \
    case 3 * (n) + 1: CALL((n), 1); break;                                               \
    case 3 * (n) + 2: CALL((n), 2); break;
/* the tail kind of a row of f floats (BLD) */
#define BTAIL(f) ((f) % 16 == 0 ? 0 : (f) % 16 == 4 ? 2 : 1)

void pt_cfconv_bf16_avx512_forward(float *m, const pt_bf16 *w, const int32_t *row,
                                   const float *x, const int32_t *src, const int32_t *off,
                                   int i0, int i1, int f)
{
    if (f <= 0 || f > 128 || i0 >= i1) return;
    const int nv = (f + 15) / 16, tail = BTAIL(f);
    const __mmask16 last = (__mmask16)((1u << (tail ? f % 16 : 16)) - 1u);
#define BFWD(n, t) fwd_panel((n), (t), last, m, w, row, x, src, off, i0, i1, f)
    switch (3 * nv + tail) { BCASES(BFWD) default: break; }
}

void pt_cfconv_bf16_avx512_backward_senders(float *dx, float *dp, const float *dm,
                                            const float *x, const pt_bf16 *w, const int32_t *so,
                                            const pt_cfconv_sedge *sr, int j0, int j1, int f)
{
    if (f <= 0 || f > 128 || j0 >= j1) return;
    const int nv = (f + 15) / 16, tail = BTAIL(f);
    const __mmask16 last = (__mmask16)((1u << (tail ? f % 16 : 16)) - 1u);
#define BBWS(n, t)                                                                       \
    bws_panel((n), (t), last, dx, dp, dm, x, w, so, sr, j0, j1, f)
    switch (3 * nv + tail) { BCASES(BBWS) default: break; }
}

/* W̃ rows ahead that the walk by rows prefetches (bwr_panel) */
#define BRPF 24

/* cfconv_body.h's rows_panel with W̃ (pc = 0): rows r0 ≤ u < r1 in
 * ascending order, each with both its edges; dm_i, x_i and dx_i's
 * accumulator in registers across receiver i's rows (contiguous:
 * edge_rows.h), the sender's dm_j, x_j and W̃_u read and dx_j added to in
 * memory, dP_u written once into the chunk's scratch.  Per element the
 * scalar loop's operations (cfconv_bf16.c), so the same bits. */
static inline __attribute__((always_inline)) void bwr_panel(
    const int nv, const int tail, const __mmask16 last, float *dx, float *dp, const float *dm,
    const float *x, const pt_bf16 *w, const pt_cfconv_redge *re, int32_t r0, int32_t r1, long f)
{
    for (int32_t u = r0; u < r1;) {
        const int32_t i = re[u].i;
        const float *dmp = dm + i * f, *xip = x + i * f;
        float *dxi = dx + i * f;
#define BRD(v) const __m512 d##v = (v) < nv ? BLD(dmp, v) : _mm512_setzero_ps();
        BV8(BRD)
#define BRY(v) const __m512 y##v = (v) < nv ? BLD(xip, v) : _mm512_setzero_ps();
        BV8(BRY)
#define BRA(v) __m512 a##v = (v) < nv ? BLD(dxi, v) : _mm512_setzero_ps();
        BV8(BRA)
        for (; u < r1 && re[u].i == i; u++) {
            const pt_cfconv_redge e = re[u];
            const long j = e.j * f;
            const pt_bf16 *wp = w + u * f;
            const float *xj = x + j, *dmj = dm + j;
            float *dxj = dx + j, *dpp = dp + (u - r0) * f;
            const __m512 cu = _mm512_set1_ps(e.cut);
            /* dP's row BPF rows ahead into L1 (cfconv_body.h's rows_panel:
             * the scratch is in L2, and stores waiting for their lines cost
             * more than the arithmetic) */
            if (u + BPF < r1) {
                const char *pc_ = (const char *)(dpp + BPF * f);
                for (long o = 0; o < (long)nv * 64; o += 64) _mm_prefetch(pc_ + o, _MM_HINT_T0);
                _mm_prefetch(pc_ + (long)nv * 64 - 1, _MM_HINT_T0);
            }
            /* W̃'s row BRPF rows ahead: fp32's W is fetched into L2 by the
             * filter products (schnet_edges.c), W̃ is not, and comes from
             * L3 or memory (the forward wrote it four blocks back); the
             * loads of W̃ held the walk (water, one thread, per step: 2.2 ->
             * 1.3 ms at 24 rows; 8: 1.9, 16: 1.4, 48: 1.7) */
            if (u + BRPF < r1) prefetch_row(wp + BRPF * f, (int)f);
            /* x_j loaded before dx_j is stored (4K aliasing: rows j of x
             * and dx can share their low 12 address bits) */
#define BR1(v) const __m512 w_ = BLDW(wp, v), x_ = BLD(xj, v);                            \
               const __m512 t_ = _mm512_mul_ps(_mm512_mul_ps(d##v, x_), cu);               \
               BST(dxj, v, _mm512_fmadd_ps(d##v, w_, BLD(dxj, v)));
#define BRONE(v) if ((v) < nv) { BR1(v) BST(dpp, v, t_); }
#define BRBOTH(v)                                                                        \
    if ((v) < nv) {                                                                      \
        const __m512 m_ = BLD(dmj, v);                                                   \
        BR1(v)                                                                           \
        a##v = _mm512_fmadd_ps(m_, w_, a##v);                                            \
        BST(dpp, v, _mm512_fmadd_ps(_mm512_mul_ps(m_, y##v), cu, t_));                   \
    }
            /* j = i (an atom's image): dx_i is the accumulator */
#define BRS1(v) const __m512 w_ = BLDW(wp, v);                                             \
                a##v = _mm512_fmadd_ps(d##v, w_, a##v);                                    \
                const __m512 t_ = _mm512_mul_ps(_mm512_mul_ps(d##v, y##v), cu);
#define BRONES(v) if ((v) < nv) { BRS1(v) BST(dpp, v, t_); }
#define BRBOTHS(v)                                                                       \
    if ((v) < nv) {                                                                      \
        BRS1(v)                                                                          \
        a##v = _mm512_fmadd_ps(d##v, w_, a##v);                                          \
        BST(dpp, v, _mm512_fmadd_ps(_mm512_mul_ps(d##v, y##v), cu, t_));                 \
    }
            switch (e.part) {
            case PT_REDGE_ONE: BV8(BRONE) break;
            case PT_REDGE_BOTH: BV8(BRBOTH) break;
            case PT_REDGE_ONE_SELF: BV8(BRONES) break;
            default: BV8(BRBOTHS) break;
            }
        }
#define BRST(v) if ((v) < nv) BST(dxi, v, a##v);
        BV8(BRST)
    }
}

void pt_cfconv_bf16_avx512_backward_rows(float *dx, float *dp, const float *dm, const float *x,
                                         const pt_bf16 *w, const pt_cfconv_redge *re, int32_t r0,
                                         int32_t r1, int f)
{
    if (f <= 0 || f > 128 || r0 >= r1) return;
    const int nv = (f + 15) / 16, tail = BTAIL(f);
    const __mmask16 last = (__mmask16)((1u << (tail ? f % 16 : 16)) - 1u);
#define BBWR(n, t) bwr_panel((n), (t), last, dx, dp, dm, x, w, re, r0, r1, f)
    switch (3 * nv + tail) { BCASES(BBWR) default: break; }
}
