/* watch.c — version counters with blocking and callback waiters; see watch.h.
 *
 * One lock guards every watch and every waitset.  Bumps and waits are rare
 * next to request handling, and a single lock makes the "fires exactly once"
 * rule easy to see: a waiter is unlinked from both of its lists under the lock
 * by whoever fires it, and its callback runs before the lock is released, so
 * the owner can never free it while another thread still looks at it. */
#include "server/http/watch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;

int64_t pt_clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(c, &attr);
    pthread_condattr_destroy(&attr);
}

static struct timespec deadline_timespec(int64_t deadline_ms)
{
    struct timespec ts = {.tv_sec = deadline_ms / 1000, .tv_nsec = (deadline_ms % 1000) * 1000000};
    return ts;
}

void pt_watch_init(pt_watch *w)
{
    memset(w, 0, sizeof(*w));
    cond_init_monotonic(&w->cond);
}

void pt_watch_close(pt_watch *w)
{
    pthread_cond_destroy(&w->cond);
    memset(w, 0, sizeof(*w));
}

uint64_t pt_watch_version(pt_watch *w)
{
    pthread_mutex_lock(&watch_lock);
    uint64_t v = w->version;
    pthread_mutex_unlock(&watch_lock);
    return v;
}

/* Unlinks a waiter from both lists; caller holds the lock. */
static void waiter_unlink(pt_waiter *x)
{
    if (x->wprev) x->wprev->wnext = x->wnext;
    else x->watch->waiters = x->wnext;
    if (x->wnext) x->wnext->wprev = x->wprev;
    if (x->sprev) x->sprev->snext = x->snext;
    else x->set->waiters = x->snext;
    if (x->snext) x->snext->sprev = x->sprev;
    x->wprev = x->wnext = x->sprev = x->snext = NULL;
}

static void waiter_fire(pt_waiter *x, pt_wake_reason reason)
{
    waiter_unlink(x);
    x->wake(x->data, reason);
}

uint64_t pt_watch_bump(pt_watch *w)
{
    pthread_mutex_lock(&watch_lock);
    uint64_t v = ++w->version;
    while (w->waiters) waiter_fire(w->waiters, PT_WAKE_CHANGED);
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&watch_lock);
    return v;
}

uint64_t pt_watch_wait(pt_watch *w, uint64_t seen, int timeout_ms)
{
    int64_t deadline = pt_clock_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
    struct timespec ts = deadline_timespec(deadline);
    pthread_mutex_lock(&watch_lock);
    while (w->version == seen) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&w->cond, &watch_lock);
        } else if (pthread_cond_timedwait(&w->cond, &watch_lock, &ts) == ETIMEDOUT) {
            break;
        }
    }
    uint64_t v = w->version;
    pthread_mutex_unlock(&watch_lock);
    return v;
}

/* The timer thread: fires waiters whose deadline passed, then sleeps until
 * the earliest remaining deadline (or until a new waiter arrives). */
static void *waitset_timer(void *arg)
{
    pt_waitset *s = arg;
    pthread_mutex_lock(&watch_lock);
    while (!s->closing) {
        int64_t now = pt_clock_ms();
        int64_t next = now + 3600 * 1000;
        pt_waiter *x = s->waiters;
        while (x) {
            pt_waiter *after = x->snext;
            if (x->deadline_ms <= now) waiter_fire(x, PT_WAKE_TIMEOUT);
            else if (x->deadline_ms < next) next = x->deadline_ms;
            x = after;
        }
        struct timespec ts = deadline_timespec(next);
        pthread_cond_timedwait(&s->cond, &watch_lock, &ts);
    }
    pthread_mutex_unlock(&watch_lock);
    return NULL;
}

int pt_waitset_init(pt_waitset *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    cond_init_monotonic(&s->cond);
    int rc = pthread_create(&s->thread, NULL, waitset_timer, s);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the wait timer thread: %s", strerror(rc));
        pthread_cond_destroy(&s->cond);
        return -1;
    }
    s->started = 1;
    return 0;
}

void pt_waitset_drain(pt_waitset *s)
{
    pthread_mutex_lock(&watch_lock);
    s->closing = 1;
    while (s->waiters) waiter_fire(s->waiters, PT_WAKE_CLOSED);
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&watch_lock);
}

void pt_waitset_close(pt_waitset *s)
{
    if (!s->started) return;
    pt_waitset_drain(s);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->cond);
    s->started = 0;
}

pt_wake_reason pt_waitset_add(pt_waitset *s, pt_waiter *w, pt_watch *watch, uint64_t seen,
                              int64_t deadline_ms, void (*park)(void *data),
                              pt_wake_fn wake, void *data)
{
    pt_wake_reason ready = PT_WAKE_NONE;
    pthread_mutex_lock(&watch_lock);
    if (s->closing) ready = PT_WAKE_CLOSED;
    else if (watch->version != seen) ready = PT_WAKE_CHANGED;
    else if (deadline_ms <= pt_clock_ms()) ready = PT_WAKE_TIMEOUT;
    if (ready == PT_WAKE_NONE) {
        memset(w, 0, sizeof(*w));
        w->watch = watch;
        w->set = s;
        w->deadline_ms = deadline_ms;
        w->wake = wake;
        w->data = data;
        w->wnext = watch->waiters;
        if (watch->waiters) watch->waiters->wprev = w;
        watch->waiters = w;
        w->snext = s->waiters;
        if (s->waiters) s->waiters->sprev = w;
        s->waiters = w;
        if (park) park(data);
        pthread_cond_signal(&s->cond);
    }
    pthread_mutex_unlock(&watch_lock);
    return ready;
}

size_t pt_waitset_count(pt_waitset *s)
{
    size_t n = 0;
    pthread_mutex_lock(&watch_lock);
    for (pt_waiter *x = s->waiters; x; x = x->snext) n++;
    pthread_mutex_unlock(&watch_lock);
    return n;
}
