/* test_errors.c — the bounded located-error list. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "engine/core/errors.h"

static void test_format_with_file_line_field(void **state)
{
    (void)state;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_errors_add(&errs, "a.xyz", 12, "energy", "not a number: '%s'", "abc");
    char buf[512];
    pt_errors_first(&errs, buf, sizeof buf);
    assert_string_equal(buf, "a.xyz:12: energy: not a number: 'abc'");
    pt_errors_close(&errs);
}

static void test_format_without_parts(void **state)
{
    (void)state;
    pt_error e = {.line = 0};
    strcpy(e.message, "bare");
    char buf[64];
    pt_error_format(&e, buf, sizeof buf);
    assert_string_equal(buf, "bare");
    e.line = 3;
    pt_error_format(&e, buf, sizeof buf);
    assert_string_equal(buf, "line 3: bare");
}

static void test_bounded_but_counted(void **state)
{
    (void)state;
    pt_errors errs;
    pt_errors_init(&errs, 5);
    for (int i = 0; i < 1000; i++) pt_errors_add(&errs, "f", i + 1, "", "e%d", i);
    assert_int_equal(errs.kept, 5);
    assert_int_equal(errs.total, 1000);
    assert_string_equal(errs.items[4].message, "e4");
    pt_errors_clear(&errs);
    assert_int_equal(errs.total, 0);
    pt_errors_close(&errs);
}

static void test_first_of_empty(void **state)
{
    (void)state;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    char buf[64];
    pt_errors_first(&errs, buf, sizeof buf);
    assert_string_equal(buf, "no error");
    pt_errors_close(&errs);
}

/* A scope names the fields of the errors added while it is set. */
static void test_scope(void **state)
{
    (void)state;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    errs.scope = "batching.";
    pt_errors_add(&errs, NULL, 0, "max_nodes", "too small");
    pt_errors_add(&errs, NULL, 0, "", "out of memory");
    errs.scope = NULL;
    pt_errors_add(&errs, NULL, 0, "max_nodes", "outside");
    assert_string_equal(errs.items[0].field, "batching.max_nodes");
    assert_string_equal(errs.items[1].field, "");
    assert_string_equal(errs.items[2].field, "max_nodes");
    pt_errors_close(&errs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_with_file_line_field),
        cmocka_unit_test(test_format_without_parts),
        cmocka_unit_test(test_bounded_but_counted),
        cmocka_unit_test(test_first_of_empty),
        cmocka_unit_test(test_scope),
    };
    return cmocka_run_group_tests_name("errors", tests, NULL, NULL);
}
