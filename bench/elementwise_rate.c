/* elementwise_rate.c — CPU time per element of the step's work that is not a
 * matrix product, against plain scalar code measured in the same run.
 *
 *   elementwise_rate [ROUNDS]
 * prints one JSON object per kernel:
 *   adam       pt_optim_update over SchNet seed 000's 186,801 parameters
 *              (Adam, one decay-exempt range as the trainer makes) against
 *              the same per-element float arithmetic in a loop gcc is told
 *              not to vectorise (tests/ref/adam_ref.h, test_optim's oracle:
 *              the update before it was vectorised);
 *   ssp        pt_ssp_forward (value and σ) over a filter chunk of 256 × 100
 *              inputs spread over [−12, 12] against a loop over glibc's
 *              scalar expf/log1pf (σ = 1/(1 + e^−v));
 *   ssp_value  the same without σ (forwards that take no gradient);
 *   ssp_backward  pt_ssp_backward over the chunk (d ← d ⊙ σ and the bias
 *              gradient's column sums) against the same loop gcc is told
 *              not to vectorise;
 *   ssp_backward_s  pt_ssp_backward_s (σ̃ = 1 − ½e^−s recovered from the
 *              softplus s, no σ array: the filter's backward) against the
 *              same scalar loop as ssp_backward;
 *   colsum / colsum_avx2  pt_colsum_total_run (the bias gradients'
 *              blocked column sums, colsum_kernels.h) over a filter chunk of
 *              256 × 100, AVX-512 (or AVX2 where the CPU has no AVX-512) and
 *              AVX2, against the scalar reference (gcc's vectorised loop over
 *              a block array: what ran before session 16); the same bits;
 *   edge_basis pt_edge_basis_forward over 4,096 distances in [0.5, 6.5) Å
 *              (25 Gaussians and the cosine cutoff, cutoff 6) against
 *              glibc's scalar expf and cosf.
 * Fields: "ns_per_elem" (the library), "scalar_ns_per_elem", "ratio"
 * (scalar over library).  Thread CPU time (CLOCK_THREAD_CPUTIME_ID), so a
 * loaded machine's time slicing is not counted; the two sides run
 * interleaved, ROUNDS rounds (default 5), best round each. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/model/colsum_kernels.h"
#include "engine/model/schnet_ops.h"
#include "engine/model/ssp_kernels.h"
#include "engine/train/optim.h"
#include "tests/ref/adam_ref.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *floats(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    if (!p) {
        fprintf(stderr, "elementwise_rate: out of memory\n");
        exit(1);
    }
    return p;
}

/* ---- the scalar sides --------------------------------------------------------- */

__attribute__((noinline)) static void ssp_scalar(float *x, float *sig, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        if (sig) sig[i] = 1.0f / (1.0f + expf(-v));
        x[i] = log1pf(expf(-fabsf(v))) + fmaxf(v, 0.0f) - 0.69314718f;
    }
}

__attribute__((noinline, optimize("no-tree-vectorize"))) static void
ssp_backward_scalar(float *d, float *db, const float *sig, int n, int c)
{
    for (int r = 0; r < n; r++)
        for (int k = 0; k < c; k++) {
            d[(size_t)r * c + k] *= sig[(size_t)r * c + k];
            db[k] += d[(size_t)r * c + k];
        }
}

__attribute__((noinline)) static void basis_scalar(float *e, float *cut, const float *dist, int n,
                                                   int G, float cutoff)
{
    float step = cutoff / (float)(G - 1);
    float gamma = -0.5f / (step * step);
    for (int k = 0; k < n; k++) {
        for (int g = 0; g < G; g++) {
            float diff = dist[k] - step * (float)g;
            e[(size_t)k * G + g] = expf(gamma * diff * diff);
        }
        cut[k] = dist[k] < cutoff ? 0.5f * (cosf(3.14159265f * dist[k] / cutoff) + 1.0f) : 0.0f;
    }
}

/* ---- timing ----------------------------------------------------------------------- */

typedef struct side {
    double best;   /* seconds per call, best round */
} side;

static void record(side *s, double per_call)
{
    if (s->best == 0.0 || per_call < s->best) s->best = per_call;
}

static void print(const char *name, size_t elems, const side *lib, const side *ref)
{
    printf("{\"kernel\":\"%s\",\"elements\":%zu,\"ns_per_elem\":%.4f,\"scalar_ns_per_elem\":%.4f,"
           "\"ratio\":%.2f}\n",
           name, elems, 1e9 * lib->best / (double)elems, 1e9 * ref->best / (double)elems,
           ref->best / lib->best);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    if (rounds < 1) {
        fprintf(stderr, "usage: elementwise_rate [ROUNDS >= 1]\n");
        return 2;
    }
    /* Adam */
    const size_t n = 186801;
    pt_optim_params op = pt_optim_defaults(PT_OPTIM_ADAM);
    pt_optim opt;
    if (pt_optim_init(&opt, &op, n) || pt_optim_exempt_decay(&opt, 0, 100)) return 1;
    float *param = floats(n), *grad = floats(n), *m2 = floats(n), *v2 = floats(n);
    for (size_t i = 0; i < n; i++) {
        param[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
        grad[i] = (float)((i * 40503u) % 997) * 1e-5f - 5e-3f;
        m2[i] = v2[i] = 0.0f;
    }
    side lib = {0}, ref = {0};
    const int calls = 200;
    for (int r = 0; r < rounds; r++) {
        double t0 = cpu_now();
        for (int k = 0; k < calls; k++) {
            pt_optim_coeffs c = pt_optim_begin(&opt, 1e-4);
            pt_optim_update(&opt, &c, param, grad, opt.m, opt.v, 0, n);
        }
        double t1 = cpu_now();
        for (int k = 0; k < calls; k++) {
            pt_optim_coeffs c = pt_optim_begin(&opt, 1e-4);
            pt_ref_adam_update(&c, opt.decay_scale, param, grad, m2, v2, n);
        }
        double t2 = cpu_now();
        record(&lib, (t1 - t0) / calls);
        record(&ref, (t2 - t1) / calls);
    }
    print("adam", n, &lib, &ref);
    pt_optim_close(&opt);

    /* shifted softplus over a filter chunk: with σ, without, and its backward */
    const size_t len = 256 * 100;
    float *src = floats(len), *x = floats(len), *sig = floats(len), *d = floats(len);
    float db[100] = {0};
    for (size_t i = 0; i < len; i++) src[i] = -12.0f + 24.0f * (float)((i * 7919u) % len) / (float)len;
    for (int pass = 0; pass < 4; pass++) {
        lib = (side){0};
        ref = (side){0};
        const int ssp_calls = 400;
        for (int r = 0; r < rounds; r++) {
            double tl = 0.0, ts = 0.0;
            for (int k = 0; k < ssp_calls; k++) {
                /* fresh operands before each side: the forward works in place,
                 * the backward would shrink d towards denormals */
                for (size_t i = 0; i < len; i++) x[i] = d[i] = src[i];
                if (pass == 2) pt_ssp_forward(x, sig, NULL, 256, 100);
                if (pass == 3) {
                    for (size_t i = 0; i < len; i++) sig[i] = src[i];
                    pt_ssp_forward(sig, NULL, NULL, 256, 100); /* s = ssp(v) */
                }
                double t0 = cpu_now();
                if (pass == 3)
                    pt_ssp_backward_s(d, db, sig, 256, 100);
                else if (pass == 2)
                    pt_ssp_backward(d, db, sig, 256, 100);
                else
                    pt_ssp_forward(x, pass == 0 ? sig : NULL, NULL, 256, 100);
                double t1 = cpu_now();
                for (size_t i = 0; i < len; i++) x[i] = d[i] = src[i];
                double t2 = cpu_now();
                if (pass >= 2)
                    ssp_backward_scalar(d, db, sig, 256, 100);
                else
                    ssp_scalar(x, pass == 0 ? sig : NULL, len);
                ts += cpu_now() - t2;
                tl += t1 - t0;
            }
            record(&lib, tl / ssp_calls);
            record(&ref, ts / ssp_calls);
        }
        static const char *const names[] = {"ssp", "ssp_value", "ssp_backward", "ssp_backward_s"};
        print(names[pass], len, &lib, &ref);
    }

    /* the bias gradients' column sums over a filter chunk (hot, as in the
     * backward, where the product has just written the rows) */
    for (int pass = 0; pass < 2; pass++) {
        const pt_sgemm_impl impl = pass == 0 ? PT_SGEMM_AUTO : PT_SGEMM_AVX2;
        double tot[100] = {0}, tot_ref[100] = {0};
        if (pt_colsum_total_run(impl, tot, src, 256, 100)) continue; /* no AVX2 */
        pt_colsum_total_run(PT_SGEMM_SCALAR, tot_ref, src, 256, 100);
        lib = (side){0};
        ref = (side){0};
        const int sum_calls = 2000;
        for (int r = 0; r < rounds; r++) {
            double t0 = cpu_now();
            for (int k = 0; k < sum_calls; k++) pt_colsum_total_run(impl, tot, src, 256, 100);
            double t1 = cpu_now();
            for (int k = 0; k < sum_calls; k++)
                pt_colsum_total_run(PT_SGEMM_SCALAR, tot_ref, src, 256, 100);
            double t2 = cpu_now();
            record(&lib, (t1 - t0) / sum_calls);
            record(&ref, (t2 - t1) / sum_calls);
        }
        if (memcmp(tot, tot_ref, sizeof tot)) {
            fprintf(stderr, "elementwise_rate: colsum bits differ from the reference\n");
            return 1;
        }
        print(pass == 0 ? "colsum" : "colsum_avx2", len, &lib, &ref);
    }

    /* Gaussian edge basis */
    const int edges = 4096, G = 25;
    float *dist = floats((size_t)edges), *e = floats((size_t)edges * G), *cut = floats((size_t)edges);
    for (int k = 0; k < edges; k++) dist[k] = 0.5f + 6.0f * (float)((k * 613) % edges) / (float)edges;
    lib = (side){0};
    ref = (side){0};
    const int basis_calls = 400;
    for (int r = 0; r < rounds; r++) {
        double t0 = cpu_now();
        for (int k = 0; k < basis_calls; k++) pt_edge_basis_forward(e, cut, dist, edges, G, 6.0f);
        double t1 = cpu_now();
        for (int k = 0; k < basis_calls; k++) basis_scalar(e, cut, dist, edges, G, 6.0f);
        double t2 = cpu_now();
        record(&lib, (t1 - t0) / basis_calls);
        record(&ref, (t2 - t1) / basis_calls);
    }
    print("edge_basis", (size_t)edges * G, &lib, &ref);
    free(param); free(grad); free(m2); free(v2);
    free(src); free(x); free(sig); free(d);
    free(dist); free(e); free(cut);
    return 0;
}
