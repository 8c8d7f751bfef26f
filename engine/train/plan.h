/* plan.h — what a job configuration means on this machine, decided in one
 * place for the submission check, `packtrain train` and the workers.
 *
 * The layout: how the global batch of one optimizer step is computed.
 *
 *   global batch  G = R·A·b packs, the unit of an optimizer step (train.h)
 *   R  replicas   backend.replication_factor, counted over all ranks
 *   A             backend.gradient_accumulation: micro-batches per replica
 *   b             batching.model_batch_size: packs per micro-batch
 *   N  ranks      backend.ranks: processes (kind "mpi"), R/N replicas each
 *   threads       backend.threads: cores of each process ("auto": this
 *                 host's online cores)
 *
 * Gradient engines are opened with a layout (pt_train_data.layout), never
 * with a modified copy of the configuration: the MPI backend gives each
 * rank's emulated backend the layout {ranks 1, replicas R/N, ...}. */
#ifndef PT_PLAN_H
#define PT_PLAN_H

#include <stdint.h>

#include "engine/core/errors.h"
#include "engine/train/config.h"

typedef struct pt_train_layout {
    int32_t ranks;          /* N: processes computing each step (1 unless kind "mpi") */
    int32_t replicas;       /* R: replicas of all those processes together */
    int32_t accumulation;   /* A */
    int32_t micro_packs;    /* b */
    int32_t threads;        /* cores of each process, >= 1 */
} pt_train_layout;

/* Packs per optimizer step, R·A·b. */
int64_t pt_train_layout_global_packs(const pt_train_layout *l);

/* This host's online cores (at least 1). */
int pt_online_cores(void);

/* The layout of a valid cfg on this machine (cores: this host's, as
 * pt_online_cores gives them).  Returns 0, or -1 with errs filled. */
int pt_train_layout_resolve(pt_train_layout *l, const pt_job_config *cfg, int cores,
                            pt_errors *errs);

#endif
