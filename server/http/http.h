/* http.h — the HTTP server: a libmicrohttpd daemon with an internal thread
 * pool (epoll), a router, bounded request bodies, long-poll waits, request
 * logging and per-route metrics.
 *
 * Room server/http: the libmicrohttpd toolkit — server, router, requests,
 * responses, uploads, SSE, long-poll watches, Prometheus, static files,
 * request limits, connection deadlines (conn_guard.h), the access log.  It
 * knows no job, dataset or store; sibling of server/sched, which it does not
 * include (nor the reverse).
 *
 *   pt_http_config cfg;
 *   pt_http_config_defaults(&cfg);
 *   cfg.port = 0;                          // any free port
 *   pt_http h;
 *   if (pt_http_init(&h, &cfg, &router, err, sizeof err) != 0) ...
 *   printf("listening on %u\n", pt_http_port(&h));
 *   ...
 *   pt_http_close(&h);                     // graceful: stop accepting, drain, stop
 *
 * The router must outlive the server and must not change while it runs. */
#ifndef PT_HTTP_H
#define PT_HTTP_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "server/http/conn_guard.h"
#include "server/http/offload.h"
#include "server/http/prom.h"
#include "server/http/request.h"
#include "server/http/router.h"
#include "server/http/watch.h"

/* Sent on every response with X-Frame-Options: DENY. */
#define PT_HTTP_CSP "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " \
                    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

typedef struct pt_http_config {
    const char *bind_address;   /* host or numeric address; default "127.0.0.1" */
    unsigned port;              /* 0: any free port, see pt_http_port() */
    unsigned threads;           /* worker threads; default 4 */
    unsigned max_connections;   /* default 512 */
    unsigned max_per_ip;        /* 0: no per-address limit */
    unsigned idle_timeout_s;    /* idle connections are closed after this; default 60 */
    /* Deadlines trickling cannot push back (conn_guard.h): a request's headers
     * within header_timeout_ms of the connection or of its previous request,
     * its body within header_timeout_ms + Content-Length / body_min_rate. */
    unsigned header_timeout_ms; /* default 30000 */
    uint64_t body_min_rate;     /* bytes per second; default 4096; 0: no body deadline */
    unsigned stop_grace_ms;     /* pt_http_close waits this long for requests; default 5000 */
    unsigned heavy_threads;     /* PT_ROUTE_HEAVY handlers at once (offload.h); default 2 */
    unsigned heavy_queue;       /* ... and waiting for a thread, past which 503; default 8 */
    unsigned heavy_deadline_s;  /* a heavy handler is cancelled after this; 0 = none (default) */
    /* Browser-facing checks for a server without tokens (issue 17 F9): a
     * request whose Host is not a loopback name, bind_address or host_name
     * (DNS rebinding), or whose Origin names another host (cross-site
     * requests), is refused with 403. */
    int same_origin_only;
    const char *host_name;      /* also accepted as Host; NULL: none */
    unsigned max_target_bytes;  /* longer request-target: 414 problem; default 8192 */
    unsigned max_header_bytes;  /* larger header block: 431 problem; default 16384 */
    const char *upload_dir;     /* temp files of PT_BODY_FILE routes; default $TMPDIR or /tmp */
    uint64_t upload_max;        /* PT_BODY_FILE limit; default 2 GiB */
    size_t json_max;            /* PT_BODY_JSON (and stray body) limit; default 1 MiB */
    FILE *access_log;           /* one line per request, and libmicrohttpd's errors; NULL: none */
    pt_prom *prom;              /* request count and latency metrics; NULL: none */
    const char *cors_origins;   /* CORS (cors.h): allowed origins, comma-separated, "*" any;
                                   NULL or "": off, no CORS headers (the default) */
} pt_http_config;

typedef struct pt_http {
    struct MHD_Daemon *daemon;
    pt_http_config cfg;
    char bind_address[256];
    char upload_dir[PATH_MAX];
    pt_router *router;
    pt_waitset waitset;
    pt_offload offload;         /* PT_ROUTE_HEAVY handlers */
    pt_conn_guard guard;        /* header and body deadlines */
    unsigned port;
    long active;                /* requests begun and not completed (atomic) */
    int starting;
    int stopping;               /* pt_http_close began: new connections are closed (atomic) */
    char start_error[256];      /* libmicrohttpd's message while starting */
    pt_prom_metric *m_requests, *m_latency, *m_in_flight;
} pt_http;

void pt_http_config_defaults(pt_http_config *cfg);
/* Binds and starts the worker threads; -1 with a message on failure. */
int pt_http_init(pt_http *h, const pt_http_config *cfg, pt_router *router, char *err, size_t errlen);
unsigned pt_http_port(const pt_http *h);
/* Closes new connections from now on, ends waits and event streams, answers heavy
 * requests still queued with 503, lets running requests finish until
 * stop_grace_ms (heavy ones are then cancelled: pt_request_cancelled, and
 * answer 503), then stops the daemon. */
void pt_http_close(pt_http *h);

/* Long-poll.  Returned by a handler, asks the server to park the request
 * without holding a thread and to call the same handler again once `watch`
 * moves past `seen` or `timeout_ms` after the first wait of this request,
 * whichever comes first.  On that call pt_request_wait_expired() tells which. */
pt_response pt_request_wait(pt_request *req, pt_watch *watch, uint64_t seen, int timeout_ms);
/* True once the wait deadline passed (or the server is stopping). */
int pt_request_wait_expired(const pt_request *req);

#endif
