/* backend.h — the emulated multi-IPU backend: a pt_grad_engine (train.h)
 * that runs a job the way PopTorch runs it on a Bow Pod.
 *
 * Room engine/backend: the emulated IPUs — replicas, loader, all-reduce, the
 * memory plan.  Uses engine/train (the pt_grad_engine contract, batches,
 * the layout) and below; knows no MPI, no CLI, no server.
 *
 *   replication_factor R   R replicas, each with its own activation arena
 *                          and gradient buffers (one IPU each): replica 0 on
 *                          the calling thread, 1..R-1 on threads of their own
 *   gradient_accumulation A  each replica accumulates A micro-batches of b
 *                          packs, as a pairwise tree, before the reduction
 *   device_iterations D    one host call hands the replicas the batches of
 *                          D optimizer steps: the loader is given D steps of
 *                          work at once (the optimizer itself stays in the
 *                          training loop, one update per step)
 *   merge_all_reduce       one collective over the merged flat gradient
 *                          buffer, or one per model tensor (ablation)
 *   use_async_loader, prefetch_depth
 *                          batches filled by a loader thread ahead of
 *                          compute, prefetch_depth micro-batches per replica
 *                          beyond the current host call; or inline, by the
 *                          replica that needs them (ablation)
 *   device_memory_mb       the static memory plan (memplan.h) must fit, or
 *                          opening the engine fails with the plan's message
 *   zero_stage, offload_optimizer
 *                          ZeRO: Adam state (1), + gradients (2), +
 *                          parameters (3) sharded over the replicas, Adam
 *                          state streamed from host memory (backend_zero.h);
 *                          at stage >= 1, and at stage 0 with R > 1
 *                          replicas in one process (each updates its
 *                          shard in place), the engine has an `update`
 *   threads                cores to use (0 = all): one OpenBLAS thread per
 *                          replica when R > 1 (OpenBLAS's thread count is
 *                          process-wide and its threaded GEMM serialises
 *                          concurrent callers), all of them when R = 1;
 *                          R above the core count time-shares correctly
 *
 * The global batch of R·A·b packs is split in order: replica r, micro-batch
 * a takes packs ids[(r·A + a)·b .. +b), so the sum over all micro-batches is
 * the gradient of the same packs whatever the split.  With R and A powers of
 * two, every split with the same b reduces as one balanced pairwise tree over
 * the R·A micro-batches, so the gradients agree bit for bit.
 *
 * Prefetch needs the next steps' packs before the loop asks for them.  The
 * backend predicts them: when a step's ids are consecutive pack indices
 * (the loop walks an epoch's shuffled packs in order), the next step is the
 * next G packs of the same list.  Jobs carry a copy of their packs' graph
 * lists, and a prediction is used only if the loop's next call asks for
 * exactly those graphs; otherwise it is dropped and the step loaded afresh,
 * so a wrong guess costs time, never correctness. */
#ifndef PT_BACKEND_H
#define PT_BACKEND_H

#include "engine/core/errors.h"
#include "engine/core/phase.h"
#include "engine/train/optim.h"
#include "engine/train/train.h"

/* pt_grad_engine_open_fn of the backend (kind PT_BACKEND_KIND): pass it as
 * pt_train_options.engine_open.  Its engine times its phases (replica
 * phases averaged over replicas; "other" is host dispatch; optimizer is 0 —
 * the loop times it) and normalises a step's loss by the caller's n_norm
 * when given, so a data-parallel caller computing a share of a larger
 * global batch gets the gradients one process would compute for the same
 * packs, bit for bit (mpi_backend.h).  Returns 0, or -1 with errs filled
 * (invalid backend settings, memory plan over device_memory_mb, out of
 * memory, thread creation). */
int pt_backend_open(pt_grad_engine *eng, const pt_train_data *data, pt_errors *errs);

#define PT_BACKEND_KIND "ipu-emulated"

/* What the backend did since it was opened, for tests and benchmarks. */
typedef struct pt_backend_stats {
    int64_t steps;
    int64_t jobs;            /* micro-batches computed */
    int64_t queued_ahead;    /* jobs queued before their step (prefetch window) */
    int64_t mispredicted;    /* predicted jobs dropped */
    int32_t blas_threads;    /* per replica during steps */
    int32_t loader_threads;  /* 0 = inline */
    int32_t slots;           /* batch buffers */
    int64_t replica_bytes;   /* allocated for the replica of the largest ZeRO shard (its
                              * device): activation arena,
                              * gradient buffers, ZeRO buffers, its share of the batch
                              * buffers; parameters and Adam state counted as memplan.h
                              * does (replica-held at stage 0 by the shared host copy):
                              * the plan's total less its evaluator (the loop's) */
    int64_t offload_bytes;   /* ZeRO offload: Adam state streamed, all replicas */
    double offload_seconds;  /* ... and the link time charged for it (backend_zero.h) */
    /* Where a step's two-core time goes (bench/bench_scaling.sh): each
     * replica's compute (loader waits, forward, backward, local
     * accumulation: from its start to its all-reduce), summed over replicas
     * and steps, and the slowest replica's per step, in wall-clock and in
     * the replica thread's CPU seconds (under load the wall clock also
     * counts preemption).  A replica waits at the all-reduce for
     * busy_max - its busy: the mean wait is busy_max - busy / R per step.
     * start_lag: from the host's dispatch to the start of replicas
     * 1..R-1 (waking them), summed. */
    double busy_seconds, busy_max_seconds;
    double busy_cpu_seconds, busy_cpu_max_seconds;
    double start_lag_seconds;
    /* The host thread's serial work around the replicas, summed over steps
     * (wall clock; the timeline bench prints): prep, from compute()'s entry
     * to the dispatch (prediction check, job submission, thread settings);
     * join, from replica 0's return (its all-reduce done) until replicas
     * 1..R-1 have counted in; post, from there to compute()'s return (stats
     * merge); gap, from one compute()'s return to the next one's entry (the
     * loop's serial work: loss check, the update, metrics), replicas idle;
     * update, the engine's update() calls within that gap. */
    double host_prep_seconds, host_join_seconds, host_post_seconds;
    double host_gap_seconds, update_seconds;
    /* batches filled by the loader's thread, by their consumer, by a
     * waiting replica (loader.h) */
    int64_t fills_thread, fills_consumer, fills_helper;
    /* updates the replicas applied inside the step's all-reduce (the
     * engine's arm_update, train.h); update_seconds then times only the
     * step count */
    int64_t fused_updates;
} pt_backend_stats;

/* Returns 0, or -1 (out cleared) when eng is not a backend engine. */
int pt_backend_stats_get(const pt_grad_engine *eng, pt_backend_stats *out);

/* Where shard s of R starts in a flat buffer of n floats: n·s/R (rounded
 * down).  Rank k of N owns the shards of its replicas, the block
 * [edge(k·R/N), edge((k+1)·R/N)). */
size_t pt_backend_shard_edge(size_t n, int64_t s, int64_t R);

/* ZeRO (backend.zero_stage >= 1, backend_zero.h).  The engine's `update` runs the
 * three pieces below for a group of this process's replicas; the MPI backend
 * runs them with its collectives in between (every function is a no-op, or
 * returns 0, for an engine that is not a backend at stage >= 1):
 *   sumsq   Σ g² over this process's replicas' shards of grads (the loop's
 *           gradient buffer; at stage 2-3 on one process, the replicas'
 *           reduce-scattered shards)
 *   apply   each replica: gradient shard × clip_coef, Adam on its shard of
 *           the parameters (opt: the loop's optimizer, its m and v read and
 *           written on the shard only), result written to the host copy
 *   gather  the host copy into every replica's own parameters (stage 1-2) */
double pt_backend_zero_sumsq(const pt_grad_engine *eng, float *grads);
void pt_backend_zero_apply(const pt_grad_engine *eng, pt_optim *opt, float *grads, double lr,
                           float clip_coef);
void pt_backend_zero_gather(const pt_grad_engine *eng);

#endif
