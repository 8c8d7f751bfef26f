/* test_routes_scheduler.c — the app with its real scheduler and worker
 * processes, the worker being a small shell script that speaks the worker
 * protocol (server/worker_proto.h) instead of training, so the wiring is
 * tested on its own: a submitted job is claimed and run, the scheduler's
 * change callback wakes long-polls, progress, metrics, the model file and
 * the worker's stderr reach the API, and a cancel stops a running worker. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "tests/unit/api_fixture.h"

/* $1.. are the scheduler's arguments: --job ID --config C --data D --out DIR.
 * A config with training.epochs 99 asks for a worker that never ends. */
static const char worker_script[] =
    "#!/bin/sh\n"
    "while [ $# -gt 0 ]; do case $1 in --out) out=$2; shift;; --config) cfg=$2; shift;; esac; shift; done\n"
    "echo 'fake worker starting' >&2\n"
    "if grep -q '\"epochs\":99' \"$cfg\"; then\n"
    "  echo '{\"kind\":\"progress\",\"progress\":0.01,\"epoch\":1,\"step\":0}'\n"
    "  exec sleep 60\n"
    "fi\n"
    "sleep 0.3\n"
    "echo '{\"kind\":\"progress\",\"progress\":0.5,\"epoch\":1,\"step\":1}'\n"
    "echo '{\"kind\":\"step\",\"step\":1,\"epoch\":1,\"loss\":2.0,\"lr\":0.001,\"graphs_per_s\":123,"
    "\"nodes_per_s\":4000,\"padding_fraction\":0.1,\"seconds\":0.3}'\n"
    "sleep 0.3\n"
    "echo '{\"kind\":\"step\",\"step\":2,\"epoch\":1,\"loss\":1.0,\"lr\":0.001,\"graphs_per_s\":125}'\n"
    "echo '{\"kind\":\"epoch\",\"step\":2,\"epoch\":1,\"train_loss\":1.5,\"val_mae\":0.25,\"val_rmse\":0.3,"
    "\"seconds\":0.6,\"graphs_per_s\":124}'\n"
    "printf 'model bytes' > \"$out/model.safetensors\"\n"
    "echo '{\"kind\":\"progress\",\"progress\":1,\"epoch\":1,\"step\":2}'\n"
    "echo '{\"kind\":\"done\",\"best_val_mae\":0.25,\"model\":\"model.safetensors\"}'\n";

static char g_ds[64], g_script[300];
static FILE *g_devnull;

static int setup(void **state)
{
    static api_fx fx;
    static const char *argv[3];
    snprintf(g_script, sizeof g_script, "/tmp/pt-api-worker-%d.sh", (int)getpid());
    FILE *f = fopen(g_script, "w");
    if (!f) return -1;
    fputs(worker_script, f);
    fclose(f);
    argv[0] = "/bin/sh";
    argv[1] = g_script;
    argv[2] = NULL;
    pt_app_options o;
    pt_app_options_defaults(&o);
    o.workers = 2;
    o.worker_argv = argv;
    o.cancel_grace_s = 1;
    g_devnull = fopen("/dev/null", "w");
    o.log = g_devnull;
    if (fx_start(&fx, &o) != 0) return -1;
    if (fx_demo_dataset(&fx, NULL, g_ds, sizeof g_ds) != 0) return -1;
    *state = &fx;
    return 0;
}

static int teardown(void **state)
{
    fx_stop(*state);
    unlink(g_script);
    if (g_devnull) fclose(g_devnull);
    return 0;
}

static json_t *get_job(api_fx *fx, const char *id, const char *inm, int wait, long *status, char *etag, size_t cap)
{
    char h[160];
    snprintf(h, sizeof h, "If-None-Match: %s", inm ? inm : "");
    const char *hs[] = {inm ? h : NULL, NULL};
    tc_resp r;
    *status = fx_call(fx, "GET", hs, NULL, &r, "/v1/jobs/%s?wait=%d", id, wait);
    if (etag) tc_header(&r, "ETag", etag, cap);
    json_t *j = tc_json(&r);
    tc_free(&r);
    return j;
}

/* Follows a job by long-poll until it ends; returns the states seen. */
static void follow(api_fx *fx, const char *id, char *seen, size_t cap, json_t **last)
{
    char etag[64] = "";
    seen[0] = '\0';
    for (int i = 0; i < 200; i++) {
        long st;
        json_t *j = get_job(fx, id, etag[0] ? etag : NULL, 10, &st, etag, sizeof etag);
        if (st == 200) {
            const char *state = json_string_value(json_object_get(j, "state"));
            if (!strstr(seen, state)) snprintf(seen + strlen(seen), cap - strlen(seen), "%s,", state);
            if (!strcmp(state, "succeeded") || !strcmp(state, "failed") || !strcmp(state, "cancelled") ||
                !strcmp(state, "stopped")) {
                *last = j;
                return;
            }
        }
        json_decref(j);
    }
    *last = NULL;
}

static void test_job_runs_in_a_worker(void **state)
{
    api_fx *fx = *state;
    char id[64], seen[128];
    assert_int_equal(fx_job(fx, NULL, g_ds, id, sizeof id), 0);
    json_t *last = NULL;
    follow(fx, id, seen, sizeof seen, &last);
    assert_non_null(last);
    assert_string_equal(json_string_value(json_object_get(last, "state")), "succeeded");
    assert_non_null(strstr(seen, "running,"));   /* the long-poll saw the job move */
    assert_true(json_number_value(json_object_get(last, "best_val_mae")) == 0.25);
    assert_true(json_number_value(json_object_get(last, "latest_graphs_per_s")) == 125);
    assert_true(json_number_value(json_object_get(last, "progress")) == 1.0);
    json_decref(last);
    tc_resp r;
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/metrics", id), 200);
    json_t *m = tc_json(&r);
    assert_int_equal(json_array_size(json_object_get(m, "steps")), 2);
    json_t *s0 = json_array_get(json_object_get(m, "steps"), 0);
    assert_true(json_number_value(json_object_get(s0, "padding_fraction")) == 0.1);
    assert_true(json_number_value(json_object_get(json_array_get(json_object_get(m, "epochs"), 0), "val_rmse")) == 0.3);
    json_decref(m);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/model", id), 200);
    assert_string_equal(r.body, "model bytes");
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/logs", id), 200);
    assert_non_null(strstr(r.body, "fake worker starting\n"));
    tc_free(&r);
}

static void test_cancel_stops_the_worker(void **state)
{
    api_fx *fx = *state;
    char body[256], id[64];
    snprintf(body, sizeof body, "{\"dataset\":\"%s\",\"training\":{\"epochs\":99}}", g_ds);
    tc_resp r;
    assert_int_equal(fx_call(fx, "POST", NULL, body, &r, "/v1/jobs"), 201);
    json_t *j = tc_json(&r);
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(j, "id")));
    json_decref(j);
    tc_free(&r);
    char etag[64] = "";
    for (int i = 0; i < 100; i++) {   /* until the worker runs */
        long st;
        j = get_job(fx, id, etag[0] ? etag : NULL, 5, &st, etag, sizeof etag);
        int running = st == 200 && !strcmp(json_string_value(json_object_get(j, "state")), "running");
        json_decref(j);
        if (running) break;
    }
    assert_int_equal(fx_call(fx, "POST", NULL, NULL, &r, "/v1/jobs/%s/cancel", id), 202);
    tc_free(&r);
    char seen[128];
    json_t *last = NULL;
    follow(fx, id, seen, sizeof seen, &last);
    assert_non_null(last);
    assert_string_equal(json_string_value(json_object_get(last, "state")), "stopped");
    assert_string_equal(json_string_value(json_object_get(last, "stop_reason")), "cancelled");
    json_decref(last);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/readyz"), 200);
    j = tc_json(&r);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(j, "checks"), "workers"), "active")), 0);
    json_decref(j);
    tc_free(&r);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_runs_in_a_worker),
        cmocka_unit_test(test_cancel_stops_the_worker),
    };
    int rc = cmocka_run_group_tests_name("routes_scheduler", tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
