/* bench_forces.c — what training on forces costs against training on energy,
 * step for step, on the same batch.
 *
 *   bench_forces DATA.ptd [--per-pack B] [--packs P] [--steps S] [--threads T]
 *                         [--precision fp32|bf16] [--target KEY]
 *                         [--max-neighbors K] [--ranks R --rank r] [--micro M]
 *
 * Seed 000's SchNet (H=F=100, T=4, G=25, 6 Å, sum readout; K = 32
 * neighbours unless given, 0 = every neighbour within the cutoff; weights of pt_schnet_init_weights(0)) on the
 * first P·B structures of DATA, P packs of B consecutive structures in one
 * batch (the engine's own batcher).  With --ranks R, this process is rank r
 * of a data-parallel layout and its batch holds packs [r·P/R, (r+1)·P/R)
 * (the caller runs the R processes at once; bench_forces.sh).  With
 * --micro M the batch is computed as micro-batches of M packs whose
 * gradients add up, as the trainer's accumulation does (smaller arenas stay
 * in cache); micro-batches are filled before timing (the trainer's loader
 * fills them ahead, on another thread).  Each of S rounds times, back to
 * back on that batch:
 *   energy  pt_schnet_forward + pt_schnet_loss + pt_schnet_backward
 *   forces  pt_schnet_forward + pt_schnet_forces + pt_schnet_loss_forces
 *           (weights 1, 1, 0) + pt_schnet_backward_forces
 * (the energy step in an arena of mode ENERGY, as training runs it today;
 * the force step in a FORCES_TRAIN arena), after one warm-up round each.
 * Rounds alternate the two so that load on the shared machine hits both
 * alike; medians are reported.  One JSON line: graphs, atoms, edges and
 * filter rows of the batch, ms per step of each, graphs/s of each, the ratio
 * forces/energy, arena bytes of each mode, and the force step's time by kind
 * of work (schnet.h, pt_schnet_profile) from one extra profiled round.
 * OpenBLAS threads: T (default 1). */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/data/dataset.h"
#include "engine/graph/graph.h"
#include "engine/model/schnet.h"
#include "engine/pack/batch.h"
#include "engine/pack/packing.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void print_errors(const pt_errors *errs)
{
    char buf[1024];
    for (size_t i = 0; i < errs->kept; i++) {
        pt_error_format(&errs->items[i], buf, sizeof buf);
        fprintf(stderr, "bench_forces: %s\n", buf);
    }
}

static long arg_long(const char *name, const char *v, long lo, long hi)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "bench_forces: %s: '%s' is not in %ld..%ld\n", name, v, lo, hi);
        exit(2);
    }
    return x;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_forces DATA.ptd [--per-pack B] [--packs P] [--steps S] "
                        "[--threads T] [--precision fp32|bf16] [--target KEY]\n");
        return 2;
    }
    const char *data = argv[1], *target = "energy";
    long per_pack = 4, packs = 8, steps = 20, threads = 1, ranks = 1, rank = 0, max_nb = 32;
    long micro = 0;
    pt_precision prec = PT_PRECISION_FP32;
    for (int i = 2; i + 1 < argc + 1; i += 2) {
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_forces: %s needs a value\n", argv[i]);
            return 2;
        }
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--per-pack")) per_pack = arg_long(k, v, 1, 4096);
        else if (!strcmp(k, "--packs")) packs = arg_long(k, v, 1, 4096);
        else if (!strcmp(k, "--steps")) steps = arg_long(k, v, 1, 100000);
        else if (!strcmp(k, "--threads")) threads = arg_long(k, v, 1, 1024);
        else if (!strcmp(k, "--ranks")) ranks = arg_long(k, v, 1, 4096);
        else if (!strcmp(k, "--micro")) micro = arg_long(k, v, 1, 4096);
        else if (!strcmp(k, "--rank")) rank = arg_long(k, v, 0, 4095);
        else if (!strcmp(k, "--max-neighbors")) max_nb = arg_long(k, v, 0, 1024); /* 0: all */
        else if (!strcmp(k, "--target")) target = v;
        else if (!strcmp(k, "--precision") && (!strcmp(v, "fp32") || !strcmp(v, "bf16")))
            prec = !strcmp(v, "bf16") ? PT_PRECISION_BF16 : PT_PRECISION_FP32;
        else {
            fprintf(stderr, "bench_forces: unknown option or value '%s %s'\n", k, v);
            return 2;
        }
    }
    if (rank >= ranks || packs % ranks) {
        fprintf(stderr, "bench_forces: --rank must be below --ranks, which must divide --packs\n");
        return 2;
    }
    const int32_t mine = (int32_t)(packs / ranks);
    if (!micro) micro = mine;
    if (mine % micro) {
        fprintf(stderr, "bench_forces: --micro must divide the packs of a rank (%d)\n", mine);
        return 2;
    }
    const int32_t n_micro = mine / (int32_t)micro;
    openblas_set_num_threads((int)threads);

    pt_errors errs;
    pt_errors_init(&errs, 0);
    char err[512];
    pt_dataset ds;
    memset(&ds, 0, sizeof ds);
    if (pt_dataset_open(&ds, data, err, sizeof err)) {
        fprintf(stderr, "bench_forces: %s\n", err);
        return 1;
    }
    int key = pt_dataset_find_target(&ds, target);
    uint32_t n = (uint32_t)(per_pack * packs);
    /* without force labels (QM9) the force step does the same work, on zero
     * force residuals */
    if (key < 0 || n > ds.n_structs) {
        fprintf(stderr, "bench_forces: %s needs a target '%s' and %u structures\n", data, target,
                n);
        return 1;
    }
    pt_schnet m;
    pt_schnet_config c = pt_schnet_config_default();
    c.max_neighbors = (int32_t)max_nb;
    if (pt_schnet_init(&m, &c, &errs)) {
        print_errors(&errs);
        return 1;
    }
    pt_schnet_init_weights(&m, 0);
    pt_graph_params gp = {.cutoff = c.cutoff, .max_neighbors = c.max_neighbors,
                          .mode = PT_GRAPH_RADIUS};
    pt_graphs graphs;
    pt_packs pk;
    memset(&graphs, 0, sizeof graphs);
    memset(&pk, 0, sizeof pk);
    pt_batch *bs = calloc((size_t)n_micro, sizeof(pt_batch));
    pt_schnet_acts ae, af;
    if (pt_graphs_build(&graphs, &ds, &gp, &errs) ||
        pt_packs_consecutive(&pk, &ds, &graphs, n, (uint32_t)per_pack, &errs)) {
        print_errors(&errs);
        return 1;
    }
    /* totals over the micro-batches: the loss is the mean over all of them */
    pt_schnet_loss_norm norm = {0};
    int32_t graphs_all = 0, atoms = 0, edges = 0, node_slots = 0, edge_slots = 0;
    for (int32_t i = 0; i < n_micro; i++) {
        pt_batch *b = &bs[i];
        uint32_t first = (uint32_t)(rank * mine + i * micro);
        if (pt_batch_init(b, pk.limits, (int32_t)micro, c.cutoff) != PT_BATCH_OK ||
            pt_batch_fill(b, &ds, &graphs, &pk, first, (int32_t)micro, key) != PT_BATCH_OK) {
            fprintf(stderr, "bench_forces: cannot fill micro-batch %d\n", i);
            return 1;
        }
        graphs_all += b->n_real_graphs;
        atoms += b->n_real_nodes;
        edges += b->n_real_edges;
        node_slots += b->cap_nodes;
        edge_slots += b->cap_edges;
        for (int32_t g = 0; g < b->cap_graphs; g++) {
            if (b->graph_id[g] < 0) continue;
            norm.graphs += 1.0;
            if (b->graph_has_forces[g]) norm.force_components += 3.0 * b->graph_natoms[g];
        }
    }
    if (pt_schnet_acts_init(&ae, &m, bs[0].cap_nodes, bs[0].cap_edges, bs[0].cap_graphs, &errs) ||
        pt_schnet_acts_init_mode(&af, &m, bs[0].cap_nodes, bs[0].cap_edges, bs[0].cap_graphs,
                                 PT_SCHNET_FORCES_TRAIN, &errs)) {
        print_errors(&errs);
        return 1;
    }
    for (int32_t i = 0; i < n_micro; i++)
        if (pt_schnet_batch_check(&m, &ae, &bs[i], &errs)) {
            print_errors(&errs);
            return 1;
        }
    ae.precision = af.precision = prec;
    float *grads = calloc(m.n_params, sizeof(float));
    double *te = calloc((size_t)steps, sizeof(double)), *tf = calloc((size_t)steps, sizeof(double));
    const pt_schnet_loss_weights w = {1.0, 1.0, 0.0};
    pt_schnet_profile prof;
    memset(&prof, 0, sizeof prof);
    double loss_e = 0.0, loss_f = 0.0;
    int64_t rows = 0;
    for (long s = -1; s <= steps; s++) {
        /* s = −1: warm-up; s = steps: the profiled round */
        if (s == steps) af.profile = &prof;
        double t0 = now();
        loss_e = 0.0;
        for (int32_t i = 0; i < n_micro; i++) {
            pt_schnet_forward(&m, &ae, &bs[i]);
            loss_e += pt_schnet_loss(&m, &ae, &bs[i], norm.graphs);
            pt_schnet_backward(&m, &ae, &bs[i], grads);
        }
        double t1 = now();
        loss_f = 0.0;
        rows = 0;
        for (int32_t i = 0; i < n_micro; i++) {
            pt_schnet_forward(&m, &af, &bs[i]);
            pt_schnet_forces(&m, &af, &bs[i]);
            loss_f += pt_schnet_loss_forces(&m, &af, &bs[i], &w, &norm, NULL);
            pt_schnet_backward_forces(&m, &af, &bs[i], grads);
            rows += af.n_rows;
        }
        double t2 = now();
        if (s >= 0 && s < steps) {
            te[s] = t1 - t0;
            tf[s] = t2 - t1;
        }
    }
    double me = median(te, (int)steps), mf = median(tf, (int)steps);
    double prof_total = 0.0;
    for (int op = 0; op < PT_SCHNET_OP_COUNT; op++) prof_total += prof.seconds[op];
    printf("{\"data\":\"%s\",\"precision\":\"%s\",\"threads\":%ld,\"ranks\":%ld,\"rank\":%ld,"
           "\"micro_batches\":%d,\"max_neighbors\":%ld,\"graphs\":%d,\"atoms\":%d,"
           "\"edges\":%d,\"filter_rows\":%lld,\"node_slots\":%d,\"edge_slots\":%d,"
           "\"energy_ms\":%.3f,\"forces_ms\":%.3f,\"energy_graphs_per_s\":%.1f,"
           "\"forces_graphs_per_s\":%.1f,\"ratio_forces_over_energy\":%.3f,"
           "\"arena_bytes\":{\"energy\":%zu,\"forces\":%zu,\"forces_train\":%zu},"
           "\"force_labels\":%s,\"loss\":{\"energy\":%.6g,\"combined\":%.6g},"
           "\"forces_step_share\":{",
           data, prec == PT_PRECISION_BF16 ? "bf16" : "fp32", threads, ranks, rank, n_micro,
           max_nb, graphs_all, atoms, edges, (long long)rows, node_slots, edge_slots, 1e3 * me,
           1e3 * mf, graphs_all / me, graphs_all / mf, mf / me, ae.bytes,
           pt_schnet_acts_bytes_mode(&c, bs[0].cap_nodes, bs[0].cap_edges, bs[0].cap_graphs,
                                     PT_SCHNET_FORCES),
           af.bytes, ds.forces ? "true" : "false", loss_e, loss_f);
    for (int op = 0; op < PT_SCHNET_OP_COUNT; op++)
        printf("%s\"%s\":%.3f", op ? "," : "", pt_schnet_op_name((pt_schnet_op)op),
               prof_total > 0 ? prof.seconds[op] / prof_total : 0.0);
    printf("}}\n");
    free(grads);
    free(te);
    free(tf);
    pt_schnet_acts_close(&ae);
    pt_schnet_acts_close(&af);
    for (int32_t i = 0; i < n_micro; i++) pt_batch_close(&bs[i]);
    free(bs);
    pt_packs_close(&pk);
    pt_graphs_close(&graphs);
    pt_dataset_close(&ds);
    pt_schnet_close(&m);
    pt_errors_close(&errs);
    return 0;
}
