/* sgemm_epilogue.c — the filter network's elementwise ops fused into its
 * products (sgemm_kernels.h's epilogues) against the same ops as passes of
 * their own, one thread, on the shapes of seed 000's SchNet (F = 100) in
 * the 256-row chunks schnet_filter.c runs:
 *
 *   sgemm_epilogue [ROWS [SECONDS [IMPL]]]
 *
 *   cut    W = (s1 A2ᵀ + a2) ⊙ C        (NT 100 → 100, row scale in place)
 *   dssp   ds1 = (dP A2) ⊙ σ1           (NN 100 → 100)
 *
 * "unfused" is the product (with its bias, chains from the bias) followed
 * by the row scale (pt_filter_cutoff_forward) / the product with σ1
 * (pt_ssp_backward) as a pass over
 * the chunk; "fused" the same result from pt_sgemm_fused_run.  ROWS
 * (default 8192) rows are walked chunk by chunk, so operands come from
 * where a training step finds them.  Each variant runs in 7 interleaved
 * rounds of SECONDS/7 (default 2) after an untimed pass; the best round is
 * kept, in thread CPU time (see bench/sgemm_kernels.c).  Prints one JSON
 * line per op: ns per row for both and unfused / fused.  IMPL: avx512,
 * avx2 (default: the widest the CPU runs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/model/schnet_ops.h"
#include "engine/model/sgemm_kernels.h"

enum { F = 100, CHUNK = 256, ROUNDS = 7 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *filled(size_t n, float scale)
{
    float *p = malloc(n * sizeof(float));
    if (!p) exit(1);
    for (size_t i = 0; i < n; i++)
        p[i] = scale * ((float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f);
    return p;
}

typedef struct bufs {
    pt_sgemm_impl impl;
    int rows;
    float *s1, *sig, *a2, *b2, *w, *cut, *dp, *ds1;
} bufs;

enum { OP_CUT, OP_DSSP, N_OPS };
static const char *const op_name[] = {"cut", "dssp"};

/* One pass of op over every chunk, fused or not. */
static void pass(const bufs *b, int op, int fused)
{
    for (int r0 = 0; r0 < b->rows; r0 += CHUNK) {
        const int n = b->rows - r0 < CHUNK ? b->rows - r0 : CHUNK;
        const size_t o = (size_t)r0 * F;
        if (op == OP_CUT) {
            pt_sgemm_epilogue e = {.kind = PT_SGEMM_EPI_ROW_SCALE, .scale = b->cut + r0};
            if (fused) {
                pt_sgemm_fused_run(b->impl, CblasNoTrans, CblasTrans, n, F, F, b->s1 + o, F, b->a2,
                                   F, 0.0f, b->b2, b->w + o, F, &e);
            } else {
                pt_sgemm_bias_run(b->impl, CblasNoTrans, CblasTrans, n, F, F, b->s1 + o, F, b->a2,
                                  F, b->b2, b->w + o, F);
                pt_filter_cutoff_forward(b->w + o, b->w + o, b->cut + r0, n, F);
            }
        } else {
            pt_sgemm_epilogue e = {.kind = PT_SGEMM_EPI_MUL, .mul = b->sig + o};
            if (fused) {
                pt_sgemm_fused_run(b->impl, CblasNoTrans, CblasNoTrans, n, F, F, b->dp + o, F,
                                   b->a2, F, 0.0f, NULL, b->ds1 + o, F, &e);
            } else {
                pt_sgemm_run(b->impl, CblasNoTrans, CblasNoTrans, n, F, F, b->dp + o, F, b->a2, F,
                             0.0f, b->ds1 + o, F);
                pt_ssp_backward(b->ds1 + o, NULL, b->sig + o, n, F);
            }
        }
    }
}

int main(int argc, char **argv)
{
    bufs b = {.rows = argc > 1 ? atoi(argv[1]) : 8192};
    const double seconds = argc > 2 ? atof(argv[2]) : 2.0;
    b.impl = pt_sgemm_supported(PT_SGEMM_AVX512) ? PT_SGEMM_AVX512 : PT_SGEMM_AVX2;
    if (argc > 3) b.impl = !strcmp(argv[3], "avx2") ? PT_SGEMM_AVX2 : PT_SGEMM_AVX512;
    if (b.rows <= 0 || seconds <= 0 || !pt_sgemm_supported(b.impl)) {
        fprintf(stderr, "usage: sgemm_epilogue [ROWS>0 [SECONDS>0 [avx512|avx2]]] "
                        "(the kernel must be one this CPU runs)\n");
        return 2;
    }
    const size_t rf = (size_t)b.rows * F;
    b.a2 = filled((size_t)F * F, 0.2f);
    b.b2 = filled(F, 0.2f);
    b.cut = filled((size_t)b.rows, 1.0f);
    b.s1 = filled(rf, 1.0f), b.sig = filled(rf, 1.0f), b.w = filled(rf, 1.0f);
    b.dp = filled(rf, 1.0f), b.ds1 = filled(rf, 1.0f);
    for (int op = 0; op < N_OPS; op++) {
        double best[2] = {1e30, 1e30};
        for (int f = 0; f < 2; f++) pass(&b, op, f);   /* untimed */
        for (int r = 0; r < ROUNDS; r++)
            for (int f = 0; f < 2; f++) {
                long reps = 0;
                double t0 = now(), t;
                do {
                    pass(&b, op, f);
                    reps++;
                } while ((t = now() - t0) < seconds / ROUNDS / 2 / N_OPS);
                if (t / reps < best[f]) best[f] = t / reps;
            }
        printf("{\"op\":\"%s\",\"impl\":\"%s\",\"rows\":%d,\"unfused_ns_per_row\":%.2f,"
               "\"fused_ns_per_row\":%.2f,\"unfused_over_fused\":%.3f}\n",
               op_name[op], pt_sgemm_impl_name(b.impl), b.rows, 1e9 * best[0] / b.rows,
               1e9 * best[1] / b.rows, best[0] / best[1]);
    }
    free(b.a2), free(b.b2), free(b.cut);
    free(b.s1), free(b.sig), free(b.w), free(b.dp), free(b.ds1);
    return 0;
}
