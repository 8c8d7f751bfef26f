/* bench_bf16.c — GFLOP/s of packtrain's bf16 products against OpenBLAS
 * cblas_sgemm on the products SchNet's training step runs, in one run, as
 * ratios (the machines are shared and noisy; absolute numbers drift).
 *
 *   bench_bf16 [THREADS...]          default: 1 2
 *
 * Shapes (rows × in → out): the filter network over E = 10,000 edges
 * (25 → 100, 100 → 100) and the atom-wise layers over N = 600 nodes
 * (100 → 100).  Each shape runs a Linear layer's three products:
 *   fwd  Y[M,out]  = X[M,in] · W[out,in]ᵀ      (NoTrans, Trans)
 *   dX   dX[M,in]  = dY[M,out] · W[out,in]     (NoTrans, NoTrans)
 *   dW   dW[out,in] = dYᵀ · X                  (Trans, NoTrans, K = M)
 * and three implementations:
 *   sgemm   cblas_sgemm, fp32
 *   bf16s   pt_bf16_sgemm: fp32 operands rounded to bf16 while packed
 *           (what training in bf16 mode calls; conversion included)
 *   bf16    pt_bf16_gemm: operands already bf16
 * Every measurement is the best of 3 rounds of ≥ 40 ms, the rounds of the
 * three implementations interleaved.  "*_gflops" are per second of wall
 * clock; "*_cpu_gflops" per second of CPU time of the process (all its
 * threads), which a shared, loaded machine disturbs far less (at 1 thread
 * they are the same number on a quiet machine).  One JSON object per line; "blas_core"
 * names the kernel OpenBLAS picked (OPENBLAS_CORETYPE overrides it, see
 * bench_bf16.sh). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine/model/bf16.h"

char *openblas_get_corename(void); /* exported by OpenBLAS, not in cblas.h */

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }

static float *filled(size_t n, unsigned salt)
{
    float *p = malloc(n * sizeof(float));
    if (!p) exit(1);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(((i + salt) * 2654435761u) % 1000) * 1e-3f - 0.5f;
    return p;
}

static pt_bf16 *rounded(const float *x, size_t n)
{
    pt_bf16 *p = malloc(n * sizeof(pt_bf16));
    if (!p) exit(1);
    pt_bf16_from_floats(p, x, n);
    return p;
}

/* one product: C[m,n] = op(A)·op(B), stored as the model stores it */
typedef struct product {
    const char *name;
    CBLAS_TRANSPOSE ta, tb;
    int m, n, k, lda, ldb;
    const float *a, *b;
    const pt_bf16 *a16, *b16;
    float *c;
} product;

enum { SGEMM, BF16S, BF16, IMPLS };
static const char *IMPL_NAME[IMPLS] = {"sgemm", "bf16s", "bf16"};

static void run_once(const product *p, int impl)
{
    int rc = 0;
    if (impl == SGEMM)
        cblas_sgemm(CblasRowMajor, p->ta, p->tb, p->m, p->n, p->k, 1.0f, p->a, p->lda, p->b,
                    p->ldb, 0.0f, p->c, p->n);
    else if (impl == BF16S)
        rc = pt_bf16_sgemm(p->ta, p->tb, p->m, p->n, p->k, 1.0f, p->a, p->lda, p->b, p->ldb,
                           0.0f, p->c, p->n);
    else
        rc = pt_bf16_gemm(p->ta, p->tb, p->m, p->n, p->k, 1.0f, p->a16, p->lda, p->b16, p->ldb,
                          0.0f, p->c, p->n);
    if (rc) {
        fprintf(stderr, "bench_bf16: %s\n", pt_bf16_strerror(rc));
        exit(1);
    }
}

/* GFLOP/s of one round of at least 40 ms, per wall second and per CPU second */
static double round_rate(const product *p, int impl, double *cpu_rate)
{
    run_once(p, impl); /* warm caches and the allocator */
    long reps = 0;
    double t0 = now(), t = t0, c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    while (t - t0 < 0.04) {
        run_once(p, impl);
        reps++;
        t = now();
    }
    double flops = 2.0 * p->m * p->n * p->k * (double)reps;
    *cpu_rate = flops / (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) * 1e-9;
    return flops / (t - t0) * 1e-9;
}

static void bench_shape(int rows, int in, int out, int threads, double *flops, double *secs,
                        double *cpu_secs)
{
    size_t nx = (size_t)rows * in, ny = (size_t)rows * out, nw = (size_t)out * in;
    float *x = filled(nx, 1), *dy = filled(ny, 2), *w = filled(nw, 3);
    float *c = malloc((nx > ny ? nx : ny) * sizeof(float) + nw * sizeof(float));
    pt_bf16 *x16 = rounded(x, nx), *dy16 = rounded(dy, ny), *w16 = rounded(w, nw);
    if (!c) exit(1);
    product ps[3] = {
        {"fwd", CblasNoTrans, CblasTrans, rows, out, in, in, in, x, w, x16, w16, c},
        {"dX", CblasNoTrans, CblasNoTrans, rows, in, out, out, in, dy, w, dy16, w16, c},
        {"dW", CblasTrans, CblasNoTrans, out, in, rows, out, in, dy, x, dy16, x16, c},
    };
    for (int i = 0; i < 3; i++) {
        double best[IMPLS] = {0}, best_cpu[IMPLS] = {0};
        for (int round = 0; round < 3; round++)
            for (int impl = 0; impl < IMPLS; impl++) {
                double rc, r = round_rate(&ps[i], impl, &rc);
                if (r > best[impl]) best[impl] = r;
                if (rc > best_cpu[impl]) best_cpu[impl] = rc;
            }
        double f = 2.0 * ps[i].m * ps[i].n * ps[i].k;
        for (int impl = 0; impl < IMPLS; impl++) {
            flops[impl] += f;
            secs[impl] += f / (best[impl] * 1e9);
            cpu_secs[impl] += f / (best_cpu[impl] * 1e9);
        }
        printf("{\"shape\":\"%dx%d->%d\",\"product\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,"
               "\"threads\":%d,\"sgemm_gflops\":%.1f,\"bf16s_gflops\":%.1f,\"bf16_gflops\":%.1f,"
               "\"bf16s_vs_sgemm\":%.2f,\"bf16_vs_sgemm\":%.2f,\"sgemm_cpu_gflops\":%.1f,"
               "\"bf16s_cpu_gflops\":%.1f,\"bf16_cpu_gflops\":%.1f}\n",
               rows, in, out, ps[i].name, ps[i].m, ps[i].n, ps[i].k, threads, best[SGEMM],
               best[BF16S], best[BF16], best[BF16S] / best[SGEMM], best[BF16] / best[SGEMM],
               best_cpu[SGEMM], best_cpu[BF16S], best_cpu[BF16]);
        fflush(stdout);
    }
    free(x); free(dy); free(w); free(c); free(x16); free(dy16); free(w16);
}

int main(int argc, char **argv)
{
    int threads_list[8] = {1, 2}, nthreads = 2;
    if (argc > 1) {
        nthreads = 0;
        for (int i = 1; i < argc && nthreads < 8; i++) threads_list[nthreads++] = atoi(argv[i]);
    }
    if (!pt_cpu_has_bf16()) {
        pt_cpu_features f;
        char why[256];
        pt_cpu_features_get(&f);
        pt_bf16_cpu_explain(&f, why, sizeof(why));
        printf("{\"skipped\":\"%s\"}\n", "no AVX512-BF16 on this CPU: the portable path is "
                                        "cblas_sgemm on widened operands, nothing to compare");
        fprintf(stderr, "bench_bf16: %s\n", why);
        return 0;
    }
    static const int shapes[][3] = {{10000, 25, 100}, {10000, 100, 100}, {600, 100, 100}};
    for (int t = 0; t < nthreads; t++) {
        int threads = threads_list[t] < 1 ? 1 : threads_list[t];
        openblas_set_num_threads(threads);
        pt_bf16_set_threads(threads);
        double flops[IMPLS] = {0}, secs[IMPLS] = {0}, cpu_secs[IMPLS] = {0};
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
            bench_shape(shapes[s][0], shapes[s][1], shapes[s][2], threads, flops, secs, cpu_secs);
        printf("{\"shape\":\"all\",\"threads\":%d,\"blas_core\":\"%s\"", threads,
               openblas_get_corename());
        for (int impl = 0; impl < IMPLS; impl++)
            printf(",\"%s_gflops\":%.1f,\"%s_cpu_gflops\":%.1f", IMPL_NAME[impl],
                   flops[impl] / secs[impl] * 1e-9, IMPL_NAME[impl], flops[impl] / cpu_secs[impl] * 1e-9);
        printf(",\"bf16s_vs_sgemm\":%.2f,\"bf16_vs_sgemm\":%.2f}\n",
               secs[SGEMM] / secs[BF16S], secs[SGEMM] / secs[BF16]);
    }
    return 0;
}
