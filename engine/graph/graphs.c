/* graphs.c — neighbour graphs of a whole dataset (graph.h): every
 * structure through the molecular (neighbors.c) or the periodic
 * (neighbors_pbc.c) search, into one flat edge list per dataset. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine/graph/graph.h"
#include "engine/graph/neighbors.h"

int pt_graph_params_check(const pt_graph_params *p, pt_errors *errs)
{
    int bad = 0;
    if (!isfinite(p->cutoff) || p->cutoff <= 0.0f) {
        pt_errors_add(errs, "", 0, "cutoff", "must be a finite distance > 0 Å, got %g",
                      (double)p->cutoff);
        bad = 1;
    }
    if (p->max_neighbors < 0 || (p->max_neighbors == PT_GRAPH_UNLIMITED && p->mode == PT_GRAPH_KNN)) {
        pt_errors_add(errs, "", 0, "max_neighbors",
                      p->max_neighbors < 0 ? "must be >= 1, or unlimited (null), got %d"
                                           : "the knn mode needs a number of neighbours k >= 1, got %d "
                                             "(unlimited)",
                      (int)p->max_neighbors);
        bad = 1;
    }
    if (p->mode != PT_GRAPH_RADIUS && p->mode != PT_GRAPH_KNN) {
        pt_errors_add(errs, "", 0, "mode", "unknown neighbour mode %d (radius or knn)",
                      (int)p->mode);
        bad = 1;
    }
    return bad ? -1 : 0;
}

/* A molecule's edge count is bounded up front: n (n - 1) or n k. */
static int edges_fit(const pt_dataset *ds, uint32_t s, const pt_graph_params *p,
                     pt_errors *errs)
{
    uint64_t n = pt_dataset_natoms(ds, s);
    uint64_t cap = p->max_neighbors == PT_GRAPH_UNLIMITED ? UINT64_MAX : (uint64_t)p->max_neighbors;
    uint64_t k = n > 0 && cap > n - 1 ? n - 1 : cap;
    if (n * k > UINT32_MAX) {
        pt_errors_add(errs, "", 0, "structure",
                      "structure %u has %llu atoms: up to %llu edges, more than one graph "
                      "may hold (4294967295)", s, (unsigned long long)n,
                      (unsigned long long)(n * k));
        return -1;
    }
    return 0;
}

/* Searches structure s into nl; 0, or -1 with the error added. */
static int search(pt_neighbor_list *nl, const pt_dataset *ds, uint32_t s, const pt_graph_params *p,
                  pt_errors *errs)
{
    const float *pos = ds->pos + 3 * ds->atom_offset[s];
    const uint32_t n = pt_dataset_natoms(ds, s);
    const unsigned pbc = pt_dataset_pbc(ds, s);
    int rc;
    if (!pbc) {
        if (edges_fit(ds, s, p, errs)) return -1;
        rc = pt_neighbor_list_build(nl, pos, n, p, PT_NEIGHBOR_AUTO);
    } else {
        rc = pt_neighbor_list_build_pbc(nl, pos, n, ds->cell + 9 * (size_t)s, pbc, p, PT_NEIGHBOR_AUTO);
    }
    if (rc == PT_NEIGHBOR_OK) return 0;
    long line = ds->source_line ? (long)ds->source_line[s] : 0;
    if (rc == PT_NEIGHBOR_ELIMIT)
        pt_errors_add(errs, "", line, "structure", "structure %u (line %ld of the source): %s", s, line,
                      nl->limit_msg);
    else
        pt_errors_add(errs, "", 0, "", "out of memory building neighbour graphs");
    return -1;
}

void pt_graphs_close(pt_graphs *g)
{
    free(g->edge_offset);
    free(g->src);
    free(g->dst);
    free(g->dist);
    free(g->shift);
    memset(g, 0, sizeof(*g));
}

static int any_periodic(const pt_dataset *ds)
{
    for (uint32_t s = 0; ds->pbc && s < ds->n_structs; s++)
        if (ds->pbc[s]) return 1;
    return 0;
}

/* Two passes: count every structure's edges, allocate the exact arrays,
 * then search again and copy.  The second search costs less than the slack
 * of growing arrays (up to 2x of ~500 MB on the water clusters). */
int pt_graphs_build(pt_graphs *g, const pt_dataset *ds, const pt_graph_params *p,
                    pt_errors *errs)
{
    memset(g, 0, sizeof(*g));
    if (pt_graph_params_check(p, errs)) return -1;
    g->params = *p;
    g->n_structs = ds->n_structs;
    g->edge_offset = calloc((size_t)ds->n_structs + 1, sizeof(uint64_t));
    uint32_t *counts = malloc(((size_t)ds->n_structs + 1) * sizeof(uint32_t));
    pt_neighbor_list nl;
    pt_neighbor_list_init(&nl);
    if (!g->edge_offset || !counts) goto oom;
    if (pt_graphs_count(counts, ds, p, errs)) goto fail;
    for (uint32_t s = 0; s < ds->n_structs; s++)
        g->edge_offset[s + 1] = g->edge_offset[s] + counts[s];
    g->n_edges = g->edge_offset[ds->n_structs];
    g->src = malloc(g->n_edges * sizeof(uint32_t) + 1);
    g->dst = malloc(g->n_edges * sizeof(uint32_t) + 1);
    g->dist = malloc(g->n_edges * sizeof(float) + 1);
    if (!g->src || !g->dst || !g->dist) goto oom;
    const int periodic = any_periodic(ds);
    if (periodic && !(g->shift = malloc(3 * g->n_edges * sizeof(int16_t) + 1))) goto oom;
    for (uint32_t s = 0; s < ds->n_structs; s++) {
        if (!counts[s]) continue;
        if (search(&nl, ds, s, p, errs)) goto fail;
        uint64_t at = g->edge_offset[s];
        memcpy(g->src + at, nl.src, nl.n_edges * sizeof(uint32_t));
        memcpy(g->dst + at, nl.dst, nl.n_edges * sizeof(uint32_t));
        memcpy(g->dist + at, nl.dist, nl.n_edges * sizeof(float));
        if (!periodic) continue;
        if (pt_dataset_pbc(ds, s)) memcpy(g->shift + 3 * at, nl.shift, 3 * nl.n_edges * sizeof(int16_t));
        else memset(g->shift + 3 * at, 0, 3 * nl.n_edges * sizeof(int16_t));
    }
    free(counts);
    pt_neighbor_list_close(&nl);
    return 0;
oom:
    pt_errors_add(errs, "", 0, "", "out of memory building neighbour graphs");
fail:
    free(counts);
    pt_neighbor_list_close(&nl);
    pt_graphs_close(g);
    return -1;
}

/* Edges of structure s into *n: counted for a molecule, searched for a
 * periodic structure.  0, or -1 with the error added (as search()). */
static int count_one(pt_neighbor_list *nl, const pt_dataset *ds, uint32_t s,
                     const pt_graph_params *p, uint32_t *n, pt_errors *errs)
{
    if (pt_dataset_pbc(ds, s)) {
        int rc = search(nl, ds, s, p, errs);
        *n = nl->n_edges;
        return rc;
    }
    *n = 0;
    if (edges_fit(ds, s, p, errs)) return -1;
    uint64_t e = 0;
    if (pt_neighbor_list_count(nl, ds->pos + 3 * ds->atom_offset[s], pt_dataset_natoms(ds, s), p,
                               PT_NEIGHBOR_AUTO, &e)) {
        pt_errors_add(errs, "", 0, "", "out of memory counting neighbour edges");
        return -1;
    }
    *n = (uint32_t)e;   /* edges_fit bounds it */
    return 0;
}

int pt_graphs_count(uint32_t *nedges, const pt_dataset *ds, const pt_graph_params *p,
                    pt_errors *errs)
{
    return pt_graphs_count_ex(nedges, ds, p, NULL, errs);
}

/* ---- counting on several threads ---------------------------------------------- */

#define COUNT_BLOCK 1024u   /* structures per hand-out: ~0.1-1 ms of water clusters */

typedef struct count_job {
    uint32_t *nedges;
    const pt_dataset *ds;
    const pt_graph_params *p;
    atomic_uint_fast64_t next;       /* first structure of the next block */
    atomic_uint_fast64_t done;       /* structures counted */
    atomic_uint_fast64_t fail_at;    /* lowest failing structure so far, or UINT64_MAX */
    atomic_int stop;                 /* the caller gave up (should_stop) */
    const pt_graphs_count_opts *o;
} count_job;

typedef struct count_worker {
    count_job *job;
    pthread_t thread;
    int started;
    pt_errors errs;                  /* the error of this worker's first failure */
    uint64_t failed_at;              /* that structure, or UINT64_MAX */
    pt_progress *progress;           /* the calling thread's worker only */
} count_worker;

static void lower_fail(atomic_uint_fast64_t *at, uint64_t s)
{
    uint64_t cur = atomic_load(at);
    while (s < cur && !atomic_compare_exchange_weak(at, &cur, s)) {}
}

/* Blocks are claimed in increasing order, so once a structure failed no
 * block after it can hold an earlier failure: those are not started. */
static void *count_main(void *arg)
{
    count_worker *w = arg;
    count_job *j = w->job;
    pt_neighbor_list nl;
    pt_neighbor_list_init(&nl);
    const uint64_t n = j->ds->n_structs;
    for (;;) {
        /* the calling thread's worker asks; the others see its answer */
        if (w->progress && j->o && j->o->should_stop && j->o->should_stop(j->o->user)) atomic_store(&j->stop, 1);
        if (atomic_load(&j->stop)) break;
        uint64_t lo = atomic_fetch_add(&j->next, COUNT_BLOCK);
        if (lo >= n || lo > atomic_load(&j->fail_at)) break;
        uint64_t hi = lo + COUNT_BLOCK < n ? lo + COUNT_BLOCK : n;
        for (uint64_t s = lo; s < hi; s++) {
            if (count_one(&nl, j->ds, (uint32_t)s, j->p, &j->nedges[s], &w->errs) == 0) continue;
            w->failed_at = s;
            lower_fail(&j->fail_at, s);
            break;
        }
        /* the block's pages go back: a pass over a dataset bigger than memory
         * keeps the RSS small (the page cache still has them) */
        pt_dataset_release(j->ds, (uint32_t)lo, (uint32_t)(hi - lo));
        uint64_t done = atomic_fetch_add(&j->done, hi - lo) + (hi - lo);
        if (w->failed_at != UINT64_MAX) break;
        if (w->progress) pt_progress_tick(w->progress, done, done);
    }
    pt_neighbor_list_close(&nl);
    return NULL;
}

int pt_graphs_count_ex(uint32_t *nedges, const pt_dataset *ds, const pt_graph_params *p,
                       const pt_graphs_count_opts *o, pt_errors *errs)
{
    if (pt_graph_params_check(p, errs)) return -1;
    int threads = o && o->threads > 1 ? o->threads : 1;
    if ((uint64_t)threads > ds->n_structs / COUNT_BLOCK + 1)
        threads = (int)(ds->n_structs / COUNT_BLOCK + 1);
    count_job job = {.nedges = nedges, .ds = ds, .p = p, .o = o};
    atomic_init(&job.stop, 0);
    atomic_init(&job.next, 0);
    atomic_init(&job.done, 0);
    atomic_init(&job.fail_at, UINT64_MAX);
    count_worker *w = calloc((size_t)threads, sizeof(*w));
    if (!w) {
        pt_errors_add(errs, "", 0, "", "out of memory counting neighbour edges");
        return -1;
    }
    pt_progress progress;
    pt_progress_begin(&progress, o ? o->progress : NULL, "count_edges", "structures",
                      ds->n_structs);
    for (int t = 0; t < threads; t++) {
        w[t].job = &job;
        w[t].failed_at = UINT64_MAX;
        pt_errors_init(&w[t].errs, 4);
    }
    w[0].progress = &progress;
    for (int t = 1; t < threads; t++)
        w[t].started = pthread_create(&w[t].thread, NULL, count_main, &w[t]) == 0;
    count_main(&w[0]);
    int first = -1;
    for (int t = 0; t < threads; t++) {
        if (w[t].started) pthread_join(w[t].thread, NULL);
        if (w[t].failed_at != UINT64_MAX && (first < 0 || w[t].failed_at < w[first].failed_at))
            first = t;
    }
    int stopped = first < 0 && atomic_load(&job.stop);
    if (o && o->stopped) *o->stopped = stopped;
    if (stopped)
        pt_errors_add(errs, "", 0, "", "stopped");
    else if (first >= 0)
        for (size_t e = 0; e < w[first].errs.kept; e++) {
            const pt_error *x = &w[first].errs.items[e];
            pt_errors_add(errs, x->file, x->line, x->field, "%s", x->message);
        }
    else
        pt_progress_end(&progress, ds->n_structs, ds->n_structs);
    for (int t = 0; t < threads; t++) pt_errors_close(&w[t].errs);
    free(w);
    return first >= 0 || stopped ? -1 : 0;
}
