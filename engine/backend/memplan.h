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
 *   activations  the model's activation arena for one micro-batch
 *   io           the batch buffers the host streams into (pt_backend_io_batches)
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

typedef struct pt_memplan {
    pt_schnet_config model;
    pt_pack_limits limits;     /* per pack */
    int32_t micro_packs;       /* b, packs per micro-batch */
    int32_t replicas;          /* R (the plan is per replica; R replicas = R devices) */
    int32_t grad_buffers;      /* gradient buffers per replica */
    int32_t io_batches;        /* batch buffers per replica */
    size_t n_params;
    /* bytes per replica */
    size_t params, grads, optimizer, activations, io, total;
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
/* Bytes of the activation arena for these capacities (pt_schnet_acts.bytes). */
size_t pt_memplan_acts_bytes(const pt_schnet_config *model, int32_t cap_nodes, int32_t cap_edges,
                             int32_t cap_graphs);
/* Bytes of the arrays of one pt_batch of n_packs packs. */
size_t pt_memplan_batch_bytes(pt_pack_limits limits, int32_t n_packs);

/* The plan for `model` with micro-batches of layout->micro_packs packs of
 * `limits`, layout->accumulation of them per replica, under the settings of
 * `backend` (device iterations, loader, memory).  Returns 0, or -1 with
 * errors (invalid model config, limits or batch size < 1, sizes that
 * overflow). */
int pt_memplan_compute(pt_memplan *plan, const pt_schnet_config *model, pt_pack_limits limits,
                       const pt_train_layout *layout, const pt_job_backend *backend,
                       pt_errors *errs);

/* The model of a job config as the trainer builds it (atomref table when
 * training.normalize is "atomref"). */
pt_schnet_config pt_memplan_job_model(const pt_job_config *cfg);

/* pt_memplan_compute for a job, with its planned layout.  The limits are the
 * resolved per-pack limits (auto values must have been resolved by packing;
 * zeros are rejected). */
int pt_memplan_for_job(pt_memplan *plan, const pt_job_config *cfg, const pt_train_layout *layout,
                       pt_pack_limits limits, pt_errors *errs);

/* 0 when the plan fits its budget; otherwise -1 and two errors (field
 * "backend.device_memory_mb"): the need, the excess and what to lower (with
 * the largest model_batch_size that would fit), then the breakdown. */
int pt_memplan_check(const pt_memplan *plan, pt_errors *errs);

/* {"replicas","micro_packs","max_nodes","max_edges","max_graphs","n_params",
 *  "grad_buffers","io_batches","params_bytes","grads_bytes","optimizer_bytes",
 *  "activations_bytes","io_bytes","total_bytes","budget_bytes","fits"}
 * (new reference, NULL when out of memory). */
json_t *pt_memplan_json(const pt_memplan *plan);

#endif
