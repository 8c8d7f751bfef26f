/* train_ckpt.c — the training loop's checkpoints: the trainer's state to a
 * checkpoint file and back (engine/checkpoint.h is the file format), the
 * checkpoint directory (newest few kept, leftovers of a crash removed), the
 * metrics file cut back to the checkpoint's lines on resume, and the best
 * model file.
 *
 * What makes a resumed run identical to one that never stopped: every value
 * the loop reads after the checkpoint is restored exactly (parameters and
 * moments as raw floats, doubles through 17-digit text), and the data order
 * is recomputed from (seed, epoch), the position in the epoch's pack list
 * being part of the state. */
#include "engine/train/train_internal.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CKPT_PREFIX "ckpt-"
#define CKPT_SUFFIX ".safetensors"

static const char *const stop_reasons[] = {"epochs", "max_steps", "early_stopping", "cancelled"};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void window_to(pt_checkpoint_window *dst, const pt_train_window *w)
{
    *dst = (pt_checkpoint_window){.loss_sum = w->st.loss_sum, .seconds = w->seconds,
                                  .graphs = w->st.graphs, .nodes = w->st.nodes,
                                  .node_slots = w->st.node_slots, .edges = w->st.edges,
                                  .edge_slots = w->st.edge_slots, .steps = w->steps,
                                  .forces_sse = w->st.forces_sse,
                                  .stress_sse = w->st.stress_sse,
                                  .force_components = w->st.force_components,
                                  .stress_components = w->st.stress_components,
                                  .heads_loss_sum = w->st.heads_loss_sum};
}

static void window_from(pt_train_window *w, const pt_checkpoint_window *src)
{
    *w = (pt_train_window){.st = {.loss_sum = src->loss_sum, .graphs = src->graphs,
                                  .nodes = src->nodes, .node_slots = src->node_slots,
                                  .edges = src->edges, .edge_slots = src->edge_slots,
                                  .forces_sse = src->forces_sse, .stress_sse = src->stress_sse,
                                  .force_components = src->force_components,
                                  .stress_components = src->stress_components,
                                  .heads_loss_sum = src->heads_loss_sum},
                           .seconds = src->seconds, .steps = src->steps};
}

static pt_checkpoint_tensors tensors_of(pt_trainer *tr)
{
    return (pt_checkpoint_tensors){.n = tr->model.n_params, .params = tr->model.params_memory,
                                   .adam_m = tr->optim.m, .adam_v = tr->optim.v,
                                   .best = tr->best};
}

/* --- the best model file ---------------------------------------------------- */

/* The best parameters go through the model (pt_schnet_save writes the
 * model's own buffer); the gradient buffer, rewritten by every step, holds
 * the current parameters meanwhile. */
int pt_trainer_save_best(pt_trainer *tr)
{
    if (!tr->model_path[0]) return 0;
    const size_t bytes = tr->model.n_params * sizeof(float);
    memcpy(tr->grads, tr->model.params_memory, bytes);
    memcpy(tr->model.params_memory, tr->best, bytes);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", tr->model_path);
    int rc = pt_schnet_save(&tr->model, tmp, tr->errs);
    memcpy(tr->model.params_memory, tr->grads, bytes);
    if (rc != 0) return -1;
    if (rename(tmp, tr->model_path) != 0) {
        pt_errors_add(tr->errs, tr->model_path, 0, "", "cannot write: %s", strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

/* --- the checkpoint directory ---------------------------------------------- */

/* The step in a checkpoint file name, or -1 for any other name. */
static long long ckpt_step(const char *name)
{
    size_t n = strlen(name), p = strlen(CKPT_PREFIX), s = strlen(CKPT_SUFFIX);
    if (n <= p + s || strncmp(name, CKPT_PREFIX, p) || strcmp(name + n - s, CKPT_SUFFIX))
        return -1;
    long long step = 0;
    for (size_t i = p; i < n - s; i++) {
        if (name[i] < '0' || name[i] > '9' || step > (1LL << 50)) return -1;
        step = step * 10 + (name[i] - '0');
    }
    return step;
}

static int is_leftover(const char *name)
{
    size_t n = strlen(name);
    return !strncmp(name, CKPT_PREFIX, strlen(CKPT_PREFIX)) &&
           ((n > 8 && !strcmp(name + n - 8, ".partial")) ||
            (n > 12 && !strcmp(name + n - 12, ".partial.tmp")));
}

static int ckpt_filter(const struct dirent *e)
{
    return ckpt_step(e->d_name) >= 0;
}

static void remove_in_dir(const pt_trainer *tr, const char *name)
{
    char path[4400];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", tr->ckpt_dir, name) < sizeof path)
        remove(path);
}

/* Keeps the newest PT_TRAIN_CHECKPOINTS_KEPT of a local run.  Under the
 * server nothing is deleted here: the scheduler may lag any number of
 * checkpoints behind the worker, and deletes each predecessor itself once a
 * newer checkpoint is recorded. */
static void prune(pt_trainer *tr)
{
    if (tr->opt && tr->opt->keep_all_checkpoints) return;
    struct dirent **list;
    int n = scandir(tr->ckpt_dir, &list, ckpt_filter, alphasort);
    if (n < 0) return;
    for (int i = 0; i < n; i++) {
        if (i < n - PT_TRAIN_CHECKPOINTS_KEPT) remove_in_dir(tr, list[i]->d_name);
        free(list[i]);
    }
    free(list);
}

int pt_trainer_ckpt_dir(pt_trainer *tr, const char *out_dir)
{
    if ((size_t)snprintf(tr->ckpt_dir, sizeof tr->ckpt_dir, "%s/checkpoints", out_dir) >=
        sizeof tr->ckpt_dir - 64) {
        pt_errors_add(tr->errs, out_dir, 0, "", "output directory path too long");
        tr->ckpt_dir[0] = '\0';
        return -1;
    }
    if (mkdir(tr->ckpt_dir, 0777) != 0 && errno != EEXIST) {
        pt_errors_add(tr->errs, tr->ckpt_dir, 0, "", "cannot create the checkpoint directory: %s",
                      strerror(errno));
        return -1;
    }
    /* a fresh run starts with none; a resumed one drops the future it redoes */
    long long start = tr->resuming ? (long long)tr->resume.state.steps : -1;
    enum { BATCH = 64 };
    char names[BATCH][256];
    int n;
    do {   /* in batches, since removing while reading a directory is unspecified */
        DIR *d = opendir(tr->ckpt_dir);
        if (!d) {
            pt_errors_add(tr->errs, tr->ckpt_dir, 0, "", "cannot read: %s", strerror(errno));
            return -1;
        }
        n = 0;
        for (struct dirent *e; n < BATCH && (e = readdir(d));)
            if (ckpt_step(e->d_name) > start || is_leftover(e->d_name))
                snprintf(names[n++], sizeof names[0], "%s", e->d_name);
        closedir(d);
        for (int i = 0; i < n; i++) remove_in_dir(tr, names[i]);
    } while (n == BATCH);
    return 0;
}

/* --- writing ------------------------------------------------------------------ */

int pt_trainer_checkpoint(pt_trainer *tr, int32_t epoch, uint32_t position, int final)
{
    /* before the output check: collective on every MPI rank, writing or not */
    if (tr->engine.sync_state && tr->engine.sync_state(tr->engine.self, &tr->optim, tr->errs) != 0)
        return -1;
    if (!tr->ckpt_dir[0]) return 0;
    const pt_train_result *r = tr->res;
    pt_checkpoint_state s = {
        .data_crc32 = tr->data_crc, .n_structs = tr->ds->n_structs, .n_train = tr->plan.split.n_train,
        .n_val = tr->plan.split.n_val, .n_test = tr->plan.split.n_test, .epoch = epoch,
        .position = position, .steps = r->steps, .lines = tr->lines,
        .seconds = now() - tr->t_start, .optim_step = tr->optim.step,
        .sched_lr = tr->sched.lr, .sched_best = tr->sched.best, .sched_step = tr->sched.step,
        .sched_bad_epochs = tr->sched.num_bad_epochs, .sched_cooldown = tr->sched.cooldown_counter,
        .sched_reductions = tr->sched.reductions, .early_best = tr->early.best,
        .early_bad_epochs = tr->early.bad_epochs, .epochs_done = r->epochs,
        .best_epoch = r->best_epoch, .best_val_loss = r->best_val_loss,
        .best_val_mae = r->best_val_mae, .best_val_rmse = r->best_val_rmse,
        .first_loss = r->first_loss, .last_loss = r->last_loss, .step_seconds = r->step_seconds,
        .graphs = r->graphs, .nodes = r->nodes, .edges = r->edges, .node_slots = r->node_slots,
        .edge_slots = r->edge_slots, .norm_mean = tr->norm[0].mean, .norm_std = tr->norm[0].std,
        .best_val_forces_mae = r->best_val_forces_mae,
        .best_val_forces_rmse = r->best_val_forces_rmse,
        .best_val_stress_mae = r->best_val_stress_mae};
    memcpy(s.config_sha256, tr->config_hash, sizeof s.config_sha256);
    snprintf(s.stop_reason, sizeof s.stop_reason, "%s", final ? r->stop_reason : "");
    window_to(&s.epoch_window, &tr->epoch_win);
    window_to(&s.step_window, &tr->step_win);
    memcpy(s.norm_atomref, tr->norm[0].atomref, sizeof s.norm_atomref);

    char path[4200];
    snprintf(path, sizeof path, "%s/" CKPT_PREFIX "%010lld" CKPT_SUFFIX, tr->ckpt_dir,
             (long long)r->steps);
    pt_checkpoint_tensors t = tensors_of(tr);
    if (pt_checkpoint_save(path, &s, &t, tr->errs) != 0) return -1;
    if ((size_t)snprintf(tr->res->last_checkpoint, sizeof tr->res->last_checkpoint, "%s", path) >=
        sizeof tr->res->last_checkpoint)
        tr->res->last_checkpoint[0] = '\0';
    prune(tr);
    if (tr->opt && tr->opt->on_checkpoint) {
        /* the epoch of the last step, 1-based, as on its metrics line */
        pt_train_checkpoint ck = {.path = path, .step = r->steps,
                                  .epoch = position == 0 ? epoch : epoch + 1, .final = final};
        tr->opt->on_checkpoint(tr->opt->user, &ck);
    }
    return 0;
}

/* --- resuming ----------------------------------------------------------------- */

int pt_trainer_resume_open(pt_trainer *tr)
{
    const char *path = tr->opt->resume_path;
    if (pt_checkpoint_open(&tr->resume, path, tr->errs) != 0) return -1;
    const pt_checkpoint_state *s = &tr->resume.state;
    if (strcmp(s->config_sha256, tr->config_hash)) {
        pt_errors_add(tr->errs, path, 0, "config_sha256",
                      "the checkpoint was made with another job configuration (sha256 %.12s..., "
                      "this job's is %.12s...); resume with the configuration it was made with, "
                      "or start afresh",
                      s->config_sha256, tr->config_hash);
        return -1;
    }
    int known = !s->stop_reason[0];
    for (size_t i = 0; i < sizeof stop_reasons / sizeof stop_reasons[0]; i++)
        known |= !strcmp(s->stop_reason, stop_reasons[i]);
    if (!known || s->epoch < 0 || s->epoch > tr->cfg->training.epochs || s->steps < 0 ||
        s->lines < 0 || s->optim_step < 0 || s->epochs_done < 0) {
        pt_errors_add(tr->errs, path, 0, "",
                      "the checkpoint's state is out of range (epoch %d of %d, step %lld, "
                      "stop reason \"%s\")",
                      (int)s->epoch, (int)tr->cfg->training.epochs, (long long)s->steps,
                      s->stop_reason);
        return -1;
    }
    tr->resuming = 1;
    return 0;
}

/* Same structures, same split: the packs of the checkpoint's epochs are the
 * packs this run would draw. */
static int check_data(pt_trainer *tr)
{
    const pt_checkpoint_state *s = &tr->resume.state;
    if (s->n_structs != tr->ds->n_structs || s->data_crc32 != tr->data_crc) {
        pt_errors_add(tr->errs, tr->resume.path, 0, "data_crc32",
                      "the checkpoint was made on other data (%u structures, CRC-32 %08x); "
                      "this dataset has %u structures, CRC-32 %08x",
                      s->n_structs, s->data_crc32, tr->ds->n_structs, tr->data_crc);
        return -1;
    }
    if (s->n_train != tr->plan.split.n_train || s->n_val != tr->plan.split.n_val ||
        s->n_test != tr->plan.split.n_test) {
        pt_errors_add(tr->errs, tr->resume.path, 0, "n_train",
                      "the checkpoint's split is %u/%u/%u structures, this run's %u/%u/%u",
                      s->n_train, s->n_val, s->n_test, tr->plan.split.n_train, tr->plan.split.n_val,
                      tr->plan.split.n_test);
        return -1;
    }
    if (s->epoch < tr->cfg->training.epochs) {
        if (pt_packer_epoch(&tr->plan.train_pk, tr->cfg->training.seed, (uint32_t)s->epoch,
                            &tr->packs) != 0) {
            pt_errors_add(tr->errs, NULL, 0, "", "out of memory");
            return -1;
        }
        if (s->position > tr->packs.n_packs) {
            pt_errors_add(tr->errs, tr->resume.path, 0, "position",
                          "the checkpoint resumes at pack %u of epoch %d, which has %u packs",
                          s->position, (int)s->epoch + 1, tr->packs.n_packs);
            return -1;
        }
    }
    return 0;
}

static void restore_results(pt_trainer *tr, const pt_checkpoint_state *s)
{
    pt_train_result *r = tr->res;
    r->steps = s->steps;
    r->resumed_step = s->steps;
    r->epochs = s->epochs_done;
    r->best_epoch = s->best_epoch;
    r->best_val_loss = s->best_val_loss;
    r->best_val_mae = s->best_val_mae;
    r->best_val_rmse = s->best_val_rmse;
    r->best_val_forces_mae = s->best_val_forces_mae;
    r->best_val_forces_rmse = s->best_val_forces_rmse;
    r->best_val_stress_mae = s->best_val_stress_mae;
    r->first_loss = s->first_loss;
    r->last_loss = s->last_loss;
    r->step_seconds = s->step_seconds;
    r->graphs = s->graphs;
    r->nodes = s->nodes;
    r->edges = s->edges;
    r->node_slots = s->node_slots;
    r->edge_slots = s->edge_slots;
    for (size_t i = 0; i < sizeof stop_reasons / sizeof stop_reasons[0]; i++)
        if (!strcmp(s->stop_reason, stop_reasons[i])) r->stop_reason = stop_reasons[i];
}

int pt_trainer_resume_apply(pt_trainer *tr)
{
    const pt_checkpoint_state *s = &tr->resume.state;
    if (check_data(tr) != 0) return -1;
    /* normalisation first: set_atomref also writes atomref.weight, which the
     * parameters then overwrite with their trained values */
    tr->norm[0].mean = tr->model.mean[0] = s->norm_mean;
    tr->norm[0].std = tr->model.std[0] = s->norm_std;
    memcpy(tr->norm[0].atomref, s->norm_atomref, sizeof tr->norm[0].atomref);
    if (tr->model.head[0].use_atomref) pt_schnet_set_atomref(&tr->model, 0, tr->norm[0].atomref);
    pt_checkpoint_tensors t = tensors_of(tr);
    if (pt_checkpoint_tensors_get(&tr->resume, &t, tr->errs) != 0) return -1;
    tr->optim.step = (long)s->optim_step;
    tr->sched.lr = s->sched_lr;
    tr->sched.best = s->sched_best;
    tr->sched.step = (long)s->sched_step;
    tr->sched.num_bad_epochs = s->sched_bad_epochs;
    tr->sched.cooldown_counter = s->sched_cooldown;
    tr->sched.reductions = s->sched_reductions;
    tr->early.best = s->early_best;
    tr->early.bad_epochs = s->early_bad_epochs;
    restore_results(tr, s);
    window_from(&tr->epoch_win, &s->epoch_window);
    window_from(&tr->step_win, &s->step_window);
    tr->lines = s->lines;
    tr->t_start = now() - s->seconds;
    tr->start_epoch = s->epoch;
    tr->start_position = s->position;
    tr->resumed_final = s->stop_reason[0] != '\0';
    /* the model file must be the checkpoint's best, not a later one of the
     * run that stopped */
    int rc = 0;
    if (s->best_epoch > 0) rc = pt_trainer_save_best(tr);
    else if (tr->model_path[0]) remove(tr->model_path);
    pt_checkpoint_close(&tr->resume);
    return rc;
}

/* --- the metrics file ------------------------------------------------------- */

/* Bytes of the first `lines` complete lines of f (fewer if it has fewer). */
static long lines_prefix(FILE *f, int64_t lines)
{
    long keep = 0, off = 0;
    int64_t seen = 0;
    for (int c; seen < lines && (c = getc(f)) != EOF;) {
        off++;
        if (c == '\n') {
            seen++;
            keep = off;
        }
    }
    return keep;
}

int pt_trainer_metrics_open(pt_trainer *tr, const char *path)
{
    if (tr->resuming) {
        FILE *f = fopen(path, "r+");
        if (f) {
            long keep = lines_prefix(f, tr->resume.state.lines);
            int rc = ftruncate(fileno(f), keep);
            fclose(f);
            if (rc != 0) {
                pt_errors_add(tr->errs, path, 0, "", "cannot truncate: %s", strerror(errno));
                return -1;
            }
        }
    }
    tr->metrics = fopen(path, tr->resuming ? "a" : "w");
    if (!tr->metrics) {
        pt_errors_add(tr->errs, path, 0, "", "cannot write: %s", strerror(errno));
        return -1;
    }
    return 0;
}
