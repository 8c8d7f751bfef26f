/* sgemm_rate.c — the machine's measured single-precision GEMM rate on the
 * shapes SchNet's training step runs, so bench_train.sh can state training
 * throughput as a fraction of what OpenBLAS reaches here in the same run.
 *
 *   sgemm_rate THREADS M K N [M K N ...]
 * prints one JSON object per shape {"m","k","n","threads","gflops"} and a
 * last line {"shape":"all","gflops":...} with the FLOP-weighted rate over all
 * shapes (total FLOPs / total seconds).  Each shape runs the forward product
 * C[M,N] = A[M,K] B[K,N]^T and its two backward products (dA = dC B,
 * dB = dC^T A), like a Linear layer's training step. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *filled(size_t n)
{
    float *p = malloc(n * sizeof(float));
    if (!p) exit(1);
    for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    return p;
}

/* Runs the three products for at least 0.3 s; returns FLOPs and seconds. */
static void run_shape(int m, int k, int n, double *flops, double *secs)
{
    float *a = filled((size_t)m * k), *b = filled((size_t)n * k), *c = filled((size_t)m * n);
    float *da = filled((size_t)m * k), *db = filled((size_t)n * k);
    double per = 3.0 * 2.0 * m * k * n;
    long reps = 0;
    /* one warm-up round, not timed */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
    double t0 = now(), t = t0;
    while (t - t0 < 0.3) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, k, n, 1.0f, c, n, b, k, 0.0f, da, k);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, m, 1.0f, c, n, a, k, 1.0f, db, k);
        reps++;
        t = now();
    }
    *flops = per * (double)reps;
    *secs = t - t0;
    free(a); free(b); free(c); free(da); free(db);
}

int main(int argc, char **argv)
{
    if (argc < 5 || (argc - 2) % 3 != 0) {
        fprintf(stderr, "usage: sgemm_rate THREADS M K N [M K N ...]\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    openblas_set_num_threads(threads);
    double all_f = 0.0, all_s = 0.0;
    for (int i = 2; i + 2 < argc; i += 3) {
        int m = atoi(argv[i]), k = atoi(argv[i + 1]), n = atoi(argv[i + 2]);
        if (m <= 0 || k <= 0 || n <= 0) {
            fprintf(stderr, "sgemm_rate: shapes must be positive\n");
            return 2;
        }
        double f, s;
        run_shape(m, k, n, &f, &s);
        all_f += f;
        all_s += s;
        printf("{\"m\":%d,\"k\":%d,\"n\":%d,\"threads\":%d,\"gflops\":%.2f}\n", m, k, n, threads,
               f / s * 1e-9);
    }
    printf("{\"shape\":\"all\",\"threads\":%d,\"gflops\":%.2f}\n", threads, all_f / all_s * 1e-9);
    return 0;
}
