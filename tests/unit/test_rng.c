/* test_rng.c — reproducibility and basic distribution of the seeded RNG. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "engine/core/rng.h"

static void test_same_seed_same_sequence(void **state)
{
    (void)state;
    pt_rng a, b, c;
    pt_rng_init(&a, 42, 0);
    pt_rng_init(&b, 42, 0);
    pt_rng_init(&c, 42, 1);
    int differs = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = pt_rng_next(&a);
        assert_true(x == pt_rng_next(&b));
        differs |= x != pt_rng_next(&c);
    }
    assert_true(differs);
}

static void test_below_in_range_and_covers(void **state)
{
    (void)state;
    pt_rng r;
    pt_rng_init(&r, 7, 0);
    int seen[10] = {0};
    for (int i = 0; i < 10000; i++) {
        uint64_t v = pt_rng_below(&r, 10);
        assert_true(v < 10);
        seen[v]++;
    }
    for (int i = 0; i < 10; i++) assert_in_range(seen[i], 850, 1150);
}

static void test_uniform_and_normal_moments(void **state)
{
    (void)state;
    pt_rng r;
    pt_rng_init(&r, 1, 0);
    double su = 0, sn = 0, sn2 = 0;
    const int n = 100000;
    for (int i = 0; i < n; i++) {
        double u = pt_rng_uniform(&r);
        assert_true(u >= 0.0 && u < 1.0);
        su += u;
        double g = pt_rng_normal(&r);
        sn += g;
        sn2 += g * g;
    }
    assert_true(fabs(su / n - 0.5) < 0.01);
    assert_true(fabs(sn / n) < 0.02);
    assert_true(fabs(sn2 / n - 1.0) < 0.02);
}

static void test_shuffle_is_permutation(void **state)
{
    (void)state;
    pt_rng r;
    pt_rng_init(&r, 3, 0);
    uint32_t v[100];
    for (uint32_t i = 0; i < 100; i++) v[i] = i;
    pt_rng_shuffle_u32(&r, v, 100);
    int seen[100] = {0}, moved = 0;
    for (uint32_t i = 0; i < 100; i++) {
        seen[v[i]]++;
        moved += v[i] != i;
    }
    for (int i = 0; i < 100; i++) assert_int_equal(seen[i], 1);
    assert_true(moved > 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_seed_same_sequence),
        cmocka_unit_test(test_below_in_range_and_covers),
        cmocka_unit_test(test_uniform_and_normal_moments),
        cmocka_unit_test(test_shuffle_is_permutation),
    };
    return cmocka_run_group_tests_name("rng", tests, NULL, NULL);
}
