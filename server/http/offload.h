/* offload.h — heavy request work off the HTTP threads: a bounded pool of
 * threads of its own, the request waiting meanwhile without a thread.
 *
 * A route flagged PT_ROUTE_HEAVY (router.h: importing an upload, planning
 * the packs of a dataset, running a model) is not run on libmicrohttpd's
 * threads.  Once its body is in, the connection is suspended
 * (MHD_suspend_connection: no HTTP thread waits for it), the handler runs on
 * a thread of this pool, and the response it returns is sent when the
 * connection is resumed.  At most `threads` handlers run at once and
 * `queue` more wait their turn; past that a request is answered 503 with
 * Retry-After at once.  So a burst of heavy calls can neither hold the HTTP
 * threads (/healthz, /readyz and every cheap route keep answering) nor pile
 * up without bound.
 *
 * libuv's threadpool is not used: it is one pool for the whole process,
 * shared with the scheduler's loop, which a few long packing calls would
 * then starve.
 *
 * Handlers give up when pt_request_cancelled() says so; they ask between
 * units of work (structures ingested, packs run, phases of a plan):
 *   PT_CANCEL_CLIENT_GONE  the client closed its connection: nobody would
 *                          read the answer, so the work is not worth doing;
 *   PT_CANCEL_DEADLINE     the work ran past the operator's deadline
 *                          (pt_offload_init's deadline_ms);
 *   PT_CANCEL_STOPPING     the server is stopping and its grace is over.
 * pt_request_cancelled_response() is the 503 (Retry-After) to answer then.
 * When the server stops, requests still waiting for a thread are answered
 * 503 at once, and running ones get until the stop's deadline. */
#ifndef PT_OFFLOAD_H
#define PT_OFFLOAD_H

#include <pthread.h>
#include <stdint.h>

#include "server/http/prom.h"
#include "server/http/request.h"

#define PT_OFFLOAD_RETRY_AFTER_S 5

typedef enum pt_cancel_reason {
    PT_CANCEL_NONE = 0,
    PT_CANCEL_CLIENT_GONE,
    PT_CANCEL_DEADLINE,
    PT_CANCEL_STOPPING
} pt_cancel_reason;

typedef struct pt_offload {
    pthread_mutex_t mu;
    pthread_cond_t cv, idle_cv;
    pthread_t *thread;
    unsigned n_threads, queue_max;
    unsigned running, waiting;      /* admitted: on a thread, in the queue (or about to be) */
    pt_request *head, *tail;        /* the queue, linked by req->offload_next */
    int64_t deadline_ms;            /* of each work from its start; 0 = none */
    int stopping;                   /* refuses new work; queued work answered 503 */
    int64_t stop_deadline_ms;       /* running work cancelled past it (pt_clock_ms) */
    int closing;
    void (*resume)(pt_request *req);   /* the server's: hands the connection back */
    pt_prom_metric *m_busy, *m_refused, *m_cancelled;
} pt_offload;

/* threads >= 1, queue >= 0; deadline_ms 0 = work has no deadline.  prom
 * may be NULL.  resume is called (on a pool thread) once a request's
 * response is in req->offload_result.  -1 with a message. */
int pt_offload_init(pt_offload *o, unsigned threads, unsigned queue, int64_t deadline_ms,
                    void (*resume)(pt_request *req), pt_prom *prom, char *err, size_t errlen);
/* Takes a place for one more work: 0, or -1 when the pool and its queue are
 * full or the server is stopping (*why says which: PT_CANCEL_STOPPING or
 * PT_CANCEL_NONE for full).  The caller then suspends the connection and
 * calls pt_offload_push. */
int pt_offload_reserve(pt_offload *o, pt_cancel_reason *why);
/* Queues req (its place reserved) to run its route's handler. */
void pt_offload_push(pt_offload *o, pt_request *req);
/* From now on refuses new work, answers queued work 503, and cancels
 * running work at deadline_ms (pt_clock_ms scale). */
void pt_offload_stop(pt_offload *o, int64_t deadline_ms);
/* Work admitted and not finished (running or queued). */
unsigned pt_offload_busy(pt_offload *o);
/* Waits until no work is left; the threads end.  After pt_offload_stop. */
void pt_offload_close(pt_offload *o);

/* For a heavy handler: why the request should be given up now, or
 * PT_CANCEL_NONE.  Cheap enough to ask every few milliseconds of work. */
pt_cancel_reason pt_request_cancelled(pt_request *req);
/* The same as a callback for engine loops (ingest's should_stop, ...):
 * user is the pt_request. */
int pt_request_should_stop(void *user);
/* The 503 (with Retry-After) saying why the request was given up. */
pt_response pt_request_cancelled_response(pt_request *req);
/* The 503 for a request refused at admission. */
pt_response pt_offload_refused(pt_cancel_reason why);

#endif
