/* test_split.c — the seeded train/validation/test split: exact sizes,
 * disjoint parts covering everything, determinism from the seed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "engine/data/split.h"

static const double f811[3] = {0.8, 0.1, 0.1};

static void assert_partition(const pt_split *sp, const uint32_t *items, uint32_t n)
{
    assert_int_equal(sp->n_train + sp->n_val + sp->n_test, n);
    uint32_t max = 0;
    for (uint32_t i = 0; i < n; i++) max = items && items[i] > max ? items[i] : max;
    if (!items) max = n ? n - 1 : 0;
    int *seen = calloc((size_t)max + 1, sizeof(int));
    const uint32_t *parts[3] = {sp->train, sp->val, sp->test};
    const uint32_t sizes[3] = {sp->n_train, sp->n_val, sp->n_test};
    for (int p = 0; p < 3; p++) {
        for (uint32_t i = 0; i < sizes[p]; i++) {
            assert_true(parts[p][i] <= max);
            seen[parts[p][i]]++;
            if (i) assert_true(parts[p][i - 1] < parts[p][i]);   /* ascending */
        }
    }
    for (uint32_t i = 0; i < n; i++) assert_int_equal(seen[items ? items[i] : i], 1);
    free(seen);
}

static void test_sizes_exact(void **state)
{
    (void)state;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_split sp;
    assert_int_equal(pt_split_init(&sp, 13810, f811, 0, &errs), 0);
    /* floor(0.8 * 13810) = 11048, floor(0.1 * 13810) = 1381, rest 1381 */
    assert_int_equal(sp.n_train, 11048);
    assert_int_equal(sp.n_val, 1381);
    assert_int_equal(sp.n_test, 1381);
    assert_partition(&sp, NULL, 13810);
    pt_split_close(&sp);

    /* 0.58 * 100 is 57.99999999999999 in binary; it must still give 58 */
    const double f58[3] = {0.58, 0.29, 0.13};
    assert_int_equal(pt_split_init(&sp, 100, f58, 0, &errs), 0);
    assert_int_equal(sp.n_train, 58);
    assert_int_equal(sp.n_val, 29);
    assert_int_equal(sp.n_test, 13);
    pt_split_close(&sp);

    /* the test part takes the rounding remainder: 11 * 0.8 = 8.8, 11 * 0.2 = 2.2 */
    const double f820[3] = {0.8, 0.2, 0.0};
    assert_int_equal(pt_split_init(&sp, 11, f820, 0, &errs), 0);
    assert_int_equal(sp.n_train, 8);
    assert_int_equal(sp.n_val, 2);
    assert_int_equal(sp.n_test, 1);
    assert_partition(&sp, NULL, 11);
    pt_split_close(&sp);
    pt_errors_close(&errs);
}

static void test_same_seed_same_split_other_seed_differs(void **state)
{
    (void)state;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_split a, b, c;
    assert_int_equal(pt_split_init(&a, 1000, f811, 42, &errs), 0);
    assert_int_equal(pt_split_init(&b, 1000, f811, 42, &errs), 0);
    assert_int_equal(pt_split_init(&c, 1000, f811, 43, &errs), 0);
    assert_memory_equal(a.ids_, b.ids_, 1000 * sizeof(uint32_t));
    assert_memory_not_equal(a.val, c.val, a.n_val * sizeof(uint32_t));
    /* the split is a random subset, not a block of the input order */
    assert_true(a.val[a.n_val - 1] - a.val[0] > 500);
    pt_split_close(&a);
    pt_split_close(&b);
    pt_split_close(&c);
    pt_errors_close(&errs);
}

static void test_split_of_items(void **state)
{
    (void)state;
    uint32_t items[50];
    for (uint32_t i = 0; i < 50; i++) items[i] = 3 * i + 7;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_split sp;
    assert_int_equal(pt_split_init_items(&sp, items, 50, f811, 5, &errs), 0);
    assert_int_equal(sp.n_train, 40);
    assert_int_equal(sp.n_val, 5);
    assert_int_equal(sp.n_test, 5);
    assert_partition(&sp, items, 50);
    pt_split_close(&sp);
    pt_errors_close(&errs);
}

static void test_error_empty_part(void **state)
{
    (void)state;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_split sp;
    assert_int_equal(pt_split_init(&sp, 5, f811, 0, &errs), -1);
    assert_string_equal(errs.items[0].field, "training.split");
    assert_string_equal(errs.items[0].message,
                        "5 structures split 0.8/0.1/0.1 leave the validation part empty; use "
                        "more data or larger fractions");
    assert_int_equal(pt_split_init(&sp, 0, f811, 0, &errs), -1);
    assert_string_equal(errs.items[1].message,
                        "0 structures split 0.8/0.1/0.1 leave the training part empty; use "
                        "more data or larger fractions");
    pt_errors_close(&errs);
}

/* A dataset of n one-element structures: structure s is element z[s]. */
typedef struct mono {
    pt_dataset ds;
    uint64_t off[101];
    uint8_t z[100];
} mono;

static void mono_init(mono *m, uint32_t n, const uint8_t *z)
{
    memset(m, 0, sizeof(*m));
    for (uint32_t s = 0; s < n; s++) {
        m->off[s + 1] = s + 1;
        m->z[s] = z[s];
    }
    m->ds.n_structs = n;
    m->ds.n_atoms = n;
    m->ds.atom_offset = m->off;
    m->ds.z = m->z;
}

/* 100 hydrogen structures and one fluorine: whichever part the split puts
 * the fluorine in, afterwards it is in training, sizes unchanged. */
static void test_cover_elements_moves_unseen(void **state)
{
    (void)state;
    uint8_t z[100];
    memset(z, 1, sizeof z);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    int moved_some = 0;
    for (uint32_t fluor = 0; fluor < 100; fluor += 9) {
        z[fluor] = 9;
        mono m;
        mono_init(&m, 100, z);
        pt_split sp;
        assert_int_equal(pt_split_init(&sp, 100, f811, 0, &errs), 0);
        int in_train = 0;
        for (uint32_t i = 0; i < sp.n_train; i++) in_train |= sp.train[i] == fluor;
        uint32_t moved;
        assert_int_equal(pt_split_cover_elements(&sp, &m.ds, &moved, &errs), 0);
        assert_int_equal(moved, in_train ? 0 : 1);
        moved_some |= !in_train;
        int now_in_train = 0;
        for (uint32_t i = 0; i < sp.n_train; i++) now_in_train |= sp.train[i] == fluor;
        assert_true(now_in_train);
        assert_int_equal(sp.n_train, 80);
        assert_int_equal(sp.n_val, 10);
        assert_partition(&sp, NULL, 100);
        pt_split_close(&sp);
        z[fluor] = 1;
    }
    assert_true(moved_some);   /* some placement exercised the swap */
    pt_errors_close(&errs);
}

static void test_error_cover_elements_impossible(void **state)
{
    (void)state;
    uint8_t z[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};   /* every structure unique */
    mono m;
    mono_init(&m, 10, z);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_split sp;
    assert_int_equal(pt_split_init(&sp, 10, f811, 0, &errs), 0);
    uint32_t moved;
    assert_int_equal(pt_split_cover_elements(&sp, &m.ds, &moved, &errs), -1);
    char expect[300];
    snprintf(expect, sizeof expect,
             "structure %u has element Z=%d, which no training structure has, and every "
             "training structure holds an element found nowhere else in training; use a larger "
             "training fraction", sp.val[0], z[sp.val[0]]);
    assert_string_equal(errs.items[0].field, "training.split");
    assert_string_equal(errs.items[0].message, expect);
    pt_split_close(&sp);
    pt_errors_close(&errs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_exact),
        cmocka_unit_test(test_same_seed_same_split_other_seed_differs),
        cmocka_unit_test(test_split_of_items),
        cmocka_unit_test(test_error_empty_part),
        cmocka_unit_test(test_cover_elements_moves_unseen),
        cmocka_unit_test(test_error_cover_elements_impossible),
    };
    return cmocka_run_group_tests_name("split", tests, NULL, NULL);
}
