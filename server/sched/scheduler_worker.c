/* scheduler_worker.c — one worker process as the loop sees it: spawn it in
 * its own process group, split its stdout into lines (a line may arrive in
 * pieces or be very long), turn protocol messages into batched store writes,
 * stop it with SIGTERM then SIGKILL, and hand its exit to the finish op.
 *
 * A job is finished only when both the process has exited and its stdout
 * reached EOF, because the last lines (often the `done` line) can still sit
 * in the pipe when the exit is reported.  The rest of the process group is
 * killed at exit, so a grandchild holding the pipe cannot delay EOF; if one
 * escaped the group anyway, EOF is given up on after PT_SCHED_EOF_WAIT_MS. */
#include "server/sched/scheduler_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


#define NOTE_TEXT_MAX 300   /* bytes of a rejected line copied into worker.log */

/* ---- worker.log notes ----------------------------------------------------- */

static void note_v(int fd, const char *fmt, va_list ap)
{
    if (fd < 0) return;
    char buf[1024];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ [scheduler] ", &tm);
    int m = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
    if (m < 0) return;
    n += (size_t)m < sizeof(buf) - n - 1 ? (size_t)m : sizeof(buf) - n - 2;
    buf[n++] = '\n';
    /* One write() per note: O_APPEND keeps it whole beside the worker's own. */
    while (write(fd, buf, n) < 0 && errno == EINTR) {
    }
}

void pt_sched_note_fd(int fd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    note_v(fd, fmt, ap);
    va_end(ap);
}

void pt_sched_note_path(const char *path, const char *fmt, ...)
{
    if (!path || !path[0]) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    va_list ap;
    va_start(ap, fmt);
    note_v(fd, fmt, ap);
    va_end(ap);
    close(fd);
}

void pt_sched_describe_exit(int64_t status, int term_signal, char *buf, size_t len)
{
    if (term_signal) {
        const char *abbrev = sigabbrev_np(term_signal);
        if (abbrev) snprintf(buf, len, "signal %d (SIG%s)", term_signal, abbrev);
        else snprintf(buf, len, "signal %d", term_signal);
    } else {
        snprintf(buf, len, "status %lld", (long long)status);
    }
}

/* ---- lifetime --------------------------------------------------------------- */

pt_sched_job *pt_sched_job_find(pt_scheduler *s, const char *id)
{
    for (pt_sched_job *j = s->jobs; j; j = j->next)
        if (!strcmp(j->launch.id, id)) return j;
    return NULL;
}

static void unlink_job(pt_sched_job *j)
{
    for (pt_sched_job **p = &j->sched->jobs; *p; p = &(*p)->next) {
        if (*p == j) {
            *p = j->next;
            return;
        }
    }
}

static void on_handle_closed(uv_handle_t *h)
{
    pt_sched_job *j = h->data;
    if (--j->open_handles > 0) return;
    pt_scheduler *s = j->sched;
    if (j->log_fd >= 0) close(j->log_fd);
    for (size_t i = 0; i < j->n_steps; i++) free(j->steps[i].json);
    free(j->steps);
    free(j->line);
    free(j);
    pt_sched_job_released(s);
}

static void close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h)) uv_close(h, on_handle_closed);
}

/* Only while the worker has not been reaped, so its pid cannot have been
 * reused; the fallback covers a worker that left its group. */
static void signal_group(pt_sched_job *j, int sig)
{
    if (j->pid <= 0) return;   /* kill(-0) would signal the server's own group */
    if (uv_kill(-(int)j->pid, sig) != 0) uv_kill((int)j->pid, sig);
}

/* ---- metrics batching ----------------------------------------------------- */

/* Pending steps and progress, with an epoch, a checkpoint or a done line's
 * result (whose json is taken) when given, as one store op. */
static void flush_result(pt_sched_job *j, pt_store_epoch_metric *epoch, const pt_worker_msg *checkpoint,
                         char *result_json)
{
    uv_timer_stop(&j->flush_timer);
    if (!j->n_steps && !j->has_progress && !epoch && !checkpoint && !result_json) return;
    pt_sched_submit_record(j->sched, j->launch.id, j->steps, j->n_steps, j->has_progress ? &j->progress : NULL,
                           epoch, checkpoint, j->launch.out_dir, result_json);
    j->steps = NULL;
    j->n_steps = j->cap_steps = 0;
    j->has_progress = 0;
}

static void flush(pt_sched_job *j, pt_store_epoch_metric *epoch, const pt_worker_msg *checkpoint)
{
    flush_result(j, epoch, checkpoint, NULL);
}

static void on_flush_timer(uv_timer_t *t)
{
    flush(t->data, NULL, NULL);
}

static void arm_flush(pt_sched_job *j)
{
    if (j->n_steps >= PT_SCHED_FLUSH_LINES) flush(j, NULL, NULL);
    else if (!uv_is_active((uv_handle_t *)&j->flush_timer))
        uv_timer_start(&j->flush_timer, on_flush_timer, PT_SCHED_FLUSH_MS, 0);
}

static void add_step(pt_sched_job *j, pt_worker_msg *m)
{
    if (j->n_steps == j->cap_steps) {
        size_t cap = j->cap_steps ? 2 * j->cap_steps : 64;
        pt_store_step_metric *grown = realloc(j->steps, cap * sizeof(*grown));
        if (!grown) {
            pt_sched_note_fd(j->log_fd, "out of memory: step %lld not recorded", (long long)m->step);
            return;
        }
        j->steps = grown;
        j->cap_steps = cap;
    }
    j->steps[j->n_steps++] = (pt_store_step_metric){
        .step = m->step, .epoch = m->epoch, .loss = m->loss, .mae = m->mae, .lr = m->lr,
        .graphs_per_s = m->graphs_per_s, .json = m->extra_json,
    };
    m->extra_json = NULL;
    if (isfinite(m->graphs_per_s)) j->last_graphs_per_s = m->graphs_per_s;
    arm_flush(j);
}

/* ---- protocol lines ------------------------------------------------------- */

static void dispatch(pt_sched_job *j, pt_worker_msg *m)
{
    switch (m->kind) {
    case PT_WORKER_MSG_STEP:
        add_step(j, m);
        break;
    case PT_WORKER_MSG_EPOCH: {
        pt_store_epoch_metric e = {
            .epoch = m->epoch, .step = m->step, .train_loss = m->train_loss, .train_mae = m->train_mae,
            .val_loss = m->val_loss, .val_mae = m->val_mae, .graphs_per_s = m->graphs_per_s,
            .seconds = m->seconds, .json = m->extra_json,
        };
        m->extra_json = NULL;
        flush(j, &e, NULL);
        break;
    }
    case PT_WORKER_MSG_PROGRESS:
        j->progress = (pt_store_progress){.progress = m->progress, .epoch = m->epoch, .step = m->step,
                                          .graphs_per_s = j->last_graphs_per_s};
        j->has_progress = 1;
        arm_flush(j);
        break;
    case PT_WORKER_MSG_CHECKPOINT:
        flush(j, NULL, m);
        break;
    case PT_WORKER_MSG_DONE:
        j->exit.saw_done = 1;
        pt_sched_note_fd(j->log_fd, "worker reported done (best_val_mae %g, model %s)", m->best_val_mae,
                         m->path[0] ? m->path : "-");
        /* the result is stored before the job's end is (the writer keeps order) */
        if (m->extra_json) {
            flush_result(j, NULL, NULL, m->extra_json);
            m->extra_json = NULL;
        }
        break;
    case PT_WORKER_MSG_ERROR:
        j->exit.saw_error = 1;
        snprintf(j->exit.error_message, sizeof(j->exit.error_message), "%s", m->message);
        break;
    }
}

static void handle_line(pt_sched_job *j, const char *text, size_t len)
{
    j->line_no++;
    size_t blank = 0;
    while (blank < len && (text[blank] == ' ' || text[blank] == '\t' || text[blank] == '\r')) blank++;
    if (blank == len) return;   /* blank lines carry nothing */
    pt_worker_msg m;
    char err[256];
    if (pt_worker_msg_parse(text, len, &m, err, sizeof(err)) != 0) {
        int shown = len > NOTE_TEXT_MAX ? NOTE_TEXT_MAX : (int)len;
        pt_sched_note_fd(j->log_fd, "rejected stdout line %lld: %s; the line was: %.*s%s", (long long)j->line_no,
                         err, shown, text, len > NOTE_TEXT_MAX ? "..." : "");
        return;
    }
    dispatch(j, &m);
    pt_worker_msg_clear(&m);
}

/* Keeps a partial line; past PT_WORKER_LINE_MAX only its length is counted. */
static void append_partial(pt_sched_job *j, const char *data, size_t n)
{
    if (!j->line_dropped && j->line_len + n <= PT_WORKER_LINE_MAX) {
        if (j->line_len + n > j->line_cap) {
            size_t cap = j->line_cap ? j->line_cap : 4096;
            while (cap < j->line_len + n) cap *= 2;
            char *grown = realloc(j->line, cap);
            if (grown) {
                j->line = grown;
                j->line_cap = cap;
            }
        }
        if (j->line_len + n <= j->line_cap) {
            memcpy(j->line + j->line_len, data, n);
            j->line_len += n;
            return;
        }
    }
    j->line_dropped += j->line_len + n;
    j->line_len = 0;
}

static void complete_line(pt_sched_job *j)
{
    if (j->line_dropped) {
        j->line_no++;
        pt_sched_note_fd(j->log_fd, "rejected stdout line %lld: %zu bytes, longer than the %d allowed",
                         (long long)j->line_no, j->line_dropped, PT_WORKER_LINE_MAX);
    } else {
        handle_line(j, j->line, j->line_len);
    }
    j->line_len = 0;
    j->line_dropped = 0;
}

static void feed(pt_sched_job *j, const char *data, size_t n)
{
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t seg = nl ? (size_t)(nl - data) : n;
        if (nl && !j->line_len && !j->line_dropped && seg <= PT_WORKER_LINE_MAX) {
            handle_line(j, data, seg);   /* whole line in this read: no copy */
        } else {
            append_partial(j, data, seg);
            if (nl) complete_line(j);
        }
        if (nl) seg++;
        data += seg;
        n -= seg;
    }
}

/* ---- exit and end of output ----------------------------------------------- */

static void finalize(pt_sched_job *j)
{
    if (j->finalized || !j->exited || !j->eof) return;
    j->finalized = 1;
    flush(j, NULL, NULL);
    pt_sched_submit_finish(j->sched, &j->exit);
    unlink_job(j);
    close_handle((uv_handle_t *)&j->out);
    close_handle((uv_handle_t *)&j->kill_timer);
    close_handle((uv_handle_t *)&j->runtime_timer);
    close_handle((uv_handle_t *)&j->flush_timer);
    close_handle((uv_handle_t *)&j->eof_timer);
    close_handle((uv_handle_t *)&j->memory_timer);
}

static void end_of_output(pt_sched_job *j)
{
    if (j->eof) return;
    uv_read_stop((uv_stream_t *)&j->out);
    if (j->line_len || j->line_dropped) complete_line(j);   /* a last line without '\n' */
    j->eof = 1;
    uv_timer_stop(&j->eof_timer);
    finalize(j);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    pt_sched_job *j = h->data;
    *buf = uv_buf_init(j->readbuf, sizeof(j->readbuf));
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    pt_sched_job *j = stream->data;
    if (nread > 0) {
        feed(j, buf->base, (size_t)nread);
    } else if (nread < 0) {
        if (nread != UV_EOF)
            pt_sched_note_fd(j->log_fd, "reading the worker's stdout failed: %s", uv_strerror((int)nread));
        end_of_output(j);
    }
}

static void on_eof_timeout(uv_timer_t *t)
{
    pt_sched_job *j = t->data;
    pt_sched_note_fd(j->log_fd, "stdout still open %d ms after the worker exited; closing it",
                     PT_SCHED_EOF_WAIT_MS);
    end_of_output(j);
}

static void on_worker_exit(uv_process_t *proc, int64_t status, int term_signal)
{
    pt_sched_job *j = proc->data;
    pt_scheduler *s = j->sched;
    char how[64];
    pt_sched_describe_exit(status, term_signal, how, sizeof(how));
    pt_sched_note_fd(j->log_fd, "worker pid %lld exited: %s", (long long)j->pid, how);
    j->exited = 1;
    j->exit.exit_status = status;
    j->exit.term_signal = term_signal;
    /* Whatever the worker left behind in its group.  The group id stays
     * reserved while any member lives, so this cannot hit a stranger; no
     * fallback to the bare pid, which is reaped and free for reuse. */
    if (j->pid > 0) uv_kill(-(int)j->pid, SIGKILL);
    uv_timer_stop(&j->kill_timer);
    uv_timer_stop(&j->runtime_timer);
    uv_timer_stop(&j->memory_timer);
    pt_sched_memory_exit(j, term_signal);
    close_handle((uv_handle_t *)proc);
    pthread_mutex_lock(&s->mu);
    s->stats.active--;
    pthread_mutex_unlock(&s->mu);
    if (!j->eof) uv_timer_start(&j->eof_timer, on_eof_timeout, PT_SCHED_EOF_WAIT_MS, 0);
    finalize(j);
}

/* ---- stopping ----------------------------------------------------------------- */

static void on_kill_timer(uv_timer_t *t)
{
    pt_sched_job *j = t->data;
    pt_sched_note_fd(j->log_fd, "worker still running after the grace period; sending SIGKILL");
    j->exit.killed = 1;
    signal_group(j, SIGKILL);
}

static uint64_t seconds_to_ms(double s)
{
    return s > 0 ? (uint64_t)(s * 1000.0 + 0.5) : 0;
}

void pt_sched_job_stop(pt_sched_job *j, pt_sched_stop why, double grace_s)
{
    if (j->exited) return;
    static const char *const why_text[] = {
        [PT_SCHED_STOP_CANCEL] = "job cancelled", [PT_SCHED_STOP_RUNTIME] = "max runtime reached",
        [PT_SCHED_STOP_DRAIN] = "server draining",
    };
    uint64_t ms = seconds_to_ms(grace_s);
    if (j->exit.stop == PT_SCHED_STOP_NONE) {
        j->exit.stop = why;
        pt_sched_note_fd(j->log_fd, "sending SIGTERM (%s); SIGKILL follows in %g s", why_text[why], grace_s);
        signal_group(j, SIGTERM);
        uv_timer_start(&j->kill_timer, on_kill_timer, ms, 0);
    } else if (uv_timer_get_due_in(&j->kill_timer) > ms) {
        /* Already stopping; a shutdown with a shorter grace must not wait longer. */
        uv_timer_start(&j->kill_timer, on_kill_timer, ms, 0);
    }
}

static void on_runtime_timer(uv_timer_t *t)
{
    pt_sched_job *j = t->data;
    pt_sched_note_fd(j->log_fd, "max_runtime_seconds=%g reached", j->launch.max_runtime_s);
    pt_sched_job_stop(j, PT_SCHED_STOP_RUNTIME, j->sched->grace_s);
}

static void on_memory_timer(uv_timer_t *t)
{
    pt_sched_memory_sample(t->data);
}

/* ---- spawning ----------------------------------------------------------------- */

static void fail_start(pt_sched_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_start(pt_sched_job *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->exit.spawn_error, sizeof(j->exit.spawn_error), fmt, ap);
    va_end(ap);
    pt_sched_note_fd(j->log_fd, "%s", j->exit.spawn_error);
    j->exit.spawned = 0;
    j->exited = j->eof = 1;
    close_handle((uv_handle_t *)&j->proc);
    finalize(j);
}

static void init_handles(pt_scheduler *s, pt_sched_job *j)
{
    uv_pipe_init(&s->loop, &j->out, 0);
    uv_timer_init(&s->loop, &j->kill_timer);
    uv_timer_init(&s->loop, &j->runtime_timer);
    uv_timer_init(&s->loop, &j->flush_timer);
    uv_timer_init(&s->loop, &j->eof_timer);
    uv_timer_init(&s->loop, &j->memory_timer);
    j->out.data = j->kill_timer.data = j->runtime_timer.data = j->flush_timer.data = j->eof_timer.data = j;
    j->memory_timer.data = j;
    j->proc.data = j;
    j->open_handles = 7;   /* the six above and the process handle uv_spawn initialises */
}

/* Before any handle exists: the job fails without a process. */
static void fail_early(pt_scheduler *s, const char *id, const char *log_path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail_early(pt_scheduler *s, const char *id, const char *log_path, const char *fmt, ...)
{
    pt_sched_exit e = {.spawned = 0};
    snprintf(e.id, sizeof(e.id), "%s", id);
    snprintf(e.log_path, sizeof(e.log_path), "%s", log_path);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.spawn_error, sizeof(e.spawn_error), fmt, ap);
    va_end(ap);
    pt_sched_submit_finish(s, &e);
    pt_sched_job_released(s);
}

void pt_sched_job_spawn(pt_scheduler *s, const pt_sched_launch *launch)
{
    char log_path[PT_STORE_PATH_MAX];
    int len = snprintf(log_path, sizeof(log_path), "%s/worker.log", launch->out_dir);
    if (len < 0 || (size_t)len >= sizeof(log_path)) {
        fail_early(s, launch->id, "", "could not start the worker: job directory path is too long");
        return;
    }
    int log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        fail_early(s, launch->id, "", "could not start the worker: cannot open %s: %s", log_path,
                   strerror(errno));
        return;
    }
    pt_sched_job *j = calloc(1, sizeof(*j));
    if (!j) {
        close(log_fd);
        fail_early(s, launch->id, log_path, "could not start the worker: out of memory");
        return;
    }
    j->sched = s;
    j->launch = *launch;
    j->log_fd = log_fd;
    j->last_graphs_per_s = NAN;
    j->next = s->jobs;
    s->jobs = j;
    pt_sched_exit *e = &j->exit;
    snprintf(e->id, sizeof(e->id), "%s", launch->id);
    snprintf(e->log_path, sizeof(e->log_path), "%s", log_path);
    e->max_runtime_s = launch->max_runtime_s;
    e->grace_s = s->grace_s;
    e->memory_budget = s->worker_memory_bytes;
    e->spawned = 1;
    init_handles(s, j);

    /* a job of backend.kind "mpi" starts its ranks itself (the worker runs
     * again under `packtrain mpirun`): the scheduler knows no kind */
    char *args[PT_SCHEDULER_ARGV_MAX + 11];
    int n = 0;
    for (int i = 0; i < s->n_worker_argv; i++) args[n++] = s->worker_argv[i];
    args[n++] = "--job";
    args[n++] = j->launch.id;
    args[n++] = "--config";
    args[n++] = j->launch.config_path;
    args[n++] = "--data";
    args[n++] = j->launch.data_path;
    args[n++] = "--out";
    args[n++] = j->launch.out_dir;
    if (j->launch.resume_path[0]) {
        args[n++] = "--resume";
        args[n++] = j->launch.resume_path;
    }
    args[n] = NULL;
    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[1].data.stream = (uv_stream_t *)&j->out;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = j->log_fd;
    uv_process_options_t opts = {
        .exit_cb = on_worker_exit, .file = args[0], .args = args, .stdio_count = 3, .stdio = stdio,
        /* Own process group: signals reach the worker's children too. */
        .flags = UV_PROCESS_DETACHED,
    };
    if (j->launch.resume_path[0])
        pt_sched_note_fd(j->log_fd, "starting attempt %d, resuming from %s (step %lld)", j->launch.attempt,
                         j->launch.resume_path, (long long)j->launch.resume_step);
    else
        pt_sched_note_fd(j->log_fd, "starting attempt %d", j->launch.attempt);
    int rc = uv_spawn(&s->loop, &j->proc, &opts);
    j->proc.data = j;
    if (rc != 0) {
        fail_start(j, "could not start the worker %s: %s", args[0], uv_strerror(rc));
        return;
    }
    j->pid = j->proc.pid;
    pthread_mutex_lock(&s->mu);
    s->stats.spawned++;
    if (++s->stats.active > s->stats.peak_active) s->stats.peak_active = s->stats.active;
    pthread_mutex_unlock(&s->mu);
    uv_read_start((uv_stream_t *)&j->out, on_alloc, on_read);
    if (s->worker_memory_bytes) {
        pt_sched_memory_limit(j);
        uv_timer_start(&j->memory_timer, on_memory_timer, PT_SCHED_MEMORY_MS, PT_SCHED_MEMORY_MS);
    }
    if (j->launch.max_runtime_s > 0)
        uv_timer_start(&j->runtime_timer, on_runtime_timer, seconds_to_ms(j->launch.max_runtime_s), 0);
    pt_sched_submit_set_worker(s, j->launch.id, j->pid);
}
