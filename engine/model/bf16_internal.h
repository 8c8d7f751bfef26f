/* bf16_internal.h — what bf16.c (API, dispatch, threads) shares with
 * bf16_avx512.c (the only file compiled for AVX-512): one product described
 * as a job, the packed-B layout, and the blocking constants.
 *
 * Packed B ("VNNI" layout, what vdpbf16ps multiplies): columns are cut into
 * panels of PT_BF16_NP; the last panel is rounded up to a multiple of 16.
 * Panel j starts at bp + j·kp·PT_BF16_NP and holds, for each pair index
 * p < kp = ⌈k/2⌉, one uint32 per column: bf16 B(2p, col) in the low half and
 * B(2p+1, col) in the high half (0 past k or past n). */
#ifndef PT_BF16_INTERNAL_H
#define PT_BF16_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/model/bf16.h"

#define PT_BF16_MR 6   /* rows of C per micro-kernel: 6 × 4 zmm accumulators */
#define PT_BF16_NP 64  /* columns per B panel (4 zmm of 16 fp32) */
#define PT_BF16_MC 240 /* rows of A per packed block (≈120 KB, stays in L2) */
#define PT_BF16_GROUP PT_BF16_EPI_ROWS /* rows of C per fused epilogue call: 2 bands,
                                          divides MC (bf16.h) */
_Static_assert(PT_BF16_MC % PT_BF16_GROUP == 0 && PT_BF16_GROUP % PT_BF16_MR == 0,
               "groups of the epilogue run from row 0 of a product (bf16.h col_sums)");
#define PT_BF16_MAX_THREADS 64 /* pt_bf16_set_threads' bound */

/* One matrix operand as the caller stored it. */
typedef struct pt_bf16_operand {
    const void *p;
    int f32;   /* elements are float (rounded when packed), else pt_bf16 */
    int pairs; /* pt_bf16 pairs along the reduction (bf16.h), read in place */
    int pad;   /* pt_bf16 rows, element k of each 0 for an odd k (PT_BF16_FMT_ROWS_PAD) */
    int trans; /* stored transposed (row-major op(X)ᵀ) */
    int ld;    /* in elements; pairs: uint32 per pair row */
} pt_bf16_operand;

typedef struct pt_bf16_job {
    int m, n, k, kp;       /* kp = (k + 1) / 2 */
    float alpha, beta;
    pt_bf16_operand a, b;
    uint32_t *bp;          /* packed B, pt_bf16_packed_pairs(k, n) entries */
    uint32_t *bblock;      /* set: B is packed here one K block at a time by
                              pt_bf16_avx512_rows (one thread; bp unused),
                              pt_bf16_packed_pairs(min(k, PT_BF16_KC), n) entries */
    const float *bias;     /* n floats added to every row of C (then beta = 0), or NULL */
    float *c;
    int ldc;
    /* the epilogue of pt_bf16_gemm_ex (k ≤ PT_BF16_KC): C[r] *= row_scale[r],
     * then map over bands of rows, then h = bf16(C); c NULL: C's rows live
     * in each worker's band (PT_BF16_GROUP · n floats) */
    const float *row_scale;
    pt_bf16_map map;
    float *aux;
    int aux_read; /* pt_bf16_epilogue.aux_read */
    pt_bf16 *h;
    int ldh;
    uint32_t *pairs; /* the rows of C (after map) as pairs (pt_bf16_pairs_ld(n)) */
    int b_held;      /* pt_bf16_epilogue.b_held */
    const void *dssp_s1; /* pt_bf16_epilogue.dssp_s1: after map, C ⊙= σ̃(s1) */
    int dssp_fmt, dssp_ld;
    double *col_sums; /* pt_bf16_epilogue.col_sums (then one thread) */
    int amx;          /* rows of C computed by pt_bf16_amx_rows (pt_bf16_amx_takes) */
} pt_bf16_job;

/* op(X)(row, col) as a float holding a bf16 value (fp32 operands rounded) */
float pt_bf16_operand_get(const pt_bf16_operand *o, size_t row, size_t col);
/* C = beta·C (alpha = 0 or k = 0); beta = 0 writes zeros without reading */
void pt_bf16_scale_c(float *c, int ldc, int m, int n, float beta);

/* 1 when op(A) is bf16 rows already in the packed layout (k, lda even, or
 * an odd k whose rows end in the zero the pair needs):
 * read in place by the banded loop (pt_bf16_avx512_rows_fused) */
static inline int pt_bf16_a_in_place(const pt_bf16_job *job)
{
    return !job->a.trans && !job->a.f32 && !job->a.pairs && (job->k % 2 == 0 || job->a.pad) &&
           job->a.ld % 2 == 0;
}

/* uint32 per pair row of bf16.h's pairs of width w: w rounded up to 16 (the
 * micro-kernel's B vectors), and 16 more where the 6-row tiles reading them
 * as A would pass that (w = 16: rows 16 and 17) */
static inline int pt_bf16_pairs_ld_(int w)
{
    int ld = (w + 15) / 16 * 16;
    return (w + PT_BF16_MR - 1) / PT_BF16_MR * PT_BF16_MR > ld ? ld + 16 : ld;
}

/* 1 when rows of C need the band epilogue (pt_bf16_avx512_rows' fused loop) */
static inline int pt_bf16_job_fused(const pt_bf16_job *job)
{
    return job->map != NULL || job->h != NULL || job->row_scale != NULL || job->pairs != NULL ||
           job->dssp_s1 != NULL || job->col_sums != NULL;
}

static inline size_t pt_bf16_packed_pairs(int k, int n)
{
    size_t full = (size_t)(n / PT_BF16_NP) * PT_BF16_NP;
    size_t tail = (size_t)((n % PT_BF16_NP + 15) / 16) * 16;
    return (size_t)((k + 1) / 2) * (full + tail);
}

/* uint32 entries of one thread's A packing buffer */
#define PT_BF16_APACK_PAIRS ((size_t)PT_BF16_MC * (PT_BF16_KC / 2))

/* Packs pair rows [p_begin, p_end) of op(B) into job->bp (all panels).  Only
 * after pt_cpu_has_bf16(). */
void pt_bf16_avx512_pack_b(const pt_bf16_job *job, int p_begin, int p_end);
/* B's panels for the K block [pc, pc+kc) (both kernels' block loop): pair
 * rows from *pair0 = pc/2 of the whole packed B (panel stride *kpb =
 * job->kp), or, with a per-block buffer (job->bblock, B not given as
 * pairs), this block alone packed into it now (*pair0 = 0, *kpb = its
 * pairs).  Returns the panels' base.  Only after pt_cpu_has_bf16(). */
const uint32_t *pt_bf16_avx512_b_block(const pt_bf16_job *job, int pc, int kc, int *kpb,
                                       int *pair0);
/* Packs rows [ic, ic+mc) × k [pc, pc+kc) of op(A) into ap (rows padded with
 * zeros to mcp) and returns where they start: pair (r, p) at ·[p·sp + r·sr]
 * (A given as pairs is not copied).  Only after pt_cpu_has_bf16(). */
const uint32_t *pt_bf16_avx512_pack_a(const pt_bf16_job *job, uint32_t *ap, int ic, int mc,
                                      int mcp, int pc, int kc, ptrdiff_t *sp, ptrdiff_t *sr);
/* dst (rows of ldd) = bf16 of the fp32 rows src (rows of lds), n per row. */
void pt_bf16_avx512_round_rows(pt_bf16 *dst, int ldd, const float *src, int lds, int rows, int n);
/* Computes rows [i_begin, i_end) of C from job->bp (or packing each K
 * block of B into job->bblock first); apack has PT_BF16_APACK_PAIRS
 * entries.  Only after pt_cpu_has_bf16(). */
void pt_bf16_avx512_rows(const pt_bf16_job *job, int i_begin, int i_end, uint32_t *apack);
/* The same for a job with the fused epilogue (pt_bf16_job_fused, k ≤
 * PT_BF16_KC; apack then has PT_BF16_APACK_PAIRS entries followed by
 * PT_BF16_BAND_FLOATS(n) floats), or with an A read in place
 * (pt_bf16_a_in_place, k ≤ PT_BF16_KC). */
void pt_bf16_avx512_rows_fused(const pt_bf16_job *job, int i_begin, int i_end, uint32_t *apack);
/* op(B) of job packed from the calling thread's cache of weights, packing
 * it there first if it is not cached or changed (bf16_cache.c); NULL when
 * job's B is not a cacheable weight (the caller packs it). */
const uint32_t *pt_bf16_weight_packed(const pt_bf16_job *job);

/* --- AMX (bf16_amx.c) ---
 * Rows of C go by in strips of 16 (one tile's rows); 48 rows (3 strips, 4
 * epilogue groups) are the unit of a thread's share, so both start at its
 * first row. */
#define PT_BF16_AMX_SUPER 48
/* floats after a worker's A packing: a transposed A's rows (another
 * PT_BF16_APACK_PAIRS), 48 rows of C (c NULL) and one strip's tiles (16 ×
 * PT_BF16_NP) */
#define PT_BF16_AMX_FLOATS(n)                                                                  \
    (PT_BF16_APACK_PAIRS + (size_t)PT_BF16_AMX_SUPER * (size_t)(n) + 16 * PT_BF16_NP)
/* 1 when the AMX kernel runs job on tiles: every product (op(A) transposed
 * is transposed into rows while packed) */
static inline int pt_bf16_amx_takes(const pt_bf16_job *job) { return job != NULL; }
/* Rows [i_begin, i_end) of C (i_begin a multiple of PT_BF16_AMX_SUPER from
 * the product's row 0) on tiles, fused epilogue included; apack has
 * PT_BF16_APACK_PAIRS entries then PT_BF16_AMX_FLOATS(n) floats.  Only
 * after pt_cpu_has_amx(). */
void pt_bf16_amx_rows(const pt_bf16_job *job, int i_begin, int i_end, uint32_t *apack);
/* The fused epilogue's steps after the stores (map, dssp_s1, col_sums,
 * pairs / h) on rows [grow, grow + rows) of C, stored at gc (ldc apart):
 * one group of at most PT_BF16_GROUP rows, grow even.  Only after
 * pt_cpu_has_bf16(). */
void pt_bf16_avx512_group_epilogue(const pt_bf16_job *job, float *gc, int ldc, int grow,
                                   int rows);

/* floats of one worker's group of C rows (the fused epilogue with c NULL) */
#define PT_BF16_BAND_FLOATS(n) ((size_t)PT_BF16_GROUP * (size_t)(n))

/* bf16.h's pairs of the fp32 rows x[0, rows) (lds floats apart), w each,
 * ldp uint32 per pair row (zeros from w), and with rows_h set the same
 * rounding as plain bf16 rows (ldh apart; hpad zeros after each row's w).
 * Only after pt_cpu_has_bf16(). */
void pt_bf16_avx512_pairs_rows(uint32_t *pairs, int ldp, const float *x, size_t lds, int rows,
                               int w, pt_bf16 *rows_h, size_t ldh, int hpad);
/* the same (hpad 0) and pt_bf16_avx512_round_rows, of ssp~(x) (bf16_ssp.h)
 * computed in registers: the fused epilogue's pt_bf16_ssp_map and rounding
 * in one pass over its band, the bits of the two in sequence.  Only after
 * pt_cpu_has_bf16(). */
void pt_bf16_avx512_ssp_pairs_rows(uint32_t *pairs, int ldp, const float *x, size_t lds,
                                   int rows, int w, pt_bf16 *rows_h, size_t ldh);
void pt_bf16_avx512_ssp_round_rows(pt_bf16 *dst, int ldd, const float *src, int lds, int rows,
                                   int n);

/* fp32 → bf16, round to nearest even, NaN kept quiet (shared by both files). */
static inline uint16_t pt_bf16_round_bits(uint32_t u)
{
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#endif
