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

void pt_train_loss_norm(const pt_train_data *d, const pt_packs *packs, const uint32_t *ids,
                        uint32_t n, pt_schnet_loss_norm *out)
{
    int64_t g = 0, fc = 0, sc = 0, at = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t lo = packs->graph_offset[ids[i]], hi = packs->graph_offset[ids[i] + 1];
        g += hi - lo;
        for (uint32_t q = lo; q < hi; q++) at += pt_dataset_natoms(d->ds, packs->graphs[q]);
        if (!d->loss.forces) continue;
        for (uint32_t q = lo; q < hi; q++) {
            const uint32_t s = packs->graphs[q];
            if (pt_train_has_forces(d->ds, s)) fc += 3 * (int64_t)pt_dataset_natoms(d->ds, s);
            if (pt_train_has_stress(d->ds, s)) sc += 9;
        }
    }
    *out = (pt_schnet_loss_norm){.graphs = (double)g, .force_components = (double)fc,
                                 .stress_components = (double)sc, .atoms = (double)at};
}

double pt_step_stats_loss(const pt_step_stats *st, const pt_train_loss *loss)
{
    if (!st->graphs) return NAN;
    double l = 0.0;
    if (loss->w.energy > 0.0) l += loss->w.energy * (st->loss_sum / (double)st->graphs);
    if (loss->w.forces > 0.0 && st->force_components)
        l += loss->w.forces * (st->forces_sse / (double)st->force_components);
    if (loss->w.stress > 0.0 && st->stress_components)
        l += loss->w.stress * (st->stress_sse / (double)st->stress_components);
    if (loss->heads > 1) l += st->heads_loss_sum / (double)st->graphs;
    return l;
}

void pt_step_stats_add(pt_step_stats *a, const pt_step_stats *b)
{
    a->loss_sum += b->loss_sum;
    a->heads_loss_sum += b->heads_loss_sum;
    a->forces_sse += b->forces_sse;
    a->stress_sse += b->stress_sse;
    a->force_components += b->force_components;
    a->stress_components += b->stress_components;
    a->graphs += b->graphs;
    a->nodes += b->nodes;
    a->node_slots += b->node_slots;
    a->edges += b->edges;
    a->edge_slots += b->edge_slots;
    a->filter_rows += b->filter_rows;
}

int pt_step_stats_finite(const pt_step_stats *st)
{
    return isfinite(st->loss_sum) && isfinite(st->forces_sse) && isfinite(st->stress_sse) &&
           isfinite(st->heads_loss_sum);
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

pt_schnet_mode pt_train_step_mode(const pt_train_data *d)
{
    return d->loss.forces ? PT_SCHNET_FORCES_TRAIN : PT_SCHNET_ENERGY;
}

pt_schnet_mode pt_train_eval_mode(const pt_train_data *d)
{
    return d->loss.forces ? PT_SCHNET_FORCES : PT_SCHNET_ENERGY;
}

int pt_train_eval_acts_init(pt_schnet_acts *a, const pt_train_data *d, const pt_batch *b,
                            pt_errors *errs)
{
    const pt_schnet_mode mode = pt_train_eval_mode(d);
    if (mode == PT_SCHNET_ENERGY)
        return pt_schnet_acts_init_forward(a, d->model, b->cap_nodes, b->cap_edges,
                                           b->cap_graphs, errs);
    return pt_schnet_acts_init_mode(a, d->model, b->cap_nodes, b->cap_edges, b->cap_graphs, mode,
                                    errs);
}

/* The default loss of an energy-only job: pt_schnet_loss, unchanged. */
static int plain_energy_loss(const pt_train_loss *l)
{
    return !l->forces && l->w.energy == 1.0 && !l->w.energy_per_atom;
}

/* Sums of the force and stress residuals of the batch's labelled graphs
 * (after pt_schnet_forces): squares, absolute values, |label|, counts. */
typedef struct residual_sums {
    double f_sq, f_abs, f_ref_abs, s_sq, s_abs;
    int64_t f_n, s_n;
} residual_sums;

static void residuals(const pt_batch *b, const pt_schnet_acts *a, residual_sums *r)
{
    for (int32_t i = 0; i < b->cap_nodes; i++) {
        const int32_t g = b->node_graph[i];
        if (g < 0 || !b->graph_has_forces[g]) continue;
        for (int x = 0; x < 3; x++) {
            const double ref = (double)b->node_force[3 * (size_t)i + x];
            const double e = a->force[3 * (size_t)i + x] - ref;
            r->f_sq += e * e;
            r->f_abs += fabs(e);
            r->f_ref_abs += fabs(ref);
        }
        r->f_n += 3;
    }
    for (int32_t g = 0; g < b->cap_graphs; g++) {
        if (b->graph_id[g] < 0 || !b->graph_has_stress[g] || !(b->graph_volume[g] > 0.0))
            continue;
        for (int x = 0; x < 9; x++) {
            const double e = a->stress[9 * (size_t)g + x] - b->graph_stress[9 * (size_t)g + x];
            r->s_sq += e * e;
            r->s_abs += fabs(e);
        }
        r->s_n += 9;
    }
}

/* The heads' terms of a multi-task job, pt_schnet_loss_heads: head 0's
 * when it is per atom (a graph head 0, the energy, is the caller's), and
 * every head k >= 1's.  A graph head's term is w_k SSE_k / n_graphs, an
 * atom head's w_k SSE_k / n_atoms (over the global batch).  Each term is
 * collected times n_graphs, so that divided by the window's graphs
 * (pt_step_stats_loss) it is the graph-weighted mean of the steps' terms:
 * head 0's unweighted into loss_sum (as the energy's MSE), the others'
 * weighted into heads_loss_sum. */
static void heads_loss(const pt_train_data *d, const pt_schnet *m, pt_schnet_acts *a,
                       const pt_batch *b, const pt_schnet_loss_norm *norm, pt_step_stats *st)
{
    const pt_train_loss *l = &d->loss;
    pt_schnet_head_loss hl[PT_JOB_MAX_TARGETS];
    double sse[PT_JOB_MAX_TARGETS];
    for (int k = 0; k < l->heads; k++)
        hl[k] = l->head_atom[k]
                    ? (pt_schnet_head_loss){.target = b->atom_target + (size_t)k * b->cap_nodes,
                                            .weight = l->head_weight[k], .norm = norm->atoms}
                    : (pt_schnet_head_loss){.target = b->key_target + (size_t)k * b->cap_graphs,
                                            .weight = l->head_weight[k], .norm = norm->graphs};
    if (!l->head_atom[0]) hl[0] = (pt_schnet_head_loss){.target = NULL};
    pt_schnet_loss_heads(m, a, b, hl, sse);
    const double per_atom = norm->atoms > 0 ? norm->graphs / norm->atoms : 1.0;
    if (l->head_atom[0]) st->loss_sum += sse[0] * per_atom;
    for (int k = 1; k < l->heads; k++)
        st->heads_loss_sum += l->head_weight[k] * sse[k] * (l->head_atom[k] ? per_atom : 1.0);
}

void pt_train_micro_forward(const pt_train_data *d, const pt_schnet *m, pt_schnet_acts *a,
                            const pt_batch *b, const pt_schnet_loss_norm *norm,
                            pt_step_stats *st)
{
    const pt_train_loss *l = &d->loss;
    pt_schnet_forward(m, a, b);
    /* a per-atom first target has no energy: its term is heads_loss's */
    if (l->heads > 1 || l->head_atom[0]) heads_loss(d, m, a, b, norm, st);
    if (l->head_atom[0]) {
        pt_step_stats_add_batch(st, b, a);
        return;
    }
    if (plain_energy_loss(l)) {
        st->loss_sum += pt_schnet_loss(m, a, b, norm->graphs) * norm->graphs;
    } else {
        if (l->forces) pt_schnet_forces(m, a, b);
        pt_schnet_loss_parts p;
        pt_schnet_loss_forces(m, a, b, &l->w, norm, &p);
        st->loss_sum += p.energy * norm->graphs;
        if (l->forces) {
            residual_sums r = {0};
            residuals(b, a, &r);
            st->forces_sse += r.f_sq;
            st->force_components += r.f_n;
            st->stress_sse += r.s_sq;
            st->stress_components += r.s_n;
        }
    }
    pt_step_stats_add_batch(st, b, a);
}

void pt_train_micro_backward(const pt_train_data *d, const pt_schnet *m, pt_schnet_acts *a,
                             const pt_batch *b, float *grads)
{
    if (d->loss.forces) pt_schnet_backward_forces(m, a, b, grads);
    else pt_schnet_backward(m, a, b, grads);
}

/* Gradient of the loss of the global batch (train.h): every micro-batch's
 * means are taken over the global counts, so the accumulated gradients are
 * those of the global batch's loss, whatever the split. */
static int local_compute(void *self, const pt_packs *packs, const uint32_t *ids, uint32_t n,
                         const pt_schnet_loss_norm *norm, float *grads, pt_step_stats *st,
                         pt_errors *errs)
{
    local_engine *le = self;
    const pt_train_data *d = le->d;
    const uint32_t b = (uint32_t)d->layout.micro_packs;
    memset(st, 0, sizeof(*st));
    memset(grads, 0, d->model->n_params * sizeof(float));
    pt_schnet_loss_norm own;
    if (!norm) {
        pt_train_loss_norm(d, packs, ids, n, &own);
        norm = &own;
    }
    for (uint32_t at = 0; at < n; at += b) {
        uint32_t k = n - at < b ? n - at : b;
        if (pt_train_fill(&le->batch, d, packs, ids + at, k, errs) != 0) return -1;
        pt_train_micro_forward(d, d->model, &le->acts, &le->batch, norm, st);
        pt_train_micro_backward(d, d->model, &le->acts, &le->batch, grads);
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
        pt_schnet_acts_init_mode(&le->acts, d->model, le->batch.cap_nodes, le->batch.cap_edges,
                                 le->batch.cap_graphs, pt_train_step_mode(d), errs) != 0) {
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
        pt_train_eval_acts_init(&ev->acts, d, &ev->batch, errs) != 0) {
        pt_evaluator_close(ev);
        return -1;
    }
    /* validation and test measure the model as it is trained: a bf16 job's
     * numbers are bf16 numbers (a finished model's predictions are fp32,
     * engine/train/predict.c) */
    ev->acts.precision = d->cfg->training.precision;
    ev->acts.no_grad = 1;   /* forwards only: no sigmoids for a backward */
    return 0;
}

void pt_evaluator_close(pt_evaluator *ev)
{
    pt_evaluator_split_close(ev);
    pt_train_batch_close(&ev->batch);
    pt_schnet_acts_close(&ev->acts);
    free(ev->ids);
    memset(ev, 0, sizeof(*ev));
}

/* The atom heads' (head 0's too) absolute and squared errors over the
 * batch's real atoms, added to abs_sum[k] and sq_sum[k]; the real atoms to
 * *n_atoms. */
static void atom_head_errors(const pt_batch *b, const pt_schnet_acts *a, const pt_train_loss *l,
                             double *abs_sum, double *sq_sum, int64_t *n_atoms)
{
    for (int h = 0; h < l->heads; h++) {
        if (!l->head_atom[h]) continue;
        const double *y = a->head[h].y, *t = b->atom_target + (size_t)h * b->cap_nodes;
        for (int32_t i = 0; i < b->cap_nodes; i++) {
            if (b->node_graph[i] < 0) continue;
            const double e = y[i] - t[i];
            abs_sum[h] += fabs(e);
            sq_sum[h] += e * e;
        }
    }
    *n_atoms += b->n_real_nodes;
}

/* Errors over the real graphs of all packs: the first target's in target
 * units (per structure; per atom when it is per atom), a forces job's
 * forces and stress too, every target's, and the loss. */
int pt_evaluate(pt_evaluator *ev, const pt_packs *packs, pt_eval_result *out, pt_errors *errs)
{
    const pt_train_data *d = ev->d;
    const pt_train_loss *l = &d->loss;
    const uint32_t b = (uint32_t)d->layout.micro_packs;
    pt_eval_sums s = {0};
    double h_abs[PT_JOB_MAX_TARGETS] = {0}, h_sq[PT_JOB_MAX_TARGETS] = {0};
    residual_sums r = {0};
    /* one energy head: over the cores, same sums (train_eval.c) */
    if (ev->n_workers > 0 && pt_evaluate_split(ev, packs, &s, errs) != 0) return -1;
    for (uint32_t at = 0; ev->n_workers == 0 && at < packs->n_packs; at += b) {
        uint32_t k = packs->n_packs - at < b ? packs->n_packs - at : b;
        for (uint32_t i = 0; i < k; i++) ev->ids[i] = at + i;
        if (pt_train_fill(&ev->batch, d, packs, ev->ids, k, errs) != 0) return -1;
        const double *y = pt_schnet_forward(d->model, &ev->acts, &ev->batch);
        for (int32_t g = 0; g < ev->batch.cap_graphs; g++) {
            if (ev->batch.graph_id[g] < 0) continue;
            s.n++;
            /* else y is per atom: atom_head_errors */
            if (!l->head_atom[0])
                pt_eval_sums_energy(&s, y[g], ev->batch.target[g], ev->batch.graph_natoms[g]);
            for (int h = 1; h < l->heads; h++) {
                if (l->head_atom[h]) continue;
                double eh = ev->acts.head[h].y[g] -
                            ev->batch.key_target[(size_t)h * ev->batch.cap_graphs + g];
                h_abs[h] += fabs(eh);
                h_sq[h] += eh * eh;
            }
        }
        atom_head_errors(&ev->batch, &ev->acts, l, h_abs, h_sq, &s.n_atoms);
        if (l->forces) {
            pt_schnet_forces(d->model, &ev->acts, &ev->batch);
            residuals(&ev->batch, &ev->acts, &r);
        }
    }
    const int64_t n = s.n, n_atoms = s.n_atoms;
    double abs_sum = s.abs, sq_sum = s.sq, per_atom_sq = s.per_atom_sq;
    *out = (pt_eval_result){.n = n, .force_components = r.f_n, .stress_components = r.s_n};
    const int64_t n_first = l->head_atom[0] ? n_atoms : n;   /* per atom, or per structure */
    if (l->head_atom[0]) {
        abs_sum = h_abs[0];
        sq_sum = h_sq[0];
    }
    out->mae = n_first ? abs_sum / (double)n_first : NAN;
    out->mse = n_first ? sq_sum / (double)n_first : NAN;
    out->rmse = sqrt(out->mse);
    const double fn = (double)r.f_n, sn = (double)r.s_n;
    out->forces_mae = r.f_n ? r.f_abs / fn : NAN;
    out->forces_mse = r.f_n ? r.f_sq / fn : NAN;
    out->forces_rmse = sqrt(out->forces_mse);
    out->forces_zero_mae = r.f_n ? r.f_ref_abs / fn : NAN;
    out->stress_mae = r.s_n ? r.s_abs / sn : NAN;
    out->stress_mse = r.s_n ? r.s_sq / sn : NAN;
    out->stress_rmse = sqrt(out->stress_mse);
    /* the training loss's form, so that the best model is the one the loss prefers */
    double loss = 0.0;
    if (l->w.energy > 0.0)
        loss += l->w.energy * (l->w.energy_per_atom ? (n ? per_atom_sq / (double)n : NAN)
                                                    : out->mse);
    if (l->w.forces > 0.0 && r.f_n) loss += l->w.forces * out->forces_mse;
    if (l->w.stress > 0.0 && r.s_n) loss += l->w.stress * out->stress_mse;
    out->head[0] = (pt_head_errors){.mae = out->mae, .rmse = out->rmse};
    for (int h = 1; h < l->heads; h++) {   /* an atom head's errors are per atom */
        const double nh = l->head_atom[h] ? (double)n_atoms : (double)n;
        out->head[h] = (pt_head_errors){.mae = nh > 0 ? h_abs[h] / nh : NAN,
                                        .rmse = nh > 0 ? sqrt(h_sq[h] / nh) : NAN};
        loss += l->head_weight[h] * (nh > 0 ? h_sq[h] / nh : NAN);
    }
    out->loss = n ? loss : NAN;
    return 0;
}
