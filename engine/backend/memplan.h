/* memplan.h — the static memory plan of one emulated IPU replica.
 *
 * An IPU program is compiled for fixed shapes and must fit the device's
 * on-chip memory (~900 MB on a Bow IPU), or compilation fails.  packtrain
 * reproduces that check before a job runs: from the model's hyper-parameters
 * and the fixed batch shape it computes what each replica holds —
 *
 *   parameters   one copy of the weights (n_params floats)
 *   gradients    the replica's accumulation buffers (pt_backend_grad_buffers)
 *   optimizer    Adam's two moments (replicated optimizer, as on IPUs)
 *   activations  the model's activation arena for one micro-batch: for a
 *                job training on forces the FORCES_TRAIN arena (the tangent
 *                and second-backward pairs, ≈ 2x an energy arena), sized by
 *                the model itself (pt_schnet_acts_bytes_mode)
 *   io           the batch buffers the host streams into (pt_backend_io_batches),
 *                with a multi-task job's per-structure and per-atom label
 *                arrays (pt_batch key_target, atom_target)
 *   eval         the evaluator a core keeps for validation and test
 *                (engine/train/train_eval.c: one per evaluating core, and a
 *                replica is a core in the "auto" layout): its arena —
 *                forward-only for an energy job (pt_schnet_acts_init_forward),
 *                the FORCES arena for a force job — and its batch, for b
 *                packs of the training packs' limits (validation and test
 *                packs are packed by the same method and limits rule; a
 *                part with larger "auto" limits would need more).  Water, 8
 *                packs: ~35 MB.
 *
 * — per ZeRO stage (engine/backend/backend_zero.h; S = the largest shard, n/R
 * rounded up over the R replicas of the whole group, L = the largest layer):
 *
 *            parameters   gradients                 optimizer (m, v)
 *   stage 0  n            levels·n                  2n
 *   stage 1  n            levels·n                  2S
 *   stage 2  n            L + levels·S              2S
 *   stage 3  S + L        L + levels·S              2S
 *   offload  (optimizer on the device: 2 staging buffers of
 *            PT_ZERO_STAGE_FLOATS; the 2S moments are in host memory,
 *            optimizer_host_bytes)
 *
 * (floats).  Stage 2-3 gradients are sharded only where this process is the
 * whole data-parallel group; over several MPI ranks a rank's replicas keep
 * stage 1's gradient stack (its cross-rank reduce-scatter runs on the
 * host: mpi_backend.h).
 *
 * — and rejects a job whose total exceeds backend.device_memory_mb (1 MB =
 * 2^20 bytes) with a message saying by how much and what to lower.  The byte
 * counts follow the allocators: the parameter and arena layouts of schnet.c
 * (test_memplan checks them against pt_schnet_init and pt_schnet_acts_init
 * for many shapes), the pt_batch arrays train_batch.c allocates, the moments
 * of optim.h, and the buffer counts the backend allocates (shared functions
 * below). */
#ifndef PT_MEMPLAN_H
#define PT_MEMPLAN_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "engine/pack/batch.h"
#include "engine/train/config.h"
#include "engine/train/plan.h"
#include "engine/core/errors.h"
#include "engine/model/schnet.h"

/* ZeRO offload (backend_zero.h): the stated link of the Adam state's
 * streaming, IPU streaming memory per IPU, and the staging buffer per moment
 * (m, v) an offloading replica keeps on the device, 1 MiB each. */
#define PT_ZERO_LINK_GBPS 20.0
#define PT_ZERO_STAGE_FLOATS ((size_t)1 << 18)

typedef struct pt_memplan {
    pt_schnet_config model;
    pt_schnet_mode mode;       /* the arena's: PT_SCHNET_ENERGY or, training on forces,
                                  PT_SCHNET_FORCES_TRAIN */
    pt_pack_limits limits;     /* per pack */
    int32_t micro_packs;       /* b, packs per micro-batch */
    int32_t replicas;          /* R (the plan is per replica; R replicas = R devices) */
    int32_t grad_buffers;      /* gradient buffers per replica */
    int32_t io_batches;        /* batch buffers per replica */
    int32_t zero_stage;        /* 0-3 (backend_zero.h) */
    int32_t offload;           /* Adam state in host memory */
    int32_t group;             /* replicas the shards are cut over */
    int32_t whole_group;       /* this process holds every replica of the group */
    int32_t grad_sharded;      /* stage 2-3 gradients sharded in this process */
    size_t n_params;
    size_t shard;              /* S: floats of the largest shard */
    size_t max_layer;          /* L: floats of the largest layer */
    size_t optimizer_host;     /* bytes of Adam state in host memory (offload) */
    /* bytes per replica */
    size_t params, grads, optimizer, activations, io, eval, total;
    size_t budget;             /* device_memory_mb in bytes */
    int32_t device_memory_mb;
} pt_memplan;

/* Gradient buffers a replica keeps for A accumulated micro-batches: the
 * pairwise accumulation stack of the backend, floor(log2 A) + 1. */
int32_t pt_backend_grad_buffers(int32_t accumulation);

/* Batch buffers per replica: the A·D micro-batches of one host call, plus
 * prefetch_depth more when the loader is asynchronous. */
int32_t pt_backend_io_batches(const pt_job_backend *backend, int32_t accumulation);

/* Floats in the model's flat parameter buffer (pt_schnet.n_params). */
size_t pt_memplan_param_count(const pt_schnet_config *model);
/* Bytes of the activation arena of `mode` for these capacities (pt_schnet_acts.bytes). */
size_t pt_memplan_acts_bytes(const pt_schnet_config *model, int32_t cap_nodes, int32_t cap_edges,
                             int32_t cap_graphs, pt_schnet_mode mode);
/* Bytes of the arrays of one pt_batch of n_packs packs (without the label
 * arrays of multi-task jobs: pt_memplan_label_bytes). */
size_t pt_memplan_batch_bytes(pt_pack_limits limits, int32_t n_packs);
/* Bytes of a batch's label arrays for `model`'s heads (pt_batch_set_keys_atom:
 * a job of several targets, or of an atom-level one): n_heads doubles per
 * graph slot, and per node slot when a head is atom-level; 0 for PyG's
 * single head. */
size_t pt_memplan_label_bytes(const pt_schnet_config *model, pt_pack_limits limits,
                              int32_t n_packs);
/* Bytes of one evaluator (train_engine.c pt_evaluator_init) for batches of
 * n_packs packs of `limits` in a job whose training arena is `mode`. */
size_t pt_memplan_eval_bytes(const pt_schnet_config *model, pt_pack_limits limits,
                             int32_t n_packs, pt_schnet_mode mode);

/* The plan for `model` with micro-batches of layout->micro_packs packs of
 * `limits`, layout->accumulation of them per replica, under the settings of
 * `backend` (device iterations, loader, memory), arenas of `mode`.  Returns
 * 0, or -1 with errors (invalid model config, limits or batch size < 1,
 * sizes that overflow). */
int pt_memplan_compute(pt_memplan *plan, const pt_schnet_config *model, pt_pack_limits limits,
                       const pt_train_layout *layout, const pt_job_backend *backend,
                       pt_schnet_mode mode, pt_errors *errs);

/* The model of a job config as the trainer builds it (atomref table when
 * training.normalize is "atomref"; forces: as pt_train_model_config). */
pt_schnet_config pt_memplan_job_model(const pt_job_config *cfg, int forces);

/* pt_memplan_compute for a job, with its planned layout.  The limits are the
 * resolved per-pack limits (auto values must have been resolved by packing;
 * zeros are rejected); `forces`: the job trains on forces (its plan's
 * loss.forces). */
int pt_memplan_for_job(pt_memplan *plan, const pt_job_config *cfg, const pt_train_layout *layout,
                       pt_pack_limits limits, int forces, pt_errors *errs);

/* Floats of the largest layer (backend_zero.h's layers: embedding, a block, head). */
size_t pt_memplan_max_layer(const pt_schnet_config *model);

/* The same plan under another ZeRO stage and offload setting. */
void pt_memplan_restage(pt_memplan *plan, int32_t stage, int32_t offload);

/* 0 when the plan fits its budget; otherwise -1 and two errors (field
 * "backend.device_memory_mb", or "backend.zero_stage" when a higher stage
 * would fit): the need, the excess and what to change (the lowest ZeRO
 * stage, then with offload, that fits; else the largest model_batch_size
 * that would fit), then the breakdown. */
int pt_memplan_check(const pt_memplan *plan, pt_errors *errs);

/* {"forces","replicas","micro_packs","max_nodes","max_edges","max_graphs","n_params",
 *  "grad_buffers","io_batches","params_bytes","grads_bytes","optimizer_bytes",
 *  "activations_bytes","io_bytes","total_bytes","budget_bytes","fits",
 *  "zero_stage","offload_optimizer","shard_params","optimizer_host_bytes","eval_bytes"}
 * (new reference, NULL when out of memory). */
json_t *pt_memplan_json(const pt_memplan *plan);

#endif
