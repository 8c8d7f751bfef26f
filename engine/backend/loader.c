/* loader.c — the bounded prefetch ring of the emulated host I/O (see loader.h).
 *
 * One mutex guards the ring; fill threads wait on `work` for the next job in
 * sequence order, consumers and cancel wait on `done` for fills to finish.
 * The mutex is never held during a fill, so a slow fill blocks nobody but
 * the consumer of that very job.  A job is claimed once, under the mutex, by
 * whoever comes first — a fill thread (in sequence order), a helper
 * (pt_loader_help, in sequence order) or its consumer (out of order): the
 * claimer marks it FILLING, and the fill threads' cursor steps over jobs
 * claimed by others. */
#include "engine/backend/loader.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *fill_thread(void *arg);

int pt_loader_init(pt_loader *ld, int n_slots, int n_threads, pt_loader_fill_fn fill, void *user,
                   pt_errors *errs)
{
    memset(ld, 0, sizeof(*ld));
    if (n_slots < 1) {
        pt_errors_add(errs, "", 0, "loader", "the loader needs at least 1 batch buffer, got %d",
                      n_slots);
        return -1;
    }
    if (n_threads < 0) {
        pt_errors_add(errs, "", 0, "loader", "thread count must be >= 0, got %d", n_threads);
        return -1;
    }
    if (!fill) {
        pt_errors_add(errs, "", 0, "loader", "no fill function");
        return -1;
    }
    ld->slots = calloc((size_t)n_slots, sizeof(*ld->slots));
    ld->threads = n_threads ? calloc((size_t)n_threads, sizeof(*ld->threads)) : NULL;
    if (!ld->slots || (n_threads && !ld->threads)) {
        free(ld->slots);
        free(ld->threads);
        memset(ld, 0, sizeof(*ld));
        pt_errors_add(errs, "", 0, "loader", "out of memory for %d slots", n_slots);
        return -1;
    }
    ld->n_slots = n_slots;
    ld->n_threads = n_threads;
    ld->fill = fill;
    ld->user = user;
    pthread_mutex_init(&ld->mu, NULL);
    pthread_cond_init(&ld->work, NULL);
    pthread_cond_init(&ld->done, NULL);
    for (int i = 0; i < n_threads; i++) {
        int rc = pthread_create(&ld->threads[i], NULL, fill_thread, ld);
        if (rc) {
            pt_errors_add(errs, "", 0, "loader", "cannot start loader thread %d of %d: %s", i + 1,
                          n_threads, strerror(rc));
            pt_loader_close(ld);
            return -1;
        }
        ld->started++;
    }
    return 0;
}

void pt_loader_close(pt_loader *ld)
{
    if (!ld->slots) return;
    pthread_mutex_lock(&ld->mu);
    ld->stop = 1;
    pthread_cond_broadcast(&ld->work);
    pthread_cond_broadcast(&ld->done);
    pthread_mutex_unlock(&ld->mu);
    for (int i = 0; i < ld->started; i++) pthread_join(ld->threads[i], NULL);
    pthread_cond_destroy(&ld->work);
    pthread_cond_destroy(&ld->done);
    pthread_mutex_destroy(&ld->mu);
    free(ld->threads);
    free(ld->slots);
    memset(ld, 0, sizeof(*ld));
}

/* Runs the fill of `seq` in slot s without the lock, then records the
 * outcome (and who filled it: PT_LOADER_BY_*).  Called with the lock held;
 * returns with it held. */
static void run_fill(pt_loader *ld, int s, uint64_t seq, int by)
{
    pt_loader_slot *slot = &ld->slots[s];
    slot->state = PT_LOADER_FILLING;
    pthread_mutex_unlock(&ld->mu);
    pt_errors errs;
    pt_errors_init(&errs, 1);
    int rc = ld->fill(ld->user, s, &errs);
    char msg[PT_LOADER_ERR_MAX] = "";
    if (rc) {
        if (errs.kept)
            pt_errors_first(&errs, msg, sizeof(msg));
        else
            snprintf(msg, sizeof(msg), "filling batch %llu failed", (unsigned long long)seq);
    }
    pt_errors_close(&errs);
    pthread_mutex_lock(&ld->mu);
    if (slot->seq == seq && slot->state == PT_LOADER_FILLING) {
        slot->state = rc ? PT_LOADER_FAILED : PT_LOADER_READY;
        memcpy(slot->error, msg, sizeof(msg));
    }
    ld->fills++;
    ld->fills_by[by]++;
    pthread_cond_broadcast(&ld->done);
}

/* The next submitted job nobody has claimed, in sequence order: moves the
 * claim cursor past jobs a consumer already took (their slot is no longer
 * SUBMITTED with that seq) and returns the job's seq, or -1 when none is
 * pending.  Called with the lock held. */
static int64_t next_claimable(pt_loader *ld)
{
    while (ld->next_claim < ld->next_submit) {
        const pt_loader_slot *slot = &ld->slots[ld->next_claim % (uint64_t)ld->n_slots];
        if (slot->state == PT_LOADER_SUBMITTED && slot->seq == ld->next_claim)
            return (int64_t)ld->next_claim;
        ld->next_claim++;
    }
    return -1;
}

static void *fill_thread(void *arg)
{
    pt_loader *ld = arg;
    /* Background priority: the replicas have the cores (one each when R
     * equals the cores), and a fill that preempts one of them delays the
     * whole step by its length at the all-reduce.  An idle fill thread runs
     * when a core idles (waits, the host's serial work); whatever it has not
     * filled in time its consumer fills itself (pt_loader_acquire).  Refused
     * (no SCHED_IDLE), the thread keeps the normal policy: only slower. */
    struct sched_param sp = {0};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
    pthread_mutex_lock(&ld->mu);
    for (;;) {
        int64_t seq;
        while (!ld->stop && (seq = next_claimable(ld)) < 0) pthread_cond_wait(&ld->work, &ld->mu);
        if (ld->stop) break;
        ld->next_claim++;
        run_fill(ld, (int)((uint64_t)seq % (uint64_t)ld->n_slots), (uint64_t)seq,
                 PT_LOADER_BY_THREAD);
    }
    pthread_mutex_unlock(&ld->mu);
    return NULL;
}

int pt_loader_help(pt_loader *ld)
{
    pthread_mutex_lock(&ld->mu);
    int64_t seq = ld->stop ? -1 : next_claimable(ld);
    if (seq >= 0) {
        ld->next_claim++;
        run_fill(ld, (int)((uint64_t)seq % (uint64_t)ld->n_slots), (uint64_t)seq,
                 PT_LOADER_BY_HELPER);
    }
    pthread_mutex_unlock(&ld->mu);
    return seq >= 0;
}


int pt_loader_next_slot(pt_loader *ld, uint64_t *seq)
{
    pthread_mutex_lock(&ld->mu);
    int s = (int)(ld->next_submit % (uint64_t)ld->n_slots);
    int ok = ld->slots[s].state == PT_LOADER_FREE;
    if (ok) *seq = ld->next_submit;
    pthread_mutex_unlock(&ld->mu);
    return ok ? s : -1;
}

void pt_loader_submit(pt_loader *ld)
{
    pthread_mutex_lock(&ld->mu);
    pt_loader_slot *slot = &ld->slots[ld->next_submit % (uint64_t)ld->n_slots];
    slot->state = PT_LOADER_SUBMITTED;
    slot->seq = ld->next_submit;
    slot->error[0] = '\0';
    ld->next_submit++;
    pthread_cond_broadcast(&ld->work);
    pthread_mutex_unlock(&ld->mu);
}

int pt_loader_acquire(pt_loader *ld, uint64_t seq, pt_errors *errs)
{
    const int s = (int)(seq % (uint64_t)ld->n_slots);
    pt_loader_slot *slot = &ld->slots[s];
    pthread_mutex_lock(&ld->mu);
    if (seq >= ld->next_submit) {
        pthread_mutex_unlock(&ld->mu);
        pt_errors_add(errs, "", 0, "loader", "batch %llu was never submitted",
                      (unsigned long long)seq);
        return -1;
    }
    for (;;) {
        if (slot->seq != seq || slot->state == PT_LOADER_FREE) {
            pthread_mutex_unlock(&ld->mu);
            pt_errors_add(errs, "", 0, "loader", "batch %llu was cancelled or already released",
                          (unsigned long long)seq);
            return -1;
        }
        if (slot->state == PT_LOADER_IN_USE) {
            pthread_mutex_unlock(&ld->mu);
            pt_errors_add(errs, "", 0, "loader", "batch %llu is already held",
                          (unsigned long long)seq);
            return -1;
        }
        if (slot->state == PT_LOADER_READY || slot->state == PT_LOADER_FAILED) break;
        /* not claimed yet: the consumer fills it now rather than wait for a
         * fill thread (inline mode, or one that is busy or starved) */
        if (slot->state == PT_LOADER_SUBMITTED)
            run_fill(ld, s, seq, PT_LOADER_BY_CONSUMER);
        else if (ld->stop) {
            pthread_mutex_unlock(&ld->mu);
            pt_errors_add(errs, "", 0, "loader", "loader stopped before batch %llu was filled",
                          (unsigned long long)seq);
            return -1;
        } else
            pthread_cond_wait(&ld->done, &ld->mu);
    }
    int failed = slot->state == PT_LOADER_FAILED;
    slot->state = PT_LOADER_IN_USE;
    pthread_mutex_unlock(&ld->mu);
    if (failed) {
        pt_errors_add(errs, "", 0, "", "%s", slot->error);
        return -1;
    }
    return s;
}

void pt_loader_release(pt_loader *ld, uint64_t seq)
{
    pt_loader_slot *slot = &ld->slots[seq % (uint64_t)ld->n_slots];
    pthread_mutex_lock(&ld->mu);
    if (slot->seq == seq && slot->state == PT_LOADER_IN_USE) slot->state = PT_LOADER_FREE;
    pthread_mutex_unlock(&ld->mu);
}

void pt_loader_cancel(pt_loader *ld)
{
    pthread_mutex_lock(&ld->mu);
    for (;;) {
        int filling = 0;
        for (int i = 0; i < ld->n_slots; i++)
            filling += ld->slots[i].state == PT_LOADER_FILLING;
        if (!filling) break;
        pthread_cond_wait(&ld->done, &ld->mu);
    }
    for (int i = 0; i < ld->n_slots; i++) {
        pt_loader_state st = ld->slots[i].state;
        if (st == PT_LOADER_SUBMITTED || st == PT_LOADER_READY || st == PT_LOADER_FAILED)
            ld->slots[i].state = PT_LOADER_FREE;
    }
    ld->next_claim = ld->next_submit;
    pthread_cond_broadcast(&ld->done);
    pthread_mutex_unlock(&ld->mu);
}
