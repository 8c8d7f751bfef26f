/* test_spinwait.c — the replica threads' spin-then-sleep waits
 * (engine/backend/spinwait.h): pt_spin_until returns at once when its
 * condition holds, returns false after the spin budget when it never does,
 * and sees a change made by another thread; the barrier keeps n threads in
 * lock step over many phases, both when every arrival is quick (the spin
 * path) and when one thread is late by more than the spin budget (the
 * sleep path), with 1 to 5 threads; with idle work, the early arrivals do
 * it while they wait (never the last one, never after the release, and
 * they stop asking once it returns 0) and the lock step holds; a barrier of
 * 0 threads is refused with its reason. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "engine/backend/spinwait.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_us(long us)
{
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

static int flag_set(const void *arg)
{
    return atomic_load((const _Atomic int *)arg) != 0;
}

static void test_spin_until_true_at_once(void **state)
{
    (void)state;
    _Atomic int flag = 1;
    double t0 = now_s();
    assert_true(pt_spin_until(flag_set, &flag));
    assert_true(now_s() - t0 < 0.5);
}

static void test_spin_until_gives_up(void **state)
{
    (void)state;
    _Atomic int flag = 0;
    double t0 = now_s();
    assert_false(pt_spin_until(flag_set, &flag));
    /* it spun for (at least) its budget, and not for ever */
    double dt = now_s() - t0;
    assert_true(dt >= PT_SPIN_NS * 1e-9);
    assert_true(dt < 5.0);
}

static void *set_later(void *arg)
{
    sleep_us(PT_SPIN_NS / 4000);   /* a quarter of the budget */
    atomic_store((_Atomic int *)arg, 1);
    return NULL;
}

static void test_spin_until_sees_other_thread(void **state)
{
    (void)state;
    _Atomic int flag = 0;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, set_later, &flag), 0);
    /* under load the setter may be late: then the spin gives up, and the
     * flag is set soon after; what must hold is that a true result means set */
    int seen = pt_spin_until(flag_set, &flag);
    pthread_join(th, NULL);
    if (seen) assert_int_equal(atomic_load(&flag), 1);
    assert_true(pt_spin_until(flag_set, &flag));
}

typedef struct lockstep {
    pt_spin_barrier *b;
    _Atomic int *counter;   /* arrivals per phase, checked after each barrier */
    int id, n, phases;
    long late_us;           /* thread 0 sleeps this long before each arrival */
    int errors;
} lockstep;

static void *run_lockstep(void *arg)
{
    lockstep *a = arg;
    for (int p = 0; p < a->phases; p++) {
        if (a->id == 0 && a->late_us) sleep_us(a->late_us);
        atomic_fetch_add(&a->counter[p], 1);
        pt_spin_barrier_wait(a->b);
        /* nobody leaves phase p before all n arrived in it */
        if (atomic_load(&a->counter[p]) != a->n) a->errors++;
        /* and nobody is two phases ahead: this thread has not arrived at
         * barrier p+1 yet, so no one can have passed it into phase p+2 */
        if (p + 2 < a->phases && atomic_load(&a->counter[p + 2]) != 0) a->errors++;
    }
    return NULL;
}

static void lockstep_case(int n, int phases, long late_us)
{
    pt_errors errs;
    pt_errors_init(&errs, 2);
    pt_spin_barrier b;
    assert_int_equal(pt_spin_barrier_init(&b, (uint32_t)n, &errs), 0);
    _Atomic int counter[400];
    assert_true(phases <= 400);
    for (int p = 0; p < phases; p++) atomic_init(&counter[p], 0);
    pthread_t th[8];
    lockstep args[8];
    for (int i = 0; i < n; i++) {
        args[i] = (lockstep){&b, counter, i, n, phases, late_us, 0};
        assert_int_equal(pthread_create(&th[i], NULL, run_lockstep, &args[i]), 0);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].errors, 0);
    }
    for (int p = 0; p < phases; p++) assert_int_equal(atomic_load(&counter[p]), n);
    pt_spin_barrier_close(&b);
    pt_errors_close(&errs);
}

static void test_barrier_lockstep_quick(void **state)
{
    (void)state;
    for (int n = 1; n <= 5; n++) lockstep_case(n, 400, 0);
}

static void test_barrier_lockstep_late_thread(void **state)
{
    (void)state;
    /* thread 0 arrives after the others gave up spinning: the sleep path */
    lockstep_case(2, 6, 3 * PT_SPIN_NS / 1000);
    lockstep_case(3, 6, 3 * PT_SPIN_NS / 1000);
}

/* Idle work at the barrier: thread 1 arrives first and works (one piece
 * per call, counted) until thread 0, late by 50 ms, arrives; a second
 * phase offers work that runs out after 3 pieces. */
typedef struct idle_work {
    _Atomic int calls;
    int limit;              /* calls that return 1; then 0 */
    _Atomic int *late_arrived;
    int after_release;      /* calls made once the late thread had arrived */
} idle_work;

static int do_idle(void *arg)
{
    idle_work *w = arg;
    if (atomic_load(w->late_arrived)) w->after_release++;
    int k = atomic_fetch_add(&w->calls, 1);
    sleep_us(50);
    return k + 1 < w->limit;
}

typedef struct idle_case {
    pt_spin_barrier *b;
    idle_work *work;
    _Atomic int *late_arrived, *early_entering;
    int id;
} idle_case;

static void *run_idle_case(void *arg)
{
    idle_case *c = arg;
    for (int phase = 0; phase < 2; phase++) {
        if (c->id == 0) {
            /* late by far more than a scheduling delay of thread 1 */
            while (atomic_load(c->early_entering) != phase + 1) sched_yield();
            sleep_us(50000);
            atomic_store(c->late_arrived, 1);
            pt_spin_barrier_wait_idle(c->b, do_idle, &c->work[phase]);
            atomic_store(c->late_arrived, 0);
        } else {
            atomic_store(c->early_entering, phase + 1);
            pt_spin_barrier_wait_idle(c->b, do_idle, &c->work[phase]);
        }
        pt_spin_barrier_wait(c->b);   /* phase 1 starts together */
    }
    return NULL;
}

static void test_barrier_idle_work(void **state)
{
    (void)state;
    pt_errors errs;
    pt_errors_init(&errs, 2);
    pt_spin_barrier b;
    assert_int_equal(pt_spin_barrier_init(&b, 2, &errs), 0);
    _Atomic int late = 0, entering = 0;
    idle_work work[2] = {{0, 1 << 30, &late, 0}, {0, 3, &late, 0}};
    idle_case c[2] = {{&b, work, &late, &entering, 0}, {&b, work, &late, &entering, 1}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, run_idle_case, &c[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    /* phase 0: work until the late thread came (>= 1 piece; at most the one
     * in progress when it arrived); phase 1: exactly the 3 pieces offered */
    assert_true(atomic_load(&work[0].calls) >= 1);
    assert_true(work[0].after_release <= 1);
    assert_int_equal(atomic_load(&work[1].calls), 3);
    /* one thread: nobody to wait for, no idle work */
    pt_spin_barrier one;
    assert_int_equal(pt_spin_barrier_init(&one, 1, &errs), 0);
    idle_work none = {0, 1 << 30, &late, 0};
    pt_spin_barrier_wait_idle(&one, do_idle, &none);
    pt_spin_barrier_wait_idle(&one, NULL, NULL);
    assert_int_equal(atomic_load(&none.calls), 0);
    pt_spin_barrier_close(&one);
    pt_spin_barrier_close(&b);
    pt_errors_close(&errs);
}

static void test_barrier_refuses_zero(void **state)
{
    (void)state;
    pt_errors errs;
    pt_errors_init(&errs, 2);
    pt_spin_barrier b;
    assert_int_equal(pt_spin_barrier_init(&b, 0, &errs), -1);
    char msg[256];
    pt_errors_first(&errs, msg, sizeof msg);
    assert_non_null(strstr(msg, "at least 1 thread"));
    pt_spin_barrier_close(&b);   /* closing a refused barrier is harmless */
    pt_errors_close(&errs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spin_until_true_at_once),
        cmocka_unit_test(test_spin_until_gives_up),
        cmocka_unit_test(test_spin_until_sees_other_thread),
        cmocka_unit_test(test_barrier_lockstep_quick),
        cmocka_unit_test(test_barrier_lockstep_late_thread),
        cmocka_unit_test(test_barrier_idle_work),
        cmocka_unit_test(test_barrier_refuses_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
