/* test_routes_system.c — /healthz, /readyz (each failing check), /metrics,
 * /openapi.json (ETag, and the document lists exactly the routes the app
 * registers), / with and without a web directory, unknown paths and
 * methods, and the bearer-token auth: 401s, owner isolation (another
 * owner's rows are 404 on every route), revoked tokens, ?access_token=. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include "engine/core/version.h"
#include "engine/model/bf16.h"
#include "tests/unit/api_fixture.h"

static void test_healthz_readyz(void **state)
{
    (void)state;
    api_fx fx;
    assert_int_equal(fx_start(&fx, NULL), 0);
    tc_resp r;
    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/healthz"), 200);
    json_t *j = tc_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "ok");
    /* what job_check.c decides bf16 jobs by */
    assert_true(json_is_boolean(json_object_get(j, "bf16")));
    assert_int_equal(json_is_true(json_object_get(j, "bf16")), pt_cpu_has_bf16());
    json_decref(j);
    tc_free(&r);
    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/readyz"), 200);
    j = tc_json(&r);
    json_t *checks = json_object_get(j, "checks");
    assert_true(json_is_true(json_object_get(json_object_get(checks, "database"), "ok")));
    assert_true(json_is_true(json_object_get(json_object_get(checks, "disk"), "ok")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(checks, "workers"), "detail")),
                        "no worker slots (--workers 0): jobs stay queued");
    json_decref(j);
    tc_free(&r);
    fx_stop(&fx);
}

static void test_readyz_disk(void **state)
{
    (void)state;
    api_fx fx;
    pt_app_options o;
    pt_app_options_defaults(&o);
    o.workers = 0;
    o.min_free_bytes = 1ull << 60;   /* no disk has an exabyte free */
    assert_int_equal(fx_start(&fx, &o), 0);
    tc_resp r;
    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/readyz"), 503);
    assert_true(fx_is_problem(&r));
    assert_string_equal(fx_detail(&r), "the server is not ready; see checks");
    char ra[16];
    assert_int_equal(tc_header(&r, "Retry-After", ra, sizeof ra), 0);
    json_t *j = tc_json(&r);
    json_t *disk = json_object_get(json_object_get(j, "checks"), "disk");
    assert_false(json_is_true(json_object_get(disk, "ok")));
    assert_string_equal(json_string_value(json_object_get(disk, "detail")),
                        "free space on the data directory is below the minimum");
    json_decref(j);
    tc_free(&r);
    fx_stop(&fx);
}

static void test_readyz_worker_program(void **state)
{
    (void)state;
    api_fx fx;
    pt_app_options o;
    pt_app_options_defaults(&o);
    o.workers = 1;
    const char *argv[] = {"/nonexistent/packtrain-worker", NULL};
    o.worker_argv = argv;
    assert_int_equal(fx_start(&fx, &o), 0);
    tc_resp r;
    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/readyz"), 503);
    json_t *j = tc_json(&r);
    json_t *w = json_object_get(json_object_get(j, "checks"), "workers");
    assert_string_equal(json_string_value(json_object_get(w, "detail")),
                        "the worker program is not executable: /nonexistent/packtrain-worker");
    json_decref(j);
    tc_free(&r);
    fx_stop(&fx);
}

static void test_readyz_database(void **state)
{
    (void)state;
    api_fx fx;
    assert_int_equal(fx_start(&fx, NULL), 0);
    /* Another connection holding the write lock: the check's write gives up
     * after its short lock wait and reports the database as not writable. */
    sqlite3 *raw = NULL;
    assert_int_equal(sqlite3_open(fx.app.db_path, &raw), SQLITE_OK);
    assert_int_equal(sqlite3_exec(raw, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    tc_resp r;
    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/readyz"), 503);
    json_t *j = tc_json(&r);
    json_t *db = json_object_get(json_object_get(j, "checks"), "database");
    assert_false(json_is_true(json_object_get(db, "ok")));
    assert_non_null(strstr(json_string_value(json_object_get(db, "detail")), "lock"));
    json_decref(j);
    tc_free(&r);
    sqlite3_exec(raw, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(raw);
    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/readyz"), 200);
    tc_free(&r);
    fx_stop(&fx);
}

static void test_metrics_page(void **state)
{
    (void)state;
    api_fx fx;
    assert_int_equal(fx_start(&fx, NULL), 0);
    char ds[64], job[64];
    assert_int_equal(fx_demo_dataset(&fx, NULL, ds, sizeof ds), 0);
    assert_int_equal(fx_job(&fx, NULL, ds, job, sizeof job), 0);
    tc_resp r;
    /* Request metrics are counted when a request completes, just after its
     * response went out: wait until the job submission shows. */
    const char *post_line = "packtrain_http_requests_total{method=\"POST\",route=\"/v1/jobs\",status=\"201\"} 1\n";
    for (int i = 0; i < 100; i++) {
        assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/metrics"), 200);
        if (strstr(r.body, post_line)) break;
        tc_free(&r);
        usleep(20 * 1000);
    }
    assert_non_null(strstr(r.body, post_line));
    assert_non_null(strstr(r.body, "packtrain_jobs{state=\"queued\"} 1\n"));
    assert_non_null(strstr(r.body, "packtrain_jobs{state=\"running\"} 0\n"));
    assert_non_null(strstr(r.body, "packtrain_http_request_duration_seconds_bucket{"));
    assert_non_null(strstr(r.body, "packtrain_worker_slots 0\n"));
    assert_non_null(strstr(r.body, "packtrain_graphs_trained_total 0\n"));
    assert_non_null(strstr(r.body, "# TYPE packtrain_workers_spawned_total counter\n"));
    assert_non_null(strstr(r.body, "# TYPE packtrain_workers_crashed_total counter\n"));
    assert_non_null(strstr(r.body, "packtrain_build_info{version=\"" PT_VERSION "\",commit=\""));
    assert_non_null(strstr(r.body, "process_resident_memory_bytes "));
    assert_null(strstr(r.body, "packtrain_job_loss{"));   /* no job runs */
    tc_free(&r);
    /* A finished run's result.json counts once, however often it is scraped. */
    char dir[PATH_MAX], path[PATH_MAX + 32];
    pt_app_job_dir(&fx.app, job, dir, sizeof dir);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/result.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"steps\": 10, \"graphs\": 1234}", f);
    fclose(f);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/metrics"), 200);
        assert_non_null(strstr(r.body, "packtrain_graphs_trained_total 1234\n"));
        tc_free(&r);
    }
    /* a running job's latest epoch: its validation errors, forces in eV/Å */
    fx_claim(&fx, job);
    pt_store_epoch_metric em = {.epoch = 1, .step = 5, .train_loss = 1.5, .train_mae = NAN,
                                .val_loss = 1.2, .val_mae = 0.5, .graphs_per_s = 900, .seconds = 1,
                                .json = "{\"val_forces_mae\":0.25,\"heads\":{\"gap\":"
                                        "{\"val_mae\":0.4,\"val_rmse\":0.6}}}"};
    assert_int_equal(pt_store_epoch_append(fx.db, job, &em, NULL), PT_STORE_OK);
    char line[160];
    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/metrics"), 200);
    snprintf(line, sizeof line, "packtrain_job_val_mae{job=\"%s\"} 0.5\n", job);
    assert_non_null(strstr(r.body, line));
    snprintf(line, sizeof line, "packtrain_job_val_forces_mae_ev_per_angstrom{job=\"%s\"} 0.25\n", job);
    assert_non_null(strstr(r.body, line));
    /* a multi-task job's targets, one series each */
    snprintf(line, sizeof line, "packtrain_job_target_val_mae{job=\"%s\",target=\"gap\"} 0.4\n", job);
    assert_non_null(strstr(r.body, line));
    snprintf(line, sizeof line, "packtrain_job_target_val_rmse{job=\"%s\",target=\"gap\"} 0.6\n", job);
    assert_non_null(strstr(r.body, line));
    tc_free(&r);
    fx_stop(&fx);
}

/* "{path...}" in the router is "{path}" in OpenAPI. */
static void openapi_name(const char *pattern, char *out, size_t cap)
{
    snprintf(out, cap, "%s", pattern);
    char *dots = strstr(out, "...}");
    if (dots) memmove(dots, dots + 3, strlen(dots + 3) + 1);
}

static void test_openapi_matches_routes(void **state)
{
    (void)state;
    api_fx fx;
    pt_app_options o;
    pt_app_options_defaults(&o);
    o.workers = 0;
    o.web_dir = "tests/unit";   /* any directory: registers the static catch-all */
    assert_int_equal(fx_start(&fx, &o), 0);
    tc_resp r;
    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/openapi.json"), 200);
    json_t *doc = tc_json(&r);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "openapi")), "3.1.0");
    char etag[96], inm[128];
    assert_int_equal(tc_header(&r, "ETag", etag, sizeof etag), 0);
    tc_free(&r);
    snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
    const char *h[] = {inm, NULL};
    assert_int_equal(fx_call(&fx, "GET", h, NULL, &r, "/openapi.json"), 304);
    tc_free(&r);

    /* Every registered route is documented... */
    json_t *paths = json_object_get(doc, "paths");
    size_t documented = 0;
    for (int i = 0; i < fx.app.n_routes; i++) {
        char name[80], method[8];
        openapi_name(fx.app.routes[i].pattern, name, sizeof name);
        snprintf(method, sizeof method, "%s", fx.app.routes[i].method);
        for (char *c = method; *c; c++) *c = (char)(*c - 'A' + 'a');
        json_t *op = json_object_get(json_object_get(paths, name), method);
        if (!op) fprintf(stderr, "undocumented route: %s %s\n", fx.app.routes[i].method, name);
        assert_non_null(op);
    }
    /* ...and every documented operation is registered. */
    const char *path;
    json_t *item;
    json_object_foreach(paths, path, item) {
        const char *m;
        json_t *op;
        json_object_foreach(item, m, op) {
            if (!strcmp(m, "parameters")) continue;
            documented++;
            int found = 0;
            for (int i = 0; i < fx.app.n_routes; i++) {
                char name[80];
                openapi_name(fx.app.routes[i].pattern, name, sizeof name);
                found |= !strcmp(name, path) && !strcasecmp(fx.app.routes[i].method, m);
            }
            if (!found) fprintf(stderr, "documented but not registered: %s %s\n", m, path);
            assert_true(found);
        }
    }
    assert_int_equal(documented, (size_t)fx.app.n_routes);
    json_decref(doc);
    fx_stop(&fx);
}

static void test_index_and_static(void **state)
{
    (void)state;
    api_fx fx;
    assert_int_equal(fx_start(&fx, NULL), 0);
    tc_resp r;
    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/"), 200);
    json_t *j = tc_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "openapi")), "/openapi.json");
    json_decref(j);
    tc_free(&r);
    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/nothing-here"), 404);
    assert_true(fx_is_problem(&r));
    assert_string_equal(fx_detail(&r), "there is no resource at '/nothing-here'");
    tc_free(&r);
    assert_int_equal(fx_call(&fx, "PUT", NULL, "{}", &r, "/v1/jobs"), 405);
    assert_string_equal(fx_detail(&r), "PUT is not allowed on '/v1/jobs'; allowed: POST, GET, HEAD");
    tc_free(&r);
    fx_stop(&fx);

    char web[256];
    snprintf(web, sizeof web, "/tmp/pt-api-web-XXXXXX");
    assert_non_null(mkdtemp(web));
    char index[300];
    snprintf(index, sizeof index, "%s/index.html", web);
    FILE *f = fopen(index, "w");
    fputs("<!doctype html><title>packtrain</title>", f);
    fclose(f);
    pt_app_options o;
    pt_app_options_defaults(&o);
    o.workers = 0;
    o.web_dir = web;
    assert_int_equal(fx_start(&fx, &o), 0);
    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/"), 200);
    assert_string_equal(r.body, "<!doctype html><title>packtrain</title>");
    tc_free(&r);
    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/healthz"), 200);   /* API routes win */
    tc_free(&r);
    fx_stop(&fx);
    tfx_rmtree(web);
}

/* ---- auth ------------------------------------------------------------------------ */

static void test_auth_required(void **state)
{
    (void)state;
    api_fx fx;
    pt_app_options o;
    pt_app_options_defaults(&o);
    o.workers = 0;
    o.auth = 1;
    assert_int_equal(fx_start(&fx, &o), 0);
    tc_resp r;
    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/v1/jobs"), 401);
    assert_true(fx_is_problem(&r));
    assert_string_equal(fx_detail(&r), "authentication required: send 'Authorization: Bearer <token>'");
    char www[256];
    assert_int_equal(tc_header(&r, "WWW-Authenticate", www, sizeof www), 0);
    tc_free(&r);
    const char *bad[] = {"Authorization: Bearer pt_0000", NULL};
    assert_int_equal(fx_call(&fx, "GET", bad, NULL, &r, "/v1/datasets"), 401);
    assert_string_equal(fx_detail(&r), "the token is unknown or revoked");
    tc_free(&r);
    /* Probes stay public. */
    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/healthz"), 200);
    tc_free(&r);
    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/openapi.json"), 200);
    tc_free(&r);
    /* A GET may carry the token in the query (EventSource cannot set headers). */
    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/v1/jobs?access_token=%s", fx.token), 200);
    tc_free(&r);
    fx_stop(&fx);
}

static void test_auth_isolation(void **state)
{
    (void)state;
    api_fx fx;
    pt_app_options o;
    pt_app_options_defaults(&o);
    o.workers = 0;
    o.auth = 1;
    assert_int_equal(fx_start(&fx, &o), 0);
    char bob_secret[PT_STORE_SECRET_MAX], alice[PT_STORE_SECRET_MAX + 32], bob[PT_STORE_SECRET_MAX + 32];
    pt_store_token bob_row;
    assert_int_equal(pt_store_token_create(fx.db, "bob", "laptop", bob_secret, &bob_row), PT_STORE_OK);
    snprintf(alice, sizeof alice, "Authorization: Bearer %s", fx.token);
    snprintf(bob, sizeof bob, "Authorization: Bearer %s", bob_secret);
    const char *ha[] = {alice, NULL}, *hb[] = {bob, NULL};
    char ds[64], job[64];
    assert_int_equal(fx_demo_dataset(&fx, ha, ds, sizeof ds), 0);
    assert_int_equal(fx_job(&fx, ha, ds, job, sizeof job), 0);
    tc_resp r;
    const char *ds_paths[] = {"/v1/datasets/%s", "/v1/datasets/%s/packing"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(fx_call(&fx, "GET", hb, NULL, &r, ds_paths[i], ds), 404);
        tc_free(&r);
    }
    assert_int_equal(fx_call(&fx, "DELETE", hb, NULL, &r, "/v1/datasets/%s", ds), 404);
    tc_free(&r);
    const char *job_paths[] = {"/v1/jobs/%s", "/v1/jobs/%s/metrics", "/v1/jobs/%s/events", "/v1/jobs/%s/logs",
                               "/v1/jobs/%s/model"};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(fx_call(&fx, "GET", hb, NULL, &r, job_paths[i], job), 404);
        char want[96];
        snprintf(want, sizeof want, "there is no job '%s'", job);
        assert_string_equal(fx_detail(&r), want);
        tc_free(&r);
    }
    assert_int_equal(fx_call(&fx, "POST", hb, NULL, &r, "/v1/jobs/%s/cancel", job), 404);
    tc_free(&r);
    /* Bob cannot train on Alice's dataset either. */
    char body[128];
    snprintf(body, sizeof body, "{\"dataset\":\"%s\"}", ds);
    assert_int_equal(fx_call(&fx, "POST", hb, body, &r, "/v1/jobs"), 422);
    tc_free(&r);
    assert_int_equal(fx_call(&fx, "GET", hb, NULL, &r, "/v1/jobs"), 200);
    json_t *j = tc_json(&r);
    assert_int_equal(json_array_size(json_object_get(j, "jobs")), 0);
    json_decref(j);
    tc_free(&r);
    assert_int_equal(fx_call(&fx, "GET", ha, NULL, &r, "/v1/jobs/%s", job), 200);
    tc_free(&r);
    /* A revoked token stops working at once. */
    assert_int_equal(pt_store_token_revoke(fx.db, "bob", bob_row.id), PT_STORE_OK);
    assert_int_equal(fx_call(&fx, "GET", hb, NULL, &r, "/v1/jobs"), 401);
    tc_free(&r);
    fx_stop(&fx);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_healthz_readyz),
        cmocka_unit_test(test_readyz_disk),
        cmocka_unit_test(test_readyz_worker_program),
        cmocka_unit_test(test_readyz_database),
        cmocka_unit_test(test_metrics_page),
        cmocka_unit_test(test_openapi_matches_routes),
        cmocka_unit_test(test_index_and_static),
        cmocka_unit_test(test_auth_required),
        cmocka_unit_test(test_auth_isolation),
    };
    int rc = cmocka_run_group_tests_name("routes_system", tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
