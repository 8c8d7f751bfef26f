/* bf16_avx512.c — the AVX512-BF16 product kernel: packing A and B into the
 * pair-interleaved layouts vdpbf16ps multiplies (rounding fp32 sources to bf16
 * on the way), the 6×64 micro-kernel, and the cache blocking around it.
 *
 * This is the only file of packtrain built for AVX-512 (the target pragma
 * below; the rest of the build stays x86-64-v3), so nothing in it may run
 * before pt_cpu_has_bf16() said yes — bf16.c guarantees that.
 *
 * vdpbf16ps multiplies 16 lanes of bf16 *pairs*: lane i of the accumulator
 * gets a[2i+1]·b[2i+1] then a[2i]·b[2i] added.  So op(B) is packed with the
 * pair (B(2p, col), B(2p+1, col)) in lane col of row p (see bf16_internal.h),
 * and one pair (A(r, 2p), A(r, 2p+1)) of A is broadcast to all lanes: one
 * instruction then advances 16 columns of row r of C by two steps of k. */
#include "engine/model/bf16_internal.h"

#include <immintrin.h>
#include <string.h>

#pragma GCC target("avx512f,avx512bf16,avx512bw,avx512vl")

#define MR PT_BF16_MR
#define NP PT_BF16_NP
#define MC PT_BF16_MC
#define KC PT_BF16_KC

/* Address of stored element (row, col) of an operand. */
static inline const void *elem_at(const pt_bf16_operand *o, size_t row, size_t col)
{
    size_t size = o->f32 ? sizeof(float) : sizeof(uint16_t);
    return (const char *)o->p + (row * (size_t)o->ld + col) * size;
}

/* 16 lanes of round-to-nearest-even fp32 → bf16 bits (low half of each lane),
 * the vector twin of pt_bf16_round_bits. */
static inline __m512i round16(__m512i u)
{
    const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i bias = _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_mask_mov_epi32(r, nan, quiet);
}

/* 16 fp32 lanes rounded to bf16 (16 × 16 bits).  vcvtneps2bf16 rounds to
 * nearest even and quiets NaN exactly as pt_bf16_round_bits does (checked on
 * all 2^32 inputs), except that it reads fp32 subnormals as zero, where
 * pt_bf16_round_bits rounds them (up to bf16's smallest normal for the
 * largest ones): a vector holding a subnormal takes the integer path, so the
 * bits are always pt_bf16_round_bits'. */
/* lanes of x that are fp32 subnormals: 1 ≤ |x| bits ≤ 0x007fffff */
static inline __mmask16 subnormals(__m512 x)
{
    const __m512i abs = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
    return _mm512_cmplt_epu32_mask(_mm512_sub_epi32(abs, _mm512_set1_epi32(1)),
                                   _mm512_set1_epi32(0x007fffff));
}

static inline __m256i round16h(__m512 x)
{
    if (__builtin_expect(subnormals(x) != 0, 0))
        return _mm512_cvtepi32_epi16(round16(_mm512_castps_si512(x)));
    return (__m256i)_mm512_cvtneps_pbh(x);
}

/* Masked loads and stores cost several times a plain one on the Zen 5 this
 * was measured on (the packing loops ran 2× slower), so the full-width case
 * takes plain instructions and only a row's tail is masked. */
static inline __m512 load_ps(__mmask16 m, const float *p)
{
    return m == 0xffff ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}

static inline void store_ps(float *p, __mmask16 m, __m512 x)
{
    if (m == 0xffff) _mm512_storeu_ps(p, x);
    else _mm512_mask_storeu_ps(p, m, x);
}

/* Up to 16 consecutive elements (lanes outside m read as 0) as bf16. */
static inline __m256i load16h(const void *src, int f32, __mmask16 m)
{
    if (f32) return round16h(load_ps(m, src));
    return m == 0xffff ? _mm256_loadu_si256(src) : _mm256_maskz_loadu_epi16(m, src);
}

/* The same, one bf16 in the low half of each 32-bit lane. */
static inline __m512i load16(const void *src, int f32, __mmask16 m)
{
    return _mm512_cvtepu16_epi32(load16h(src, f32, m));
}

/* mask of the first `count` lanes; count ≤ 0 (the zero padding) gives none */
static inline __mmask16 lanes(int count)
{
    if (count <= 0) return 0;
    return count >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << count) - 1u);
}

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

/* dst[0, count) = bf16 of the fp32 run src[0, count): rows of A that lie
 * back to back in the source and in the packed block (lda = kc, kc even)
 * are one run, converted in whole vectors with no per-row tail (a 100-wide
 * row is 6¼ vectors: its masked tail and loop cost as much as the rest). */
static void convert_flat(uint16_t *dst, const float *src, size_t count)
{
    size_t j = 0;
    for (; j + 64 <= count; j += 64) {
        __m256i h0 = round16h(_mm512_loadu_ps(src + j));
        __m256i h1 = round16h(_mm512_loadu_ps(src + j + 16));
        __m256i h2 = round16h(_mm512_loadu_ps(src + j + 32));
        __m256i h3 = round16h(_mm512_loadu_ps(src + j + 48));
        _mm256_storeu_si256((__m256i *)(dst + j), h0);
        _mm256_storeu_si256((__m256i *)(dst + j + 16), h1);
        _mm256_storeu_si256((__m256i *)(dst + j + 32), h2);
        _mm256_storeu_si256((__m256i *)(dst + j + 48), h3);
    }
    for (; j < count; j += 16) {
        __mmask16 m = lanes((int)(count - j < 16 ? count - j : 16));
        _mm256_mask_storeu_epi16(dst + j, m, round16h(load_ps(m, src + j)));
    }
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
        const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10,
                                             25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3,
                                             18, 2, 17, 1, 16, 0);
        const float *l32 = lo, *h32 = hi;
        for (; j < padded; j += 16) {
            /* lanes past count read as 0 (the padding) */
            const __mmask16 m = lanes(count - j);
            __m512 l = load_ps(m, l32 + j), h = load_ps(m, h32 + j);
            if (__builtin_expect((subnormals(l) | subnormals(h)) != 0, 0)) break;
            __m512i pair = _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(h, l));
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

/* 16 × 16 uint32 transposed in registers: r[i] lane j ↔ r[j] lane i.
 * Pairs of rows interleave their 32-bit, then 64-bit elements (each 128-bit
 * lane then holds a 4 × 4 block), and two rounds of 128-bit lane shuffles
 * gather the blocks: 64 shuffles for 256 elements. */
static inline void transpose16(__m512i r[16])
{
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);     /* column 4L + 0 of rows i..i+3 */
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]); /* 4L + 1 */
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int c = 0; c < 4; c++) {
        /* u[c], u[4+c], u[8+c], u[12+c]: column 4L + c of rows 0-3, 4-7, 8-11, 12-15 */
        __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88);  /* lanes 0, 2 */
        __m512i v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);  /* lanes 1, 3 */
        __m512i w0 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
        __m512i w1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
        r[c] = _mm512_shuffle_i32x4(v0, w0, 0x88);      /* column c */
        r[4 + c] = _mm512_shuffle_i32x4(v1, w1, 0x88);  /* column 4 + c */
        r[8 + c] = _mm512_shuffle_i32x4(v0, w0, 0xdd);  /* column 8 + c */
        r[12 + c] = _mm512_shuffle_i32x4(v1, w1, 0xdd); /* column 12 + c */
    }
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

/* Packs rows [ic, ic+mc) × k [pc, pc+kc) of op(A), rows padded with zeros to
 * mcp.  Pair (r, p) lands at ap[p·sp + r·sr]: A stored as is gives one bf16
 * row per r (sp = 1), A stored transposed gives one row of pairs per p
 * (sr = 1) — whichever keeps the source reads contiguous. */
static void pack_a(const pt_bf16_job *job, uint32_t *ap, int ic, int mc, int mcp, int pc, int kc,
                   ptrdiff_t *sp, ptrdiff_t *sr)
{
    const pt_bf16_operand *a = &job->a;
    int pairs = (kc + 1) / 2;
    if (!a->trans && a->f32 && 2 * pairs == kc && a->ld == kc) {
        convert_flat((uint16_t *)ap, elem_at(a, (size_t)ic, (size_t)pc), (size_t)mc * kc);
        memset(ap + (size_t)mc * pairs, 0, (size_t)(mcp - mc) * pairs * sizeof(uint32_t));
        *sp = 1;
        *sr = pairs;
        return;
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
        return;
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
        return;
    }
    for (int p = 0; p < pairs; p++) {
        int k0 = pc + 2 * p;
        const void *lo = elem_at(a, (size_t)k0, (size_t)ic);
        const void *hi = k0 + 1 < pc + kc ? elem_at(a, (size_t)k0 + 1, (size_t)ic) : NULL;
        interleave_run(ap + (size_t)p * mcp, lo, hi, a->f32, mc, mcp);
    }
    *sp = mcp;
    *sr = 1;
}

/* One MR × (16·nv) tile of C. */
typedef struct tile {
    const uint32_t *a;
    ptrdiff_t sp, sr;
    const uint32_t *b;
    int kp;
    float *c;
    int ldc, mr;
    __mmask16 last; /* valid lanes of the last 16 columns */
    float alpha, beta;
    const float *bias; /* mode 3: this tile's first column's bias */
    const float *scale; /* then C[r] *= scale[r] (the fused epilogue), or NULL */
    int mode; /* 0: C = αacc, 1: C = αacc + βC, 2: C = αacc + C, 3: C = αacc + bias */
} tile;

/* The micro-kernel: 6 × nv accumulators live in registers for the whole k
 * loop (24 of the 32 zmm at nv = 4, enough independent chains to cover the
 * dot-product latency), B is read once per pair row, A broadcast per row. */
static inline __attribute__((always_inline)) void tile_run(const tile *t, const int nv)
{
    __m512 acc[MR][4];
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) acc[r][v] = _mm512_setzero_ps();

    const uint32_t *a = t->a, *b = t->b;
    const ptrdiff_t sr = t->sr, sp = t->sp;
    for (int p = 0; p < t->kp; p++) {
        __m512bh bv[4];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) bv[v] = (__m512bh)_mm512_loadu_si512(b + 16 * v);
#pragma GCC unroll 6
        for (int r = 0; r < MR; r++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)a[r * sr]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
        }
        a += sp;
        b += 16 * nv;
    }

    /* locals, so the stores to C need not reload them through t */
    const __m512 va = _mm512_set1_ps(t->alpha), vb = _mm512_set1_ps(t->beta);
    const int mode = t->mode, mr = t->mr;
    const size_t ldc = (size_t)t->ldc;
    const __mmask16 last = t->last;
    float *const c0 = t->c;
    const float *const scale = t->scale;
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
        if (r >= mr) break;
        float *c = c0 + r * ldc;
        /* the stored value times the row's scale: what a pass over the
         * stored C would compute */
        const __m512 vs = _mm512_set1_ps(scale ? scale[r] : 1.0f);
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            __mmask16 m = v == nv - 1 ? last : (__mmask16)0xffff;
            __m512 x;
            if (mode == 0)
                x = _mm512_mul_ps(va, acc[r][v]);
            else if (mode == 1)
                x = _mm512_fmadd_ps(va, acc[r][v], _mm512_mul_ps(vb, load_ps(m, c + 16 * v)));
            else if (mode == 3)
                x = _mm512_fmadd_ps(va, acc[r][v], load_ps(m, t->bias + 16 * v));
            else
                x = _mm512_fmadd_ps(va, acc[r][v], load_ps(m, c + 16 * v));
            if (scale) x = _mm512_mul_ps(x, vs);
            store_ps(c + 16 * v, m, x);
        }
    }
}

static void tile_nv1(const tile *t) { tile_run(t, 1); }
static void tile_nv2(const tile *t) { tile_run(t, 2); }
static void tile_nv3(const tile *t) { tile_run(t, 3); }
static void tile_nv4(const tile *t) { tile_run(t, 4); }

static void (*const tile_fn[5])(const tile *) = {NULL, tile_nv1, tile_nv2, tile_nv3, tile_nv4};

/* GotoBLAS loop order: for each K block, each MC block of A is packed once
 * and swept by every B panel; a B panel (KC × 64 bf16 = 32 KB) stays in L1
 * while the MR-row tiles of the block go by. */
void pt_bf16_avx512_rows(const pt_bf16_job *job, int i_begin, int i_end, uint32_t *apack)
{
    for (int pc = 0; pc < job->k; pc += KC) {
        int kc = job->k - pc < KC ? job->k - pc : KC;
        /* B's panels: pair rows [pc/2, pc/2 + kc/2) of the whole packed B
         * (panel stride kp), or this block alone packed now (stride kpb) */
        const uint32_t *bp = job->bp;
        int kpb = job->kp, pair0 = pc / 2;
        if (job->bblock) {
            pt_bf16_job sub = *job;
            sub.k = kc;
            sub.kp = (kc + 1) / 2;
            sub.bp = job->bblock;
            sub.bblock = NULL;
            sub.b.p = job->b.trans ? elem_at(&job->b, 0, (size_t)pc)
                                   : elem_at(&job->b, (size_t)pc, 0);
            pt_bf16_avx512_pack_b(&sub, 0, sub.kp);
            bp = job->bblock;
            kpb = sub.kp;
            pair0 = 0;
        }
        tile t;
        t.kp = (kc + 1) / 2;
        t.ldc = job->ldc;
        t.alpha = job->alpha;
        t.beta = job->beta;
        t.mode = pc > 0 ? 2 : job->bias ? 3 : job->beta != 0.0f ? 1 : 0;
        for (int ic = i_begin; ic < i_end; ic += MC) {
            int mc = i_end - ic < MC ? i_end - ic : MC;
            int mcp = (mc + MR - 1) / MR * MR;
            pack_a(job, apack, ic, mc, mcp, pc, kc, &t.sp, &t.sr);
            for (int n0 = 0; n0 < job->n; n0 += NP) {
                int width = job->n - n0 < NP ? job->n - n0 : NP, nv = (width + 15) / 16;
                t.b = bp + (size_t)(n0 / NP) * kpb * NP + (size_t)pair0 * 16 * nv;
                t.last = lanes(width - 16 * (nv - 1));
                t.bias = job->bias ? job->bias + n0 : NULL;
                t.scale = NULL;
                for (int ir = 0; ir < mc; ir += MR) {
                    t.a = apack + ir * t.sr;
                    t.mr = mc - ir < MR ? mc - ir : MR;
                    t.c = job->c + (size_t)(ic + ir) * job->ldc + n0;
                    tile_fn[nv](&t);
                }
            }
        }
    }
}

/* The fused epilogue (pt_bf16_gemm_ex, k ≤ KC: one reduction block): the
 * tiles of a band of MR rows sweep every panel of B (a whole B of k ≤ 256
 * and n ≤ 128 is ≤ 64 KB, L1/L2-resident), then the band — still in L1 —
 * gets map and its bf16 copy.  A stored as is in bf16 with even k and lda
 * (the previous layer's bf16 copy) is read in place: its rows already are
 * the packed layout; only a last band of fewer than MR rows is copied (the
 * micro-kernel reads all MR rows). */
static void rows_fused(const pt_bf16_job *job, int i_begin, int i_end, uint32_t *apack)
{
    const int kc = job->k, pairs = (kc + 1) / 2, n = job->n;
    const uint32_t *bp = job->bp;
    if (job->bblock) {
        pt_bf16_job sub = *job;
        sub.bp = job->bblock;
        sub.bblock = NULL;
        pt_bf16_avx512_pack_b(&sub, 0, sub.kp);
        bp = job->bblock;
    }
    float *band = (float *)(apack + PT_BF16_APACK_PAIRS);
    const int inplace = pt_bf16_a_in_place(job);
    const size_t lda = (size_t)job->a.ld;
    float *const cbase = job->c;
    const int ldc = cbase ? job->ldc : n;
    tile t;
    t.kp = pairs;
    t.ldc = ldc;
    t.alpha = job->alpha;
    t.beta = job->beta;
    t.mode = job->bias ? 3 : job->beta != 0.0f ? 1 : 0;
    for (int ic = i_begin; ic < i_end; ic += MC) {
        int mc = i_end - ic < MC ? i_end - ic : MC;
        int mcp = (mc + MR - 1) / MR * MR;
        if (!inplace) pack_a(job, apack, ic, mc, mcp, 0, kc, &t.sp, &t.sr);
        for (int ir = 0; ir < mc; ir += MR) {
            const int row = ic + ir;
            t.mr = mc - ir < MR ? mc - ir : MR;
            if (!inplace) {
                t.a = apack + ir * t.sr;
            } else if (t.mr == MR) {
                t.a = (const uint32_t *)((const uint16_t *)job->a.p + (size_t)row * lda);
                t.sp = 1;
                t.sr = (ptrdiff_t)(lda / 2);
            } else {
                for (int r = 0; r < MR; r++) {
                    if (r < t.mr)
                        memcpy(apack + (size_t)r * pairs,
                               (const uint16_t *)job->a.p + (size_t)(row + r) * lda,
                               (size_t)pairs * sizeof(uint32_t));
                    else
                        memset(apack + (size_t)r * pairs, 0, (size_t)pairs * sizeof(uint32_t));
                }
                t.a = apack;
                t.sp = 1;
                t.sr = pairs;
            }
            float *crow = cbase ? cbase + (size_t)row * ldc : band;
            t.scale = job->row_scale ? job->row_scale + row : NULL;
            for (int n0 = 0; n0 < n; n0 += NP) {
                int width = n - n0 < NP ? n - n0 : NP, nv = (width + 15) / 16;
                t.b = bp + (size_t)(n0 / NP) * job->kp * NP;
                t.last = lanes(width - 16 * (nv - 1));
                t.bias = job->bias ? job->bias + n0 : NULL;
                t.c = crow + n0;
                tile_fn[nv](&t);
            }
            if (job->map)
                job->map(crow, job->aux ? job->aux + (size_t)row * n : NULL, NULL, t.mr, n);
            if (job->h) {
                pt_bf16 *h = job->h + (size_t)row * job->ldh;
                if (ldc == n && job->ldh == n)
                    convert_flat(h, crow, (size_t)t.mr * n);
                else
                    for (int r = 0; r < t.mr; r++)
                        convert_run(h + (size_t)r * job->ldh, crow + (size_t)r * ldc, 1, n, n);
            }
        }
    }
}

void pt_bf16_avx512_rows_fused(const pt_bf16_job *job, int i_begin, int i_end, uint32_t *apack)
{
    rows_fused(job, i_begin, i_end, apack);
}
