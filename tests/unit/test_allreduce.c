/* test_allreduce.c — the replica all-reduce: its sum is bitwise the fixed
 * pairwise tree of pt_allreduce_reference for any rank count (powers of two
 * or not), buffer length (chunk boundaries, fewer floats than ranks) and
 * segmentation; per-tensor segments give the same bits as one merged buffer;
 * the tree differs from a left-to-right sum (so order really is fixed, not
 * accidentally equal); bad segment tables are rejected with their reason;
 * the run leaves every replica buffer zero, and a sink that takes the sum
 * gets each rank's part of it once, final, after one opening call per rank,
 * while out is left alone (and gets the sum when the sink declines); the
 * progressive run (edges published as a backward finishes its layers) gives
 * the same bits and the same guarantees, chunks from any rank. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/allreduce.h"
#include "engine/core/rng.h"

typedef struct run_arg {
    pt_allreduce *ar;
    int rank;
    float *const *bufs;
    float *out;
} run_arg;

static void *run_rank(void *p)
{
    run_arg *a = p;
    pt_allreduce_run(a->ar, a->rank, a->bufs, a->out);
    return NULL;
}

static void *ready_fallback_rank(void *p)
{
    run_arg *a = p;
    pt_allreduce_run_ready(a->ar, a->rank, a->bufs, a->out);
    return NULL;
}

/* The collective on R threads (R <= 8), one per rank, as the replicas run it. */
static void run_ranks(pt_allreduce *ar, int R, float *const *bufs, float *out)
{
    pthread_t th[8];
    run_arg args[8];
    assert_true(R <= 8);
    for (int r = 0; r < R; r++) {
        args[r] = (run_arg){ar, r, bufs, out};
        assert_int_equal(pthread_create(&th[r], NULL, run_rank, &args[r]), 0);
    }
    for (int r = 0; r < R; r++) pthread_join(th[r], NULL);
}

/* Fills R buffers of n floats with values of mixed magnitude, so that the
 * order of summation changes the rounding. */
static float **make_bufs(int R, size_t n, uint64_t seed)
{
    pt_rng rng;
    pt_rng_init(&rng, seed, 1);
    float **b = calloc((size_t)R, sizeof(*b));
    assert_non_null(b);
    for (int r = 0; r < R; r++) {
        b[r] = malloc(n * sizeof(float));
        assert_non_null(b[r]);
        for (size_t j = 0; j < n; j++)
            b[r][j] = (float)(pt_rng_normal(&rng) * pow(10.0, (double)pt_rng_below(&rng, 7) - 3));
    }
    return b;
}

static float **copy_bufs(float *const *src, int R, size_t n)
{
    float **b = calloc((size_t)R, sizeof(*b));
    assert_non_null(b);
    for (int r = 0; r < R; r++) {
        b[r] = malloc(n * sizeof(float));
        assert_non_null(b[r]);
        memcpy(b[r], src[r], n * sizeof(float));
    }
    return b;
}

static void free_bufs(float **b, int R)
{
    for (int r = 0; r < R; r++) free(b[r]);
    free(b);
}

/* Runs the collective on R threads over copies of src; returns the output. */
static float *threaded_sum(float *const *src, int R, size_t n, const pt_allreduce_segment *segs,
                           size_t n_segs)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_allreduce ar;
    assert_int_equal(pt_allreduce_init(&ar, R, n, segs, n_segs, &errs), 0);
    float **work = copy_bufs(src, R, n);
    float *out = malloc(n * sizeof(float));
    assert_non_null(out);
    run_ranks(&ar, R, work, out);
    free_bufs(work, R);
    pt_allreduce_close(&ar);
    pt_errors_close(&errs);
    return out;
}

static void assert_bitwise(const float *a, const float *b, size_t n)
{
    assert_memory_equal(a, b, n * sizeof(float));
}

static void test_merged_equals_reference(void **state)
{
    (void)state;
    static const int ranks[] = {1, 2, 3, 4, 5, 7, 8};
    /* lengths around the chunk size and below the rank count */
    static const size_t lens[] = {3, 1000, PT_ALLREDUCE_CHUNK * 2 + 17};
    for (size_t ri = 0; ri < sizeof ranks / sizeof *ranks; ri++) {
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            int R = ranks[ri];
            size_t n = lens[li];
            float **src = make_bufs(R, n, 100 + ri * 10 + li);
            float **keep = copy_bufs(src, R, n);
            float *ref = malloc(n * sizeof(float));
            assert_non_null(ref);
            assert_int_equal(pt_allreduce_reference(R, n, src, ref), 0);
            /* the reference leaves its inputs alone */
            for (int r = 0; r < R; r++) assert_bitwise(src[r], keep[r], n);
            float *out = threaded_sum(src, R, n, NULL, 0);
            assert_bitwise(out, ref, n);
            /* and it is a sum: close to the double-precision total */
            for (size_t j = 0; j < n; j++) {
                double s = 0.0, mag = 0.0;
                for (int r = 0; r < R; r++) {
                    s += src[r][j];
                    mag += fabs(src[r][j]);
                }
                assert_true(fabs(out[j] - s) <= 1e-6 * mag + 1e-30);
            }
            free(out);
            free(ref);
            free_bufs(keep, R);
            free_bufs(src, R);
        }
    }
}

/* The ablation: one collective per tensor, same bits as the merged buffer. */
static void test_segments_equal_merged(void **state)
{
    (void)state;
    const int R = 4;
    static const size_t sizes[] = {2500, 25, 100, 10000, 1, 100, 5000, 50};
    pt_allreduce_segment segs[8];
    size_t n = 0;
    for (int i = 0; i < 8; i++) {
        segs[i] = (pt_allreduce_segment){n, sizes[i]};
        n += sizes[i];
    }
    float **src = make_bufs(R, n, 7);
    float *merged = threaded_sum(src, R, n, NULL, 0);
    float *split = threaded_sum(src, R, n, segs, 8);
    assert_bitwise(merged, split, n);
    free(merged);
    free(split);
    free_bufs(src, R);
}

/* The tree is not a left-to-right sum: 1 + 1e8 - 1e8 + 1 is 2 exactly, but
 * in float the tree (1 + 1e8) + (-1e8 + 1) gives 0 and the left fold
 * ((1 + 1e8) - 1e8) + 1 gives 1; the collective must give the tree's value. */
static void test_order_is_the_pairwise_tree(void **state)
{
    (void)state;
    float v[4][1] = {{1.0f}, {1e8f}, {-1e8f}, {1.0f}};
    float *bufs[4] = {v[0], v[1], v[2], v[3]};
    float *out = threaded_sum(bufs, 4, 1, NULL, 0);
    float tree = (1.0f + 1e8f) + (-1e8f + 1.0f);
    volatile float left = 1.0f;
    left += 1e8f;
    left += -1e8f;
    left += 1.0f;
    assert_true(tree != left);
    assert_true(out[0] == tree);
    free(out);
}

/* Many consecutive collectives on the same handle (the barrier is reused). */
static void test_repeated_runs(void **state)
{
    (void)state;
    const int R = 3;
    const size_t n = 777;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_allreduce ar;
    assert_int_equal(pt_allreduce_init(&ar, R, n, NULL, 0, &errs), 0);
    float *out = malloc(n * sizeof(float));
    float *ref = malloc(n * sizeof(float));
    assert_non_null(out);
    assert_non_null(ref);
    for (int it = 0; it < 20; it++) {
        float **src = make_bufs(R, n, 1000 + (uint64_t)it);
        assert_int_equal(pt_allreduce_reference(R, n, src, ref), 0);
        run_ranks(&ar, R, src, out);
        assert_bitwise(out, ref, n);
        free_bufs(src, R);
    }
    free(out);
    free(ref);
    pt_allreduce_close(&ar);
    pt_errors_close(&errs);
}

/* A sink that checks what it is shown: every chunk is final (equal to the
 * reference), lies in the caller's part of its segment, and [0, n) is shown
 * once over all ranks; open is called once per rank. */
typedef struct sink_log {
    const float *ref;
    const pt_allreduce *ar;
    int *seen;          /* [n] chunk calls covering the element */
    int opens[8];
    int wrong[8];       /* chunks not final, or outside the rank's part */
    int accept;         /* what open returns */
    int any_rank;       /* progressive run: a chunk may come from any rank */
} sink_log;

static int log_open(void *arg, int rank)
{
    sink_log *l = arg;
    l->opens[rank]++;
    return l->accept;
}

static void log_chunk(void *arg, int rank, const float *sum, size_t lo, size_t hi)
{
    sink_log *l = arg;
    const pt_allreduce *ar = l->ar;
    int inside = 0;
    for (size_t s = 0; s < ar->n_segments; s++) {
        const pt_allreduce_segment *g = &ar->segments[s];
        size_t a = g->offset + g->len * (size_t)rank / (size_t)ar->n_ranks;
        size_t b = g->offset + g->len * (size_t)(rank + 1) / (size_t)ar->n_ranks;
        inside |= lo >= a && hi <= b && lo < hi;
    }
    if (l->any_rank) inside = lo < hi && hi <= ar->n;
    if (!inside || memcmp(sum, l->ref + lo, (hi - lo) * sizeof(float)) != 0)
        l->wrong[rank]++;
    for (size_t j = lo; j < hi; j++) l->seen[j]++;
}

/* What every run must leave behind (both tests below): each replica buffer
 * all +0.0 (the tree clears each element right after its last read; a -0.0
 * would be a sum written back), each rank's sink opened `opens` times and
 * shown no chunk that is not final or not its own, and every element shown
 * `seen` times over all ranks.  `what` names the case in a failure. */
static void assert_run_clean(float *const *bufs, int R, size_t n, const sink_log *log, int opens,
                             int seen, const char *what)
{
    for (int r = 0; r < R; r++) {
        for (size_t j = 0; j < n; j++)
            if (bufs[r][j] != 0.0f || signbit(bufs[r][j]))
                fail_msg("%s: buffer %d element %zu left %g", what, r, j, (double)bufs[r][j]);
        assert_int_equal(log->opens[r], opens);
        assert_int_equal(log->wrong[r], 0);
    }
    for (size_t j = 0; j < n; j++) assert_int_equal(log->seen[j], seen);
}

static void test_buffers_zero_and_sink(void **state)
{
    (void)state;
    static const int ranks[] = {1, 2, 3, 4};
    static const size_t sizes[] = {2500, 25, 100, PT_ALLREDUCE_CHUNK + 3, 1, 7};
    pt_allreduce_segment segs[6];
    size_t n = 0;
    for (int i = 0; i < 6; i++) {
        segs[i] = (pt_allreduce_segment){n, sizes[i]};
        n += sizes[i];
    }
    for (size_t ri = 0; ri < sizeof ranks / sizeof *ranks; ri++) {
        for (int split = 0; split <= 1; split++) {
            for (int accept = 0; accept <= 1; accept++) {
                const int R = ranks[ri];
                pt_errors errs;
                pt_errors_init(&errs, 0);
                pt_allreduce ar;
                assert_int_equal(pt_allreduce_init(&ar, R, n, split ? segs : NULL, split ? 6 : 0,
                                                   &errs), 0);
                float **src = make_bufs(R, n, 500 + ri);
                float *ref = malloc(n * sizeof(float));
                float *out = malloc(n * sizeof(float));
                assert_non_null(ref);
                assert_non_null(out);
                for (size_t j = 0; j < n; j++) out[j] = -7.0f;
                assert_int_equal(pt_allreduce_reference(R, n, src, ref), 0);
                sink_log log = {.ref = ref, .ar = &ar, .accept = accept};
                log.seen = calloc(n, sizeof(int));
                assert_non_null(log.seen);
                pt_allreduce_sink sink = {.open = log_open, .chunk = log_chunk, .arg = &log};
                pt_allreduce_set_sink(&ar, &sink);
                run_ranks(&ar, R, src, out);
                if (accept)
                    for (size_t j = 0; j < n; j++) assert_true(out[j] == -7.0f);
                else
                    assert_bitwise(out, ref, n);
                char what[64];
                snprintf(what, sizeof what, "R=%d split %d", R, split);
                assert_run_clean(src, R, n, &log, 1, accept, what);
                free(log.seen);
                free(out);
                free(ref);
                free_bufs(src, R);
                pt_allreduce_close(&ar);
                pt_errors_close(&errs);
            }
        }
    }
}

/* ---- the progressive run --------------------------------------------------- */

/* One rank of a progressive run: its buffer (NaN where not yet written, so
 * a read before the edge shows in the sum) is written from the top down in
 * `steps` pieces, each published, as a backward finishes its layers, then
 * the rank joins the run.  delay_us before each publication: a slow rank
 * (longer than the spin, the others sleep). */
typedef struct ready_arg {
    pt_allreduce *ar;
    int rank;
    float *const *bufs;
    float *out;
    const float *final;
    size_t n;
    int steps;
    int delay_us;
} ready_arg;

static void *ready_rank(void *p)
{
    ready_arg *a = p;
    size_t edge = a->n;
    for (int s = 1; s <= a->steps; s++) {
        size_t lo = a->n - a->n * (size_t)s / (size_t)a->steps;
        memcpy(a->bufs[a->rank] + lo, a->final + lo, (edge - lo) * sizeof(float));
        if (a->delay_us) usleep((useconds_t)a->delay_us);
        pt_allreduce_ready_publish(a->ar, a->rank, lo);
        edge = lo;
    }
    pt_allreduce_run_ready(a->ar, a->rank, a->bufs, a->out);
    return NULL;
}

static void run_ready_ranks(pt_allreduce *ar, int R, float *const *bufs, float *out,
                            float *const *final, size_t n, int steps, int delay_us)
{
    pthread_t th[8];
    ready_arg args[8];
    assert_true(R <= 8);
    pt_allreduce_ready_reset(ar);
    for (int r = 0; r < R; r++) {
        for (size_t j = 0; j < n; j++) bufs[r][j] = NAN;
        args[r] = (ready_arg){ar, r, bufs, out, final[r], n, steps, r * delay_us};
        assert_int_equal(pthread_create(&th[r], NULL, ready_rank, &args[r]), 0);
    }
    for (int r = 0; r < R; r++) pthread_join(th[r], NULL);
}

static _Atomic int idle_calls;

/* Idle work that accepts its first three calls of a run. */
static int count_idle(void *arg)
{
    (void)arg;
    return atomic_fetch_add(&idle_calls, 1) < 3;
}

/* The progressive run sums each element by the reference's tree whatever
 * rank takes it and whenever its edge arrives, reads nothing before every
 * rank has published it, leaves every buffer zero, shows a sink each
 * element once (final, any rank) after one open per rank, leaves out alone
 * when the sink takes the sum; slow ranks (the others sleep) and repeated
 * runs on one collective included; idle work runs while ranks wait. */
static void test_ready_run(void **state)
{
    (void)state;
    const size_t U = PT_ALLREDUCE_CHUNK * PT_ALLREDUCE_READY_CHUNKS;
    const size_t sizes[] = {1, 7, U - 1, U + 5, 3 * U + 100};
    for (int R = 1; R <= 4; R++) {
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            const size_t n = sizes[si];
            pt_errors errs;
            pt_errors_init(&errs, 0);
            pt_allreduce ar;
            assert_int_equal(pt_allreduce_init(&ar, R, n, NULL, 0, &errs), 0);
            pt_allreduce_set_idle(&ar, count_idle, NULL);
            float **final = make_bufs(R, n, 900 + 10 * (uint64_t)R + si);
            float **bufs = copy_bufs(final, R, n);
            float *ref = malloc(n * sizeof(float));
            float *out = malloc(n * sizeof(float));
            assert_non_null(ref);
            assert_non_null(out);
            assert_int_equal(pt_allreduce_reference(R, n, final, ref), 0);
            /* sink: none, declining, taking the sum; pieces: one, several, slow */
            for (int mode = 0; mode < 3; mode++) {
                for (int pace = 0; pace < 3; pace++) {
                    const int steps = pace == 0 ? 1 : 5, delay = pace == 2 ? 150 : 0;
                    sink_log log = {.ref = ref, .ar = &ar, .accept = mode == 2, .any_rank = 1};
                    log.seen = calloc(n, sizeof(int));
                    assert_non_null(log.seen);
                    pt_allreduce_sink sink = {.open = log_open, .chunk = log_chunk, .arg = &log};
                    pt_allreduce_set_sink(&ar, mode ? &sink : NULL);
                    for (size_t j = 0; j < n; j++) out[j] = -7.0f;
                    atomic_store(&idle_calls, 0);
                    run_ready_ranks(&ar, R, bufs, out, final, n, steps, delay);
                    if (mode == 2)
                        for (size_t j = 0; j < n; j++) assert_true(out[j] == -7.0f);
                    else
                        assert_bitwise(out, ref, n);
                    char what[64];
                    snprintf(what, sizeof what, "R=%d n=%zu", R, n);
                    assert_run_clean(bufs, R, n, &log, mode ? 1 : 0, mode == 2, what);
                    if (R > 1 && delay) assert_true(atomic_load(&idle_calls) >= 1);
                    free(log.seen);
                }
            }
            free(out);
            free(ref);
            free_bufs(bufs, R);
            free_bufs(final, R);
            pt_allreduce_close(&ar);
            pt_errors_close(&errs);
        }
    }
}

/* The common edge is the highest published edge; reset makes it n again;
 * with segments the progressive run is the segmented run (same bits,
 * publications not needed). */
static void test_ready_edge_and_segments(void **state)
{
    (void)state;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_allreduce ar;
    assert_int_equal(pt_allreduce_init(&ar, 3, 100, NULL, 0, &errs), 0);
    assert_int_equal(pt_allreduce_ready_edge(&ar), 100);
    pt_allreduce_ready_publish(&ar, 0, 40);
    pt_allreduce_ready_publish(&ar, 1, 10);
    assert_int_equal(pt_allreduce_ready_edge(&ar), 100);
    pt_allreduce_ready_publish(&ar, 2, 70);
    assert_int_equal(pt_allreduce_ready_edge(&ar), 70);
    pt_allreduce_ready_publish(&ar, 2, 0);
    assert_int_equal(pt_allreduce_ready_edge(&ar), 40);
    pt_allreduce_ready_reset(&ar);
    assert_int_equal(pt_allreduce_ready_edge(&ar), 100);
    pt_allreduce_close(&ar);

    const size_t n = 2 * PT_ALLREDUCE_CHUNK + 9;
    pt_allreduce_segment segs[3] = {{0, 5}, {5, PT_ALLREDUCE_CHUNK}, {PT_ALLREDUCE_CHUNK + 5,
                                                                     PT_ALLREDUCE_CHUNK + 4}};
    assert_int_equal(pt_allreduce_init(&ar, 2, n, segs, 3, &errs), 0);
    float **src = make_bufs(2, n, 77);
    float *ref = malloc(n * sizeof(float));
    float *out = malloc(n * sizeof(float));
    assert_non_null(ref);
    assert_non_null(out);
    assert_int_equal(pt_allreduce_reference(2, n, src, ref), 0);
    pthread_t th[2];
    run_arg args[2];
    for (int r = 0; r < 2; r++) {
        args[r] = (run_arg){&ar, r, src, out};
        assert_int_equal(pthread_create(&th[r], NULL, ready_fallback_rank, &args[r]), 0);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    assert_bitwise(out, ref, n);
    free(out);
    free(ref);
    free_bufs(src, 2);
    pt_allreduce_close(&ar);
    pt_errors_close(&errs);
}

static void expect_init_error(int R, size_t n, const pt_allreduce_segment *segs, size_t n_segs,
                              const char *field, const char *message)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_allreduce ar;
    assert_int_equal(pt_allreduce_init(&ar, R, n, segs, n_segs, &errs), -1);
    assert_int_equal(errs.kept, 1);
    assert_string_equal(errs.items[0].field, field);
    assert_string_equal(errs.items[0].message, message);
    pt_errors_close(&errs);
}

static void test_init_errors(void **state)
{
    (void)state;
    expect_init_error(0, 10, NULL, 0, "allreduce",
                      "all-reduce needs at least 1 rank, got 0");
    expect_init_error(2, 0, NULL, 0, "allreduce", "all-reduce over an empty buffer");
    pt_allreduce_segment one = {0, 10};
    expect_init_error(2, 10, &one, 0, "allreduce", "segment list is empty");
    pt_allreduce_segment gap[2] = {{0, 4}, {5, 5}};
    expect_init_error(2, 10, gap, 2, "allreduce",
                      "segment 1 [5, +5) does not continue the tiling of 10 floats at offset 4");
    pt_allreduce_segment overlap[2] = {{0, 6}, {4, 6}};
    expect_init_error(2, 10, overlap, 2, "allreduce",
                      "segment 1 [4, +6) does not continue the tiling of 10 floats at offset 6");
    pt_allreduce_segment empty[2] = {{0, 10}, {10, 0}};
    expect_init_error(2, 10, empty, 2, "allreduce",
                      "segment 1 [10, +0) does not continue the tiling of 10 floats at offset 10");
    pt_allreduce_segment past[1] = {{0, 11}};
    expect_init_error(2, 10, past, 1, "allreduce",
                      "segment 0 [0, +11) does not continue the tiling of 10 floats at offset 0");
    pt_allreduce_segment shortfall[1] = {{0, 9}};
    expect_init_error(2, 10, shortfall, 1, "allreduce", "segments cover 9 of 10 floats");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merged_equals_reference),
        cmocka_unit_test(test_segments_equal_merged),
        cmocka_unit_test(test_order_is_the_pairwise_tree),
        cmocka_unit_test(test_repeated_runs),
        cmocka_unit_test(test_buffers_zero_and_sink),
        cmocka_unit_test(test_init_errors),
        cmocka_unit_test(test_ready_run),
        cmocka_unit_test(test_ready_edge_and_segments),
    };
    return cmocka_run_group_tests_name("allreduce", tests, NULL, NULL);
}
