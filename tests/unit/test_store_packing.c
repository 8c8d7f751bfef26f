/* test_store_packing.c — packing reports kept with their dataset
 * (store_packing.c): stored and read back by (dataset, parameters), replaced
 * by a newer one, other parameters or datasets not answered, the newest
 * PT_STORE_PACKING_KEEP kept, gone when the dataset is deleted, refused for a
 * dataset that no longer exists, and every argument error. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "tests/unit/store_fixture.h"

typedef store_fx fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (!f || store_fx_init(f, "store_pack", 1) != 0) return -1;
    if (store_fx_dataset(f->s, "alice", "ready", f->ds) != 0) return -1;
    if (store_fx_dataset(f->s, "alice", "ready", f->ds2) != 0) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    store_fx_close(*state);
    free(*state);
    return 0;
}

static void expect_report(fixture *f, const char *ds, const char *params, const char *want)
{
    char *json = NULL;
    assert_int_equal(pt_store_packing_get(f->s, ds, params, &json), PT_STORE_OK);
    assert_string_equal(json, want);
    free(json);
}

static void expect_none(fixture *f, const char *ds, const char *params)
{
    char *json = (char *)"x";
    assert_int_equal(pt_store_packing_get(f->s, ds, params, &json), PT_STORE_NOT_FOUND);
    assert_null(json);
}

static void test_put_get_replace(void **state)
{
    fixture *f = *state;
    expect_none(f, f->ds, "method=lpfhp");
    assert_int_equal(pt_store_packing_put(f->s, f->ds, "method=lpfhp", "{\"packs\":3}"), PT_STORE_OK);
    expect_report(f, f->ds, "method=lpfhp", "{\"packs\":3}");
    /* other parameters, another dataset: not this report */
    expect_none(f, f->ds, "method=tuple");
    expect_none(f, f->ds2, "method=lpfhp");
    assert_int_equal(pt_store_packing_put(f->s, f->ds, "method=lpfhp", "{\"packs\":4}"), PT_STORE_OK);
    expect_report(f, f->ds, "method=lpfhp", "{\"packs\":4}");
}

static void test_newest_kept(void **state)
{
    fixture *f = *state;
    char params[64], json[64];
    for (int i = 0; i < PT_STORE_PACKING_KEEP + 5; i++) {
        snprintf(params, sizeof params, "max_nodes=%d", i);
        snprintf(json, sizeof json, "{\"i\":%d}", i);
        assert_int_equal(pt_store_packing_put(f->s, f->ds, params, json), PT_STORE_OK);
    }
    assert_int_equal(pt_store_packing_put(f->s, f->ds2, "max_nodes=0", "{}"), PT_STORE_OK);
    for (int i = 0; i < 5; i++) {
        snprintf(params, sizeof params, "max_nodes=%d", i);
        expect_none(f, f->ds, params);
    }
    for (int i = 5; i < PT_STORE_PACKING_KEEP + 5; i++) {
        snprintf(params, sizeof params, "max_nodes=%d", i);
        snprintf(json, sizeof json, "{\"i\":%d}", i);
        expect_report(f, f->ds, params, json);
    }
    /* the other dataset's report is not trimmed with these */
    expect_report(f, f->ds2, "max_nodes=0", "{}");
}

static void test_gone_with_dataset(void **state)
{
    fixture *f = *state;
    assert_int_equal(pt_store_packing_put(f->s, f->ds, "method=lpfhp", "{\"packs\":3}"), PT_STORE_OK);
    assert_int_equal(pt_store_packing_put(f->s, f->ds2, "method=lpfhp", "{\"packs\":5}"), PT_STORE_OK);
    assert_int_equal(pt_store_dataset_delete(f->s, "alice", f->ds, NULL), PT_STORE_OK);
    expect_none(f, f->ds, "method=lpfhp");
    expect_report(f, f->ds2, "method=lpfhp", "{\"packs\":5}");
    /* a report computed while its dataset was deleted is not stored */
    assert_int_equal(pt_store_packing_put(f->s, f->ds, "method=lpfhp", "{\"packs\":3}"), PT_STORE_NOT_FOUND);
    assert_non_null(strstr(pt_store_errmsg(f->s), "no longer exists"));
    expect_none(f, f->ds, "method=lpfhp");
}

static void test_argument_errors(void **state)
{
    fixture *f = *state;
    char *json = NULL;
    assert_int_equal(pt_store_packing_get(f->s, "", "m", &json), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "dataset id is empty");
    assert_int_equal(pt_store_packing_get(f->s, f->ds, "", &json), PT_STORE_INVALID);
    assert_non_null(strstr(pt_store_errmsg(f->s), "packing parameters are empty"));
    char long_params[PT_STORE_PACKING_PARAMS_MAX + 2];
    memset(long_params, 'a', sizeof long_params - 1);
    long_params[sizeof long_params - 1] = '\0';
    assert_int_equal(pt_store_packing_put(f->s, f->ds, long_params, "{}"), PT_STORE_INVALID);
    assert_int_equal(pt_store_packing_put(f->s, f->ds, "m", ""), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "packing report is empty");
    assert_int_equal(pt_store_packing_put(f->s, NULL, "m", "{}"), PT_STORE_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_put_get_replace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newest_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gone_with_dataset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_argument_errors, setup, teardown),
    };
    return cmocka_run_group_tests_name("store_packing", tests, NULL, NULL);
}
