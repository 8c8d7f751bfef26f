/* test_cpu_spread.c — a replica thread leaving the host's CPU
 * (engine/backend/cpu_spread.h): pinned to one CPU of two, leaving it moves
 * the thread to another CPU and gives back its old affinity (never left
 * pinned); leaving a CPU it is not on does nothing; a thread whose only CPU
 * is the one to leave stays (0) with its affinity unchanged; a negative or
 * out-of-range CPU is refused (-1).  On a one-CPU machine the move case
 * checks the "only CPU" answer instead. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>

#include "engine/backend/cpu_spread.h"

/* The first two CPUs of the thread's affinity in *a, *b (b -1 if only one). */
static void two_cpus(const cpu_set_t *set, int *a, int *b)
{
    *a = *b = -1;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, set)) continue;
        if (*a < 0) *a = c;
        else if (*b < 0) { *b = c; return; }
    }
}

static void pin(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0);
    sched_yield();
    assert_int_equal(sched_getcpu(), cpu);
}

static void test_leave_moves_and_unpins(void **state)
{
    (void)state;
    cpu_set_t all, now;
    assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof all, &all), 0);
    int a, b;
    two_cpus(&all, &a, &b);
    assert_true(a >= 0);
    if (b < 0) {   /* one CPU: nothing to move to (test_leave_only_cpu's answer) */
        assert_int_equal(pt_thread_leave_cpu(a), 0);
        return;
    }
    cpu_set_t pair;
    CPU_ZERO(&pair);
    CPU_SET(a, &pair);
    CPU_SET(b, &pair);
    /* on a, with both CPUs allowed (widening the mask does not move a running
     * thread; a preemption in between could, so pin and widen again) */
    int tries = 0;
    do {
        pin(a);
        assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof pair, &pair), 0);
    } while (sched_getcpu() != a && ++tries < 100);
    assert_int_equal(pt_thread_leave_cpu(a), 1);
    assert_int_equal(sched_getcpu(), b);
    /* the affinity it had: both CPUs, not pinned to b */
    assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof now, &now), 0);
    assert_true(CPU_EQUAL(&now, &pair));
    /* not on that CPU: nothing to do */
    int here = sched_getcpu();
    assert_int_equal(pt_thread_leave_cpu(here == a ? b : a), 0);
    assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof all, &all), 0);
}

static void test_leave_only_cpu(void **state)
{
    (void)state;
    cpu_set_t all, now;
    assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof all, &all), 0);
    int a, b;
    two_cpus(&all, &a, &b);
    pin(a);
    assert_int_equal(pt_thread_leave_cpu(a), 0);
    assert_int_equal(sched_getcpu(), a);
    assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof now, &now), 0);
    assert_int_equal(CPU_COUNT(&now), 1);
    assert_true(CPU_ISSET(a, &now));
    assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof all, &all), 0);
}

static void test_leave_refuses_bad_cpu(void **state)
{
    (void)state;
    assert_int_equal(pt_thread_leave_cpu(-1), -1);
    assert_int_equal(pt_thread_leave_cpu(CPU_SETSIZE), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leave_moves_and_unpins),
        cmocka_unit_test(test_leave_only_cpu),
        cmocka_unit_test(test_leave_refuses_bad_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
