/* bf16.h — bfloat16 matrix products with fp32 accumulation (training.precision
 * "bf16").
 *
 * bf16 keeps fp32's 8-bit exponent (so, unlike fp16, activations and gradients
 * cannot overflow: seed 004) and 8 significant bits.  A product of two bf16
 * numbers is exact in fp32, so every rounding of a bf16 GEMM happens in two
 * places only: the fp32 → bf16 conversion of the operands (relative error
 * ≤ 2^-8 each) and the fp32 additions of the accumulation.
 *
 * Debian 12's OpenBLAS (0.3.21) exports no cblas_sbgemm, so the products run
 * on packtrain's own kernels: AVX512-BF16 `vdpbf16ps`, GotoBLAS-style blocking
 * (B packed once per call into pair-interleaved panels, A packed per cache
 * block), and, where the CPU has AMX-BF16 and the OS grants tile data, AMX
 * `tdpbf16ps` on the same packed B (its pairs are the tiles' VNNI layout:
 * bf16_amx.c); the packing and the fused epilogues stay AVX512-BF16 code.
 * AMX rounds differently (pt_bf16_gemm_ref_amx), so the bits depend on the
 * kernel.
 * On a CPU without AVX512-BF16 the same entry points fall back to a
 * portable path (operands rounded through bf16, widened, cblas_sgemm) so the
 * numbers stay bf16 numbers; jobs asking for bf16 on such a CPU are rejected
 * at submission with pt_bf16_cpu_explain()'s message.
 *
 * All products are row-major, with cblas_sgemm's transpose options:
 *   C[m,n] = alpha · op(A)[m,k] · op(B)[k,n] + beta · C
 * and cblas' leading-dimension rules.  beta = 0 never reads C. */
#ifndef PT_BF16_H
#define PT_BF16_H

#include <cblas.h>
#include <stddef.h>
#include <stdint.h>

typedef uint16_t pt_bf16;

/* Return codes of the products; pt_bf16_strerror() says what each means. */
enum {
    PT_BF16_OK = 0,
    PT_BF16_EDIM = -1,     /* m, n or k negative */
    PT_BF16_ETRANS = -2,   /* transpose flag not a CBLAS_TRANSPOSE */
    PT_BF16_ELDA = -3,     /* lda smaller than the stored rows of A need */
    PT_BF16_ELDB = -4,
    PT_BF16_ELDC = -5,
    PT_BF16_ENULL = -6,    /* a, b or c NULL while the product needs it */
    PT_BF16_ETOOBIG = -7,  /* packed operand would exceed PT_BF16_MAX_PACK */
    PT_BF16_ENOMEM = -8,
    PT_BF16_ENOCPU = -9,   /* the AVX512-BF16 kernel was forced on a CPU without it */
    PT_BF16_EPACKED = -10, /* packed B not initialised */
    PT_BF16_EFUSED = -11,  /* an epilogue pt_bf16_gemm_ex cannot fuse here (see there) */
    PT_BF16_EFORMAT = -12  /* an operand format pt_bf16_gemm_ex does not take (see there) */
};
const char *pt_bf16_strerror(int code);

/* Largest packed operand a product allocates (bytes). */
#define PT_BF16_MAX_PACK ((size_t)1 << 34)

/* --- conversions ---------------------------------------------------------
 * fp32 → bf16 rounds to nearest, ties to even; ±inf stays ±inf, finite values
 * past the bf16 range round to ±inf, NaN stays NaN (made quiet, sign kept).
 * bf16 → fp32 is exact. */
pt_bf16 pt_bf16_from_float(float x);
float pt_bf16_to_float(pt_bf16 h);
void pt_bf16_from_floats(pt_bf16 *dst, const float *src, size_t n);
void pt_bf16_to_floats(float *dst, const pt_bf16 *src, size_t n);
/* pt_bf16_to_float inline, for loops over bf16 rows (the scalar paths of
 * cfconv_bf16.h): exact, bf16 is fp32's upper half */
static inline float pt_bf16_widen(pt_bf16 h)
{
    const union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)h << 16};
    return v.f;
}

/* --- CPU support ----------------------------------------------------------- */
typedef struct pt_cpu_features {
    int avx512f, avx512bw, avx512vl; /* cpuid leaf 7.0 EBX bits 16, 30, 31 */
    int avx512bf16;                  /* cpuid leaf 7.1 EAX bit 5 */
    int os_avx512;                   /* XCR0 has opmask + ZMM state (xgetbv) */
    int amx_bf16, amx_tile;          /* cpuid 7.0 EDX bits 22, 24 */
    int os_amx;                      /* XCR0 has tile config + tile data */
    int amx;                         /* all of the above, AVX512-BF16's needs, and Linux
                                        granted this process tile data (arch_prctl) */
    int hidden;                      /* PACKTRAIN_CPU_HIDE_BF16 was set */
    int amx_hidden;                  /* PACKTRAIN_CPU_HIDE_AMX was set */
} pt_cpu_features;

/* What this CPU and OS provide (detected once).  Setting the environment
 * variable PACKTRAIN_CPU_HIDE_BF16=1 before the first call makes packtrain
 * behave as on a CPU without AVX512-BF16 (to test the rejection path). */
void pt_cpu_features_get(pt_cpu_features *f);
/* 1 when the AVX512-BF16 kernel can run here. */
int pt_cpu_has_bf16(void);
/* 1 when the AMX kernel can run here (pt_cpu_features.amx).  Setting
 * PACKTRAIN_CPU_HIDE_AMX=1 before the first call hides AMX (AUTO then
 * chooses AVX512-BF16: that kernel stays testable on an AMX CPU). */
int pt_cpu_has_amx(void);
/* Fills buf with why bf16 cannot run on a CPU with features f, e.g.
 *   training.precision "bf16" needs a CPU with AVX512-BF16; this CPU lacks
 *   avx512_bf16 — use "fp32"
 * Returns 1 (and buf = "") when f supports bf16, 0 otherwise. */
int pt_bf16_cpu_explain(const pt_cpu_features *f, char *buf, size_t len);

/* --- products -------------------------------------------------------------- */
typedef enum pt_bf16_kernel {
    PT_BF16_KERNEL_AUTO = 0,     /* AMX when usable, else AVX512-BF16 when present,
                                    else portable */
    PT_BF16_KERNEL_AVX512 = 1,
    PT_BF16_KERNEL_PORTABLE = 2,
    PT_BF16_KERNEL_AMX = 3       /* AMX tiles (packing, epilogues: AVX512-BF16) */
} pt_bf16_kernel;

/* Process-wide choice, like openblas_set_num_threads: forcing AVX512 or AMX
 * on a CPU without it returns PT_BF16_ENOCPU and changes nothing. */
int pt_bf16_set_kernel(pt_bf16_kernel kernel);
/* The kernel products use now (never AUTO). */
pt_bf16_kernel pt_bf16_kernel_active(void);
/* 1 when the active kernel is AVX512 or AMX (both fuse the epilogues below
 * and restart their chains every PT_BF16_KC steps of a reduction). */
int pt_bf16_kernel_native(void);
/* Threads one product may use (default 1; rows of C are split between them,
 * and small products stay on one thread).  Values < 1 mean 1. */
void pt_bf16_set_threads(int threads);
int pt_bf16_get_threads(void);

/* A and B already bf16. */
int pt_bf16_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                 const pt_bf16 *a, int lda, const pt_bf16 *b, int ldb, float beta, float *c,
                 int ldc);
/* A and B fp32, rounded to bf16 while they are packed: a drop-in for
 * cblas_sgemm(CblasRowMajor, ...) in bf16 mode. */
int pt_bf16_sgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *b, int ldb, float beta, float *c,
                  int ldc);

/* C = alpha · op(A) · op(B) + bias, bias[n] added to every row (a Linear
 * layer's forward; C is not read): the same bits as filling each row of C
 * with bias and calling pt_bf16_sgemm with beta = 1, without that pass over
 * C.  bias NULL (with m, n > 0) is PT_BF16_ENULL. */
int pt_bf16_sgemm_bias(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, const float *bias,
                       float *c, int ldc);

/* Whether the model's bf16 steps use the fused products below (default 1).
 * Off, they run the unfused sequence of ops, which gives the same bits: a
 * switch for tests that compare the two and for diagnosis. */
void pt_bf16_set_fusion(int on);
int pt_bf16_fusion(void);

/* --- operands rounded once, in pairs along the reduction -------------------
 * vdpbf16ps multiplies pairs of adjacent reduction steps, so a product that
 * reduces over the rows of a stored operand (a weight gradient dW = dYᵀ·X:
 * op(A) = dYᵀ with A stored [k][m], op(B) = X stored [k][n]) normally
 * interleaves rows 2p and 2p+1 of both operands on every call.  An operand
 * already in that layout ("pairs") is read in place: pair row p holds ld
 * uint32, element j = bf16(X[2p][j]) | bf16(X[2p+1][j]) << 16 (the high half
 * 0 for a last, odd row), zeros from the width w up to
 * ld = pt_bf16_pairs_ld(w).  The values (and so the product's bits) are
 * those of the operand rounded as the product would round it. */
int pt_bf16_pairs_ld(int w);
/* Rounds rows [0, rows) of the fp32 X (rows of lds ≥ w floats) into pairs
 * (pair rows of pt_bf16_pairs_ld(w), (rows + 1) / 2 of them), and, when
 * rows_h is set, also into plain bf16 rows (ldh ≥ w, zeros from w to ldh):
 * one pass for a matrix that is both a weight gradient's operand and an
 * input gradient's (the filter network's dP, the Gaussian basis).  Any
 * kernel; nothing is validated. */
void pt_bf16_pairs_pack(uint32_t *pairs, const float *x, int lds, int rows, int w,
                        pt_bf16 *rows_h, int ldh);
/* 64-byte aligned memory of at least `bytes` for the calling thread, for
 * operands rounded once and read by several products (pt_bf16_pairs_pack):
 * kept and grown per thread (once a step's shapes were seen, no call
 * allocates), apart from the products' own packing buffers; valid until the
 * thread's next call.  NULL when out of memory. */
void *pt_bf16_operand_scratch(size_t bytes);
/* operand formats of pt_bf16_gemm_ex (its a_bf16 / b_bf16) */
enum {
    PT_BF16_FMT_F32 = 0,  /* float, rounded while packed */
    PT_BF16_FMT_ROWS = 1, /* pt_bf16 as stored */
    PT_BF16_FMT_PAIRS = 2, /* pairs (above): A with CblasTrans, B with CblasNoTrans, ld in
                              uint32 ≥ pt_bf16_pairs_ld(m or n); AVX512-BF16 kernel or not */
    PT_BF16_FMT_ROWS_PAD = 3 /* A (CblasNoTrans) as pt_bf16 rows of an even ld whose element
                                k is 0 when k is odd (pt_bf16_pairs_pack's rows_h with
                                ldh > w): read in place as the pairs vdpbf16ps takes, as
                                ROWS already are for an even k */
};

/* --- fused products (the filter network's, engine/model/schnet_filter.c) ---
 * One product whose operands may each be fp32 (rounded while packed) or
 * already bf16, and whose stores do the next elementwise step while the
 * rows are in registers or L1, so the model writes each edge row once:
 *   C = alpha · op(A) · op(B) + (bias ? bias : beta · C)      as pt_bf16_sgemm(_bias)
 *   then, per finished row r:  C[r] *= row_scale[r]           (row_scale set)
 *                              map(C[r..], aux[r..], NULL, rows, n)   (map set)
 *                              C[r] ⊙= σ̃(s1[r])               (dssp_s1 set)
 *                              col_sums += C[r] in double      (col_sums set)
 *                              h[r] = bf16(C[r])              (h set)
 * with the bits of running those steps one after the other over all of C
 * (each is elementwise; map is called on bands of whole rows, aux rows of
 * n floats, ld n).  With h or pairs set, c may be NULL: the fp32 rows then
 * live in a per-thread band and only their bf16 copies are kept.
 *                              pairs = the same rounding of C's rows as pairs
 *                                      (pt_bf16_pairs_ld(n) uint32 per pair
 *                                      row; with h, or alone where C is kept:
 *                                      a weight gradient's operand, e.g. the
 *                                      filter's ds1 for dA1)
 * row_scale, map, dssp_s1, col_sums, h and pairs need k ≤ PT_BF16_KC (one reduction block: the epilogue follows the last
 * block), ldc = n where map is set, and the AVX512-BF16 or AMX kernel
 * (PT_BF16_EFUSED otherwise; the caller runs the unfused steps). */
/* rows of C per epilogue call (and per float run of col_sums) */
#define PT_BF16_EPI_ROWS 12
typedef void (*pt_bf16_map)(float *x, float *aux, const float *bias, int rows, int n);
typedef struct pt_bf16_epilogue {
    const float *bias;      /* n floats added to every row (beta then unused), or NULL */
    const float *row_scale; /* m floats, or NULL */
    pt_bf16_map map;        /* e.g. pt_ssp_forward with aux = σ, or NULL */
    float *aux;             /* NULL is passed on to map (σ not kept) */
    int aux_read;           /* map reads aux (rows of n): fetched ahead while the
                               tiles of earlier rows run (dS1's σ1, from memory) */
    pt_bf16 *h;             /* bf16 copy of C, rows of ldh, or NULL */
    int ldh;
    uint32_t *pairs;        /* C's rows rounded as pairs (h set or C kept), or NULL */
    int b_held;             /* B is a weight unchanged since this thread compared it
                               in its current hold (pt_bf16_weights_hold) */
    const void *dssp_s1;    /* after map: C[r][j] *= σ̃(s1[r][j]), σ derived from the
                               bf16 s1 = ssp(x) of C's rows (bf16_ssp.h), as
                               PT_BF16_FMT_PAIRS (even row 0, dssp_ld ≥
                               pt_bf16_pairs_ld(n)) or PT_BF16_FMT_ROWS (dssp_ld ≥ n);
                               or NULL */
    int dssp_fmt, dssp_ld;
    double *col_sums;       /* after dssp_s1: col_sums[j] += Σ_r C[r][j] (a bias
                               gradient, Σ ds1, while the rows are in L1): each
                               run of PT_BF16_EPI_ROWS rows from row 0 summed in
                               float in row order, that sum added in double; the
                               product then runs on one thread.  Or NULL */
} pt_bf16_epilogue;
/* a_bf16 / b_bf16: the operand's PT_BF16_FMT_* (1: pt_bf16, 0: float).
 * epi may be NULL. */
int pt_bf16_gemm_ex(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                    const void *a, int a_bf16, int lda, const void *b, int b_bf16, int ldb,
                    float beta, float *c, int ldc, const pt_bf16_epilogue *epi);

/* op(B) packed once and reused: the weights of a layer, re-packed after each
 * optimizer step with pt_bf16_pack_update (no allocation). */
typedef struct pt_bf16_packed {
    uint32_t *data;        /* bf16 pairs (k, k+1) per column, 64-column panels */
    int k, n;
    CBLAS_TRANSPOSE trans; /* of the fp32 source */
    size_t pairs;          /* uint32 entries in data */
} pt_bf16_packed;

int pt_bf16_pack_init(pt_bf16_packed *p, CBLAS_TRANSPOSE tb, int k, int n, const float *b,
                      int ldb);
/* Re-packs new values of the same shape and transpose. */
int pt_bf16_pack_update(pt_bf16_packed *p, const float *b, int ldb);
void pt_bf16_pack_close(pt_bf16_packed *p);
/* C = alpha · op(A) · B + beta · C with A fp32 (rounded while packed). */
int pt_bf16_gemm_packed(CBLAS_TRANSPOSE ta, int m, float alpha, const float *a, int lda,
                        const pt_bf16_packed *b, float beta, float *c, int ldc);

/* Products whose B is a weight (fp32, op(A) not transposed, k, n ≤ 128)
 * keep it packed per thread and compare it with its fp32 source on every
 * call, so a weight changed in place is seen.  pt_bf16_weights_hold starts
 * a hold on the calling thread: a later product of pt_bf16_gemm_ex whose
 * epilogue says b_held reuses a packing compared (or made) on this thread
 * since the hold began without comparing again — the caller promises its
 * weight did not change since.  Every other product compares. */
void pt_bf16_weights_hold(void);

/* The arithmetic of the AVX512-BF16 kernel, one element at a time, for tests:
 * per K block of PT_BF16_KC, acc = 0; for each pair (k, k+1): acc += a[k+1]·b[k+1],
 * then acc += a[k]·b[k] (fused, bf16 subnormal inputs read as 0, subnormal
 * results flushed to 0, as vdpbf16ps does); then C = alpha·acc + beta·C for
 * the first block and C = alpha·acc + C for the next ones.  Validates nothing. */
#define PT_BF16_KC 256
void pt_bf16_gemm_ref(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                      const pt_bf16 *a, int lda, const pt_bf16 *b, int ldb, float beta, float *c,
                      int ldc);
/* The arithmetic of the AMX kernel (tdpbf16ps, Intel SDM; checked bit for bit
 * on Sapphire Rapids-class hardware), one element at a time: per K block of
 * PT_BF16_KC, acc = 0; per tile of PT_BF16_AMX_TK pairs of the block (the last
 * one shorter): even = odd = 0, for each pair (k, k+1) of the tile
 * even += a[k]·b[k] and odd += a[k+1]·b[k+1] (each fused, rounded to nearest
 * even; bf16 subnormal inputs read as 0, subnormal results flushed to 0),
 * then acc += (even + odd) (two more rounded, flushed additions); C is then
 * updated from acc as in pt_bf16_gemm_ref.  Validates nothing. */
#define PT_BF16_AMX_TK 16
void pt_bf16_gemm_ref_amx(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k,
                          float alpha, const pt_bf16 *a, int lda, const pt_bf16 *b, int ldb,
                          float beta, float *c, int ldc);
/* The reference of what `kernel` (AVX512 or AMX) computes for a product:
 * pt_bf16_gemm_ref_amx for AMX, else pt_bf16_gemm_ref (ta, tb as there). */
void pt_bf16_gemm_ref_kernel(pt_bf16_kernel kernel, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb,
                             int m, int n, int k, float alpha, const pt_bf16 *a, int lda,
                             const pt_bf16 *b, int ldb, float beta, float *c, int ldc);

#endif
