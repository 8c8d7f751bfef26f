/* train_internal.h — pieces shared by the files of the training loop (not
 * part of the engine's public API): batch set-up and fill from packs, the
 * evaluation pass, and the trainer's state, which train.c runs and
 * train_ckpt.c saves and restores. */
#ifndef PT_TRAIN_INTERNAL_H
#define PT_TRAIN_INTERNAL_H

#include <math.h>
#include <stdio.h>

#include "engine/train/checkpoint.h"
#include "engine/train/optim.h"
#include "engine/pack/packing.h"
#include "engine/core/phase.h"
#include "engine/train/schedule.h"
#include "engine/data/split.h"
#include "engine/train/train.h"

/* A batch of d->layout.micro_packs packs of the given per-pack limits
 * (train_batch.c).  Returns 0, or -1 with errs filled. */
int pt_train_batch_init(pt_batch *b, const pt_train_data *d, pt_pack_limits limits,
                        pt_errors *errs);
void pt_train_batch_close(pt_batch *b);

/* Fills b with packs ids[0..n) of `packs` (n <= the batch's packs; the rest
 * is padding) in engine/batch.h's layout, targets in dataset units.  A pack
 * over the batch's limits is an error, never an overflow.  No allocation. */
int pt_train_fill(pt_batch *b, const pt_train_data *d, const pt_packs *packs,
                  const uint32_t *ids, uint32_t n, pt_errors *errs);

void pt_step_stats_add_batch(pt_step_stats *st, const pt_batch *b, const pt_schnet_acts *a);

/* The arena a job's training steps need: PT_SCHNET_FORCES_TRAIN for a
 * forces job, PT_SCHNET_ENERGY otherwise (its evaluations: FORCES or ENERGY). */
pt_schnet_mode pt_train_step_mode(const pt_train_data *d);
pt_schnet_mode pt_train_eval_mode(const pt_train_data *d);
/* An evaluation arena for batches of b's shape: forward-only (schnet.h:
 * pt_schnet_acts_init_forward, the blocks share their arrays) for energy
 * jobs, of pt_train_eval_mode for jobs evaluated on forces. */
int pt_train_eval_acts_init(pt_schnet_acts *a, const pt_train_data *d, const pt_batch *b,
                            pt_errors *errs);

/* One micro-batch of a training step, in two halves (the backend times
 * them as its forward and backward phases): forward (and forces) and the
 * loss with the step's denominators, its sums added to st; then the
 * backward, ACCUMULATING into grads.  An energy-only job of the default
 * loss runs pt_schnet_loss, as every job did before training.loss existed;
 * another energy-only loss runs pt_schnet_loss_forces on the energy arena; a
 * job whose first target is per atom runs only pt_schnet_loss_heads (no
 * energy, no forces).
 * m is the model computing (d->model, or a replica's own copy under ZeRO);
 * grads may be NULL when a->on_layer places every layer's gradient (ZeRO
 * stages 2-3, energy and forces jobs alike: engine/model/schnet.h). */
void pt_train_micro_forward(const pt_train_data *d, const pt_schnet *m, pt_schnet_acts *a,
                            const pt_batch *b, const pt_schnet_loss_norm *norm,
                            pt_step_stats *st);
void pt_train_micro_backward(const pt_train_data *d, const pt_schnet *m, pt_schnet_acts *a,
                             const pt_batch *b, float *grads);

typedef struct pt_eval_result {
    int64_t n;             /* real graphs evaluated */
    double mae, rmse, mse; /* the first target's (the energy), target units per structure
                              (per atom for a per-atom first target); NaN when none */
    double loss;           /* the training loss (training.loss) over these structures:
                              mse for an energy-only job of the default loss */
    /* forces jobs; NaN when there is nothing to compare */
    int64_t force_components, stress_components;
    double forces_mae, forces_rmse, forces_mse;   /* eV/Å per component */
    double forces_zero_mae;                       /* mean |F_ref|: the MAE of zero forces */
    double stress_mae, stress_rmse, stress_mse;   /* eV/Å³ per component */
    /* every target's errors (head 0's are mae and rmse above), in its units */
    pt_head_errors head[PT_JOB_MAX_TARGETS];
} pt_eval_result;

typedef struct pt_eval_worker pt_eval_worker;

typedef struct pt_evaluator {
    const pt_train_data *d;
    pt_batch batch;
    pt_schnet_acts acts;
    uint32_t *ids;         /* [micro_packs] scratch */
    pt_eval_worker *workers;   /* [n_workers] helper threads' batches (train_eval.c) */
    int n_workers;
} pt_evaluator;

/* The energy errors' sums of an evaluation pass, graph by graph in pack order. */
typedef struct pt_eval_sums {
    double abs, sq, per_atom_sq;
    int64_t n, n_atoms;
} pt_eval_sums;

static inline void pt_eval_sums_energy(pt_eval_sums *s, double y, double target, int32_t natoms)
{
    const double e = y - target, ea = e / (double)natoms;
    s->abs += fabs(e);
    s->sq += e * e;
    s->per_atom_sq += ea * ea;
}

int pt_evaluator_init(pt_evaluator *ev, const pt_train_data *d, pt_pack_limits limits,
                      pt_errors *errs);
void pt_evaluator_close(pt_evaluator *ev);

/* Forward over every pack of `packs` with the model's current parameters. */
int pt_evaluate(pt_evaluator *ev, const pt_packs *packs, pt_eval_result *out, pt_errors *errs);

/* train_eval.c: `extra` helper threads for ev's passes, each with a batch and
 * an arena of ev's shape, when the job's evaluation is one graph-level
 * energy head (pt_eval_split_eligible; otherwise nothing is done).  The
 * split pass adds the serial pass's sums, bit for bit. */
int pt_eval_split_eligible(const pt_train_data *d);
int pt_evaluator_split(pt_evaluator *ev, int extra, pt_errors *errs);
void pt_evaluator_split_close(pt_evaluator *ev);
int pt_evaluate_split(pt_evaluator *ev, const pt_packs *packs, pt_eval_sums *sums,
                      pt_errors *errs);

/* --- the trainer (train.c, train_ckpt.c) -------------------------------- */

typedef struct pt_train_window {   /* optimizer steps since a metrics line */
    pt_step_stats st;
    double seconds;
    int64_t steps;
} pt_train_window;

typedef struct pt_trainer {
    const pt_job_config *cfg;
    const pt_dataset *ds;
    const pt_train_options *opt;
    pt_train_result *res;
    pt_errors *errs;
    double t_start;

    pt_train_plan plan;          /* target, graphs, split, packers, layout (plan.h) */
    pt_norm norm[PT_JOB_MAX_TARGETS]; /* each target's statistics (plan.n_heads) */
    pt_packs packs, val_packs, test_packs;
    uint32_t *ids;
    uint32_t ids_cap;

    pt_schnet model;
    pt_train_data data;
    pt_grad_engine engine;
    pt_evaluator val_eval, test_eval;
    float *grads, *best;
    pt_optim optim;
    pt_schedule sched;
    pt_early_stop early;
    int64_t global_packs;        /* R·A·b */
    int64_t planned_steps;       /* epochs x steps per epoch, capped by max_steps */

    /* metrics windows: the epoch's, the steps since the last step line, and
     * the loop's own phase times (optimizer; compute without a backend) */
    pt_train_window epoch_win, step_win;
    pt_phase_times phases;
    int64_t lines;               /* metrics lines emitted */

    /* checkpoints */
    char config_hash[PT_CHECKPOINT_HASH_HEX + 1];
    uint32_t data_crc;
    pt_checkpoint resume;        /* opened when resuming, closed after restore */
    int resuming;
    int resumed_final;           /* the checkpoint was written as training ended */
    int32_t start_epoch;         /* where the loop begins (0, 0 on a fresh run) */
    uint32_t start_position;
    char ckpt_dir[4096];         /* "" = no checkpoints (no output directory) */

    FILE *metrics;
    char metrics_path[4096];
    char model_path[4096];
    char result_path[4096];
} pt_trainer;

/* train_ckpt.c.  Opens opt->resume_path and checks it against the job's
 * configuration, before any expensive set-up.  Returns 0 or -1 (errs). */
int pt_trainer_resume_open(pt_trainer *tr);
/* After set-up: checks the data identity and restores the whole state
 * (parameters, optimizer, schedule, early stopping, best model, windows,
 * results, normalisation, the loop's start), then closes the file. */
int pt_trainer_resume_apply(pt_trainer *tr);
/* Opens out_dir/metrics.jsonl: truncated, or when resuming, cut back to the
 * lines the checkpoint had emitted and appended to. */
int pt_trainer_metrics_open(pt_trainer *tr, const char *path);
/* Prepares out_dir/checkpoints: created, and cleared of files a checkpoint
 * newer than the loop's start (a future the run will redo) or a crash
 * mid-write left behind. */
int pt_trainer_ckpt_dir(pt_trainer *tr, const char *out_dir);
/* Writes the state "next: epoch `epoch` (0-based) from pack `position`" to
 * ckpt_dir (with `final`, the run has ended for res->stop_reason), keeps
 * the newest PT_TRAIN_CHECKPOINTS_KEPT, tells opt->on_checkpoint.  No-op
 * without ckpt_dir.  Returns 0 or -1 (errs). */
int pt_trainer_checkpoint(pt_trainer *tr, int32_t epoch, uint32_t position, int final);
/* The best parameters written as out_dir/model.safetensors (atomically). */
int pt_trainer_save_best(pt_trainer *tr);

#endif
