/* test_routes_progress.c — data work in flight on the server
 * (server/app_progress.c, routes_datasets.c, routes_packing.c): the task
 * registry (order, owners, eviction of finished tasks), an upload being
 * ingested seen through GET /v1/datasets/{id} and the list (status
 * "ingesting" with its progress), the events stream (progress, done,
 * failed; resume with Last-Event-ID), and real uploads and packing reports
 * leaving their final progress there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/api_fixture.h"

static int setup(void **state)
{
    static api_fx fx;
    if (fx_start(&fx, NULL) != 0) return -1;
    *state = &fx;
    return 0;
}

static int teardown(void **state)
{
    fx_stop(*state);
    return 0;
}

/* GET of an endless stream, cut after `ms` milliseconds: the body so far. */
static void get_for(api_fx *fx, const char *path, const char *header, long ms, tc_resp *out)
{
    char url[1200];
    snprintf(url, sizeof url, "%s%s", fx->base, path);
    memset(out, 0, sizeof(*out));
    CURL *c = curl_easy_init();
    struct curl_slist *h = header ? curl_slist_append(NULL, header) : NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, tc_on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

/* Events of an SSE body: ids, names and data (data copied, NUL-ended). */
typedef struct sse_event {
    unsigned long long id;
    char name[16];
    char data[1024];
} sse_event;

static int parse(const char *body, sse_event *ev, int cap)
{
    int n = 0;
    const char *p = body;
    while (p && *p && n < cap) {
        const char *end = strstr(p, "\n\n");
        sse_event *e = &ev[n];
        memset(e, 0, sizeof(*e));
        int have = 0;
        for (const char *line = p; line && (!end || line < end);) {
            const char *nl = strchr(line, '\n');
            size_t len = nl ? (size_t)(nl - line) : strlen(line);
            if (!strncmp(line, "id: ", 4)) {
                e->id = strtoull(line + 4, NULL, 10);
                have = 1;
            } else if (!strncmp(line, "event: ", 7)) {
                snprintf(e->name, sizeof e->name, "%.*s", (int)(len - 7), line + 7);
            } else if (!strncmp(line, "data: ", 6)) {
                snprintf(e->data, sizeof e->data, "%.*s", (int)(len - 6), line + 6);
            }
            line = nl ? nl + 1 : NULL;
        }
        n += have;
        p = end ? end + 2 : NULL;
    }
    return n;
}

static void test_registry_order_owners_eviction(void **state)
{
    api_fx *fx = *state;
    pt_app *app = &fx->app;
    uint64_t before = app->tasks.seq;
    pt_app_task_begin(app, "ds_reg_a", "alice", "a.xyz", "ingest");
    pt_app_task_begin(app, "ds_reg_b", "bob", "b.xyz", "ingest");
    pt_progress_info info = {.phase = "ingest", .unit = "bytes", .done = 10, .total = 40,
                             .structures = 7, .seconds = 2};
    pt_app_task_progress(app, "ds_reg_a", &info);
    pt_app_task_progress(app, "ds_unknown", &info);   /* no such task: ignored */
    pt_app_task t;
    assert_int_equal(pt_app_task_get(app, "alice", "ds_reg_a", &t), 0);
    assert_int_equal(t.state, PT_TASK_RUNNING);
    assert_int_equal(t.done, 10);
    assert_int_equal(t.structures, 7);
    assert_true(t.rate == 3.5);
    assert_true(t.eta == 6.0);
    assert_int_equal(pt_app_task_get(app, "bob", "ds_reg_a", &t), -1);   /* another owner's */
    pt_app_task list[PT_APP_TASKS_MAX];
    assert_int_equal(pt_app_tasks_since(app, "alice", before, list, PT_APP_TASKS_MAX), 1);
    pt_app_task_end(app, "ds_reg_b", 0, "broken");
    pt_app_task_end(app, "ds_reg_a", 1, NULL);
    assert_int_equal(pt_app_task_get(app, "bob", "ds_reg_b", &t), 0);
    assert_int_equal(t.state, PT_TASK_FAILED);
    assert_string_equal(t.message, "broken");
    assert_int_equal(pt_app_tasks_since(app, "alice", before, list, PT_APP_TASKS_MAX), 1);
    assert_int_equal(list[0].state, PT_TASK_DONE);
    /* finished tasks give way to new ones; running ones never */
    pt_app_task_begin(app, "ds_reg_run", "alice", "run", "ingest");
    char id[40];
    for (int i = 0; i < 2 * PT_APP_TASKS_MAX; i++) {
        snprintf(id, sizeof id, "ds_reg_%d", i);
        pt_app_task_begin(app, id, "carol", id, "ingest");
        pt_app_task_end(app, id, 1, NULL);
    }
    assert_int_equal(pt_app_task_get(app, "alice", "ds_reg_run", &t), 0);
    assert_int_equal(pt_app_task_get(app, "alice", "ds_reg_a", &t), -1);
    assert_int_equal(pt_app_task_get(app, "carol", id, &t), 0);
    size_t n = pt_app_tasks_since(app, "carol", 0, list, PT_APP_TASKS_MAX);
    assert_int_equal(n, PT_APP_TASKS_MAX - 1);
    for (size_t i = 1; i < n; i++) assert_true(list[i].seq > list[i - 1].seq);
    pt_app_task_end(app, "ds_reg_run", 1, NULL);
}

static void test_ingesting_dataset_seen(void **state)
{
    api_fx *fx = *state;
    pt_app *app = &fx->app;
    pt_app_task_begin(app, "ds_inflight01", PT_APP_LOCAL_OWNER, "big.extxyz.gz", "ingest");
    pt_progress_info info = {.phase = "ingest", .unit = "bytes", .done = 250, .total = 1000,
                             .structures = 5000, .seconds = 10};
    pt_app_task_progress(app, "ds_inflight01", &info);
    tc_resp r;
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets/ds_inflight01"), 200);
    json_t *j = tc_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "ingesting");
    assert_string_equal(json_string_value(json_object_get(j, "name")), "big.extxyz.gz");
    assert_int_equal(json_integer_value(json_object_get(j, "n_structures")), 5000);
    assert_int_equal(json_integer_value(json_object_get(j, "bytes")), 1000);
    assert_true(json_is_null(json_object_get(j, "report")));
    json_t *p = json_object_get(j, "progress");
    assert_string_equal(json_string_value(json_object_get(p, "phase")), "ingest");
    assert_int_equal(json_integer_value(json_object_get(p, "done")), 250);
    assert_true(json_real_value(json_object_get(p, "structures_per_second")) == 500.0);
    assert_true(json_real_value(json_object_get(p, "eta_seconds")) == 30.0);
    json_decref(j);
    tc_free(&r);
    /* first on the list's first page, not on later pages */
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets"), 200);
    j = tc_json(&r);
    json_t *first = json_array_get(json_object_get(j, "datasets"), 0);
    assert_string_equal(json_string_value(json_object_get(first, "id")), "ds_inflight01");
    json_decref(j);
    tc_free(&r);
    /* a failed upload leaves nothing */
    pt_app_task_end(app, "ds_inflight01", 0, "in.xyz:3: species: unknown element");
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets/ds_inflight01"), 404);
    tc_free(&r);
}

static void test_events_stream_and_resume(void **state)
{
    api_fx *fx = *state;
    pt_app *app = &fx->app;
    uint64_t after = app->tasks.seq;
    pt_app_task_begin(app, "ds_events01", PT_APP_LOCAL_OWNER, "ev.xyz", "ingest");
    pt_progress_info info = {.phase = "ingest", .unit = "bytes", .done = 5, .total = 10,
                             .structures = 3, .seconds = 1};
    pt_app_task_progress(app, "ds_events01", &info);
    pt_app_task_begin(app, "ds_events02", PT_APP_LOCAL_OWNER, "bad.xyz", "ingest");
    pt_app_task_end(app, "ds_events02", 0, "bad.xyz:1: atom count: expected an atom count");
    pt_app_task_begin(app, "ds_events03", "someone-else", "x", "ingest");
    char hdr[64];
    snprintf(hdr, sizeof hdr, "Last-Event-ID: %llu", (unsigned long long)after);
    tc_resp r;
    get_for(fx, "/v1/datasets/events?heartbeat_ms=100", hdr, 400, &r);
    assert_int_equal(r.status, 200);
    sse_event ev[8];
    int n = parse(r.body, ev, 8);
    assert_int_equal(n, 2);   /* the latest state of each of the caller's tasks */
    assert_string_equal(ev[0].name, "progress");
    assert_non_null(strstr(ev[0].data, "\"dataset\":\"ds_events01\""));
    assert_non_null(strstr(ev[0].data, "\"state\":\"running\""));
    assert_string_equal(ev[1].name, "failed");
    assert_non_null(strstr(ev[1].data, "\"detail\":\"bad.xyz:1: atom count: expected an atom count\""));
    assert_true(ev[1].id > ev[0].id);
    tc_free(&r);
    /* a change after the stream's last id comes alone */
    snprintf(hdr, sizeof hdr, "Last-Event-ID: %llu", ev[1].id);
    pt_app_task_end(app, "ds_events01", 1, NULL);
    get_for(fx, "/v1/datasets/events", hdr, 400, &r);
    n = parse(r.body, ev, 8);
    assert_int_equal(n, 1);
    assert_string_equal(ev[0].name, "done");
    assert_non_null(strstr(ev[0].data, "\"eta_seconds\":0"));
    tc_free(&r);
    pt_app_task_end(app, "ds_events03", 1, NULL);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets/events?heartbeat_ms=7"), 400);
    tc_free(&r);
}

/* A real upload and a packing report leave their final state on the stream:
 * the upload's bytes all read and its structures, the report's edges
 * counted for every structure. */
static void test_upload_and_packing_report_progress(void **state)
{
    api_fx *fx = *state;
    uint64_t after = fx->app.tasks.seq;
    tc_resp r;
    assert_int_equal(fx_upload(fx, "/v1/datasets?name=demo", "tests/data/api_demo_qm9_64.extxyz", NULL, &r),
                     201);
    json_t *j = tc_json(&r);
    char id[64];
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(j, "id")));
    json_decref(j);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets/%s/packing", id), 200);
    tc_free(&r);
    char hdr[64];
    snprintf(hdr, sizeof hdr, "Last-Event-ID: %llu", (unsigned long long)after);
    get_for(fx, "/v1/datasets/events", hdr, 400, &r);
    sse_event ev[8];
    int n = parse(r.body, ev, 8);
    assert_int_equal(n, 1);   /* one task per dataset: the packing report's, done */
    assert_string_equal(ev[0].name, "done");
    assert_non_null(strstr(ev[0].data, "\"phase\":\"count_edges\""));
    assert_non_null(strstr(ev[0].data, "\"done\":64,\"total\":64"));
    tc_free(&r);
    /* the upload's own final state, before the report replaced it */
    pt_app_task t;
    assert_int_equal(pt_app_task_get(&fx->app, PT_APP_LOCAL_OWNER, id, &t), 0);
    assert_string_equal(t.phase, "count_edges");
    /* skip_invalid: another upload of the same file (the same options again
     * would be the dataset stored above, with no ingest) */
    assert_int_equal(fx_upload(fx, "/v1/datasets?name=demo2&skip_invalid=true", "tests/data/api_demo_qm9_64.extxyz",
                               NULL, &r), 201);
    j = tc_json(&r);
    assert_int_equal(pt_app_task_get(&fx->app, PT_APP_LOCAL_OWNER,
                                     json_string_value(json_object_get(j, "id")), &t), 0);
    json_decref(j);
    tc_free(&r);
    assert_int_equal(t.state, PT_TASK_DONE);
    assert_string_equal(t.phase, "ingest");
    assert_int_equal(t.structures, 64);
    assert_true(t.total > 0 && t.done == t.total);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_order_owners_eviction),
        cmocka_unit_test(test_ingesting_dataset_seen),
        cmocka_unit_test(test_events_stream_and_resume),
        cmocka_unit_test(test_upload_and_packing_report_progress),
    };
    return cmocka_run_group_tests_name("routes_progress", tests, setup, teardown);
}
