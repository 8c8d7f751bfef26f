/* http.c — the libmicrohttpd daemon and the life of one request; see http.h.
 *
 * libmicrohttpd calls the access handler several times per request: once the
 * headers are in (we route, authenticate and decide how to take the body), once
 * per piece of body, and once more when the body is complete (we run the
 * route).  A response cannot be queued while body data is being handed over,
 * so a body that passes its limit is dropped as it arrives and the 413 goes out
 * at the end; a declared Content-Length over the limit gets its 413 at once,
 * before the client sends the body. */
#include "server/http/http.h"

#include "server/http/access_log.h"
#include "server/http/cors.h"
#include "server/http/mhd_panic.h"
#include "server/http/request_limits.h"
#include "server/http/same_origin.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* After a body passed its limit we keep reading (and dropping) this much more
 * so the client can be told 413; beyond it the connection is closed. */
#define DISCARD_MAX (16u << 20)
/* A handler that keeps asking to wait on a watch that already moved is
 * answered as if its wait had expired after this many immediate retries. */
#define MAX_WAIT_RETRIES 100

void pt_http_config_defaults(pt_http_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->bind_address = "127.0.0.1";
    cfg->threads = 4;
    cfg->max_connections = 512;
    cfg->idle_timeout_s = 60;
    cfg->header_timeout_ms = 30000;
    cfg->body_min_rate = 4096;
    cfg->stop_grace_ms = 5000;
    cfg->heavy_threads = 2;
    cfg->heavy_queue = 8;
    cfg->max_target_bytes = 8192;
    cfg->max_header_bytes = 16384;
    cfg->upload_max = 2ull << 30;
    cfg->json_max = 1u << 20;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* --- responses ---------------------------------------------------------------- */

static enum MHD_Result send_response(pt_request *req, pt_response resp)
{
    if (!resp.mhd) resp = pt_problem(500, "the server ran out of memory building the response");
    if (!resp.mhd) return MHD_NO;
    MHD_add_response_header(resp.mhd, "X-Content-Type-Options", "nosniff");
    /* no page of this server may be framed (clickjacking), and the
     * dashboard runs only its own scripts */
    MHD_add_response_header(resp.mhd, "X-Frame-Options", "DENY");
    MHD_add_response_header(resp.mhd, "Content-Security-Policy", PT_HTTP_CSP);
    pt_cors_headers(((const pt_http *)req->server)->cfg.cors_origins, req, &resp);
    req->status = resp.status;
    req->queued_ns = now_ns();
    pt_conn_guard_busy(&((pt_http *)req->server)->guard, pt_conn_guard_entry(req->conn));
    req->phase = PT_PHASE_DONE;
    enum MHD_Result rc = MHD_queue_response(req->conn, (unsigned)resp.status, resp.mhd);
    MHD_destroy_response(resp.mhd);
    return rc;
}

/* --- long-poll -------------------------------------------------------------------- */

pt_response pt_request_wait(pt_request *req, pt_watch *watch, uint64_t seen, int timeout_ms)
{
    if (req->wait_deadline_ms == 0) req->wait_deadline_ms = pt_clock_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    req->wait_watch = watch;
    req->wait_seen = seen;
    return (pt_response){0, NULL};
}

int pt_request_wait_expired(const pt_request *req)
{
    return req->wait_expired;
}

static void park_connection(void *data)
{
    pt_request *req = data;
    MHD_suspend_connection(req->conn);
}

static void wake_connection(void *data, pt_wake_reason reason)
{
    pt_request *req = data;
    if (reason != PT_WAKE_CHANGED) req->wait_expired = 1;
    MHD_resume_connection(req->conn);
}

/* --- heavy routes ---------------------------------------------------------------------- */

/* The pool's side: the response is in req->offload_result. */
static void resume_offloaded(pt_request *req)
{
    MHD_resume_connection(req->conn);
}

/* A heavy route's handler goes to the offload pool: its place is taken
 * before the connection is suspended (so a full pool answers at once, on
 * this thread), and the connection is suspended before the work is queued
 * (so the pool can never resume a connection not yet suspended). */
static enum MHD_Result offload_handler(pt_http *h, pt_request *req)
{
    pt_cancel_reason why;
    if (pt_offload_reserve(&h->offload, &why) != 0) return send_response(req, pt_offload_refused(why));
    req->phase = PT_PHASE_OFFLOADED;
    MHD_suspend_connection(req->conn);
    pt_offload_push(&h->offload, req);
    return MHD_YES;
}

/* Runs the route's handler; parks the request when the handler asks to wait. */
static enum MHD_Result run_handler(pt_http *h, pt_request *req)
{
    const pt_route *route = req->matched;
    if (route->flags & PT_ROUTE_HEAVY) return offload_handler(h, req);
    for (int retries = 0;; retries++) {
        req->wait_watch = NULL;
        int expired_before = req->wait_expired;
        pt_response resp = route->handler(req, route->ctx);
        if (resp.status != 0 || resp.mhd) return send_response(req, resp);
        if (!req->wait_watch) return send_response(req, pt_problem(500, "the handler returned no response"));
        if (expired_before)   /* it would never end */
            return send_response(req, pt_problem(500, "the handler asked to wait after its wait had expired"));
        pt_wake_reason r = pt_waitset_add(&h->waitset, &req->waiter, req->wait_watch, req->wait_seen,
                                          req->wait_deadline_ms, park_connection, wake_connection, req);
        if (r == PT_WAKE_NONE) {
            req->phase = PT_PHASE_WAITING;
            return MHD_YES;
        }
        if (r != PT_WAKE_CHANGED || retries >= MAX_WAIT_RETRIES) req->wait_expired = 1;
    }
}

/* --- the phases of a request -------------------------------------------------------- */

static uint64_t body_limit(const pt_http *h, const pt_route *route)
{
    return route->body == PT_BODY_FILE ? h->cfg.upload_max : h->cfg.json_max;
}

/* Headers are in: route, authenticate, and prepare to take the body.
 * Returns 0 to continue with the body, or -1 with *resp to send. */
static int request_route(pt_http *h, pt_request *req, pt_response *resp)
{
    char err[256];
    if (pt_request_too_long(req, h->cfg.max_target_bytes, h->cfg.max_header_bytes, resp) != 0) return -1;
    if (h->cfg.same_origin_only) {
        pt_same_origin names = {h->bind_address, h->cfg.host_name, h->cfg.cors_origins};
        if (pt_same_origin_check(&names, pt_request_header(req, MHD_HTTP_HEADER_HOST),
                                 pt_request_header(req, "Origin"), err, sizeof err) != 0) {
            *resp = pt_problem(403, "%s", err);
            return -1;
        }
    }
    if (pt_request_parse(req, err, sizeof err) != 0) {
        *resp = pt_problem(400, "%s", err);
        return -1;
    }
    pt_match m;
    switch (pt_router_match(h->router, req->method, req->path, &m)) {
    case PT_MATCH_BAD_PATH:
        *resp = pt_problem(400, "%s", m.error);
        return -1;
    case PT_MATCH_NO_PATH:
        *resp = pt_problem(404, "there is no resource at '%.200s'", req->path);
        return -1;
    case PT_MATCH_NO_METHOD:
        if (!strcmp(req->method, "OPTIONS")) *resp = pt_response_empty(204);
        else *resp = pt_problem(405, "%s is not allowed on '%.200s'; allowed: %s", req->method, req->path, m.allow);
        pt_response_header(resp, "Allow", m.allow);
        return -1;
    case PT_MATCH_FOUND:
        break;
    }
    memcpy(req->params, m.params, sizeof m.params);
    req->n_params = m.n_params;
    req->route = m.route->pattern;
    req->matched = m.route;
    const pt_route *route = m.route;
    if (pt_router_authenticate(h->router, route, req, resp) != 0) return -1;
    if (route->body == PT_BODY_JSON && pt_request_json_type_ok(req, resp) != 0) return -1;

    int known = 0;
    uint64_t declared = pt_request_content_length(req->conn, &known);
    uint64_t limit = body_limit(h, route);
    if (known && declared > limit) {
        *resp = pt_request_too_large(limit);
        return -1;
    }
    if (route->body == PT_BODY_FILE) {
        const char *ct = pt_request_header(req, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (ct && !strncasecmp(ct, "multipart/form-data", 19)) {
            *resp = pt_problem(415, "multipart/form-data is not accepted here: send the file as the raw "
                                    "request body (curl --data-binary @FILE)");
            return -1;
        }
        if (pt_upload_open(&req->upload, h->upload_dir, limit, err, sizeof err) != 0) {
            *resp = pt_problem(500, "cannot store the upload: %s", err);
            return -1;
        }
    } else {
        pt_body_init(&req->body, limit);
    }
    return 0;
}

static enum MHD_Result request_body(pt_request *req, const char *data, size_t len)
{
    if (req->over_limit || req->body_error[0]) {
        req->discarded += len;
        return req->discarded > DISCARD_MAX ? MHD_NO : MHD_YES;
    }
    const pt_route *route = req->matched;
    int rc;
    if (route->body == PT_BODY_FILE) {
        char err[200];
        rc = pt_upload_write(&req->upload, data, len, err, sizeof err);
        if (rc < 0) snprintf(req->body_error, sizeof req->body_error, "%s", err);
    } else if (route->body == PT_BODY_JSON) {
        rc = pt_body_append(&req->body, data, len);
        if (rc < 0) snprintf(req->body_error, sizeof req->body_error, "out of memory");
    } else {
        /* A body the route does not want is counted, not kept. */
        rc = len > req->body.limit - req->body.len ? 1 : 0;
        if (!rc) req->body.len += len;
    }
    if (rc == 1) req->over_limit = 1;
    if (rc != 0) req->discarded += len;
    return MHD_YES;
}

/* The whole body is in: check it, parse it, run the route. */
static enum MHD_Result request_complete(pt_http *h, pt_request *req)
{
    const pt_route *route = req->matched;
    pt_conn_guard_busy(&h->guard, pt_conn_guard_entry(req->conn));
    if (req->over_limit) return send_response(req, pt_request_too_large(body_limit(h, route)));
    if (req->body_error[0])   /* a full disk is 507 (issue 17 F6), anything else 500 */
        return send_response(req, pt_problem(strstr(req->body_error, strerror(ENOSPC)) ? 507 : 500,
                                             "cannot store the request body: %s", req->body_error));
    if (route->body == PT_BODY_FILE) {
        char err[200];
        if (pt_upload_finish(&req->upload, err, sizeof err) != 0)
            return send_response(req, pt_problem(500, "cannot store the request body: %s", err));
        req->body_path = req->upload.path;
        req->body_size = req->upload.size;
        req->body_sha256 = req->upload.sha256;
    } else if (route->body == PT_BODY_JSON) {
        pt_errors errs;
        pt_errors_init(&errs, 1);
        req->json = pt_body_parse_json(&req->body, &errs);
        req->body_size = req->body.len;
        pt_body_close(&req->body);
        if (!req->json) {
            pt_response r = pt_problem_errors(400, &errs, "the request body is not valid JSON");
            pt_errors_close(&errs);
            return send_response(req, r);
        }
        pt_errors_close(&errs);
    }
    return run_handler(h, req);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)url;       /* already decoded by libmicrohttpd; we route on the raw target */
    (void)version;
    pt_http *h = cls;
    pt_request *req = *con_cls;
    if (!req) return MHD_NO;   /* out of memory when the request began */
    switch (req->phase) {
    case PT_PHASE_NEW: {
        req->conn = conn;
        req->method_copy = strdup(method);
        if (!req->method_copy) return MHD_NO;
        req->method = req->method_copy;
        req->waitset = &h->waitset;
        req->server = h;
        req->phase = PT_PHASE_BODY;
        pt_response resp;
        if (request_route(h, req, &resp) != 0) return send_response(req, resp);
        int known = 0;
        uint64_t declared = pt_request_content_length(conn, &known);
        pt_conn_guard_body(&h->guard, pt_conn_guard_entry(conn), declared, known);
        return MHD_YES;
    }
    case PT_PHASE_BODY:
        if (*upload_data_size) {
            pt_conn_guard_received(&h->guard, pt_conn_guard_entry(conn), *upload_data_size);
            enum MHD_Result rc = request_body(req, upload_data, *upload_data_size);
            *upload_data_size = 0;
            return rc;
        }
        return request_complete(h, req);
    case PT_PHASE_WAITING:
        return run_handler(h, req);
    case PT_PHASE_OFFLOADED:
        return send_response(req, req->offload_result);
    case PT_PHASE_DONE:
        break;
    }
    return MHD_YES;
}

/* --- begin / end of a request: logging and metrics ------------------------------------ */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)conn;
    pt_http *h = cls;
    pt_request *req = pt_request_new(uri);
    if (!req) return NULL;
    req->start_ns = now_ns();
    __atomic_add_fetch(&h->active, 1, __ATOMIC_SEQ_CST);
    if (h->m_in_flight) pt_prom_add(h->m_in_flight, NULL, 1);
    return req;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    pt_http *h = cls;
    pt_request *req = *con_cls;
    if (!req) return;
    int64_t end = now_ns();
    if (h->cfg.access_log) pt_access_log_write(h->cfg.access_log, req, conn, toe, (double)(end - req->start_ns) / 1e6);
    if (h->m_requests && req->status) {
        char status[16];
        snprintf(status, sizeof status, "%d", req->status);
        const char *method = req->method ? req->method : "-";
        const char *route = req->route[0] ? req->route : "(unmatched)";
        const char *labels[] = {method, route, status};
        pt_prom_add(h->m_requests, labels, 1);
        pt_prom_observe(h->m_latency, labels, (double)(req->queued_ns - req->start_ns) / 1e9);
    }
    if (h->m_in_flight) pt_prom_add(h->m_in_flight, NULL, -1);
    pt_conn_guard_idle(&h->guard, pt_conn_guard_entry(conn));
    pt_request_free(req);
    *con_cls = NULL;
    __atomic_sub_fetch(&h->active, 1, __ATOMIC_SEQ_CST);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    pt_http *h = cls;
    if (h->starting) {
        va_list copy;
        va_copy(copy, ap);
        vsnprintf(h->start_error, sizeof h->start_error, fmt, copy);
        va_end(copy);
        size_t n = strlen(h->start_error);
        while (n && h->start_error[n - 1] == '\n') h->start_error[--n] = '\0';
    }
    if (h->cfg.access_log) {
        fputs("libmicrohttpd: ", h->cfg.access_log);
        vfprintf(h->cfg.access_log, fmt, ap);
        fflush(h->cfg.access_log);
    }
}

/* --- start / stop ----------------------------------------------------------------------- */

static int register_metrics(pt_http *h, char *err, size_t errlen)
{
    pt_prom *p = h->cfg.prom;
    if (!p) return 0;
    h->m_requests = pt_prom_counter(p, "packtrain_http_requests_total", "HTTP requests answered.",
                                    "method,route,status");
    if (h->m_requests)
        h->m_latency = pt_prom_histogram(p, "packtrain_http_request_duration_seconds",
                                         "Time from request start to response headers.", "method,route,status",
                                         pt_prom_latency_bounds, pt_prom_latency_n_bounds);
    if (h->m_latency)
        h->m_in_flight = pt_prom_gauge(p, "packtrain_http_requests_in_flight", "Requests being served.", "");
    if (!h->m_in_flight) {
        snprintf(err, errlen, "cannot register HTTP metrics: %s", p->error);
        h->m_requests = h->m_latency = NULL;
        return -1;
    }
    return 0;
}

static void apply_defaults(pt_http_config *c)
{
    pt_http_config d;
    pt_http_config_defaults(&d);
    if (!c->bind_address) c->bind_address = d.bind_address;
    if (!c->threads) c->threads = d.threads;
    if (!c->max_connections) c->max_connections = d.max_connections;
    if (!c->idle_timeout_s) c->idle_timeout_s = d.idle_timeout_s;
    if (!c->header_timeout_ms) c->header_timeout_ms = d.header_timeout_ms;
    if (!c->upload_max) c->upload_max = d.upload_max;
    if (!c->json_max) c->json_max = d.json_max;
    if (!c->heavy_threads) c->heavy_threads = d.heavy_threads;
    if (!c->max_target_bytes) c->max_target_bytes = d.max_target_bytes;
    if (!c->max_header_bytes) c->max_header_bytes = d.max_header_bytes;
}

/* Whether a listener already holds the address: the usual reason a server
 * cannot start (a second `make run`), told in those words rather than
 * libmicrohttpd's.  SO_REUSEADDR as libmicrohttpd sets it, so connections
 * in TIME_WAIT do not count. */
static int port_in_use(const struct sockaddr_storage *addr, int family)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    socklen_t len = family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    int busy = bind(fd, (const struct sockaddr *)addr, len) != 0 && errno == EADDRINUSE;
    close(fd);
    return busy;
}

/* Undoes what pt_http_init set up before the daemon, when it cannot start. */
static void init_undo(pt_http *h)
{
    pt_waitset_close(&h->waitset);
    pt_offload_stop(&h->offload, 0);
    pt_offload_close(&h->offload);
    pt_conn_guard_close(&h->guard);
    if (h->cfg.access_log) pt_mhd_panic_log_release(fileno(h->cfg.access_log));
}

/* While stopping, new connections are closed at once.  Not MHD_quiesce_daemon:
 * with a worker pool and epoll it races the workers to MHD_PANIC (test_http_stop.c). */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void)addr, (void)addrlen;
    return __atomic_load_n(&((pt_http *)cls)->stopping, __ATOMIC_SEQ_CST) ? MHD_NO : MHD_YES;
}

int pt_http_init(pt_http *h, const pt_http_config *cfg, pt_router *router, char *err, size_t errlen)
{
    memset(h, 0, sizeof(*h));
    h->cfg = *cfg;
    apply_defaults(&h->cfg);
    h->router = router;
    snprintf(h->bind_address, sizeof h->bind_address, "%s", h->cfg.bind_address);
    const char *tmp = h->cfg.upload_dir ? h->cfg.upload_dir : getenv("TMPDIR");
    snprintf(h->upload_dir, sizeof h->upload_dir, "%s", tmp && tmp[0] ? tmp : "/tmp");
    if (h->cfg.port > 65535) {
        snprintf(err, errlen, "port %u is out of range (0-65535)", h->cfg.port);
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(h->bind_address, NULL, &hints, &ai);
    if (gai != 0) {
        snprintf(err, errlen, "cannot resolve bind address '%s': %s", h->bind_address, gai_strerror(gai));
        return -1;
    }
    struct sockaddr_storage addr;
    memcpy(&addr, ai->ai_addr, ai->ai_addrlen);
    int family = ai->ai_family;
    freeaddrinfo(ai);
    if (family == AF_INET) ((struct sockaddr_in *)&addr)->sin_port = htons((uint16_t)h->cfg.port);
    else ((struct sockaddr_in6 *)&addr)->sin6_port = htons((uint16_t)h->cfg.port);

    if (register_metrics(h, err, errlen) != 0) return -1;
    if (pt_waitset_init(&h->waitset, err, errlen) != 0) return -1;
    if (pt_offload_init(&h->offload, h->cfg.heavy_threads, h->cfg.heavy_queue,
                        (int64_t)h->cfg.heavy_deadline_s * 1000, resume_offloaded, h->cfg.prom, err, errlen) != 0) {
        pt_waitset_close(&h->waitset);
        return -1;
    }
    if (pt_conn_guard_init(&h->guard, h->cfg.header_timeout_ms, h->cfg.body_min_rate, h->cfg.access_log, err,
                           errlen) != 0) {
        pt_waitset_close(&h->waitset);
        pt_offload_stop(&h->offload, 0);
        pt_offload_close(&h->offload);
        return -1;
    }

    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (family == AF_INET6) {
        /* "::" means every address, IPv4 ones included. */
        int any = IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&addr)->sin6_addr);
        flags |= any ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
    }
    pt_mhd_panic_install();
    /* a panic's message reaches the operator's log, not only stderr */
    if (h->cfg.access_log) pt_mhd_panic_log(fileno(h->cfg.access_log));
    h->starting = 1;
    h->daemon = MHD_start_daemon(flags, (uint16_t)h->cfg.port, on_accept, h, on_request, h,
                                 MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,
                                 MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                 MHD_OPTION_THREAD_POOL_SIZE, h->cfg.threads,
                                 MHD_OPTION_CONNECTION_LIMIT, h->cfg.max_connections,
                                 MHD_OPTION_PER_IP_CONNECTION_LIMIT, h->cfg.max_per_ip,
                                 MHD_OPTION_CONNECTION_TIMEOUT, h->cfg.idle_timeout_s,
                                 /* room for our own 414/431 limits first */
                                 MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                 (size_t)(h->cfg.max_target_bytes + h->cfg.max_header_bytes) * 2 + 32768,
                                 MHD_OPTION_URI_LOG_CALLBACK, on_uri, h,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                                 MHD_OPTION_NOTIFY_CONNECTION, pt_conn_guard_notify, &h->guard,
                                 MHD_OPTION_END);
    h->starting = 0;
    if (!h->daemon && h->cfg.port != 0 && port_in_use(&addr, family)) {
        snprintf(err, errlen, "port %u on %s is already in use (another packtrain, or another server?): stop it, "
                 "or choose another port with --port N or PACKTRAIN_PORT=N",
                 h->cfg.port, h->bind_address);
        init_undo(h);
        return -1;
    }
    if (!h->daemon) {
        snprintf(err, errlen, "cannot start the HTTP server on %s port %u: %s", h->bind_address, h->cfg.port,
                 h->start_error[0] ? h->start_error : "libmicrohttpd refused the configuration");
        init_undo(h);
        return -1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : h->cfg.port;
    return 0;
}

unsigned pt_http_port(const pt_http *h)
{
    return h->port;
}

void pt_http_close(pt_http *h)
{
    if (!h->daemon) return;
    __atomic_store_n(&h->stopping, 1, __ATOMIC_SEQ_CST);
    /* Parked long-polls answer now and event streams end, so they count as
     * finished work rather than holding the shutdown for their full timeout. */
    pt_waitset_drain(&h->waitset);
    int64_t deadline = pt_clock_ms() + h->cfg.stop_grace_ms;
    /* queued heavy work is answered 503 now; running work is cancelled at
     * the deadline and answers 503 at its next check */
    pt_offload_stop(&h->offload, deadline);
    while (__atomic_load_n(&h->active, __ATOMIC_SEQ_CST) > 0 && pt_clock_ms() < deadline) usleep(2000);
    /* libmicrohttpd must not stop with a connection suspended: the heavy
     * work left ends at its next check, and its answer goes out */
    pt_offload_close(&h->offload);
    int64_t flush = pt_clock_ms() + 1000;
    while (__atomic_load_n(&h->active, __ATOMIC_SEQ_CST) > 0 && pt_clock_ms() < flush) usleep(2000);
    MHD_stop_daemon(h->daemon);   /* closes the listen socket too */
    h->daemon = NULL;
    if (h->cfg.access_log) pt_mhd_panic_log_release(fileno(h->cfg.access_log));
    pt_waitset_close(&h->waitset);
    pt_conn_guard_close(&h->guard);
}
