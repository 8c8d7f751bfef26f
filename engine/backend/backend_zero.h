/* backend_zero.h — ZeRO on the emulated IPUs (backend.zero_stage, backend.
 * offload_optimizer): what each replica holds and the collectives that
 * replace the replicated optimizer.  Internal to engine/backend (the engine
 * table's `update` and the MPI backend's calls go through backend.h).
 *
 * Shards: the flat parameter vector [0, n) is cut into R equal ranges, one
 * per data-parallel replica of the whole group (over MPI ranks, the group is
 * every rank's replicas: layout.shard_replicas, this process owning replicas
 * shard_first ..): shard s = [n·s/R, n·(s+1)/R).  Layers are the contiguous
 * ranges of schnet.h's layer events: embedding, each interaction block, head.
 *
 *   stage 0  every replica holds parameters, gradient stack and Adam state
 *            in full; all-reduce (the default).  With R > 1 replicas in
 *            one process (their parameters and Adam state are the host's
 *            own) each replica updates its shard in place, the same
 *            per-element arithmetic as the loop's serial update; else
 *            the training loop updates.
 *   stage 1  + Adam's m and v sharded: after the all-reduce each replica
 *            updates only its shard of the parameters (pt_optim_update), writes
 *            it to the host copy, then the parameters are all-gathered into
 *            every replica's own copy.
 *   stage 2  + gradients reduce-scattered instead of all-reduced, layer by
 *            layer as the backward produces them: a replica's backward writes
 *            a layer's gradient into a layer-sized buffer; once every replica
 *            has it, each sums the R buffers over its own shard's part (the
 *            all-reduce's pairwise tree) into its shard accumulation stack.
 *            No replica ever holds a full-size gradient.
 *   stage 3  + parameters sharded: a replica holds its shard and one
 *            layer-sized buffer; before a layer's forward and again before its
 *            backward it gathers the layer from the shards' owners, and the
 *            next gather overwrites (frees) it.
 *   offload  Adam's m and v stay in host (streaming) memory, the loop's
 *            pt_optim arrays; each step a replica streams its shard through a
 *            staging buffer of PT_ZERO_STAGE_FLOATS floats per moment, in and
 *            out, and the transfer is charged to the optimizer phase at
 *            PT_ZERO_LINK_GBPS (the stated link: 16 bytes per parameter of
 *            the shard per step).
 *
 * Numbers: every stage and split applies the same per-element Adam
 * arithmetic to the same gradient values, so
 *   - stage 1, stage 2/3 with one micro-batch per replica (A = 1), offload:
 *     the same bits as stage 0 (the reduction tree over replicas is the
 *     all-reduce's);
 *   - stage 2/3 with A > 1 reduce every micro-batch over the replicas first
 *     and then sum micro-batches, where stage 0 sums a replica's micro-batches
 *     first: equal within float32 reduction-order rounding;
 *   - clip_grad_norm: the norm is a sum of the shards' sums of squares (in
 *     double), so the clipping factor may differ in its last bit.
 * Over MPI the cross-rank part of stage 2/3's reduce-scatter is one
 * MPI_Reduce_scatter of the rank's locally reduced buffer (replica threads
 * make no MPI calls), see mpi_backend.h.
 *
 * The Adam moments live in the loop's pt_optim (its m and v arrays; replica
 * r touches only its shard), so a checkpoint holds them whole: it resumes
 * under any stage, offload or replica count (the stage and offload are part
 * of the configuration a checkpoint must match, so a changed layout is
 * refused by the configuration check, never silently re-sharded wrong). */
#ifndef PT_ZERO_H
#define PT_ZERO_H

#include <stddef.h>
#include <stdint.h>

#include "engine/backend/memplan.h"
#include "engine/core/errors.h"
#include "engine/train/optim.h"

/* Layers of a SchNet of T interactions (schnet.h's layer events). */
#define PT_ZERO_LAYERS(T) ((T) + 2)

typedef struct pt_backend pt_backend;
typedef struct pt_backend_replica pt_backend_replica;

/* What the replicas do when woken (backend_step.c dispatches). */
typedef enum pt_zero_task {
    PT_TASK_COMPUTE = 0,   /* one step's micro-batches and gradient reduction */
    PT_TASK_LOAD,          /* copy the host parameters into the replicas' own */
    PT_TASK_SUMSQ,         /* sum of squares of the replica's gradient shard */
    PT_TASK_UPDATE,        /* Adam on the shard, written to the host copy */
    PT_TASK_GATHER         /* all-gather of the parameters into the replicas' copies */
} pt_zero_task;

/* Reads the stage, offload and shard group from the job and layout (before
 * the replicas are made: stage 2-3 replicas need no full gradient stack). */
void pt_zero_configure(pt_backend *be);

/* Allocates what the stage needs (after the replicas exist): shards, the
 * replicas' own parameters, layer buffers, shard accumulation stacks, staging
 * buffers, the layer barrier.  Returns 0, or -1 with errs filled. */
int pt_zero_open(pt_backend *be, pt_errors *errs);
void pt_zero_close(pt_backend *be);

/* Sets the replica's layer hook and model view for its next compute. */
void pt_zero_replica_prepare(pt_backend_replica *rep);

/* Replica side of the tasks other than COMPUTE. */
void pt_zero_run_task(pt_backend_replica *rep, pt_zero_task task);

/* A replica whose micro-batch failed before its backward still joins every
 * layer's reduce-scatter (with zeros), or the others would wait forever. */
void pt_zero_backward_empty(pt_backend_replica *rep);

#endif
