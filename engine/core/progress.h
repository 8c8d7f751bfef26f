/* progress.h — how long-running data work (ingest, edge counting, packing)
 * tells whoever started it how far it is.
 *
 * The engine knows no terminal and no server: it calls a pt_progress_fn
 * that its caller hands it.  The CLI draws a line on a terminal from it
 * (server/cli), the server stores it with the dataset and sends it as an SSE
 * event (server/api) — from whichever thread runs the work, so the callback
 * must be quick and do its own locking.
 *
 * A phase reports `done` of `total` units (bytes of input for ingest, whose
 * structure count is unknown until the end; structures for counting and
 * packing; total 0 = unknown) and the structures seen so far.  Calls come at
 * most every `every` seconds (pt_progress_tick), plus one with final = 1 when
 * the phase ends, so a caller can draw its last state and a newline. */
#ifndef PT_PROGRESS_H
#define PT_PROGRESS_H

#include <stdint.h>

typedef struct pt_progress_info {
    const char *phase;     /* "ingest", "count_edges", "pack" */
    uint64_t done, total;  /* units of work; total 0 = unknown */
    const char *unit;      /* "bytes" or "structures" */
    uint64_t structures;   /* structures handled so far */
    double seconds;        /* since the phase started */
    int final;             /* 1 on the last call of the phase */
} pt_progress_info;

typedef void (*pt_progress_fn)(void *user, const pt_progress_info *info);

/* A phase's reporter.  fn NULL: ticks cost one branch. */
typedef struct pt_progress {
    pt_progress_fn fn;
    void *user;
    double every;          /* seconds between calls; 0 = the default, 0.25 */
    /* private */
    pt_progress_info info;
    double started, last;
} pt_progress;

/* Starts a phase; `sink` may be NULL (no reporting). */
void pt_progress_begin(pt_progress *p, const pt_progress *sink, const char *phase,
                       const char *unit, uint64_t total);

/* Records the position and calls fn when `every` seconds passed since the
 * last call. */
void pt_progress_tick(pt_progress *p, uint64_t done, uint64_t structures);

/* The final call (final = 1) with the last position. */
void pt_progress_end(pt_progress *p, uint64_t done, uint64_t structures);

/* Rate and time left from one report: units per second, and seconds to the
 * total (negative when unknown). */
double pt_progress_rate(const pt_progress_info *info, uint64_t units);
double pt_progress_eta(const pt_progress_info *info);

#endif
