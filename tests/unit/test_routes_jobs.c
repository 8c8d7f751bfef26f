/* test_routes_jobs.c — the job routes against a real app without workers;
 * the test plays the scheduler through its own store handle (claim,
 * transitions) and pt_app_jobs_changed, as the scheduler's change callback
 * does.  Covers submission (201, canonical config, every 4xx, the plan
 * checks), Idempotency-Key, list and pagination, ETag / If-None-Match /
 * long-poll, and cancel.  The data routes are in test_routes_job_data.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>

#include "engine/model/bf16.h"
#include "tests/unit/api_fixture.h"

static char g_ds[64];

static int setup(void **state)
{
    static api_fx fx;
    if (fx_start(&fx, NULL) != 0) return -1;
    if (fx_demo_dataset(&fx, NULL, g_ds, sizeof g_ds) != 0) return -1;
    *state = &fx;
    return 0;
}

static int teardown(void **state)
{
    fx_stop(*state);
    return 0;
}

/* ---- submission ------------------------------------------------------------------ */

static void test_submit_created(void **state)
{
    api_fx *fx = *state;
    char body[256];
    snprintf(body, sizeof body, "{\"dataset\":\"%s\",\"training\":{\"epochs\":3},\"max_runtime_seconds\":600}", g_ds);
    tc_resp r;
    assert_int_equal(fx_call(fx, "POST", NULL, body, &r, "/v1/jobs"), 201);
    json_t *j = tc_json(&r);
    const char *id = json_string_value(json_object_get(j, "id"));
    char loc[128], want[128];
    assert_int_equal(tc_header(&r, "Location", loc, sizeof loc), 0);
    snprintf(want, sizeof want, "/v1/jobs/%s", id);
    assert_string_equal(loc, want);
    assert_string_equal(json_string_value(json_object_get(j, "state")), "queued");
    assert_string_equal(json_string_value(json_object_get(j, "dataset")), g_ds);
    json_t *cfg = json_object_get(j, "config");
    /* canonical: defaults filled in, the given values kept */
    assert_int_equal(json_integer_value(json_object_get(json_object_get(cfg, "training"), "epochs")), 3);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(cfg, "model"), "hidden")), 100);
    assert_string_equal(json_string_value(json_object_get(cfg, "target")), "energy_U0");
    assert_string_equal(json_string_value(json_object_get(json_object_get(cfg, "training"), "precision")), "fp32");
    assert_true(json_number_value(json_object_get(cfg, "max_runtime_seconds")) == 600.0);
    assert_null(json_object_get(cfg, "dataset"));
    json_decref(j);
    tc_free(&r);
    fx_cancel_queued(fx);
}

/* bf16 is queued where the CPU has AVX512-BF16 and refused at
 * training.precision where it has not (test_bf16_nocpu.c hides it); the
 * stored config says which precision the job trains in. */
static void test_submit_precision(void **state)
{
    api_fx *fx = *state;
    char body[256];
    snprintf(body, sizeof body, "{\"dataset\":\"%s\",\"training\":{\"precision\":\"bf16\"}}", g_ds);
    tc_resp r;
    if (pt_cpu_has_bf16()) {
        assert_int_equal(fx_call(fx, "POST", NULL, body, &r, "/v1/jobs"), 201);
        json_t *j = tc_json(&r);
        json_t *t = json_object_get(json_object_get(j, "config"), "training");
        assert_string_equal(json_string_value(json_object_get(t, "precision")), "bf16");
        json_decref(j);
    } else {
        assert_int_equal(fx_call(fx, "POST", NULL, body, &r, "/v1/jobs"), 422);
        assert_non_null(strstr(fx_error(&r, 0), "training.precision: training.precision \"bf16\" needs"));
    }
    tc_free(&r);
    snprintf(body, sizeof body, "{\"dataset\":\"%s\",\"training\":{\"precision\":\"fp16\"}}", g_ds);
    assert_int_equal(fx_call(fx, "POST", NULL, body, &r, "/v1/jobs"), 422);
    assert_string_equal(fx_error(&r, 0), "training.precision: must be one of \"fp32\", \"bf16\", got \"fp16\"");
    tc_free(&r);
    fx_cancel_queued(fx);
}

static void test_submit_config_errors(void **state)
{
    api_fx *fx = *state;
    char body[256];
    snprintf(body, sizeof body, "{\"dataset\":\"%s\",\"model\":{\"hidden\":-1,\"bogus\":1},\"max_runtime_seconds\":0}",
             g_ds);
    tc_resp r;
    assert_int_equal(fx_call(fx, "POST", NULL, body, &r, "/v1/jobs"), 422);
    assert_true(fx_is_problem(&r));
    assert_string_equal(fx_detail(&r), "the job is not valid: 3 problems");
    assert_string_equal(fx_error(&r, 0), "max_runtime_seconds: must be a number of seconds > 0, or null");
    assert_string_equal(fx_error(&r, 1), "model.bogus: unknown key; allowed here: hidden, filters, interactions, "
                                         "gaussians, cutoff, max_neighbors, readout");
    assert_string_equal(fx_error(&r, 2), "model.hidden: must be an integer from 2 to 4096, got -1");
    tc_free(&r);
}

static void test_submit_dataset_errors(void **state)
{
    api_fx *fx = *state;
    tc_resp r;
    assert_int_equal(fx_call(fx, "POST", NULL, "{}", &r, "/v1/jobs"), 422);
    assert_string_equal(fx_error(&r, 0), "dataset: is required: the id of an uploaded dataset (POST /v1/datasets)");
    tc_free(&r);
    assert_int_equal(fx_call(fx, "POST", NULL, "{\"dataset\":7}", &r, "/v1/jobs"), 422);
    assert_string_equal(fx_error(&r, 0), "dataset: must be a string (a dataset id)");
    tc_free(&r);
    assert_int_equal(fx_call(fx, "POST", NULL, "{\"dataset\":\"ds_0000000000000000\"}", &r, "/v1/jobs"), 422);
    assert_string_equal(fx_error(&r, 0), "dataset: there is no dataset 'ds_0000000000000000'");
    tc_free(&r);
    char body[256], want[256];
    snprintf(body, sizeof body, "{\"dataset\":\"%s\",\"target\":\"energy\"}", g_ds);
    assert_int_equal(fx_call(fx, "POST", NULL, body, &r, "/v1/jobs"), 422);
    snprintf(want, sizeof want, "target: the dataset has no numeric key 'energy'; its keys: qm9_id, energy_U0, "
                                "energy_U, enthalpy_H, free_energy, homo, lumo, gap, zpve, mu, alpha, cv");
    assert_string_equal(fx_error(&r, 0), want);
    tc_free(&r);
}

/* The dataset is opened and planned as the worker will: split, packing
 * limits and the memory plan are refused at submission. */
static void test_submit_plan_errors(void **state)
{
    api_fx *fx = *state;
    char body[256];
    tc_resp r;
    snprintf(body, sizeof body, "{\"dataset\":\"%s\",\"backend\":{\"device_memory_mb\":1}}", g_ds);
    assert_int_equal(fx_call(fx, "POST", NULL, body, &r, "/v1/jobs"), 422);
    assert_string_equal(fx_detail(&r), "the job is not valid: 2 problems");
    assert_non_null(strstr(fx_error(&r, 0), "backend.device_memory_mb: a replica needs "));
    assert_non_null(strstr(fx_error(&r, 0), "more than the 1 MB of device memory"));
    assert_non_null(strstr(fx_error(&r, 1), "backend.device_memory_mb: per replica: parameters "));
    tc_free(&r);
    snprintf(body, sizeof body, "{\"dataset\":\"%s\",\"training\":{\"split\":[0.99,0.01,0]}}", g_ds);
    assert_int_equal(fx_call(fx, "POST", NULL, body, &r, "/v1/jobs"), 422);
    assert_string_equal(fx_error(&r, 0), "training.split: 64 structures split 0.99/0.01/0 leave the validation part "
                                         "empty; use more data or larger fractions");
    tc_free(&r);
    snprintf(body, sizeof body, "{\"dataset\":\"%s\",\"batching\":{\"max_nodes\":10}}", g_ds);
    assert_int_equal(fx_call(fx, "POST", NULL, body, &r, "/v1/jobs"), 422);
    assert_string_equal(fx_error(&r, 0), "batching.max_nodes: graph 7 has 11 atoms, more than max_nodes 10");
    tc_free(&r);
    /* Nothing was queued by any of them. */
    int64_t counts[PT_JOB_STATE_COUNT];
    assert_int_equal(pt_store_job_count_by_state(fx->db, "local", counts), PT_STORE_OK);
    assert_int_equal(counts[PT_JOB_QUEUED], 0);
}

static void test_submit_body_errors(void **state)
{
    api_fx *fx = *state;
    tc_resp r;
    assert_int_equal(fx_call(fx, "POST", NULL, "[1,2]", &r, "/v1/jobs"), 422);
    assert_string_equal(fx_detail(&r), "the job must be a JSON object");
    tc_free(&r);
    assert_int_equal(fx_call(fx, "POST", NULL, "{\"dataset\":", &r, "/v1/jobs"), 400);
    assert_string_equal(fx_detail(&r), "the request body is not valid JSON");
    tc_free(&r);
    char ctl[64];
    snprintf(ctl, sizeof ctl, "Idempotency-Key: a%cb", 1);
    const char *h[] = {ctl, NULL};
    assert_int_equal(fx_call(fx, "POST", h, "{}", &r, "/v1/jobs"), 400);
    assert_string_equal(fx_detail(&r), "Idempotency-Key must be 1..255 printable characters");
    tc_free(&r);
}

static void test_idempotency(void **state)
{
    api_fx *fx = *state;
    char a[256], b[256], same[256];
    snprintf(a, sizeof a, "{\"dataset\":\"%s\",\"training\":{\"epochs\":4}}", g_ds);
    /* The same job spelled differently (a default made explicit). */
    snprintf(same, sizeof same, "{\"training\":{\"epochs\":4,\"lr\":0.001},\"dataset\":\"%s\"}", g_ds);
    snprintf(b, sizeof b, "{\"dataset\":\"%s\",\"training\":{\"epochs\":5}}", g_ds);
    const char *h[] = {"Idempotency-Key: ci-run-42", NULL};
    tc_resp r1, r2, r3;
    assert_int_equal(fx_call(fx, "POST", h, a, &r1, "/v1/jobs"), 201);
    assert_int_equal(fx_call(fx, "POST", h, same, &r2, "/v1/jobs"), 200);
    json_t *j1 = tc_json(&r1), *j2 = tc_json(&r2);
    assert_string_equal(json_string_value(json_object_get(j1, "id")), json_string_value(json_object_get(j2, "id")));
    assert_int_equal(fx_call(fx, "POST", h, b, &r3, "/v1/jobs"), 422);
    assert_string_equal(fx_detail(&r3), "Idempotency-Key 'ci-run-42' was already used for a different job; use a "
                                        "new key for a different request");
    json_decref(j1);
    json_decref(j2);
    tc_free(&r1);
    tc_free(&r2);
    tc_free(&r3);
    fx_cancel_queued(fx);
}

/* ---- list ------------------------------------------------------------------------ */

static void test_list(void **state)
{
    api_fx *fx = *state;
    char ids[3][64];
    for (int i = 0; i < 3; i++) assert_int_equal(fx_job(fx, NULL, g_ds, ids[i], sizeof ids[i]), 0);
    tc_resp r;
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs?status=queued&limit=2"), 200);
    json_t *j = tc_json(&r);
    json_t *jobs = json_object_get(j, "jobs");
    assert_int_equal(json_array_size(jobs), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(jobs, 0), "id")), ids[2]);
    assert_string_equal(json_string_value(json_object_get(json_array_get(jobs, 1), "id")), ids[1]);
    char path[256];
    snprintf(path, sizeof path, "/v1/jobs?status=queued&limit=2&page_token=%s",
             json_string_value(json_object_get(j, "next_page_token")));
    json_decref(j);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "%s", path), 200);
    j = tc_json(&r);
    jobs = json_object_get(j, "jobs");
    assert_int_equal(json_array_size(jobs), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(jobs, 0), "id")), ids[0]);
    assert_true(json_is_null(json_object_get(j, "next_page_token")));
    json_decref(j);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs?status=done&limit=500"), 400);
    assert_string_equal(fx_detail(&r), "2 invalid request parameters");
    assert_string_equal(fx_error(&r, 0), "query.limit: 500 is out of range [1, 100]");
    assert_string_equal(fx_error(&r, 1), "query.status: unknown state 'done'; one of queued, running, cancelling, "
                                         "succeeded, failed, cancelled, stopped");
    tc_free(&r);
    fx_cancel_queued(fx);
}

/* ---- get, ETag, long-poll ----------------------------------------------------------- */

static void test_get_etag_and_404(void **state)
{
    api_fx *fx = *state;
    char id[64];
    assert_int_equal(fx_job(fx, NULL, g_ds, id, sizeof id), 0);
    tc_resp r;
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s", id), 200);
    char etag[64], inm[96];
    assert_int_equal(tc_header(&r, "ETag", etag, sizeof etag), 0);
    json_t *j = tc_json(&r);
    json_t *tr = json_object_get(j, "transitions");
    assert_int_equal(json_array_size(tr), 1);
    assert_true(json_is_null(json_object_get(json_array_get(tr, 0), "from")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(tr, 0), "to")), "queued");
    char want[64];
    snprintf(want, sizeof want, "W/\"v%lld\"", (long long)json_integer_value(json_object_get(j, "version")));
    assert_string_equal(etag, want);
    json_decref(j);
    tc_free(&r);
    snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
    const char *h[] = {inm, NULL};
    assert_int_equal(fx_call(fx, "GET", h, NULL, &r, "/v1/jobs/%s", id), 304);
    tc_free(&r);
    /* A wait that nothing ends answers 304 once it expires. */
    assert_int_equal(fx_call(fx, "GET", h, NULL, &r, "/v1/jobs/%s?wait=1", id), 304);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s?wait=301", id), 400);
    assert_string_equal(fx_error(&r, 0), "query.wait: 301 is out of range [0, 300]");
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/job_0000000000000000"), 404);
    assert_string_equal(fx_detail(&r), "there is no job 'job_0000000000000000'");
    tc_free(&r);
    fx_cancel_queued(fx);
}

typedef struct later_arg {
    api_fx *fx;
    char id[64];
} later_arg;

static void *cancel_later(void *p)
{
    later_arg *a = p;
    usleep(300 * 1000);
    pt_store *s = NULL;
    char err[256];
    if (pt_store_open(&s, a->fx->app.db_path, err, sizeof err) == PT_STORE_OK) {
        pt_store_job_cancel(s, "local", a->id, "cancelled by the test thread", NULL);
        pt_store_close(s);
    }
    pt_app_jobs_changed(&a->fx->app);
    return NULL;
}

static void test_long_poll_wakes_on_change(void **state)
{
    api_fx *fx = *state;
    later_arg a = {.fx = fx};
    assert_int_equal(fx_job(fx, NULL, g_ds, a.id, sizeof a.id), 0);
    tc_resp r;
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s", a.id), 200);
    char etag[64], inm[96];
    tc_header(&r, "ETag", etag, sizeof etag);
    tc_free(&r);
    snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
    const char *h[] = {inm, NULL};
    pthread_t t;
    pthread_create(&t, NULL, cancel_later, &a);
    assert_int_equal(fx_call(fx, "GET", h, NULL, &r, "/v1/jobs/%s?wait=20", a.id), 200);
    pthread_join(t, NULL);
    json_t *j = tc_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "state")), "cancelled");
    char etag2[64];
    tc_header(&r, "ETag", etag2, sizeof etag2);
    assert_string_not_equal(etag, etag2);
    json_decref(j);
    tc_free(&r);
}

/* ---- cancel --------------------------------------------------------------------------- */

static void test_cancel(void **state)
{
    api_fx *fx = *state;
    char queued[64], running[64];
    assert_int_equal(fx_job(fx, NULL, g_ds, running, sizeof running), 0);
    assert_int_equal(fx_job(fx, NULL, g_ds, queued, sizeof queued), 0);
    fx_claim(fx, running);
    tc_resp r;
    assert_int_equal(fx_call(fx, "POST", NULL, NULL, &r, "/v1/jobs/%s/cancel", queued), 200);
    json_t *j = tc_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "state")), "cancelled");
    json_decref(j);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "POST", NULL, NULL, &r, "/v1/jobs/%s/cancel", running), 202);
    j = tc_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "state")), "cancelling");
    json_decref(j);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "POST", NULL, NULL, &r, "/v1/jobs/%s/cancel", queued), 409);
    char want[160];
    snprintf(want, sizeof want, "job %s has already ended (cancelled); only queued or running jobs can be cancelled",
             queued);
    assert_string_equal(fx_detail(&r), want);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "POST", NULL, NULL, &r, "/v1/jobs/job_0000000000000000/cancel"), 404);
    tc_free(&r);
    assert_int_equal(pt_store_job_transition(fx->db, NULL, running, PT_JOB_STOPPED, "worker stopped", NULL),
                     PT_STORE_OK);
}

/* ---- labels, filters, delete ------------------------------------------------------------ */

/* name, tags and metadata: kept with the job (never in its config), each
 * checked where it is; ?name=, ?tag=, ?dataset= and ?state= filter. */
static void test_labels_and_filters(void **state)
{
    api_fx *fx = *state;
    char body[512], a[64], b[64];
    snprintf(body, sizeof body, "{\"dataset\":\"%s\",\"name\":\"nightly qm9\",\"tags\":[\"qm9\",\"ci:main\"],"
             "\"metadata\":{\"commit\":\"abc123\",\"n\":[1,2]},\"training\":{\"epochs\":2}}", g_ds);
    tc_resp r;
    assert_int_equal(fx_call(fx, "POST", NULL, body, &r, "/v1/jobs"), 201);
    json_t *j = tc_json(&r);
    snprintf(a, sizeof a, "%s", json_string_value(json_object_get(j, "id")));
    assert_string_equal(json_string_value(json_object_get(j, "name")), "nightly qm9");
    assert_int_equal(json_array_size(json_object_get(j, "tags")), 2);
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "tags"), 1)), "ci:main");
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "metadata"), "commit")), "abc123");
    json_t *cfg = json_object_get(j, "config");
    assert_null(json_object_get(cfg, "name"));
    assert_null(json_object_get(cfg, "tags"));
    assert_null(json_object_get(cfg, "metadata"));
    assert_true(json_is_null(json_object_get(j, "stop_reason")));
    assert_true(json_is_null(json_object_get(j, "model")));
    json_decref(j);
    tc_free(&r);
    snprintf(body, sizeof body, "{\"dataset\":\"%s\",\"training\":{\"epochs\":2}}", g_ds);
    assert_int_equal(fx_call(fx, "POST", NULL, body, &r, "/v1/jobs"), 201);
    j = tc_json(&r);
    snprintf(b, sizeof b, "%s", json_string_value(json_object_get(j, "id")));
    assert_true(json_is_null(json_object_get(j, "name")));
    assert_int_equal(json_array_size(json_object_get(j, "tags")), 0);
    assert_int_equal(json_object_size(json_object_get(j, "metadata")), 0);
    json_decref(j);
    tc_free(&r);

    struct {
        const char *query;
        int n;
        const char *first;
    } cases[] = {
        {"?tag=qm9", 1, a},         {"?tag=ci%3Amain", 1, a},          {"?name=nightly%20qm9", 1, a},
        {"?name=nightly", 0, NULL}, {"?state=queued&tag=qm9", 1, a},   {"?state=running&tag=qm9", 0, NULL},
        {"?dataset=ds_0000000000000000", 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs%s", cases[i].query), 200);
        j = tc_json(&r);
        json_t *jobs = json_object_get(j, "jobs");
        assert_int_equal(json_array_size(jobs), (size_t)cases[i].n);
        if (cases[i].first)
            assert_string_equal(json_string_value(json_object_get(json_array_get(jobs, 0), "id")), cases[i].first);
        json_decref(j);
        tc_free(&r);
    }
    char q[128];
    snprintf(q, sizeof q, "/v1/jobs?dataset=%s&limit=100", g_ds);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "%s", q), 200);
    j = tc_json(&r);
    assert_true(json_array_size(json_object_get(j, "jobs")) >= 2);
    json_decref(j);
    tc_free(&r);

    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "%s", "/v1/jobs?tag=no%20spaces&state=done&status=queued"), 400);
    assert_string_equal(fx_error(&r, 0), "query.status: is the older name of query.state; give one of them");
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "%s", "/v1/jobs?tag=no%20spaces"), 400);
    assert_string_equal(fx_error(&r, 0), "query.tag: must be 1 to 64 letters, digits or _ . : = / -");
    tc_free(&r);

    snprintf(body, sizeof body, "{\"dataset\":\"%s\",\"name\":\"\",\"tags\":[\"ok\",\"b d\",\"ok\"],"
             "\"metadata\":[1]}", g_ds);
    assert_int_equal(fx_call(fx, "POST", NULL, body, &r, "/v1/jobs"), 422);
    assert_string_equal(fx_error(&r, 0), "name: must be a string of 1 to 200 characters without control characters");
    assert_string_equal(fx_error(&r, 1), "tags[1]: must be 1 to 64 letters, digits or _ . : = / -");
    assert_string_equal(fx_error(&r, 2), "tags[2]: repeats tags[0] (\"ok\")");
    assert_string_equal(fx_error(&r, 3), "metadata: must be a JSON object (free-form: commit, pipeline, notes...)");
    tc_free(&r);
    fx_cancel_queued(fx);
}

/* DELETE: a final job goes with its files; one still running is refused. */
static void test_delete(void **state)
{
    api_fx *fx = *state;
    char id[64], dir[PATH_MAX], path[PATH_MAX + 32];
    fx_cancel_queued(fx);
    assert_int_equal(fx_job(fx, NULL, g_ds, id, sizeof id), 0);
    fx_claim(fx, id);
    tc_resp r;
    assert_int_equal(fx_call(fx, "DELETE", NULL, NULL, &r, "/v1/jobs/%s", id), 409);
    char want[256];
    snprintf(want, sizeof want, "job %s is running and cannot be deleted until it ends; cancel it first (POST "
             "/v1/jobs/%s/cancel), then delete it", id, id);
    assert_string_equal(fx_detail(&r), want);
    tc_free(&r);
    pt_app_job_dir(&fx->app, id, dir, sizeof dir);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/checkpoints", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/checkpoints/step_1.ckpt", dir);
    assert_int_equal(tfx_write(path, "ckpt"), 0);
    snprintf(path, sizeof path, "%s/outside", fx->dir);
    assert_int_equal(tfx_write(path, "keep me"), 0);
    char link[PATH_MAX + 32];
    snprintf(link, sizeof link, "%s/link", dir);
    assert_int_equal(symlink(path, link), 0);   /* a link inside: removed, never its target */
    assert_int_equal(pt_store_job_transition(fx->db, NULL, id, PT_JOB_STOPPED, "max runtime", NULL), PT_STORE_OK);
    assert_int_equal(fx_call(fx, "DELETE", NULL, NULL, &r, "/v1/jobs/%s", id), 204);
    tc_free(&r);
    struct stat st;
    assert_int_not_equal(stat(dir, &st), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s", id), 404);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "DELETE", NULL, NULL, &r, "/v1/jobs/%s", id), 404);
    tc_free(&r);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_submit_created),
        cmocka_unit_test(test_submit_config_errors),
        cmocka_unit_test(test_submit_dataset_errors),
        cmocka_unit_test(test_submit_plan_errors),
        cmocka_unit_test(test_submit_precision),
        cmocka_unit_test(test_submit_body_errors),
        cmocka_unit_test(test_idempotency),
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_get_etag_and_404),
        cmocka_unit_test(test_long_poll_wakes_on_change),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_labels_and_filters),
        cmocka_unit_test(test_delete),
    };
    int rc = cmocka_run_group_tests_name("routes_jobs", tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
