/* test_routes_predict.c — POST /v1/jobs/{id}/predict with a real model file
 * (a small SchNet with seeded random weights, saved where a worker leaves
 * its model): predictions per structure with their lines, invariance to
 * rotation and translation (SchNet sees only distances, so a moved copy of a
 * molecule must get the same energy), independence from the batch grouping,
 * and every refusal: unknown job, job not ended, no model, empty body,
 * invalid structures (422 with the line), bad format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <sys/stat.h>

#include "engine/model/schnet.h"
#include "tests/unit/api_fixture.h"

static char g_ds[64], g_job[64];

/* Water, then the same water rotated 90 degrees about z and moved by 5 Å. */
#define WATERS                                                                                      \
    "3\nProperties=species:S:1:pos:R:3\nO 0 0 0\nH 0.96 0 0\nH -0.24 0.93 0\n"                         \
    "3\nProperties=species:S:1:pos:R:3\nO 5 0 0\nH 5 0.96 0\nH 4.07 -0.24 0\n"                         \
    "4\nProperties=species:S:1:pos:R:3\nC 0 0 0\nH 1.09 0 0\nH -0.36 1.03 0\nH -0.36 -0.51 0.89\n"

static int setup(void **state)
{
    static api_fx fx;
    if (fx_start(&fx, NULL) != 0) return -1;
    if (fx_demo_dataset(&fx, NULL, g_ds, sizeof g_ds) != 0) return -1;
    if (fx_job(&fx, NULL, g_ds, g_job, sizeof g_job) != 0) return -1;
    *state = &fx;
    return 0;
}

static int teardown(void **state)
{
    fx_stop(*state);
    return 0;
}

static void save_model(api_fx *fx, const char *job)
{
    pt_schnet_config c = pt_schnet_config_default();
    c.hidden = 16;
    c.filters = 16;
    c.interactions = 2;
    c.gaussians = 10;
    pt_errors errs;
    pt_errors_init(&errs, 4);
    pt_schnet m;
    assert_int_equal(pt_schnet_init(&m, &c, &errs), 0);
    pt_schnet_init_weights(&m, 7);
    char dir[PATH_MAX], path[PATH_MAX + 32];
    pt_app_job_dir(&fx->app, job, dir, sizeof dir);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(pt_schnet_save(&m, path, &errs), 0);
    pt_schnet_close(&m);
    pt_errors_close(&errs);
}

static json_t *predict(api_fx *fx, const char *job, const char *body, long want)
{
    tc_resp r;
    char url[256];
    snprintf(url, sizeof url, "%s/v1/jobs/%s/predict?name=in.xyz", fx->base, job);
    tc_request("POST", url, NULL, body, strlen(body), &r);
    assert_int_equal(r.status, want);
    json_t *j = tc_json(&r);
    tc_free(&r);
    return j;
}

static void test_refused_before_the_end(void **state)
{
    api_fx *fx = *state;
    json_t *j = predict(fx, g_job, WATERS, 409);
    char want[128];
    snprintf(want, sizeof want, "job %s has no model yet: the job is queued", g_job);
    assert_string_equal(json_string_value(json_object_get(j, "detail")), want);
    json_decref(j);
    assert_int_equal(pt_store_job_cancel(fx->db, "local", g_job, "test", NULL), PT_STORE_OK);
    j = predict(fx, g_job, WATERS, 409);
    snprintf(want, sizeof want, "job %s ended (cancelled) without a model", g_job);
    assert_string_equal(json_string_value(json_object_get(j, "detail")), want);
    json_decref(j);
    j = predict(fx, "job_0000000000000000", WATERS, 404);
    json_decref(j);
}

static void test_predictions(void **state)
{
    api_fx *fx = *state;
    save_model(fx, g_job);
    json_t *j = predict(fx, g_job, WATERS, 200);
    assert_string_equal(json_string_value(json_object_get(j, "job")), g_job);
    assert_string_equal(json_string_value(json_object_get(j, "target")), "energy_U0");
    assert_int_equal(json_integer_value(json_object_get(j, "n")), 3);
    json_t *p = json_object_get(j, "predictions");
    double y0 = json_number_value(json_object_get(json_array_get(p, 0), "prediction"));
    double y1 = json_number_value(json_object_get(json_array_get(p, 1), "prediction"));
    double y2 = json_number_value(json_object_get(json_array_get(p, 2), "prediction"));
    assert_true(isfinite(y0) && isfinite(y2));
    assert_true(fabs(y0 - y1) <= 1e-4 * (1 + fabs(y0)));   /* moved copy: same energy */
    assert_true(fabs(y0 - y2) > 1e-6);                     /* another molecule: another energy */
    assert_int_equal(json_integer_value(json_object_get(json_array_get(p, 1), "line")), 6);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(p, 2), "line")), 11);
    json_decref(j);
    /* Alone, the methane gets what it got inside the batch. */
    const char *methane = strstr(WATERS, "4\n");
    j = predict(fx, g_job, methane, 200);
    double alone = json_number_value(json_object_get(json_array_get(json_object_get(j, "predictions"), 0), "prediction"));
    assert_true(fabs(alone - y2) <= 1e-5 * (1 + fabs(y2)));
    json_decref(j);
}

static void test_bad_input(void **state)
{
    api_fx *fx = *state;
    json_t *j = predict(fx, g_job, "", 422);
    assert_string_equal(json_string_value(json_object_get(j, "detail")),
                        "the request body is empty: send the structures as an XYZ or extended XYZ file");
    json_decref(j);
    j = predict(fx, g_job, "2\nProperties=species:S:1:pos:R:3\nH 0 0 0\nH 0.74 0 nan\n", 422);
    assert_string_equal(json_string_value(json_object_get(j, "detail")), "'in.xyz' is not a valid structure file: 1 problem");
    json_t *e = json_array_get(json_object_get(j, "errors"), 0);
    assert_int_equal(json_integer_value(json_object_get(e, "line")), 4);
    assert_string_equal(json_string_value(json_object_get(e, "file")), "in.xyz");
    json_decref(j);
    tc_resp r;
    assert_int_equal(fx_call(fx, "POST", NULL, WATERS, &r, "/v1/jobs/%s/predict?format=pdb", g_job), 400);
    assert_string_equal(fx_error(&r, 0), "query.format: unknown format 'pdb'; one of auto, extxyz, xyz, qm9, ase-db");
    tc_free(&r);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_before_the_end),
        cmocka_unit_test(test_predictions),
        cmocka_unit_test(test_bad_input),
    };
    int rc = cmocka_run_group_tests_name("routes_predict", tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
