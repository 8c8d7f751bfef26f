/* train.h — the training loop: one job configuration + one dataset in, a
 * best-by-validation model and a metrics stream out.  The CLI
 * (`packtrain train`) and the server's workers both run pt_train_run.
 *
 * Room engine/train: the job configuration and its one validator
 * (config.h), the plan of a job on a dataset and machine (plan.h), the
 * training loop (this file), optimizer, schedules, checkpoints, predictions.
 * Uses the rooms below (core, data, graph, pack, model); knows backends only
 * as the pt_grad_engine table its caller hands it — engine/backend,
 * engine/mpi and engine/run sit above it.
 *
 * Order of work:
 *   neighbour graphs -> seeded split (every element of validation and test
 *   also in training: pt_split_cover_elements) -> normalisation fitted on
 *   the training part -> one packer per part, same method, "auto" limits
 *   resolved on each part -> per epoch: the epoch's packs in an order fixed by (seed, epoch), taken
 *   in GLOBAL batches of R·A·b packs, one optimizer step each -> validation
 *   MAE / RMSE -> schedule, early stopping, best model.
 *
 * The global batch is the unit of the multi-replica backend (issue 4): the
 * packs an optimizer step consumes depend only on the seed and R·A·b, never
 * on how a backend splits them into replicas and micro-batches.  The gradient
 * of one global batch comes from a pt_grad_engine that the caller brings
 * (pt_train_options.engine_open); the built-in one runs the R·A
 * micro-batches of b packs one after the other on this thread.  The
 * emulated multi-IPU backend (engine/backend) and the MPI backend
 * (engine/mpi) sit above this room: engine/run chooses between them.
 * Every engine must produce the gradient of the MEAN loss over all real
 * graphs of the global batch (pt_schnet_loss with n_norm = that count).
 *
 * Metrics lines (JSON, one object per line, written to DIR/metrics.jsonl and
 * handed to the callback):
 *   {"kind":"step"|"epoch","step","epoch","loss","lr","graphs_per_s",
 *    "nodes_per_s","padding_fraction","seconds"}
 * epoch lines adding "train_loss","val_mae","val_rmse".  `step` counts
 * optimizer steps done, `epoch` is 1-based, `loss` is the training loss
 * (training.loss; for an energy-only job the mean squared error in target
 * units²) over the real graphs of the steps since the previous step line (on
 * epoch lines: over the whole epoch, equal to train_loss); val_mae and
 * val_rmse are the energy's (target units, per structure; a job whose first
 * target is per atom: that target's, per atom, and its loss that target's
 * weighted per-atom MSE).  A forces job's
 * lines add "loss_energy","loss_forces" (and "loss_stress" when stress is
 * trained): the loss's parts, and epoch lines "val_loss" (what the best
 * model, the plateau schedule and early stopping follow: the energy MSE for
 * an energy-only job), "val_forces_mae","val_forces_rmse" (eV/Å, per
 * component) and "val_stress_mae","val_stress_rmse" (eV/Å³).  A multi-task
 * job's (config.h, targets) loss is Σ_k w_k MSE_k (+ the force terms), its
 * val_mae and val_rmse are the first target's, and its epoch lines add
 * "heads":{KEY:{"val_mae","val_rmse"},...} for every target.  `seconds`
 * is wall time since training started, throughput and padding are measured
 * over the same steps as `loss` and exclude evaluation time.  Step lines
 * add the mean seconds per step of each phase over the same steps
 * (phase.h): "phase_io_s","phase_forward_s","phase_backward_s",
 * "phase_allreduce_s","phase_optimizer_s","phase_other_s" — from the
 * backend, plus the optimizer timed here; with another engine its whole
 * gradient computation counts as "other".
 *
 * Checkpoints (checkpoint.h) go to out_dir/checkpoints/ckpt-STEP.safetensors
 * every training.checkpoint_every steps, at the end of every epoch, and when
 * should_stop ends training; the newest PT_TRAIN_CHECKPOINTS_KEPT (3) are
 * kept.  With resume_path the run restores one and continues with the very
 * next step: the same parameters, bit for bit, and the same metrics lines
 * as a run that never stopped (times aside). */
#ifndef PT_TRAIN_H
#define PT_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/pack/batch.h"
#include "engine/train/config.h"
#include "engine/data/dataset.h"
#include "engine/core/errors.h"
#include "engine/graph/graph.h"
#include "engine/data/normalize.h"
#include "engine/core/phase.h"
#include "engine/model/schnet.h"
#include "engine/train/optim.h"
#include "engine/train/plan.h"

#define PT_TRAIN_CHECKPOINTS_KEPT 3

/* What a gradient engine computes for one global batch.  The loss of the
 * batch is w_E loss_sum/graphs + w_F forces_sse/force_components +
 * w_S stress_sse/stress_components (pt_step_stats_loss). */
typedef struct pt_step_stats {
    double loss_sum;        /* Σ (y - t)² over the real graphs (per atom: Σ ((y - t)/n)²) */
    double heads_loss_sum;  /* Σ_{k≥1} w_k Σ (y_k - t_k)² over the real graphs: the other
                               targets' share of a multi-task job's loss */
    double forces_sse;      /* Σ (F - F_ref)² over force components, (eV/Å)²; forces jobs */
    double stress_sse;      /* Σ (σ - σ_ref)² over stress components, (eV/Å³)²; forces jobs */
    int64_t force_components;   /* 3 x atoms with force labels; forces jobs */
    int64_t stress_components;  /* 9 x fully periodic graphs with stress labels */
    int64_t graphs;         /* real graphs */
    int64_t nodes;          /* real atoms */
    int64_t node_slots;     /* node slots of all packs processed, padding included */
    int64_t edges;          /* real edges */
    int64_t edge_slots;
    int64_t filter_rows;    /* rows the filter network ran over (engine/pack/edge_rows.h) */
} pt_step_stats;

/* Everything a gradient engine reads; owned by the trainer, valid for the
 * whole run.  The model's parameters change between steps, not during one. */
typedef struct pt_train_data {
    const pt_job_config *cfg;
    const pt_dataset *ds;
    const pt_graphs *graphs;
    uint32_t target_key;        /* head_key[0] (into ds->atom_cols when loss.head_atom[0]) */
    const uint32_t *head_key;   /* [loss.heads] each target's index into ds->targets */
    const pt_schnet *model;
    pt_pack_limits limits;      /* per pack */
    pt_train_layout layout;     /* the engine's share of a step: R, A, b, threads (plan.h) */
    pt_train_loss loss;         /* training.loss resolved on the dataset (plan.h) */
} pt_train_data;

/* A gradient engine: what the training loop needs of a backend.  The loop
 * knows engines only through this table; its caller chooses one
 * (pt_train_options.engine_open: engine/run picks the backend the job's
 * configuration names). */
typedef struct pt_grad_engine {
    void *self;
    const char *kind;   /* "local", "ipu-emulated", "mpi": for logs and reports */
    /* Overwrites grads[0..model->n_params) with the gradient of the loss
     * (data->loss) over the real graphs of packs ids[0..n) of `packs` (n <=
     * R·A·b; a last partial batch is padded with empty packs), its means
     * taken over norm's counts (NULL: those of these packs,
     * pt_train_loss_norm; a data-parallel caller computing a share of a
     * larger batch passes the whole batch's counts), and fills st.  Must
     * not allocate.  Returns 0, or -1 with errs filled. */
    int (*compute)(void *self, const pt_packs *packs, const uint32_t *ids, uint32_t n,
                   const pt_schnet_loss_norm *norm, float *grads, pt_step_stats *st,
                   pt_errors *errs);
    /* Phase times of the steps since the last reset (phase.h; the optimizer
     * phase is the loop's), starting a new window when reset; NULL when the
     * engine does not time its phases (the loop then counts its whole
     * gradient computation as "other"). */
    void (*phases)(void *self, pt_phase_times *out, int reset);
    void (*close)(void *self);
    /* Optional (ZeRO, engine/backend/backend_zero.h): the engine applies the
     * optimizer step itself, sharded over its replicas — clipping at norm
     * `clip` (0 = none), Adam(W) with opt's hyper-parameters, step count and
     * moments at rate lr — to the model's parameters, from the gradient
     * buffer compute filled.  When set, the loop calls it instead of
     * pt_grad_clip + pt_optim_step, and changes the parameters only through
     * it (a resume restores them before the first step).  Must not allocate.
     * Returns 0, or -1 with errs filled. */
    int (*update)(void *self, pt_optim *opt, float *grads, double lr, double clip,
                  pt_errors *errs);
    /* Optional, with update: offers the engine the coming step's update
     * (the arguments the loop will pass to update) before compute.  Returns
     * 1 when the next compute applies it itself, each replica to its part of
     * the gradient right after the all-reduce made it, when the step's loss
     * is finite (pt_step_stats_finite of the st it returns) — the bits of
     * update's — and leaves opt's step count to the update call that
     * follows (same opt and grads); 0 when it declines (e.g. clipping needs
     * the whole norm first).  Either way the loop then calls compute, checks
     * the loss and calls update as without it.  A compute that applied the
     * update does not write grads (the gradient went straight into Adam). */
    int (*arm_update)(void *self, pt_optim *opt, double lr, double clip);
    /* Optional: makes opt's moments whole where the engine keeps parts of
     * them elsewhere (MPI ranks each update their own block), before the
     * loop saves them in a checkpoint.  Collective: every rank calls it at
     * the same checkpoints.  Returns 0, or -1 with errs filled. */
    int (*sync_state)(void *self, pt_optim *opt, pt_errors *errs);
} pt_grad_engine;

typedef int (*pt_grad_engine_open_fn)(pt_grad_engine *eng, const pt_train_data *data,
                                      pt_errors *errs);

/* The denominators of the loss's means over packs ids[0..n): real graphs,
 * and for a forces job the force and stress components (pt_schnet_loss_norm). */
void pt_train_loss_norm(const pt_train_data *d, const pt_packs *packs, const uint32_t *ids,
                        uint32_t n, pt_schnet_loss_norm *out);

/* The loss of a window of steps from its sums (see pt_step_stats). */
double pt_step_stats_loss(const pt_step_stats *st, const pt_train_loss *loss);

/* Adds b's sums and counts to a's. */
void pt_step_stats_add(pt_step_stats *a, const pt_step_stats *b);

/* 1 when the step's loss terms are finite (the loop's divergence check). */
int pt_step_stats_finite(const pt_step_stats *st);

/* The built-in engine ("local"): R·A micro-batches of b packs, in order, on
 * the calling thread (R replicas are emulated by running them one after
 * another, which gives the same sum).  pt_train_run's default. */
int pt_grad_engine_open_local(pt_grad_engine *eng, const pt_train_data *data, pt_errors *errs);

/* One target's errors over a set of structures, in its units. */
typedef struct pt_head_errors {
    double mae, rmse;
} pt_head_errors;

typedef struct pt_train_metrics {
    const char *kind;         /* "step" or "epoch" */
    int64_t step;
    int32_t epoch;
    double loss, lr, graphs_per_s, nodes_per_s, padding_fraction, seconds;
    double train_loss, val_mae, val_rmse;   /* epoch lines only */
    /* forces jobs (printed when has_forces; stress fields when has_stress):
     * the loss's parts over the same steps as `loss` — energy MSE (eV², per
     * atom (eV/atom)²), force MSE per component ((eV/Å)²), stress MSE
     * ((eV/Å³)²) — and on epoch lines the validation's loss and errors */
    int has_forces, has_stress;
    /* multi-task jobs (n_heads > 1): each target's validation errors, epoch
     * lines, printed as "heads":{KEY:{"val_mae","val_rmse"},...} */
    int32_t n_heads;
    const char *head_key[PT_JOB_MAX_TARGETS];
    pt_head_errors val_head[PT_JOB_MAX_TARGETS];
    double loss_energy, loss_forces, loss_stress;
    double val_loss, val_forces_mae, val_forces_rmse, val_stress_mae, val_stress_rmse;
    int64_t total_steps;      /* planned steps of the run (for progress; not printed) */
    int has_phases;           /* phase fields printed (step lines) */
    pt_phase_times phases;    /* totals over phases.steps steps */
} pt_train_metrics;

/* Formats one metrics line as compact JSON (no newline; non-finite numbers
 * as null; phase fields when has_phases).  Returns the length, as snprintf. */
int pt_train_metrics_json(const pt_train_metrics *m, char *buf, size_t len);

typedef struct pt_train_checkpoint {
    const char *path;
    int64_t step;            /* optimizer steps done */
    int32_t epoch;           /* 1-based epoch of the last step, as in metrics lines */
    int final;               /* written as training ended (nothing left but the test) */
} pt_train_checkpoint;

typedef struct pt_train_options {
    void *user;
    /* every metrics line, as a struct and as its JSON text; may be NULL */
    void (*on_metrics)(void *user, const pt_train_metrics *m, const char *json);
    /* polled between optimizer steps; nonzero ends training early (the best
     * model so far is kept, and with an output directory a checkpoint of
     * the exact state is written to resume from); may be NULL */
    int (*should_stop)(void *user);
    /* gradient engine; NULL = pt_grad_engine_open_local.  pt_run_train
     * (engine/run/run.h) passes the backend of the job's backend.kind. */
    pt_grad_engine_open_fn engine_open;
    /* a checkpoint to continue from (NULL = a fresh run); it must have been
     * made with the same configuration (checkpoint_every aside) and data */
    const char *resume_path;
    /* after each checkpoint is durable; may be NULL */
    void (*on_checkpoint)(void *user, const pt_train_checkpoint *ck);
    /* nonzero: never delete older checkpoints.  The server's workers set it:
     * their scheduler deletes a checkpoint only once it has durably recorded
     * a newer one, so the one it would resume from always exists.  Zero (a
     * local run) keeps the newest PT_TRAIN_CHECKPOINTS_KEPT. */
    int keep_all_checkpoints;
} pt_train_options;

typedef struct pt_train_result {
    int64_t steps;
    int32_t epochs;             /* epochs completed */
    int32_t best_epoch;         /* epoch of the kept model */
    double best_val_loss, best_val_mae, best_val_rmse;
    double test_mae, test_rmse; /* of the kept model; NaN without a test part */
    pt_train_loss loss;         /* as resolved (plan.h) */
    /* forces jobs: the kept model's errors (eV/Å, eV/Å³), and the MAE of
     * predicting zero forces on the same atoms (the yardstick of learning) */
    double best_val_forces_mae, best_val_forces_rmse, best_val_stress_mae;
    double test_forces_mae, test_forces_rmse, test_forces_zero_mae;
    double test_stress_mae, test_stress_rmse;
    /* multi-task jobs (n_heads > 1): each target's errors of the kept model
     * on the validation and test parts (test NaN without one) */
    int32_t n_heads;
    char head_key[PT_JOB_MAX_TARGETS][PT_KEY_MAX];
    pt_head_errors val_head[PT_JOB_MAX_TARGETS], test_head[PT_JOB_MAX_TARGETS];
    double first_loss;          /* loss of the first logged window */
    double last_loss;           /* loss of the last epoch */
    const char *stop_reason;    /* "epochs", "max_steps", "early_stopping", "cancelled" */
    double seconds;
    uint32_t n_train, n_val, n_test;
    uint32_t split_moved;       /* structures swapped into training (pt_split_cover_elements) */
    pt_pack_limits limits;      /* per training pack */
    pt_train_layout layout;     /* as planned (plan.h): R, A, b, ranks, threads */
    int32_t micro_packs;        /* b */
    int64_t global_packs;       /* R·A·b */
    /* real content processed in training steps (for FLOP counts) */
    int64_t graphs, nodes, edges, node_slots, edge_slots;
    double step_seconds;        /* time inside optimizer steps */
    int64_t resumed_step;       /* step of the checkpoint resumed from; -1 = fresh run */
    char last_checkpoint[4200]; /* newest checkpoint written, "" if none */
} pt_train_result;

/* The result as a JSON object (new reference; NULL when out of memory):
 * {"steps","epochs","best_epoch","best_val_loss","best_val_mae","best_val_rmse",
 *  "test_mae","test_rmse","stop_reason","seconds","step_seconds","n_train","n_val",
 *  "n_test","split_moved","max_nodes","max_edges","max_graphs","micro_packs",
 *  "global_packs","replicas","accumulation","ranks","threads",
 *  "graphs","nodes","edges","node_slots","edge_slots","resumed_step",
 *  "loss":{"energy_weight","forces_weight","stress_weight","energy":"total"|"per_atom"}}
 * and for forces jobs "best_val_forces_mae","best_val_forces_rmse",
 * "test_forces_mae","test_forces_rmse","test_forces_zero_mae" (+ the stress
 * ones when stress is trained: "best_val_stress_mae","test_stress_mae",
 * "test_stress_rmse"), for multi-task jobs "heads":{KEY:{"best_val_mae",
 * "best_val_rmse","test_mae","test_rmse"},...} (the kept model's errors per
 * target); non-finite numbers null.
 * pt_train_run writes it to out_dir/result.json at the end of a run. */
json_t *pt_train_result_json(const pt_train_result *res);

/* Whether this CPU can train cfg: training.precision "bf16" needs
 * AVX512-BF16 (engine/model/bf16.h).  Elsewhere the portable path would give bf16
 * numbers through an fp32 sgemm plus rounding, all of bf16's error and none
 * of its speed, so such a job is refused: at submission (server/api/job_check.c),
 * by `packtrain train`, and again by pt_train_run (an MPI rank on another
 * host, a worker resumed on another CPU).  Returns 0, or -1 with
 * pt_bf16_cpu_explain's message at field training.precision. */
int pt_train_check_cpu(const pt_job_config *cfg, pt_errors *errs);

/* Trains per cfg on ds.  With out_dir (created if missing) writes
 * out_dir/model.safetensors (best by validation loss, rewritten on every
 * improvement), out_dir/metrics.jsonl and out_dir/result.json.  Returns 0, or -1 with errs filled
 * (unknown target, structures without it, packing limits too small, model
 * errors, I/O). */
int pt_train_run(const pt_job_config *cfg, const pt_dataset *ds, const char *out_dir,
                 const pt_train_options *opt, pt_train_result *res, pt_errors *errs);

#endif
