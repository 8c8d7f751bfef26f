/* routes_job_logs.c — a job's worker log (DIR/jobs/ID/worker.log: the
 * worker's stderr and the scheduler's notes):
 *   GET /v1/jobs/{id}/logs          ?lines=N, the tail, as plain text
 *   GET /v1/jobs/{id}/logs/stream   the log as Server-Sent Events, live
 *
 * The stream is what `packtrain ... --follow` reads.  Each complete line is
 * a `log` event whose id is the byte offset just after it in the file: the
 * log is only ever appended to, so an offset names a place in it for good,
 * across server restarts, and Last-Event-ID resumes exactly there (no line
 * twice, none lost).  Between lines, a `progress` event (the Job document)
 * is sent whenever the job changed (state, epoch, step); it carries no id,
 * since it is a snapshot that a resumed stream sends afresh.  Once the job
 * is final and every byte of its log was sent, an `end` event (the Job)
 * closes the stream, and a reconnection at the log's end gets 204. */
#include "server/api/routes.h"
#include "server/http/sse.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_TAIL_MAX_BYTES (1u << 20)
#define LOG_LINES_DEFAULT 200
#define LOG_LINES_MAX 10000
/* Bytes of log read per call of the stream's source; a longer backlog is
 * sent over several calls (the stream asks again before it waits). */
#define LOG_STREAM_BATCH (256u << 10)
/* The scheduler writes its last note ("job failed: why") just after the
 * final state is stored: the stream waits this long after a job's end
 * before it takes the log as complete. */
#define LOG_SETTLE_US 1000000
/* The log is polled at least this often (the stream's heartbeat), since a
 * worker's line need not come with a change of the job. */
#define LOG_HEARTBEAT_MS 1000

/* The last `lines` lines of at most LOG_TAIL_MAX_BYTES at the end of path. */
static int read_tail(const char *path, long lines, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 0 : -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return -1;
    }
    size_t n = st.st_size > LOG_TAIL_MAX_BYTES ? LOG_TAIL_MAX_BYTES : (size_t)st.st_size;
    char *buf = malloc(n + 1);
    ssize_t got = buf ? pread(fd, buf, n, st.st_size - (off_t)n) : -1;
    close(fd);
    if (got < 0) {
        free(buf);
        return -1;
    }
    size_t end = (size_t)got, start = end;
    long seen = 0;
    /* A final newline ends the last line rather than starting an empty one. */
    size_t scan = end > 0 && buf[end - 1] == '\n' ? end - 1 : end;
    while (scan > 0) {
        if (buf[scan - 1] == '\n' && ++seen == lines) break;
        scan--;
    }
    start = scan;
    memmove(buf, buf + start, end - start);
    *len = end - start;
    *out = buf;
    return 0;
}

pt_response pt_api_job_logs(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    const char *id = pt_request_param(req, "id");
    long lines = pt_request_query_long(req, "lines", LOG_LINES_DEFAULT, 1, LOG_LINES_MAX);
    if (req->errors.total) return pt_request_problem(req);
    pt_job_state state;
    pt_response r = {0, NULL};
    if (pt_api_job_state(app, req, id, &state, &r) != 0) return r;
    char path[PATH_MAX];
    if (pt_app_job_dir(app, id, path, sizeof path - 16) != 0) return pt_problem(500, "job directory path too long");
    strcat(path, "/worker.log");
    char *text = NULL;
    size_t len = 0;
    if (read_tail(path, lines, &text, &len) != 0) return pt_problem(500, "cannot read the log of job %s: %s", id, strerror(errno));
    r = pt_response_bytes(200, "text/plain; charset=utf-8", text ? text : "", len);
    free(text);
    pt_response_header(&r, "Cache-Control", "no-cache");
    return r;
}

/* ---- the stream ---------------------------------------------------------------------------- */

typedef struct log_stream {
    pt_app *app;
    char owner[PT_STORE_OWNER_MAX];
    char id[PT_STORE_ID_MAX];
    char path[PATH_MAX];
    int64_t sent_version;     /* the job version of the last progress event; -1: none */
} log_stream;

/* The job's row; PT_STORE_* status. */
static int job_row(pt_app *app, const char *owner, const char *id, pt_store_job *job)
{
    char err[256];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) return PT_STORE_BUSY;
    int rc = pt_store_job_get(s, owner, id, job);
    pt_app_store_release(app, s);
    return rc;
}

/* A final job whose last note has surely been written. */
static int job_settled(const pt_store_job *job)
{
    return pt_job_state_is_terminal(job->state) && pt_store_now_us() - job->finished_at >= LOG_SETTLE_US;
}

static off_t log_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : 0;
}

/* One `log` event: {"line": text}, the bytes made valid UTF-8. */
static int send_line(pt_sse_writer *w, uint64_t id, const char *p, size_t n)
{
    char *text = malloc(n + 1);
    if (!text) return -1;
    for (size_t i = 0; i < n; i++) text[i] = p[i] ? p[i] : ' ';
    if (n && text[n - 1] == '\r') n--;   /* a CRLF line */
    text[n] = '\0';
    json_t *line = pt_json_string_lossy(text);
    free(text);
    json_t *o = line ? json_pack("{s:o}", "line", line) : NULL;
    int rc = o ? pt_sse_send_json(w, id, "log", o) : -1;
    json_decref(o);
    return rc;
}

/* Sends the complete lines after byte `after` (all of the rest when `all`,
 * a last line without its newline included).  Returns the offset reached. */
static uint64_t send_lines(pt_sse_writer *w, const char *path, uint64_t after, int all)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return after;
    char *buf = malloc(LOG_STREAM_BATCH);
    ssize_t got = buf ? pread(fd, buf, LOG_STREAM_BATCH, (off_t)after) : -1;
    close(fd);
    uint64_t at = after;
    size_t start = 0;
    for (ssize_t i = 0; i < got; i++) {
        if (buf[i] != '\n') continue;
        if (send_line(w, at + (uint64_t)(i + 1 - (ssize_t)start), buf + start, (size_t)i - start) != 0) break;
        at += (uint64_t)(i + 1) - start;
        start = (size_t)i + 1;
    }
    /* the rest: a final line without a newline, or one line longer than a
     * whole batch (sent in pieces rather than never) */
    size_t rest = got > 0 ? (size_t)got - start : 0;
    if (rest && (all || (start == 0 && (size_t)got == LOG_STREAM_BATCH)) &&
        send_line(w, at + rest, buf + start, rest) == 0)
        at += rest;
    free(buf);
    return at;
}

static int send_job(pt_sse_writer *w, const char *event, pt_app *app, const pt_store_job *job)
{
    json_t *doc = pt_api_job_json(app, job, NULL);
    int rc = doc ? pt_sse_send_json(w, 0, event, doc) : -1;
    json_decref(doc);
    return rc;
}

static int log_source(void *ctx, uint64_t after, pt_sse_writer *w)
{
    log_stream *c = ctx;
    pt_store_job job = {0};
    int rc = job_row(c->app, c->owner, c->id, &job);
    if (rc == PT_STORE_NOT_FOUND) return PT_SSE_DONE;   /* deleted: nothing more will come */
    if (rc != PT_STORE_OK) {
        pt_store_job_clear(&job);
        return PT_SSE_OPEN;   /* tried again at the next change or heartbeat */
    }
    /* the state is read before the log: when it is settled, the log is whole */
    int settled = job_settled(&job);
    uint64_t at = send_lines(w, c->path, after, settled);
    int result = PT_SSE_OPEN;
    if (job.version != c->sent_version && send_job(w, "progress", c->app, &job) == 0) c->sent_version = job.version;
    if (settled && at == (uint64_t)log_size(c->path) && send_job(w, "end", c->app, &job) == 0) result = PT_SSE_DONE;
    pt_store_job_clear(&job);
    return result;
}

pt_response pt_api_job_log_stream(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    const char *id = pt_request_param(req, "id");
    long heartbeat = pt_request_query_long(req, "heartbeat_ms", LOG_HEARTBEAT_MS, 100, 120000);
    uint64_t last = 0;
    if (pt_sse_last_event_id(req, &last) != 0)
        pt_errors_add(&req->errors, NULL, 0, "header.Last-Event-ID", "must be a decimal event id");
    if (req->errors.total) return pt_request_problem(req);
    log_stream *c = calloc(1, sizeof(*c));
    if (!c) return pt_problem(500, "out of memory");
    c->app = app;
    c->sent_version = -1;
    snprintf(c->owner, sizeof c->owner, "%s", pt_app_owner(req));
    snprintf(c->id, sizeof c->id, "%s", id);
    if (pt_app_job_dir(app, id, c->path, sizeof c->path - 16) != 0) {
        free(c);
        return pt_problem(500, "job directory path too long");
    }
    strcat(c->path, "/worker.log");
    pt_store_job job = {0};
    int rc = job_row(app, c->owner, id, &job);
    pt_response r = {0, NULL};
    uint64_t size = (uint64_t)log_size(c->path);
    if (rc == PT_STORE_NOT_FOUND || rc == PT_STORE_INVALID) r = pt_api_not_found("job", id);
    else if (rc == PT_STORE_BUSY) r = pt_api_no_store("the store is busy");
    else if (rc != PT_STORE_OK) r = pt_problem(500, "cannot read job %s", id);
    else if (last > size)
        r = pt_problem(400, "Last-Event-ID %llu is after the end of the log of job %s (%llu bytes)",
                       (unsigned long long)last, id, (unsigned long long)size);
    else if (job_settled(&job) && last == size)
        r = pt_response_empty(204);
    pt_store_job_clear(&job);
    if (r.status) {
        free(c);
        return r;
    }
    pt_sse_config cfg = {.watch = &app->jobs_watch, .source = log_source, .ctx = c, .free_ctx = free,
                         .heartbeat_ms = (int)heartbeat, .retry_ms = 2000};
    return pt_sse_response(req, &cfg);
}
