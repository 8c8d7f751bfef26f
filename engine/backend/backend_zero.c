/* backend_zero.c — ZeRO stages 1-3 and optimizer offload on the emulated replicas:
 * shards, layer ranges, the per-layer gather and reduce-scatter run from
 * SchNet's layer hook, the sharded Adam update and the parameter all-gather
 * (what each stage holds and why the numbers match stage 0: backend_zero.h). */
#include "engine/backend/backend_zero.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend_internal.h"

/* ---- shards and layers ---------------------------------------------------- */

size_t pt_backend_shard_edge(size_t n, int64_t s, int64_t R)
{
    return (size_t)((unsigned __int128)n * (uint64_t)s / (uint64_t)R);
}

/* Layer L's range of the flat layout, from the master model's views. */
static void layer_ranges(pt_backend *be)
{
    const pt_schnet *m = be->d->model;
    const float *base = m->params_memory;
    const int T = m->cfg.interactions;
    be->n_layers = PT_ZERO_LAYERS(T);
    be->layer_off[0] = (size_t)(m->params.embedding - base);
    for (int t = 0; t < T; t++) be->layer_off[1 + t] = (size_t)(m->params.block[t].mlp0_w - base);
    be->layer_off[T + 1] = (size_t)(m->params.head[0].lin1_w - base);   /* every head */
    be->layer_off[T + 2] = m->n_params;
    be->max_layer = 0;
    for (int l = 0; l < be->n_layers; l++) {
        size_t len = be->layer_off[l + 1] - be->layer_off[l];
        if (len > be->max_layer) be->max_layer = len;
    }
}

/* Points layer L's tensors of *dst into buf, which holds the layer's range
 * [off, off + len) of the flat layout. */
static void view_layer(const pt_schnet *ref, int L, float *buf, size_t off, pt_schnet_params *dst)
{
    const float *base = ref->params_memory;
    const pt_schnet_params *p = &ref->params;
    const int T = ref->cfg.interactions;
#define REPOINT(f) dst->f = p->f ? buf + ((size_t)(p->f - base) - off) : NULL
    if (L == 0) {
        REPOINT(embedding);
    } else if (L <= T) {
        int t = L - 1;
        REPOINT(block[t].mlp0_w);
        REPOINT(block[t].mlp0_b);
        REPOINT(block[t].mlp2_w);
        REPOINT(block[t].mlp2_b);
        REPOINT(block[t].conv_lin1_w);
        REPOINT(block[t].conv_lin2_w);
        REPOINT(block[t].conv_lin2_b);
        REPOINT(block[t].lin_w);
        REPOINT(block[t].lin_b);
    } else {
        for (int k = 0; k < ref->n_heads; k++) {
            REPOINT(head[k].lin1_w);
            REPOINT(head[k].lin1_b);
            REPOINT(head[k].lin2_w);
            REPOINT(head[k].lin2_b);
            REPOINT(head[k].atomref);
        }
    }
#undef REPOINT
}

/* ---- the layer hook: stage 3's gathers, stage 2's reduce-scatter ----------- */

/* All-gather of layer L into the replica's layer buffer: each shard's part
 * from its owner (a replica of this process, or the host copy for shards of
 * other ranks, which the MPI backend all-gathered there after the update). */
static void gather_layer(pt_backend_replica *rep, int L)
{
    pt_backend *be = rep->be;
    const size_t off = be->layer_off[L], end = be->layer_off[L + 1];
    const float *master = be->d->model->params_memory;
    for (int32_t s = 0; s < be->group_R; s++) {
        size_t x0 = be->shard_lo[s] > off ? be->shard_lo[s] : off;
        size_t x1 = be->shard_lo[s + 1] < end ? be->shard_lo[s + 1] : end;
        if (x0 >= x1) continue;
        int32_t local = s - be->group_first;
        const float *src = local >= 0 && local < be->R
                               ? be->reps[local].shard + (x0 - be->shard_lo[s])
                               : master + x0;
        memcpy(rep->player + (x0 - off), src, (x1 - x0) * sizeof(float));
    }
    view_layer(be->d->model, L, rep->player, off, &rep->model.params);
}

/* Reduce-scatter of layer L's gradient: once every replica's layer buffer
 * is complete, each sums its shard's part over the R buffers (the
 * all-reduce's pairwise tree) into its accumulation entry; the second
 * barrier keeps the buffers until everyone has read them. */
static void reduce_layer(pt_backend_replica *rep, int L)
{
    pt_backend *be = rep->be;
    const size_t off = be->layer_off[L], end = be->layer_off[L + 1];
    pt_spin_barrier_wait(&be->zbar);
    size_t x0 = rep->lo > off ? rep->lo : off;
    size_t x1 = rep->hi < end ? rep->hi : end;
    if (x0 < x1) pt_allreduce_tree(be->R, be->bufs, x0 - off, rep->gtop + (x0 - rep->lo), x1 - x0);
    pt_spin_barrier_wait(&be->zbar);
}

static void layer_hook(void *user, pt_schnet_layer_event ev, int L, pt_schnet_params *grad)
{
    pt_backend_replica *rep = user;
    pt_backend *be = rep->be;
    const size_t off = be->layer_off[L], len = be->layer_off[L + 1] - off;
    switch (ev) {
    case PT_LAYER_FORWARD:
        if (be->stage == 3) gather_layer(rep, L);
        break;
    case PT_LAYER_BACKWARD:
        if (be->stage == 3) gather_layer(rep, L);
        if (be->grad_sharded) {
            memset(rep->glayer, 0, len * sizeof(float));
            view_layer(be->d->model, L, rep->glayer, off, grad);
        }
        break;
    case PT_LAYER_BACKWARD_DONE:
        if (be->grad_sharded) reduce_layer(rep, L);
        break;
    }
}

void pt_zero_backward_empty(pt_backend_replica *rep)
{
    pt_backend *be = rep->be;
    for (int L = be->n_layers - 1; L >= 0; L--) {
        memset(rep->glayer, 0, (be->layer_off[L + 1] - be->layer_off[L]) * sizeof(float));
        reduce_layer(rep, L);
    }
}

void pt_zero_replica_prepare(pt_backend_replica *rep)
{
    pt_backend *be = rep->be;
    rep->m = be->stage > 0 ? &rep->model : be->d->model;
    rep->acts.on_layer = be->stage == 3 || be->grad_sharded ? layer_hook : NULL;
    rep->acts.layer_user = rep;
}

/* ---- the update ------------------------------------------------------------- */

static float *grad_shard(pt_backend_replica *rep)
{
    return rep->be->grad_sharded ? rep->gacc : rep->be->grads_in + rep->lo;
}

static float *param_shard(pt_backend_replica *rep)
{
    pt_backend *be = rep->be;
    if (be->stage == 0) return be->d->model->params_memory + rep->lo;   /* shared */
    return be->stage == 3 ? rep->shard : rep->params + rep->lo;
}

/* Adam on the shard; with offload, m and v pass through the staging buffers
 * (streamed in, updated, streamed out). */
static void update_shard(pt_backend_replica *rep)
{
    pt_backend *be = rep->be;
    const size_t len = rep->hi - rep->lo;
    float *g = grad_shard(rep), *p = param_shard(rep);
    pt_optim *o = be->opt;
    if (be->clip_coef != 1.0f)
        for (size_t i = 0; i < len; i++) g[i] *= be->clip_coef;
    if (!be->offload) {
        pt_optim_update(o, &be->coeffs, p, g, o->m + rep->lo, o->v + rep->lo, rep->lo, len);
    } else {
        for (size_t c = 0; c < len; c += PT_ZERO_STAGE_FLOATS) {
            size_t k = len - c < PT_ZERO_STAGE_FLOATS ? len - c : PT_ZERO_STAGE_FLOATS;
            float *hm = o->m + rep->lo + c, *hv = o->v + rep->lo + c;
            memcpy(rep->stage_m, hm, k * sizeof(float));
            memcpy(rep->stage_v, hv, k * sizeof(float));
            pt_optim_update(o, &be->coeffs, p + c, g + c, rep->stage_m, rep->stage_v, rep->lo + c, k);
            memcpy(hm, rep->stage_m, k * sizeof(float));
            memcpy(hv, rep->stage_v, k * sizeof(float));
        }
    }
    /* the updated shard to the host copy (evaluation, checkpoints, gathers);
     * stage 0 updated the host copy in place */
    if (be->stage > 0) memcpy(be->d->model->params_memory + rep->lo, p, len * sizeof(float));
}

void pt_zero_run_task(pt_backend_replica *rep, pt_zero_task task)
{
    pt_backend *be = rep->be;
    const float *master = be->d->model->params_memory;
    const size_t n = be->n_params, len = rep->hi - rep->lo;
    switch (task) {
    case PT_TASK_COMPUTE:
        break;
    case PT_TASK_LOAD:
        if (be->stage == 3) memcpy(rep->shard, master + rep->lo, len * sizeof(float));
        else memcpy(rep->params, master, n * sizeof(float));
        break;
    case PT_TASK_SUMSQ:
        rep->sumsq = pt_grad_sumsq(grad_shard(rep), len);
        break;
    case PT_TASK_UPDATE:
        update_shard(rep);
        break;
    case PT_TASK_GATHER:
        /* stage 3 keeps its shard only: the layers are gathered when used */
        if (be->stage == 3) break;
        memcpy(rep->params, master, rep->lo * sizeof(float));
        memcpy(rep->params + rep->hi, master + rep->hi, (n - rep->hi) * sizeof(float));
        break;
    }
}

/* ---- open and close ------------------------------------------------------------ */

static void *alloc_floats(size_t n)
{
    size_t bytes = ((n ? n : 1) * sizeof(float) + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes);
}

void pt_zero_configure(pt_backend *be)
{
    const pt_train_layout *l = &be->d->layout;
    be->stage = be->d->cfg->backend.zero_stage;
    be->offload = be->stage > 0 && be->d->cfg->backend.offload_optimizer;
    be->group_R = l->shard_replicas > 0 ? l->shard_replicas : be->R;
    be->group_first = l->shard_replicas > 0 ? l->shard_first : 0;
    be->grad_sharded = be->stage >= 2 && be->group_R == be->R;
}

int pt_zero_open(pt_backend *be, pt_errors *errs)
{
    const size_t n = be->n_params;
    layer_ranges(be);
    be->shard_lo = malloc(((size_t)be->group_R + 1) * sizeof(size_t));
    if (!be->shard_lo) goto oom;
    for (int32_t s = 0; s <= be->group_R; s++) be->shard_lo[s] = pt_backend_shard_edge(n, s, be->group_R);
    for (int r = 0; r < be->R; r++) {
        pt_backend_replica *rep = &be->reps[r];
        rep->lo = be->shard_lo[be->group_first + r];
        rep->hi = be->shard_lo[be->group_first + r + 1];
        pt_zero_replica_prepare(rep);
    }
    if (be->stage == 0) return 0;
    if (pt_spin_barrier_init(&be->zbar, (uint32_t)be->R, errs)) return -1;
    be->zbar_ready = 1;
    for (int r = 0; r < be->R; r++) {
        pt_backend_replica *rep = &be->reps[r];
        const size_t len = rep->hi - rep->lo;
        /* the replica's model: the master's shape, its own parameter storage */
        rep->model = *be->d->model;
        rep->model.params_memory = NULL;
        memset(&rep->model.params, 0, sizeof rep->model.params);
        if (be->stage == 3) {
            if (!(rep->shard = alloc_floats(len)) || !(rep->player = alloc_floats(be->max_layer)))
                goto oom;
        } else {
            if (!(rep->params = alloc_floats(n))) goto oom;
            rep->model.params_memory = rep->params;
            pt_schnet_params_view(be->d->model, rep->params, &rep->model.params);
        }
        if (be->grad_sharded) {
            if (!(rep->glayer = alloc_floats(be->max_layer)) ||
                !(rep->gacc = alloc_floats((size_t)rep->levels * len)))
                goto oom;
            be->bufs[r] = rep->glayer;
        }
        if (be->offload && (!(rep->stage_m = alloc_floats(PT_ZERO_STAGE_FLOATS)) ||
                            !(rep->stage_v = alloc_floats(PT_ZERO_STAGE_FLOATS))))
            goto oom;
        pt_zero_replica_prepare(rep);
    }
    return 0;
oom:
    pt_errors_add(errs, "", 0, "backend", "out of memory for ZeRO stage %d buffers of %d replicas",
                  be->stage, be->R);
    return -1;
}

void pt_zero_close(pt_backend *be)
{
    for (int r = 0; be->reps && r < be->R; r++) {
        pt_backend_replica *rep = &be->reps[r];
        free(rep->params);
        free(rep->shard);
        free(rep->player);
        free(rep->glayer);
        free(rep->gacc);
        free(rep->stage_m);
        free(rep->stage_v);
    }
    if (be->zbar_ready) pt_spin_barrier_close(&be->zbar);
    be->zbar_ready = 0;
    free(be->shard_lo);
    be->shard_lo = NULL;
}

/* ---- the engine's update and its pieces (backend.h) ------------------------------ */

static pt_backend *zero_backend(const pt_grad_engine *eng)
{
    if (!eng || !eng->kind || strcmp(eng->kind, PT_BACKEND_KIND) != 0) return NULL;
    pt_backend *be = eng->self;
    return be->stage > 0 ? be : NULL;
}

double pt_backend_zero_sumsq(const pt_grad_engine *eng, float *grads)
{
    pt_backend *be = zero_backend(eng);
    if (!be) return 0.0;
    be->grads_in = grads;
    pt_backend_dispatch(be, PT_TASK_SUMSQ);
    double s = 0.0;
    for (int r = 0; r < be->R; r++) s += be->reps[r].sumsq;   /* replica order, every time */
    return s;
}

void pt_backend_zero_apply(const pt_grad_engine *eng, pt_optim *opt, float *grads, double lr,
                           float clip_coef)
{
    pt_backend *be = zero_backend(eng);
    if (!be) return;
    be->opt = opt;
    be->grads_in = grads;
    be->clip_coef = clip_coef;
    be->coeffs = pt_optim_begin(opt, lr);
    pt_backend_dispatch(be, PT_TASK_UPDATE);
    if (be->offload) {
        /* m and v of the largest shard, in and out, over the stated link */
        size_t most = 0;
        for (int r = 0; r < be->R; r++)
            if (be->reps[r].hi - be->reps[r].lo > most) most = be->reps[r].hi - be->reps[r].lo;
        double bytes = 16.0 * (double)most;
        double seconds = bytes / (PT_ZERO_LINK_GBPS * 1e9);
        be->phases.seconds[PT_PHASE_OPTIMIZER] += seconds;
        be->stats.offload_bytes += (int64_t)bytes * be->R;
        be->stats.offload_seconds += seconds;
    }
}

void pt_backend_zero_gather(const pt_grad_engine *eng)
{
    pt_backend *be = zero_backend(eng);
    if (!be) return;
    pt_backend_dispatch(be, PT_TASK_GATHER);
    be->params_fresh = 1;
}

/* The engine's update (train.h) on one process: the group is its replicas.
 * Stage 0 (R > 1): the replicas share the host's parameters and the loop's
 * m and v, so each updates its shard of them in place, the update split R
 * ways instead of run by the loop's thread alone while the replicas wait;
 * the clipping stays the loop's own serial pt_grad_clip, so the result has
 * the bits of the loop's pt_optim_step. */
int pt_backend_update(void *self, pt_optim *opt, float *grads, double lr, double clip,
                      pt_errors *errs)
{
    pt_backend *be = self;
    const double t0 = pt_phase_clock();
    if (be->applied) {
        /* the step's all-reduce applied it (pt_backend_arm_update): count it */
        be->applied = 0;
        if (opt != be->opt || grads != be->out) {   /* the loop's, armed for this step */
            pt_errors_add(errs, "", 0, "backend",
                          "update called with another optimizer or gradient buffer than the "
                          "step's, which applied it already");
            return -1;
        }
        opt->step++;
        be->stats.update_seconds += pt_phase_clock() - t0;
        return 0;
    }
    if (be->stage == 0) {
        if (clip > 0) pt_grad_clip(grads, be->n_params, clip);
        be->opt = opt;
        be->grads_in = grads;
        be->clip_coef = 1.0f;
        be->coeffs = pt_optim_begin(opt, lr);
        pt_backend_dispatch(be, PT_TASK_UPDATE);
        be->stats.update_seconds += pt_phase_clock() - t0;
        return 0;
    }
    pt_grad_engine eng = {.self = be, .kind = PT_BACKEND_KIND};
    float coef = 1.0f;
    if (clip > 0) coef = pt_grad_clip_coef(sqrt(pt_backend_zero_sumsq(&eng, grads)), clip);
    pt_backend_zero_apply(&eng, opt, grads, lr, coef);
    pt_backend_zero_gather(&eng);
    be->stats.update_seconds += pt_phase_clock() - t0;
    return 0;
}

/* ---- stage 0: the update inside the all-reduce -------------------------------------- */

/* Stage 0 keeps one copy of the parameters, m and v, which the split
 * update reads and writes by ranges: applied to each chunk a rank has just
 * reduced, the gradient goes from the replicas' buffers through L1 into
 * Adam — never stored to the loop's buffer and read back — and the step
 * needs no second dispatch of the replicas.  Clipping needs the whole
 * gradient's norm before any element moves: declined then. */
int pt_backend_arm_update(void *self, pt_optim *opt, double lr, double clip)
{
    pt_backend *be = self;
    be->armed = 0;
    if (be->stage != 0 || clip > 0) return 0;
    be->opt = opt;
    be->coeffs = pt_optim_coeffs_next(opt, lr);
    be->armed = 1;
    return 1;
}

/* After the all-reduce's opening barrier: every replica's statistics and
 * failure flag are final, and every rank takes the same decision from them
 * — the loop's divergence check on the sum compute returns, so a step the
 * loop rejects leaves the parameters and moments untouched. */
static int fused_open(void *arg, int rank)
{
    pt_backend *be = arg;
    pt_backend_replica *rep = &be->reps[rank];
    rep->fused = 0;
    if (!be->fuse) return 0;
    pt_step_stats st;
    memset(&st, 0, sizeof(st));
    for (int r = 0; r < be->R; r++) {
        if (be->reps[r].failed) return 0;
        pt_step_stats_add(&st, &be->reps[r].st);
    }
    rep->fused = pt_step_stats_finite(&st);
    return rep->fused;
}

/* Adam on elements [lo, hi), from the rank's chunk of the sum in L1. */
static void fused_chunk(void *arg, int rank, const float *sum, size_t lo, size_t hi)
{
    (void)rank;
    pt_backend *be = arg;
    pt_optim *o = be->opt;
    pt_optim_update(o, &be->coeffs, be->d->model->params_memory + lo, sum, o->m + lo, o->v + lo,
                    lo, hi - lo);
}

void pt_backend_fused_sink(pt_backend *be)
{
    be->sink = (pt_allreduce_sink){.open = fused_open, .chunk = fused_chunk, .arg = be};
    pt_allreduce_set_sink(&be->ar, &be->sink);
}
