/* phase.h — where the time of a training step goes.
 *
 * Seed 000 profiles an IPU step as host I/O, compute, sync/exchange and the
 * optimizer; the emulated backend accounts the same phases so a user can see
 * which optimisation (packing, async loader, merged all-reduce, prefetch)
 * moved which part.  Times are wall-clock seconds measured by the thread
 * doing the work; the backend averages its replicas, so the phases of one
 * step add up to the step's wall time (each replica runs from the same
 * dispatch to the same final barrier).
 *
 *   io         waiting for a filled batch (async loader) or filling it
 *              inline, per micro-batch
 *   forward    model forward and loss
 *   backward   backward pass and the local gradient accumulation
 *   allreduce  waiting for the other replicas plus the reduction itself
 *   optimizer  the parameter update (timed by whoever runs it)
 *   other      host dispatch and everything else inside the step */
#ifndef PT_PHASE_H
#define PT_PHASE_H

#include <stddef.h>
#include <stdint.h>

typedef enum pt_phase {
    PT_PHASE_IO = 0,
    PT_PHASE_FORWARD,
    PT_PHASE_BACKWARD,
    PT_PHASE_ALLREDUCE,
    PT_PHASE_OPTIMIZER,
    PT_PHASE_OTHER,
    PT_PHASE_COUNT
} pt_phase;

typedef struct pt_phase_times {
    double seconds[PT_PHASE_COUNT];  /* totals over `steps` steps */
    int64_t steps;
} pt_phase_times;

/* A lap clock: each lap charges the time since the previous one to a phase. */
typedef struct pt_phase_timer {
    double last;
} pt_phase_timer;

/* Monotonic clock in seconds. */
double pt_phase_clock(void);

void pt_phase_timer_start(pt_phase_timer *t);
/* Adds the seconds since the last lap (or start) to acc->seconds[p]; returns them. */
double pt_phase_lap(pt_phase_timer *t, pt_phase_times *acc, pt_phase p);

void pt_phase_times_clear(pt_phase_times *t);
/* dst += src, steps included. */
void pt_phase_times_add(pt_phase_times *dst, const pt_phase_times *src);

/* "io", "forward", "backward", "allreduce", "optimizer", "other"; NULL out of range. */
const char *pt_phase_name(pt_phase p);

/* Mean seconds per step of every phase as JSON members, without braces, for
 * a metrics line: "phase_io_s":..,"phase_forward_s":..,... (0 when no step
 * was counted).  Returns the length, as snprintf. */
int pt_phase_json_fields(const pt_phase_times *t, char *buf, size_t len);

#endif
