/* allreduce.c — chunked pairwise-tree all-reduce across replica threads
 * (order and segment semantics in allreduce.h). */
#include "engine/backend/allreduce.h"

#include <stdatomic.h>

#include <stdlib.h>
#include <string.h>

int pt_allreduce_init(pt_allreduce *ar, int n_ranks, size_t n,
                      const pt_allreduce_segment *segments, size_t n_segments, pt_errors *errs)
{
    memset(ar, 0, sizeof(*ar));
    if (n_ranks < 1) {
        pt_errors_add(errs, "", 0, "allreduce", "all-reduce needs at least 1 rank, got %d",
                      n_ranks);
        return -1;
    }
    if (n == 0) {
        pt_errors_add(errs, "", 0, "allreduce", "all-reduce over an empty buffer");
        return -1;
    }
    size_t want = segments ? n_segments : 1;
    if (segments && n_segments == 0) {
        pt_errors_add(errs, "", 0, "allreduce", "segment list is empty");
        return -1;
    }
    size_t next = 0;
    for (size_t i = 0; segments && i < n_segments; i++) {
        if (segments[i].offset != next || segments[i].len == 0 ||
            segments[i].len > n - segments[i].offset) {
            pt_errors_add(errs, "", 0, "allreduce",
                          "segment %zu [%zu, +%zu) does not continue the tiling of %zu floats "
                          "at offset %zu", i, segments[i].offset, segments[i].len, n, next);
            return -1;
        }
        next += segments[i].len;
    }
    if (segments && next != n) {
        pt_errors_add(errs, "", 0, "allreduce", "segments cover %zu of %zu floats", next, n);
        return -1;
    }
    ar->segments = malloc(want * sizeof(*ar->segments));
    if (!ar->segments) {
        pt_errors_add(errs, "", 0, "allreduce", "out of memory for %zu segments", want);
        return -1;
    }
    if (segments)
        memcpy(ar->segments, segments, want * sizeof(*segments));
    else
        ar->segments[0] = (pt_allreduce_segment){0, n};
    ar->n_segments = want;
    ar->n_ranks = n_ranks;
    ar->n = n;
    ar->chunk = PT_ALLREDUCE_CHUNK;
    ar->scratch = aligned_alloc(64, (size_t)n_ranks * ar->chunk * sizeof(float));
    if (!ar->scratch) {
        pt_errors_add(errs, "", 0, "allreduce", "out of memory for %d ranks' scratch", n_ranks);
        free(ar->segments);
        memset(ar, 0, sizeof(*ar));
        return -1;
    }
    ar->ready = malloc((size_t)n_ranks * sizeof(*ar->ready));
    if (!ar->ready) {
        pt_errors_add(errs, "", 0, "allreduce", "out of memory for %d ranks' edges", n_ranks);
        free(ar->scratch);
        free(ar->segments);
        memset(ar, 0, sizeof(*ar));
        return -1;
    }
    if (pt_spin_barrier_init(&ar->barrier, (uint32_t)n_ranks, errs)) {
        free(ar->ready);
        free(ar->scratch);
        free(ar->segments);
        memset(ar, 0, sizeof(*ar));
        return -1;
    }
    pthread_mutex_init(&ar->mu, NULL);
    pthread_cond_init(&ar->cv, NULL);
    pt_allreduce_ready_reset(ar);
    return 0;
}

void pt_allreduce_close(pt_allreduce *ar)
{
    if (ar->ready) {
        pthread_cond_destroy(&ar->cv);
        pthread_mutex_destroy(&ar->mu);
        free(ar->ready);
    }
    pt_spin_barrier_close(&ar->barrier);
    free(ar->scratch);
    free(ar->segments);
    memset(ar, 0, sizeof(*ar));
}

void pt_allreduce_set_idle(pt_allreduce *ar, int (*idle)(void *arg), void *arg)
{
    ar->idle = idle;
    ar->idle_arg = arg;
}

void pt_allreduce_set_sink(pt_allreduce *ar, const pt_allreduce_sink *sink)
{
    ar->sink = sink;
}

/* Sums bufs[*][at, at + len) into out[0, len) through the pairwise tree.
 * Levels write their partial sums into the lower buffer of each pair; the
 * final level (or the copy, for one rank) writes out.  With clear, each
 * buffer element is zeroed right after its last read (a pair's upper one
 * at its level, the lowest at the final level): the same values summed,
 * the same bits. */
static void tree(int R, float *const *bufs, size_t at, float *out, size_t len, int clear)
{
    if (R == 1) {
        memcpy(out, bufs[0] + at, len * sizeof(float));
        if (clear) memset(bufs[0] + at, 0, len * sizeof(float));
        return;
    }
    for (int s = 1; s < R; s *= 2) {
        int last = 2 * s >= R;
        for (int i = 0; i + s < R; i += 2 * s) {
            float *restrict b = bufs[i + s] + at;
            float *restrict a = bufs[i] + at;
            if (last) {
                float *restrict dst = out;
                for (size_t j = 0; j < len; j++) dst[j] = a[j] + b[j];
                if (clear) memset(a, 0, len * sizeof(float));
            } else {
                for (size_t j = 0; j < len; j++) a[j] += b[j];
            }
            if (clear) memset(b, 0, len * sizeof(float));
        }
    }
}

void pt_allreduce_tree(int R, float *const *bufs, size_t at, float *out, size_t len)
{
    tree(R, bufs, at, out, len, 0);
}

void pt_allreduce_run(pt_allreduce *ar, int rank, float *const *bufs, float *out)
{
    const int R = ar->n_ranks;
    const pt_allreduce_sink *sink = ar->sink;
    /* every replica's buffer must be final before anyone reads it; the
     * early ones do the idle work meanwhile */
    pt_spin_barrier_wait_idle(&ar->barrier, ar->idle, ar->idle_arg);
    const int use = sink && sink->open(sink->arg, rank);
    float *mine = ar->scratch + (size_t)rank * ar->chunk;
    for (size_t s = 0; s < ar->n_segments; s++) {
        const pt_allreduce_segment *g = &ar->segments[s];
        size_t lo = g->offset + g->len * (size_t)rank / (size_t)R;
        size_t hi = g->offset + g->len * (size_t)(rank + 1) / (size_t)R;
        for (size_t c = lo; c < hi; c += ar->chunk) {
            size_t e = c + ar->chunk < hi ? c + ar->chunk : hi;
            if (use) {
                tree(R, bufs, c, mine, e - c, 1);
                sink->chunk(sink->arg, rank, mine, c, e);
            } else {
                tree(R, bufs, c, out + c, e - c, 1);
            }
        }
        pt_spin_barrier_wait(&ar->barrier);
    }
}

/* ---- the progressive run (allreduce.h) ------------------------------------ */

void pt_allreduce_ready_reset(pt_allreduce *ar)
{
    for (int r = 0; r < ar->n_ranks; r++)
        atomic_store_explicit(&ar->ready[r], ar->n, memory_order_relaxed);
    atomic_store_explicit(&ar->next, 0, memory_order_relaxed);
    atomic_store_explicit(&ar->sleepers, 0, memory_order_relaxed);
}


void pt_allreduce_ready_publish(pt_allreduce *ar, int rank, size_t from)
{
    /* seq_cst store then load, against the sleeper's increment then check:
     * one of the two sees the other, so no wake-up is lost */
    atomic_store_explicit(&ar->ready[rank], from, memory_order_seq_cst);
    if (atomic_load_explicit(&ar->sleepers, memory_order_seq_cst) > 0) {
        pthread_mutex_lock(&ar->mu);
        pthread_cond_broadcast(&ar->cv);
        pthread_mutex_unlock(&ar->mu);
    }
}

/* The common edge: every rank's buffer is final on [edge, n). */
static size_t ready_edge(const pt_allreduce *ar, memory_order mo)
{
    size_t e = 0;
    for (int r = 0; r < ar->n_ranks; r++) {
        size_t x = atomic_load_explicit(&ar->ready[r], mo);
        e = x > e ? x : e;
    }
    return e;
}

typedef struct edge_wait {
    const pt_allreduce *ar;
    size_t at;   /* wanted: ready_edge <= at */
} edge_wait;

static int edge_reached(const void *arg)
{
    const edge_wait *w = arg;
    return ready_edge(w->ar, memory_order_acquire) <= w->at;
}

size_t pt_allreduce_ready_edge(const pt_allreduce *ar)
{
    return ready_edge(ar, memory_order_acquire);
}

/* Waits until every buffer is final on [at, n): idle work while it lasts
 * (and the idle function accepts), then spinning, then sleeping. */
static void wait_edge(pt_allreduce *ar, size_t at)
{
    edge_wait w = {ar, at};
    while (ar->idle && !edge_reached(&w) && ar->idle(ar->idle_arg)) {}
    if (pt_spin_until(edge_reached, &w)) return;
    pthread_mutex_lock(&ar->mu);
    atomic_fetch_add_explicit(&ar->sleepers, 1, memory_order_seq_cst);
    while (ready_edge(ar, memory_order_seq_cst) > at) pthread_cond_wait(&ar->cv, &ar->mu);
    atomic_fetch_sub_explicit(&ar->sleepers, 1, memory_order_seq_cst);
    pthread_mutex_unlock(&ar->mu);
}

void pt_allreduce_run_ready(pt_allreduce *ar, int rank, float *const *bufs, float *out)
{
    if (ar->n_segments != 1) {
        pt_allreduce_run(ar, rank, bufs, out);
        return;
    }
    const int R = ar->n_ranks;
    /* claims of PT_ALLREDUCE_READY_CHUNKS chunks: each claim's streams run
     * upward through it and the hardware prefetchers stay on them (single
     * descending chunks cost ~30% more a chunk) */
    const size_t C = ar->chunk, n = ar->n, U = C * PT_ALLREDUCE_READY_CHUNKS;
    const size_t K = (n + U - 1) / U;
    const pt_allreduce_sink *sink = ar->sink;
    pt_allreduce_ready_publish(ar, rank, 0);
    /* every rank's statistics are final once it has published (the sink's
     * open reads them): its first edge comes after its forward */
    wait_edge(ar, n - 1);
    const int use = sink && sink->open(sink->arg, rank);
    float *mine = ar->scratch + (size_t)rank * C;
    for (;;) {
        /* idle work first while it accepts: a chunk left over is shared by
         * every rank once they are done, idle work left over is not */
        while (ar->idle && atomic_load_explicit(&ar->next, memory_order_relaxed) < K &&
               ar->idle(ar->idle_arg)) {}
        /* the next chunk's edge first, so a rank that waits has claimed nothing */
        size_t k = atomic_load_explicit(&ar->next, memory_order_relaxed);
        if (k >= K) break;
        wait_edge(ar, (K - 1 - k) * U);
        k = atomic_fetch_add_explicit(&ar->next, 1, memory_order_relaxed);
        if (k >= K) break;
        const size_t ulo = (K - 1 - k) * U, uhi = ulo + U < n ? ulo + U : n;
        wait_edge(ar, ulo);
        for (size_t lo = ulo; lo < uhi; lo += C) {
            const size_t hi = lo + C < uhi ? lo + C : uhi;
            if (use) {
                tree(R, bufs, lo, mine, hi - lo, 1);
                sink->chunk(sink->arg, rank, mine, lo, hi);
            } else {
                tree(R, bufs, lo, out + lo, hi - lo, 1);
            }
        }
    }
}

int pt_allreduce_reference(int n_ranks, size_t n, float *const *bufs, float *out)
{
    if (n_ranks < 1) return -1;
    float *v = malloc((size_t)n_ranks * sizeof(float));
    if (!v) return -1;
    for (size_t j = 0; j < n; j++) {
        for (int i = 0; i < n_ranks; i++) v[i] = bufs[i][j];
        for (int s = 1; s < n_ranks; s *= 2)
            for (int i = 0; i + s < n_ranks; i += 2 * s) v[i] += v[i + s];
        out[j] = v[0];
    }
    free(v);
    return 0;
}
