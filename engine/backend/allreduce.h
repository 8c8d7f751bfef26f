/* allreduce.h — summing the replicas' gradient buffers across replica threads.
 *
 * Seed 000 (§4.3) merges all gradient tensors into ONE flat buffer so that a
 * step needs one collective instead of one per tensor.  The emulated backend
 * does the same over the model's flat gradient layout: every replica thread
 * calls pt_allreduce_run with its rank, each rank reduces its own 1/R of the
 * buffer (in cache-sized chunks) across all R replica buffers, and writes the
 * sum into one shared output — a reduce-scatter whose scattered results land
 * side by side, which is the all-gather in shared memory.
 *
 * Order: every element is summed over the replicas as the same pairwise tree
 * (stride 1, 2, 4, …: b[i] += b[i+s] for i a multiple of 2s), whatever the
 * chunking, the rank that does it or the segmentation.  The result is
 * therefore bitwise reproducible, equal to pt_allreduce_reference, and — when
 * R is a power of two and each replica accumulated its micro-batches as a
 * pairwise tree too — equal to one balanced tree over all micro-batches.
 *
 * Segments: the merge_all_reduce=false ablation passes one segment per model
 * tensor (the state_dict table); each segment is then a separate collective,
 * split over the ranks and closed by a barrier, the cost seed 000 removed.
 * The sum is the same bit for bit; only the synchronisation differs.
 *
 * What the run leaves behind: every replica buffer all zero (each element
 * is cleared right after the tree's last read of it, while its line is in
 * L1), so the next step's backward accumulates into it without a separate
 * zeroing pass.  A sink may take the sum instead of out: each rank's chunks
 * then go to an L1 scratch of the rank and straight to the sink (the
 * backend applies Adam there, backend.h), and out is not written at all. */
#ifndef PT_ALLREDUCE_H
#define PT_ALLREDUCE_H

#include <pthread.h>
#include <stddef.h>

#include "engine/backend/spinwait.h"
#include "engine/core/errors.h"

typedef struct pt_allreduce_segment {
    size_t offset;   /* in floats */
    size_t len;
} pt_allreduce_segment;

typedef struct pt_allreduce {
    int n_ranks;
    size_t n;                       /* floats per buffer */
    size_t n_segments;
    pt_allreduce_segment *segments; /* [n_segments], tiling [0, n) in order */
    size_t chunk;                   /* floats reduced through all tree levels at once */
    pt_spin_barrier barrier;
    int (*idle)(void *arg);         /* work for a rank waiting for the others (NULL: none) */
    void *idle_arg;
    const struct pt_allreduce_sink *sink;   /* NULL: none */
    float *scratch;                 /* [n_ranks × chunk] a rank's chunk of the sum, for the sink */
    /* pt_allreduce_run_ready: rank r's buffer is final on [ready[r], n);
     * chunks are claimed from the top of the buffer down (next counts them) */
    _Atomic size_t *ready;          /* [n_ranks] */
    _Atomic size_t next;
    _Atomic int sleepers;           /* ranks asleep on cv for a ready edge */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} pt_allreduce;

/* Takes the sum in place of out, per rank (pt_allreduce_set_sink):
 *   open(arg, rank)   once per run, after the opening barrier (everything
 *                     the ranks wrote before they arrived is visible);
 *                     nonzero: the sink takes this run's sum (every rank's
 *                     open must answer alike), zero: out gets it
 *   chunk(arg, rank, sum, lo, hi)
 *                     sum[0, hi - lo) is elements [lo, hi) of the sum,
 *                     reduced by this rank just now, in its scratch (valid
 *                     until the call returns); the calls of a run cover
 *                     [0, n) once over all ranks.
 * Both run on the rank's thread before the barrier that closes its segment. */
typedef struct pt_allreduce_sink {
    int (*open)(void *arg, int rank);
    void (*chunk)(void *arg, int rank, const float *sum, size_t lo, size_t hi);
    void *arg;
} pt_allreduce_sink;

/* Floats per chunk: 16 KiB per buffer, so the R rows of a chunk stay in L2. */
#define PT_ALLREDUCE_CHUNK 4096
/* Chunks per claim of the progressive run (pt_allreduce_run_ready). */
#define PT_ALLREDUCE_READY_CHUNKS 4

/* Sets up a collective of n_ranks over buffers of n floats.  segments NULL
 * means one merged segment [0, n); otherwise the n_segments segments must
 * tile [0, n) in increasing order without gaps or overlaps (segments of
 * length 0 are rejected, they would be empty collectives).  Returns 0, or -1
 * with the reason in errs. */
int pt_allreduce_init(pt_allreduce *ar, int n_ranks, size_t n,
                      const pt_allreduce_segment *segments, size_t n_segments, pt_errors *errs);
void pt_allreduce_close(pt_allreduce *ar);

/* What a rank that reaches the collective before the others does while it
 * waits for them (pt_spin_barrier_wait_idle): the backend fills pending
 * batches (pt_loader_help).  Never changes the sum. */
void pt_allreduce_set_idle(pt_allreduce *ar, int (*idle)(void *arg), void *arg);

/* Sets (or, NULL, removes) the sink of the following runs; not during a run. */
void pt_allreduce_set_sink(pt_allreduce *ar, const pt_allreduce_sink *sink);

/* Called by each of the n_ranks threads with its own rank and the same
 * arguments: bufs[0..n_ranks) are the replicas' buffers (left all zero),
 * out receives the sum (unless the sink takes it).  Returns once the sum is
 * complete for every rank (the last barrier is shared). */
void pt_allreduce_run(pt_allreduce *ar, int rank, float *const *bufs, float *out);

/* The progressive run: the ranks sum each chunk as soon as every replica's
 * buffer is final there, so a rank that finishes its backward early sums
 * (and hands the sink) what the others have finished while they compute,
 * instead of waiting for them at an opening barrier.  A replica's backward
 * finishes its gradient from the top of the flat layout down (the heads,
 * the last block, …, the embedding), and publishes each edge:
 *
 *   pt_allreduce_ready_reset(ar)          before the ranks start (no rank
 *                                         inside a run): nothing is final
 *   pt_allreduce_ready_publish(ar, r, from)
 *                                         rank r's buffer is final on
 *                                         [from, n) (from only decreases
 *                                         within a run); what r wrote there,
 *                                         and before, is visible to the
 *                                         ranks that see the edge
 *   pt_allreduce_run_ready(ar, r, bufs, out)
 *                                         rank r, its own buffer final
 *                                         (it publishes 0): waits until
 *                                         every rank has published once,
 *                                         calls the sink's open, then claims
 *                                         chunks from the top down, waits
 *                                         for each to be final in every
 *                                         buffer, sums it by the same tree
 *                                         (same bits as pt_allreduce_run) to
 *                                         the sink or out, clearing the
 *                                         buffers.  Returns when no chunk is
 *                                         left to claim: the sum is complete
 *                                         once every rank has returned (the
 *                                         caller's join), no closing barrier.
 *
 * The sink's chunk calls come in no fixed order and from any rank; open
 * runs once per rank after every rank's first publication.  A waiting rank
 * runs the idle work first, while it accepts and chunks are left: a chunk
 * left over is shared by every rank once they are all done, idle work left
 * over (the backend's fill) falls on one replica's next step.  Then it
 * spins PT_SPIN_NS, then sleeps until a publication.  Needs the
 * merged layout (one segment): with segments it runs pt_allreduce_run,
 * which needs no publications. */
void pt_allreduce_ready_reset(pt_allreduce *ar);
void pt_allreduce_ready_publish(pt_allreduce *ar, int rank, size_t from);
void pt_allreduce_run_ready(pt_allreduce *ar, int rank, float *const *bufs, float *out);
/* The common edge of a progressive run: every rank's buffer is final on
 * [edge, n) (n: some rank has published nothing yet). */
size_t pt_allreduce_ready_edge(const pt_allreduce *ar);

/* The tree of one range, for the ZeRO reduce-scatter (backend_zero.h): sums
 * bufs[i][at .. at + len) over i in [0, n_ranks) into out[0 .. len), in the
 * per-element order of pt_allreduce_run; the bufs' range is scratch. */
void pt_allreduce_tree(int n_ranks, float *const *bufs, size_t at, float *out, size_t len);

/* The same sum on one thread, same per-element order, bufs left intact
 * (tests compare).  Returns 0, or -1 when n_ranks < 1 or out of memory. */
int pt_allreduce_reference(int n_ranks, size_t n, float *const *bufs, float *out);

#endif
