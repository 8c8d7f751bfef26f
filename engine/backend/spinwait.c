/* spinwait.c — spin-then-sleep waits between replica threads (spinwait.h). */
#include "engine/backend/spinwait.h"

#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() atomic_signal_fence(memory_order_seq_cst)
#endif

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int pt_spin_until(int (*pred)(const void *arg), const void *arg)
{
    if (pred(arg)) return 1;
    const int64_t end = now_ns() + PT_SPIN_NS;
    for (;;) {
        /* the clock every 64 polls: a vDSO call is ~20 ns, a pause ~40 cycles */
        for (int i = 0; i < 64; i++) {
            cpu_relax();
            if (pred(arg)) return 1;
        }
        if (now_ns() >= end) return pred(arg);
    }
}

int pt_spin_barrier_init(pt_spin_barrier *b, uint32_t n, pt_errors *errs)
{
    memset(b, 0, sizeof(*b));
    if (n == 0) {
        pt_errors_add(errs, "", 0, "barrier", "a barrier needs at least 1 thread, got 0");
        return -1;
    }
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    atomic_init(&b->arrived, 0);
    atomic_init(&b->phase, 0);
    b->n = n;
    b->ready = 1;
    return 0;
}

void pt_spin_barrier_close(pt_spin_barrier *b)
{
    if (!b->ready) return;
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    memset(b, 0, sizeof(*b));
}

typedef struct phase_wait {
    const pt_spin_barrier *b;
    uint32_t phase;
} phase_wait;

static int phase_moved(const void *arg)
{
    const phase_wait *w = arg;
    return atomic_load_explicit(&w->b->phase, memory_order_acquire) != w->phase;
}

void pt_spin_barrier_wait(pt_spin_barrier *b)
{
    pt_spin_barrier_wait_idle(b, NULL, NULL);
}

void pt_spin_barrier_wait_idle(pt_spin_barrier *b, int (*idle)(void *arg), void *arg)
{
    /* the phase is read before arriving: it cannot move until this thread has */
    const uint32_t ph = atomic_load_explicit(&b->phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) + 1 == b->n) {
        /* last: reset the count before anyone can leave and re-enter */
        atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
        pthread_mutex_lock(&b->mu);
        atomic_store_explicit(&b->phase, ph + 1, memory_order_release);
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        return;
    }
    phase_wait w = {b, ph};
    /* acquire (phase_moved): what the others wrote before arriving is visible */
    while (idle && !phase_moved(&w) && idle(arg)) {}
    if (pt_spin_until(phase_moved, &w)) return;
    pthread_mutex_lock(&b->mu);
    while (!phase_moved(&w)) pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
}
