/* test_schedule.c — every learning-rate policy step by step, and early stopping.
 *
 * Plateau sequences are what torch.optim.lr_scheduler.ReduceLROnPlateau
 * (mode "min", threshold_mode "rel") does on the same inputs: a reduction
 * happens on the epoch where the count of bad epochs exceeds the patience. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "engine/train/schedule.h"

static void test_constant_never_changes(void **state)
{
    (void)state;
    pt_schedule_params p = pt_schedule_defaults(PT_SCHEDULE_CONSTANT, 1e-3);
    pt_schedule s;
    pt_schedule_init(&s, &p);
    for (int i = 0; i < 100; i++) {
        assert_float_equal(pt_schedule_lr(&s), 1e-3, 0);
        pt_schedule_step(&s);
        assert_int_equal(pt_schedule_epoch_end(&s, 5.0), 0);
    }
    assert_int_equal(s.step, 100);
}

static void test_plateau_defaults_are_schnetpack(void **state)
{
    (void)state;
    pt_schedule_params p = pt_schedule_defaults(PT_SCHEDULE_PLATEAU, 5e-4);
    assert_float_equal(p.lr, 5e-4, 0);
    assert_float_equal(p.factor, 0.5, 0);
    assert_int_equal(p.patience, 25);
    assert_float_equal(p.min_lr, 1e-6, 0);
    assert_float_equal(p.threshold, 1e-4, 0);
    assert_int_equal(p.cooldown, 0);
}

/* patience 2: epochs 1 (best), 2, 3 bad -> no change; 4th bad epoch makes
 * num_bad = 3 > 2 -> halve, counter resets; three more bad epochs halve again. */
static void test_plateau_patience_and_factor(void **state)
{
    (void)state;
    pt_schedule_params p = pt_schedule_defaults(PT_SCHEDULE_PLATEAU, 1.0);
    p.patience = 2;
    pt_schedule s;
    pt_schedule_init(&s, &p);
    const double loss[] = {1.0, 1.0, 1.2, 1.1, 1.05, 1.0, 1.0, 0.5, 0.6};
    const double lr_after[] = {1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25};
    const int reduced[] = {0, 0, 0, 1, 0, 0, 1, 0, 0};
    for (int e = 0; e < 9; e++) {
        assert_int_equal(pt_schedule_epoch_end(&s, loss[e]), reduced[e]);
        assert_float_equal(pt_schedule_lr(&s), lr_after[e], 0);
    }
    assert_int_equal(s.reductions, 2);
    assert_float_equal(s.best, 0.5, 0);
}

/* 'rel' threshold: 0.99995 is not better than best 1.0 with threshold 1e-4
 * (needs < 0.9999), 0.99989 is. */
static void test_plateau_relative_threshold(void **state)
{
    (void)state;
    pt_schedule_params p = pt_schedule_defaults(PT_SCHEDULE_PLATEAU, 1.0);
    p.patience = 0;
    pt_schedule s;
    pt_schedule_init(&s, &p);
    assert_int_equal(pt_schedule_epoch_end(&s, 1.0), 0);
    assert_int_equal(pt_schedule_epoch_end(&s, 0.99989), 0);
    assert_float_equal(s.best, 0.99989, 0);
    assert_int_equal(pt_schedule_epoch_end(&s, 0.99985), 1);   /* < best but within threshold */
    assert_float_equal(pt_schedule_lr(&s), 0.5, 0);
    assert_float_equal(s.best, 0.99989, 0);
}

static void test_plateau_min_lr_floor(void **state)
{
    (void)state;
    pt_schedule_params p = pt_schedule_defaults(PT_SCHEDULE_PLATEAU, 1e-5);
    p.patience = 0;
    p.min_lr = 3e-6;
    pt_schedule s;
    pt_schedule_init(&s, &p);
    pt_schedule_epoch_end(&s, 1.0);
    assert_int_equal(pt_schedule_epoch_end(&s, 2.0), 1);
    assert_float_equal(pt_schedule_lr(&s), 5e-6, 1e-18);
    assert_int_equal(pt_schedule_epoch_end(&s, 2.0), 1);
    assert_float_equal(pt_schedule_lr(&s), 3e-6, 1e-18);
    /* at the floor nothing changes any more and it is not counted */
    assert_int_equal(pt_schedule_epoch_end(&s, 2.0), 0);
    assert_float_equal(pt_schedule_lr(&s), 3e-6, 1e-18);
    assert_int_equal(s.reductions, 2);
}

static void test_plateau_cooldown(void **state)
{
    (void)state;
    pt_schedule_params p = pt_schedule_defaults(PT_SCHEDULE_PLATEAU, 1.0);
    p.patience = 0;
    p.cooldown = 2;
    pt_schedule s;
    pt_schedule_init(&s, &p);
    pt_schedule_epoch_end(&s, 1.0);
    assert_int_equal(pt_schedule_epoch_end(&s, 2.0), 1);   /* 0.5, cooldown 2 */
    assert_int_equal(pt_schedule_epoch_end(&s, 2.0), 0);   /* cooling */
    assert_int_equal(pt_schedule_epoch_end(&s, 2.0), 0);   /* cooling */
    assert_int_equal(pt_schedule_epoch_end(&s, 2.0), 1);   /* 0.25 */
    assert_float_equal(pt_schedule_lr(&s), 0.25, 0);
}

static void test_plateau_nan_is_a_bad_epoch(void **state)
{
    (void)state;
    pt_schedule_params p = pt_schedule_defaults(PT_SCHEDULE_PLATEAU, 1.0);
    p.patience = 1;
    pt_schedule s;
    pt_schedule_init(&s, &p);
    pt_schedule_epoch_end(&s, 1.0);
    assert_int_equal(pt_schedule_epoch_end(&s, NAN), 0);
    assert_int_equal(pt_schedule_epoch_end(&s, NAN), 1);
    assert_float_equal(s.best, 1.0, 0);
}

/* warm-up 4, total 14, lr 1, min 0.1:
 *   steps 0..3: 0.25 0.5 0.75 1.0
 *   step 4 + k: 0.1 + 0.9 * (1 + cos(pi k / 10)) / 2, k = 0..10
 *   past step 14: 0.1 */
static void test_cosine_warmup_values(void **state)
{
    (void)state;
    pt_schedule_params p = pt_schedule_defaults(PT_SCHEDULE_COSINE, 1.0);
    p.warmup_steps = 4;
    p.total_steps = 14;
    p.min_lr = 0.1;
    pt_schedule s;
    pt_schedule_init(&s, &p);
    const double warm[] = {0.25, 0.5, 0.75, 1.0};
    for (int i = 0; i < 4; i++) {
        assert_float_equal(pt_schedule_lr(&s), warm[i], 1e-15);
        pt_schedule_step(&s);
    }
    assert_float_equal(pt_schedule_lr(&s), 1.0, 1e-15);            /* k = 0 */
    for (int i = 0; i < 5; i++) pt_schedule_step(&s);
    assert_float_equal(pt_schedule_lr(&s), 0.55, 1e-12);           /* k = 5: half way */
    pt_schedule_step(&s);
    assert_float_equal(pt_schedule_lr(&s), 0.1 + 0.45 * (1 + cos(M_PI * 0.6)), 1e-12);
    for (int i = 0; i < 4; i++) pt_schedule_step(&s);
    assert_float_equal(pt_schedule_lr(&s), 0.1, 1e-12);            /* k = 10 */
    for (int i = 0; i < 7; i++) pt_schedule_step(&s);
    assert_float_equal(pt_schedule_lr(&s), 0.1, 1e-12);            /* beyond */
    /* the epoch hook does not touch a cosine schedule */
    assert_int_equal(pt_schedule_epoch_end(&s, 100.0), 0);
    assert_float_equal(pt_schedule_lr(&s), 0.1, 1e-12);
}

static void test_cosine_without_warmup_or_span(void **state)
{
    (void)state;
    pt_schedule_params p = pt_schedule_defaults(PT_SCHEDULE_COSINE, 2.0);
    p.total_steps = 2;
    pt_schedule s;
    pt_schedule_init(&s, &p);
    assert_float_equal(pt_schedule_lr(&s), 2.0, 0);
    pt_schedule_step(&s);
    assert_float_equal(pt_schedule_lr(&s), 1.0, 1e-15);
    pt_schedule_step(&s);
    assert_float_equal(pt_schedule_lr(&s), 0.0, 1e-15);

    p.warmup_steps = 3;
    p.total_steps = 3;   /* nothing left to anneal: stays at lr after warm-up */
    pt_schedule_init(&s, &p);
    for (int i = 0; i < 3; i++) pt_schedule_step(&s);
    assert_float_equal(pt_schedule_lr(&s), 2.0, 0);
}

static void test_early_stop_patience(void **state)
{
    (void)state;
    pt_early_stop es;
    pt_early_stop_init(&es, 3, 1e-4);
    assert_int_equal(pt_early_stop_update(&es, 1.0), 0);
    assert_int_equal(pt_early_stop_update(&es, 1.1), 0);
    assert_int_equal(pt_early_stop_update(&es, 0.9), 0);     /* improvement resets */
    assert_int_equal(pt_early_stop_update(&es, 0.9), 0);
    assert_int_equal(pt_early_stop_update(&es, 0.95), 0);
    assert_int_equal(pt_early_stop_update(&es, 0.89995), 1); /* 3rd epoch within threshold */
}

static void test_early_stop_disabled(void **state)
{
    (void)state;
    pt_early_stop es;
    pt_early_stop_init(&es, 0, 1e-4);
    pt_early_stop_update(&es, 1.0);
    for (int i = 0; i < 1000; i++) assert_int_equal(pt_early_stop_update(&es, 2.0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constant_never_changes),
        cmocka_unit_test(test_plateau_defaults_are_schnetpack),
        cmocka_unit_test(test_plateau_patience_and_factor),
        cmocka_unit_test(test_plateau_relative_threshold),
        cmocka_unit_test(test_plateau_min_lr_floor),
        cmocka_unit_test(test_plateau_cooldown),
        cmocka_unit_test(test_plateau_nan_is_a_bad_epoch),
        cmocka_unit_test(test_cosine_warmup_values),
        cmocka_unit_test(test_cosine_without_warmup_or_span),
        cmocka_unit_test(test_early_stop_patience),
        cmocka_unit_test(test_early_stop_disabled),
    };
    return cmocka_run_group_tests_name("schedule", tests, NULL, NULL);
}
