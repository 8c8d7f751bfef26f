/* bench_neighbors.c — neighbour-graph build time of a .ptd dataset: the best
 * of several pt_graphs_build runs (count pass + fill pass, as training does),
 * as one JSON line.  Used by bench/neighbors_speed.sh (the same build before
 * and after a change, on molecules) and bench/neighbors_vs_ase.sh (against
 * ASE's neighbour list on periodic structures).
 *
 *   bench_neighbors DATA.ptd [--cutoff 6] [--max-neighbors K|unlimited] [--reps 5] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/graph/graph.h"

static double now(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_neighbors DATA.ptd [--cutoff 6] [--max-neighbors K|unlimited] [--reps 5]\n");
        return 2;
    }
    pt_graph_params p = {6.0f, 32, PT_GRAPH_RADIUS};
    int reps = 5;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--cutoff")) p.cutoff = strtof(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--max-neighbors"))
            p.max_neighbors = strcmp(argv[i + 1], "unlimited") ? atoi(argv[i + 1]) : PT_GRAPH_UNLIMITED;
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "bench_neighbors: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    pt_dataset ds;
    char err[512];
    if (pt_dataset_open(&ds, argv[1], err, sizeof err)) {
        fprintf(stderr, "bench_neighbors: %s\n", err);
        return 1;
    }
    pt_errors errs;
    pt_errors_init(&errs, 0);
    double best = 1e300, best_cpu = 1e300;   /* CPU time: less disturbed by a shared machine */
    uint64_t edges = 0;
    for (int r = 0; r < reps; r++) {
        pt_graphs g;
        double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
        if (pt_graphs_build(&g, &ds, &p, &errs)) {
            pt_errors_first(&errs, err, sizeof err);
            fprintf(stderr, "bench_neighbors: %s\n", err);
            return 1;
        }
        double dt = now(CLOCK_MONOTONIC) - t0, dc = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (dt < best) best = dt;
        if (dc < best_cpu) best_cpu = dc;
        edges = g.n_edges;
        pt_graphs_close(&g);
    }
    printf("{\"dataset\":\"%s\",\"structures\":%u,\"atoms\":%llu,\"edges\":%llu,\"cutoff\":%g,"
           "\"max_neighbors\":%d,\"reps\":%d,\"best_seconds\":%.6f,\"best_cpu_seconds\":%.6f,"
           "\"structures_per_second\":%.1f}\n",
           argv[1], ds.n_structs, (unsigned long long)ds.n_atoms, (unsigned long long)edges,
           (double)p.cutoff, p.max_neighbors, reps, best, best_cpu, ds.n_structs / best);
    pt_errors_close(&errs);
    pt_dataset_close(&ds);
    return 0;
}
