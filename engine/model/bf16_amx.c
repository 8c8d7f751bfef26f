/* bf16_amx.c — the AMX product kernel (tdpbf16ps on 16 × 16 fp32 tiles) for
 * the products whose op(A) is not transposed; bf16.c sends them here when
 * the AMX kernel is active (bf16.h).
 *
 * AMX multiplies a tile of A (16 rows × 16 bf16 pairs, rows of up to 64
 * bytes at any stride) by a tile of B in the "VNNI" layout (16 pair rows ×
 * 16 columns, one uint32 = the pair (B(2p, col), B(2p+1, col)) per column):
 * the pair-interleaved panels the AVX512-BF16 kernel already packs
 * (bf16_internal.h) are that layout, a tile of B is 16 columns of a panel
 * at a stride of the panel's width; rows of op(A) in bf16 are the A tile's
 * layout (pt_bf16_avx512_pack_a's NoTrans packing, or the caller's rows read
 * in place).  A strip of 16 rows of C runs over each 64-column panel with
 * its 4 tiles held in tmm0-3 through the K block; the tiles are stored to a
 * small buffer and the stores to C (alpha, beta, bias, row scale) and the
 * fused epilogue (map, σ̃, column sums, bf16 copies: bf16_avx512.c, per
 * group of PT_BF16_GROUP rows) run on those rows as on the AVX512-BF16
 * kernel's: the same arithmetic per element after the sums, which round as
 * pt_bf16_gemm_ref_amx says (the tiles' own order).
 *
 * Tile registers (a configuration per thread, loaded on the thread's first
 * product and when the tail changes; loading it zeroes the tiles):
 *   tmm0-3  C, 16 rows × 16 fp32
 *   tmm4    A, 16 rows × 16 pairs        tmm5  A, the K block's last tile:
 *   tmm6    B, 16 pair rows × 16 columns tmm7  B,   `tail` pairs (< 16)
 * Built for AMX and AVX-512 (the pragma below): nothing here runs before
 * pt_cpu_has_amx() said yes (the OS granted tile data: bf16_cpu.c). */
#include "engine/model/bf16_internal.h"

#include <string.h>

#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512bf16,avx512bw,avx512vl")

#include "engine/model/bf16_avx512_vec.h"

#define NP PT_BF16_NP
#define MC PT_BF16_MC
#define KC PT_BF16_KC
#define GROUP PT_BF16_GROUP
#define TK PT_BF16_AMX_TK
#define SUPER PT_BF16_AMX_SUPER
_Static_assert(MC % SUPER == 0 && SUPER % GROUP == 0 && SUPER % 16 == 0,
               "strips and groups start at a block's first row");

/* LDTILECFG's 64-byte operand (palette 1) */
typedef struct tilecfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

/* the tail (pairs of a K block's last, short tile) of this thread's loaded
 * configuration; -1: none loaded yet */
static _Thread_local int cfg_tail = -1;

static void tiles_configure(int tail)
{
    if (cfg_tail == tail) return;
    tilecfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    if (tail) {
        cfg.colsb[5] = (uint16_t)(4 * tail);
        cfg.rows[7] = (uint8_t)tail;
    }
    _tile_loadconfig(&cfg);
    cfg_tail = tail;
}

/* One K step of a strip: A's tile ta (16 rows of up to TK pairs, step t)
 * against nv column tiles of B loaded one after the other into tile tb,
 * summed into C's tiles 0..nv-1.  A macro, not a function: the tile
 * numbers are part of the instruction (GCC's _tile_* paste them into the
 * assembly), and the full steps (tiles 4, 6) and the last K block's short
 * step (tiles 5, 7, configured by tiles_configure) differ only in them. */
#define STRIP_STEP(ta, tb, t)                                                            \
    do {                                                                                 \
        const char *at_ = a + (size_t)(t) * 4 * TK, *bt_ = b + (size_t)(t) * TK * sb;    \
        _tile_loadd(ta, at_, sa);                                                        \
        _tile_loadd(tb, bt_, sb);                                                        \
        _tile_dpbf16ps(0, ta, tb);                                                       \
        if (nv > 1) {                                                                    \
            _tile_loadd(tb, bt_ + 64, sb);                                               \
            _tile_dpbf16ps(1, ta, tb);                                                   \
        }                                                                                \
        if (nv > 2) {                                                                    \
            _tile_loadd(tb, bt_ + 128, sb);                                              \
            _tile_dpbf16ps(2, ta, tb);                                                   \
        }                                                                                \
        if (nv > 3) {                                                                    \
            _tile_loadd(tb, bt_ + 192, sb);                                              \
            _tile_dpbf16ps(3, ta, tb);                                                   \
        }                                                                                \
    } while (0)

/* One strip of 16 rows × nv tiles of C over `pairs` pairs of the K block:
 * A's rows at a (sa bytes apart, pair t·16 at byte 64·t), B's pair rows at
 * b (sb bytes apart, column tile v at byte 64·v); the sums stored to out
 * (16 rows of NP floats). */
static inline __attribute__((always_inline)) void strip_run(const char *a, size_t sa,
                                                           const char *b, size_t sb, int pairs,
                                                           int nv, float *out)
{
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const int full = pairs / TK;
    for (int t = 0; t < full; t++) STRIP_STEP(4, 6, t);
    if (pairs % TK) STRIP_STEP(5, 7, full);
    const size_t so = NP * sizeof(float);
    _tile_stored(0, out, so);
    if (nv > 1) _tile_stored(1, out + 16, so);
    if (nv > 2) _tile_stored(2, out + 32, so);
    if (nv > 3) _tile_stored(3, out + 48, so);
}

static void strip_nv1(const char *a, size_t sa, const char *b, size_t sb, int p, float *o)
{
    strip_run(a, sa, b, sb, p, 1, o);
}
static void strip_nv2(const char *a, size_t sa, const char *b, size_t sb, int p, float *o)
{
    strip_run(a, sa, b, sb, p, 2, o);
}
static void strip_nv3(const char *a, size_t sa, const char *b, size_t sb, int p, float *o)
{
    strip_run(a, sa, b, sb, p, 3, o);
}
static void strip_nv4(const char *a, size_t sa, const char *b, size_t sb, int p, float *o)
{
    strip_run(a, sa, b, sb, p, 4, o);
}

static void (*const strip_fn[5])(const char *, size_t, const char *, size_t, int, float *) = {
    NULL, strip_nv1, strip_nv2, strip_nv3, strip_nv4};

/* How one strip's sums reach C: the stores of the AVX512-BF16 micro-kernel
 * (bf16_avx512.c tile_run), element by element the same operations. */
typedef struct stores {
    int mode; /* 0: C = αacc, 1: C = αacc + βC, 2: C = αacc + C, 3: C = αacc + bias */
    float alpha, beta;
    const float *bias;  /* the panel's first column's bias (mode 3) */
    const float *scale; /* the strip's first row's scale, or NULL */
} stores;

static void strip_store(const stores *s, const float *out, float *c, size_t ldc, int rows,
                        int width)
{
    const __m512 va = _mm512_set1_ps(s->alpha), vb = _mm512_set1_ps(s->beta);
    for (int r = 0; r < rows; r++) {
        float *cr = c + (size_t)r * ldc;
        const float *acc = out + (size_t)r * NP;
        const __m512 vs = _mm512_set1_ps(s->scale ? s->scale[r] : 1.0f);
        for (int j = 0; j < width; j += 16) {
            const __mmask16 m = lanes(width - j);
            const __m512 x0 = _mm512_loadu_ps(acc + j);
            __m512 x;
            if (s->mode == 0)
                x = _mm512_mul_ps(va, x0);
            else if (s->mode == 1)
                x = _mm512_fmadd_ps(va, x0, _mm512_mul_ps(vb, load_ps(m, cr + j)));
            else if (s->mode == 3)
                x = _mm512_fmadd_ps(va, x0, load_ps(m, s->bias + j));
            else
                x = _mm512_fmadd_ps(va, x0, load_ps(m, cr + j));
            if (s->scale) x = _mm512_mul_ps(x, vs);
            store_ps(cr + j, m, x);
        }
    }
}

/* op(A) transposed (a weight gradient dW = dYᵀ·X: A stored [k][m]): the
 * pairs along k that vdpbf16ps takes ([p][m], pt_bf16_avx512_pack_a's layout,
 * or the caller's pairs in place) transposed 16 × 16 uint32 at a time into
 * rows of A tiles: row r of the block = its pairs p < pairs, ldt apart (16
 * per tile; rows and pairs past the block's are zeros, never multiplied
 * into C but read by the last strip's tiles).  Returns the rows. */
static const uint32_t *transpose_a(const pt_bf16_job *job, uint32_t *apack, uint32_t *rows,
                                   int ic, int mc, int mcp, int pc, int kc, int ldt)
{
    ptrdiff_t sp, sr;
    const uint32_t *src = pt_bf16_avx512_pack_a(job, apack, ic, mc, mcp, pc, kc, &sp, &sr);
    const int pairs = (kc + 1) / 2;
    for (int p0 = 0; p0 < pairs; p0 += 16) {
        for (int c0 = 0; c0 < mcp; c0 += 16) {
            __m512i r[16];
            for (int i = 0; i < 16; i++)
                r[i] = p0 + i < pairs ? _mm512_loadu_si512(src + (size_t)(p0 + i) * sp + c0)
                                      : _mm512_setzero_si512();
            transpose16(r);
            for (int j = 0; j < 16; j++) _mm512_storeu_si512(rows + (size_t)(c0 + j) * ldt + p0, r[j]);
        }
    }
    return rows;
}

/* Where a strip's A tiles start (bytes between rows in *sa): op(A)'s bf16
 * rows in place when they are the layout (pt_bf16_a_in_place) and the strip
 * has 16 rows, else rows [row, row+rows) of the K block [pc, pc+kc) copied
 * (in place) or from the block's packing (abase, sr uint32 per row) */
static const char *strip_a(const pt_bf16_job *job, int inplace, const uint32_t *abase,
                           ptrdiff_t sr, int ic, int ir, int rows, int pc, int pairs,
                           uint32_t *copy, size_t *sa)
{
    if (!inplace) {
        *sa = (size_t)sr * 4;
        return (const char *)(abase + (size_t)ir * sr);
    }
    const size_t lda = (size_t)job->a.ld;
    const uint16_t *src = (const uint16_t *)job->a.p + (size_t)(ic + ir) * lda + pc;
    if (rows == 16) {
        *sa = lda * 2;
        return (const char *)src;
    }
    /* the last strip's rows and zeros up to 16 (tiles read all 16) */
    for (int r = 0; r < 16; r++) {
        if (r < rows)
            memcpy(copy + (size_t)r * pairs, src + (size_t)r * lda,
                   (size_t)pairs * sizeof(uint32_t));
        else
            memset(copy + (size_t)r * pairs, 0, (size_t)pairs * sizeof(uint32_t));
    }
    *sa = (size_t)pairs * 4;
    return (const char *)copy;
}

void pt_bf16_amx_rows(const pt_bf16_job *job, int i_begin, int i_end, uint32_t *apack)
{
    const int n = job->n, fused = pt_bf16_job_fused(job);
    const int inplace = pt_bf16_a_in_place(job);
    uint32_t *const arows = apack + PT_BF16_APACK_PAIRS; /* transpose_a's */
    float *const band = (float *)(arows + PT_BF16_APACK_PAIRS);
    float *const out = band + (size_t)SUPER * n;
    float *const cbase = job->c;
    const int ldc = cbase ? job->ldc : n;
    /* the last K block's short tile, if any */
    const int klast = (job->k - 1) / KC * KC;
    tiles_configure(((job->k - klast + 1) / 2) % TK);
    for (int pc = 0; pc < job->k; pc += KC) {
        const int kc = job->k - pc < KC ? job->k - pc : KC, pairs = (kc + 1) / 2;
        int kpb, pair0;
        const uint32_t *bp = pt_bf16_avx512_b_block(job, pc, kc, &kpb, &pair0);
        stores st = {.mode = pc > 0 ? 2 : job->bias ? 3 : job->beta != 0.0f ? 1 : 0,
                     .alpha = job->alpha, .beta = job->beta};
        for (int ic = i_begin; ic < i_end; ic += MC) {
            const int mc = i_end - ic < MC ? i_end - ic : MC, mcp = (mc + 15) / 16 * 16;
            ptrdiff_t sp = 1, sr = pairs;
            const uint32_t *abase = NULL;
            if (job->a.trans) {
                sr = (pairs + 15) / 16 * 16;
                abase = transpose_a(job, apack, arows, ic, mc, mcp, pc, kc, (int)sr);
            } else if (!inplace) {
                abase = pt_bf16_avx512_pack_a(job, apack, ic, mc, mcp, pc, kc, &sp, &sr);
            }
            int epi = 0; /* rows of the block whose epilogue ran */
            for (int ir = 0; ir < mc; ir += 16) {
                const int rows = mc - ir < 16 ? mc - ir : 16, row = ic + ir;
                size_t sa;
                const char *a = strip_a(job, inplace, abase, sr, ic, ir, rows, pc, pairs, apack,
                                        &sa);
                float *crow = cbase ? cbase + (size_t)row * ldc : band + (size_t)(ir % SUPER) * n;
                st.scale = job->row_scale ? job->row_scale + row : NULL;
                for (int n0 = 0; n0 < n; n0 += NP) {
                    const int width = n - n0 < NP ? n - n0 : NP, nv = (width + 15) / 16;
                    const char *b;
                    size_t sb;
                    if (job->b.pairs) {
                        b = (const char *)((const uint32_t *)job->b.p +
                                           (size_t)(pc / 2) * job->b.ld + n0);
                        sb = (size_t)job->b.ld * 4;
                    } else {
                        b = (const char *)(bp + (size_t)(n0 / NP) * kpb * NP +
                                           (size_t)pair0 * 16 * nv);
                        sb = (size_t)16 * nv * 4;
                    }
                    strip_fn[nv](a, sa, b, sb, pairs, out);
                    st.bias = job->bias ? job->bias + n0 : NULL;
                    strip_store(&st, out, crow + n0, (size_t)ldc, rows, width);
                }
                if (!fused) continue;
                /* the groups whose rows are all stored */
                const int done = ir + rows;
                while (epi < done && (epi + GROUP <= done || done == mc)) {
                    const int g = done - epi < GROUP ? done - epi : GROUP;
                    float *gc = cbase ? cbase + (size_t)(ic + epi) * ldc
                                      : band + (size_t)(epi % SUPER) * n;
                    pt_bf16_avx512_group_epilogue(job, gc, ldc, ic + epi, g);
                    epi += g;
                }
            }
        }
    }
}
