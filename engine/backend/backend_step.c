/* backend_step.c — one optimizer step of the emulated IPU backend.
 *
 * Host side (the training loop's thread, in pt_backend_compute): check the
 * step's packs against the predicted stream, submit the jobs of the current
 * host call (D steps) plus prefetch to the loader, wake replica threads
 * 1..R-1, run replica 0 itself, wait for the others, merge their statistics.
 *
 * Replica side (replica 0 on the host, pt_backend_replica_main for the
 * others): for each of its A micro-batches,
 * take the filled batch from the loader, forward, loss, backward into a fresh
 * buffer of the pairwise accumulation stack; then the all-reduce writes the
 * step's gradient into the loop's buffer.
 *
 * Equations of the accumulation: with g_k the gradient of micro-batch k
 * (its means taken over the step's counts — real graphs n, and for a forces
 * job force and stress components — so Σ_k g_k = ∇ of the step's loss, e.g.
 * (1/n) Σ_g (y_g − t_g)² for an energy job), replica r holds the balanced
 * pairwise sum of its k in [r·A, (r+1)·A), and the all-reduce sums replicas
 * by the same tree. */
#include <cblas.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "engine/backend/backend_internal.h"
#include "engine/backend/cpu_spread.h"
#include "engine/model/bf16.h"

/* ---- jobs ------------------------------------------------------------------ */

/* Copies the graph lists of packs first..first+n (or ids[0..n) when ids is
 * given) of src into the slot. */
static int job_write(pt_backend *be, pt_backend_slot *js, const pt_packs *src,
                     const uint32_t *ids, uint32_t first, uint32_t n, pt_errors *errs)
{
    const uint32_t max_g = (uint32_t)be->d->limits.max_graphs;
    uint32_t used = 0;
    js->packs.graph_offset[0] = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t id = ids ? ids[i] : first + i;
        if (id >= src->n_packs) {
            pt_errors_add(errs, "", 0, "backend", "pack %u asked for, the epoch has %u packs", id,
                          src->n_packs);
            return -1;
        }
        uint32_t lo = src->graph_offset[id], cnt = src->graph_offset[id + 1] - lo;
        if (cnt > max_g) {
            pt_errors_add(errs, "", 0, "backend", "pack %u holds %u graphs, above max_graphs %u",
                          id, cnt, max_g);
            return -1;
        }
        memcpy(js->packs.graphs + used, src->graphs + lo, cnt * sizeof(uint32_t));
        used += cnt;
        js->packs.graph_offset[i + 1] = used;
    }
    js->packs.n_packs = n;
    js->n = n;
    return 0;
}

/* Whether the slot holds exactly packs first..first+n of src. */
static int job_matches(const pt_backend_slot *js, const pt_packs *src, uint32_t first, uint32_t n)
{
    if (js->n != n) return 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t lo = src->graph_offset[first + i], cnt = src->graph_offset[first + i + 1] - lo;
        uint32_t mlo = js->packs.graph_offset[i];
        if (js->packs.graph_offset[i + 1] - mlo != cnt) return 0;
        if (memcmp(js->packs.graphs + mlo, src->graphs + lo, cnt * sizeof(uint32_t))) return 0;
    }
    return 1;
}

/* Packs of job j of the stream (relative to its next step): [*first, +*n). */
static void stream_job(const pt_backend *be, uint64_t j, uint32_t *first, uint32_t *n)
{
    uint64_t step = j / be->RA, k = j % be->RA;
    uint64_t start = be->s_first + step * be->G + k * (uint64_t)be->b;
    uint64_t end = be->sp->n_packs;
    uint64_t step_end = be->s_first + (step + 1) * be->G;
    if (step_end < end) end = step_end;
    *first = (uint32_t)(start < end ? start : end);
    const uint64_t b = (uint64_t)be->b;
    *n = start < end ? (uint32_t)(end - start < b ? end - start : b) : 0;
}

int pt_backend_fill_slot(void *user, int slot, pt_errors *errs)
{
    pt_backend *be = user;
    pt_backend_slot *js = &be->slots[slot];
    return pt_train_fill(&js->batch, be->d, &js->packs, be->identity, js->n, errs);
}

/* Submits stream jobs until `want` are queued or the ring is full. */
static int stream_submit(pt_backend *be, uint64_t want, pt_errors *errs)
{
    if (want > be->s_total) want = be->s_total;
    while (be->s_jobs < want) {
        uint64_t seq;
        int s = pt_loader_next_slot(&be->ld, &seq);
        if (s < 0) break;
        uint32_t first, n;
        stream_job(be, be->s_jobs, &first, &n);
        if (job_write(be, &be->slots[s], be->sp, NULL, first, n, errs)) return -1;
        pt_loader_submit(&be->ld);
        be->s_jobs++;
    }
    return 0;
}

/* Decides where this step's jobs come from and queues them.  Returns the
 * number of them that were queued before this call (prefetched), or -1. */
static int64_t prepare_step(pt_backend *be, const pt_packs *packs, const uint32_t *ids,
                            uint32_t n, pt_errors *errs)
{
    int consecutive = n > 0;
    for (uint32_t i = 1; i < n && consecutive; i++) consecutive = ids[i] == ids[0] + i;
    int64_t ready = 0;
    /* a stream step holds G packs, or all that are left of the list */
    const uint32_t full = consecutive ? (packs->n_packs - ids[0] < be->G
                                             ? packs->n_packs - ids[0] : be->G) : 0;
    consecutive = consecutive && n == full;
    if (be->sp == packs && consecutive && ids[0] == be->s_first) {
        uint64_t have = be->s_jobs < be->RA ? be->s_jobs : be->RA;
        for (uint64_t j = 0; j < have && ready >= 0; j++) {
            uint32_t first, cnt;
            stream_job(be, j, &first, &cnt);
            const pt_backend_slot *js = &be->slots[(be->s_seq + j) % (uint64_t)be->n_slots];
            ready = job_matches(js, packs, first, cnt) ? ready + 1 : -1;
        }
    } else {
        ready = -1;
    }
    if (ready < 0) {
        /* no usable prediction: drop what was prefetched, start afresh */
        if (be->sp && be->s_jobs) {
            pt_loader_cancel(&be->ld);
            be->stats.mispredicted += (int64_t)be->s_jobs;
        }
        be->sp = NULL;
        be->s_jobs = 0;
        ready = 0;
        uint64_t seq;
        if (pt_loader_next_slot(&be->ld, &seq) < 0) {
            pt_errors_add(errs, "", 0, "backend", "no free batch buffer at the start of a step");
            return -1;
        }
        be->s_seq = seq;
        if (!consecutive) {
            /* explicit ids: this step only, nothing to predict */
            be->step_base = seq;
            for (uint32_t k = 0; k < be->RA; k++) {
                int s = pt_loader_next_slot(&be->ld, &seq);
                uint32_t lo = k * (uint32_t)be->b, cnt = 0;
                if (lo < n) cnt = n - lo < (uint32_t)be->b ? n - lo : (uint32_t)be->b;
                if (s < 0 || job_write(be, &be->slots[s], packs, ids + (lo < n ? lo : 0), 0, cnt,
                                       errs)) {
                    if (s < 0) pt_errors_add(errs, "", 0, "backend", "batch buffers exhausted");
                    return -1;
                }
                pt_loader_submit(&be->ld);
            }
            return 0;
        }
        be->sp = packs;
        be->s_first = ids[0];
        uint64_t steps = ((uint64_t)packs->n_packs - ids[0] + be->G - 1) / be->G;
        be->s_total = steps * be->RA;
    }
    be->step_base = be->s_seq;
    if (be->call_left == 0) be->call_left = be->D;
    uint64_t want = (uint64_t)be->call_left * be->RA + (uint64_t)be->R * (uint64_t)be->P;
    if (stream_submit(be, want, errs)) return -1;
    if (be->s_jobs < be->RA) {
        pt_errors_add(errs, "", 0, "backend", "only %llu of the step's %u batches could be queued",
                      (unsigned long long)be->s_jobs, be->RA);
        return -1;
    }
    return ready;
}

/* After the step: the stream moves on by one step. */
static void stream_advance(pt_backend *be)
{
    if (be->call_left > 0) be->call_left--;
    if (!be->sp) return;
    be->s_first = be->s_first + be->G < be->sp->n_packs ? be->s_first + be->G : be->sp->n_packs;
    be->s_seq += be->RA;
    be->s_jobs -= be->RA;
    be->s_total -= be->RA;
    if (be->s_total == 0) be->sp = NULL;
}

/* ---- replicas -------------------------------------------------------------- */

/* dst += src, src left zero for its next micro-batch (run_micro). */
static void vec_add_clear(float *restrict dst, float *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst[i] += src[i];
        src[i] = 0.0f;
    }
}

/* The merges replica_step's binary counter makes after the micro-batch it
 * is about to run (stack depth `depth`, leaves size[0..depth)), through the
 * end of the step: the step's last micro-batch does them layer by layer in
 * the layer hook instead, each element the same adds in the same order. */
static void plan_last_merges(pt_backend_replica *rep, const uint64_t *size_in, int depth)
{
    uint64_t size[33];
    memcpy(size, size_in, (size_t)depth * sizeof(uint64_t));
    int np = 0;
    size[depth++] = 1;
    while (depth >= 2 && size[depth - 1] == size[depth - 2]) {
        rep->plan[np++] = (int8_t)(depth - 2);
        size[depth - 2] *= 2;
        depth--;
    }
    for (; depth >= 2; depth--) rep->plan[np++] = (int8_t)(depth - 2);
    rep->n_plan = np;
}

/* Layer hook of the progressive all-reduce: when the last micro-batch's
 * backward has finished layer L (the layers finish from the top of the
 * flat layout down), its range goes through the planned merges into stack
 * level 0 and the replica's edge moves down to the layer's start. */
static void ready_hook(void *user, pt_schnet_layer_event ev, int L, pt_schnet_params *grad)
{
    (void)grad;
    pt_backend_replica *rep = user;
    if (ev != PT_LAYER_BACKWARD_DONE || !rep->last_micro) return;
    pt_backend *be = rep->be;
    const size_t n = be->n_params, off = be->layer_off[L], len = be->layer_off[L + 1] - off;
    for (int i = 0; i < rep->n_plan; i++) {
        const size_t d = (size_t)rep->plan[i];
        vec_add_clear(rep->stack + d * n + off, rep->stack + (d + 1) * n + off, len);
    }
    pt_allreduce_ready_publish(&be->ar, rep->rank, off);
}

/* One micro-batch: returns 0, or -1 with the error in rep->errs. */
static int run_micro(pt_backend_replica *rep, uint64_t seq, float *grad, pt_phase_timer *clk)
{
    pt_backend *be = rep->be;
    const pt_schnet *m = rep->m;
    int s = pt_loader_acquire(&be->ld, seq, &rep->errs);
    pt_phase_lap(clk, &rep->phases, PT_PHASE_IO);
    if (s < 0) {
        pt_loader_release(&be->ld, seq);
        return -1;
    }
    const pt_batch *b = &be->slots[s].batch;
    pt_train_micro_forward(be->d, m, &rep->acts, b, &be->norm, &rep->st);
    pt_phase_lap(clk, &rep->phases, PT_PHASE_FORWARD);
    /* grad is a zero level of the stack: the merges and the all-reduce
     * clear what they have read (replica_step); stage 2-3: NULL, the layer
     * hook reduce-scatters (backend_zero.c) */
    pt_train_micro_backward(be->d, m, &rep->acts, b, grad);
    pt_loader_release(&be->ld, seq);
    return 0;
}

static double thread_cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The replica's share of one step, up to its all-reduce. */
static void replica_step(pt_backend_replica *rep)
{
    pt_backend *be = rep->be;
    const size_t n = be->n_params;
    pt_phase_timer clk;
    pt_phase_timer_start(&clk);
    const double t0 = clk.last, cpu0 = thread_cpu_seconds();
    rep->lag = t0 - be->dispatched;
    memset(&rep->st, 0, sizeof(rep->st));
    pt_phase_times_clear(&rep->phases);
    pt_errors_clear(&rep->errs);
    rep->failed = 0;
    uint64_t size[32];            /* leaves under each stack entry */
    int depth = 0;
    /* stage 2-3: the stack holds the replica's shard only (backend_zero.h) */
    const int sharded = be->grad_sharded;
    float *stack = sharded ? rep->gacc : rep->stack;
    const size_t len = sharded ? rep->hi - rep->lo : n;
    pt_zero_replica_prepare(rep);
    if (be->progressive) {
        rep->acts.on_layer = ready_hook;
        rep->acts.layer_user = rep;
    }
    for (int a = 0; a < be->A; a++) {
        uint64_t seq = be->step_base + (uint64_t)rep->rank * (uint64_t)be->A + (uint64_t)a;
        float *top = stack + (size_t)depth * len;
        rep->gtop = top;
        const int last = be->progressive && a == be->A - 1;
        if (last) plan_last_merges(rep, size, depth);
        rep->last_micro = last;
        const int bad = run_micro(rep, seq, sharded ? NULL : top, &clk);
        rep->last_micro = 0;
        if (bad) {
            rep->failed = 1;
            if (sharded) pt_zero_backward_empty(rep);
            else memset(top, 0, n * sizeof(float));
        }
        size[depth++] = 1;
        /* the hook has merged every layer into level 0 (a failed run fired
         * no hook: merged below, published by the all-reduce's entry) */
        if (last && !bad) depth = 1;
        /* binary-counter merging keeps the sum a balanced pairwise tree */
        while (depth >= 2 && size[depth - 1] == size[depth - 2]) {
            vec_add_clear(stack + (size_t)(depth - 2) * len, stack + (size_t)(depth - 1) * len, len);
            size[depth - 2] *= 2;
            depth--;
        }
        pt_phase_lap(&clk, &rep->phases, PT_PHASE_BACKWARD);
    }
    for (; depth >= 2; depth--)
        vec_add_clear(stack + (size_t)(depth - 2) * len, stack + (size_t)(depth - 1) * len, len);
    pt_phase_lap(&clk, &rep->phases, PT_PHASE_BACKWARD);
    rep->busy = clk.last - t0;
    rep->busy_cpu = thread_cpu_seconds() - cpu0;
    if (sharded) return;   /* reduce-scattered layer by layer in the backward */
    /* every replica joins the collective, failed or not, or the others would wait forever */
    if (be->progressive) pt_allreduce_run_ready(&be->ar, rep->rank, be->bufs, be->out);
    else pt_allreduce_run(&be->ar, rep->rank, be->bufs, be->out);
    pt_phase_lap(&clk, &rep->phases, PT_PHASE_ALLREDUCE);
}

static void replica_run(pt_backend_replica *rep, pt_zero_task task)
{
    if (task == PT_TASK_COMPUTE) replica_step(rep);
    else pt_zero_run_task(rep, task);
}

typedef struct gen_wait {
    const pt_backend *be;
    uint64_t seen;
} gen_wait;

static int woken(const void *arg)
{
    const gen_wait *w = arg;
    return atomic_load_explicit(&w->be->stop, memory_order_acquire) ||
           atomic_load_explicit(&w->be->generation, memory_order_acquire) != w->seen;
}

static int all_finished(const void *arg)
{
    const pt_backend *be = arg;
    return atomic_load_explicit(&be->finished, memory_order_acquire) >= be->R - 1;
}

/* Replicas 1..R-1: wait for a generation (spinning first: the next
 * dispatch usually follows within microseconds), run its task, count in.
 * No batch fills here: the host's serial work between two dispatches
 * (tens of microseconds) is shorter than a fill, which would only delay
 * the next dispatch; the replicas fill while they wait for each other at
 * the all-reduce (backend.c). */
void *pt_backend_replica_main(void *arg)
{
    pt_backend_replica *rep = arg;
    pt_backend *be = rep->be;
    gen_wait w = {be, 0};
    for (;;) {
        if (!pt_spin_until(woken, &w)) {
            pthread_mutex_lock(&be->mu);
            while (!woken(&w)) pthread_cond_wait(&be->go, &be->mu);
            pthread_mutex_unlock(&be->mu);
        }
        if (atomic_load_explicit(&be->stop, memory_order_acquire)) break;
        w.seen = atomic_load_explicit(&be->generation, memory_order_acquire);
        /* woken onto the host's CPU, it would share that core with replica 0
         * until the load balancer noticed (cpu_spread.h) */
        pt_thread_leave_cpu(be->host_cpu);
        replica_run(rep, be->task);
        pthread_mutex_lock(&be->mu);
        if (atomic_fetch_add_explicit(&be->finished, 1, memory_order_acq_rel) + 1 == be->R - 1)
            pthread_cond_signal(&be->fin);
        pthread_mutex_unlock(&be->mu);
    }
    return NULL;
}

/* ---- host ------------------------------------------------------------------ */

void pt_backend_dispatch(pt_backend *be, pt_zero_task task)
{
    pthread_mutex_lock(&be->mu);
    be->task = task;
    be->host_cpu = sched_getcpu();
    atomic_store_explicit(&be->finished, 0, memory_order_relaxed);
    /* release: a spinning replica that sees the generation sees the task */
    atomic_fetch_add_explicit(&be->generation, 1, memory_order_release);
    pthread_cond_broadcast(&be->go);
    pthread_mutex_unlock(&be->mu);
    /* replica 0 is the host thread: one thread fewer to wake and to wait for */
    replica_run(&be->reps[0], task);
    be->host_ran = pt_phase_clock();
    if (pt_spin_until(all_finished, be)) return;
    pthread_mutex_lock(&be->mu);
    while (!all_finished(be)) pthread_cond_wait(&be->fin, &be->mu);
    pthread_mutex_unlock(&be->mu);
}

int pt_backend_compute(void *self, const pt_packs *packs, const uint32_t *ids, uint32_t n,
                       const pt_schnet_loss_norm *norm, float *grads, pt_step_stats *st,
                       pt_errors *errs)
{
    pt_backend *be = self;
    double t0 = pt_phase_clock();
    if (be->returned > 0.0) be->stats.host_gap_seconds += t0 - be->returned;
    memset(st, 0, sizeof(*st));
    /* an armed update is this step's only (pt_backend_arm_update) */
    const int armed = be->armed;
    be->armed = 0;
    be->applied = 0;
    if (n > be->G) {
        pt_errors_add(errs, "", 0, "backend", "a step of %u packs, above R x A x b = %u", n, be->G);
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (ids[i] >= packs->n_packs) {
            pt_errors_add(errs, "", 0, "backend", "pack %u asked for, the epoch has %u packs",
                          ids[i], packs->n_packs);
            return -1;
        }
    }
    int64_t ready = prepare_step(be, packs, ids, n, errs);
    if (ready < 0) return -1;
    /* both settings are process-wide: the step's, then the evaluation's again */
    int saved_threads = openblas_get_num_threads(), saved_bf16 = pt_bf16_get_threads();
    if (saved_threads != be->blas_threads) openblas_set_num_threads(be->blas_threads);
    pt_bf16_set_threads(be->blas_threads);

    /* ZeRO: the replicas' own parameters follow the host copy, which the
     * loop may have set since open (a resume) */
    if (be->stage > 0 && !be->params_fresh) {
        pt_backend_dispatch(be, PT_TASK_LOAD);
        be->params_fresh = 1;
    }
    if (norm) be->norm = *norm;
    else pt_train_loss_norm(be->d, packs, ids, n, &be->norm);
    be->out = grads;
    be->dispatched = pt_phase_clock();
    be->stats.host_prep_seconds += be->dispatched - t0;
    be->fuse = armed;
    /* nothing published yet (no replica runs: the dispatch publishes this) */
    if (be->progressive) pt_allreduce_ready_reset(&be->ar);
    pt_backend_dispatch(be, PT_TASK_COMPUTE);
    be->fuse = 0;
    /* every rank took the same decision (fused_open) */
    be->applied = armed && be->reps[0].fused;
    be->stats.fused_updates += be->applied;
    const double joined = pt_phase_clock();
    be->stats.host_join_seconds += joined - be->host_ran;

    if (saved_threads != be->blas_threads) openblas_set_num_threads(saved_threads);
    pt_bf16_set_threads(saved_bf16);
    stream_advance(be);
    int failed = 0;
    pt_phase_times step;
    pt_phase_times_clear(&step);
    double busy_max = 0.0, cpu_max = 0.0;
    for (int r = 0; r < be->R; r++) {
        const pt_backend_replica *rep = &be->reps[r];
        pt_step_stats_add(st, &rep->st);
        be->stats.busy_seconds += rep->busy;
        be->stats.busy_cpu_seconds += rep->busy_cpu;
        if (r > 0) be->stats.start_lag_seconds += rep->lag;
        busy_max = rep->busy > busy_max ? rep->busy : busy_max;
        cpu_max = rep->busy_cpu > cpu_max ? rep->busy_cpu : cpu_max;
        for (int p = 0; p < PT_PHASE_COUNT; p++) step.seconds[p] += rep->phases.seconds[p] / be->R;
        if (rep->failed && !failed) {
            failed = 1;
            for (size_t e = 0; e < rep->errs.kept; e++) {
                const pt_error *x = &rep->errs.items[e];
                pt_errors_add(errs, x->file, x->line, x->field, "%s", x->message);
            }
        }
    }
    be->stats.busy_max_seconds += busy_max;
    be->stats.busy_cpu_max_seconds += cpu_max;
    double replica_time = 0.0;
    for (int p = 0; p < PT_PHASE_COUNT; p++) replica_time += step.seconds[p];
    double other = pt_phase_clock() - t0 - replica_time;
    step.seconds[PT_PHASE_OTHER] += other > 0.0 ? other : 0.0;
    step.steps = 1;
    pt_phase_times_add(&be->phases, &step);
    be->stats.steps++;
    be->stats.jobs += be->RA;
    be->stats.queued_ahead += ready;
    be->returned = pt_phase_clock();
    be->stats.host_post_seconds += be->returned - joined;
    return failed ? -1 : 0;
}
