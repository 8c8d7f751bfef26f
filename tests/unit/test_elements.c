/* test_elements.c — element symbol <-> atomic number table. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "engine/data/dataset.h"
#include "engine/data/elements.h"

static int z_of(const char *s) { return pt_element_from_symbol(s, strlen(s)); }

static void test_common_symbols(void **state)
{
    (void)state;
    assert_int_equal(z_of("H"), 1);
    assert_int_equal(z_of("C"), 6);
    assert_int_equal(z_of("N"), 7);
    assert_int_equal(z_of("O"), 8);
    assert_int_equal(z_of("F"), 9);
    assert_int_equal(z_of("He"), 2);
    assert_int_equal(z_of("Cl"), 17);
    assert_int_equal(z_of("Br"), 35);
    assert_int_equal(z_of("I"), 53);
    assert_int_equal(z_of("Es"), 99);
}

static void test_case_insensitive_and_numbers(void **state)
{
    (void)state;
    assert_int_equal(z_of("CL"), 17);
    assert_int_equal(z_of("cl"), 17);
    assert_int_equal(z_of("h"), 1);
    assert_int_equal(z_of("6"), 6);
    assert_int_equal(z_of("99"), 99);
}

static void test_unknown(void **state)
{
    (void)state;
    static const char *const bad[] = {"", "Xx", "Q", "Hee", "0", "100", "Fm", "-1", "C1", "6a"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (z_of(bad[i]) != 0) fail_msg("'%s' should be unknown", bad[i]);
    assert_string_equal(pt_element_symbol(0), "?");
    assert_string_equal(pt_element_symbol(PT_Z_MAX + 1), "?");
}

static void test_round_trip_every_element(void **state)
{
    (void)state;
    for (int z = 1; z <= PT_Z_MAX; z++) {
        const char *s = pt_element_symbol(z);
        assert_int_equal(z_of(s), z);
    }
    /* symbols are distinct: the lookup above would fail otherwise, and the
     * prefix of a two-letter symbol must not match a one-letter one */
    assert_int_equal(pt_element_from_symbol("Co", 1), 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_common_symbols),
        cmocka_unit_test(test_case_insensitive_and_numbers),
        cmocka_unit_test(test_unknown),
        cmocka_unit_test(test_round_trip_every_element),
    };
    return cmocka_run_group_tests_name("elements", tests, NULL, NULL);
}
