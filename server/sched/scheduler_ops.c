/* scheduler_ops.c — the scheduler's database work, run in order on the store
 * writer thread: restart recovery, recording a worker's pid and metrics, and
 * deciding a job's fate when its worker exits (claiming and preparing a job
 * is scheduler_claim.c). */
#include "server/sched/scheduler_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CRASH_PREFIX "worker crashed"
#define DISK_FULL_PREFIX "the server's disk is full"
#define UNRECORDED_MAX 256   /* ends kept for a later record; past it, the next start re-queues */

void pt_sched_announce(pt_scheduler *s, pt_store *st, const char *id)
{
    if (!s->on_change) return;
    int64_t version = 0;
    pt_job_state state;
    if (pt_store_job_version(st, NULL, id, &version, &state) == PT_STORE_OK)
        s->on_change(s->change_ctx, id, version);
}

int pt_sched_transition(pt_scheduler *s, pt_store *st, const char *id, pt_job_state to,
                        const char *reason)
{
    int rc = pt_store_job_transition(st, NULL, id, to, reason, NULL);
    if (rc) pt_sched_log(s, "job %s: cannot record %s (%s): %s", id, pt_job_state_name(to), reason,
                         pt_store_errmsg(st));
    else pt_sched_log(s, "job %s: %s: %s", id, pt_job_state_name(to), reason);
    pt_sched_announce(s, st, id);
    return rc;
}

/* ---- restart recovery ---------------------------------------------------- */

typedef struct recover_op {
    pt_store_op op;
    pt_scheduler *sched;
} recover_op;

/* A worker of the previous server may still run (the server was killed, not
 * drained).  Kill it, but only when /proc shows it really is that job's
 * worker: the pid may since have been reused by something else. */
static void kill_stale_worker(pt_scheduler *s, const pt_store_job *job)
{
    if (job->worker_pid <= 0) return;
    char path[64], cmd[4096];
    snprintf(path, sizeof(path), "/proc/%lld/cmdline", (long long)job->worker_pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = read(fd, cmd, sizeof(cmd) - 1);
    close(fd);
    if (n <= 0) return;
    for (ssize_t i = 0; i + 1 < n; i++) {
        if (strcmp(cmd + i, "--job") != 0 || (size_t)(i + 6) >= (size_t)n) continue;
        if (strcmp(cmd + i + 6, job->id) != 0) continue;
        pid_t pid = (pid_t)job->worker_pid;
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        pt_sched_log(s, "job %s: killed the previous server's worker pid %d", job->id, (int)pid);
        return;
    }
}

static void recover_work(pt_store *st, pt_store_op *op)
{
    recover_op *r = (recover_op *)op;
    pt_store_job_array jobs;
    if (pt_store_job_list_unfinished(st, &jobs) != PT_STORE_OK) {
        pt_sched_log(r->sched, "cannot list the jobs left unfinished: %s", pt_store_errmsg(st));
        return;
    }
    for (size_t i = 0; i < jobs.n; i++) {
        const pt_store_job *job = &jobs.items[i];
        kill_stale_worker(r->sched, job);
        char reason[PT_STORE_REASON_MAX];
        if (job->state == PT_JOB_CANCELLING) {
            pt_sched_transition(r->sched, st, job->id, PT_JOB_STOPPED, "server restarted while the job was cancelling");
            continue;
        }
        pt_store_checkpoint ck;
        if (pt_store_checkpoint_latest(st, NULL, job->id, &ck) == PT_STORE_OK)
            snprintf(reason, sizeof(reason), "server restarted; resuming from checkpoint step %lld",
                     (long long)ck.step);
        else
            snprintf(reason, sizeof(reason), "server restarted; no checkpoint yet, starting over");
        pt_sched_transition(r->sched, st, job->id, PT_JOB_QUEUED, reason);
    }
    pt_store_job_array_clear(&jobs);
}

static void recover_done(pt_store_op *op)
{
    recover_op *r = (recover_op *)op;
    pt_sched_request_poll(r->sched);
    free(r);
}

void pt_sched_submit_recover(pt_scheduler *s)
{
    recover_op *r = calloc(1, sizeof(*r));
    if (!r) {
        pt_sched_log(s, "out of memory: restart recovery skipped");
        return;
    }
    r->op.work = recover_work;
    r->op.done = recover_done;
    r->sched = s;
    pt_store_writer_submit(&s->writer, &r->op);
}

/* ---- worker bookkeeping -------------------------------------------------- */

typedef struct worker_op {
    pt_store_op op;
    pt_scheduler *sched;
    char id[PT_STORE_ID_MAX];
    int64_t pid;
} worker_op;

static void worker_work(pt_store *st, pt_store_op *op)
{
    worker_op *w = (worker_op *)op;
    if (pt_store_job_set_worker(st, w->id, w->pid) != PT_STORE_OK)
        pt_sched_log(w->sched, "job %s: cannot record worker pid %lld: %s", w->id, (long long)w->pid,
                     pt_store_errmsg(st));
}

static void free_op(pt_store_op *op)
{
    free(op);
}

void pt_sched_submit_set_worker(pt_scheduler *s, const char *id, int64_t pid)
{
    worker_op *w = calloc(1, sizeof(*w));
    if (!w) return;   /* the pid is informational (restart cleanup); losing it is harmless */
    w->op.work = worker_work;
    w->op.done = free_op;
    w->sched = s;
    snprintf(w->id, sizeof(w->id), "%s", id);
    w->pid = pid;
    pt_store_writer_submit(&s->writer, &w->op);
}

typedef struct record_op {
    pt_store_op op;
    pt_scheduler *sched;
    char id[PT_STORE_ID_MAX];
    pt_store_step_metric *steps;
    size_t n_steps;
    int has_progress, has_epoch, has_checkpoint;
    pt_store_progress progress;
    pt_store_epoch_metric epoch;
    int64_t ck_step, ck_epoch;
    char ck_path[PT_STORE_PATH_MAX];
    char *result_json;           /* a done line's result, or NULL */
} record_op;

/* Records the newest checkpoint, then deletes those older than the
 * checkpoints_kept newest: only after the new record is durable (FULL sync),
 * so whatever the moment of a crash, the checkpoints the store names for a
 * resume are on disk, and one damaged file still leaves an older one to
 * resume from (choose_resume).  The worker deletes none itself, however far
 * the store lags behind it. */
static void record_checkpoint(pt_scheduler *s, pt_store *st, const record_op *r)
{
    if (pt_store_checkpoint_record(st, r->id, r->ck_step, r->ck_epoch, r->ck_path) != PT_STORE_OK) {
        pt_sched_log(s, "job %s: cannot record checkpoint of step %lld: %s", r->id, (long long)r->ck_step,
                     pt_store_errmsg(st));
        return;
    }
    /* the newest kept, then a few more: those beyond were deleted earlier */
    pt_store_checkpoint recent[PT_SCHEDULER_CHECKPOINTS_MAX + 4];
    size_t n = 0;
    if (pt_store_checkpoint_recent(st, NULL, r->id, recent, (size_t)s->checkpoints_kept + 4, &n) != PT_STORE_OK)
        return;
    for (size_t i = (size_t)s->checkpoints_kept; i < n; i++) {
        int kept = 0;   /* a path re-recorded at another step is still in use */
        for (size_t k = 0; k < (size_t)s->checkpoints_kept && k < n; k++) kept |= !strcmp(recent[k].path, recent[i].path);
        if (!kept && unlink(recent[i].path) != 0 && errno != ENOENT)
            pt_sched_log(s, "job %s: cannot delete superseded checkpoint %s: %s", r->id, recent[i].path,
                         strerror(errno));
    }
}

static void record_work(pt_store *st, pt_store_op *op)
{
    record_op *r = (record_op *)op;
    pt_scheduler *s = r->sched;
    if (r->n_steps && pt_store_steps_append(st, r->id, r->steps, r->n_steps, NULL) != PT_STORE_OK)
        pt_sched_log(s, "job %s: cannot record %zu step metrics: %s", r->id, r->n_steps, pt_store_errmsg(st));
    if (r->has_epoch && pt_store_epoch_append(st, r->id, &r->epoch, NULL) != PT_STORE_OK)
        pt_sched_log(s, "job %s: cannot record epoch %lld: %s", r->id, (long long)r->epoch.epoch,
                     pt_store_errmsg(st));
    if (r->has_checkpoint) record_checkpoint(s, st, r);
    if (r->has_progress && pt_store_job_update_progress(st, r->id, &r->progress) != PT_STORE_OK)
        pt_sched_log(s, "job %s: cannot record progress: %s", r->id, pt_store_errmsg(st));
    if (r->result_json && pt_store_job_set_result(st, r->id, r->result_json) != PT_STORE_OK)
        pt_sched_log(s, "job %s: cannot record its result: %s", r->id, pt_store_errmsg(st));
    pt_sched_announce(s, st, r->id);
}

static void record_done(pt_store_op *op)
{
    record_op *r = (record_op *)op;
    for (size_t i = 0; i < r->n_steps; i++) free(r->steps[i].json);
    free(r->steps);
    free(r->epoch.json);
    free(r->result_json);
    free(r);
}

void pt_sched_submit_record(pt_scheduler *s, const char *id, pt_store_step_metric *steps, size_t n_steps,
                            const pt_store_progress *progress, pt_store_epoch_metric *epoch,
                            const pt_worker_msg *checkpoint, const char *out_dir, char *result_json)
{
    record_op *r = calloc(1, sizeof(*r));
    if (!r) {
        pt_sched_log(s, "job %s: out of memory: %zu step metrics lost", id, n_steps);
        for (size_t i = 0; i < n_steps; i++) free(steps[i].json);
        free(steps);
        if (epoch) free(epoch->json);
        free(result_json);
        return;
    }
    r->result_json = result_json;
    r->op.work = record_work;
    r->op.done = record_done;
    r->sched = s;
    snprintf(r->id, sizeof(r->id), "%s", id);
    r->steps = steps;
    r->n_steps = n_steps;
    if (progress) {
        r->has_progress = 1;
        r->progress = *progress;
    }
    if (epoch) {
        r->has_epoch = 1;
        r->epoch = *epoch;
    }
    if (checkpoint) {
        r->has_checkpoint = 1;
        r->ck_step = checkpoint->step;
        r->ck_epoch = checkpoint->epoch;
        /* A relative path is relative to the job directory, the worker's --out. */
        if (checkpoint->path[0] == '/')
            snprintf(r->ck_path, sizeof(r->ck_path), "%s", checkpoint->path);
        else if ((size_t)snprintf(r->ck_path, sizeof(r->ck_path), "%s/%s", out_dir, checkpoint->path) >=
                 sizeof(r->ck_path))
            r->has_checkpoint = 0;
    }
    pt_store_writer_submit(&s->writer, &r->op);
}

/* ---- a worker's end ------------------------------------------------------ */

typedef struct finish_op {
    pt_store_op op;
    pt_scheduler *sched;
    pt_sched_exit e;
} finish_op;

/* Re-queues so far for one cause (the reason's prefix), from the transition
 * history (it survives restarts). */
static int count_ends(pt_store *st, const char *id, const char *prefix)
{
    pt_store_transition_list list;
    if (pt_store_job_transitions(st, NULL, id, &list) != PT_STORE_OK) return 0;
    int n = 0;
    for (size_t i = 0; i < list.n; i++)
        if (list.items[i].to == PT_JOB_QUEUED && !strncmp(list.items[i].reason, prefix, strlen(prefix)))
            n++;
    pt_store_transition_list_clear(&list);
    return n;
}

/* Whether the worker's error is a full disk (its checkpoint, model or log
 * found no space): not the job's fault, and resumable once there is room. */
static int disk_full(const pt_sched_exit *e)
{
    return e->saw_error && (strstr(e->error_message, strerror(ENOSPC)) || strstr(e->error_message, strerror(EDQUOT)));
}

/* A worker that found the disk full goes back to the queue, to resume from
 * its last checkpoint once the data directory has room (the claim waits for
 * it, scheduler_claim.c); after max_attempts such ends it fails. */
static void disk_full_outcome(pt_scheduler *s, pt_store *st, const pt_sched_exit *e, pt_job_state *to,
                              char *reason, size_t len)
{
    int n = count_ends(st, e->id, DISK_FULL_PREFIX) + 1;
    pt_store_checkpoint ck;
    int have = pt_store_checkpoint_latest(st, NULL, e->id, &ck) == PT_STORE_OK;
    char kept[64] = "no checkpoint yet";
    if (have) snprintf(kept, sizeof kept, "checkpoint step %lld", (long long)ck.step);
    if (n >= s->max_attempts) {
        *to = PT_JOB_FAILED;
        snprintf(reason, len, DISK_FULL_PREFIX " (%.360s); not retried after %d such ends: free space on the "
                 "server, then submit again (kept: %s)", e->error_message, n, kept);
        return;
    }
    *to = PT_JOB_QUEUED;
    snprintf(reason, len, DISK_FULL_PREFIX " (%.360s); queued again: retry %d of %d %s %s once the data "
             "directory has room", e->error_message, n, s->max_attempts - 1,
             have ? "resumes from" : "starts over,", kept);
}

static void crash_outcome(pt_scheduler *s, pt_store *st, const pt_sched_exit *e, const char *how,
                          pt_job_state *to, char *reason, size_t len)
{
    int crashes = count_ends(st, e->id, CRASH_PREFIX) + 1;
    if (crashes >= s->max_attempts) {
        *to = PT_JOB_FAILED;
        snprintf(reason, len, CRASH_PREFIX " %d time%s: last exit %s", crashes, crashes == 1 ? "" : "s", how);
        return;
    }
    *to = PT_JOB_QUEUED;
    pt_store_checkpoint ck;
    if (pt_store_checkpoint_latest(st, NULL, e->id, &ck) == PT_STORE_OK)
        snprintf(reason, len, CRASH_PREFIX " (exit %s); retry %d of %d resumes from checkpoint step %lld", how,
                 crashes, s->max_attempts - 1, (long long)ck.step);
    else
        snprintf(reason, len, CRASH_PREFIX " (exit %s); retry %d of %d starts over (no checkpoint yet)", how,
                 crashes, s->max_attempts - 1);
}

/* Records a worker's end; the store's status (OK also when there is
 * nothing to record). */
static int record_end(pt_scheduler *s, pt_store *st, const pt_sched_exit *e)
{
    pt_store_job job;
    int rc = pt_store_job_get(st, NULL, e->id, &job);
    if (rc != PT_STORE_OK) {
        pt_sched_log(s, "job %s: cannot read it after its worker ended: %s", e->id, pt_store_errmsg(st));
        return rc;
    }
    pt_job_state state = job.state;
    pt_store_job_clear(&job);
    int clean_exit = e->exit_status == 0 && e->term_signal == 0;
    /* A worker that finished while the server drained has still finished. */
    if (e->stop == PT_SCHED_STOP_DRAIN && e->spawned && !(e->saw_done && clean_exit)) {
        pt_sched_note_path(e->log_path, "server draining: job left %s for the next start", pt_job_state_name(state));
        return PT_STORE_OK;
    }
    if (state != PT_JOB_RUNNING && state != PT_JOB_CANCELLING) {
        pt_sched_log(s, "job %s: worker ended but the job is already %s", e->id, pt_job_state_name(state));
        return PT_STORE_OK;
    }
    char how[64], reason[PT_STORE_REASON_MAX];
    pt_sched_describe_exit(e->exit_status, e->term_signal, how, sizeof(how));
    pt_job_state to;
    int crashed = 0;
    if (!e->spawned) {
        to = PT_JOB_FAILED;
        snprintf(reason, sizeof(reason), "%s", e->spawn_error);
    } else if (e->saw_done && clean_exit) {
        to = PT_JOB_SUCCEEDED;
        snprintf(reason, sizeof(reason), "worker finished");
    } else if (state == PT_JOB_CANCELLING) {
        to = PT_JOB_STOPPED;
        snprintf(reason, sizeof(reason), "cancelled; worker %s (exit %s)",
                 e->killed ? "killed with SIGKILL after the grace period" : "stopped on SIGTERM", how);
    } else if (e->stop == PT_SCHED_STOP_RUNTIME) {
        to = PT_JOB_STOPPED;
        snprintf(reason, sizeof(reason), "stopped after max_runtime_seconds=%g; worker %s (exit %s)",
                 e->max_runtime_s, e->killed ? "killed with SIGKILL after the grace period" : "stopped on SIGTERM",
                 how);
    } else if (e->out_of_memory) {
        /* running it again would end the same: not a crash to retry */
        to = PT_JOB_FAILED;
        snprintf(reason, sizeof(reason), "out of memory: %s (peak %.0f MiB); not retried: lower the "
                 "job's memory (model size, batch, replicas) or ask the operator for a larger "
                 "PACKTRAIN_WORKER_MEMORY_MB", e->memory_why, e->memory_peak / (1024.0 * 1024.0));
    } else if (disk_full(e)) {
        disk_full_outcome(s, st, e, &to, reason, sizeof(reason));
    } else if (e->saw_error) {
        to = PT_JOB_FAILED;
        snprintf(reason, sizeof(reason), "%s", e->error_message);
    } else if (clean_exit) {
        to = PT_JOB_FAILED;
        snprintf(reason, sizeof(reason), "worker exited with status 0 without reporting done");
    } else {
        crash_outcome(s, st, e, how, &to, reason, sizeof(reason));
        crashed = 1;
    }
    rc = pt_sched_transition(s, st, e->id, to, reason);
    if (rc != PT_STORE_OK) return rc;
    pt_sched_note_path(e->log_path, "job %s: %s", pt_job_state_name(to), reason);
    if (crashed) {   /* counted once recorded: an end recorded later is not counted twice */
        pthread_mutex_lock(&s->mu);
        s->stats.crashed++;
        pthread_mutex_unlock(&s->mu);
    }
    return rc;
}

/* Keeps an end the store could not take (a full disk fails its commits; a
 * lock held too long) for the next poll. */
static void keep_unrecorded(pt_scheduler *s, const pt_sched_exit *e)
{
    pt_sched_exit *grown = s->n_unrecorded < UNRECORDED_MAX
                               ? realloc(s->unrecorded, (s->n_unrecorded + 1) * sizeof(*grown))
                               : NULL;
    if (!grown) {
        pt_sched_log(s, "job %s: its end is not recorded; the next start re-queues it", e->id);
        return;
    }
    s->unrecorded = grown;
    s->unrecorded[s->n_unrecorded++] = *e;
    pt_sched_log(s, "job %s: its end is recorded once the store takes writes again", e->id);
}

static void finish_work(pt_store *st, pt_store_op *op)
{
    finish_op *f = (finish_op *)op;
    int rc = record_end(f->sched, st, &f->e);
    if (rc == PT_STORE_IO || rc == PT_STORE_BUSY) keep_unrecorded(f->sched, &f->e);
}

void pt_sched_record_unrecorded(pt_scheduler *s, pt_store *st)
{
    size_t kept = 0;
    for (size_t i = 0; i < s->n_unrecorded; i++) {
        int rc = record_end(s, st, &s->unrecorded[i]);
        if (rc == PT_STORE_IO || rc == PT_STORE_BUSY) s->unrecorded[kept++] = s->unrecorded[i];
    }
    s->n_unrecorded = kept;
}

void pt_sched_submit_finish(pt_scheduler *s, const pt_sched_exit *e)
{
    finish_op *f = calloc(1, sizeof(*f));
    if (!f) {
        pt_sched_log(s, "job %s: out of memory: its end is not recorded; the next start re-queues it", e->id);
        return;
    }
    f->op.work = finish_work;
    f->op.done = free_op;
    f->sched = s;
    f->e = *e;
    pt_store_writer_submit(&s->writer, &f->op);
}

typedef struct barrier_op {
    pt_store_op op;
    pt_scheduler *sched;
    void (*then)(pt_scheduler *s);
} barrier_op;

static void barrier_work(pt_store *st, pt_store_op *op)
{
    (void)st;
    (void)op;
}

static void barrier_done(pt_store_op *op)
{
    barrier_op *b = (barrier_op *)op;
    b->then(b->sched);
    free(b);
}

void pt_sched_submit_barrier(pt_scheduler *s, void (*done)(pt_scheduler *s))
{
    barrier_op *b = calloc(1, sizeof(*b));
    if (!b) {
        done(s);   /* ops already queued still run before the writer closes */
        return;
    }
    b->op.work = barrier_work;
    b->op.done = barrier_done;
    b->sched = s;
    b->then = done;
    pt_store_writer_submit(&s->writer, &b->op);
}
