/* bf16_filter.c — GFLOP/s of each of the five bf16 products of the filter
 * network as training runs them (engine/model/schnet_filter.c: fused bf16
 * energy path, 256-row chunks, the same operand types, epilogues and
 * accumulation), against the vdpbf16ps peak measured in the same run.
 *
 *   bf16_filter [ROWS [ROUNDS]]      default: 19712 rows (a water
 *                                    micro-batch of 8 packs), 5 rounds
 *
 * Per chunk of n rows (G = 25 Gaussians, F = 100 filters):
 *   e_round   the basis rounded once per forward (block 0) as padded rows
 *             and pairs (no FLOP; a quarter of it counts per block)
 *   fwd1      s1 = bf16(ssp(e · A1ᵀ + a1))  n×25 → 100, e's padded rows read in
 *             place, epilogue bias + ssp + bf16 rows and pairs (bf16.h) of s1
 *   fwd2      W = (s1 · A2ᵀ + a2) ⊙ C       n×100 → 100, epilogue bias + cutoff
 *   dP_round  the chunk's dP rounded once, as pairs and as rows (no FLOP)
 *   dW2       dA2 += dPᵀ · s1                100×100, k = n, both as pairs
 *   dS1       ds1 = dP · A2                  n×100 → 100, dP's bf16 rows in place
 *             (variants 2, 3: ⊙ σ1 (3: derived from s1) and ds1 rounded into pairs as stored)
 *   ssp_bwd   pt_ssp_backward: ds1 ⊙= σ1 and da1's sums (variant 2: the
 *             sums only; 3: none, dS1's stores add the sums and keep ds1
 *             only as pairs; no FLOP)
 *   dW1       dA1 += ds1ᵀ · e                100×25, k = n, e's pairs
 *             (variants 2, 3: ds1's pairs too)
 * One pass is the forward chunk by chunk, then the backward chunk by chunk
 * with the chunk's dP in a one-chunk ring just written (as the convolution's
 * backward leaves it) and ds1 in one chunk's rows (L2), as schnet_edges.c
 * runs them; each product's wall time is summed over the chunks, best of
 * ROUNDS passes.  Variant 0 is the path before the pairs (each product
 * rounds and lays out its own fp32 operands: fwd1 from fp32 e without
 * pairs, dW2 from fp32 dP and s1's bf16 rows, dS1 from fp32 dP, dW1 from
 * fp32 e; weights compared on every chunk), variant 1 the path of session 6
 * (weights held over a pass), variant 2 session 7's (fwd1 writes σ1 past
 * the caches and s1's rows into one chunk's scratch; σ1 applied by dS1's
 * stores, which also round ds1 into pairs for dW1), variant 3 the model's
 * path now (fwd1's softplus at bf16's precision, bf16_ssp.h, and no σ1:
 * dS1's stores derive it from s1's pairs, add da1's sums and keep ds1 only
 * as pairs); their rounds alternate, so all see the same machine.  The arrays are reused pass after
 * pass and partly stay in L3 (32 MB here), which a training step's (four
 * blocks' σ1, W and s1) do not: the streamed σ1 looks worse here than in
 * schnet_profile.  "peak"
 * is a register-only vdpbf16ps loop.  One JSON line per product and
 * variant, and one summing each variant ("ms_4_blocks": a step's share of
 * filter_gemm with its four interaction blocks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <immintrin.h>

#include "engine/model/bf16.h"
#include "engine/model/bf16_ssp.h"
#include "engine/model/schnet_ops.h"
#include "engine/model/ssp_kernels.h"

#define G 25
#define F 100
#define CHUNK 256

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *filled(size_t n, unsigned salt, float scale)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) exit(1);
    for (size_t i = 0; i < n; i++)
        p[i] = ((float)(((i + salt) * 2654435761u) % 1000) * 1e-3f - 0.5f) * scale;
    return p;
}

static void check(int rc)
{
    if (rc) {
        fprintf(stderr, "bf16_filter: %s\n", pt_bf16_strerror(rc));
        exit(1);
    }
}

typedef struct data {
    int rows;
    float *e, *w1, *b1, *w2, *b2, *cut, *sig, *p, *dp, *ring, *ds1, *dw1, *dw2, *db1;
    pt_bf16 *s1h, *dph, *eh, *s1c; /* s1c: one chunk's rows of s1 (variants 2, 3) */
    uint32_t *s1p, *dpp, *ep, *ds1p; /* pairs (bf16.h): s1's, kept by fwd1; the chunk's dP;
                                        e's; the chunk's ds1 (variants 2, 3) */
} data;

enum { E_ROUND, FWD1, FWD2, DP, DW2, DS1, SSPB, DW1, PRODUCTS };
#define VARIANTS 4
static const char *NAME[PRODUCTS] = {"e_round", "fwd1", "fwd2",    "dP_round",
                                     "dW2",     "dS1",  "ssp_bwd", "dW1"};
static const double FLOP_PER_ROW[PRODUCTS] = {0.0,         2.0 * G * F, 2.0 * F * F, 0.0,
                                              2.0 * F * F, 2.0 * F * F, 0.0,         2.0 * G * F};
/* e_round runs once per forward for all four blocks: a block's share */
static const double SHARE[PRODUCTS] = {0.25, 1, 1, 1, 1, 1, 1, 1};

/* the softplus with σ1 past the caches, as the model's fwd1 epilogue runs it
 * (schnet_filter.c) */
static void ssp_sigma_stream(float *x, float *aux, const float *bias, int rows, int n)
{
    (void)bias;
    pt_ssp_forward_stream_run(PT_SGEMM_AUTO, x, aux, (size_t)rows * (size_t)n);
}

/* ds1 ⊙= σ1 as the model's dS1 epilogue does it (schnet_filter.c) */
static void mul_sigma(float *x, float *aux, const float *bias, int rows, int n)
{
    (void)bias;
    const size_t len = (size_t)rows * (size_t)n;
    for (size_t i = 0; i < len; i++) x[i] *= aux[i];
}
#define LDEH (G + G % 2)

/* variant 0: each product rounds and lays out its own operands (the path
 * before the filter network kept pairs); 1: as the model runs now */
static void run_chunk_v0(data *d, int which, int r0, int n)
{
    const size_t o = (size_t)r0 * F;
    switch (which) {
    case FWD1: {
        const pt_bf16_epilogue ssp = {.bias = d->b1, .map = pt_ssp_forward, .aux = d->sig + o,
                                      .h = d->s1h + o, .ldh = F};
        check(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, n, F, G, 1.0f, d->e + (size_t)r0 * G, 0,
                              G, d->w1, 0, G, 0.0f, NULL, F, &ssp));
        break;
    }
    case FWD2: {
        const pt_bf16_epilogue cut = {.bias = d->b2, .row_scale = d->cut + r0};
        check(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, n, F, F, 1.0f, d->s1h + o, 1, F, d->w2, 0,
                              F, 0.0f, d->p + o, F, &cut));
        break;
    }
    case DP: case E_ROUND: break;
    case SSPB: pt_ssp_backward(d->ds1, d->db1, d->sig + o, n, F); break;
    case DW2:
        check(pt_bf16_gemm_ex(CblasTrans, CblasNoTrans, F, F, n, 1.0f, d->ring, 0, F,
                              d->s1h + o, 1, F, 1.0f, d->dw2, F, NULL));
        break;
    case DS1:
        check(pt_bf16_sgemm(CblasNoTrans, CblasNoTrans, n, F, F, 1.0f, d->ring, F, d->w2, F,
                            0.0f, d->ds1, F));
        break;
    default:
        check(pt_bf16_sgemm(CblasTrans, CblasNoTrans, F, G, n, 1.0f, d->ds1, F,
                            d->e + (size_t)r0 * G, G, 1.0f, d->dw1, G));
    }
}

static void run_chunk(data *d, int which, int r0, int n, int variant)
{
    const size_t o = (size_t)r0 * F;
    if (variant == 0) {
        run_chunk_v0(d, which, r0, n);
        return;
    }
    /* the weights held over a pass's chunks (schnet_filter.c) */
    const int held = r0 > 0;
    if (!held && (which == FWD1 || which == DS1)) pt_bf16_weights_hold();
    switch (which) {
    case E_ROUND: /* block 0's forward: the basis as padded rows and pairs */
        pt_bf16_pairs_pack(d->ep + (size_t)(r0 / 2) * pt_bf16_pairs_ld(G), d->e + (size_t)r0 * G,
                           G, n, G, d->eh + (size_t)r0 * LDEH, LDEH);
        break;
    case FWD1: {
        /* variants 2, 3: σ1 past the caches, s1's rows in one chunk's scratch
         * (fwd2 is their only reader) */
        const pt_bf16_epilogue ssp = {.bias = d->b1,
                                      .map = variant == 3   ? pt_bf16_ssp_map
                                             : variant == 2 ? ssp_sigma_stream
                                                            : pt_ssp_forward,
                                      .aux = variant == 3 ? NULL : d->sig + o,
                                      .h = variant >= 2 ? d->s1c : d->s1h + o, .ldh = F,
                                      .b_held = held,
                                      .pairs = d->s1p + (size_t)(r0 / 2) * pt_bf16_pairs_ld(F)};
        check(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, n, F, G, 1.0f, d->eh + (size_t)r0 * LDEH,
                              PT_BF16_FMT_ROWS_PAD, LDEH, d->w1, 0, G, 0.0f, NULL, F, &ssp));
        break;
    }
    case FWD2: {
        const pt_bf16_epilogue cut = {.bias = d->b2, .row_scale = d->cut + r0, .b_held = held};
        check(pt_bf16_gemm_ex(CblasNoTrans, CblasTrans, n, F, F, 1.0f,
                              variant >= 2 ? d->s1c : d->s1h + o, 1, F, d->w2, 0, F, 0.0f,
                              d->p + o, F, &cut));
        break;
    }
    case DP: /* one rounding of the chunk's dP for dW2 and dS1 */
        pt_bf16_pairs_pack(d->dpp, d->ring, F, n, F, d->dph, F);
        break;
    case DW2: {
        const int ldp = pt_bf16_pairs_ld(F);
        check(pt_bf16_gemm_ex(CblasTrans, CblasNoTrans, F, F, n, 1.0f, d->dpp, PT_BF16_FMT_PAIRS,
                              ldp, d->s1p + (size_t)(r0 / 2) * ldp, PT_BF16_FMT_PAIRS, ldp, 1.0f,
                              d->dw2, F, NULL));
        break;
    }
    case DS1: {
        const pt_bf16_epilogue e = {.b_held = held};
        const pt_bf16_epilogue sig = {.map = mul_sigma, .aux = d->sig + o, .aux_read = 1,
                                      .pairs = d->ds1p, .b_held = held};
        const int ldp = pt_bf16_pairs_ld(F);
        double total[F] = {0};
        const pt_bf16_epilogue dssp = {.dssp_s1 = d->s1p + (size_t)(r0 / 2) * ldp,
                                       .dssp_fmt = PT_BF16_FMT_PAIRS, .dssp_ld = ldp,
                                       .pairs = d->ds1p, .b_held = held, .col_sums = total};
        check(pt_bf16_gemm_ex(CblasNoTrans, CblasNoTrans, n, F, F, 1.0f, d->dph, PT_BF16_FMT_ROWS,
                              F, d->w2, PT_BF16_FMT_F32, F, 0.0f, variant == 3 ? NULL : d->ds1,
                              F, variant == 3 ? &dssp : variant == 2 ? &sig : &e));
        if (variant == 3)
            for (int c = 0; c < F; c++) d->db1[c] += (float)total[c];
        break;
    }
    case SSPB: /* variant 3: da1's sums in dS1's stores, no pass */
        if (variant < 3) pt_ssp_backward(d->ds1, d->db1, variant == 2 ? NULL : d->sig + o, n, F);
        break;
    default: {
        const int ldp = pt_bf16_pairs_ld(G);
        if (variant >= 2)
            check(pt_bf16_gemm_ex(CblasTrans, CblasNoTrans, F, G, n, 1.0f, d->ds1p,
                                  PT_BF16_FMT_PAIRS, pt_bf16_pairs_ld(F),
                                  d->ep + (size_t)(r0 / 2) * ldp, PT_BF16_FMT_PAIRS, ldp, 1.0f,
                                  d->dw1, G, NULL));
        else
            check(pt_bf16_gemm_ex(CblasTrans, CblasNoTrans, F, G, n, 1.0f, d->ds1, 0, F,
                                  d->ep + (size_t)(r0 / 2) * ldp, PT_BF16_FMT_PAIRS, ldp, 1.0f,
                                  d->dw1, G, NULL));
    }
    }
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One pass over the batch as training runs it (schnet_edges.c): the
 * forward chunk by chunk, then the backward chunk by chunk, its dP in a
 * one-chunk ring that a write pass (standing in for the convolution's
 * backward, which produces it) has just brought into cache, ds1 in one
 * chunk's rows (L2).  Adds each product's wall time to t[]. */
static void run_pass(data *d, double t[PRODUCTS], int variant)
{
    for (int r0 = 0; r0 < d->rows; r0 += CHUNK) {
        const int n = d->rows - r0 < CHUNK ? d->rows - r0 : CHUNK;
        for (int i = E_ROUND; i <= FWD2; i++) {
            double t0 = wall_now();
            run_chunk(d, i, r0, n, variant);
            t[i] += wall_now() - t0;
        }
    }
    for (int r0 = 0; r0 < d->rows; r0 += CHUNK) {
        const int n = d->rows - r0 < CHUNK ? d->rows - r0 : CHUNK;
        for (size_t j = 0; j < (size_t)n * F; j++) d->ring[j] = d->dp[(size_t)r0 * F + j];
        for (int i = DP; i <= DW1; i++) {
            double t0 = wall_now();
            run_chunk(d, i, r0, n, variant);
            t[i] += wall_now() - t0;
        }
    }
}

/* vdpbf16ps peak of one thread: GFLOP/s of independent register chains */
__attribute__((target("avx512f,avx512bf16")))
static double peak_rate(void)
{
    typedef float v16 __attribute__((vector_size(64)));
    v16 acc[24];
    for (int i = 0; i < 24; i++) acc[i] = (v16){0};
    __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = a;
    const long iters = 2000000;
    double best = 0.0;
    for (int round = 0; round < 3; round++) {
        double t0 = cpu_now();
        for (long it = 0; it < iters; it++) {
#pragma GCC unroll 24
            for (int i = 0; i < 24; i++) acc[i] = (v16)_mm512_dpbf16_ps((__m512)acc[i], a, b);
            __asm__ volatile("" : "+v"(a));
        }
        double t = cpu_now() - t0, r = 24.0 * 64.0 * (double)iters / t * 1e-9;
        if (r > best) best = r;
    }
    float sink = 0;
    for (int i = 0; i < 24; i++) sink += acc[i][0];
    if (sink == 1234.5f) printf("#\n");
    return best;
}

int main(int argc, char **argv)
{
    if (!pt_cpu_has_bf16()) {
        printf("{\"skipped\":\"no AVX512-BF16 on this CPU\"}\n");
        return 0;
    }
    data d = {.rows = argc > 1 ? atoi(argv[1]) : 19712};
    const int rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (d.rows < 1 || rounds < 1) {
        fprintf(stderr, "usage: bf16_filter [ROWS [ROUNDS]]\n");
        return 2;
    }
    const size_t rf = (size_t)d.rows * F;
    d.e = filled((size_t)d.rows * G, 1, 2.0f);
    d.w1 = filled((size_t)F * G, 2, 0.4f);
    d.b1 = filled(F, 3, 0.1f);
    d.w2 = filled((size_t)F * F, 4, 0.2f);
    d.b2 = filled(F, 5, 0.1f);
    d.cut = filled((size_t)d.rows, 6, 1.0f);
    d.sig = filled(rf, 7, 1.0f);
    d.p = filled(rf, 8, 1.0f);
    d.dp = filled(rf, 9, 0.01f);
    d.ring = filled((size_t)CHUNK * F, 9, 0.01f);
    d.ds1 = filled((size_t)CHUNK * F, 10, 0.01f);
    d.dw1 = filled((size_t)F * G, 11, 0.0f);
    d.dw2 = filled((size_t)F * F, 12, 0.0f);
    d.db1 = filled(F, 13, 0.0f);
    d.s1h = aligned_alloc(64, (rf * sizeof(pt_bf16) + 63) / 64 * 64);
    if (!d.s1h) return 1;
    pt_bf16_from_floats(d.s1h, d.p, rf);
    const size_t pairs = (size_t)(d.rows + 1) / 2 * pt_bf16_pairs_ld(F);
    d.s1p = aligned_alloc(64, (pairs * sizeof(uint32_t) + 63) / 64 * 64);
    d.dpp = aligned_alloc(64, (size_t)CHUNK / 2 * pt_bf16_pairs_ld(F) * sizeof(uint32_t));
    d.dph = aligned_alloc(64, (size_t)CHUNK * F * sizeof(pt_bf16));
    d.eh = aligned_alloc(64, ((size_t)d.rows * LDEH * sizeof(pt_bf16) + 63) / 64 * 64);
    d.ep = aligned_alloc(64, (size_t)(d.rows + 1) / 2 * pt_bf16_pairs_ld(G) * sizeof(uint32_t));
    d.ds1p = aligned_alloc(64, (size_t)CHUNK / 2 * pt_bf16_pairs_ld(F) * sizeof(uint32_t));
    d.s1c = aligned_alloc(64, (size_t)CHUNK * F * sizeof(pt_bf16));
    if (!d.s1p || !d.dpp || !d.dph || !d.eh || !d.ep || !d.ds1p || !d.s1c) return 1;

    double peak = peak_rate();
    double best[VARIANTS][PRODUCTS];
    for (int v = 0; v < VARIANTS; v++) {
        for (int i = 0; i < PRODUCTS; i++) best[v][i] = 1e30;
        double warm[PRODUCTS] = {0};
        run_pass(&d, warm, v); /* the weight cache, scratch, first touches */
    }
    for (int round = 0; round < rounds; round++)
        for (int v = 0; v < VARIANTS; v++) {
            double t[PRODUCTS] = {0};
            run_pass(&d, t, v);
            for (int i = 0; i < PRODUCTS; i++)
                if (t[i] < best[v][i]) best[v][i] = t[i];
        }
    for (int v = 0; v < VARIANTS; v++) {
        double total_t = 0, total_f = 0;
        for (int i = 0; i < PRODUCTS; i++) {
            double f = FLOP_PER_ROW[i] * d.rows, r = f / best[v][i] * 1e-9;
            total_t += SHARE[i] * best[v][i];
            total_f += f;
            printf("{\"variant\":%d,\"product\":\"%s\",\"rows\":%d,\"ms\":%.3f,"
                   "\"gflops\":%.1f,\"of_peak\":%.3f}\n",
                   v, NAME[i], d.rows, best[v][i] * 1e3, r, r / peak);
        }
        printf("{\"variant\":%d,\"product\":\"all\",\"rows\":%d,\"ms\":%.3f,"
               "\"ms_4_blocks\":%.3f,\"gflops\":%.1f,\"peak_gflops\":%.1f,\"of_peak\":%.3f}\n",
               v, d.rows, total_t * 1e3, 4 * total_t * 1e3, total_f / total_t * 1e-9, peak,
               total_f / total_t * 1e-9 / peak);
    }
    return 0;
}
