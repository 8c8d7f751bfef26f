/* test_phase.c — phase accounting: laps charge elapsed time to the right
 * phase and add up to the wall time; totals merge; the JSON members are the
 * per-step means under their documented names. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "engine/core/phase.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_laps_charge_phases(void **state)
{
    (void)state;
    pt_phase_times t;
    pt_phase_times_clear(&t);
    double t0 = pt_phase_clock();
    pt_phase_timer clk;
    pt_phase_timer_start(&clk);
    double start = clk.last;
    assert_true(start >= t0);
    sleep_ms(20);
    double a = pt_phase_lap(&clk, &t, PT_PHASE_FORWARD);
    sleep_ms(5);
    double b = pt_phase_lap(&clk, &t, PT_PHASE_ALLREDUCE);
    assert_true(a >= 0.019);
    assert_true(b >= 0.004);
    assert_true(t.seconds[PT_PHASE_FORWARD] == a);
    assert_true(t.seconds[PT_PHASE_ALLREDUCE] == b);
    assert_true(t.seconds[PT_PHASE_IO] == 0.0);
    /* laps tile the elapsed time: nothing is counted twice or lost */
    assert_true(fabs((a + b) - (clk.last - start)) < 1e-9);
}

static void test_add_and_json(void **state)
{
    (void)state;
    pt_phase_times x, y;
    pt_phase_times_clear(&x);
    pt_phase_times_clear(&y);
    x.seconds[PT_PHASE_IO] = 0.5;
    x.seconds[PT_PHASE_BACKWARD] = 2.0;
    x.steps = 2;
    y.seconds[PT_PHASE_IO] = 0.5;
    y.seconds[PT_PHASE_OPTIMIZER] = 0.25;
    y.steps = 2;
    pt_phase_times_add(&x, &y);
    assert_int_equal(x.steps, 4);
    char buf[512];
    int n = pt_phase_json_fields(&x, buf, sizeof buf);
    assert_int_equal(n, (int)strlen(buf));
    assert_string_equal(buf, "\"phase_io_s\":0.25,\"phase_forward_s\":0,\"phase_backward_s\":0.5,"
                             "\"phase_allreduce_s\":0,\"phase_optimizer_s\":0.0625,"
                             "\"phase_other_s\":0");
    /* snprintf semantics: the length without writing */
    assert_int_equal(pt_phase_json_fields(&x, NULL, 0), n);
    char small[10];
    assert_int_equal(pt_phase_json_fields(&x, small, sizeof small), n);
    assert_int_equal(strlen(small), sizeof small - 1);
    pt_phase_times_clear(&y);
    pt_phase_json_fields(&y, buf, sizeof buf);
    assert_non_null(strstr(buf, "\"phase_io_s\":0,"));
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(pt_phase_name(PT_PHASE_IO), "io");
    assert_string_equal(pt_phase_name(PT_PHASE_ALLREDUCE), "allreduce");
    assert_string_equal(pt_phase_name(PT_PHASE_OTHER), "other");
    assert_null(pt_phase_name(PT_PHASE_COUNT));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_laps_charge_phases),
        cmocka_unit_test(test_add_and_json),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests_name("phase", tests, NULL, NULL);
}
