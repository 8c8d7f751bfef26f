/* bf16_avx512.c — the AVX512-BF16 product kernel: the 6×64 micro-kernel
 * and the cache blocking around it (A and B are packed into the
 * pair-interleaved layouts it multiplies by bf16_pack_avx512.c).
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
#include "engine/model/bf16_ssp.h"

#include <string.h>

/* fma: the 4-lane tail (tile_run_q) uses _mm_fmadd_ps, an FMA instruction,
 * not AVX-512F; the release build has it from -march, make asan does not */
#pragma GCC target("avx512f,avx512bf16,avx512bw,avx512vl,fma")

#include "engine/model/bf16_avx512_vec.h"

#define MR PT_BF16_MR
#define NP PT_BF16_NP
#define MC PT_BF16_MC
#define KC PT_BF16_KC
#define GROUP PT_BF16_GROUP
/* groups ahead whose aux rows are prefetched (rows_fused): 1, 2 and 4
 * measured alike (bench/bf16_filter, dS1 with its σ1 multiply) */
#define PF_GROUPS 2

/* One MR × (16·nv) tile of C. */
typedef struct tile {
    const uint32_t *a;
    ptrdiff_t sp, sr;
    const uint32_t *b;
    ptrdiff_t bs; /* uint32 from one pair row of B to the next */
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
    const ptrdiff_t sr = t->sr, sp = t->sp, bs = t->bs;
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
        b += bs;
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

/* A tile whose last ≤ 4 columns (a 100-wide row's 96..99: 4 of the 16
 * lanes its last vector would compute) are computed for 4 rows in one
 * vector: lanes 4i..4i+3 of q[0] are row i's, of q[1] row 4 + i's (lanes
 * 8-15 unused), so the tail costs 2 vdpbf16ps a pair step instead of MR.
 * The A pairs are the rows' broadcasts blended in 4-lane groups and B's
 * 4 tail pairs are broadcast to the 4 groups: every lane sees the pairs
 * tile_run's lane of that row and column sees, in the same order, so the
 * bits are tile_run's.  nv full vectors before the tail (nv ≤ 2: 6·nv + 2
 * accumulators, the blends and B in the 32 zmm). */
static inline __attribute__((always_inline)) void tile_run_q(const tile *t, const int nv)
{
    _Static_assert(MR == 6, "the tail's two vectors hold 4 + 2 rows");
    __m512 acc[MR][2], q[2];
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) acc[r][v] = _mm512_setzero_ps();
    q[0] = q[1] = _mm512_setzero_ps();

    const uint32_t *a = t->a, *b = t->b;
    const ptrdiff_t sr = t->sr, sp = t->sp, bs = t->bs;
    for (int p = 0; p < t->kp; p++) {
        __m512bh bv[2];
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) bv[v] = (__m512bh)_mm512_loadu_si512(b + 16 * v);
        const __m512bh bq =
            (__m512bh)_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(b + 16 * nv)));
        __m512i av[MR];
#pragma GCC unroll 6
        for (int r = 0; r < MR; r++) {
            av[r] = _mm512_set1_epi32((int)a[r * sr]);
#pragma GCC unroll 2
            for (int v = 0; v < nv; v++)
                acc[r][v] = _mm512_dpbf16_ps(acc[r][v], (__m512bh)av[r], bv[v]);
        }
        __m512i a03 = _mm512_mask_blend_epi32(0x00f0, av[0], av[1]);
        a03 = _mm512_mask_blend_epi32(0x0f00, a03, av[2]);
        a03 = _mm512_mask_blend_epi32(0xf000, a03, av[3]);
        const __m512i a45 = _mm512_mask_blend_epi32(0x00f0, av[4], av[5]);
        q[0] = _mm512_dpbf16_ps(q[0], (__m512bh)a03, bq);
        q[1] = _mm512_dpbf16_ps(q[1], (__m512bh)a45, bq);
        a += sp;
        b += bs;
    }

    const __m512 va = _mm512_set1_ps(t->alpha), vb = _mm512_set1_ps(t->beta);
    const __m128 qa = _mm512_castps512_ps128(va), qb = _mm512_castps512_ps128(vb);
    const int mode = t->mode, mr = t->mr;
    const size_t ldc = (size_t)t->ldc;
    const __mmask8 qm = (__mmask8)(t->last & 0xf);
    float *const c0 = t->c;
    const float *const scale = t->scale;
    float qs[2][16]; /* the tails' lanes, read back 4 at a time */
    _mm512_storeu_ps(qs[0], q[0]);
    _mm512_storeu_ps(qs[1], q[1]);
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
        if (r >= mr) break;
        float *c = c0 + r * ldc;
        const __m512 vs = _mm512_set1_ps(scale ? scale[r] : 1.0f);
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) {
            __m512 x;
            if (mode == 0)
                x = _mm512_mul_ps(va, acc[r][v]);
            else if (mode == 1)
                x = _mm512_fmadd_ps(va, acc[r][v], _mm512_mul_ps(vb, _mm512_loadu_ps(c + 16 * v)));
            else if (mode == 3)
                x = _mm512_fmadd_ps(va, acc[r][v], _mm512_loadu_ps(t->bias + 16 * v));
            else
                x = _mm512_fmadd_ps(va, acc[r][v], _mm512_loadu_ps(c + 16 * v));
            if (scale) x = _mm512_mul_ps(x, vs);
            _mm512_storeu_ps(c + 16 * v, x);
        }
        /* the tail: tile_run's operations on 4 lanes */
        float *ct = c + 16 * nv;
        const __m128 y = _mm_loadu_ps(&qs[r / 4][4 * (r % 4)]);
        __m128 x;
        if (mode == 0)
            x = _mm_mul_ps(qa, y);
        else if (mode == 1)
            x = _mm_fmadd_ps(qa, y, _mm_mul_ps(qb, _mm_maskz_loadu_ps(qm, ct)));
        else if (mode == 3)
            x = _mm_fmadd_ps(qa, y, _mm_maskz_loadu_ps(qm, t->bias + 16 * nv));
        else
            x = _mm_fmadd_ps(qa, y, _mm_maskz_loadu_ps(qm, ct));
        if (scale) x = _mm_mul_ps(x, _mm512_castps512_ps128(vs));
        if (qm == 0xf) _mm_storeu_ps(ct, x);
        else _mm_mask_storeu_ps(ct, qm, x);
    }
}

static void tile_q0(const tile *t) { tile_run_q(t, 0); }
static void tile_q1(const tile *t) { tile_run_q(t, 1); }
static void tile_q2(const tile *t) { tile_run_q(t, 2); }

static void (*const tile_q_fn[3])(const tile *) = {tile_q0, tile_q1, tile_q2};

/* the tile for a panel of `width` columns: the 4-row tail when its last
 * vector would hold ≤ 4 columns and nv ≤ 3 */
static void tile_nv1(const tile *t) { tile_run(t, 1); }
static void tile_nv2(const tile *t) { tile_run(t, 2); }
static void tile_nv3(const tile *t) { tile_run(t, 3); }
static void tile_nv4(const tile *t) { tile_run(t, 4); }

static void (*const tile_fn[5])(const tile *) = {NULL, tile_nv1, tile_nv2, tile_nv3, tile_nv4};

/* the tile for a panel of `width` columns: tile_run_q when its last vector
 * would hold ≤ 4 columns (a 100-wide row's second panel: 36 columns, 2
 * vectors and the tail; bench/bf16_filter in docs/performance.md) */
static inline void tile_call(const tile *t, int width)
{
    const int nv = (width + 15) / 16;
    if (width - 16 * (nv - 1) <= 4 && nv <= 3) tile_q_fn[nv - 1](t);
    else tile_fn[nv](t);
}

/* GotoBLAS loop order: for each K block, each MC block of A is packed once
 * and swept by every B panel; a B panel (KC × 64 bf16 = 32 KB) stays in L1
 * while the MR-row tiles of the block go by. */
void pt_bf16_avx512_rows(const pt_bf16_job *job, int i_begin, int i_end, uint32_t *apack)
{
    for (int pc = 0; pc < job->k; pc += KC) {
        int kc = job->k - pc < KC ? job->k - pc : KC;
        /* B's panels: pair rows [pc/2, pc/2 + kc/2) of the whole packed B
         * (panel stride kp), or this block alone packed now (stride kpb) */
        int kpb, pair0;
        const uint32_t *bp = pt_bf16_avx512_b_block(job, pc, kc, &kpb, &pair0);
        tile t;
        t.kp = (kc + 1) / 2;
        t.ldc = job->ldc;
        t.alpha = job->alpha;
        t.beta = job->beta;
        t.mode = pc > 0 ? 2 : job->bias ? 3 : job->beta != 0.0f ? 1 : 0;
        for (int ic = i_begin; ic < i_end; ic += MC) {
            int mc = i_end - ic < MC ? i_end - ic : MC;
            int mcp = (mc + MR - 1) / MR * MR;
            const uint32_t *abase =
                pt_bf16_avx512_pack_a(job, apack, ic, mc, mcp, pc, kc, &t.sp, &t.sr);
            for (int n0 = 0; n0 < job->n; n0 += NP) {
                int width = job->n - n0 < NP ? job->n - n0 : NP, nv = (width + 15) / 16;
                if (job->b.pairs) {
                    /* B's pairs in place: pair row p at p·ldb, panels side by side */
                    t.b = (const uint32_t *)job->b.p + (size_t)(pc / 2) * job->b.ld + n0;
                    t.bs = job->b.ld;
                } else {
                    t.b = bp + (size_t)(n0 / NP) * kpb * NP + (size_t)pair0 * 16 * nv;
                    t.bs = 16 * nv;
                }
                t.last = lanes(width - 16 * (nv - 1));
                t.bias = job->bias ? job->bias + n0 : NULL;
                t.scale = NULL;
                for (int ir = 0; ir < mc; ir += MR) {
                    t.a = abase + ir * t.sr;
                    t.mr = mc - ir < MR ? mc - ir : MR;
                    t.c = job->c + (size_t)(ic + ir) * job->ldc + n0;
                    tile_call(&t, width);
                }
            }
        }
    }
}

/* sums[j] += Σ_r x[r][j]: the group's rows summed in float in row order,
 * that sum added in double (the epilogue's col_sums: a bias gradient while
 * its rows are in L1) */
static void col_sums_add(double *sums, const float *x, int ldx, int rows, int n)
{
    for (int j = 0; j < n; j += 16) {
        const __mmask16 m = lanes(n - j);
        __m512 v = load_ps(m, x + j);
        for (int r = 1; r < rows; r++) v = _mm512_add_ps(v, load_ps(m, x + (size_t)r * ldx + j));
        const __m512d v0 = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
        const __m512d v1 =
            _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
        if (m == 0xffff) { /* plain loads and stores (load_ps) */
            _mm512_storeu_pd(sums + j, _mm512_add_pd(_mm512_loadu_pd(sums + j), v0));
            _mm512_storeu_pd(sums + j + 8, _mm512_add_pd(_mm512_loadu_pd(sums + j + 8), v1));
        } else {
            const __mmask8 m0 = (__mmask8)m, m1 = (__mmask8)(m >> 8);
            _mm512_mask_storeu_pd(sums + j, m0,
                                  _mm512_add_pd(_mm512_maskz_loadu_pd(m0, sums + j), v0));
            _mm512_mask_storeu_pd(sums + j + 8, m1,
                                  _mm512_add_pd(_mm512_maskz_loadu_pd(m1, sums + j + 8), v1));
        }
    }
}

void pt_bf16_avx512_group_epilogue(const pt_bf16_job *job, float *gc, int ldc, int grow,
                                   int rows)
{
    const int n = job->n;
    /* bf16_ssp.h's softplus with C not kept and nothing else reading the
     * band's fp32 values (the first filter product, the node layer's u):
     * applied as the rounding below loads the band, one pass over the
     * group instead of a map pass and a rounding pass (the same bits) */
    const int ssp = job->map == pt_bf16_ssp_map && !job->c && !job->dssp_s1 &&
                    !job->col_sums && (job->pairs || job->h);
    if (job->map && !ssp)
        job->map(gc, job->aux ? job->aux + (size_t)grow * n : NULL, NULL, rows, n);
    if (job->dssp_s1) {
        /* σ derived from the group's s1 (grow is even: a pair row) */
        const size_t at = job->dssp_fmt == PT_BF16_FMT_PAIRS
                              ? (size_t)(grow / 2) * (size_t)job->dssp_ld * 4
                              : (size_t)grow * (size_t)job->dssp_ld * 2;
        pt_bf16_dssp_mul_avx512(gc, (size_t)ldc, rows, n, (const char *)job->dssp_s1 + at,
                                job->dssp_fmt, (size_t)job->dssp_ld);
    }
    if (job->col_sums) col_sums_add(job->col_sums, gc, ldc, rows, n);
    if (job->pairs) {
        /* grow is even (groups start at multiples of MR) */
        uint32_t *const p = job->pairs + (size_t)(grow / 2) * pt_bf16_pairs_ld_(n);
        pt_bf16 *const h = job->h ? job->h + (size_t)grow * job->ldh : NULL;
        if (ssp)
            pt_bf16_avx512_ssp_pairs_rows(p, pt_bf16_pairs_ld_(n), gc, (size_t)ldc, rows, n, h,
                                          (size_t)job->ldh);
        else
            pt_bf16_avx512_pairs_rows(p, pt_bf16_pairs_ld_(n), gc, (size_t)ldc, rows, n, h,
                                      (size_t)job->ldh, 0);
    } else if (job->h) {
        if (ssp)
            pt_bf16_avx512_ssp_round_rows(job->h + (size_t)grow * job->ldh, job->ldh, gc, ldc,
                                          rows, n);
        else
            pt_bf16_avx512_round_rows(job->h + (size_t)grow * job->ldh, job->ldh, gc, ldc, rows,
                                      n);
    }
}

/* The fused epilogue (pt_bf16_gemm_ex, k ≤ KC: one reduction block): the
 * tiles of a band of MR rows sweep every panel of B (a whole B of k ≤ 256
 * and n ≤ 128 is ≤ 64 KB, L1/L2-resident); every GROUP rows (two bands,
 * still in L1) get map and their bf16 copy in one call (elementwise: the
 * same bits).  The shifted softplus runs 8 vectors at a time and left a
 * 6-row band of 100 columns a long tail; measured on the filter's first
 * product (bench/bf16_filter, water, load 7): groups of 6 / 12 / 24 / 48
 * rows 1.35-1.40 / 1.15-1.25 / 1.34-1.53 / 1.44-1.60 ms a block (groups
 * of 12 also best on whole water steps).  A stored as is in bf16 with even
 * k and lda (the previous layer's bf16 copy) is read in place: its rows
 * already are the packed layout; only a last band of fewer than MR rows is
 * copied (the micro-kernel reads all MR rows). */
static void rows_fused(const pt_bf16_job *job, int i_begin, int i_end, uint32_t *apack)
{
    const int kc = job->k, pairs = (kc + 1) / 2, n = job->n;
    const uint32_t *bp = job->bp;
    if (job->bblock && !job->b.pairs) {
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
        const uint32_t *abase =
            inplace ? NULL
                    : pt_bf16_avx512_pack_a(job, apack, ic, mc, mcp, 0, kc, &t.sp, &t.sr);
        for (int ir = 0; ir < mc; ir += MR) {
            const int row = ic + ir;
            t.mr = mc - ir < MR ? mc - ir : MR;
            if (!inplace) {
                t.a = abase + ir * t.sr;
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
            /* rows of C in their group: the group's epilogue runs once its
             * last band is stored */
            const int g0 = ir / GROUP * GROUP;
            const int ahead = row + PF_GROUPS * GROUP;
            if (job->aux && job->aux_read && ir == g0 && ahead < i_end) {
                /* a later group's aux rows fetched while these tiles run:
                 * they come from memory, and the map waited on a group's
                 * worth of misses (dS1 with σ1: 1.41 -> 1.20-1.29 ms a
                 * water block).  Not for an aux the map only writes (the
                 * softplus' σ1 goes past the caches) */
                const int end = ahead + GROUP < i_end ? ahead + GROUP : i_end;
                const char *p = (const char *)(job->aux + (size_t)ahead * n);
                const char *p_end = (const char *)(job->aux + (size_t)end * n);
                for (; p < p_end; p += 64) __builtin_prefetch(p, 1, 3);
            }
            float *crow = cbase ? cbase + (size_t)row * ldc : band + (size_t)(ir - g0) * n;
            t.scale = job->row_scale ? job->row_scale + row : NULL;
            for (int n0 = 0; n0 < n; n0 += NP) {
                int width = n - n0 < NP ? n - n0 : NP, nv = (width + 15) / 16;
                if (job->b.pairs) {
                    t.b = (const uint32_t *)job->b.p + n0;
                    t.bs = job->b.ld;
                } else {
                    t.b = bp + (size_t)(n0 / NP) * job->kp * NP;
                    t.bs = 16 * nv;
                }
                t.last = lanes(width - 16 * (nv - 1));
                t.bias = job->bias ? job->bias + n0 : NULL;
                t.c = crow + n0;
                tile_call(&t, width);
            }
            if (ir + t.mr < mc && (ir + t.mr) % GROUP != 0) continue;
            const int grow = ic + g0, rows = ir + t.mr - g0;
            pt_bf16_avx512_group_epilogue(job, cbase ? cbase + (size_t)grow * ldc : band, ldc,
                                          grow, rows);
        }
    }
}

void pt_bf16_avx512_rows_fused(const pt_bf16_job *job, int i_begin, int i_end, uint32_t *apack)
{
    rows_fused(job, i_begin, i_end, apack);
}
