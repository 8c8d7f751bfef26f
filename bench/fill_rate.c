/* fill_rate.c — what the loader's fill (pt_batch_fill_ids) costs when the
 * memory it reads and writes is not in the caches, as in training.
 *
 *   fill_rate DATA.ptd [FILLS [PACKS [FLUSH_MB]]]
 *
 * Builds the dataset's neighbour graphs (cutoff 6 Å, 32 neighbours: the
 * bench jobs' model), packs of 2 consecutive structures, and fills FILLS
 * (default 200) batches of PACKS (default 8) packs drawn at random, as an
 * epoch's shuffled packs are.  Before each fill FLUSH_MB (default 512) MB are
 * written, as a training step's activations evict the caches between two
 * fills of a slot (the L3 this VM reports is 480 MB: 64 MB left half the
 * misses in it); the same batch is then filled again at once (warm: what the
 * copy itself costs).  A third fill of the same packs follows a flush after
 * which the batch's own edge arrays are written once (dst_warm: the fill's
 * reads from DRAM without the misses on its destination).
 *
 * Prints one JSON object: the thread CPU time of a fill in ms, cold, warm and
 * dst_warm, min and median over the fills, and the batch's edge slots.  The
 * machine is shared: compare builds interleaved, by the medians and mins. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/core/errors.h"
#include "engine/data/dataset.h"
#include "engine/graph/graph.h"
#include "engine/pack/batch.h"
#include "engine/pack/packing.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One fill in thread CPU ms; exits on a fill error (a bench bug). */
static double timed_fill(pt_batch *b, const pt_dataset *ds, const pt_graphs *g,
                         const pt_packs *packs, const uint32_t *ids, int n)
{
    double t0 = cpu_now();
    int rc = pt_batch_fill_ids(b, ds, g, packs, ids, n, -1);
    double t1 = cpu_now();
    if (rc != PT_BATCH_OK) {
        fprintf(stderr, "fill_rate: fill failed: %s\n", pt_batch_strerror(rc));
        exit(1);
    }
    return (t1 - t0) * 1e3;
}

static void print_stat(const char *name, double *v, int n, const char *sep)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    printf("\"%s_ms\":{\"min\":%.4f,\"median\":%.4f}%s", name, v[0], v[n / 2], sep);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fill_rate DATA.ptd [FILLS [PACKS [FLUSH_MB]]]\n");
        return 2;
    }
    int fills = argc > 2 ? atoi(argv[2]) : 200, per = argc > 3 ? atoi(argv[3]) : 8;
    long flush_mb = argc > 4 ? atol(argv[4]) : 512;
    if (fills < 1 || per < 1 || flush_mb < 1) {
        fprintf(stderr, "fill_rate: FILLS, PACKS and FLUSH_MB must be >= 1\n");
        return 2;
    }
    pt_dataset ds;
    char err[512];
    if (pt_dataset_open(&ds, argv[1], err, sizeof err) != 0) {
        fprintf(stderr, "fill_rate: %s\n", err);
        return 1;
    }
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_graph_params gp = {.cutoff = 6.0f, .max_neighbors = 32, .mode = PT_GRAPH_RADIUS};
    pt_graphs g;
    pt_packs packs = {0};
    if (pt_graphs_build(&g, &ds, &gp, &errs) != 0 ||
        pt_packs_consecutive(&packs, &ds, &g, (uint32_t)ds.n_structs, 2, &errs) != 0) {
        fprintf(stderr, "fill_rate: cannot build the graphs or packs\n");
        return 1;
    }
    pt_batch b;
    if (pt_batch_init(&b, packs.limits, per, 6.0f) != PT_BATCH_OK) {
        fprintf(stderr, "fill_rate: cannot allocate the batch\n");
        return 1;
    }
    const size_t flush_n = (size_t)flush_mb << 20;
    unsigned char *flush = malloc(flush_n);
    uint32_t *ids = malloc((size_t)per * sizeof(uint32_t));
    double *cold = malloc((size_t)fills * sizeof(double));
    double *warm = malloc((size_t)fills * sizeof(double));
    double *dst_warm = malloc((size_t)fills * sizeof(double));
    if (!flush || !ids || !cold || !warm || !dst_warm) {
        fprintf(stderr, "fill_rate: out of memory\n");
        return 1;
    }
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    const size_t e = (size_t)b.cap_edges;
    for (int f = 0; f < fills; f++) {
        for (int p = 0; p < per; p++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            ids[p] = (uint32_t)((rng >> 33) % packs.n_packs);
        }
        memset(flush, f & 0xff, flush_n);
        cold[f] = timed_fill(&b, &ds, &g, &packs, ids, per);
        warm[f] = timed_fill(&b, &ds, &g, &packs, ids, per);
        memset(flush, (f + 1) & 0xff, flush_n);
        memset(b.edge_src, 0, e * sizeof(*b.edge_src));
        memset(b.edge_dst, 0, e * sizeof(*b.edge_dst));
        memset(b.edge_dist, 0, e * sizeof(*b.edge_dist));
        memset(b.edge_vec, 0, 3 * e * sizeof(*b.edge_vec));
        dst_warm[f] = timed_fill(&b, &ds, &g, &packs, ids, per);
    }
    printf("{\"fills\":%d,\"packs\":%d,\"edge_slots\":%d,\"flush_mb\":%ld,", fills, per,
           b.cap_edges, flush_mb);
    print_stat("cold", cold, fills, ",");
    print_stat("warm", warm, fills, ",");
    print_stat("dst_warm", dst_warm, fills, "}\n");
    free(flush);
    free(ids);
    free(cold);
    free(warm);
    free(dst_warm);
    pt_batch_close(&b);
    pt_packs_close(&packs);
    pt_graphs_close(&g);
    pt_errors_close(&errs);
    pt_dataset_close(&ds);
    return 0;
}
