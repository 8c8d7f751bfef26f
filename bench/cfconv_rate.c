/* cfconv_rate.c — CPU time per edge of the continuous-filter convolution
 * (engine/model/cfconv_kernels.h) on a real batch, each implementation
 * against the others and the bound, measured in the same run.
 *
 *   cfconv_rate DATA.ptd [ROUNDS]
 * builds the batch the training step sees (8 LPFHP packs, seed 000's model
 * shapes: F = 100, 6 Å, 32 neighbours, the deduplicated filter rows of
 * edge_rows.h), random x, W, dm and cutoffs, and times pt_cfconv_forward_range
 * and pt_cfconv_backward_range pack by pack, each pack's W and dP rows read
 * once just before (untimed), as the pipeline of schnet_edges.c leaves them
 * in cache.  Prints one JSON object per implementation (generic, avx2,
 * avx512 where the CPU has them): ns and cycles per real edge (edges with a
 * row) of the forward and the backward, and the bound of cfconv_kernels.h
 * in cycles (forward 7 from L1 / 12.5 with W from L2, backward 14 / 25);
 * also the backward by senders and by rows on the same packs (bwd_senders,
 * bwd_rows, with what the rows' entries cost: row_edges_build_us) and the
 * force passes' tangent, second backward and distance backward over the
 * whole batch (forces_tangent, forces_backward2, forces_backward_dist;
 * random operands), and what building the sender lists costs
 * (senders_build_us, once per micro-batch) and the row table itself
 * (rows_build_us, pt_edge_rows_build, once per micro-batch too).
 * Then "pipeline": the edge pass of schnet_edges.c itself on block 0 of
 * seed 000's model (filter chunks each followed by the convolution of the
 * receivers they complete, then the backward), per implementation: the
 * convolution's ns per edge from the profile's laps (wall clock, but each
 * lap lasts microseconds, and the best round is kept), forward and
 * forward + backward, and "edge_pass_cpu_ms", the thread CPU time of the
 * whole pass (filter network included: the same work for every
 * implementation, so differences are the convolution's); a third argument
 * bf16 runs the pipeline in bf16 (the fused path, W as bf16 rows read by
 * cfconv_bf16.h where the CPU has AVX512-BF16; the kernel lines above stay
 * fp32's).
 * Cycles come from the clock measured here (a chain of dependent integer
 * adds, one per cycle).  Thread CPU time (CLOCK_THREAD_CPUTIME_ID), so a
 * loaded machine's time slicing is not counted; implementations run
 * interleaved, ROUNDS rounds (default 5), best round each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/core/errors.h"
#include "engine/data/dataset.h"
#include "engine/graph/graph.h"
#include "engine/model/cfconv_kernels.h"
#include "engine/pack/edge_rows.h"
#include "engine/model/schnet_internal.h"
#include "engine/model/schnet_ops.h"
#include "engine/pack/batch.h"
#include "engine/pack/packing.h"

enum { F = 100, PACKS = 8 };

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "cfconv_rate: out of memory\n");
        exit(1);
    }
    return p;
}

static float *randoms(size_t n, unsigned seed)
{
    float *p = alloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    return p;
}

/* Cycles per second: 2e8 dependent integer adds take one cycle each. */
static double clock_hz(void)
{
    double best = 0.0;
    for (int r = 0; r < 3; r++) {
        unsigned long x = 0, n = 200000000ul;
        double t0 = cpu_now();
        for (unsigned long i = 0; i < n; i++) __asm__ volatile("add $1, %0" : "+r"(x));
        double hz = (double)n / (cpu_now() - t0);
        if (hz > best) best = hz;
    }
    return best;
}

/* Reads rows [r0, r1) of a (the pipeline leaves them in cache). */
static float touch(const float *a, int32_t r0, int32_t r1)
{
    float s = 0.0f;
    for (size_t i = (size_t)r0 * F; i < (size_t)r1 * F; i++) s += a[i];
    return s;
}

/* The pipeline itself (schnet_edges.c: filter chunks, each followed by
 * the convolution of the receivers it completes, and the backward) on
 * block 0 of seed 000's model: the convolution's wall time from the
 * profile's laps (µs each, so a loaded machine rarely preempts one; best
 * round) and the CPU time of the whole edge pass (filter network
 * included, the same work for every implementation). */
static void pipeline(const pt_batch *b, int rounds, const pt_cfconv_impl *impls, int ni,
                     double *conv, double *conv_f, double *whole, pt_precision prec)
{
    pt_schnet_config mc = pt_schnet_config_default();
    pt_schnet model;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_schnet_acts a;
    if (pt_schnet_init(&model, &mc, &errs) ||
        pt_schnet_acts_init(&a, &model, b->cap_nodes, b->cap_edges, b->cap_graphs, &errs)) {
        fprintf(stderr, "cfconv_rate: cannot build the model\n");
        exit(1);
    }
    pt_schnet_init_weights(&model, 5);
    a.precision = prec;
    pt_schnet_prepare_edges(&model, &a, b);
    const int N = b->cap_nodes, G = mc.gaussians;
    const pt_schnet_block *w = &model.params.block[0];
    pt_schnet_block_acts *k = &a.block[0];
    float *x = randoms((size_t)N * F, 5), *dm = randoms((size_t)N * F, 6);
    memcpy(k->x, x, (size_t)N * F * sizeof(float));
    memcpy(a.dm, dm, (size_t)N * F * sizeof(float));
    float *gbuf = calloc((size_t)F * G + F + (size_t)F * F + F, sizeof(float));
    if (!gbuf) exit(1);
    pt_schnet_block dw = {0};
    dw.mlp0_w = gbuf;
    dw.mlp0_b = dw.mlp0_w + F * G;
    dw.mlp2_w = dw.mlp0_b + F;
    dw.mlp2_b = dw.mlp2_w + F * F;
    for (int ii = 0; ii < ni; ii++) conv[ii] = conv_f[ii] = whole[ii] = 1e30;
    for (int r = 0; r < rounds; r++)
        for (int ii = 0; ii < ni; ii++) {
            if (!pt_cfconv_supported(impls[ii])) continue;
            pt_cfconv_force(impls[ii]);
            pt_schnet_profile prof;
            memset(&prof, 0, sizeof prof);
            pt_stopwatch sw;
            double t0 = cpu_now();
            pt_stopwatch_start(&sw, &prof);
            pt_schnet_edges_forward(w, k, &a, b, G, F, &sw);
            const double cf = prof.seconds[PT_SCHNET_OP_CFCONV];
            pt_schnet_edges_backward(w, &dw, k, &a, b, G, F, &sw);
            const double t = cpu_now() - t0, c = prof.seconds[PT_SCHNET_OP_CFCONV];
            if (c < conv[ii]) conv[ii] = c;
            if (cf < conv_f[ii]) conv_f[ii] = cf;
            if (t < whole[ii]) whole[ii] = t;
        }
    pt_cfconv_force(PT_CFCONV_AUTO);
    free(x), free(dm), free(gbuf);
    pt_schnet_acts_close(&a);
    pt_schnet_close(&model);
    pt_errors_close(&errs);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: cfconv_rate DATA.ptd [ROUNDS] [fp32|bf16]\n");
        return 2;
    }
    const int rounds = argc > 2 ? atoi(argv[2]) : 5;
    /* the pipeline's precision (bf16: the fused path where the CPU has it) */
    const pt_precision prec =
        argc > 3 && !strcmp(argv[3], "bf16") ? PT_PRECISION_BF16 : PT_PRECISION_FP32;
    if (rounds < 1) {
        fprintf(stderr, "cfconv_rate: ROUNDS must be >= 1\n");
        return 2;
    }
    char err[256];
    pt_dataset ds;
    memset(&ds, 0, sizeof ds);
    if (pt_dataset_open(&ds, argv[1], err, sizeof err)) {
        fprintf(stderr, "cfconv_rate: %s\n", err);
        return 1;
    }
    pt_errors errs;
    pt_errors_init(&errs, 0);
    const float cutoff = 6.0f;
    pt_graph_params gp = {cutoff, 32, PT_GRAPH_RADIUS};
    pt_graphs g;
    const uint32_t n = ds.n_structs;
    uint32_t *natoms = alloc(n * sizeof(uint32_t)), *nedges = alloc(n * sizeof(uint32_t));
    uint32_t *ids = alloc(n * sizeof(uint32_t));
    pt_packer packer;
    pt_packs packs;
    pt_batch b;
    memset(&g, 0, sizeof g);
    memset(&packer, 0, sizeof packer);
    memset(&packs, 0, sizeof packs);
    memset(&b, 0, sizeof b);
    pt_pack_request req = {.method = PT_PACK_LPFHP};
    int ok = pt_graphs_build(&g, &ds, &gp, &errs) == 0;
    for (uint32_t s = 0; ok && s < n; s++) {
        natoms[s] = pt_dataset_natoms(&ds, s);
        nedges[s] = pt_graphs_nedges(&g, s);
        ids[s] = s;
    }
    ok = ok && pt_packer_init(&packer, &req, natoms, nedges, n, ids, n, &errs) == 0 &&
         pt_packer_epoch(&packer, 7, 0, &packs) == 0 && packs.n_packs >= PACKS &&
         pt_batch_init(&b, packer.limits, PACKS, cutoff) == PT_BATCH_OK &&
         pt_batch_fill(&b, &ds, &g, &packs, 0, PACKS, 0) == PT_BATCH_OK;
    if (!ok) {
        fprintf(stderr, "cfconv_rate: cannot build %d packs of %s\n", PACKS, argv[1]);
        return 1;
    }
    const int N = b.cap_nodes, E = b.cap_edges;
    int32_t *row = alloc((size_t)E * sizeof(int32_t));
    uint8_t *first = alloc((size_t)E);
    float *row_dist = alloc((size_t)E * sizeof(float));
    int32_t *cursor = alloc((size_t)N * sizeof(int32_t));
    const int32_t U = pt_edge_rows_build(row, first, row_dist, cursor, b.edge_src,
                                         b.dst_offset, b.edge_dist, b.edge_vec, N, cutoff);
    /* the backward by senders' lists (a pack's node range is closed: edges
     * never leave a pack) */
    int32_t *row_last = alloc((size_t)E * sizeof(int32_t));
    int32_t *so = alloc((size_t)(N + 1) * sizeof(int32_t)), *se = alloc((size_t)E * sizeof(int32_t));
    int32_t *close = alloc((size_t)(N + 1) * sizeof(int32_t));
    pt_edge_rows_last(row_last, row, b.dst_offset, N);
    /* the row table's cost, once per micro-batch in training (best of 20;
     * the same table every time) */
    double rows_s = 1e30;
    for (int r = 0; r < 20; r++) {
        const double t0 = cpu_now();
        pt_edge_rows_build(row, first, row_dist, cursor, b.edge_src, b.dst_offset, b.edge_dist,
                           b.edge_vec, N, cutoff);
        const double t = cpu_now() - t0;
        if (t < rows_s) rows_s = t;
    }
    /* the lists' cost, once per micro-batch in training (best of 20) */
    double senders_s = 1e30;
    for (int r = 0; r < 20; r++) {
        const double t0 = cpu_now();
        pt_cfconv_senders(so, se, close, row, b.edge_src, b.edge_dst, N, E);
        const double t = cpu_now() - t0;
        if (t < senders_s) senders_s = t;
    }
    long real = 0;
    for (int k = 0; k < E; k++) real += row[k] >= 0;
    float *x = randoms((size_t)N * F, 1), *w = randoms((size_t)U * F, 2);
    float *dm = randoms((size_t)N * F, 3), *cut = randoms((size_t)U, 4);
    /* and the lists' edges as the backward reads them (once per batch too) */
    pt_cfconv_sedge *sr = alloc((size_t)E * sizeof *sr);
    pt_cfconv_sender_edges(sr, so, se, row, first, row_last, b.edge_dst, cut, 0, N);
    /* and each row's edges as the backward by rows reads them (once per
     * batch, best of 20) */
    pt_cfconv_redge *re = alloc((size_t)E * sizeof *re);
    double row_edges_s = 1e30;
    for (int r = 0; r < 20; r++) {
        const double t0 = cpu_now();
        pt_cfconv_row_edges(re, row, first, b.edge_src, b.dst_offset, cut, N);
        const double t = cpu_now() - t0;
        if (t < row_edges_s) row_edges_s = t;
    }
    float *m = alloc((size_t)N * F * sizeof(float)), *dx = alloc((size_t)N * F * sizeof(float));
    float *dp = alloc((size_t)U * F * sizeof(float));
    /* each pack's receivers and the rows they use (rows are numbered in
     * receiver order, so a pack's rows are one range) */
    int i_at[PACKS + 1];
    int32_t r_at[PACKS + 1];
    for (int p = 0; p <= PACKS; p++) {
        i_at[p] = (int)((long)N * p / PACKS);
        r_at[p] = p == PACKS ? U : 0;
    }
    for (int p = 1; p < PACKS; p++)
        for (int32_t k = b.dst_offset[i_at[p]]; k < E && r_at[p] == 0; k++)
            if (row[k] >= 0) r_at[p] = row[k];
    for (int p = PACKS - 1; p > 0; p--)
        if (r_at[p] == 0) r_at[p] = r_at[p + 1];

    const double hz = clock_hz();
    const pt_cfconv_impl impls[] = {PT_CFCONV_GENERIC, PT_CFCONV_AVX2, PT_CFCONV_AVX512};
    enum { NI = sizeof impls / sizeof impls[0] };
    double best_f[NI], best_b[NI], best_s[NI], best_t[NI], best_2[NI], best_d[NI], best_r[NI];
    float sink = 0.0f;
    for (int ii = 0; ii < NI; ii++)
        best_f[ii] = best_b[ii] = best_s[ii] = best_t[ii] = best_2[ii] = best_d[ii] = best_r[ii] =
            1e30;
    float *wd = randoms((size_t)U * F, 7), *lam = randoms((size_t)U, 8);
    float *pb = randoms((size_t)U * F, 9);
    for (int r = 0; r < rounds; r++)
        for (int ii = 0; ii < NI; ii++) {
            if (!pt_cfconv_supported(impls[ii])) continue;
            pt_cfconv_force(impls[ii]);
            double tf = 0.0, tb = 0.0;
            memset(dx, 0, (size_t)N * F * sizeof(float));
            for (int p = 0; p < PACKS; p++) {
                sink += touch(w, r_at[p], r_at[p + 1]);
                double t0 = cpu_now();
                pt_cfconv_forward_range(m, w, NULL, row, x, b.edge_src, b.dst_offset, i_at[p],
                                        i_at[p + 1], F);
                tf += cpu_now() - t0;
                sink += touch(dp, r_at[p], r_at[p + 1]) + touch(w, r_at[p], r_at[p + 1]);
                t0 = cpu_now();
                pt_cfconv_backward_range(dx, dp, dm, x, w, cut, row, first, b.edge_src,
                                         b.dst_offset, i_at[p], i_at[p + 1], F, 0);
                tb += cpu_now() - t0;
            }
            memset(dx, 0, (size_t)N * F * sizeof(float));
            double ts = 0.0;
            for (int p = 0; p < PACKS; p++) {
                sink += touch(dp, r_at[p], r_at[p + 1]) + touch(w, r_at[p], r_at[p + 1]);
                double t0 = cpu_now();
                pt_cfconv_backward_senders(dx, dp, dm, x, w, cut, row, first, row_last,
                                           b.edge_src, b.edge_dst, b.dst_offset, so, se, sr,
                                           i_at[p], i_at[p + 1], F, 0);
                ts += cpu_now() - t0;
            }
            memset(dx, 0, (size_t)N * F * sizeof(float));
            double tr = 0.0;
            for (int p = 0; p < PACKS; p++) {
                sink += touch(dp, r_at[p], r_at[p + 1]) + touch(w, r_at[p], r_at[p + 1]);
                double t0 = cpu_now();
                pt_cfconv_backward_rows(dx, dp + (size_t)r_at[p] * F, dm, x, w, 0, re, r_at[p],
                                        r_at[p + 1], F);
                tr += cpu_now() - t0;
            }
            if (tr < best_r[ii]) best_r[ii] = tr;
            /* the force passes' tangent over the batch, with ẋ (blocks after
             * the first) */
            double t0 = cpu_now();
            pt_cfconv_tangent(m, w, wd, lam, row, x, dm, b.edge_src, b.dst_offset, N, F);
            const double tt = cpu_now() - t0;
            if (tt < best_t[ii]) best_t[ii] = tt;
            /* and its second backward (senders), with ẋ */
            t0 = cpu_now();
            pt_cfconv_backward2(dx, dp, pb, dm, x, m, w, w, wd, lam, cut, lam, row, first,
                                row_last, b.edge_dst, so, se, N, F);
            const double t2 = cpu_now() - t0;
            if (t2 < best_2[ii]) best_2[ii] = t2;
            /* and its distance backward (receiver order), g added to */
            t0 = cpu_now();
            pt_cfconv_backward_dist(dx, pb, dm, x, w, wd, row, b.edge_src, b.dst_offset, N, F);
            const double td = cpu_now() - t0;
            if (td < best_d[ii]) best_d[ii] = td;
            sink += dx[N / 3 * F] + pb[0];
            sink += m[N / 2 * F];
            if (tf < best_f[ii]) best_f[ii] = tf;
            if (tb < best_b[ii]) best_b[ii] = tb;
            if (ts < best_s[ii]) best_s[ii] = ts;
            sink += m[N / 2 * F] + dx[N / 3 * F];
        }
    pt_cfconv_force(PT_CFCONV_AUTO);
    double pipe_conv[NI], pipe_fwd[NI], pipe_whole[NI];
    pipeline(&b, rounds, impls, NI, pipe_conv, pipe_fwd, pipe_whole, prec);
    const double gen_f = best_f[0], gen_b = best_b[0];
    for (int ii = 0; ii < NI; ii++) {
        if (!pt_cfconv_supported(impls[ii])) continue;
        const double nf = best_f[ii] / (double)real * 1e9, nb = best_b[ii] / (double)real * 1e9;
        const double ns = best_s[ii] / (double)real * 1e9;
        const double nt = best_t[ii] / (double)real * 1e9;
        const double n2 = best_2[ii] / (double)real * 1e9;
        const double nd = best_d[ii] / (double)real * 1e9;
        const double nr = best_r[ii] / (double)real * 1e9;
        printf("{\"impl\":\"%s\",\"data\":\"%s\",\"edges\":%ld,\"rows\":%d,\"ghz\":%.2f,"
               "\"fwd_ns_per_edge\":%.2f,\"bwd_ns_per_edge\":%.2f,\"bwd_senders_ns_per_edge\":%.2f,"
               "\"bwd_rows_ns_per_edge\":%.2f,\"row_edges_build_us\":%.1f,"
               "\"forces_tangent_ns_per_edge\":%.2f,\"forces_backward2_ns_per_edge\":%.2f,"
               "\"forces_backward_dist_ns_per_edge\":%.2f,\"senders_build_us\":%.1f,"
               "\"rows_build_us\":%.1f,"
               "\"fwd_cycles\":%.1f,\"bwd_cycles\":%.1f,\"bwd_senders_cycles\":%.1f,"
               "\"bound_cycles\":{\"fwd_l1\":7,\"fwd_l2\":12.5,\"bwd_l1\":14,\"bwd_l2\":25},"
               "\"speedup_vs_generic\":{\"fwd\":%.2f,\"bwd\":%.2f},"
               "\"pipeline\":{\"cfconv_ns_per_edge\":%.2f,\"fwd_ns_per_edge\":%.2f,"
               "\"edge_pass_cpu_ms\":%.3f}}\n",
               pt_cfconv_impl_name(impls[ii]), argv[1], real, (int)U, hz * 1e-9, nf, nb, ns, nr,
               row_edges_s * 1e6, nt, n2, nd,
               senders_s * 1e6, rows_s * 1e6,
               nf * hz * 1e-9, nb * hz * 1e-9, ns * hz * 1e-9, gen_f / best_f[ii],
               gen_b / best_b[ii],
               pipe_conv[ii] / (double)real * 1e9, pipe_fwd[ii] / (double)real * 1e9,
               pipe_whole[ii] * 1e3);
    }
    if (sink == 12345.0f) printf("#\n");   /* keeps the reads */
    free(row_last), free(so), free(se), free(sr), free(re), free(close), free(wd), free(lam), free(pb);
    free(row), free(first), free(row_dist), free(cursor), free(x), free(w), free(dm), free(cut);
    free(m), free(dx), free(dp), free(natoms), free(nedges), free(ids);
    pt_batch_close(&b);
    pt_packs_close(&packs);
    pt_packer_close(&packer);
    pt_graphs_close(&g);
    pt_dataset_close(&ds);
    pt_errors_close(&errs);
    return 0;
}
