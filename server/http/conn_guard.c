/* conn_guard.c — per-connection header and body deadlines; see conn_guard.h. */
#include "server/http/conn_guard.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server/http/access_log.h"
#include "server/http/watch.h"

/* The thread looks at the deadlines this often at most: a connection is cut
 * at most this late. */
#define TICK_MS 200

int64_t pt_conn_body_deadline(int64_t since_ms, int64_t header_ms, uint64_t min_rate, uint64_t bytes)
{
    if (!min_rate) return 0;
    /* bytes * 1000 / rate without overflow: a declared length may be 2^64-1 */
    uint64_t whole = bytes / min_rate, part = bytes % min_rate;
    const uint64_t cap = (uint64_t)INT64_MAX / 2000;
    if (whole >= cap) return INT64_MAX;
    int64_t ms = (int64_t)(whole * 1000 + part * 1000 / min_rate);
    return since_ms + header_ms + ms;
}

/* Called with g->mu held. */
static void set_stage(pt_conn_guard *g, pt_conn_entry *e, pt_conn_stage stage)
{
    e->stage = stage;
    e->since_ms = pt_clock_ms();
    e->received = 0;
    switch (stage) {
    case PT_CONN_HEADERS: e->deadline_ms = e->since_ms + g->header_ms; break;
    case PT_CONN_BODY: e->deadline_ms = 0; break;   /* the caller sets it */
    case PT_CONN_BUSY: e->deadline_ms = 0; break;
    }
}

static void log_cut(pt_conn_guard *g, const pt_conn_entry *e, int64_t now)
{
    if (e->stage == PT_CONN_HEADERS)
        fprintf(g->log, "connection from %s closed: its request headers were not complete within %.1f s\n",
                e->client, (double)g->header_ms / 1000);
    else
        fprintf(g->log, "connection from %s closed: its request body was not complete %.1f s after its headers "
                "(%.1f s plus one per %llu bytes)\n", e->client, (double)(now - e->since_ms) / 1000,
                (double)g->header_ms / 1000, (unsigned long long)g->min_rate);
    fflush(g->log);
}

static void cut(pt_conn_guard *g, pt_conn_entry *e, int64_t now)
{
    /* Count and log before the shutdown: whoever sees the socket close (a test, the client)
     * must find the cut already recorded. */
    e->cut = 1;
    if (e->stage == PT_CONN_HEADERS) g->cut_headers++;
    else g->cut_body++;
    if (g->log) log_cut(g, e, now);
    shutdown(e->fd, SHUT_RDWR);
}


static void *guard_main(void *arg)
{
    pt_conn_guard *g = arg;
    int64_t tick = g->header_ms / 4 < TICK_MS ? (g->header_ms / 4 > 10 ? g->header_ms / 4 : 10) : TICK_MS;
    pthread_mutex_lock(&g->mu);
    while (!g->stopping) {
        int64_t now = pt_clock_ms();
        for (pt_conn_entry *e = g->head; e; e = e->next)
            if (!e->cut && e->deadline_ms && now >= e->deadline_ms) cut(g, e, now);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += (long)(tick % 1000) * 1000000;
        ts.tv_sec += tick / 1000 + ts.tv_nsec / 1000000000;
        ts.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int pt_conn_guard_init(pt_conn_guard *g, int64_t header_ms, uint64_t min_rate, FILE *log, char *err,
                       size_t errlen)
{
    memset(g, 0, sizeof(*g));
    g->header_ms = header_ms > 0 ? header_ms : 0;
    g->min_rate = min_rate;
    g->log = log;
    if (!g->header_ms) return 0;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_mutex_init(&g->mu, NULL);
    if (!rc) rc = pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (!rc) rc = pthread_create(&g->thread, NULL, guard_main, g);
    if (rc) {
        snprintf(err, errlen, "cannot start the connection deadline thread: %s", strerror(rc));
        return -1;
    }
    g->started = 1;
    return 0;
}

void pt_conn_guard_close(pt_conn_guard *g)
{
    if (!g->started) return;
    pthread_mutex_lock(&g->mu);
    g->stopping = 1;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    g->started = 0;
}

pt_conn_entry *pt_conn_guard_open(pt_conn_guard *g, int fd, const char *client)
{
    if (!g->header_ms) return NULL;
    pt_conn_entry *e = calloc(1, sizeof(*e));
    if (!e) return NULL;
    e->fd = fd;
    snprintf(e->client, sizeof e->client, "%s", client ? client : "-");
    pthread_mutex_lock(&g->mu);
    set_stage(g, e, PT_CONN_HEADERS);
    e->next = g->head;
    if (g->head) g->head->prev = e;
    g->head = e;
    pthread_mutex_unlock(&g->mu);
    return e;
}

void pt_conn_guard_body(pt_conn_guard *g, pt_conn_entry *e, uint64_t length, int known)
{
    if (!e) return;
    pthread_mutex_lock(&g->mu);
    set_stage(g, e, PT_CONN_BODY);
    e->length_known = known;
    e->deadline_ms = pt_conn_body_deadline(e->since_ms, g->header_ms, g->min_rate, known ? length : 0);
    pthread_mutex_unlock(&g->mu);
}

void pt_conn_guard_received(pt_conn_guard *g, pt_conn_entry *e, uint64_t n)
{
    if (!e) return;
    pthread_mutex_lock(&g->mu);
    if (e->stage == PT_CONN_BODY && !e->length_known) {
        e->received += n;
        e->deadline_ms = pt_conn_body_deadline(e->since_ms, g->header_ms, g->min_rate, e->received);
    }
    pthread_mutex_unlock(&g->mu);
}

void pt_conn_guard_busy(pt_conn_guard *g, pt_conn_entry *e)
{
    if (!e) return;
    pthread_mutex_lock(&g->mu);
    set_stage(g, e, PT_CONN_BUSY);
    pthread_mutex_unlock(&g->mu);
}

void pt_conn_guard_idle(pt_conn_guard *g, pt_conn_entry *e)
{
    if (!e) return;
    pthread_mutex_lock(&g->mu);
    set_stage(g, e, PT_CONN_HEADERS);
    pthread_mutex_unlock(&g->mu);
}

void pt_conn_guard_end(pt_conn_guard *g, pt_conn_entry *e)
{
    if (!e) return;
    pthread_mutex_lock(&g->mu);
    if (e->prev) e->prev->next = e->next;
    else g->head = e->next;
    if (e->next) e->next->prev = e->prev;
    pthread_mutex_unlock(&g->mu);
    free(e);
}

pt_conn_entry *pt_conn_guard_entry(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void pt_conn_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    pt_conn_guard *g = cls;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        pt_conn_guard_end(g, *socket_context);
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return;
    char client[48];
    pt_http_client_address(conn, client, sizeof client);
    *socket_context = pt_conn_guard_open(g, ci->connect_fd, client);
}
