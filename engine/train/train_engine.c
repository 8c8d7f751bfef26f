/* train_engine.c — the built-in gradient engine of the training loop and the
 * evaluation pass: micro-batches of b packs filled into one fixed-shape batch,
 * forward, loss, backward, all on the calling thread with buffers sized once
 * (see train.h for the contract a multi-replica backend also follows). */
#include "engine/train/train.h"
#include "engine/train/train_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct local_engine {
    const pt_train_data *d;
    pt_batch batch;
    pt_schnet_acts acts;
} local_engine;

static void local_close(void *self)
{
    local_engine *le = self;
    if (!le) return;
    pt_train_batch_close(&le->batch);
    pt_schnet_acts_close(&le->acts);
    free(le);
}

/* Real graphs in packs ids[0..n): the loss normaliser of the global batch. */
static int64_t count_graphs(const pt_packs *packs, const uint32_t *ids, uint32_t n)
{
    int64_t g = 0;
    for (uint32_t i = 0; i < n; i++)
        g += packs->graph_offset[ids[i] + 1] - packs->graph_offset[ids[i]];
    return g;
}

void pt_step_stats_add_batch(pt_step_stats *st, const pt_batch *b, const pt_schnet_acts *a)
{
    st->filter_rows += a->n_rows;
    st->graphs += b->n_real_graphs;
    st->nodes += b->n_real_nodes;
    st->edges += b->n_real_edges;
    st->node_slots += b->cap_nodes;
    st->edge_slots += b->cap_edges;
}

/* Gradient of  L = (1/n_g) Σ_{real g in the global batch} (y_g − t_g)²:
 * every micro-batch's loss is normalised by the global count n_g, so the
 * accumulated gradients are those of the global mean, whatever the split. */
static int local_compute(void *self, const pt_packs *packs, const uint32_t *ids, uint32_t n,
                         double n_norm, float *grads, pt_step_stats *st, pt_errors *errs)
{
    local_engine *le = self;
    const pt_train_data *d = le->d;
    const uint32_t b = (uint32_t)d->layout.micro_packs;
    memset(st, 0, sizeof(*st));
    memset(grads, 0, d->model->n_params * sizeof(float));
    if (n_norm <= 0.0) n_norm = (double)count_graphs(packs, ids, n);
    for (uint32_t at = 0; at < n; at += b) {
        uint32_t k = n - at < b ? n - at : b;
        if (pt_train_fill(&le->batch, d, packs, ids + at, k, errs) != 0) return -1;
        pt_schnet_forward(d->model, &le->acts, &le->batch);
        st->loss_sum += pt_schnet_loss(d->model, &le->acts, &le->batch, n_norm) * n_norm;
        pt_schnet_backward(d->model, &le->acts, &le->batch, grads);
        pt_step_stats_add_batch(st, &le->batch, &le->acts);
    }
    return 0;
}

int pt_grad_engine_open_local(pt_grad_engine *eng, const pt_train_data *d, pt_errors *errs)
{
    memset(eng, 0, sizeof(*eng));
    local_engine *le = calloc(1, sizeof(*le));
    if (!le) {
        pt_errors_add(errs, NULL, 0, "", "out of memory");
        return -1;
    }
    le->d = d;
    if (pt_train_batch_init(&le->batch, d, d->limits, errs) != 0 ||
        pt_schnet_acts_init(&le->acts, d->model, le->batch.cap_nodes, le->batch.cap_edges,
                            le->batch.cap_graphs, errs) != 0) {
        local_close(le);
        return -1;
    }
    le->acts.precision = d->cfg->training.precision;
    le->acts.static_shapes = d->cfg->backend.static_shapes;
    eng->self = le;
    eng->kind = "local";
    eng->compute = local_compute;
    eng->close = local_close;
    return 0;
}

/* --- evaluation -------------------------------------------------------- */

int pt_evaluator_init(pt_evaluator *ev, const pt_train_data *d, pt_pack_limits limits,
                      pt_errors *errs)
{
    memset(ev, 0, sizeof(*ev));
    ev->d = d;
    ev->ids = malloc((size_t)d->layout.micro_packs * sizeof(uint32_t));
    if (!ev->ids) {
        pt_errors_add(errs, NULL, 0, "", "out of memory");
        return -1;
    }
    if (pt_train_batch_init(&ev->batch, d, limits, errs) != 0 ||
        pt_schnet_acts_init(&ev->acts, d->model, ev->batch.cap_nodes, ev->batch.cap_edges,
                            ev->batch.cap_graphs, errs) != 0) {
        pt_evaluator_close(ev);
        return -1;
    }
    /* validation and test measure the model as it is trained: a bf16 job's
     * numbers are bf16 numbers (a finished model's predictions are fp32,
     * engine/train/predict.c) */
    ev->acts.precision = d->cfg->training.precision;
    return 0;
}

void pt_evaluator_close(pt_evaluator *ev)
{
    pt_train_batch_close(&ev->batch);
    pt_schnet_acts_close(&ev->acts);
    free(ev->ids);
    memset(ev, 0, sizeof(*ev));
}

/* MAE, RMSE and MSE over the real graphs of all packs, in target units. */
int pt_evaluate(pt_evaluator *ev, const pt_packs *packs, pt_eval_result *out, pt_errors *errs)
{
    const pt_train_data *d = ev->d;
    const uint32_t b = (uint32_t)d->layout.micro_packs;
    double abs_sum = 0.0, sq_sum = 0.0;
    int64_t n = 0;
    for (uint32_t at = 0; at < packs->n_packs; at += b) {
        uint32_t k = packs->n_packs - at < b ? packs->n_packs - at : b;
        for (uint32_t i = 0; i < k; i++) ev->ids[i] = at + i;
        if (pt_train_fill(&ev->batch, d, packs, ev->ids, k, errs) != 0) return -1;
        const double *y = pt_schnet_forward(d->model, &ev->acts, &ev->batch);
        for (int32_t g = 0; g < ev->batch.cap_graphs; g++) {
            if (ev->batch.graph_id[g] < 0) continue;
            double r = y[g] - ev->batch.target[g];
            abs_sum += fabs(r);
            sq_sum += r * r;
            n++;
        }
    }
    out->n = n;
    out->mae = n ? abs_sum / (double)n : NAN;
    out->mse = n ? sq_sum / (double)n : NAN;
    out->rmse = sqrt(out->mse);
    return 0;
}
