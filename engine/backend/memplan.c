/* memplan.c — per-replica memory need and the device-memory check (see
 * memplan.h for what is counted and why). */
#include "engine/backend/memplan.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "engine/train/optim.h"
#include "engine/train/plan.h"

#define MB (1024.0 * 1024.0)

int32_t pt_backend_grad_buffers(int32_t accumulation)
{
    int32_t levels = 1;
    for (int32_t a = accumulation; a > 1; a /= 2) levels++;
    return levels;
}

int32_t pt_backend_io_batches(const pt_job_backend *backend, int32_t accumulation)
{
    int64_t n = (int64_t)accumulation * backend->device_iterations;
    if (backend->use_async_loader) n += backend->prefetch_depth;
    return n > INT32_MAX ? INT32_MAX : (int32_t)n;
}

/* The parameter layout of schnet.c, tensor by tensor in state_dict order. */
size_t pt_memplan_param_count(const pt_schnet_config *c)
{
    const size_t H = (size_t)c->hidden, F = (size_t)c->filters, G = (size_t)c->gaussians;
    const size_t H2 = H / 2, Z = PT_SCHNET_ZROWS;
    size_t block = F * G + F + F * F + F + F * H + H * F + H + H * H + H, heads = 0;
    if (c->n_heads == 0) heads = H2 * H + H2 + H2 + 1 + (c->use_atomref ? Z : 0);
    for (int k = 0; k < c->n_heads; k++)
        heads += H2 * H + H2 + H2 + 1 + (c->heads[k].use_atomref ? Z : 0);
    return Z * H + (size_t)c->interactions * block + heads;
}

size_t pt_memplan_max_layer(const pt_schnet_config *c)
{
    const size_t H = (size_t)c->hidden, F = (size_t)c->filters, G = (size_t)c->gaussians;
    const size_t H2 = H / 2, Z = PT_SCHNET_ZROWS;
    size_t embedding = Z * H;
    size_t block = F * G + F + F * F + F + F * H + H * F + H + H * H + H;
    size_t head = H2 * H + H2 + H2 + 1 + (c->use_atomref ? Z : 0);
    size_t m = embedding > head ? embedding : head;
    return c->interactions > 0 && block > m ? block : m;
}

/* The model's own sizing of its arena (the allocator's layout, one place). */
size_t pt_memplan_acts_bytes(const pt_schnet_config *c, int32_t cap_nodes, int32_t cap_edges,
                             int32_t cap_graphs, pt_schnet_mode mode)
{
    return pt_schnet_acts_bytes_mode(c, cap_nodes, cap_edges, cap_graphs, mode);
}

size_t pt_memplan_batch_bytes(pt_pack_limits limits, int32_t n_packs)
{
    const pt_batch *b = NULL;
    const size_t p = n_packs > 0 ? (size_t)n_packs : 0;
    const size_t N = p * (size_t)limits.max_nodes, B = p * (size_t)limits.max_graphs;
    /* train_batch.c allocates one edge slot when a batch has none */
    const size_t edges = p * (size_t)limits.max_edges, E = edges > 0 ? edges : 1;
    return N * (sizeof(*b->z) + sizeof(*b->node_graph) + 3 * sizeof(*b->node_force) +
                sizeof(*b->row_cursor)) +
           (N + 1) * sizeof(*b->dst_offset) +
           E * (sizeof(*b->edge_src) + sizeof(*b->edge_dst) + sizeof(*b->edge_dist) +
                3 * sizeof(*b->edge_vec) + sizeof(*b->edge_row) + sizeof(*b->edge_first) +
                sizeof(*b->row_last) + sizeof(*b->row_dist)) +
           B * (sizeof(*b->graph_id) + sizeof(*b->graph_natoms) + sizeof(*b->target) +
                sizeof(*b->graph_has_forces) + 9 * sizeof(*b->graph_stress) +
                sizeof(*b->graph_has_stress) + sizeof(*b->graph_volume));
}

size_t pt_memplan_label_bytes(const pt_schnet_config *model, pt_pack_limits limits,
                              int32_t n_packs)
{
    const size_t keys = model->n_heads > 0 ? (size_t)model->n_heads : 0;
    const size_t p = n_packs > 0 ? (size_t)n_packs : 0;
    int atom = 0;
    for (int k = 0; k < model->n_heads; k++) atom |= model->heads[k].level == PT_HEAD_ATOM;
    size_t bytes = keys * p * (size_t)limits.max_graphs * sizeof(double);     /* key_target */
    if (atom) bytes += keys * p * (size_t)limits.max_nodes * sizeof(double);  /* atom_target */
    return bytes;
}

size_t pt_memplan_eval_bytes(const pt_schnet_config *model, pt_pack_limits limits,
                             int32_t n_packs, pt_schnet_mode mode)
{
    const int32_t N = n_packs * limits.max_nodes, E = n_packs * limits.max_edges,
                  B = n_packs * limits.max_graphs;
    const size_t arena = mode == PT_SCHNET_FORCES_TRAIN
                             ? pt_schnet_acts_bytes_mode(model, N, E, B, PT_SCHNET_FORCES)
                             : pt_schnet_acts_bytes_forward(model, N, E, B);
    return arena + pt_memplan_batch_bytes(limits, n_packs) +
           pt_memplan_label_bytes(model, limits, n_packs);
}

pt_schnet_config pt_memplan_job_model(const pt_job_config *cfg, int forces)
{
    return pt_train_model_config(cfg, forces);
}

/* Fills every byte count of plan for micro-batches of b packs. */
static void plan_sizes(pt_memplan *plan, int32_t b)
{
    const pt_optim *o = NULL;
    const pt_pack_limits L = plan->limits;
    plan->micro_packs = b;
    plan->n_params = pt_memplan_param_count(&plan->model);
    const size_t n = plan->n_params, fs = sizeof(float);
    const int32_t R = plan->group > 0 ? plan->group : 1;
    plan->shard = (n + (size_t)R - 1) / (size_t)R;
    plan->max_layer = pt_memplan_max_layer(&plan->model);
    const size_t S = plan->zero_stage > 0 ? plan->shard : n, Lf = plan->max_layer;
    plan->params = (plan->zero_stage == 3 ? S + Lf : n) * fs;
    plan->grads = plan->grad_sharded ? (Lf + (size_t)plan->grad_buffers * S) * fs
                                     : (size_t)plan->grad_buffers * n * fs;
    plan->optimizer = S * (sizeof(*o->m) + sizeof(*o->v));
    plan->optimizer_host = 0;
    if (plan->offload) {
        plan->optimizer_host = plan->optimizer;
        plan->optimizer = 2 * PT_ZERO_STAGE_FLOATS * fs;
    }
    plan->activations = pt_memplan_acts_bytes(&plan->model, b * L.max_nodes, b * L.max_edges,
                                              b * L.max_graphs, plan->mode);
    plan->io = (size_t)plan->io_batches *
               (pt_memplan_batch_bytes(L, b) + pt_memplan_label_bytes(&plan->model, L, b));
    plan->eval = pt_memplan_eval_bytes(&plan->model, L, b, plan->mode);
    plan->total = plan->params + plan->grads + plan->optimizer + plan->activations + plan->io +
                  plan->eval;
}

int pt_memplan_compute(pt_memplan *plan, const pt_schnet_config *model, pt_pack_limits limits,
                       const pt_train_layout *layout, const pt_job_backend *backend,
                       pt_schnet_mode mode, pt_errors *errs)
{
    memset(plan, 0, sizeof(*plan));
    const int32_t micro_packs = layout->micro_packs;
    size_t before = errs->total;
    pt_schnet_config_check(model, errs);
    if (limits.max_nodes < 1 || limits.max_edges < 0 || limits.max_graphs < 1)
        pt_errors_add(errs, "", 0, "batching",
                      "pack limits must be resolved (max_nodes >= 1, max_edges >= 0, max_graphs "
                      ">= 1), got %d, %d, %d", limits.max_nodes, limits.max_edges,
                      limits.max_graphs);
    if (micro_packs < 1 || layout->accumulation < 1)
        pt_errors_add(errs, "", 0, "batching", "a micro-batch needs at least one pack and a "
                      "replica at least one micro-batch, got %d and %d", micro_packs,
                      layout->accumulation);
    if (errs->total != before) return -1;
    const int64_t caps[3] = {(int64_t)micro_packs * limits.max_nodes,
                             (int64_t)micro_packs * limits.max_edges,
                             (int64_t)micro_packs * limits.max_graphs};
    static const char *const what[3] = {"node", "edge", "graph"};
    for (int k = 0; k < 3; k++)
        if (caps[k] >= INT32_MAX)
            pt_errors_add(errs, "", 0, "batching.model_batch_size",
                          "%d packs give %lld %s slots per micro-batch, above the engine's "
                          "limit of %d", micro_packs, (long long)caps[k], what[k], INT32_MAX - 1);
    if (errs->total != before) return -1;
    plan->model = *model;
    plan->mode = mode;
    plan->limits = limits;
    plan->replicas = layout->replicas;
    plan->grad_buffers = pt_backend_grad_buffers(layout->accumulation);
    plan->io_batches = pt_backend_io_batches(backend, layout->accumulation);
    plan->device_memory_mb = backend->device_memory_mb;
    plan->budget = (size_t)backend->device_memory_mb * (size_t)MB;
    plan->group = layout->shard_replicas > 0 ? layout->shard_replicas : layout->replicas;
    /* one process is the whole group unless ranks share it (backend_zero.h) */
    plan->whole_group = layout->ranks <= 1 && plan->group == layout->replicas;
    plan->micro_packs = micro_packs;
    pt_memplan_restage(plan, backend->zero_stage, backend->offload_optimizer);
    return 0;
}

void pt_memplan_restage(pt_memplan *plan, int32_t stage, int32_t offload)
{
    plan->zero_stage = stage;
    plan->offload = stage > 0 && offload;
    plan->grad_sharded = stage >= 2 && plan->whole_group;
    plan_sizes(plan, plan->micro_packs);
}

int pt_memplan_for_job(pt_memplan *plan, const pt_job_config *cfg, const pt_train_layout *layout,
                       pt_pack_limits limits, int forces, pt_errors *errs)
{
    pt_schnet_config model = pt_memplan_job_model(cfg, forces);
    return pt_memplan_compute(plan, &model, limits, layout, &cfg->backend,
                              forces ? PT_SCHNET_FORCES_TRAIN : PT_SCHNET_ENERGY, errs);
}

/* The largest micro-batch (packs) whose plan fits, 0 if none: the need only
 * grows with the batch, so a binary search over [1, b) finds it. */
static int32_t largest_fitting_batch(const pt_memplan *plan)
{
    pt_memplan p = *plan;
    int32_t lo = 0, hi = plan->micro_packs;   /* lo fits (0 = none), hi does not */
    while (hi - lo > 1) {
        int32_t mid = lo + (hi - lo) / 2;
        plan_sizes(&p, mid);
        if (p.total <= p.budget) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* The lowest ZeRO setting above the plan's that fits: stages first, then
 * the same stages with offload.  Returns 0 and the setting, or -1. */
static int fitting_stage(const pt_memplan *plan, int32_t *stage, int32_t *offload)
{
    for (int32_t off = plan->offload; off <= 1; off++)
        for (int32_t s = off ? 1 : plan->zero_stage + 1; s <= 3; s++) {
            if (off == plan->offload && s <= plan->zero_stage) continue;
            pt_memplan p = *plan;
            pt_memplan_restage(&p, s, off);
            if (p.total <= p.budget) {
                *stage = s;
                *offload = off;
                return 0;
            }
        }
    return -1;
}

int pt_memplan_check(const pt_memplan *plan, pt_errors *errs)
{
    if (plan->total <= plan->budget) return 0;
    const char *field = "backend.device_memory_mb";
    double need = (double)plan->total / MB, over = (double)(plan->total - plan->budget) / MB;
    int32_t fit = largest_fitting_batch(plan);
    int32_t stage, offload;
    if (fitting_stage(plan, &stage, &offload) == 0) {
        pt_memplan p = *plan;
        pt_memplan_restage(&p, stage, offload);
        pt_errors_add(errs, "", 0, "backend.zero_stage",
                      "a replica needs %.1f MB, %.1f MB more than the %d MB of device memory at "
                      "ZeRO stage %d%s; backend.zero_stage %d%s would fit (%.1f MB per replica: "
                      "Adam state%s sharded over %d replicas)", need, over,
                      plan->device_memory_mb, plan->zero_stage,
                      plan->offload ? " with offload" : "", stage,
                      offload ? " with backend.offload_optimizer true" : "",
                      (double)p.total / MB,
                      stage >= 3 ? ", gradients and parameters" : stage == 2 ? " and gradients" : "",
                      plan->group);
    } else if (fit > 0)
        pt_errors_add(errs, "", 0, field,
                      "a replica needs %.1f MB, %.1f MB more than the %d MB of device memory; "
                      "lower batching.model_batch_size from %d to %d or less (activations, "
                      "I/O and evaluation scale with it), or max_nodes/max_edges, model.hidden/filters",
                      need, over, plan->device_memory_mb, plan->micro_packs, fit);
    else
        pt_errors_add(errs, "", 0, field,
                      "a replica needs %.1f MB, %.1f MB more than the %d MB of device memory, "
                      "and even 1 pack per micro-batch does not fit; lower batching.max_nodes/"
                      "max_edges or model.hidden/filters/gaussians/interactions",
                      need, over, plan->device_memory_mb);
    char tail[64] = "";
    if (plan->zero_stage > 0)
        snprintf(tail, sizeof tail, " (ZeRO stage %d%s)", plan->zero_stage,
                 plan->offload ? ", Adam state offloaded" : "");
    pt_errors_add(errs, "", 0, field,
                  "per replica: parameters %.1f MB, gradients %.1f MB, optimizer state %.1f MB, "
                  "activations %.1f MB (%s%d packs of %d nodes, %d edges), I/O buffers %.1f MB, "
                  "evaluation %.1f MB%s",
                  (double)plan->params / MB, (double)plan->grads / MB,
                  (double)plan->optimizer / MB, (double)plan->activations / MB,
                  plan->mode == PT_SCHNET_FORCES_TRAIN ? "training on forces, " : "",
                  plan->micro_packs, plan->limits.max_nodes, plan->limits.max_edges,
                  (double)plan->io / MB, (double)plan->eval / MB, tail);
    return -1;
}

json_t *pt_memplan_json(const pt_memplan *plan)
{
    json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:i, s:I, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, "
                     "s:I, s:b, s:b}",
                     "replicas", (int)plan->replicas, "micro_packs", (int)plan->micro_packs,
                     "max_nodes", (int)plan->limits.max_nodes, "max_edges",
                     (int)plan->limits.max_edges, "max_graphs", (int)plan->limits.max_graphs,
                     "n_params", (json_int_t)plan->n_params, "grad_buffers",
                     (int)plan->grad_buffers, "io_batches", (int)plan->io_batches,
                     "params_bytes", (json_int_t)plan->params, "grads_bytes",
                     (json_int_t)plan->grads, "optimizer_bytes", (json_int_t)plan->optimizer,
                     "activations_bytes", (json_int_t)plan->activations, "io_bytes",
                     (json_int_t)plan->io, "total_bytes", (json_int_t)plan->total,
                     "budget_bytes", (json_int_t)plan->budget, "fits",
                     plan->total <= plan->budget, "forces",
                     plan->mode == PT_SCHNET_FORCES_TRAIN);
    if (o && json_object_update_new(o, json_pack("{s:i, s:b, s:I, s:I, s:I}", "zero_stage",
                                                 (int)plan->zero_stage, "offload_optimizer",
                                                 (int)plan->offload, "shard_params",
                                                 (json_int_t)plan->shard, "optimizer_host_bytes",
                                                 (json_int_t)plan->optimizer_host, "eval_bytes",
                                                 (json_int_t)plan->eval)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}
