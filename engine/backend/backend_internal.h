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

    /* dispatch: the host bumps `generation`, replicas run one step each */
    pthread_mutex_t mu;
    pthread_cond_t go, fin;
    uint64_t generation;
    int32_t finished;
    int stop;
    uint64_t step_base;        /* seq of job (replica 0, micro-batch 0) */
    double n_norm;             /* real graphs of the step */
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
};

/* backend_step.c */
void *pt_backend_replica_main(void *arg);
int pt_backend_fill_slot(void *user, int slot, pt_errors *errs);
int pt_backend_compute(void *self, const pt_packs *packs, const uint32_t *ids, uint32_t n,
                       double n_norm, float *grads, pt_step_stats *st, pt_errors *errs);

#endif
