/* client.h — a small libcurl client for the packtrain REST API, used by the
 * CI commands (`packtrain submit|status|cancel`) and by tests.
 *
 *   pt_client c;
 *   pt_client_init(&c, "http://127.0.0.1:8080", token);   // token may be NULL
 *   pt_client_resp r;
 *   if (pt_client_request(&c, "GET", "/v1/jobs/job_1", NULL, NULL, 0, &r) == 0 && r.status == 200) ...
 *   pt_client_resp_clear(&r);
 *   pt_client_close(&c);
 *
 * Transport failures (connection refused, timeout) return -1 with the reason
 * in c.err; any HTTP answer, 4xx and 5xx included, returns 0 with the status
 * in the response.  Uploads stream the file from disk.
 *
 * With PACKTRAIN_HTTP_TRACE=DIR in the environment every response received
 * is also kept in DIR as PID-N.req (the request line), PID-N.headers (the
 * raw header block) and PID-N.body: what a user attaches to a bug report,
 * and what the integration tests hold to api/openapi.yaml. */
#ifndef PT_CLIENT_H
#define PT_CLIENT_H

#include <jansson.h>
#include <signal.h>
#include <stddef.h>

typedef struct pt_client {
    char base[512];          /* without trailing '/' */
    char auth[600];          /* "Authorization: Bearer ..." or "" */
    long timeout_s;          /* whole-request limit; 0 = none (default 120) */
    long idle_s;             /* a stream's idle limit (pt_client_stream) */
    char err[512];
    void *curl;              /* CURL *, reused for keep-alive */
    char trace[512];         /* $PACKTRAIN_HTTP_TRACE, "" when unset */
    unsigned n_traced;
    /* A request in flight is given up (-1, `aborted` set) once *stop turns
     * non-zero (a signal handler's flag) or the CLOCK_MONOTONIC time passes
     * `deadline` (0: none). */
    volatile sig_atomic_t *stop;
    double deadline;
    int aborted;             /* 1: by *stop, 2: by the deadline; 0 otherwise */
} pt_client;

/* An incremental parser of the HTML standard's event stream format: bytes
 * in, whole events out.  Lines end with \r\n, \r or \n (also when split
 * between two feeds); fields event, data (joined by \n), id; comments and
 * retry are skipped.  last_id is the id of the last event dispatched, what
 * a reconnection sends as Last-Event-ID: an id field of an event cut short
 * does not count. */
typedef int (*pt_sse_event_fn)(void *ud, const char *event, const char *data, size_t len);
typedef struct pt_sse_parser {
    pt_sse_event_fn fn;      /* non-zero return: stop (pt_sse_parser_feed gives -1) */
    void *ud;
    char last_id[64];
    char pending_id[64];     /* the id field of the event being read */
    char event[64];
    char *line, *data;
    size_t line_len, line_cap, data_len, data_cap;
    int after_cr;            /* the last byte fed was \r: a \n next is the same line end */
    size_t n_events;         /* events dispatched so far */
} pt_sse_parser;

void pt_sse_parser_init(pt_sse_parser *p, pt_sse_event_fn fn, void *ud);
/* Forgets a half-read event (a new connection starts clean); keeps last_id. */
void pt_sse_parser_restart(pt_sse_parser *p);
/* 0, or -1 when the callback asked to stop or memory ran out. */
int pt_sse_parser_feed(pt_sse_parser *p, const char *bytes, size_t n);
void pt_sse_parser_close(pt_sse_parser *p);

typedef struct pt_client_resp {
    long status;
    char *body;              /* NUL-terminated */
    size_t len;
    json_t *json;            /* parsed body when it is JSON, else NULL */
    char etag[128];
    char location[256];
    char content_type[128];
    char *headers;           /* the raw header block(s), NUL-terminated */
    size_t headers_len;
    pt_sse_parser *sse;      /* set by pt_client_stream: a 200 event stream goes there */
    int sse_failed;          /* the parser refused bytes (its callback stopped it) */
    int keep_body;           /* keep a streamed body too (for the trace) */
} pt_client_resp;

/* -1 with err when the URL is not http(s):// or libcurl cannot start. */
int pt_client_init(pt_client *c, const char *base_url, const char *token);
void pt_client_close(pt_client *c);
void pt_client_resp_clear(pt_client_resp *r);

/* `path` starts with '/' (query included); `headers` NULL-terminated "Name: value". */
int pt_client_request(pt_client *c, const char *method, const char *path, const char *const *headers,
                      const char *body, size_t len, pt_client_resp *out);
/* POST json (serialized compactly) with Content-Type application/json. */
int pt_client_post_json(pt_client *c, const char *path, const json_t *body, const char *const *headers,
                        pt_client_resp *out);
/* POSTs the file at `file` as the raw body, streamed. */
int pt_client_upload(pt_client *c, const char *path, const char *file, pt_client_resp *out);

/* GET path as an event stream: sends Accept: text/event-stream and, when
 * p->last_id is set, Last-Event-ID; a 200 text/event-stream body is fed to
 * p as it arrives (no whole-request time limit: a connection silent for
 * longer than idle_s is taken as dropped).  Any other answer is read as by
 * pt_client_request.  Returns 0 when the server ended the answer, -1 on a
 * transport failure (a dropped connection included) with c->err. */
int pt_client_stream(pt_client *c, const char *path, pt_sse_parser *p, long idle_s, pt_client_resp *out);

/* CLOCK_MONOTONIC seconds, the clock of `deadline`. */
double pt_client_now(void);

/* One readable line for a non-2xx answer: the problem's detail and its
 * errors[] ("line 12: field: message; ..."), or the status and body. */
void pt_client_describe_error(const pt_client_resp *r, char *buf, size_t cap);

/* Percent-encodes s for a query value into out (libcurl's
 * curl_easy_escape: all but A-Z a-z 0-9 - . _ ~); -1 with out "" when it
 * does not fit in cap. */
int pt_client_escape(const char *s, char *out, size_t cap);

#endif
