/* train_eval.c — the validation pass of an energy job over the process's
 * cores.
 *
 * The loop validates after every epoch on its own thread while the
 * replicas sleep: at 2 replicas x 4 QM9 packs (bench_tta's lever) that pass
 * was ~7% of an epoch on one of the two cores.  Here the micro-batches are
 * dealt round-robin to the calling thread and ev->n_workers helper threads,
 * each with its own batch and arena of the evaluator's shape; every
 * micro-batch keeps its packs (the serial pass's), so each prediction has
 * the serial pass's bits, and the errors are then summed on the calling
 * thread in the serial order: pt_evaluate's result is the same bit for bit
 * (test_train_eval).  Each arena is forward-only (pt_train_eval_acts_init:
 * its blocks share their arrays), so a helper costs ~35 MB, not the
 * training arena's ~218 MB (water, 8 packs).  BLAS and bf16 kernels run one thread each meanwhile,
 * as the replicas do.
 *
 * Only jobs whose evaluation is one graph-level energy head (no forces, no
 * per-atom or extra targets) take this path; the others run serially. */
#include "engine/train/train_internal.h"

#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/bf16.h"

struct pt_eval_worker {
    pt_batch batch;
    pt_schnet_acts acts;
    uint32_t *ids;    /* [micro_packs] */
};

int pt_eval_split_eligible(const pt_train_data *d)
{
    const pt_train_loss *l = &d->loss;
    return l->heads == 1 && !l->head_atom[0] && !l->forces;
}

int pt_evaluator_split(pt_evaluator *ev, int extra, pt_errors *errs)
{
    if (extra < 1 || !pt_eval_split_eligible(ev->d)) return 0;
    const pt_train_data *d = ev->d;
    ev->workers = calloc((size_t)extra, sizeof(*ev->workers));
    if (!ev->workers) {
        pt_errors_add(errs, NULL, 0, "", "out of memory for %d evaluation workers", extra);
        return -1;
    }
    for (int w = 0; w < extra; w++) {
        pt_eval_worker *k = &ev->workers[w];
        ev->n_workers = w + 1;   /* close frees what exists */
        k->ids = malloc((size_t)d->layout.micro_packs * sizeof(uint32_t));
        if (!k->ids) {
            pt_errors_add(errs, NULL, 0, "", "out of memory for an evaluation worker");
            return -1;
        }
        if (pt_train_batch_init(&k->batch, d, ev->batch.limits, errs) != 0 ||
            pt_train_eval_acts_init(&k->acts, d, &k->batch, errs) != 0)
            return -1;
        k->acts.precision = ev->acts.precision;
        k->acts.no_grad = ev->acts.no_grad;
    }
    return 0;
}

void pt_evaluator_split_close(pt_evaluator *ev)
{
    for (int w = 0; w < ev->n_workers; w++) {
        pt_eval_worker *k = &ev->workers[w];
        pt_train_batch_close(&k->batch);
        pt_schnet_acts_close(&k->acts);
        free(k->ids);
    }
    free(ev->workers);
    ev->workers = NULL;
    ev->n_workers = 0;
}

/* One thread's share: micro-batches first, first + stride, ...; per graph
 * slot the prediction, the target and the atom count (-1: no graph). */
typedef struct share {
    const pt_train_data *d;
    const pt_packs *packs;
    pt_batch *batch;
    pt_schnet_acts *acts;
    uint32_t *ids;
    uint32_t first, stride, n_batches;
    double *y, *t;        /* [n_batches × cap_graphs] */
    int32_t *natoms;
    int64_t *nodes;       /* [n_batches] real atoms */
    pt_errors errs;
    int failed;
} share;

static void *run_share(void *arg)
{
    share *s = arg;
    const uint32_t b = (uint32_t)s->d->layout.micro_packs, G = (uint32_t)s->batch->cap_graphs;
    for (uint32_t m = s->first; m < s->n_batches; m += s->stride) {
        const uint32_t at = m * b, k = s->packs->n_packs - at < b ? s->packs->n_packs - at : b;
        for (uint32_t i = 0; i < k; i++) s->ids[i] = at + i;
        if (pt_train_fill(s->batch, s->d, s->packs, s->ids, k, &s->errs) != 0) {
            s->failed = 1;
            return NULL;
        }
        const double *y = pt_schnet_forward(s->d->model, s->acts, s->batch);
        for (uint32_t g = 0; g < G; g++) {
            const size_t o = (size_t)m * G + g;
            s->natoms[o] = s->batch->graph_id[g] < 0 ? -1 : s->batch->graph_natoms[g];
            s->y[o] = y[g];
            s->t[o] = s->batch->target[g];
        }
        s->nodes[m] = s->batch->n_real_nodes;
    }
    return NULL;
}

int pt_evaluate_split(pt_evaluator *ev, const pt_packs *packs, pt_eval_sums *sums,
                      pt_errors *errs)
{
    const pt_train_data *d = ev->d;
    const uint32_t b = (uint32_t)d->layout.micro_packs, G = (uint32_t)ev->batch.cap_graphs;
    const uint32_t n_batches = (packs->n_packs + b - 1) / b;
    const int W = 1 + ev->n_workers;
    const size_t slots = (size_t)n_batches * G;
    double *y = malloc((slots ? slots : 1) * sizeof(double));
    double *t = malloc((slots ? slots : 1) * sizeof(double));
    int32_t *natoms = malloc((slots ? slots : 1) * sizeof(int32_t));
    int64_t *nodes = malloc((n_batches ? n_batches : 1) * sizeof(int64_t));
    share *sh = calloc((size_t)W, sizeof(*sh));
    pthread_t *th = calloc((size_t)W, sizeof(*th));
    int rc = -1;
    if (!y || !t || !natoms || !nodes || !sh || !th) {
        pt_errors_add(errs, NULL, 0, "", "out of memory for %u evaluation batches", n_batches);
        goto done;
    }
    /* the kernels' own threads would compete with the workers */
    const int saved_blas = openblas_get_num_threads(), saved_bf16 = pt_bf16_get_threads();
    openblas_set_num_threads(1);
    pt_bf16_set_threads(1);
    int started = 0;
    for (int w = 0; w < W; w++) {
        sh[w] = (share){.d = d, .packs = packs, .first = (uint32_t)w, .stride = (uint32_t)W,
                        .n_batches = n_batches, .y = y, .t = t, .natoms = natoms, .nodes = nodes};
        sh[w].batch = w ? &ev->workers[w - 1].batch : &ev->batch;
        sh[w].acts = w ? &ev->workers[w - 1].acts : &ev->acts;
        sh[w].ids = w ? ev->workers[w - 1].ids : ev->ids;
        pt_errors_init(&sh[w].errs, 1);
    }
    for (int w = 1; w < W; w++) {
        if (pthread_create(&th[w], NULL, run_share, &sh[w]) != 0) break;
        started = w;
    }
    /* the calling thread's share, then those a thread could not be had for */
    run_share(&sh[0]);
    for (int w = 1; w <= started; w++) pthread_join(th[w], NULL);
    for (int w = started + 1; w < W; w++) {
        sh[w].batch = &ev->batch;
        sh[w].acts = &ev->acts;
        sh[w].ids = ev->ids;
        run_share(&sh[w]);
    }
    openblas_set_num_threads(saved_blas);
    pt_bf16_set_threads(saved_bf16);
    rc = 0;
    for (int w = 0; w < W && rc == 0; w++) {
        if (!sh[w].failed) continue;
        char msg[512];
        pt_errors_first(&sh[w].errs, msg, sizeof msg);
        pt_errors_add(errs, NULL, 0, "", "%s", msg);
        rc = -1;
    }
    /* the serial pass's sums, in its order */
    for (uint32_t m = 0; rc == 0 && m < n_batches; m++) {
        for (uint32_t g = 0; g < G; g++) {
            const size_t o = (size_t)m * G + g;
            if (natoms[o] < 0) continue;
            sums->n++;
            pt_eval_sums_energy(sums, y[o], t[o], natoms[o]);
        }
        sums->n_atoms += nodes[m];
    }
    for (int w = 0; w < W; w++) pt_errors_close(&sh[w].errs);
done:
    free(y);
    free(t);
    free(natoms);
    free(nodes);
    free(sh);
    free(th);
    return rc;
}
