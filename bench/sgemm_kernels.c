/* sgemm_kernels.c — OpenBLAS against packtrain's own fp32 kernels
 * (engine/model/sgemm_kernels.h) on the model's real products, one thread,
 * so the policy "own kernel where it wins" rests on a measurement.
 *
 *   sgemm_kernels U N [SECONDS [IMPLS [CHUNK]]]
 *
 * U: filter rows of a micro-batch, N: its node slots (bench_speed.sh and
 * schnet_profile print both).  The products of one training step of seed
 * 000's SchNet (H = F = 100, G = 25): per Linear layer the forward NT
 * (rows × in → out), the input gradient NN (rows × out → in; not for the
 * first filter layer, whose input is data) and the weight gradient TN
 * (out × in over the rows), for the filter layers (U rows: 25 → 100,
 * 100 → 100), the node layers (N rows: 100 → 100, and the head's 100 → 50,
 * 50 → 1).  Each (product, implementation) pair runs in 7 interleaved rounds
 * of SECONDS/7 (SECONDS default 1) after one untimed call, its best round
 * kept; prints one JSON line per pair {"op", "m", "n",
 * "k", "impl", "gflops"}, then per implementation the step-weighted rate
 * {"impl", "weighted_gflops"} (each product weighted by how often a step
 * runs it: T = 4 blocks, 3 node layers per block), "auto" being what the
 * policy picks per product.  IMPLS (default "openblas,avx512,avx2,auto")
 * restricts the implementations, for quicker before/after comparisons.
 * CHUNK (< U): the filter products run as training runs them when its
 * edge pipeline cuts the U rows into chunks (schnet_filter.c; schnet_profile
 * prints "filter_chunk"): each measured on CHUNK rows (the weight gradient
 * accumulating with beta = 1, as across chunks) and weighted by its U rows'
 * FLOPs.  Small chunks stay in L2 and can run faster than the whole batch,
 * so the best GEMM rate is the better of both (bench_speed.sh runs both).
 * In CHUNK mode the filter's forward and input-gradient products hold
 * their weight over a round (pt_sgemm_small_weight), as training holds it
 * over a pass's chunks: only the round's first call compares it.
 * Prints the OpenBLAS kernel set in use.
 *
 * Then per implementation one line of other statistics of the same rounds
 * {"impl", "stats": {...}} (no "weighted_gflops" key, so readers of the
 * line above are not disturbed): "mean" weights each product's rate over
 * all 7 rounds (its FLOPs over its CPU time), "wall" the same by the wall
 * clock, "rounds" the step-weighted rate of each round alone (one pass over
 * every product), "best_round" / "median_round" of those, and the span
 * "wall_s" from the first to the last round.  The best-per-product rate
 * above takes each product at its own luckiest moment, which on a host
 * whose speed drifts from second to second is an envelope no step ever
 * runs at; bench_speed.sh's paired fraction uses "mean" (see there). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/model/sgemm_kernels.h"

/* The thread's CPU time, not the wall clock: on a shared machine the
 * thread is descheduled for whole slices, which a wall clock counts as the
 * kernel's time (rates moved 1.5x between runs at load 4-6); CPU time
 * counts only the slices the product ran in.  What the load still costs
 * (caches shared with other processes) is left in. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* the wall clock, for the "wall" statistic only */
static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static float *filled(size_t n)
{
    float *p = malloc(n * sizeof(float));
    if (!p) exit(1);
    for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    return p;
}

typedef struct op {
    const char *name;
    CBLAS_TRANSPOSE ta, tb;
    int m, n, k;
    float beta;
    int per_step;   /* times a training step runs it */
    double scale;   /* of its rows (m, or k of a TN) a step runs per measured call: U / CHUNK */
    int weights;    /* distinct B operands it cycles through (below) */
} op;

int main(int argc, char **argv)
{
    if (argc < 3 || atoi(argv[1]) <= 0 || atoi(argv[2]) <= 0) {
        fprintf(stderr, "usage: sgemm_kernels U N [SECONDS [IMPLS [CHUNK]]]\n");
        return 2;
    }
    int U = atoi(argv[1]), N = atoi(argv[2]);
    double secs = argc > 3 ? atof(argv[3]) : 1.0;
    const int chunk = argc > 5 ? atoi(argv[5]) : 0;
    if (argc > 5 && chunk <= 0) {
        fprintf(stderr, "sgemm_kernels: CHUNK must be a positive row count, not '%s'\n", argv[5]);
        return 2;
    }
    /* R: the rows a filter product runs on per call, sU: how many such calls a step makes */
    const int R = chunk > 0 && chunk < U ? chunk : U;
    const double sU = (double)U / (double)R;
    openblas_set_num_threads(1);
    const op ops[] = {
        {"filter1_fwd", CblasNoTrans, CblasTrans, R, 100, 25, 1.0f, 4, sU, 1},
        {"filter1_dw", CblasTrans, CblasNoTrans, 100, 25, R, 1.0f, 4, sU, 1},
        {"filter2_fwd", CblasNoTrans, CblasTrans, R, 100, 100, 1.0f, 4, sU, 1},
        {"filter2_din", CblasNoTrans, CblasNoTrans, R, 100, 100, 0.0f, 4, sU, 1},
        {"filter2_dw", CblasTrans, CblasNoTrans, 100, 100, R, 1.0f, 4, sU, 1},
        {"node_fwd", CblasNoTrans, CblasTrans, N, 100, 100, 1.0f, 12, 1.0, 3},
        {"node_din", CblasNoTrans, CblasNoTrans, N, 100, 100, 0.0f, 12, 1.0, 3},
        {"node_dw", CblasTrans, CblasNoTrans, 100, 100, N, 1.0f, 12, 1.0, 3},
        {"head1_fwd", CblasNoTrans, CblasTrans, N, 50, 100, 1.0f, 1, 1.0, 3},
        {"head1_din", CblasNoTrans, CblasNoTrans, N, 100, 50, 0.0f, 1, 1.0, 3},
        {"head1_dw", CblasTrans, CblasNoTrans, 50, 100, N, 1.0f, 1, 1.0, 3},
        {"head2_fwd", CblasNoTrans, CblasTrans, N, 1, 50, 1.0f, 1, 1.0, 3},
    };
    const int n_ops = (int)(sizeof ops / sizeof ops[0]);
    const pt_sgemm_impl impls[] = {PT_SGEMM_OPENBLAS, PT_SGEMM_AVX512, PT_SGEMM_AVX2, PT_SGEMM_AUTO};
    const int n_impls = 4, rounds = 7;
    const char *only = argc > 4 ? argv[4] : "openblas,avx512,avx2,auto";
    int on[4];
    for (int i = 0; i < n_impls; i++) on[i] = strstr(only, pt_sgemm_impl_name(impls[i])) != NULL;
    size_t big = (size_t)(U > N ? U : N) * 100;
    /* B: a node layer's weight is one of 12 a step runs in turn, so the own
     * NT kernel's cache of transposed weights (sgemm_kernels.c) never holds
     * it when it comes back: node and head products cycle through three
     * distinct B (more than that cache keeps), the filter products, whose
     * two weights run over every chunk of a batch in a row, use one */
    const size_t bstride = (size_t)PT_SGEMM_MAX_DIM * PT_SGEMM_MAX_DIM;
    float *a = filled(big), *b = filled(big + 2 * bstride), *c = filled(big);
    double best[4][16] = {{0}};
    /* per (implementation, product): FLOPs, CPU and wall seconds over all
     * rounds, and each round's rate */
    double flops_all[4][16] = {{0}}, cpu_all[4][16] = {{0}}, wall_all[4][16] = {{0}};
    double per_round[7][4][16] = {{{0}}};
    const double w0 = wall();
    pt_sgemm_impl used[4][16];
    printf("{\"openblas_core\":\"%s\",\"U\":%d,\"N\":%d,\"filter_rows_per_call\":%d,"
           "\"rounds\":%d}\n", openblas_get_corename(), U, N, R, rounds);
    /* rounds of every (product, implementation) pair, interleaved, the best
     * round kept: on a shared machine a pair's rate moves with the load, and
     * interleaving gives every pair the same chances */
    for (int r = 0; r < rounds; r++)
        for (int o = 0; o < n_ops; o++)
            for (int i = 0; i < n_impls; i++) {
                const op *p = &ops[o];
                pt_sgemm_impl im = impls[i];
                if (!on[i] || !pt_sgemm_supported(im)) continue;
                int lda = p->ta == CblasTrans ? p->m : p->k, ldb = p->tb == CblasTrans ? p->k : p->n;
                pt_sgemm_impl want = im == PT_SGEMM_AUTO ? pt_sgemm_choice(p->ta, p->tb, p->m, p->n,
                                                                           p->k) : im;
                /* a shape the kernel does not take runs on OpenBLAS, as in training */
                pt_sgemm_impl use = pt_sgemm_run(want, p->ta, p->tb, p->m, p->n, p->k, a, lda, b,
                                                 ldb, p->beta, c, p->n) == 0 ? want
                                                                            : PT_SGEMM_OPENBLAS;
                used[i][o] = use;
                /* a filter product over chunks whose B is the weight (the
                 * forward, the input gradient) holds it as training does
                 * (schnet_filter.c): compared on the round's first call,
                 * reused without comparing on the others */
                const int held = chunk > 0 && p->weights == 1 && p->ta == CblasNoTrans &&
                                 use != PT_SGEMM_OPENBLAS;
                if (held) {
                    pt_sgemm_force(use);
                    pt_sgemm_weights_hold();
                }
                long reps = 0;
                int turn = 0;
                const double tw0 = wall();
                double t0 = now(), t = t0;
                while (t - t0 < secs / rounds) {
                    const float *bw = b + (p->weights > 1 ? (size_t)turn * bstride : 0);
                    turn = (turn + 1) % p->weights;
                    if (held)
                        pt_sgemm_small_weight(p->tb, p->m, p->n, p->k, a, lda, bw, ldb, p->beta,
                                              NULL, c, p->n, reps > 0);
                    else
                        pt_sgemm_run(use, p->ta, p->tb, p->m, p->n, p->k, a, lda, bw, ldb,
                                     p->beta, c, p->n);
                    reps++;
                    t = now();
                }
                if (held) pt_sgemm_force(PT_SGEMM_AUTO);
                const double tw = wall() - tw0;
                double rate = 2.0 * p->m * p->n * p->k * (double)reps / (t - t0);
                if (rate > best[i][o]) best[i][o] = rate;
                flops_all[i][o] += 2.0 * p->m * p->n * p->k * (double)reps;
                cpu_all[i][o] += t - t0;
                wall_all[i][o] += tw;
                per_round[r][i][o] = rate;
            }
    for (int i = 0; i < n_impls; i++) {
        if (!on[i]) continue;
        if (!pt_sgemm_supported(impls[i])) {
            printf("{\"impl\":\"%s\",\"supported\":false}\n", pt_sgemm_impl_name(impls[i]));
            continue;
        }
        double flops_w = 0.0, secs_w = 0.0;
        for (int o = 0; o < n_ops; o++) {
            const op *p = &ops[o];
            double f = 2.0 * p->m * p->n * p->k * p->per_step * p->scale;
            flops_w += f;
            secs_w += f / best[i][o];
            printf("{\"op\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"impl\":\"%s\",\"ran\":\"%s\","
                   "\"gflops\":%.2f}\n", p->name, p->m, p->n, p->k, pt_sgemm_impl_name(impls[i]),
                   pt_sgemm_impl_name(used[i][o]), best[i][o] * 1e-9);
        }
        printf("{\"impl\":\"%s\",\"weighted_gflops\":%.2f}\n", pt_sgemm_impl_name(impls[i]),
               flops_w / secs_w * 1e-9);
    }
    const double span = wall() - w0;
    for (int i = 0; i < n_impls; i++) {
        if (!on[i] || !pt_sgemm_supported(impls[i])) continue;
        /* the same step weights as above, over other statistics of the rates */
        double fw = 0.0, s_mean = 0.0, s_wall = 0.0, s_round[7] = {0}, g_round[7], sorted[7];
        for (int o = 0; o < n_ops; o++) {
            const op *p = &ops[o];
            double f = 2.0 * p->m * p->n * p->k * p->per_step * p->scale;
            fw += f;
            s_mean += f * cpu_all[i][o] / flops_all[i][o];
            s_wall += f * wall_all[i][o] / flops_all[i][o];
            for (int r = 0; r < rounds; r++) s_round[r] += f / per_round[r][i][o];
        }
        for (int r = 0; r < rounds; r++) sorted[r] = g_round[r] = fw / s_round[r] * 1e-9;
        qsort(sorted, (size_t)rounds, sizeof sorted[0], cmp_double);
        printf("{\"impl\":\"%s\",\"stats\":{\"mean\":%.2f,\"wall\":%.2f,\"best_round\":%.2f,"
               "\"median_round\":%.2f,\"wall_s\":%.3f,\"rounds\":[", pt_sgemm_impl_name(impls[i]),
               fw / s_mean * 1e-9, fw / s_wall * 1e-9, sorted[rounds - 1], sorted[rounds / 2], span);
        for (int r = 0; r < rounds; r++) printf("%s%.2f", r ? "," : "", g_round[r]);
        printf("]}}\n");
    }
    free(a);
    free(b);
    free(c);
    return 0;
}
