/* backend_internal.h — the state of the emulated IPU backend, shared by
 * backend.c (open, close, reports) and backend_step.c (one optimizer step:
 * job prediction and submission, dispatch, replica threads).  Not part of
 * the engine's API. */
#ifndef PT_BACKEND_INTERNAL_H
#define PT_BACKEND_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "engine/backend/allreduce.h"
#include "engine/backend/backend.h"
#include "engine/backend/loader.h"
#include "engine/backend/backend_zero.h"
#include "engine/backend/spinwait.h"
#include "engine/core/phase.h"
#include "engine/train/train_internal.h"

typedef struct pt_backend pt_backend;

/* One loader slot: the batch buffer and the job it holds — a copy of the
 * graph lists of its packs, so the loader never reads the loop's packs. */
typedef struct pt_backend_slot {
    pt_batch batch;
    int batch_ready;           /* batch was initialised (close frees it) */
    pt_packs packs;            /* [n] packs of this job, limits of the run */
    uint32_t n;
} pt_backend_slot;

typedef struct pt_backend_replica {
    pt_backend *be;
    int rank;
    pthread_t thread;
    int started;
    pt_schnet_acts acts;
    float *stack;              /* [levels × n_params] pairwise accumulation */
    int levels;
    /* ZeRO (backend_zero.h): the model this replica runs (d->model at stage 0, else
     * its own view), its shard [lo, hi) of the group's parameters, and per
     * stage its own parameters, layer buffers, shard gradient stack */
    const pt_schnet *m;
    pt_schnet model;
    size_t lo, hi;
    float *params;             /* stage 1-2: [n_params] */
    float *shard;              /* stage 3: [hi - lo] */
    float *player;             /* stage 3: [max_layer] the gathered layer */
    float *glayer;             /* stage 2-3: [max_layer] the layer's gradient */
    float *gacc;               /* stage 2-3: [levels × (hi - lo)] shard accumulation */
    float *gtop;               /* the stack entry this micro-batch reduces into */
    float *stage_m, *stage_v;  /* offload: [PT_ZERO_STAGE_FLOATS] each */
    double sumsq;
    int fused;                 /* this step's all-reduce applies the update (sink's open) */
    /* progressive all-reduce (backend_step.c): in the step's last micro-batch
     * the layer hook merges each finished layer through the stack by plan
     * (levels d += d + 1, in order) and publishes its edge */
    int last_micro;
    int n_plan;
    int8_t plan[64];
    double busy, busy_cpu, lag;   /* this step's compute (wall, thread CPU), start lag */
    /* this step's results, read by the host after the step */
    pt_step_stats st;
    pt_phase_times phases;
    pt_errors errs;
    int failed;
} pt_backend_replica;

struct pt_backend {
    const pt_train_data *d;
    int32_t R, A, D, P;        /* replicas, accumulation, device iterations, prefetch */
    int32_t b;                 /* packs per micro-batch */
    uint32_t G;                /* packs per step, R·A·b */
    uint32_t RA;               /* jobs per step */
    size_t n_params;
    int32_t blas_threads;      /* per replica, during steps */
    int32_t loader_threads;

    pt_backend_replica *reps;  /* [R] */
    float **bufs;              /* [R] each replica's summed gradient (stack level 0) */
    pt_allreduce ar;
    pt_loader ld;
    int ld_ready;
    pt_backend_slot *slots;    /* [n_slots] */
    int32_t n_slots;
    uint32_t *identity;        /* [b] 0..b-1: a slot's packs in order */

    /* dispatch: the host bumps `generation` and runs replica 0 itself;
     * replicas 1..R-1 (threads) run the task and count themselves in
     * `finished`.  Changed under mu; read without it by the spinning
     * waiters (spinwait.h). */
    pthread_mutex_t mu;
    pthread_cond_t go, fin;
    _Atomic uint64_t generation;
    int host_cpu;              /* the dispatching thread's CPU (published by generation) */
    _Atomic int32_t finished;
    _Atomic int stop;
    uint64_t step_base;        /* seq of job (replica 0, micro-batch 0) */
    double dispatched;         /* pt_phase_clock() of the step's dispatch */
    double returned;           /* pt_phase_clock() of the last compute()'s return, 0 before */
    double host_ran;           /* pt_phase_clock() when replica 0's part of a dispatch ended */
    pt_schnet_loss_norm norm;  /* the step's loss denominators */
    float *out;                /* gradient output of the step */

    /* prediction: a stream of consecutive packs of one list */
    const pt_packs *sp;        /* NULL = no stream */
    uint32_t s_first;          /* first pack of the next step of the stream */
    uint64_t s_seq;            /* seq of that step's first job */
    uint64_t s_jobs;           /* jobs of the stream submitted from s_seq on */
    uint64_t s_total;          /* jobs from s_seq to the end of the list */
    int32_t call_left;         /* steps left in the current host call */

    pt_phase_times phases;     /* window read by the engine's phases() */
    pt_backend_stats stats;

    /* ZeRO (backend_zero.h) */
    int32_t stage;
    int offload;
    int grad_sharded;          /* stage >= 2 and this process is the whole group */
    int32_t group_R, group_first;
    size_t *shard_lo;          /* [group_R + 1] */
    int32_t n_layers;
    size_t layer_off[PT_ZERO_LAYERS(PT_SCHNET_MAX_INTERACTIONS) + 1];
    size_t max_layer;
    pt_spin_barrier zbar;      /* the layer reduce-scatter's, and the update's */
    int zbar_ready;
    int params_fresh;          /* the replicas' parameters equal the host copy */
    pt_zero_task task;         /* what the next dispatch runs */
    pt_optim *opt;             /* UPDATE: the loop's optimizer (moments, decay) */
    pt_optim_coeffs coeffs;
    float clip_coef;
    float *grads_in;           /* stage 0-1 gradient (full, reduced) for UPDATE / SUMSQ */
    /* the update applied inside the all-reduce (arm_update, train.h): armed
     * by the loop for the next compute, fuse for the step in flight (read by
     * the replicas), applied from its end to the update call that counts it */
    int armed, fuse, applied;
    pt_allreduce_sink sink;
    /* stage 0, R > 1, merged layout, energy loss: each replica publishes its
     * gradient layer by layer in its last micro-batch, and the all-reduce
     * sums (and applies Adam to) what every replica has finished while the
     * slower ones compute (pt_allreduce_run_ready) */
    int progressive;
};

/* The engine's update (train.h) at stage >= 1 and the split stage 0, and
 * stage 0's arm_update with the all-reduce's sink that applies it:
 * backend_zero.c. */
int pt_backend_update(void *self, pt_optim *opt, float *grads, double lr, double clip,
                      pt_errors *errs);
int pt_backend_arm_update(void *self, pt_optim *opt, double lr, double clip);
void pt_backend_fused_sink(pt_backend *be);

/* Runs `task` on every replica: wakes replicas 1..R-1, runs replica 0 on
 * the calling thread, waits for the others (backend_step.c). */
void pt_backend_dispatch(pt_backend *be, pt_zero_task task);

/* backend_step.c */
void *pt_backend_replica_main(void *arg);
int pt_backend_fill_slot(void *user, int slot, pt_errors *errs);
int pt_backend_compute(void *self, const pt_packs *packs, const uint32_t *ids, uint32_t n,
                       const pt_schnet_loss_norm *norm, float *grads, pt_step_stats *st,
                       pt_errors *errs);

#endif
