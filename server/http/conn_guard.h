/* conn_guard.h — deadlines per connection that trickled bytes cannot push
 * back (issue 17 item 6: slow-loris).
 *
 * libmicrohttpd's own timeout (MHD_OPTION_CONNECTION_TIMEOUT) counts from
 * the connection's last activity, so a client sending one byte a second
 * keeps a connection, a slot of the per-client limit and a pool of memory
 * for ever.  The guard counts from fixed points instead:
 *
 *   headers  a connection must deliver a request's complete headers within
 *            `header_ms` of being accepted, or of the end of its previous
 *            request (keep-alive);
 *   body     then its body within header_ms + Content-Length / min_rate
 *            (a floor rate); a body of unknown length (chunked) must keep
 *            that average rate: header_ms + received / min_rate;
 *   busy     while the request is handled and answered: no deadline here
 *            (heavy work has its own, offload.h; idle sockets libmicrohttpd's).
 *
 * libmicrohttpd calls the application only once the headers are in, so a
 * connection still trickling them cannot be refused from a callback: a
 * thread of the guard wakes a few times a second and shuts down the socket
 * of a connection past its deadline (shutdown(2), not close: the descriptor
 * stays libmicrohttpd's, which then sees the end of the stream and closes
 * the connection as usual, reporting it to MHD_OPTION_NOTIFY_COMPLETED).
 * Entries are made and dropped from MHD_OPTION_NOTIFY_CONNECTION, under the
 * guard's mutex, and libmicrohttpd closes the descriptor only after the
 * "closed" notification returns, so the guard never touches a descriptor
 * that has been reused.
 *
 *   pt_conn_guard g;
 *   pt_conn_guard_init(&g, 30000, 4096, log, err, sizeof err);
 *   e = pt_conn_guard_open(&g, fd, "127.0.0.1");    // connection accepted
 *   pt_conn_guard_body(&g, e, content_length, known); // headers in
 *   pt_conn_guard_busy(&g, e);                        // body in
 *   pt_conn_guard_idle(&g, e);                        // request ended
 *   pt_conn_guard_end(&g, e);                         // connection closed
 *   pt_conn_guard_close(&g); */
#ifndef PT_CONN_GUARD_H
#define PT_CONN_GUARD_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

typedef enum pt_conn_stage { PT_CONN_HEADERS, PT_CONN_BODY, PT_CONN_BUSY } pt_conn_stage;

typedef struct pt_conn_entry {
    struct pt_conn_entry *prev, *next;
    int fd;
    pt_conn_stage stage;
    int64_t since_ms;          /* start of the stage (pt_clock_ms) */
    int64_t deadline_ms;       /* 0 = none */
    int length_known;          /* body: Content-Length was given */
    uint64_t received;         /* body bytes so far, for a body of unknown length */
    int cut;                   /* shut down by the guard */
    char client[48];           /* address, for the log line */
} pt_conn_entry;

typedef struct pt_conn_guard {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int started, stopping;
    pt_conn_entry *head;
    int64_t header_ms;         /* 0: no deadlines (the guard does nothing) */
    uint64_t min_rate;         /* body bytes per second owed; 0: no body deadline */
    uint64_t cut_headers, cut_body;   /* connections closed at a deadline */
    FILE *log;                 /* a line per connection closed; NULL: none */
} pt_conn_guard;

/* The body's deadline: from `since_ms`, header_ms plus `bytes` at min_rate
 * bytes per second (saturating; 0 = none when min_rate is 0). */
int64_t pt_conn_body_deadline(int64_t since_ms, int64_t header_ms, uint64_t min_rate, uint64_t bytes);

int pt_conn_guard_init(pt_conn_guard *g, int64_t header_ms, uint64_t min_rate, FILE *log, char *err,
                       size_t errlen);
/* Stops the thread; entries still open are freed by their pt_conn_guard_end. */
void pt_conn_guard_close(pt_conn_guard *g);

/* A connection accepted on `fd`: its headers are due in header_ms.  NULL when
 * out of memory or when the guard is off (then every call below is a no-op). */
pt_conn_entry *pt_conn_guard_open(pt_conn_guard *g, int fd, const char *client);
/* Its headers are in: the body (of `length` bytes when `known`) is due. */
void pt_conn_guard_body(pt_conn_guard *g, pt_conn_entry *e, uint64_t length, int known);
/* `n` more body bytes came (moves the deadline of a body of unknown length). */
void pt_conn_guard_received(pt_conn_guard *g, pt_conn_entry *e, uint64_t n);
/* The body is in (or an answer was queued): no deadline while it is served. */
void pt_conn_guard_busy(pt_conn_guard *g, pt_conn_entry *e);
/* The request ended: the next one's headers are due in header_ms. */
void pt_conn_guard_idle(pt_conn_guard *g, pt_conn_entry *e);
/* The connection is closed: forget it (frees e). */
void pt_conn_guard_end(pt_conn_guard *g, pt_conn_entry *e);

/* libmicrohttpd's side: MHD_OPTION_NOTIFY_CONNECTION with the guard as its
 * closure opens and ends the entries, kept as each connection's socket
 * context, which pt_conn_guard_entry finds again. */
void pt_conn_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code);
pt_conn_entry *pt_conn_guard_entry(struct MHD_Connection *conn);

#endif
