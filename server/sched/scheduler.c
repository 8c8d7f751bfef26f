/* scheduler.c — the scheduler's lifetime and its loop thread: requests from
 * other threads (notify, drain, stop) arrive through one uv_async, claims are
 * bounded by the slot count, and a drain waits until every worker is gone and
 * every write has landed.  Per-worker code is in scheduler_worker.c, database
 * work in scheduler_ops.c.
 *
 * Slot accounting: n_reserved counts workers (until their handles are
 * closed) plus claims in flight, so a poll never asks the store for more jobs
 * than there are free slots, even when notifications pile up. */
#include "server/sched/scheduler_internal.h"

#include "engine/core/errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ST_NEW = 0, ST_RUNNING, ST_DRAINED, ST_STOPPED };

void pt_sched_log(pt_scheduler *s, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (s->log) s->log(s->log_ctx, line);
    else fprintf(stderr, "packtrain scheduler: %s\n", line);
}

/* The scheduler's own message, for pt_scheduler_errmsg. */
#define fail(s, ...) pt_err_printf((s)->errmsg, sizeof((s)->errmsg), __VA_ARGS__)

const char *pt_scheduler_errmsg(const pt_scheduler *s)
{
    return s->errmsg;
}

/* ---- options ------------------------------------------------------------- */

static void free_config(pt_scheduler *s)
{
    free(s->db_path);
    free(s->data_dir);
    for (int i = 0; s->worker_argv && i < s->n_worker_argv; i++) free(s->worker_argv[i]);
    free(s->worker_argv);
    s->db_path = s->data_dir = NULL;
    s->worker_argv = NULL;
}

static int check_options(pt_scheduler *s, const pt_scheduler_options *o)
{
    if (!o) return fail(s, "scheduler options are missing");
    if (!o->db_path || !o->db_path[0]) return fail(s, "scheduler option db_path is empty");
    if (!o->data_dir || !o->data_dir[0]) return fail(s, "scheduler option data_dir is empty");
    if (strlen(o->data_dir) > PT_STORE_PATH_MAX - 128)
        return fail(s, "scheduler option data_dir is longer than %d bytes", PT_STORE_PATH_MAX - 128);
    if (o->slots < 1 || o->slots > PT_SCHEDULER_SLOTS_MAX)
        return fail(s, "scheduler option slots must be within 1..%d, got %d", PT_SCHEDULER_SLOTS_MAX, o->slots);
    if (!o->worker_argv || !o->worker_argv[0] || !o->worker_argv[0][0])
        return fail(s, "scheduler option worker_argv must name the worker program");
    int n = 0;
    while (o->worker_argv[n]) n++;
    if (n > PT_SCHEDULER_ARGV_MAX)
        return fail(s, "scheduler option worker_argv has %d words, at most %d allowed", n, PT_SCHEDULER_ARGV_MAX);
    if (!(o->max_runtime_s >= 0)) return fail(s, "scheduler option max_runtime_s must be >= 0");
    if (!(o->cancel_grace_s >= 0)) return fail(s, "scheduler option cancel_grace_s must be >= 0");
    if (o->max_attempts < 0) return fail(s, "scheduler option max_attempts must be >= 0 (0 = default)");
    if (o->poll_interval_ms < 0) return fail(s, "scheduler option poll_interval_ms must be >= 0 (0 = default)");
    if (o->checkpoints_kept && (o->checkpoints_kept < 2 || o->checkpoints_kept > PT_SCHEDULER_CHECKPOINTS_MAX))
        return fail(s, "scheduler option checkpoints_kept must be within 2..%d (0 = default), got %d",
                    PT_SCHEDULER_CHECKPOINTS_MAX, o->checkpoints_kept);
    return 0;
}

int pt_scheduler_init(pt_scheduler *s, const pt_scheduler_options *o)
{
    memset(s, 0, sizeof(*s));
    if (check_options(s, o)) return -1;
    int n = 0;
    while (o->worker_argv[n]) n++;
    s->db_path = strdup(o->db_path);
    s->data_dir = strdup(o->data_dir);
    s->worker_argv = calloc((size_t)n + 1, sizeof(char *));
    int ok = s->db_path && s->data_dir && s->worker_argv;
    for (int i = 0; ok && i < n; i++) {
        s->worker_argv[i] = strdup(o->worker_argv[i]);
        if (!s->worker_argv[i]) ok = 0;
        else s->n_worker_argv = i + 1;
    }
    if (!ok) {
        free_config(s);
        return fail(s, "out of memory copying the scheduler options");
    }
    s->slots = o->slots;
    s->max_runtime_s = o->max_runtime_s;
    s->grace_s = o->cancel_grace_s > 0 ? o->cancel_grace_s : PT_SCHEDULER_DEFAULT_GRACE_S;
    s->max_attempts = o->max_attempts > 0 ? o->max_attempts : PT_SCHEDULER_DEFAULT_MAX_ATTEMPTS;
    s->poll_ms = o->poll_interval_ms > 0 ? o->poll_interval_ms : PT_SCHEDULER_DEFAULT_POLL_MS;
    s->worker_memory_bytes = o->worker_memory_bytes;
    s->checkpoints_kept = o->checkpoints_kept ? o->checkpoints_kept : PT_SCHEDULER_CHECKPOINTS_KEPT;
    s->checkpoint_ok = o->checkpoint_ok;
    s->checkpoint_ctx = o->checkpoint_ctx;
    s->has_room = o->has_room;
    s->room_ctx = o->room_ctx;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    s->address_limit = pt_sched_address_limit(o->worker_memory_bytes, cores > 0 ? (int)cores : 1);
    s->on_change = o->on_change;
    s->change_ctx = o->change_ctx;
    s->log = o->log;
    s->log_ctx = o->log_ctx;
    s->stats.slots = o->slots;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    return 0;
}

/* ---- claiming ------------------------------------------------------------ */

void pt_sched_request_poll(pt_scheduler *s)
{
    if (s->draining || s->stopping) return;
    if (s->poll_in_flight) {
        s->poll_again = 1;
        return;
    }
    size_t n_ids = 0;
    for (pt_sched_job *j = s->jobs; j; j = j->next) n_ids++;
    char(*ids)[PT_STORE_ID_MAX] = calloc(n_ids + 1, sizeof(*ids));
    if (!ids) {
        pt_sched_log(s, "out of memory: cannot poll the store");
        return;
    }
    size_t i = 0;
    for (pt_sched_job *j = s->jobs; j; j = j->next) memcpy(ids[i++], j->launch.id, PT_STORE_ID_MAX);
    int claims = s->slots - s->n_reserved;
    if (claims < 0) claims = 0;
    if (claims == 0 && n_ids == 0) {
        free(ids);
        return;
    }
    s->n_reserved += claims;
    s->poll_in_flight = 1;
    pt_sched_submit_poll(s, claims, (const char(*)[PT_STORE_ID_MAX])ids, n_ids);
    free(ids);
}

static void check_drained(pt_scheduler *s);

void pt_sched_poll_done(pt_scheduler *s, int claims, const char (*ids)[PT_STORE_ID_MAX],
                        const pt_job_state *states, size_t n_ids, const pt_sched_launch *launches,
                        size_t n_launches)
{
    s->poll_in_flight = 0;
    /* Reserve every launch before spawning any: a spawn that fails at once
     * frees its slot and polls again, and must not see the others as free. */
    s->n_reserved -= claims;
    if (!s->draining) s->n_reserved += (int)n_launches;
    for (size_t i = 0; i < n_ids; i++) {
        if (states[i] != PT_JOB_CANCELLING) continue;
        pt_sched_job *j = pt_sched_job_find(s, ids[i]);
        if (j) pt_sched_job_stop(j, PT_SCHED_STOP_CANCEL, s->grace_s);
    }
    for (size_t i = 0; i < n_launches; i++) {
        if (s->draining) {
            pt_sched_log(s, "job %s: claimed while draining; left running for the next start", launches[i].id);
            continue;
        }
        pt_sched_job_spawn(s, &launches[i]);
    }
    if (s->poll_again) {
        s->poll_again = 0;
        pt_sched_request_poll(s);
    }
    check_drained(s);
}

void pt_sched_job_released(pt_scheduler *s)
{
    s->n_reserved--;
    pt_sched_request_poll(s);
    check_drained(s);
}

static void on_poll_timer(uv_timer_t *t)
{
    pt_sched_request_poll(t->data);
}

/* ---- drain and stop ------------------------------------------------------ */

static void drained(pt_scheduler *s)
{
    pthread_mutex_lock(&s->mu);
    if (s->state == ST_RUNNING) s->state = ST_DRAINED;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

/* Once no worker is left and no claim is in flight, a barrier op waits for
 * the writes queued before it; then the drain is complete. */
static void check_drained(pt_scheduler *s)
{
    if (!s->draining || s->drain_barrier || s->jobs || s->n_reserved > 0 || s->poll_in_flight) return;
    s->drain_barrier = 1;
    pt_sched_submit_barrier(s, drained);
}

static void begin_drain(pt_scheduler *s, double grace_s)
{
    if (s->draining) return;
    s->draining = 1;
    pthread_mutex_lock(&s->mu);
    s->stats.draining = 1;
    pthread_mutex_unlock(&s->mu);
    uv_timer_stop(&s->poll_timer);
    for (pt_sched_job *j = s->jobs; j; j = j->next) pt_sched_job_stop(j, PT_SCHED_STOP_DRAIN, grace_s);
    check_drained(s);
}

static void begin_stop(pt_scheduler *s)
{
    s->stopping = 1;
    uv_close((uv_handle_t *)&s->wake, NULL);
    uv_close((uv_handle_t *)&s->poll_timer, NULL);
    pt_store_writer_close(&s->writer);
}

static void on_wake(uv_async_t *h)
{
    pt_scheduler *s = h->data;
    pthread_mutex_lock(&s->mu);
    int notify = s->req_notify, drain = s->req_drain, stop = s->req_stop;
    double grace = s->req_grace_s;
    s->req_notify = s->req_drain = 0;
    pthread_mutex_unlock(&s->mu);
    if (stop) {
        if (!s->stopping) begin_stop(s);
        return;
    }
    if (drain) begin_drain(s, grace);
    if (notify) pt_sched_request_poll(s);
}

/* ---- public API ---------------------------------------------------------- */

static void *loop_main(void *arg)
{
    pt_scheduler *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);
    return NULL;
}

int pt_scheduler_start(pt_scheduler *s)
{
    if (s->state != ST_NEW || !s->db_path) return fail(s, "scheduler already started or not initialised");
    int rc = uv_loop_init(&s->loop);
    if (rc) return fail(s, "cannot create the scheduler loop: %s", uv_strerror(rc));
    uv_async_init(&s->loop, &s->wake, on_wake);
    s->wake.data = s;
    uv_timer_init(&s->loop, &s->poll_timer);
    s->poll_timer.data = s;
    char err[600];
    if (pt_store_writer_init(&s->writer, &s->loop, s->db_path, err, sizeof(err)) != 0) {
        fail(s, "%s", err);
    } else {
        uv_timer_start(&s->poll_timer, on_poll_timer, (uint64_t)s->poll_ms, (uint64_t)s->poll_ms);
        pt_sched_submit_recover(s);
        rc = pthread_create(&s->thread, NULL, loop_main, s);
        if (rc == 0) {
            s->state = ST_RUNNING;
            return 0;
        }
        fail(s, "cannot start the scheduler thread: %s", strerror(rc));
        s->stopping = 1;   /* the recover op's done must not claim anything */
        pt_store_writer_close(&s->writer);
    }
    uv_close((uv_handle_t *)&s->wake, NULL);
    uv_close((uv_handle_t *)&s->poll_timer, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    return -1;
}

void pt_scheduler_notify(pt_scheduler *s)
{
    /* Sent under the lock: the loop closes `wake` only after the state has
     * left ST_RUNNING, which also happens under the lock. */
    pthread_mutex_lock(&s->mu);
    if (s->state == ST_RUNNING) {
        s->req_notify = 1;
        uv_async_send(&s->wake);
    }
    pthread_mutex_unlock(&s->mu);
}

int pt_scheduler_drain(pt_scheduler *s, double grace_s)
{
    pthread_mutex_lock(&s->mu);
    if (s->state == ST_RUNNING) {
        s->req_drain = 1;
        s->req_grace_s = grace_s > 0 ? grace_s : 0;
        uv_async_send(&s->wake);
        while (s->state == ST_RUNNING) pthread_cond_wait(&s->cond, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void pt_scheduler_close(pt_scheduler *s)
{
    if (!s->db_path) return;   /* init failed or already closed */
    pthread_mutex_lock(&s->mu);
    int state = s->state;
    pthread_mutex_unlock(&s->mu);
    if (state == ST_RUNNING) pt_scheduler_drain(s, s->grace_s);
    if (state == ST_RUNNING || state == ST_DRAINED) {
        pthread_mutex_lock(&s->mu);
        s->req_stop = 1;
        pthread_mutex_unlock(&s->mu);
        uv_async_send(&s->wake);
        pthread_join(s->thread, NULL);
        uv_loop_close(&s->loop);
        s->state = ST_STOPPED;
    }
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
    free(s->unrecorded);   /* the next start re-queues their jobs */
    s->unrecorded = NULL;
    s->n_unrecorded = 0;
    free_config(s);
}

void pt_scheduler_stats_get(pt_scheduler *s, pt_scheduler_stats *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    pthread_mutex_unlock(&s->mu);
}
