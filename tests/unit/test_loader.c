/* test_loader.c — the prefetch ring: every submitted job is filled exactly
 * once and handed to its consumer with its own content, in sequence, for
 * 0 (inline), 1 and 3 fill threads and one or several consumers; the ring
 * never holds more than n_slots jobs; inline fills run on the consumer;
 * a consumer fills a job nobody has claimed itself (out of sequence, the
 * fill thread then steps over it) and pt_loader_help fills pending jobs in
 * sequence on the caller, even while fill threads run; fill errors,
 * cancelled and never-submitted jobs are reported with their message;
 * close stops threads whatever is pending. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/loader.h"

#define MAX_SLOTS 16

/* The caller's per-slot storage: the job (a number) and the "batch" the
 * fill builds from it. */
typedef struct fake {
    uint64_t job[MAX_SLOTS];
    uint64_t batch[MAX_SLOTS];
    pthread_t filler[MAX_SLOTS];
    atomic_int fills;
    atomic_int filled[64];  /* fills per job value (< 64) */
    uint64_t fail_job;      /* job whose fill fails; UINT64_MAX = none */
    uint64_t gate_job;      /* job whose fill waits for `open`; UINT64_MAX = none */
    atomic_int gate_reached, open;
} fake;

static int fake_fill(void *user, int slot, pt_errors *errs)
{
    fake *f = user;
    atomic_fetch_add(&f->fills, 1);
    if (f->job[slot] < 64) atomic_fetch_add(&f->filled[f->job[slot]], 1);
    f->filler[slot] = pthread_self();
    if (f->job[slot] == f->gate_job) {
        atomic_store(&f->gate_reached, 1);
        while (!atomic_load(&f->open)) sched_yield();
    }
    if (f->job[slot] == f->fail_job) {
        pt_errors_add(errs, "qm9.ptd", 0, "graph", "structure %llu is missing",
                      (unsigned long long)f->job[slot]);
        return -1;
    }
    /* a little work so fills and consumption overlap */
    volatile uint64_t h = f->job[slot];
    for (int i = 0; i < 2000; i++) h = h * 6364136223846793005ULL + 1442695040888963407ULL;
    f->batch[slot] = f->job[slot] * 1000003ULL;
    return 0;
}

static void fake_init(fake *f)
{
    memset(f, 0, sizeof(*f));
    f->fail_job = UINT64_MAX;
    f->gate_job = UINT64_MAX;
}

/* The loader every test drives: the fake's storage, an error list and a
 * ring of `slots` with `threads` fill threads (init must succeed). */
static void rig_open(pt_loader *ld, fake *f, pt_errors *errs, int slots, int threads)
{
    fake_init(f);
    pt_errors_init(errs, 0);
    assert_int_equal(pt_loader_init(ld, slots, threads, fake_fill, f, errs), 0);
}

static void rig_close(pt_loader *ld, pt_errors *errs)
{
    pt_loader_close(ld);
    pt_errors_close(errs);
}

/* Takes batch `seq`, checks it was built from job value `v`, releases it;
 * returns the slot it was in. */
static int consume(pt_loader *ld, fake *f, pt_errors *errs, uint64_t seq, uint64_t v)
{
    int s = pt_loader_acquire(ld, seq, errs);
    assert_true(s >= 0);
    assert_int_equal(f->batch[s], v * 1000003ULL);
    pt_loader_release(ld, seq);
    return s;
}

/* Submits job value `v` if the ring has room; returns its seq or -1. */
static int64_t try_submit(pt_loader *ld, fake *f, uint64_t v)
{
    uint64_t seq;
    int s = pt_loader_next_slot(ld, &seq);
    if (s < 0) return -1;
    f->job[s] = v;
    pt_loader_submit(ld);
    return (int64_t)seq;
}

/* One consumer, jobs pushed through the ring as fast as it drains. */
static void run_single(int n_slots, int n_threads)
{
    fake f;
    pt_errors errs;
    pt_loader ld;
    rig_open(&ld, &f, &errs, n_slots, n_threads);
    const uint64_t n = 500;
    uint64_t submitted = 0, consumed = 0;
    while (consumed < n) {
        while (submitted < n) {
            int64_t seq = try_submit(&ld, &f, 7 * submitted + 3);
            if (seq < 0) break;
            assert_int_equal(seq, submitted);
            submitted++;
        }
        /* the ring never holds more than n_slots jobs */
        assert_true(submitted - consumed <= (uint64_t)n_slots);
        int s = consume(&ld, &f, &errs, consumed, 7 * consumed + 3);
        /* with fill threads either fills it (a consumer takes an unclaimed
         * job itself), exactly once: the count below; inline, nothing
         * refills the released slot before the next acquire */
        if (n_threads == 0) assert_true(pthread_equal(f.filler[s], pthread_self()));
        consumed++;
    }
    assert_int_equal(atomic_load(&f.fills), n);
    assert_int_equal(errs.total, 0);
    rig_close(&ld, &errs);
}

static void test_single_consumer(void **state)
{
    (void)state;
    run_single(1, 0);
    run_single(3, 0);
    run_single(1, 1);
    run_single(3, 1);
    run_single(4, 3);
}

/* Several consumers (the replicas): consumer r takes jobs r, r+C, r+2C, …
 * each step; the host submits a step's jobs only once the ring has room. */
typedef struct consumer_arg {
    pt_loader *ld;
    fake *f;
    int rank, n_consumers, steps;
    pthread_barrier_t *step_start, *step_end;
    int bad;
} consumer_arg;

static void *consumer(void *p)
{
    consumer_arg *a = p;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    for (int st = 0; st < a->steps; st++) {
        pthread_barrier_wait(a->step_start);
        uint64_t seq = (uint64_t)st * (uint64_t)a->n_consumers + (uint64_t)a->rank;
        int s = pt_loader_acquire(a->ld, seq, &errs);
        if (s < 0 || a->f->batch[s] != (seq + 11) * 1000003ULL) a->bad++;
        if (s >= 0) pt_loader_release(a->ld, seq);
        pthread_barrier_wait(a->step_end);
    }
    pt_errors_close(&errs);
    return NULL;
}

static void run_multi(int n_consumers, int prefetch, int n_threads)
{
    fake f;
    pt_errors errs;
    pt_loader ld;
    int n_slots = n_consumers * (1 + prefetch);
    assert_true(n_slots <= MAX_SLOTS);
    rig_open(&ld, &f, &errs, n_slots, n_threads);
    const int steps = 60;
    pthread_barrier_t start, end;
    pthread_barrier_init(&start, NULL, (unsigned)n_consumers + 1);
    pthread_barrier_init(&end, NULL, (unsigned)n_consumers + 1);
    consumer_arg args[8];
    pthread_t th[8];
    for (int r = 0; r < n_consumers; r++) {
        args[r] = (consumer_arg){&ld, &f, r, n_consumers, steps, &start, &end, 0};
        assert_int_equal(pthread_create(&th[r], NULL, consumer, &args[r]), 0);
    }
    uint64_t next = 0, total = (uint64_t)steps * (uint64_t)n_consumers;
    for (int st = 0; st < steps; st++) {
        /* this step's jobs must all fit, later ones as room allows */
        while (next < total && try_submit(&ld, &f, next + 11) >= 0) next++;
        assert_true(next >= (uint64_t)(st + 1) * (uint64_t)n_consumers);
        pthread_barrier_wait(&start);
        pthread_barrier_wait(&end);
    }
    for (int r = 0; r < n_consumers; r++) {
        pthread_join(th[r], NULL);
        assert_int_equal(args[r].bad, 0);
    }
    assert_int_equal(atomic_load(&f.fills), total);
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&end);
    rig_close(&ld, &errs);
}

static void test_several_consumers(void **state)
{
    (void)state;
    run_multi(3, 0, 0);
    run_multi(3, 1, 1);
    run_multi(2, 3, 1);
    run_multi(4, 2, 2);
}

static void test_fill_error(void **state)
{
    (void)state;
    for (int threads = 0; threads <= 1; threads++) {
        fake f;
        pt_errors errs;
        pt_loader ld;
        rig_open(&ld, &f, &errs, 2, threads);
        f.fail_job = 42;
        assert_int_equal(try_submit(&ld, &f, 41), 0);
        assert_int_equal(try_submit(&ld, &f, 42), 1);
        consume(&ld, &f, &errs, 0, 41);
        assert_int_equal(pt_loader_acquire(&ld, 1, &errs), -1);
        assert_int_equal(errs.kept, 1);
        assert_string_equal(errs.items[0].message, "qm9.ptd: graph: structure 42 is missing");
        pt_loader_release(&ld, 1);
        /* the ring goes on after a failed job */
        assert_int_equal(try_submit(&ld, &f, 43), 2);
        consume(&ld, &f, &errs, 2, 43);
        rig_close(&ld, &errs);
    }
}

static void test_ring_full_and_bad_sequences(void **state)
{
    (void)state;
    fake f;
    pt_errors errs;
    pt_loader ld;
    rig_open(&ld, &f, &errs, 2, 1);
    assert_int_equal(try_submit(&ld, &f, 1), 0);
    assert_int_equal(try_submit(&ld, &f, 2), 1);
    assert_int_equal(try_submit(&ld, &f, 3), -1);          /* full */
    assert_int_equal(pt_loader_acquire(&ld, 5, &errs), -1);
    assert_string_equal(errs.items[0].message, "batch 5 was never submitted");
    int s = pt_loader_acquire(&ld, 0, &errs);
    assert_true(s >= 0);
    assert_int_equal(pt_loader_acquire(&ld, 0, &errs), -1);
    assert_string_equal(errs.items[1].message, "batch 0 is already held");
    pt_loader_release(&ld, 0);
    assert_int_equal(pt_loader_acquire(&ld, 0, &errs), -1);
    assert_string_equal(errs.items[2].message, "batch 0 was cancelled or already released");
    /* seq 1 is pending: cancel drops it, numbering goes on */
    pt_loader_cancel(&ld);
    assert_int_equal(pt_loader_acquire(&ld, 1, &errs), -1);
    assert_string_equal(errs.items[3].message, "batch 1 was cancelled or already released");
    assert_int_equal(try_submit(&ld, &f, 9), 2);
    assert_int_equal(try_submit(&ld, &f, 10), 3);
    s = pt_loader_acquire(&ld, 3, &errs);
    assert_true(s >= 0);
    assert_int_equal(f.batch[s], 10 * 1000003ULL);
    pt_loader_release(&ld, 3);
    s = pt_loader_acquire(&ld, 2, &errs);
    assert_int_equal(f.batch[s], 9 * 1000003ULL);
    pt_loader_release(&ld, 2);
    assert_int_equal(errs.total, 4);
    rig_close(&ld, &errs);
}

/* Close with submitted jobs nobody consumes, several threads: must return. */
static void test_close_with_pending(void **state)
{
    (void)state;
    for (int k = 0; k < 20; k++) {
        fake f;
        pt_errors errs;
        pt_loader ld;
        rig_open(&ld, &f, &errs, 4, 3);
        for (int i = 0; i < k % 5; i++) assert_true(try_submit(&ld, &f, (uint64_t)i) >= 0);
        pt_loader_close(&ld);
        assert_null(ld.slots);
        pt_loader_close(&ld);   /* harmless twice */
        pt_errors_close(&errs);
    }
}

/* The fill thread is stuck in job 0's fill: the consumer of job 1 fills it
 * itself, out of sequence, and a helper fills job 2; once job 0 is done the
 * fill thread steps over 1 and 2 (claimed) to job 3 (unless its consumer
 * gets there first).  Every job is filled exactly once, with its own
 * content. */
static void test_consumer_and_helper_claim(void **state)
{
    (void)state;
    fake f;
    pt_errors errs;
    pt_loader ld;
    rig_open(&ld, &f, &errs, 4, 1);
    f.gate_job = 0;
    for (uint64_t v = 0; v < 3; v++) assert_int_equal(try_submit(&ld, &f, v), (int64_t)v);
    while (!atomic_load(&f.gate_reached)) sched_yield();
    int s = pt_loader_acquire(&ld, 1, &errs);
    assert_int_equal(s, 1);
    assert_true(pthread_equal(f.filler[s], pthread_self()));
    assert_int_equal(f.batch[s], 1 * 1000003ULL);
    assert_int_equal(pt_loader_help(&ld), 1);                 /* job 2, here */
    assert_true(pthread_equal(f.filler[2], pthread_self()));
    assert_int_equal(pt_loader_help(&ld), 0);                 /* nothing pending */
    assert_int_equal(try_submit(&ld, &f, 3), 3);
    atomic_store(&f.open, 1);
    for (uint64_t q = 0; q < 4; q++) {
        if (q == 1) {
            pt_loader_release(&ld, 1);
            continue;
        }
        s = pt_loader_acquire(&ld, q, &errs);
        assert_int_equal(s, (int)q);
        assert_int_equal(f.batch[s], q * 1000003ULL);
        if (q == 0) assert_false(pthread_equal(f.filler[s], pthread_self()));
        pt_loader_release(&ld, q);
    }
    for (int v = 0; v < 4; v++) assert_int_equal(atomic_load(&f.filled[v]), 1);
    assert_int_equal(atomic_load(&f.fills), 4);
    assert_int_equal(errs.total, 0);
    rig_close(&ld, &errs);
}

/* Helpers in inline mode and with a failing job: help fills in sequence,
 * a failed fill is reported to the consumer as the fill thread's would be. */
static void test_help_inline_and_failure(void **state)
{
    (void)state;
    fake f;
    pt_errors errs;
    pt_loader ld;
    rig_open(&ld, &f, &errs, 3, 0);
    f.fail_job = 5;
    assert_int_equal(pt_loader_help(&ld), 0);                 /* empty ring */
    assert_int_equal(try_submit(&ld, &f, 4), 0);
    assert_int_equal(try_submit(&ld, &f, 5), 1);
    assert_int_equal(pt_loader_help(&ld), 1);
    assert_int_equal(pt_loader_help(&ld), 1);
    assert_int_equal(pt_loader_help(&ld), 0);
    assert_int_equal(atomic_load(&f.fills), 2);
    consume(&ld, &f, &errs, 0, 4);
    assert_int_equal(pt_loader_acquire(&ld, 1, &errs), -1);
    assert_string_equal(errs.items[0].message, "qm9.ptd: graph: structure 5 is missing");
    pt_loader_release(&ld, 1);
    assert_int_equal(atomic_load(&f.fills), 2);               /* no fill twice */
    /* cancelled jobs are not pending */
    assert_int_equal(try_submit(&ld, &f, 6), 2);
    pt_loader_cancel(&ld);
    assert_int_equal(pt_loader_help(&ld), 0);
    rig_close(&ld, &errs);
}

/* Helpers race the fill threads and several consumers: still exactly once. */
typedef struct helper_arg {
    pt_loader *ld;
    atomic_int *stop;
    int helped;
} helper_arg;

static void *helper(void *p)
{
    helper_arg *a = p;
    while (!atomic_load(a->stop)) a->helped += pt_loader_help(a->ld);
    return NULL;
}

static void test_helpers_race(void **state)
{
    (void)state;
    for (int threads = 0; threads <= 2; threads++) {
        fake f;
        pt_errors errs;
        pt_loader ld;
        rig_open(&ld, &f, &errs, 8, threads);
        atomic_int stop = 0;
        helper_arg ha[2] = {{&ld, &stop, 0}, {&ld, &stop, 0}};
        pthread_t th[2];
        for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, helper, &ha[i]), 0);
        const uint64_t n = 64;
        uint64_t submitted = 0, consumed = 0;
        while (consumed < n) {
            while (submitted < n && try_submit(&ld, &f, submitted) >= 0) submitted++;
            consume(&ld, &f, &errs, consumed, consumed);
            consumed++;
        }
        atomic_store(&stop, 1);
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        for (uint64_t v = 0; v < n; v++) assert_int_equal(atomic_load(&f.filled[v]), 1);
        assert_int_equal(errs.total, 0);
        rig_close(&ld, &errs);
    }
}

static void test_init_errors(void **state)
{
    (void)state;
    fake f;
    fake_init(&f);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_loader ld;
    assert_int_equal(pt_loader_init(&ld, 0, 1, fake_fill, &f, &errs), -1);
    assert_string_equal(errs.items[0].field, "loader");
    assert_string_equal(errs.items[0].message, "the loader needs at least 1 batch buffer, got 0");
    assert_int_equal(pt_loader_init(&ld, 2, -1, fake_fill, &f, &errs), -1);
    assert_string_equal(errs.items[1].message, "thread count must be >= 0, got -1");
    assert_int_equal(pt_loader_init(&ld, 2, 1, NULL, &f, &errs), -1);
    assert_string_equal(errs.items[2].message, "no fill function");
    pt_errors_close(&errs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_consumer),
        cmocka_unit_test(test_several_consumers),
        cmocka_unit_test(test_fill_error),
        cmocka_unit_test(test_ring_full_and_bad_sequences),
        cmocka_unit_test(test_close_with_pending),
        cmocka_unit_test(test_consumer_and_helper_claim),
        cmocka_unit_test(test_help_inline_and_failure),
        cmocka_unit_test(test_helpers_race),
        cmocka_unit_test(test_init_errors),
    };
    return cmocka_run_group_tests_name("loader", tests, NULL, NULL);
}
