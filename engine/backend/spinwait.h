/* spinwait.h — waits between the replica threads that spin briefly before
 * they sleep.
 *
 * A training step hands work between threads several times: the host wakes
 * the replicas, the all-reduce's barriers, the replicas' "done".  Each wait
 * is short (microseconds to a millisecond of load imbalance), and on a VM a
 * sleeping thread is a halted virtual CPU: the futex wake-up that ends the
 * sleep costs tens of microseconds, several times per step — a few per cent
 * of a small micro-batch's step.  So every wait here first polls its
 * condition for up to PT_SPIN_NS, then sleeps on a mutex and condition
 * variable exactly as before (no lost wake-ups: the condition is re-checked
 * under the mutex, and every change is made under it).
 *
 *   pt_spin_until(pred, arg)   polls pred(arg) until true or the spin budget
 *                              is spent; returns its last value
 *   pt_spin_barrier            a reusable barrier of n threads (pthread_barrier
 *                              semantics without the serial-thread return) */
#ifndef PT_SPINWAIT_H
#define PT_SPINWAIT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "engine/core/errors.h"

/* How long a waiter polls before it sleeps: about a futex sleep and
 * wake-up, so that a wait never costs more than twice what sleeping at once
 * would.  Measured on this VM (QM9 LPFHP, 2 replicas x 4 packs, the TTA
 * lever's step; runs under chrt -f 1 at load 4.6-4.9 as a stand-in for a
 * quiet machine): 20 us and 200 us gave the same step time; under heavy
 * oversubscription long spins steal the core from the thread awaited.
 * Tried and dropped (session 8): 1 ms when every replica has a core of its
 * own cut the all-reduce's tail after the last arrival from 0.08-0.09 to
 * 0.03-0.05 ms a step under chrt -f 1, but with other users' processes on
 * the cores (load ~10, normal scheduling) QM9's 2 x 8-pack step took 35%
 * more CPU per graph and ran at 750-890 graphs/s against 1160-1650 with
 * 50 us: a replica that spins keeps its core while the one it waits for
 * queues behind another process. */
#define PT_SPIN_NS 50000

int pt_spin_until(int (*pred)(const void *arg), const void *arg);

typedef struct pt_spin_barrier {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic uint32_t arrived;   /* threads at the barrier in the current phase */
    _Atomic uint32_t phase;     /* bumped by the last arrival */
    uint32_t n;
    int ready;
} pt_spin_barrier;

/* n >= 1 threads; -1 with a located error when n is 0. */
int pt_spin_barrier_init(pt_spin_barrier *b, uint32_t n, pt_errors *errs);
void pt_spin_barrier_close(pt_spin_barrier *b);
/* Returns once all n threads have called it for this phase. */
void pt_spin_barrier_wait(pt_spin_barrier *b);
/* The same wait with something useful to do meanwhile: a thread that is
 * not the last to arrive calls idle(arg) while the others have not all
 * arrived and idle keeps returning nonzero (each call one short piece of
 * work, e.g. one batch fill: the barrier's release waits for the piece in
 * progress), then waits as pt_spin_barrier_wait.  idle NULL: a plain wait. */
void pt_spin_barrier_wait_idle(pt_spin_barrier *b, int (*idle)(void *arg), void *arg);

#endif
