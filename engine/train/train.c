/* train.c — the training loop behind `packtrain train` and the server's
 * workers: set-up from a job configuration, epochs of global-batch optimizer
 * steps, validation, schedule, early stopping, best model, metrics lines,
 * checkpoints and resume (see train.h for the order of work and the
 * metrics contract; train_ckpt.c saves and restores the state). */
#include "engine/train/train.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/train/balance.h"
#include "engine/model/bf16.h"
#include "engine/train/train_internal.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --- set-up ----------------------------------------------------------------- */

/* The job's model (plan.h), each head with its target's statistics. */
static int init_model(pt_trainer *tr)
{
    const pt_job_config *cfg = tr->cfg;
    const pt_schnet_config mc = pt_train_model_config(cfg, tr->plan.loss.forces);
    if (pt_schnet_init(&tr->model, &mc, tr->errs) != 0) return -1;
    pt_schnet_init_weights(&tr->model, cfg->training.seed);
    for (int k = 0; k < tr->model.n_heads; k++) {
        tr->model.mean[k] = tr->norm[k].mean;
        tr->model.std[k] = tr->norm[k].std;
        if (tr->model.head[k].use_atomref)
            pt_schnet_set_atomref(&tr->model, k, tr->norm[k].atomref);
    }
    size_t n = tr->model.n_params ? tr->model.n_params : 1;
    tr->grads = calloc(n, sizeof(float));
    tr->best = malloc(n * sizeof(float));
    if (!tr->grads || !tr->best) {
        pt_errors_add(tr->errs, NULL, 0, "", "out of memory");
        return -1;
    }
    memcpy(tr->best, tr->model.params_memory, tr->model.n_params * sizeof(float));
    pt_optim_params op = pt_optim_defaults(cfg->training.optimizer);
    op.weight_decay = cfg->training.weight_decay;
    if (pt_optim_init(&tr->optim, &op, tr->model.n_params) != 0) {
        pt_errors_add(tr->errs, NULL, 0, "", "out of memory");
        return -1;
    }
    /* atomref tables hold per-element values in target units: exempt from decay */
    for (int k = 0; k < tr->model.n_heads && op.weight_decay > 0; k++) {
        const float *table = tr->model.params.head[k].atomref;
        if (table &&
            pt_optim_exempt_decay(&tr->optim, (size_t)(table - tr->model.params_memory),
                                  PT_SCHNET_ZROWS) != 0) {
            pt_errors_add(tr->errs, NULL, 0, "", "out of memory");
            return -1;
        }
    }
    return 0;
}

static int open_outputs(pt_trainer *tr, const char *out_dir)
{
    if (!out_dir) return 0;
    if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
        pt_errors_add(tr->errs, out_dir, 0, "", "cannot create the output directory: %s",
                      strerror(errno));
        return -1;
    }
    snprintf(tr->metrics_path, sizeof tr->metrics_path, "%s/metrics.jsonl", out_dir);
    if (pt_trainer_metrics_open(tr, tr->metrics_path) != 0) return -1;
    snprintf(tr->model_path, sizeof tr->model_path, "%s/model.safetensors", out_dir);
    snprintf(tr->result_path, sizeof tr->result_path, "%s/result.json", out_dir);
    return pt_trainer_ckpt_dir(tr, out_dir);
}

/* The caller's engine, or the built-in one (engine/run passes the backend
 * the job's backend.kind names). */
static pt_grad_engine_open_fn engine_for(const pt_trainer *tr)
{
    if (tr->opt && tr->opt->engine_open) return tr->opt->engine_open;
    return pt_grad_engine_open_local;
}

int pt_train_check_cpu(const pt_job_config *cfg, pt_errors *errs)
{
    if (cfg->training.precision != PT_PRECISION_BF16) return 0;
    pt_cpu_features f;
    pt_cpu_features_get(&f);
    char why[PT_ERR_MSG_MAX];
    if (pt_bf16_cpu_explain(&f, why, sizeof why)) return 0;
    pt_errors_add(errs, NULL, 0, "training.precision", "%s", why);
    return -1;
}

/* Evaluation runs on the calling thread, with the BLAS threads the job asked
 * for; bf16 products get as many (the backend sets its own during steps). */
static void set_threads(const pt_job_config *cfg)
{
    if (cfg->backend.threads > 0) openblas_set_num_threads(cfg->backend.threads);
    pt_bf16_set_threads(openblas_get_num_threads());
}

/* The checkpoints' identity of the job: its configuration with
 * model.max_neighbors "auto" resolved (plan.h), as a checkpoint identifies
 * what was computed: an energy job of "auto" is one of 32 neighbours, the
 * default before "auto" existed, and resumes its checkpoints.  The loss is
 * resolved here on its own (the plan, later, reports its errors). */
static int config_hash(const pt_job_config *cfg, const pt_dataset *ds, char *out)
{
    pt_job_config c = *cfg;
    if (c.model.max_neighbors == PT_JOB_NEIGHBORS_AUTO) {
        pt_train_loss l;
        pt_errors scratch;
        pt_errors_init(&scratch, 1);
        int forces = pt_train_loss_resolve(&l, cfg, ds, &scratch) == 0 && l.forces;
        pt_errors_close(&scratch);
        c.model.max_neighbors = pt_train_max_neighbors(cfg, forces);
    }
    return pt_checkpoint_config_hash(&c, out);
}

/* The plan (plan.h) first: target, graphs, split, packers and layout are
 * decided there, as the submission check decided them. */
static int setup(pt_trainer *tr, const char *out_dir)
{
    const pt_job_config *cfg = tr->cfg;
    pt_train_plan *p = &tr->plan;
    if (pt_train_plan_init(p, cfg, tr->ds, PT_PLAN_GRAPHS, pt_online_cores(), tr->errs) != 0)
        return -1;
    tr->res->split_moved = p->split_moved;
    if (out_dir || tr->resuming) {
        /* the structures and the first target's labels: a per-atom first
         * target's column (UINT32_MAX: no per-structure key) */
        tr->data_crc = p->loss.head_atom[0]
                           ? pt_checkpoint_data_crc(tr->ds, UINT32_MAX, 0) * 31u +
                                 pt_checkpoint_atom_col_crc(tr->ds, p->head_key[0])
                           : pt_checkpoint_data_crc(tr->ds, p->target_key, p->loss.forces);
        /* a multi-task job's other targets are data it depends on too */
        for (int k = 1; k < p->n_heads; k++)
            tr->data_crc = tr->data_crc * 31u +
                           (p->loss.head_atom[k] ? pt_checkpoint_atom_col_crc(tr->ds, p->head_key[k])
                                                 : pt_checkpoint_data_crc(tr->ds, p->head_key[k], 0));
    }
    if (open_outputs(tr, out_dir) != 0) return -1;
    set_threads(cfg);
    /* each target normalised on its own statistics, over the training part */
    for (int k = 0; k < p->n_heads; k++) {
        const pt_job_target t = pt_job_config_target(cfg, k);
        int rc = p->loss.head_atom[k]
                     ? pt_norm_fit_atoms(&tr->norm[k], t.normalize, tr->ds, p->head_key[k],
                                         p->split.train, p->split.n_train, tr->errs)
                     : pt_norm_fit(&tr->norm[k], t.normalize, t.readout == PT_JOB_READOUT_SUM,
                                   tr->ds, p->head_key[k], p->split.train, p->split.n_train,
                                   tr->errs);
        if (rc != 0) return -1;
    }
    if (pt_packer_epoch(&p->val_pk, cfg->training.seed, 0, &tr->val_packs) != 0 ||
        (p->split.n_test &&
         pt_packer_epoch(&p->test_pk, cfg->training.seed, 0, &tr->test_packs) != 0)) {
        pt_errors_add(tr->errs, NULL, 0, "", "out of memory");
        return -1;
    }
    if (init_model(tr) != 0) return -1;

    tr->data = (pt_train_data){.cfg = cfg, .ds = tr->ds, .graphs = &p->graphs,
                               .target_key = p->target_key, .head_key = p->head_key,
                               .model = &tr->model,
                               .limits = p->train_pk.limits, .layout = p->layout,
                               .loss = p->loss};
    tr->res->loss = p->loss;
    tr->global_packs = pt_train_layout_global_packs(&p->layout);
    if (engine_for(tr)(&tr->engine, &tr->data, tr->errs) != 0) return -1;
    if (pt_evaluator_init(&tr->val_eval, &tr->data, p->val_pk.limits, tr->errs) != 0) return -1;
    /* the epoch's validation on every core of the process (train_eval.c) */
    if (pt_evaluator_split(&tr->val_eval, p->layout.threads - 1, tr->errs) != 0) return -1;
    if (p->split.n_test &&
        pt_evaluator_init(&tr->test_eval, &tr->data, p->test_pk.limits, tr->errs) != 0)
        return -1;
    tr->res->limits = p->train_pk.limits;
    tr->res->layout = p->layout;
    tr->res->micro_packs = p->layout.micro_packs;
    tr->res->global_packs = tr->global_packs;
    tr->res->n_train = p->split.n_train;
    tr->res->n_val = p->split.n_val;
    tr->res->n_test = p->split.n_test;
    return 0;
}

static void teardown(pt_trainer *tr)
{
    if (tr->engine.close) tr->engine.close(tr->engine.self);
    pt_checkpoint_close(&tr->resume);
    pt_evaluator_close(&tr->val_eval);
    pt_evaluator_close(&tr->test_eval);
    pt_optim_close(&tr->optim);
    pt_schnet_close(&tr->model);
    pt_packs_close(&tr->packs);
    pt_packs_close(&tr->val_packs);
    pt_packs_close(&tr->test_packs);
    pt_train_plan_close(&tr->plan);
    free(tr->grads);
    free(tr->best);
    free(tr->ids);
    if (tr->metrics) fclose(tr->metrics);
}

/* --- metrics lines ------------------------------------------------------------ */

static void emit(pt_trainer *tr, pt_train_metrics *m)
{
    char line[4096];   /* an epoch line of 16 targets fits */
    m->total_steps = tr->planned_steps;
    pt_train_metrics_json(m, line, sizeof line);
    if (tr->metrics) {
        fprintf(tr->metrics, "%s\n", line);
        fflush(tr->metrics);
    }
    tr->lines++;
    if (tr->opt && tr->opt->on_metrics) tr->opt->on_metrics(tr->opt->user, m, line);
}

static void fill_rates(const pt_trainer *tr, pt_train_metrics *m, const pt_train_window *w)
{
    const pt_train_loss *l = &tr->plan.loss;
    m->loss = pt_step_stats_loss(&w->st, l);
    m->has_forces = l->forces;
    m->has_stress = l->w.stress > 0.0;
    if (l->forces) {
        const pt_step_stats *st = &w->st;
        m->loss_energy = st->graphs ? st->loss_sum / (double)st->graphs : NAN;
        m->loss_forces = st->force_components ? st->forces_sse / (double)st->force_components
                                              : NAN;
        m->loss_stress = st->stress_components
                             ? st->stress_sse / (double)st->stress_components : NAN;
    }
    m->graphs_per_s = w->seconds > 0 ? (double)w->st.graphs / w->seconds : 0.0;
    m->nodes_per_s = w->seconds > 0 ? (double)w->st.nodes / w->seconds : 0.0;
    m->padding_fraction = w->st.node_slots ? 1.0 - (double)w->st.nodes / (double)w->st.node_slots
                                           : 0.0;
}

/* Totals over the whole run, for the result. */
static void result_add(pt_train_result *r, const pt_step_stats *st, double seconds)
{
    r->graphs += st->graphs;
    r->nodes += st->nodes;
    r->edges += st->edges;
    r->node_slots += st->node_slots;
    r->edge_slots += st->edge_slots;
    r->step_seconds += seconds;
}

static void window_add(pt_train_window *w, const pt_step_stats *st, double seconds)
{
    pt_step_stats_add(&w->st, st);
    w->seconds += seconds;
    w->steps++;
}

/* Starts a new step-line window: ours and the backend's phase clocks too. */
static void step_window_reset(pt_trainer *tr)
{
    pt_phase_times ignored;
    if (tr->engine.phases) tr->engine.phases(tr->engine.self, &ignored, 1);
    memset(&tr->step_win, 0, sizeof tr->step_win);
    pt_phase_times_clear(&tr->phases);
}

static void step_line(pt_trainer *tr, int32_t epoch, double lr)
{
    pt_train_metrics m = {.kind = "step", .step = tr->res->steps, .epoch = epoch + 1, .lr = lr,
                          .seconds = now() - tr->t_start, .has_phases = 1};
    fill_rates(tr, &m, &tr->step_win);
    if (tr->engine.phases) tr->engine.phases(tr->engine.self, &m.phases, 1);
    else pt_phase_times_clear(&m.phases);   /* the loop's own "other" below */
    for (int p = 0; p < PT_PHASE_COUNT; p++) m.phases.seconds[p] += tr->phases.seconds[p];
    m.phases.steps = tr->step_win.steps;
    if (isnan(tr->res->first_loss)) tr->res->first_loss = m.loss;
    emit(tr, &m);
    step_window_reset(tr);
}

static int write_result(pt_trainer *tr)
{
    json_t *o = pt_train_result_json(tr->res);
    int rc = o ? json_dump_file(o, tr->result_path, JSON_INDENT(2) | JSON_REAL_PRECISION(9)) : -1;
    json_decref(o);
    if (rc != 0)
        pt_errors_add(tr->errs, tr->result_path, 0, "", "cannot write: %s", strerror(errno));
    return rc;
}

/* --- the loop ----------------------------------------------------------------- */

/* One optimizer step on the global batch ids[0..n): gradient from the
 * engine, optional clipping, Adam(W) at the schedule's rate. */
static int train_step(pt_trainer *tr, const uint32_t *ids, uint32_t n, pt_step_stats *st)
{
    const double lr = pt_schedule_lr(&tr->sched), clip = tr->cfg->training.clip_grad_norm;
    double t0 = now();
    /* the backend applies Adam inside its all-reduce when it can (train.h) */
    if (tr->engine.update && tr->engine.arm_update)
        tr->engine.arm_update(tr->engine.self, &tr->optim, lr, clip);
    if (tr->engine.compute(tr->engine.self, &tr->packs, ids, n, NULL, tr->grads, st, tr->errs) != 0)
        return -1;
    double t1 = now();
    if (!tr->engine.phases) tr->phases.seconds[PT_PHASE_OTHER] += t1 - t0;
    if (!pt_step_stats_finite(st)) {
        pt_errors_add(tr->errs, NULL, 0, "training.lr",
                      "training diverged: the loss is not finite at step %lld; lower "
                      "training.lr or set training.clip_grad_norm",
                      (long long)tr->res->steps + 1);
        return -1;
    }
    if (tr->engine.update) {
        /* ZeRO: the engine's replicas update their shards (engine/backend/backend_zero.h) */
        if (tr->engine.update(tr->engine.self, &tr->optim, tr->grads, lr, clip, tr->errs) != 0)
            return -1;
    } else {
        if (clip > 0) pt_grad_clip(tr->grads, tr->model.n_params, clip);
        pt_optim_step(&tr->optim, tr->model.params_memory, tr->grads, lr);
    }
    tr->phases.seconds[PT_PHASE_OPTIMIZER] += now() - t1;
    tr->phases.steps++;
    pt_schedule_step(&tr->sched);
    tr->res->steps++;
    return 0;
}

static int ensure_ids(pt_trainer *tr, uint32_t n)
{
    if (n > tr->ids_cap) {
        uint32_t *p = realloc(tr->ids, (size_t)n * sizeof(uint32_t));
        if (!p) {
            pt_errors_add(tr->errs, NULL, 0, "", "out of memory");
            return -1;
        }
        tr->ids = p;
        tr->ids_cap = n;
    }
    for (uint32_t i = 0; i < n; i++) tr->ids[i] = i;
    return 0;
}

/* Validation at the end of an epoch: epoch line, schedule, best model,
 * early stopping; the windows start afresh for the next epoch.  Returns 1
 * to stop, 0 to go on, -1 on error. */
static int end_epoch(pt_trainer *tr, int32_t epoch)
{
    pt_eval_result v;
    if (pt_evaluate(&tr->val_eval, &tr->val_packs, &v, tr->errs) != 0) return -1;
    pt_train_metrics m = {.kind = "epoch", .step = tr->res->steps, .epoch = epoch + 1,
                          .lr = pt_schedule_lr(&tr->sched), .seconds = now() - tr->t_start,
                          .val_mae = v.mae, .val_rmse = v.rmse, .val_loss = v.loss,
                          .val_forces_mae = v.forces_mae, .val_forces_rmse = v.forces_rmse,
                          .val_stress_mae = v.stress_mae, .val_stress_rmse = v.stress_rmse};
    fill_rates(tr, &m, &tr->epoch_win);
    m.train_loss = m.loss;
    if (tr->plan.n_heads > 1) {
        m.n_heads = tr->plan.n_heads;
        for (int k = 0; k < m.n_heads; k++) {
            m.head_key[k] = tr->model.head[k].key;
            m.val_head[k] = v.head[k];
        }
    }
    tr->res->epochs = epoch + 1;
    tr->res->last_loss = m.loss;
    if (v.loss < tr->res->best_val_loss) {
        tr->res->best_val_loss = v.loss;
        tr->res->best_val_mae = v.mae;
        tr->res->best_val_rmse = v.rmse;
        tr->res->best_val_forces_mae = v.forces_mae;
        tr->res->best_val_forces_rmse = v.forces_rmse;
        tr->res->best_val_stress_mae = v.stress_mae;
        tr->res->best_epoch = epoch + 1;
        memcpy(tr->best, tr->model.params_memory, tr->model.n_params * sizeof(float));
        if (pt_trainer_save_best(tr) != 0) return -1;
    }
    emit(tr, &m);
    memset(&tr->epoch_win, 0, sizeof tr->epoch_win);
    step_window_reset(tr);
    pt_schedule_epoch_end(&tr->sched, v.loss);
    if (pt_early_stop_update(&tr->early, v.loss)) {
        tr->res->stop_reason = "early_stopping";
        return 1;
    }
    return 0;
}

/* The steps of one epoch from pack `at` on.  Returns 1 when training is to
 * end before the epoch's evaluation (should_stop: checkpoint written), 0
 * to evaluate, -1 on error. */
static int epoch_steps(pt_trainer *tr, int32_t epoch, uint32_t at)
{
    const pt_job_training *t = &tr->cfg->training;
    const uint32_t n_packs = tr->packs.n_packs;
    while (at < n_packs) {
        uint32_t n = n_packs - at;
        if ((int64_t)n > tr->global_packs) n = (uint32_t)tr->global_packs;
        double lr = pt_schedule_lr(&tr->sched), t0 = now();
        pt_step_stats st;
        if (train_step(tr, tr->ids + at, n, &st) != 0) return -1;
        at += n;
        double dt = now() - t0;
        window_add(&tr->epoch_win, &st, dt);
        window_add(&tr->step_win, &st, dt);
        result_add(tr->res, &st, dt);
        if (tr->res->steps % t->log_every == 0) step_line(tr, epoch, lr);
        if (t->max_steps && tr->res->steps >= t->max_steps) {
            tr->res->stop_reason = "max_steps";
            return 0;
        }
        if (tr->opt && tr->opt->should_stop && tr->opt->should_stop(tr->opt->user)) {
            tr->res->stop_reason = "cancelled";
            return pt_trainer_checkpoint(tr, epoch, at, 0) != 0 ? -1 : 1;
        }
        /* at an epoch's end the end-of-epoch checkpoint follows anyway */
        if (t->checkpoint_every && tr->res->steps % t->checkpoint_every == 0 && at < n_packs &&
            pt_trainer_checkpoint(tr, epoch, at, 0) != 0)
            return -1;
    }
    return 0;
}

static int run_epochs(pt_trainer *tr)
{
    const pt_job_training *t = &tr->cfg->training;
    for (int32_t epoch = tr->start_epoch; epoch < t->epochs; epoch++) {
        /* the epoch's packs, each step's micro-batches balanced by edges (balance.h) */
        if (pt_packer_epoch(&tr->plan.train_pk, t->seed, (uint32_t)epoch, &tr->packs) != 0 ||
            pt_packs_balance(&tr->packs, tr->plan.nedges, (uint32_t)tr->global_packs,
                             (uint32_t)tr->plan.layout.micro_packs) != 0) {
            pt_errors_add(tr->errs, NULL, 0, "", "out of memory");
            return -1;
        }
        if (ensure_ids(tr, tr->packs.n_packs) != 0) return -1;
        /* a resumed run's position was checked against this epoch's packs */
        uint32_t at = epoch == tr->start_epoch ? tr->start_position : 0;
        int rc = epoch_steps(tr, epoch, at);
        if (rc != 0) return rc < 0 ? -1 : 0;
        rc = end_epoch(tr, epoch);
        if (rc < 0) return -1;
        int last = rc == 1 || !strcmp(tr->res->stop_reason, "max_steps") || epoch + 1 == t->epochs;
        if (pt_trainer_checkpoint(tr, epoch + 1, 0, last) != 0) return -1;
        if (last) break;
    }
    return 0;
}

/* Steps the cosine needs to know: epochs x steps per epoch, capped by
 * max_steps (for static and dynamic batching, epoch 0's count stands in). */
static int64_t planned_steps(pt_trainer *tr)
{
    const pt_job_training *t = &tr->cfg->training;
    int64_t per_epoch = (tr->packs.n_packs + tr->global_packs - 1) / tr->global_packs;
    int64_t total = per_epoch * t->epochs;
    return t->max_steps && t->max_steps < total ? t->max_steps : total;
}

/* Schedule and early stopping from the configuration (a resume then
 * overwrites their state). */
static int start_policies(pt_trainer *tr)
{
    const pt_job_config *cfg = tr->cfg;
    if (pt_packer_epoch(&tr->plan.train_pk, cfg->training.seed, 0, &tr->packs) != 0) {
        pt_errors_add(tr->errs, NULL, 0, "", "out of memory");
        return -1;
    }
    tr->planned_steps = planned_steps(tr);
    pt_schedule_params sp = cfg->training.schedule;
    sp.lr = cfg->training.lr;
    sp.total_steps = (long)tr->planned_steps;
    pt_schedule_init(&tr->sched, &sp);
    pt_early_stop_init(&tr->early, cfg->training.early_stopping_patience, sp.threshold);
    return 0;
}

/* A multi-task job's per-target errors of the kept model (its parameters in
 * place): validation again (a resumed run's best epoch may predate it), and
 * the test part's when there is one. */
static int head_results(pt_trainer *tr, const pt_eval_result *te)
{
    pt_train_result *res = tr->res;
    pt_eval_result v;
    if (pt_evaluate(&tr->val_eval, &tr->val_packs, &v, tr->errs) != 0) return -1;
    res->n_heads = tr->plan.n_heads;
    for (int k = 0; k < res->n_heads; k++) {
        snprintf(res->head_key[k], sizeof res->head_key[k], "%s", tr->model.head[k].key);
        res->val_head[k] = v.head[k];
        res->test_head[k] = te ? te->head[k] : (pt_head_errors){NAN, NAN};
    }
    return 0;
}

int pt_train_run(const pt_job_config *cfg, const pt_dataset *ds, const char *out_dir,
                 const pt_train_options *opt, pt_train_result *res, pt_errors *errs)
{
    pt_trainer tr = {.cfg = cfg, .ds = ds, .opt = opt, .res = res, .errs = errs};
    memset(res, 0, sizeof(*res));
    res->best_val_loss = res->best_val_mae = res->best_val_rmse = INFINITY;
    res->test_mae = res->test_rmse = NAN;
    res->best_val_forces_mae = res->best_val_forces_rmse = res->best_val_stress_mae = NAN;
    res->test_forces_mae = res->test_forces_rmse = res->test_forces_zero_mae = NAN;
    res->test_stress_mae = res->test_stress_rmse = NAN;
    res->first_loss = res->last_loss = NAN;
    res->stop_reason = "epochs";
    res->resumed_step = -1;
    tr.t_start = now();
    int rc = pt_train_check_cpu(cfg, errs);
    if (rc == 0 && config_hash(cfg, ds, tr.config_hash) != 0) {
        pt_errors_add(errs, NULL, 0, "", "out of memory");
        rc = -1;
    }
    if (rc == 0 && opt && opt->resume_path) rc = pt_trainer_resume_open(&tr);
    if (rc == 0) rc = setup(&tr, out_dir);
    if (rc == 0) rc = start_policies(&tr);
    if (rc == 0 && tr.resuming) rc = pt_trainer_resume_apply(&tr);
    if (rc == 0 && !tr.resumed_final) rc = run_epochs(&tr);
    if (rc == 0 && res->best_epoch > 0) {
        /* the kept model is the best by validation: evaluate it on the test part */
        memcpy(tr.model.params_memory, tr.best, tr.model.n_params * sizeof(float));
        pt_eval_result te;
        if (tr.plan.split.n_test) {
            if (pt_evaluate(&tr.test_eval, &tr.test_packs, &te, errs) != 0) rc = -1;
            res->test_mae = te.mae;
            res->test_rmse = te.rmse;
            res->test_forces_mae = te.forces_mae;
            res->test_forces_rmse = te.forces_rmse;
            res->test_forces_zero_mae = te.forces_zero_mae;
            res->test_stress_mae = te.stress_mae;
            res->test_stress_rmse = te.stress_rmse;
        }
        if (rc == 0 && tr.plan.n_heads > 1) rc = head_results(&tr, tr.plan.split.n_test ? &te : NULL);
    }
    res->seconds = now() - tr.t_start;
    if (rc == 0 && tr.result_path[0]) rc = write_result(&tr);
    teardown(&tr);
    return rc;
}
