/* test_progress.c — progress reports (engine/core/progress.h): the rate
 * limit, the final call, rate and ETA; and the CLI's line
 * (server/cli/cli_progress.c) for each kind of report. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/progress.h"
#include "server/cli/commands.h"

typedef struct log {
    int calls, finals;
    pt_progress_info last;
} log_t;

static void record(void *user, const pt_progress_info *info)
{
    log_t *l = user;
    l->calls++;
    l->finals += info->final;
    l->last = *info;
}

static void test_rate_limited_ticks_and_final(void **state)
{
    (void)state;
    log_t l = {0};
    pt_progress sink = {.fn = record, .user = &l, .every = 3600};
    pt_progress p;
    pt_progress_begin(&p, &sink, "ingest", "bytes", 1000);
    for (int i = 0; i < 100; i++) pt_progress_tick(&p, (uint64_t)i * 10, (uint64_t)i);
    assert_int_equal(l.calls, 0);   /* an hour has not passed */
    pt_progress_end(&p, 1000, 99);
    assert_int_equal(l.calls, 1);
    assert_int_equal(l.finals, 1);
    assert_string_equal(l.last.phase, "ingest");
    assert_string_equal(l.last.unit, "bytes");
    assert_int_equal(l.last.done, 1000);
    assert_int_equal(l.last.total, 1000);
    assert_int_equal(l.last.structures, 99);
    /* every tick once the interval is tiny */
    sink.every = 1e-12;
    pt_progress_begin(&p, &sink, "pack", "structures", 0);
    for (int i = 1; i <= 5; i++) pt_progress_tick(&p, (uint64_t)i, (uint64_t)i);
    assert_int_equal(l.calls, 6);
    assert_int_equal(l.last.final, 0);
    /* no sink: nothing is called */
    pt_progress_begin(&p, NULL, "pack", "structures", 0);
    pt_progress_tick(&p, 1, 1);
    pt_progress_end(&p, 1, 1);
    assert_int_equal(l.calls, 6);
}

static void test_rate_and_eta(void **state)
{
    (void)state;
    pt_progress_info i = {.phase = "ingest", .unit = "bytes", .done = 250, .total = 1000,
                          .structures = 50, .seconds = 10};
    assert_true(pt_progress_rate(&i, i.structures) == 5.0);
    assert_true(pt_progress_eta(&i) == 30.0);
    i.total = 0;
    assert_true(pt_progress_eta(&i) < 0);
    i.total = 1000;
    i.done = 0;
    assert_true(pt_progress_eta(&i) < 0);
    i.done = 1000;
    assert_true(pt_progress_eta(&i) == 0.0);
    i.seconds = 0;
    assert_true(pt_progress_rate(&i, 10) == 0.0);
}

static void test_cli_line(void **state)
{
    (void)state;
    char buf[256];
    pt_progress_info i = {.phase = "ingest", .unit = "bytes", .done = 1500000000,
                          .total = 6000000000, .structures = 1230000, .seconds = 30};
    pt_cli_progress_format(&i, buf, sizeof buf);
    assert_string_equal(buf, "  ingest  1.23M structures  41.0k/s  1.5 of 6.0 GB  ETA 1m30s");
    i.final = 1;
    pt_cli_progress_format(&i, buf, sizeof buf);
    assert_string_equal(buf, "  ingest  1.23M structures  41.0k/s  1.5 of 6.0 GB  done in 30s");
    pt_progress_info c = {.phase = "count_edges", .unit = "structures", .done = 500,
                          .total = 2000, .structures = 500, .seconds = 4000};
    pt_cli_progress_format(&c, buf, sizeof buf);
    assert_string_equal(buf, "  count_edges  500 structures  0/s  25.0%  ETA 3h20m");
    c.total = 0;
    pt_cli_progress_format(&c, buf, sizeof buf);
    assert_string_equal(buf, "  count_edges  500 structures  0/s");
}

static void test_cli_sink_switch(void **state)
{
    (void)state;
    pt_progress s;
    setenv("PACKTRAIN_PROGRESS", "1", 1);
    assert_int_equal(pt_cli_progress_sink(&s, 1), 1);
    assert_non_null(s.fn);
    setenv("PACKTRAIN_PROGRESS", "0", 1);
    assert_int_equal(pt_cli_progress_sink(&s, 0), 0);
    assert_null(s.fn);
    unsetenv("PACKTRAIN_PROGRESS");
    /* the test's stderr may be a terminal; JSON output never draws */
    assert_int_equal(pt_cli_progress_sink(&s, 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rate_limited_ticks_and_final),
        cmocka_unit_test(test_rate_and_eta),
        cmocka_unit_test(test_cli_line),
        cmocka_unit_test(test_cli_sink_switch),
    };
    return cmocka_run_group_tests_name("progress", tests, NULL, NULL);
}
