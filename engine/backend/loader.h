/* loader.h — host I/O of the emulated IPU: batches prepared ahead of compute.
 *
 * On an IPU system the host assembles the next batches (gather the packed
 * structures, build the fixed-shape arrays) while the devices compute, and
 * PopTorch buffers `prefetch_depth` of them; seed 000's ablation measures the
 * asynchronous loader and the prefetch separately.  pt_loader is that
 * pipeline in threads: a ring of slots, each a buffer the CALLER owns (a
 * pt_batch and the description of the job it will hold), jobs numbered by a
 * sequence `seq` that maps to slot seq % n_slots, and fill threads that
 * prepare submitted jobs in sequence order.  With zero fill threads (the
 * use_async_loader=false ablation) the consumer fills the job itself when it
 * acquires it.
 *
 * The CPU cores are the replicas' (one each, as on the IPUs' host a core
 * per device): fill threads run at background priority (SCHED_IDLE), so a
 * fill takes a core only while it would idle, and any thread with nothing
 * to do — a replica waiting for the others at the all-reduce — may fill
 * pending jobs itself (pt_loader_help).  A consumer that finds its job
 * not yet claimed by anyone fills it too instead of waiting.  Who fills a
 * job never changes what it holds.
 *
 * Protocol
 *   host (ONE submitting thread):   slot = pt_loader_next_slot(&seq) — the
 *       next job's slot if it is free, else -1 (never blocks); write the
 *       job's description into the caller's per-slot storage; then
 *       pt_loader_submit() publishes it.
 *   consumers (any threads):  slot = pt_loader_acquire(seq) waits until job
 *       seq is filled and hands its slot over; pt_loader_release(seq) gives
 *       the slot back for a later job.
 *   pt_loader_cancel() drops every submitted job nobody holds (e.g. a
 *       prediction that turned out wrong); sequence numbers keep counting.
 *
 * The ring is bounded by n_slots and nothing is allocated after init; close
 * stops the fill threads cleanly, whatever state the ring is in. */
#ifndef PT_LOADER_H
#define PT_LOADER_H

#include <pthread.h>
#include <stdint.h>

#include "engine/core/errors.h"

/* Prepares the job held in `slot` (the caller's storage).  Runs on a fill
 * thread, or on the consumer in inline mode; must not touch other slots.
 * Returns 0, or -1 with the reason in errs. */
typedef int (*pt_loader_fill_fn)(void *user, int slot, pt_errors *errs);

typedef enum pt_loader_state {
    PT_LOADER_FREE = 0,
    PT_LOADER_SUBMITTED,
    PT_LOADER_FILLING,
    PT_LOADER_READY,
    PT_LOADER_FAILED,
    PT_LOADER_IN_USE
} pt_loader_state;

#define PT_LOADER_ERR_MAX 384

/* Who filled a job (pt_loader.fills_by). */
enum { PT_LOADER_BY_THREAD = 0, PT_LOADER_BY_CONSUMER, PT_LOADER_BY_HELPER };

typedef struct pt_loader_slot {
    pt_loader_state state;
    uint64_t seq;                     /* job held (valid unless FREE) */
    char error[PT_LOADER_ERR_MAX];    /* first fill error, formatted */
} pt_loader_slot;

typedef struct pt_loader {
    int n_slots;
    pt_loader_slot *slots;
    int n_threads;                    /* 0 = inline */
    pthread_t *threads;
    int started;                      /* threads actually running */
    pt_loader_fill_fn fill;
    void *user;
    pthread_mutex_t mu;
    pthread_cond_t work;              /* fill threads wait here */
    pthread_cond_t done;              /* consumers and cancel wait here */
    uint64_t next_submit;             /* seq of the next job to submit */
    uint64_t next_claim;              /* seq the fill threads take next */
    int stop;
    int64_t fills;                    /* jobs filled (statistics) ... */
    int64_t fills_by[3];              /* ... by fill threads, consumers, helpers */
} pt_loader;

/* n_slots >= 1 buffers, n_threads >= 0 fill threads (0 = inline).  Returns 0,
 * or -1 with the reason in errs. */
int pt_loader_init(pt_loader *ld, int n_slots, int n_threads, pt_loader_fill_fn fill, void *user,
                   pt_errors *errs);
/* Stops and joins the fill threads (a fill in progress completes first). */
void pt_loader_close(pt_loader *ld);

/* Host side.  The slot the next job goes to, with its seq, or -1 when that
 * slot still holds an earlier job. */
int pt_loader_next_slot(pt_loader *ld, uint64_t *seq);
/* Publishes the job reserved by the last successful pt_loader_next_slot. */
void pt_loader_submit(pt_loader *ld);

/* Consumer side.  Waits until job seq is ready (fills it itself when nobody
 * has claimed it yet: always in inline mode) and returns its slot, now held
 * by the caller; -1 with the reason in errs when its fill failed (the slot
 * is then held too: release it), when seq was never submitted or was
 * cancelled. */
int pt_loader_acquire(pt_loader *ld, uint64_t seq, pt_errors *errs);
void pt_loader_release(pt_loader *ld, uint64_t seq);

/* Any thread: fills the next pending job (submitted, claimed by nobody, in
 * sequence order) on the calling thread.  Returns 1 when it filled one (its
 * outcome is recorded for the consumer, as a fill thread's), 0 when no job
 * was pending or the loader is closing. */
int pt_loader_help(pt_loader *ld);

/* Drops every submitted job not held by a consumer; waits for fills in
 * progress.  Call it from the submitting thread. */
void pt_loader_cancel(pt_loader *ld);

#endif
