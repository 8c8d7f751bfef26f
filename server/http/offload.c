/* offload.c — the pool that runs heavy handlers off the HTTP threads; see
 * offload.h.  A request is counted from pt_offload_reserve (on an HTTP
 * thread, before its connection is suspended) until its handler returned
 * and the server was asked to resume it; pt_offload_busy is that count, and
 * pt_http_close waits for it to reach zero before stopping libmicrohttpd,
 * which must not be stopped with a connection still suspended. */
#include "server/http/offload.h"

#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/http/router.h"
#include "server/http/watch.h"

/* How often a running work looks at its client's socket, at most. */
#define GONE_CHECK_MS 100

static void account(pt_offload *o)
{
    if (o->m_busy) pt_prom_set(o->m_busy, NULL, (double)(o->running + o->waiting));
}

static void finish(pt_offload *o, pt_request *req, pt_response resp)
{
    req->offload_result = resp;
    o->resume(req);
}

static void *pool_main(void *arg)
{
    pt_offload *o = arg;
    pthread_mutex_lock(&o->mu);
    for (;;) {
        while (!o->head && !o->closing) pthread_cond_wait(&o->cv, &o->mu);
        if (!o->head) break;
        pt_request *req = o->head;
        o->head = req->offload_next;
        if (!o->head) o->tail = NULL;
        o->waiting--;
        o->running++;
        pthread_mutex_unlock(&o->mu);

        req->work_start_ms = pt_clock_ms();
        const pt_route *route = req->matched;
        pt_response resp = route->handler(req, route->ctx);
        if (resp.status == 0 && !resp.mhd) resp = pt_problem(500, "the handler returned no response");
        finish(o, req, resp);

        pthread_mutex_lock(&o->mu);
        o->running--;
        account(o);
        pthread_cond_broadcast(&o->idle_cv);
    }
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

int pt_offload_init(pt_offload *o, unsigned threads, unsigned queue, int64_t deadline_ms,
                    void (*resume)(pt_request *req), pt_prom *prom, char *err, size_t errlen)
{
    memset(o, 0, sizeof(*o));
    if (threads < 1 || threads > 256) {
        snprintf(err, errlen, "heavy-work threads must be within 1..256, got %u", threads);
        return -1;
    }
    o->n_threads = threads;
    o->queue_max = queue;
    o->deadline_ms = deadline_ms > 0 ? deadline_ms : 0;
    o->resume = resume;
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    pthread_cond_init(&o->idle_cv, NULL);
    if (prom) {
        o->m_busy = pt_prom_gauge(prom, "packtrain_http_heavy_requests",
                                  "Heavy requests (uploads, packing reports, predictions) running or queued.", "");
        if (o->m_busy)
            o->m_refused = pt_prom_counter(prom, "packtrain_http_heavy_refused_total",
                                           "Heavy requests answered 503 because the pool and its queue were full.", "");
        if (o->m_refused)
            o->m_cancelled = pt_prom_counter(prom, "packtrain_http_heavy_cancelled_total",
                                             "Heavy requests given up before their work was done, by reason.",
                                             "reason");
        if (!o->m_cancelled) {
            snprintf(err, errlen, "cannot register the heavy-work metrics: %s", prom->error);
            goto fail;
        }
    }
    o->thread = calloc(threads, sizeof(pthread_t));
    if (!o->thread) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (unsigned i = 0; i < threads; i++) {
        if (pthread_create(&o->thread[i], NULL, pool_main, o) != 0) {
            snprintf(err, errlen, "cannot start a heavy-work thread");
            o->n_threads = i;
            pt_offload_stop(o, 0);
            pt_offload_close(o);
            return -1;
        }
    }
    return 0;
fail:
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->cv);
    pthread_cond_destroy(&o->idle_cv);
    return -1;
}

int pt_offload_reserve(pt_offload *o, pt_cancel_reason *why)
{
    pthread_mutex_lock(&o->mu);
    int rc = 0;
    *why = PT_CANCEL_NONE;
    if (o->stopping) {
        *why = PT_CANCEL_STOPPING;
        rc = -1;
    } else if (o->running + o->waiting >= o->n_threads + o->queue_max) {
        rc = -1;
        if (o->m_refused) pt_prom_add(o->m_refused, NULL, 1);
    } else {
        o->waiting++;
        account(o);
    }
    pthread_mutex_unlock(&o->mu);
    return rc;
}

void pt_offload_push(pt_offload *o, pt_request *req)
{
    req->offload = o;
    req->offload_next = NULL;
    pthread_mutex_lock(&o->mu);
    if (o->stopping) {
        /* stopped between the reservation and now: answered like the queue */
        o->waiting--;
        account(o);
        pthread_cond_broadcast(&o->idle_cv);
        pthread_mutex_unlock(&o->mu);
        finish(o, req, pt_offload_refused(PT_CANCEL_STOPPING));
        return;
    }
    if (o->tail) o->tail->offload_next = req;
    else o->head = req;
    o->tail = req;
    pthread_cond_signal(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

void pt_offload_stop(pt_offload *o, int64_t deadline_ms)
{
    pthread_mutex_lock(&o->mu);
    o->stopping = 1;
    __atomic_store_n(&o->stop_deadline_ms, deadline_ms, __ATOMIC_SEQ_CST);
    pt_request *queued = o->head;
    o->head = o->tail = NULL;
    pthread_mutex_unlock(&o->mu);
    /* answered outside the lock: resuming takes libmicrohttpd's own */
    while (queued) {
        pt_request *next = queued->offload_next;
        finish(o, queued, pt_offload_refused(PT_CANCEL_STOPPING));
        pthread_mutex_lock(&o->mu);
        o->waiting--;
        account(o);
        pthread_cond_broadcast(&o->idle_cv);
        pthread_mutex_unlock(&o->mu);
        queued = next;
    }
}

unsigned pt_offload_busy(pt_offload *o)
{
    pthread_mutex_lock(&o->mu);
    unsigned n = o->running + o->waiting;
    pthread_mutex_unlock(&o->mu);
    return n;
}

void pt_offload_close(pt_offload *o)
{
    pthread_mutex_lock(&o->mu);
    while (o->running + o->waiting > 0) pthread_cond_wait(&o->idle_cv, &o->mu);
    o->closing = 1;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    for (unsigned i = 0; i < o->n_threads; i++) pthread_join(o->thread[i], NULL);
    free(o->thread);
    o->thread = NULL;
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->cv);
    pthread_cond_destroy(&o->idle_cv);
}

/* The peer closed its side (or the socket failed): POLLRDHUP without data
 * still to read, or an error.  A client that sent its request and waits
 * for the answer keeps its side open. */
static int client_gone(pt_request *req)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

pt_cancel_reason pt_request_cancelled(pt_request *req)
{
    if (req->cancelled) return (pt_cancel_reason)req->cancelled;
    pt_offload *o = req->offload;
    if (!o) return PT_CANCEL_NONE;
    int64_t now = pt_clock_ms();
    int64_t stop = __atomic_load_n(&o->stop_deadline_ms, __ATOMIC_SEQ_CST);
    if (stop && now >= stop) req->cancelled = PT_CANCEL_STOPPING;
    else if (o->deadline_ms && now - req->work_start_ms >= o->deadline_ms) req->cancelled = PT_CANCEL_DEADLINE;
    else if (now - req->gone_checked_ms >= GONE_CHECK_MS) {
        req->gone_checked_ms = now;
        if (client_gone(req)) req->cancelled = PT_CANCEL_CLIENT_GONE;
    }
    if (req->cancelled && o->m_cancelled) {
        static const char *const names[] = {"", "client_gone", "deadline", "stopping"};
        const char *labels[] = {names[req->cancelled]};
        pt_prom_add(o->m_cancelled, labels, 1);
    }
    return (pt_cancel_reason)req->cancelled;
}

int pt_request_should_stop(void *user)
{
    return pt_request_cancelled(user) != PT_CANCEL_NONE;
}

static pt_response unavailable(const char *detail)
{
    pt_response r = pt_problem(503, "%s", detail);
    char s[16];
    snprintf(s, sizeof s, "%d", PT_OFFLOAD_RETRY_AFTER_S);
    pt_response_header(&r, "Retry-After", s);
    return r;
}

pt_response pt_request_cancelled_response(pt_request *req)
{
    pt_offload *o = req->offload;
    switch ((pt_cancel_reason)req->cancelled) {
    case PT_CANCEL_DEADLINE: {
        char d[200];
        snprintf(d, sizeof d, "the request was given up after %.0f s, this server's limit on the work of one "
                 "request; send less at once", o ? (double)o->deadline_ms / 1000.0 : 0.0);
        return unavailable(d);
    }
    case PT_CANCEL_STOPPING: return unavailable("the server is stopping; retry once it is back");
    case PT_CANCEL_CLIENT_GONE: return unavailable("the client closed its connection; the work was given up");
    case PT_CANCEL_NONE: break;
    }
    return unavailable("the request was given up");
}

pt_response pt_offload_refused(pt_cancel_reason why)
{
    if (why == PT_CANCEL_STOPPING) return unavailable("the server is stopping; retry once it is back");
    return unavailable("the server is busy with as many uploads, packing reports and predictions as it "
                       "runs at once; retry after Retry-After seconds");
}
