/* bf16_pack_avx512.c — the AVX512-BF16 kernel's operand preparation:
 * fp32 rounded to bf16 (rows, runs, pairs of rows), op(B) packed into
 * pair-interleaved panels and op(A) into the micro-kernel's blocks (the
 * layouts: bf16_internal.h, bf16_avx512.c).  Built for AVX-512 like
 * bf16_avx512.c: nothing here may run before pt_cpu_has_bf16() said yes. */
#include "engine/model/bf16_internal.h"

#include <string.h>

#pragma GCC target("avx512f,avx512bf16,avx512bw,avx512vl")

#include "engine/model/bf16_avx512_vec.h"
#include "engine/model/bf16_ssp_vec.h"

#define MR PT_BF16_MR
#define NP PT_BF16_NP

/* dst[0, padded) = bf16 of src[0, count), zeros after: one row of A. */
static void convert_run(uint16_t *dst, const void *src, int f32, int count, int padded)
{
    size_t size = f32 ? sizeof(float) : sizeof(uint16_t);
    for (int j = 0; j < padded; j += 16) {
        __m256i h = load16h((const char *)src + (size_t)j * size, f32, lanes(count - j));
        if (padded - j >= 16) _mm256_storeu_si256((__m256i *)(dst + j), h);
        else _mm256_mask_storeu_epi16(dst + j, lanes(padded - j), h);
    }
}

/* dst[0, count) = bf16 of the fp32 run src[0, count) (ssp: of ssp~(src),
 * bf16_ssp.h, applied in registers): rows of A that lie back to back in
 * the source and in the packed block (lda = kc, kc even) are one run,
 * converted in whole vectors with no per-row tail (a 100-wide row is 6¼
 * vectors: its masked tail and loop cost as much as the rest). */
static inline __attribute__((always_inline)) void convert_flat_(uint16_t *dst, const float *src,
                                                                size_t count, const int ssp)
{
    size_t j = 0;
    for (; j + 64 <= count; j += 64) {
        __m512 x[4];
        for (int i = 0; i < 4; i++) {
            x[i] = _mm512_loadu_ps(src + j + 16 * i);
            if (ssp) x[i] = bsspv_ssp(x[i]);
        }
        for (int i = 0; i < 4; i++)
            _mm256_storeu_si256((__m256i *)(dst + j + 16 * i), round16h(x[i]));
    }
    for (; j < count; j += 16) {
        __mmask16 m = lanes((int)(count - j < 16 ? count - j : 16));
        __m512 x = load_ps(m, src + j);
        if (ssp) x = bsspv_ssp(x);
        _mm256_mask_storeu_epi16(dst + j, m, round16h(x));
    }
}
static void convert_flat(uint16_t *dst, const float *src, size_t count)
{
    convert_flat_(dst, src, count, 0);
}

/* dst[j] = bf16(lo[j]) | bf16(hi[j]) << 16 for j < count, 0 up to padded;
 * hi NULL reads as zeros (the pad of an odd k). */
static void interleave_run(uint32_t *dst, const void *lo, const void *hi, int f32, int count,
                           int padded)
{
    size_t size = f32 ? sizeof(float) : sizeof(uint16_t);
    int j = 0;
    if (f32 && hi) {
        /* 16 lanes of two fp32 rows: one vcvtne2ps2bf16 rounds both
         * (words 0-15 from lo, 16-31 from hi) and one word permutation
         * interleaves them (word 2i ← i, 2i + 1 ← 16 + i); a vector holding
         * a subnormal takes the path below, as round16h does */
        const float *l32 = lo, *h32 = hi;
        for (; j < padded; j += 16) {
            /* lanes past count read as 0 (the padding) */
            const __mmask16 m = lanes(count - j);
            __m512 l = load_ps(m, l32 + j), h = load_ps(m, h32 + j);
            if (__builtin_expect((subnormals(l) | subnormals(h)) != 0, 0)) break;
            __m512i pair = pair_words((__m512i)_mm512_cvtne2ps_pbh(h, l));
            if (padded - j >= 16) _mm512_storeu_si512(dst + j, pair);
            else _mm512_mask_storeu_epi32(dst + j, lanes(padded - j), pair);
        }
    }
    for (; j < padded; j += 16) {
        __mmask16 m = lanes(count - j);
        size_t off = (size_t)j * size;
        __m512i l = load16((const char *)lo + off, f32, m);
        __m512i h = hi ? load16((const char *)hi + off, f32, m) : _mm512_setzero_si512();
        __m512i pair = _mm512_or_si512(l, _mm512_slli_epi32(h, 16));
        if (padded - j >= 16) _mm512_storeu_si512(dst + j, pair);
        else _mm512_mask_storeu_epi32(dst + j, lanes(padded - j), pair);
    }
}

/* 16 lanes of two fp32 rows rounded by one vcvtne2ps2bf16: words 0-15 lo,
 * 16-31 hi; a vector holding a subnormal is rounded on the integer path
 * (round16h's rule), so the bits are always pt_bf16_round_bits'. */
static inline __m512i round_both(__m512 l, __m512 h)
{
    if (__builtin_expect((subnormals(l) | subnormals(h)) != 0, 0))
        return _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm512_cvtepi32_epi16(round16(_mm512_castps_si512(l)))),
            _mm512_cvtepi32_epi16(round16(_mm512_castps_si512(h))), 1);
    return (__m512i)_mm512_cvtne2ps_pbh(h, l);
}

/* One pair row (hi NULL: zeros) and, with rlo, the plain rows: the halves
 * of round_both are the rows, its word permutation the pairs.  ssp:
 * rounded are ssp~(lo), ssp~(hi) (bf16_ssp.h), computed in registers; the
 * padding lanes stay 0 (ssp~(0) is not). */
static inline __attribute__((always_inline)) void pairs_row(uint32_t *dst, int ldp,
                                                            const float *lo, const float *hi,
                                                            int w, pt_bf16 *rlo, pt_bf16 *rhi,
                                                            int hpad, const int ssp)
{
    const int full = w / 16 * 16;
    int j = 0;
    if (hi) {
        for (; j < full; j += 16) {
            __m512 l = _mm512_loadu_ps(lo + j), h = _mm512_loadu_ps(hi + j);
            if (ssp) {
                l = bsspv_ssp(l);
                h = bsspv_ssp(h);
            }
            const __m512i both = round_both(l, h);
            if (rlo) {
                _mm256_storeu_si256((__m256i *)(rlo + j), _mm512_castsi512_si256(both));
                _mm256_storeu_si256((__m256i *)(rhi + j), _mm512_extracti64x4_epi64(both, 1));
            }
            _mm512_storeu_si512(dst + j, pair_words(both));
        }
    }
    for (; j < w; j += 16) {
        /* the tail, or a lone last row: lanes past w read as 0 (the pairs'
         * zero padding) */
        const __mmask16 m = lanes(w - j);
        __m512 l = load_ps(m, lo + j), h = hi ? load_ps(m, hi + j) : _mm512_setzero_ps();
        if (ssp) {
            l = _mm512_maskz_mov_ps(m, bsspv_ssp(l));
            if (hi) h = _mm512_maskz_mov_ps(m, bsspv_ssp(h));
        }
        const __m512i both = round_both(l, h);
        if (rlo) {
            _mm256_mask_storeu_epi16(rlo + j, m, _mm512_castsi512_si256(both));
            if (hi) _mm256_mask_storeu_epi16(rhi + j, m, _mm512_extracti64x4_epi64(both, 1));
        }
        _mm512_storeu_si512(dst + j, pair_words(both));
    }
    for (; j < ldp; j += 16) _mm512_storeu_si512(dst + j, _mm512_setzero_si512());
    for (int c = w; rlo && c < w + hpad; c++) {
        rlo[c] = 0;
        if (hi) rhi[c] = 0;
    }
}

static inline __attribute__((always_inline)) void pairs_rows_(uint32_t *pairs, int ldp,
                                                              const float *x, size_t lds,
                                                              int rows, int w, pt_bf16 *rows_h,
                                                              size_t ldh, int hpad, const int ssp)
{
    for (int r = 0; r < rows; r += 2) {
        const float *lo = x + (size_t)r * lds, *hi = r + 1 < rows ? lo + lds : NULL;
        pt_bf16 *rlo = rows_h ? rows_h + (size_t)r * ldh : NULL;
        pairs_row(pairs + (size_t)(r / 2) * ldp, ldp, lo, hi, w, rlo, rlo ? rlo + ldh : NULL,
                  hpad, ssp);
    }
}

/* bf16.h's pairs of fp32 rows x (and their plain bf16 rows): full vectors
 * unmasked, only a row's tail masked (masked memory operations are slow
 * here, see load_ps). */
void pt_bf16_avx512_pairs_rows(uint32_t *pairs, int ldp, const float *x, size_t lds, int rows,
                               int w, pt_bf16 *rows_h, size_t ldh, int hpad)
{
    pairs_rows_(pairs, ldp, x, lds, rows, w, rows_h, ldh, hpad, 0);
}

void pt_bf16_avx512_ssp_pairs_rows(uint32_t *pairs, int ldp, const float *x, size_t lds,
                                   int rows, int w, pt_bf16 *rows_h, size_t ldh)
{
    pairs_rows_(pairs, ldp, x, lds, rows, w, rows_h, ldh, 0, 1);
}

/* op(B) stored transposed (the weights W[out][in] of a Linear): column col of
 * op(B) is row col of the source, so pair p is two adjacent elements, and a
 * source row rounded to bf16 in place is already its column of pairs.  16
 * columns × 16 pairs are rounded in vectors, transposed in registers and
 * stored as 16 rows of a panel; columns past n (the last panel's padding up
 * to a multiple of 16) are zeros. */
static void pack_b_transposed(const pt_bf16_job *job, int p_begin, int p_end)
{
    const pt_bf16_operand *b = &job->b;
    const size_t size = b->f32 ? sizeof(float) : sizeof(uint16_t);
    for (int c0 = 0; c0 < job->n; c0 += 16) {
        int panel = c0 / NP, width = job->n - panel * NP < NP ? job->n - panel * NP : NP;
        int wp = (width + 15) / 16 * 16;
        uint32_t *dst = job->bp + (size_t)panel * job->kp * NP + (size_t)(c0 % NP);
        for (int p0 = p_begin; p0 < p_end; p0 += 16) {
            const int k0 = 2 * p0;
            __m512i r[16];
            for (int i = 0; i < 16; i++) {
                if (c0 + i >= job->n) {
                    r[i] = _mm512_setzero_si512();
                    continue;
                }
                const char *row = elem_at(b, (size_t)(c0 + i), (size_t)k0);
                __m256i lo = load16h(row, b->f32, lanes(job->k - k0));
                __m256i hi = load16h(row + 16 * size, b->f32, lanes(job->k - k0 - 16));
                r[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            }
            transpose16(r);
            int count = p_end - p0 < 16 ? p_end - p0 : 16;
            for (int j = 0; j < count; j++)
                _mm512_storeu_si512(dst + (size_t)(p0 + j) * wp, r[j]);
        }
    }
}

void pt_bf16_avx512_pack_b(const pt_bf16_job *job, int p_begin, int p_end)
{
    if (job->b.trans) {
        pack_b_transposed(job, p_begin, p_end);
        return;
    }
    /* op(B) stored as is, [k][n]: pair row p interleaves source rows 2p, 2p+1 */
    for (int p = p_begin; p < p_end; p++) {
        for (int n0 = 0; n0 < job->n; n0 += NP) {
            int width = job->n - n0 < NP ? job->n - n0 : NP, wp = (width + 15) / 16 * 16;
            const void *lo = elem_at(&job->b, (size_t)2 * p, (size_t)n0);
            const void *hi =
                2 * p + 1 < job->k ? elem_at(&job->b, (size_t)2 * p + 1, (size_t)n0) : NULL;
            uint32_t *dst = job->bp + (size_t)(n0 / NP) * job->kp * NP + (size_t)p * wp;
            interleave_run(dst, lo, hi, job->b.f32, width, wp);
        }
    }
}

const uint32_t *pt_bf16_avx512_b_block(const pt_bf16_job *job, int pc, int kc, int *kpb,
                                       int *pair0)
{
    if (!job->bblock || job->b.pairs) {
        *kpb = job->kp;
        *pair0 = pc / 2;
        return job->bp;
    }
    pt_bf16_job sub = *job;
    sub.k = kc;
    sub.kp = (kc + 1) / 2;
    sub.bp = job->bblock;
    sub.bblock = NULL;
    sub.b.p = job->b.trans ? elem_at(&job->b, 0, (size_t)pc) : elem_at(&job->b, (size_t)pc, 0);
    pt_bf16_avx512_pack_b(&sub, 0, sub.kp);
    *kpb = sub.kp;
    *pair0 = 0;
    return job->bblock;
}

/* Packs rows [ic, ic+mc) × k [pc, pc+kc) of op(A), rows padded with zeros to
 * mcp, and returns where they start.  Pair (r, p) lands at ap[p·sp + r·sr]:
 * A stored as is gives one bf16 row per r (sp = 1), A stored transposed gives
 * one row of pairs per p (sr = 1) — whichever keeps the source reads
 * contiguous.  A given as pairs already is that second layout: read in place
 * (its zero padding covers the rows up to mcp, pt_bf16_pairs_ld). */
const uint32_t *pt_bf16_avx512_pack_a(const pt_bf16_job *job, uint32_t *ap, int ic, int mc,
                                      int mcp, int pc, int kc, ptrdiff_t *sp, ptrdiff_t *sr)
{
    const pt_bf16_operand *a = &job->a;
    int pairs = (kc + 1) / 2;
    if (a->pairs) {
        *sp = a->ld;
        *sr = 1;
        return (const uint32_t *)a->p + (size_t)(pc / 2) * (size_t)a->ld + (size_t)ic;
    }
    if (!a->trans && a->f32 && 2 * pairs == kc && a->ld == kc) {
        convert_flat((uint16_t *)ap, elem_at(a, (size_t)ic, (size_t)pc), (size_t)mc * kc);
        memset(ap + (size_t)mc * pairs, 0, (size_t)(mcp - mc) * pairs * sizeof(uint32_t));
        *sp = 1;
        *sr = pairs;
        return ap;
    }
    if (!a->trans && a->f32 && kc > 16 && kc <= 32) {
        /* the Gaussian basis (k = 25): two vectors a row, the second masked,
         * its lanes past kc read as 0 (the pad of an odd k); the masks are
         * the same for every row, so the loop carries no per-row tail */
        const __mmask16 tail = lanes(kc - 16), out = lanes(2 * pairs - 16);
        for (int r = 0; r < mc; r++) {
            const float *src = elem_at(a, (size_t)(ic + r), (size_t)pc);
            uint16_t *dst = (uint16_t *)(ap + (size_t)r * pairs);
            __m512 x0 = _mm512_loadu_ps(src), x1 = _mm512_maskz_loadu_ps(tail, src + 16);
            if (__builtin_expect((subnormals(x0) | subnormals(x1)) != 0, 0)) {
                convert_run(dst, src, 1, kc, 2 * pairs);
                continue;
            }
            _mm256_storeu_si256((__m256i *)dst, (__m256i)_mm512_cvtneps_pbh(x0));
            _mm256_mask_storeu_epi16(dst + 16, out, (__m256i)_mm512_cvtneps_pbh(x1));
        }
        memset(ap + (size_t)mc * pairs, 0, (size_t)(mcp - mc) * pairs * sizeof(uint32_t));
        *sp = 1;
        *sr = pairs;
        return ap;
    }
    if (!a->trans) {
        for (int r = 0; r < mcp; r++) {
            uint16_t *dst = (uint16_t *)(ap + (size_t)r * pairs);
            if (r < mc)
                convert_run(dst, elem_at(a, (size_t)(ic + r), (size_t)pc), a->f32, kc, 2 * pairs);
            else
                memset(dst, 0, (size_t)pairs * sizeof(uint32_t));
        }
        *sp = 1;
        *sr = pairs;
        return ap;
    }
    for (int p = 0; p < pairs; p++) {
        int k0 = pc + 2 * p;
        const void *lo = elem_at(a, (size_t)k0, (size_t)ic);
        const void *hi = k0 + 1 < pc + kc ? elem_at(a, (size_t)k0 + 1, (size_t)ic) : NULL;
        interleave_run(ap + (size_t)p * mcp, lo, hi, a->f32, mc, mcp);
    }
    *sp = mcp;
    *sr = 1;
    return ap;
}

static inline __attribute__((always_inline)) void round_rows_(pt_bf16 *dst, int ldd,
                                                              const float *src, int lds,
                                                              int rows, int n, const int ssp)
{
    if (ldd == n && lds == n) {
        convert_flat_(dst, src, (size_t)rows * n, ssp);
        return;
    }
    for (int r = 0; r < rows; r++) {
        if (ssp) convert_flat_(dst + (size_t)r * ldd, src + (size_t)r * lds, (size_t)n, 1);
        else convert_run(dst + (size_t)r * ldd, src + (size_t)r * lds, 1, n, n);
    }
}

void pt_bf16_avx512_round_rows(pt_bf16 *dst, int ldd, const float *src, int lds, int rows, int n)
{
    round_rows_(dst, ldd, src, lds, rows, n, 0);
}

void pt_bf16_avx512_ssp_round_rows(pt_bf16 *dst, int ldd, const float *src, int lds, int rows,
                                   int n)
{
    round_rows_(dst, ldd, src, lds, rows, n, 1);
}
