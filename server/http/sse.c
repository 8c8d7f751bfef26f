/* sse.c — Server-Sent Events on libmicrohttpd's content reader; see sse.h.
 *
 * libmicrohttpd asks the reader for bytes whenever the socket can take them.
 * With nothing to send, the reader registers a waiter on the watch (deadline:
 * the next heartbeat), suspends the connection and returns 0; the waiter's
 * callback resumes the connection and libmicrohttpd asks again. */
#include "server/http/sse.h"

#include "server/http/json_text.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SSE_BLOCK 16384

struct pt_sse_writer {
    char *buf;
    size_t len, cap;
    uint64_t last_id;
    int failed;
};

typedef struct sse_stream {
    struct MHD_Connection *conn;
    pt_waitset *waitset;
    pt_sse_config cfg;
    pt_sse_writer w;          /* bytes not yet handed to libmicrohttpd */
    size_t off;
    int done, closing;
    int64_t last_write_ms;
    pt_waiter waiter;
} sse_stream;

static int writer_put(pt_sse_writer *w, const char *s, size_t n)
{
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 1024;
        while (cap < w->len + n) cap *= 2;
        char *b = realloc(w->buf, cap);
        if (!b) {
            w->failed = 1;
            return -1;
        }
        w->buf = b;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    return 0;
}

static int writer_puts(pt_sse_writer *w, const char *s)
{
    return writer_put(w, s, strlen(s));
}

int pt_sse_send(pt_sse_writer *w, uint64_t id, const char *event, const char *data)
{
    if ((id != 0 && id <= w->last_id) || id > PT_SSE_ID_MAX) return -1;
    if (event && (strpbrk(event, "\r\n") || !event[0])) return -1;
    size_t mark = w->len;
    char line[64] = "";
    if (id != 0) snprintf(line, sizeof line, "id: %" PRIu64 "\n", id);
    int rc = writer_puts(w, line);
    if (event) rc |= writer_puts(w, "event: ") | writer_puts(w, event) | writer_puts(w, "\n");
    /* Each line of data is its own "data:" field; \r\n, \r and \n all end a line. */
    const char *p = data ? data : "";
    for (;;) {
        size_t n = strcspn(p, "\r\n");
        rc |= writer_puts(w, "data: ") | writer_put(w, p, n) | writer_puts(w, "\n");
        p += n;
        if (!*p) break;
        p += (p[0] == '\r' && p[1] == '\n') ? 2 : 1;
    }
    rc |= writer_puts(w, "\n");
    if (rc != 0) {
        w->len = mark;
        return -1;
    }
    if (id != 0) w->last_id = id;
    return 0;
}

int pt_sse_send_json(pt_sse_writer *w, uint64_t id, const char *event, const json_t *data)
{
    char *text = pt_json_text(data, NULL);
    if (!text) return -1;
    int rc = pt_sse_send(w, id, event, text);
    free(text);
    return rc;
}

static void stream_park(void *data)
{
    sse_stream *s = data;
    MHD_suspend_connection(s->conn);
}

static void stream_wake(void *data, pt_wake_reason reason)
{
    sse_stream *s = data;
    if (reason == PT_WAKE_CLOSED) s->closing = 1;
    MHD_resume_connection(s->conn);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    sse_stream *s = cls;
    for (;;) {
        if (s->off < s->w.len) {
            size_t n = s->w.len - s->off < max ? s->w.len - s->off : max;
            memcpy(buf, s->w.buf + s->off, n);
            s->off += n;
            if (s->off == s->w.len) s->off = s->w.len = 0;
            s->last_write_ms = pt_clock_ms();
            return (ssize_t)n;
        }
        if (s->w.failed) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (s->done || s->closing) return MHD_CONTENT_READER_END_OF_STREAM;
        /* Read the version before asking the source, so a bump that lands
         * while the source runs still wakes the wait below. */
        uint64_t seen = pt_watch_version(s->cfg.watch);
        if (s->cfg.source(s->cfg.ctx, s->w.last_id, &s->w) == PT_SSE_DONE) s->done = 1;
        if (s->w.len || s->done) continue;
        int64_t beat_at = s->last_write_ms + s->cfg.heartbeat_ms;
        if (pt_clock_ms() >= beat_at) {
            writer_puts(&s->w, ": keep-alive\n\n");
            continue;
        }
        pt_wake_reason r = pt_waitset_add(s->waitset, &s->waiter, s->cfg.watch, seen, beat_at,
                                          stream_park, stream_wake, s);
        if (r == PT_WAKE_NONE) return 0;   /* parked; called again once resumed */
        if (r == PT_WAKE_CLOSED) s->closing = 1;
    }
}

static void stream_free(void *cls)
{
    sse_stream *s = cls;
    if (s->cfg.free_ctx) s->cfg.free_ctx(s->cfg.ctx);
    free(s->w.buf);
    free(s);
}

int pt_sse_last_event_id(const pt_request *req, uint64_t *out)
{
    *out = 0;
    const char *v = pt_request_header(req, "Last-Event-ID");
    if (!v) v = pt_request_query(req, "last_event_id");
    if (!v) return 0;
    if (!v[0] || strspn(v, "0123456789") != strlen(v)) return -1;
    errno = 0;
    unsigned long long id = strtoull(v, NULL, 10);
    if (errno == ERANGE || id > PT_SSE_ID_MAX) return -1;
    *out = id;
    return 0;
}

pt_response pt_sse_response(pt_request *req, const pt_sse_config *cfg)
{
    uint64_t last = 0;
    if (pt_sse_last_event_id(req, &last) != 0) {
        if (cfg->free_ctx) cfg->free_ctx(cfg->ctx);
        return pt_problem(400, "Last-Event-ID must be a decimal event id");
    }
    sse_stream *s = calloc(1, sizeof(*s));
    if (!s || !cfg->watch || !cfg->source || !req->conn || !req->waitset) {
        free(s);
        if (cfg->free_ctx) cfg->free_ctx(cfg->ctx);
        return pt_problem(500, "cannot start the event stream");
    }
    s->conn = req->conn;
    s->waitset = req->waitset;
    s->cfg = *cfg;
    if (s->cfg.heartbeat_ms <= 0) s->cfg.heartbeat_ms = 15000;
    s->w.last_id = last;
    /* Something to send at once, so the client sees the headers right away. */
    char first[64];
    if (cfg->retry_ms > 0) snprintf(first, sizeof first, "retry: %d\n\n", cfg->retry_ms);
    else snprintf(first, sizeof first, ": stream open\n\n");
    writer_puts(&s->w, first);
    struct MHD_Response *m = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SSE_BLOCK, stream_read, s,
                                                               stream_free);
    if (!m) {
        stream_free(s);
        return pt_problem(500, "cannot start the event stream");
    }
    pt_response r = {200, m};
    pt_response_header(&r, "Content-Type", "text/event-stream; charset=utf-8");
    pt_response_header(&r, "Cache-Control", "no-cache");
    pt_response_header(&r, "X-Accel-Buffering", "no");
    return r;
}
