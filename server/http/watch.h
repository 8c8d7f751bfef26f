/* watch.h — "wait for change": a version counter others can wait on.
 *
 * Whoever changes watched state (the scheduler when a job moves, the store when
 * a metric row lands) calls pt_watch_bump().  A waiter says which version it
 * has seen and wakes as soon as the version differs or its deadline passes.
 *
 * Two kinds of waiters share one watch:
 *   - threads block in pt_watch_wait() on a condition variable;
 *   - pt_waiter entries, registered through a pt_waitset, get a callback.  The
 *     HTTP layer uses these to park a connection (long-poll, SSE) without
 *     holding a thread; the waitset's timer thread fires them at their deadline.
 *
 * A waiter fires exactly once per registration (changed, timeout or closed).
 * Wake callbacks run with the watch lock held and must only signal (e.g. call
 * MHD_resume_connection); they must not call back into this module. */
#ifndef PT_WATCH_H
#define PT_WATCH_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef enum pt_wake_reason {
    PT_WAKE_NONE = 0,
    PT_WAKE_CHANGED,   /* the version moved past the one seen */
    PT_WAKE_TIMEOUT,   /* the deadline passed */
    PT_WAKE_CLOSED     /* the waitset is shutting down */
} pt_wake_reason;

typedef struct pt_waiter pt_waiter;
typedef struct pt_waitset pt_waitset;
typedef void (*pt_wake_fn)(void *data, pt_wake_reason reason);

typedef struct pt_watch {
    uint64_t version;
    pthread_cond_t cond;   /* for pt_watch_wait */
    pt_waiter *waiters;    /* registered callback waiters */
} pt_watch;

/* Storage for one registration; owned by the caller, who must keep it alive
 * until the callback has fired.  Fields are private to watch.c. */
struct pt_waiter {
    pt_watch *watch;
    pt_waitset *set;
    pt_waiter *wprev, *wnext;  /* in watch->waiters */
    pt_waiter *sprev, *snext;  /* in set->waiters */
    int64_t deadline_ms;
    pt_wake_fn wake;
    void *data;
};

struct pt_waitset {
    pt_waiter *waiters;
    pthread_cond_t cond;   /* wakes the timer thread */
    pthread_t thread;
    int closing;
    int started;
};

void pt_watch_init(pt_watch *w);
/* The watch must have no registered waiters left. */
void pt_watch_close(pt_watch *w);
uint64_t pt_watch_version(pt_watch *w);
/* Moves the version on and wakes every waiter; returns the new version. */
uint64_t pt_watch_bump(pt_watch *w);
/* Blocks until the version differs from `seen` or timeout_ms passes (<0:
 * forever); returns the version at wake-up (== seen on timeout). */
uint64_t pt_watch_wait(pt_watch *w, uint64_t seen, int timeout_ms);

int pt_waitset_init(pt_waitset *s, char *err, size_t errlen);
/* Fires every registered waiter with PT_WAKE_CLOSED and refuses new ones. */
void pt_waitset_drain(pt_waitset *s);
/* Drains, then stops the timer thread. */
void pt_waitset_close(pt_waitset *s);

/* Registers `w` to fire `wake(data, reason)` once `watch` moves past `seen`
 * or at `deadline_ms` (pt_clock_ms() scale).  Returns PT_WAKE_NONE when the
 * waiter is armed; `park(data)` is then called under the lock, before anyone
 * can fire it.  Otherwise nothing is registered and the reason is returned
 * (already changed, already past the deadline, or the set is closing). */
pt_wake_reason pt_waitset_add(pt_waitset *s, pt_waiter *w, pt_watch *watch, uint64_t seen,
                              int64_t deadline_ms, void (*park)(void *data),
                              pt_wake_fn wake, void *data);
/* Number of armed waiters (for tests and the metrics page). */
size_t pt_waitset_count(pt_waitset *s);

/* Monotonic clock in milliseconds. */
int64_t pt_clock_ms(void);

#endif
