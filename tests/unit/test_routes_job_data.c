/* test_routes_job_data.c — what a job produces, through the API of a real
 * app without workers; the test plays the worker's part through its own
 * store handle (steps, epochs, transitions, files in the job directory):
 * metrics with downsampling, the event stream (replay, Last-Event-ID, live
 * delivery, the end of the stream), the log tail and the model download. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <sys/stat.h>

#include "tests/unit/api_fixture.h"
#include "tests/unit/tmp_fixture.h"

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

static json_t *get_json(api_fx *fx, long want, const char *fmt, const char *id)
{
    tc_resp r;
    long st = fx_call(fx, "GET", NULL, NULL, &r, fmt, id);
    assert_int_equal(st, want);
    json_t *j = tc_json(&r);
    tc_free(&r);
    return j;
}

typedef struct later_arg {
    api_fx *fx;
    char id[64];
} later_arg;

/* ---- data: metrics, events, logs, model ------------------------------------------------ */

/* A job that ran: 10 logged steps, 2 epochs, succeeded. */
static void run_job(api_fx *fx, char *id, size_t cap)
{
    assert_int_equal(fx_job(fx, NULL, g_ds, id, cap), 0);
    fx_claim(fx, id);
    pt_store_step_metric steps[10];
    for (int i = 0; i < 10; i++)
        steps[i] = (pt_store_step_metric){.step = (i + 1) * 10, .epoch = i < 5 ? 1 : 2, .loss = 1.0 / (i + 1),
                                          .mae = NAN, .lr = 1e-3, .graphs_per_s = 1000 + i,
                                          .json = "{\"nodes_per_s\":12345,\"padding_fraction\":0.04}"};
    assert_int_equal(pt_store_steps_append(fx->db, id, steps, 10, NULL), PT_STORE_OK);
    for (int e = 1; e <= 2; e++) {
        pt_store_epoch_metric em = {.epoch = e, .step = e * 50, .train_loss = 0.5 / e, .train_mae = NAN,
                                    .val_loss = NAN, .val_mae = 0.3 / e, .graphs_per_s = 1000, .seconds = e,
                                    .json = "{\"val_rmse\":0.4}"};
        assert_int_equal(pt_store_epoch_append(fx->db, id, &em, NULL), PT_STORE_OK);
    }
    assert_int_equal(pt_store_job_transition(fx->db, NULL, id, PT_JOB_SUCCEEDED, "training finished", NULL),
                     PT_STORE_OK);
    pt_app_jobs_changed(&fx->app);
}

static void test_metrics(void **state)
{
    api_fx *fx = *state;
    char id[64];
    run_job(fx, id, sizeof id);
    json_t *j = get_json(fx, 200, "/v1/jobs/%s/metrics", id);
    assert_int_equal(json_array_size(json_object_get(j, "steps")), 10);
    assert_int_equal(json_array_size(json_object_get(j, "epochs")), 2);
    assert_false(json_is_true(json_object_get(j, "downsampled")));
    json_t *s0 = json_array_get(json_object_get(j, "steps"), 0);
    assert_int_equal(json_integer_value(json_object_get(s0, "step")), 10);
    assert_true(json_number_value(json_object_get(s0, "nodes_per_s")) == 12345);
    assert_true(json_is_null(json_object_get(s0, "mae")));
    json_t *e1 = json_array_get(json_object_get(j, "epochs"), 1);
    assert_true(fabs(json_number_value(json_object_get(e1, "val_mae")) - 0.15) < 1e-12);
    assert_true(json_number_value(json_object_get(e1, "val_rmse")) == 0.4);
    json_decref(j);
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?since_step=50&max_points=2", id);
    tc_resp r;
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "%s", path), 200);
    j = tc_json(&r);
    json_t *steps = json_object_get(j, "steps");
    assert_int_equal(json_array_size(steps), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(steps, 0), "step")), 60);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(steps, 1), "step")), 100);
    assert_int_equal(json_integer_value(json_object_get(j, "total_steps")), 5);
    assert_true(json_is_true(json_object_get(j, "downsampled")));
    assert_int_equal(json_array_size(json_object_get(j, "epochs")), 1);   /* epoch 2 ends at step 100 */
    json_decref(j);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/metrics?max_points=1", id), 400);
    assert_string_equal(fx_error(&r, 0), "query.max_points: 1 is out of range [2, 10000]");
    tc_free(&r);
    /* paging: every step once, page by page, each page with the epochs
     * that end within it; the last page says so (null) */
    long since = -1, seen = 0, epochs_seen = 0, pages = 0;
    for (;;) {
        snprintf(path, sizeof path, "/v1/jobs/%s/metrics?since_step=%ld&page_size=4", id, since);
        j = get_json(fx, 200, "%s", path);
        steps = json_object_get(j, "steps");
        assert_false(json_is_true(json_object_get(j, "downsampled")));
        for (size_t i = 0; i < json_array_size(steps); i++)
            assert_int_equal(json_integer_value(json_object_get(json_array_get(steps, i), "step")), 10 * ++seen);
        epochs_seen += (long)json_array_size(json_object_get(j, "epochs"));
        pages++;
        json_t *next = json_object_get(j, "next_since_step");
        if (json_is_null(next)) {
            json_decref(j);
            break;
        }
        assert_int_equal(json_integer_value(next), 10 * seen);
        since = (long)json_integer_value(next);
        json_decref(j);
    }
    assert_int_equal(seen, 10);
    assert_int_equal(pages, 3);
    assert_int_equal(epochs_seen, 2);
    j = get_json(fx, 200, "/v1/jobs/%s/metrics", id);
    assert_true(json_is_null(json_object_get(j, "next_since_step")));   /* thinned: no pages */
    json_decref(j);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/metrics?page_size=5&max_points=10", id), 400);
    assert_string_equal(fx_error(&r, 0), "query.page_size: pages hold every step; max_points thins them instead: "
                                         "give one of the two");
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/metrics?page_size=10001", id), 400);
    assert_string_equal(fx_error(&r, 0), "query.page_size: 10001 is out of range [1, 10000]");
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/job_0000000000000000/metrics"), 404);
    tc_free(&r);
}

/* A job trained on forces: its metrics and result say their units; an
 * energy job's (test_metrics above) say none, its target's being unknown. */
static void test_forces_units(void **state)
{
    api_fx *fx = *state;
    char id[64];
    assert_int_equal(fx_job(fx, NULL, g_ds, id, sizeof id), 0);
    fx_claim(fx, id);
    pt_store_step_metric st = {.step = 5, .epoch = 1, .loss = 1.5, .mae = NAN, .lr = 1e-3,
                               .graphs_per_s = 900, .json = "{\"loss_energy\":0.01,\"loss_forces\":1.49}"};
    assert_int_equal(pt_store_steps_append(fx->db, id, &st, 1, NULL), PT_STORE_OK);
    pt_store_epoch_metric em = {.epoch = 1, .step = 5, .train_loss = 1.5, .train_mae = NAN, .val_loss = 1.2,
                                .val_mae = 0.3, .graphs_per_s = 900, .seconds = 1,
                                .json = "{\"val_rmse\":0.4,\"val_forces_mae\":0.25,\"val_forces_rmse\":0.5,"
                                        "\"heads\":{\"energy\":{\"val_mae\":0.3},\"mu\":{\"val_mae\":1},"
                                        "\"q_x\":{\"val_mae\":2}}}"};
    assert_int_equal(pt_store_epoch_append(fx->db, id, &em, NULL), PT_STORE_OK);
    json_t *j = get_json(fx, 200, "/v1/jobs/%s/metrics", id);
    json_t *u = json_object_get(j, "units");
    assert_string_equal(json_string_value(json_object_get(u, "val_forces_mae")), "eV/Å");
    assert_string_equal(json_string_value(json_object_get(u, "val_forces_rmse")), "eV/Å");
    assert_string_equal(json_string_value(json_object_get(u, "val_mae")), "eV");
    assert_string_equal(json_string_value(json_object_get(u, "loss_forces")), "(eV/Å)²");
    assert_null(json_object_get(u, "val_stress_mae"));   /* only the fields present */
    /* a multi-task job's targets: the units known (QM9's keys), no guess for others */
    json_t *hu = json_object_get(u, "heads");
    assert_string_equal(json_string_value(json_object_get(hu, "energy")), "eV");
    assert_string_equal(json_string_value(json_object_get(hu, "mu")), "D");
    assert_null(json_object_get(hu, "q_x"));
    json_t *e0 = json_array_get(json_object_get(j, "epochs"), 0);
    assert_true(json_number_value(json_object_get(e0, "val_forces_mae")) == 0.25);
    json_decref(j);
    j = get_json(fx, 200, "/v1/jobs/%s", id);
    assert_true(json_is_null(json_object_get(j, "result")));   /* running: no result yet */
    json_decref(j);
    assert_int_equal(pt_store_job_set_result(fx->db, id, "{\"best_val_mae\":0.3,\"test_mae\":0.35,"
                                                         "\"test_forces_mae\":0.2,\"test_forces_zero_mae\":0.7}"),
                     PT_STORE_OK);
    assert_int_equal(pt_store_job_transition(fx->db, NULL, id, PT_JOB_SUCCEEDED, "training finished", NULL),
                     PT_STORE_OK);
    j = get_json(fx, 200, "/v1/jobs/%s", id);
    json_t *res = json_object_get(j, "result");
    assert_true(json_number_value(json_object_get(res, "test_forces_mae")) == 0.2);
    u = json_object_get(res, "units");
    assert_string_equal(json_string_value(json_object_get(u, "test_forces_mae")), "eV/Å");
    assert_string_equal(json_string_value(json_object_get(u, "test_forces_zero_mae")), "eV/Å");
    assert_string_equal(json_string_value(json_object_get(u, "test_mae")), "eV");
    json_decref(j);
    /* an energy job's result has no units */
    char id2[64];
    run_job(fx, id2, sizeof id2);
    j = get_json(fx, 200, "/v1/jobs/%s/metrics", id2);
    assert_null(json_object_get(j, "units"));
    json_decref(j);
}

/* Splits an SSE body into (id, event) pairs; returns the count. */
static int parse_events(const char *body, unsigned long long *ids, char (*names)[16], int cap)
{
    int n = 0;
    for (const char *p = body; p && *p && n < cap;) {
        const char *end = strstr(p, "\n\n");
        if (!strncmp(p, "id: ", 4)) {
            ids[n] = strtoull(p + 4, NULL, 10);
            const char *ev = strstr(p, "event: ");
            if (ev && (!end || ev < end)) sscanf(ev + 7, "%15s", names[n]);
            n++;
        }
        p = end ? end + 2 : NULL;
    }
    return n;
}

static void test_events_replay_and_resume(void **state)
{
    api_fx *fx = *state;
    char id[64];
    run_job(fx, id, sizeof id);
    tc_resp r;
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/events", id), 200);
    char ct[64];
    tc_header(&r, "Content-Type", ct, sizeof ct);
    assert_string_equal(ct, "text/event-stream; charset=utf-8");
    unsigned long long ids[64];
    char names[64][16];
    int n = parse_events(r.body, ids, names, 64);
    /* queued, running, 10 steps, 2 epochs, succeeded; the stream ends by itself */
    assert_int_equal(n, 15);
    assert_string_equal(names[0], "state");
    assert_string_equal(names[1], "state");
    assert_string_equal(names[n - 1], "state");
    int steps = 0, epochs = 0;
    for (int i = 0; i < n; i++) {
        assert_true(ids[i] == (unsigned long long)i + 1);   /* the job's event numbers: small, safe integers */
        steps += !strcmp(names[i], "step");
        epochs += !strcmp(names[i], "epoch");
    }
    assert_int_equal(steps, 10);
    assert_int_equal(epochs, 2);
    assert_non_null(strstr(r.body, "\"state\":\"succeeded\""));
    /* Resuming after the 7th event sends exactly the rest. */
    char last[96];
    snprintf(last, sizeof last, "Last-Event-ID: %llu", ids[6]);
    const char *h[] = {last, NULL};
    tc_resp r2;
    assert_int_equal(fx_call(fx, "GET", h, NULL, &r2, "/v1/jobs/%s/events", id), 200);
    unsigned long long ids2[64];
    char names2[64][16];
    int n2 = parse_events(r2.body, ids2, names2, 64);
    assert_int_equal(n2, n - 7);
    for (int i = 0; i < n2; i++) assert_true(ids2[i] == ids[i + 7]);
    tc_free(&r);
    tc_free(&r2);
    /* Having seen the last event of a finished job: 204, which stops an
     * EventSource (HTML standard) instead of an empty stream it would retry. */
    snprintf(last, sizeof last, "Last-Event-ID: %llu", ids[n - 1]);
    assert_int_equal(fx_call(fx, "GET", h, NULL, &r, "/v1/jobs/%s/events", id), 204);
    assert_int_equal(r.len, 0);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/events?last_event_id=%llu", id, ids[n - 1]), 204);
    tc_free(&r);
    snprintf(last, sizeof last, "Last-Event-ID: %llu", ids[n - 1] + 1);
    assert_int_equal(fx_call(fx, "GET", h, NULL, &r, "/v1/jobs/%s/events", id), 400);
    assert_non_null(strstr(fx_detail(&r), "is after the last event of job"));
    tc_free(&r);
    const char *bad[] = {"Last-Event-ID: seven", NULL};
    assert_int_equal(fx_call(fx, "GET", bad, NULL, &r, "/v1/jobs/%s/events", id), 400);
    assert_string_equal(fx_error(&r, 0), "header.Last-Event-ID: must be a decimal event id");
    tc_free(&r);
    const char *huge[] = {"Last-Event-ID: 9007199254740992", NULL};   /* 2^53 */
    assert_int_equal(fx_call(fx, "GET", huge, NULL, &r, "/v1/jobs/%s/events", id), 400);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/job_0000000000000000/events"), 404);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/events?heartbeat_ms=5", id), 400);
    assert_string_equal(fx_error(&r, 0), "query.heartbeat_ms: 5 is out of range [100, 120000]");
    tc_free(&r);
}

static void *finish_later(void *p)
{
    later_arg *a = p;
    usleep(300 * 1000);
    pt_store *s = NULL;
    char err[256];
    if (pt_store_open(&s, a->fx->app.db_path, err, sizeof err) != PT_STORE_OK) return NULL;
    pt_store_step_metric m = {.step = 1, .epoch = 1, .loss = 2.5, .mae = NAN, .lr = 1e-3, .graphs_per_s = 10};
    pt_store_steps_append(s, a->id, &m, 1, NULL);
    pt_app_jobs_changed(&a->fx->app);
    usleep(200 * 1000);
    pt_store_job_transition(s, NULL, a->id, PT_JOB_FAILED, "worker crashed 3 times", NULL);
    pt_store_close(s);
    pt_app_jobs_changed(&a->fx->app);
    return NULL;
}

static void test_events_live(void **state)
{
    api_fx *fx = *state;
    later_arg a = {.fx = fx};
    assert_int_equal(fx_job(fx, NULL, g_ds, a.id, sizeof a.id), 0);
    fx_claim(fx, a.id);
    pthread_t t;
    pthread_create(&t, NULL, finish_later, &a);
    tc_resp r;
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/events", a.id), 200);
    pthread_join(t, NULL);
    unsigned long long ids[16];
    char names[16][16];
    int n = parse_events(r.body, ids, names, 16);
    assert_int_equal(n, 4);   /* queued, running, step 1, failed */
    assert_string_equal(names[2], "step");
    assert_non_null(strstr(r.body, "\"reason\":\"worker crashed 3 times\""));
    tc_free(&r);
}

static void test_logs(void **state)
{
    api_fx *fx = *state;
    char id[64], dir[PATH_MAX], path[PATH_MAX + 32];
    assert_int_equal(fx_job(fx, NULL, g_ds, id, sizeof id), 0);
    tc_resp r;
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/logs", id), 200);
    assert_int_equal(r.len, 0);
    tc_free(&r);
    pt_app_job_dir(&fx->app, id, dir, sizeof dir);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/worker.log", dir);
    assert_int_equal(tfx_write(path, "one\ntwo\nthree\nfour\n"), 0);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/logs?lines=2", id), 200);
    assert_string_equal(r.body, "three\nfour\n");
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/logs?lines=0", id), 400);
    assert_string_equal(fx_error(&r, 0), "query.lines: 0 is out of range [1, 10000]");
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/job_0000000000000000/logs"), 404);
    tc_free(&r);
    fx_cancel_queued(fx);
}

static void test_model(void **state)
{
    api_fx *fx = *state;
    char id[64], dir[PATH_MAX], path[PATH_MAX + 32];
    assert_int_equal(fx_job(fx, NULL, g_ds, id, sizeof id), 0);
    tc_resp r;
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/model", id), 409);
    char want[160];
    snprintf(want, sizeof want, "the model of job %s is not available yet: the job is queued", id);
    assert_string_equal(fx_detail(&r), want);
    tc_free(&r);
    assert_int_equal(pt_store_job_cancel(fx->db, "local", id, "test", NULL), PT_STORE_OK);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/model", id), 409);
    snprintf(want, sizeof want, "job %s ended (cancelled) without a model", id);
    assert_string_equal(fx_detail(&r), want);
    tc_free(&r);
    pt_app_job_dir(&fx->app, id, dir, sizeof dir);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(tfx_write(path, "not really a model, but bytes"), 0);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/model", id), 200);
    assert_string_equal(r.body, "not really a model, but bytes");
    char etag[96], inm[128], disp[160];
    assert_int_equal(tc_header(&r, "ETag", etag, sizeof etag), 0);
    /* a job that did not succeed offers its model as a partial one */
    tc_header(&r, "Content-Disposition", disp, sizeof disp);
    snprintf(want, sizeof want, "attachment; filename=\"%s.partial.safetensors\"", id);
    assert_string_equal(disp, want);
    tc_header(&r, "Packtrain-Model", disp, sizeof disp);
    assert_string_equal(disp, "partial");
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s", id), 200);
    json_t *job = tc_json(&r);
    json_t *model = json_object_get(job, "model");
    assert_true(json_is_true(json_object_get(model, "partial")));
    assert_int_equal(json_integer_value(json_object_get(model, "bytes")), 29);
    snprintf(want, sizeof want, "/v1/jobs/%s/model", id);
    assert_string_equal(json_string_value(json_object_get(model, "url")), want);
    json_decref(job);
    tc_free(&r);
    /* a succeeded job's is the final one */
    char ok[64], okdir[PATH_MAX];
    assert_int_equal(fx_job(fx, NULL, g_ds, ok, sizeof ok), 0);
    fx_claim(fx, ok);
    assert_int_equal(pt_store_job_transition(fx->db, NULL, ok, PT_JOB_SUCCEEDED, "done", NULL), PT_STORE_OK);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s", ok), 200);
    job = tc_json(&r);
    assert_true(json_is_null(json_object_get(job, "model")));   /* no file: no model */
    json_decref(job);
    tc_free(&r);
    pt_app_job_dir(&fx->app, ok, okdir, sizeof okdir);
    mkdir(okdir, 0755);
    snprintf(path, sizeof path, "%s/model.safetensors", okdir);
    assert_int_equal(tfx_write(path, "final"), 0);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s/model", ok), 200);
    tc_header(&r, "Content-Disposition", disp, sizeof disp);
    snprintf(want, sizeof want, "attachment; filename=\"%s.safetensors\"", ok);
    assert_string_equal(disp, want);
    tc_header(&r, "Packtrain-Model", disp, sizeof disp);
    assert_string_equal(disp, "final");
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s", ok), 200);
    job = tc_json(&r);
    assert_true(json_is_false(json_object_get(json_object_get(job, "model"), "partial")));
    json_decref(job);
    tc_free(&r);
    snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
    const char *h[] = {inm, NULL};
    assert_int_equal(fx_call(fx, "GET", h, NULL, &r, "/v1/jobs/%s/model", id), 304);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/job_0000000000000000/model"), 404);
    tc_free(&r);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_forces_units),
        cmocka_unit_test(test_events_replay_and_resume),
        cmocka_unit_test(test_events_live),
        cmocka_unit_test(test_logs),
        cmocka_unit_test(test_model),
    };
    int rc = cmocka_run_group_tests_name("routes_job_data", tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
