/* bf16.c — the product entry points: argument checks, the split of one
 * product over threads and the portable path for CPUs without AVX512-BF16.
 * The kernels are in bf16_avx512.c and bf16_amx.c, their scalar references
 * in bf16_ref.c, conversions, CPU detection and settings in bf16_cpu.c,
 * packed weights kept across calls in bf16_cache.c; see bf16.h. */
#include "engine/model/bf16.h"
#include "engine/model/bf16_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* below this many multiply-adds per thread, starting a thread costs more than it saves */
#define MIN_WORK_PER_THREAD (2 * 1000 * 1000)

const char *pt_bf16_strerror(int code)
{
    switch (code) {
    case PT_BF16_OK: return "ok";
    case PT_BF16_EDIM: return "bf16 gemm: m, n and k must not be negative";
    case PT_BF16_ETRANS: return "bf16 gemm: transpose flag must be CblasNoTrans or CblasTrans";
    case PT_BF16_ELDA: return "bf16 gemm: lda is smaller than a stored row of A";
    case PT_BF16_ELDB: return "bf16 gemm: ldb is smaller than a stored row of B";
    case PT_BF16_ELDC: return "bf16 gemm: ldc is smaller than n";
    case PT_BF16_ENULL: return "bf16 gemm: a, b or c is NULL";
    case PT_BF16_ETOOBIG: return "bf16 gemm: operands too large to pack (more than 16 GiB)";
    case PT_BF16_ENOMEM: return "bf16 gemm: out of memory for the packed operands";
    case PT_BF16_ENOCPU: return "bf16 gemm: this CPU has no AVX512-BF16";
    case PT_BF16_EPACKED: return "bf16 gemm: packed B is not initialised";
    case PT_BF16_EFUSED:
        return "bf16 gemm: this epilogue needs the AVX512-BF16 kernel, 1 <= k <= 256, alpha != 0, "
               "ldc = n for map, and C or a bias when C is not kept";
    case PT_BF16_EFORMAT:
        return "bf16 gemm: operand format unknown, or pairs where they do not fit (A needs "
               "CblasTrans, B CblasNoTrans, ld >= pt_bf16_pairs_ld(width)), or padded rows "
               "that are not (A CblasNoTrans, lda even, > k for an odd k)";
    default: return "bf16 gemm: unknown error";
    }
}

/* --- per-thread scratch ---------------------------------------------------
 * The packed operands of a product live in one buffer per calling thread
 * that only grows: a training step calls the same shapes every time, so after
 * the first step no product allocates (the engine's no-allocation rule,
 * tests/unit/test_schnet.c).  The buffer is freed when its thread exits. */

typedef struct scratch {
    void *p;
    size_t bytes;
} scratch;

/* two per thread: the products' packing (SCRATCH_PRODUCT) and the
 * operands callers round once for several products (pt_bf16_operand_scratch) */
enum { SCRATCH_PRODUCT, SCRATCH_OPERAND, SCRATCH_KEYS };
static pthread_key_t scratch_key[SCRATCH_KEYS];
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_free(void *v)
{
    scratch *s = v;
    free(s->p);
    free(s);
}

static void scratch_key_make(void)
{
    scratch_key_ok = pthread_key_create(&scratch_key[SCRATCH_PRODUCT], scratch_free) == 0 &&
                     pthread_key_create(&scratch_key[SCRATCH_OPERAND], scratch_free) == 0;
}

/* 64-byte aligned memory of at least `bytes` for this thread, or NULL. */
static void *scratch_get_key(int key, size_t bytes)
{
    pthread_once(&scratch_once, scratch_key_make);
    if (!scratch_key_ok) return NULL;
    scratch *s = pthread_getspecific(scratch_key[key]);
    if (!s) {
        s = calloc(1, sizeof(*s));
        if (!s || pthread_setspecific(scratch_key[key], s)) {
            free(s);
            return NULL;
        }
    }
    if (s->bytes < bytes) {
        size_t want = (bytes + 63) / 64 * 64;
        void *p = aligned_alloc(64, want);
        if (!p) return NULL;
        free(s->p);
        s->p = p;
        s->bytes = want;
    }
    return s->p;
}

static void *scratch_get(size_t bytes) { return scratch_get_key(SCRATCH_PRODUCT, bytes); }

void *pt_bf16_operand_scratch(size_t bytes) { return scratch_get_key(SCRATCH_OPERAND, bytes); }

/* --- operands ------------------------------------------------------------- */

/* CblasNoTrans/ConjNoTrans → 0, CblasTrans/ConjTrans → 1 (real data), else -1 */
static int trans_flag(CBLAS_TRANSPOSE t)
{
    switch ((int)t) {
    case CblasNoTrans: case CblasConjNoTrans: return 0;
    case CblasTrans: case CblasConjTrans: return 1;
    default: return -1;
    }
}

float pt_bf16_operand_get(const pt_bf16_operand *o, size_t row, size_t col)
{
    if (o->pairs) {
        /* stored row = the reduction index: row of op(B), column of op(A) */
        size_t kk = o->trans ? col : row, j = o->trans ? row : col;
        uint32_t pair = ((const uint32_t *)o->p)[kk / 2 * (size_t)o->ld + j];
        return pt_bf16_to_float((pt_bf16)(kk % 2 ? pair >> 16 : pair & 0xffffu));
    }
    size_t at = o->trans ? col * (size_t)o->ld + row : row * (size_t)o->ld + col;
    if (o->f32) return pt_bf16_to_float(pt_bf16_from_float(((const float *)o->p)[at]));
    return pt_bf16_to_float(((const pt_bf16 *)o->p)[at]);
}

static int max1(int x) { return x > 1 ? x : 1; }

void pt_bf16_scale_c(float *c, int ldc, int m, int n, float beta)
{
    for (int i = 0; i < m; i++) {
        float *row = c + (size_t)i * ldc;
        for (int j = 0; j < n; j++) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    }
}

/* every row of C = bias: the C that pt_bf16_sgemm_bias's product adds to */
static void fill_bias(float *c, int ldc, int m, int n, const float *bias)
{
    for (int i = 0; i < m; i++) memcpy(c + (size_t)i * ldc, bias, (size_t)n * sizeof(float));
}

/* Scalar packing, same layout as pt_bf16_avx512_pack_b: for the portable
 * kernel's pt_bf16_packed and as the test of the AVX-512 packer. */
static void pack_b_portable(const pt_bf16_job *job)
{
    for (int p = 0; p < job->kp; p++)
        for (int col = 0; col < job->n; col++) {
            int n0 = col / PT_BF16_NP * PT_BF16_NP;
            int width = job->n - n0 < PT_BF16_NP ? job->n - n0 : PT_BF16_NP;
            int wp = (width + 15) / 16 * 16;
            uint32_t *panel = job->bp + (size_t)(n0 / PT_BF16_NP) * job->kp * PT_BF16_NP;
            uint32_t lo = pt_bf16_from_float(pt_bf16_operand_get(&job->b, (size_t)2 * p, (size_t)col));
            uint32_t hi = 2 * p + 1 < job->k
                              ? pt_bf16_from_float(pt_bf16_operand_get(&job->b, (size_t)2 * p + 1,
                                                               (size_t)col))
                              : 0;
            panel[(size_t)p * wp + (col - n0)] = lo | hi << 16;
            if (col == job->n - 1)
                for (int pad = width; pad < wp; pad++) panel[(size_t)p * wp + pad] = 0;
        }
}

static float packed_get(const pt_bf16_packed *pb, int kk, int col)
{
    int n0 = col / PT_BF16_NP * PT_BF16_NP;
    int width = pb->n - n0 < PT_BF16_NP ? pb->n - n0 : PT_BF16_NP, wp = (width + 15) / 16 * 16;
    size_t kp = (size_t)(pb->k + 1) / 2;
    uint32_t pair = pb->data[(size_t)(n0 / PT_BF16_NP) * kp * PT_BF16_NP +
                             (size_t)(kk / 2) * wp + (size_t)(col - n0)];
    return pt_bf16_to_float((pt_bf16)(kk % 2 ? pair >> 16 : pair & 0xffffu));
}

/* --- the portable path: the same bf16 numbers through cblas_sgemm -------- */

static int run_portable(const pt_bf16_job *job, const pt_bf16_packed *pb)
{
    size_t mk = (size_t)job->m * job->k, kn = (size_t)job->k * job->n;
    if ((mk + kn) * sizeof(float) > PT_BF16_MAX_PACK) return PT_BF16_ETOOBIG;
    size_t a_bytes = (mk * sizeof(float) + 63) / 64 * 64;
    char *mem = scratch_get(a_bytes + kn * sizeof(float));
    if (!mem) return PT_BF16_ENOMEM;
    float *a = (float *)mem, *b = (float *)(mem + a_bytes);
    for (int i = 0; i < job->m; i++)
        for (int kk = 0; kk < job->k; kk++)
            a[(size_t)i * job->k + kk] = pt_bf16_operand_get(&job->a, (size_t)i, (size_t)kk);
    for (int kk = 0; kk < job->k; kk++)
        for (int j = 0; j < job->n; j++)
            b[(size_t)kk * job->n + j] =
                pb ? packed_get(pb, kk, j) : pt_bf16_operand_get(&job->b, (size_t)kk, (size_t)j);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, job->m, job->n, job->k, job->alpha,
                a, job->k, b, job->n, job->beta, job->c, job->ldc);
    return PT_BF16_OK;
}

/* --- the AVX-512 path, split over threads --------------------------------- */

typedef struct worker {
    const pt_bf16_job *job;
    int pack_phase; /* 1: pack pair rows [begin, end) of B; 0: rows of C */
    int begin, end;
    uint32_t *apack;
} worker;

static void *worker_main(void *arg)
{
    const worker *w = arg;
    if (w->pack_phase)
        pt_bf16_avx512_pack_b(w->job, w->begin, w->end);
    else if (w->job->amx)
        pt_bf16_amx_rows(w->job, w->begin, w->end, w->apack);
    else if (pt_bf16_job_fused(w->job) ||
             (pt_bf16_a_in_place(w->job) && w->job->k <= PT_BF16_KC))
        pt_bf16_avx512_rows_fused(w->job, w->begin, w->end, w->apack);
    else
        pt_bf16_avx512_rows(w->job, w->begin, w->end, w->apack);
    return NULL;
}

/* Runs w[0] here and w[1..count) on new threads; a thread that cannot be
 * started has its share run here instead, so the product always completes. */
static void run_workers(worker *w, int count)
{
    pthread_t tid[PT_BF16_MAX_THREADS];
    int started[PT_BF16_MAX_THREADS] = {0};
    for (int i = 1; i < count; i++) started[i] = !pthread_create(&tid[i], NULL, worker_main, &w[i]);
    worker_main(&w[0]);
    for (int i = 1; i < count; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            worker_main(&w[i]);
    }
}

/* Splits [0, total) into count ranges whose bounds are multiples of unit. */
static void split_range(worker *w, int count, int total, int unit)
{
    int units = (total + unit - 1) / unit;
    for (int i = 0; i < count; i++) {
        int lo = (int)((long)units * i / count) * unit, hi = (int)((long)units * (i + 1) / count) * unit;
        w[i].begin = lo < total ? lo : total;
        w[i].end = hi < total ? hi : total;
    }
}

static int run_avx512(pt_bf16_job *job, int b_packed)
{
    double work = (double)job->m * job->n * job->k;
    int threads = pt_bf16_get_threads();
    int by_rows = (job->m + PT_BF16_MR - 1) / PT_BF16_MR;
    int by_work = (int)(work / MIN_WORK_PER_THREAD);
    if (threads > by_rows) threads = by_rows;
    if (threads > by_work) threads = by_work;
    if (threads < 1 || job->col_sums) threads = 1; /* the sums' order: one thread */

    size_t b_bytes = 0;
    /* one thread packs B one K block at a time, just before the block's
     * tiles read it (it stays in L2: a weight gradient's B is a whole batch
     * of activations, megabytes packed up front and read back from memory);
     * threads share one B packed up front */
    const int blocked = !b_packed && threads == 1;
    if (!b_packed) {
        b_bytes = pt_bf16_packed_pairs(job->k, job->n) * sizeof(uint32_t);
        if (b_bytes > PT_BF16_MAX_PACK) return PT_BF16_ETOOBIG;
        if (blocked)
            b_bytes = pt_bf16_packed_pairs(job->k < PT_BF16_KC ? job->k : PT_BF16_KC, job->n) *
                      sizeof(uint32_t);
        b_bytes = (b_bytes + 63) / 64 * 64;
    }
    size_t abytes = PT_BF16_APACK_PAIRS * sizeof(uint32_t);
    if (job->amx)
        abytes = (abytes + PT_BF16_AMX_FLOATS(job->n) * sizeof(float) + 63) / 64 * 64;
    else if (pt_bf16_job_fused(job))
        abytes = (abytes + PT_BF16_BAND_FLOATS(job->n) * sizeof(float) + 63) / 64 * 64;
    char *mem = scratch_get(b_bytes + abytes * (size_t)threads);
    if (!mem) return PT_BF16_ENOMEM;
    if (blocked)
        job->bblock = (uint32_t *)mem;
    else if (!b_packed)
        job->bp = (uint32_t *)mem;
    uint32_t *apack = (uint32_t *)(mem + b_bytes);
    worker w[PT_BF16_MAX_THREADS];
    for (int i = 0; i < threads; i++)
        w[i] = (worker){.job = job, .apack = (uint32_t *)((char *)apack + (size_t)i * abytes)};
    if (!b_packed && !blocked) {
        /* packing B is worth splitting only when B is big (dW = dYᵀ·X) */
        int packers = (size_t)job->kp * job->n >= 65536 ? threads : 1;
        for (int i = 0; i < packers; i++) w[i].pack_phase = 1;
        split_range(w, packers, job->kp, 1);
        run_workers(w, packers);
        for (int i = 0; i < packers; i++) w[i].pack_phase = 0;
    }
    /* AMX: strips of 16 rows (and groups of the epilogue) whole per thread */
    split_range(w, threads, job->m, job->amx ? PT_BF16_AMX_SUPER : PT_BF16_MR);
    run_workers(w, threads);
    return PT_BF16_OK;
}

/* --- entry points ---------------------------------------------------------- */

/* cblas' checks; fills the job's shape and operands */
static int job_init(pt_bf16_job *job, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n,
                    int k, float alpha, const void *a, int lda, const void *b, int ldb,
                    float beta, float *c, int ldc, int f32)
{
    int at = trans_flag(ta), bt = trans_flag(tb);
    if (at < 0 || bt < 0) return PT_BF16_ETRANS;
    if (m < 0 || n < 0 || k < 0) return PT_BF16_EDIM;
    if (lda < max1(at ? m : k)) return PT_BF16_ELDA;
    if (ldb < max1(bt ? k : n)) return PT_BF16_ELDB;
    if (ldc < max1(n)) return PT_BF16_ELDC;
    if (m > 0 && n > 0 && (!c || (k > 0 && alpha != 0.0f && (!a || !b)))) return PT_BF16_ENULL;
    *job = (pt_bf16_job){.m = m, .n = n, .k = k, .kp = (k + 1) / 2, .alpha = alpha,
                         .beta = beta, .c = c, .ldc = ldc,
                         .a = {.p = a, .f32 = f32, .trans = at, .ld = lda},
                         .b = {.p = b, .f32 = f32, .trans = bt, .ld = ldb}};
    return PT_BF16_OK;
}

static int run(pt_bf16_job *job, const pt_bf16_packed *pb)
{
    if (job->m == 0 || job->n == 0) return PT_BF16_OK;
    if (job->bias && (job->k == 0 || job->alpha == 0.0f ||
                      pt_bf16_kernel_active() == PT_BF16_KERNEL_PORTABLE)) {
        /* C = bias, then C += product: what the kernel's bias mode computes */
        fill_bias(job->c, job->ldc, job->m, job->n, job->bias);
        job->bias = NULL;
        job->beta = 1.0f;
    }
    if (job->k == 0 || job->alpha == 0.0f) {
        pt_bf16_scale_c(job->c, job->ldc, job->m, job->n, job->beta);
        return PT_BF16_OK;
    }
    const pt_bf16_kernel kernel = pt_bf16_kernel_active();
    if (kernel == PT_BF16_KERNEL_PORTABLE) return run_portable(job, pb);
    job->amx = kernel == PT_BF16_KERNEL_AMX && pt_bf16_amx_takes(job);
    if (job->b.pairs) return run_avx512(job, 1); /* read in place */
    if (pb) {
        job->bp = pb->data;
        return run_avx512(job, 1);
    }
    const uint32_t *cached = pt_bf16_weight_packed(job);
    if (cached) job->bp = (uint32_t *)cached;
    return run_avx512(job, cached != NULL);
}

int pt_bf16_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                 const pt_bf16 *a, int lda, const pt_bf16 *b, int ldb, float beta, float *c,
                 int ldc)
{
    pt_bf16_job job;
    int rc = job_init(&job, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 0);
    return rc ? rc : run(&job, NULL);
}

int pt_bf16_sgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *b, int ldb, float beta, float *c,
                  int ldc)
{
    pt_bf16_job job;
    int rc = job_init(&job, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 1);
    return rc ? rc : run(&job, NULL);
}

int pt_bf16_sgemm_bias(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, const float *bias,
                       float *c, int ldc)
{
    pt_bf16_job job;
    int rc = job_init(&job, ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc, 1);
    if (rc) return rc;
    if (m > 0 && n > 0 && !bias) return PT_BF16_ENULL;
    job.bias = bias;
    return run(&job, NULL);
}

int pt_bf16_gemm_ex(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                    const void *a, int a_bf16, int lda, const void *b, int b_bf16, int ldb,
                    float beta, float *c, int ldc, const pt_bf16_epilogue *epi)
{
    static const pt_bf16_epilogue none = {0};
    if (!epi) epi = &none;
    const int fused =
        epi->row_scale || epi->map || epi->h || epi->pairs || epi->dssp_s1 || epi->col_sums;
    /* c may be NULL when only the bf16 copies are kept: checked below, so
     * give job_init a stand-in that passes its NULL check */
    float stand_in;
    pt_bf16_job job;
    int rc = job_init(&job, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta,
                      c || !(epi->h || epi->pairs) ? c : &stand_in, ldc, 1);
    if (rc) return rc;
    if (a_bf16 < PT_BF16_FMT_F32 || a_bf16 > PT_BF16_FMT_ROWS_PAD || b_bf16 < PT_BF16_FMT_F32 ||
        b_bf16 > PT_BF16_FMT_PAIRS)
        return PT_BF16_EFORMAT;
    if (a_bf16 == PT_BF16_FMT_ROWS_PAD &&
        (job.a.trans || lda % 2 != 0 || (k % 2 != 0 && lda < k + 1)))
        return PT_BF16_EFORMAT;
    job.a.pad = a_bf16 == PT_BF16_FMT_ROWS_PAD;
    job.a.f32 = a_bf16 == PT_BF16_FMT_F32;
    job.b.f32 = b_bf16 == PT_BF16_FMT_F32;
    job.a.pairs = a_bf16 == PT_BF16_FMT_PAIRS;
    job.b.pairs = b_bf16 == PT_BF16_FMT_PAIRS;
    if ((job.a.pairs && (!job.a.trans || lda < pt_bf16_pairs_ld(m))) ||
        (job.b.pairs && (job.b.trans || ldb < pt_bf16_pairs_ld(n))))
        return PT_BF16_EFORMAT;
    if (m == 0 || n == 0) return PT_BF16_OK;
    if (fused) {
        if (!pt_bf16_kernel_native() || k < 1 || k > PT_BF16_KC ||
            alpha == 0.0f || (epi->map && c && ldc != n) ||
            (!c && !epi->bias && beta != 0.0f) || (epi->h && epi->ldh < n))
            return PT_BF16_EFUSED;
        if (epi->dssp_s1 &&
            !(epi->dssp_fmt == PT_BF16_FMT_PAIRS && epi->dssp_ld >= pt_bf16_pairs_ld(n)) &&
            !(epi->dssp_fmt == PT_BF16_FMT_ROWS && epi->dssp_ld >= n))
            return PT_BF16_EFORMAT;
        job.c = c;
        job.row_scale = epi->row_scale;
        job.map = epi->map;
        job.aux = epi->aux;
        job.aux_read = epi->aux_read;
        job.h = epi->h;
        job.ldh = epi->ldh;
        job.pairs = epi->pairs;
        job.dssp_s1 = epi->dssp_s1;
        job.dssp_fmt = epi->dssp_fmt;
        job.dssp_ld = epi->dssp_ld;
        job.col_sums = epi->col_sums;
    }
    if (epi->bias) {
        job.bias = epi->bias;
        job.beta = 0.0f;
    }
    job.b_held = epi->b_held;
    return run(&job, NULL);
}

/* --- pairs ----------------------------------------------------------------- */

int pt_bf16_pairs_ld(int w) { return pt_bf16_pairs_ld_(w < 1 ? 1 : w); }

void pt_bf16_pairs_pack(uint32_t *pairs, const float *x, int lds, int rows, int w,
                        pt_bf16 *rows_h, int ldh)
{
    const int ldp = pt_bf16_pairs_ld(w);
    if (pt_bf16_kernel_native()) {
        pt_bf16_avx512_pairs_rows(pairs, ldp, x, (size_t)lds, rows, w, rows_h, (size_t)ldh,
                                  ldh - w);
        return;
    }
    for (int r = 0; r < rows; r += 2) {
        const float *lo = x + (size_t)r * lds, *hi = r + 1 < rows ? lo + lds : NULL;
        uint32_t *dst = pairs + (size_t)(r / 2) * ldp;
        pt_bf16 *rlo = rows_h ? rows_h + (size_t)r * ldh : NULL;
        pt_bf16 *rhi = rows_h && hi ? rlo + ldh : NULL;
        for (int j = 0; j < ldp; j++) {
            uint32_t l = 0, h = 0;
            if (j < w) {
                l = pt_bf16_from_float(lo[j]);
                h = hi ? pt_bf16_from_float(hi[j]) : 0;
            }
            dst[j] = l | h << 16;
        }
        for (int j = 0; rlo && j < ldh; j++) {
            rlo[j] = j < w ? pt_bf16_from_float(lo[j]) : 0;
            if (rhi) rhi[j] = j < w ? pt_bf16_from_float(hi[j]) : 0;
        }
    }
}

/* --- packed B ------------------------------------------------------------- */

static int pack_fill(pt_bf16_packed *p, const float *b, int ldb)
{
    if (ldb < max1(p->trans == CblasTrans ? p->k : p->n)) return PT_BF16_ELDB;
    if (!b && p->k > 0 && p->n > 0) return PT_BF16_ENULL;
    pt_bf16_job job = {.k = p->k, .n = p->n, .kp = (p->k + 1) / 2, .bp = p->data,
                       .b = {.p = b, .f32 = 1, .trans = p->trans == CblasTrans, .ld = ldb}};
    if (p->k == 0 || p->n == 0) return PT_BF16_OK;
    if (pt_bf16_kernel_native())
        pt_bf16_avx512_pack_b(&job, 0, job.kp);
    else
        pack_b_portable(&job);
    return PT_BF16_OK;
}

int pt_bf16_pack_init(pt_bf16_packed *p, CBLAS_TRANSPOSE tb, int k, int n, const float *b,
                      int ldb)
{
    memset(p, 0, sizeof(*p));
    int bt = trans_flag(tb);
    if (bt < 0) return PT_BF16_ETRANS;
    if (k < 0 || n < 0) return PT_BF16_EDIM;
    size_t pairs = pt_bf16_packed_pairs(k, n);
    if (pairs * sizeof(uint32_t) > PT_BF16_MAX_PACK) return PT_BF16_ETOOBIG;
    uint32_t *data = aligned_alloc(64, (pairs * sizeof(uint32_t) + 63) / 64 * 64 + 64);
    if (!data) return PT_BF16_ENOMEM;
    *p = (pt_bf16_packed){.data = data, .k = k, .n = n, .pairs = pairs,
                          .trans = bt ? CblasTrans : CblasNoTrans};
    int rc = pack_fill(p, b, ldb);
    if (rc) pt_bf16_pack_close(p);
    return rc;
}

int pt_bf16_pack_update(pt_bf16_packed *p, const float *b, int ldb)
{
    if (!p->data) return PT_BF16_EPACKED;
    return pack_fill(p, b, ldb);
}

void pt_bf16_pack_close(pt_bf16_packed *p)
{
    free(p->data);
    memset(p, 0, sizeof(*p));
}

int pt_bf16_gemm_packed(CBLAS_TRANSPOSE ta, int m, float alpha, const float *a, int lda,
                        const pt_bf16_packed *b, float beta, float *c, int ldc)
{
    if (!b || !b->data) return PT_BF16_EPACKED;
    pt_bf16_job job;
    /* B's own checks were done when it was packed; ldb = n passes them */
    int rc = job_init(&job, ta, CblasNoTrans, m, b->n, b->k, alpha, a, lda, b->data,
                      max1(b->n), beta, c, ldc, 1);
    return rc ? rc : run(&job, b);
}
