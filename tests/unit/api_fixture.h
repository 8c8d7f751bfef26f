/* api_fixture.h — a real packtrain application (pt_app) on 127.0.0.1 with an
 * ephemeral port and a fresh data directory, for the route tests, plus a
 * second store handle on the same database so a test can play the
 * scheduler's part (claim a job, append metrics, finish it) without worker
 * processes.
 *
 * Header-only (static inline) like http_test_client.h, so only the binaries
 * that include it link libcurl's symbols. */
#ifndef PT_API_FIXTURE_H
#define PT_API_FIXTURE_H

#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/serve.h"
#include "store/store.h"
#include "tests/unit/http_test_client.h"
#include "tests/unit/tmp_fixture.h"

typedef struct api_fx {
    pt_app app;
    pt_store *db;          /* the test's own handle, system scope */
    char dir[256];
    char base[64];
    char token[PT_STORE_SECRET_MAX];   /* a token of owner "alice" when auth is on */
} api_fx;

/* Starts an app; `opt` may be NULL (defaults: auth off, no workers). */
static inline int fx_start(api_fx *fx, pt_app_options *opt)
{
    memset(fx, 0, sizeof(*fx));
    snprintf(fx->dir, sizeof fx->dir, "/tmp/pt-api-test-XXXXXX");
    if (!mkdtemp(fx->dir)) return -1;
    pt_app_options defaults;
    if (!opt) {
        pt_app_options_defaults(&defaults);
        defaults.workers = 0;
        opt = &defaults;
    }
    opt->host = "127.0.0.1";
    opt->port = 0;
    opt->data_dir = fx->dir;
    char err[512];
    if (pt_serve_start(&fx->app, opt, err, sizeof err) != 0) {
        fprintf(stderr, "app: %s\n", err);
        return -1;
    }
    snprintf(fx->base, sizeof fx->base, "http://127.0.0.1:%u", pt_app_port(&fx->app));
    if (pt_store_open(&fx->db, fx->app.db_path, err, sizeof err) != PT_STORE_OK) {
        fprintf(stderr, "store: %s\n", err);
        return -1;
    }
    if (opt->auth && pt_store_token_create(fx->db, "alice", "test", fx->token, NULL) != PT_STORE_OK) return -1;
    return 0;
}

static inline void fx_stop(api_fx *fx)
{
    pt_app_close(&fx->app);
    if (fx->db) pt_store_close(fx->db);
    fx->db = NULL;
    tfx_rmtree(fx->dir);
}

/* One request; `path` may hold printf directives.  headers NULL-terminated. */
static inline long fx_call(api_fx *fx, const char *method, const char *const *headers, const char *body,
                           tc_resp *out, const char *path_fmt, ...) __attribute__((format(printf, 6, 7)));
static inline long fx_call(api_fx *fx, const char *method, const char *const *headers, const char *body,
                           tc_resp *out, const char *path_fmt, ...)
{
    char path[1024], url[1200];
    va_list ap;
    va_start(ap, path_fmt);
    vsnprintf(path, sizeof path, path_fmt, ap);
    va_end(ap);
    snprintf(url, sizeof url, "%s%s", fx->base, path);
    tc_request(method, url, headers, body, body ? strlen(body) : 0, out);
    return out->status;
}

/* Uploads a file from disk as the raw body of POST `path`. */
static inline long fx_upload(api_fx *fx, const char *path, const char *file, const char *const *headers,
                             tc_resp *out)
{
    FILE *f = fopen(file, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    char url[1200];
    snprintf(url, sizeof url, "%s%s", fx->base, path);
    tc_request("POST", url, headers, buf ? buf : "", got, out);
    free(buf);
    return out->status;
}

/* Uploads a string as a dataset; returns the new id in id_out (or ""). */
static inline long fx_upload_text(api_fx *fx, const char *query, const char *text, const char *const *headers,
                                  tc_resp *out)
{
    char url[1200];
    snprintf(url, sizeof url, "%s/v1/datasets%s", fx->base, query ? query : "");
    tc_request("POST", url, headers, text, strlen(text), out);
    return out->status;
}

/* The demo dataset uploaded as demo.extxyz; id into `id` (the one stored
 * before when the owner already has it: uploads are de-duplicated).  0 on
 * success. */
static inline int fx_demo_dataset(api_fx *fx, const char *const *headers, char *id, size_t cap)
{
    tc_resp r;
    long st = fx_upload(fx, "/v1/datasets?name=demo.extxyz", "tests/data/api_demo_qm9_64.extxyz", headers, &r);
    json_t *j = tc_json(&r);
    const char *got = json_string_value(json_object_get(j, "id"));
    snprintf(id, cap, "%s", got ? got : "");
    json_decref(j);
    tc_free(&r);
    return (st == 201 || st == 200) && id[0] ? 0 : -1;
}

/* A queued job on dataset `ds` with a small config; id into `id`. */
static inline int fx_job(api_fx *fx, const char *const *headers, const char *ds, char *id, size_t cap)
{
    char body[512];
    snprintf(body, sizeof body,
             "{\"dataset\":\"%s\",\"model\":{\"hidden\":16,\"filters\":16,\"interactions\":1},"
             "\"training\":{\"epochs\":2}}", ds);
    tc_resp r;
    long st = fx_call(fx, "POST", headers, body, &r, "/v1/jobs");
    json_t *j = tc_json(&r);
    const char *got = json_string_value(json_object_get(j, "id"));
    snprintf(id, cap, "%s", got ? got : "");
    json_decref(j);
    tc_free(&r);
    return st == 201 && id[0] ? 0 : -1;
}

/* The "detail" of a problem response (static buffer). */
static inline const char *fx_detail(const tc_resp *r)
{
    static char buf[1024];
    json_t *j = tc_json(r);
    const char *d = json_string_value(json_object_get(j, "detail"));
    snprintf(buf, sizeof buf, "%s", d ? d : "");
    json_decref(j);
    return buf;
}

/* The message and field of errors[i] of a problem, "field: message". */
static inline const char *fx_error(const tc_resp *r, size_t i)
{
    static char buf[1024];
    json_t *j = tc_json(r);
    json_t *e = json_array_get(json_object_get(j, "errors"), i);
    const char *f = json_string_value(json_object_get(e, "field"));
    const char *m = json_string_value(json_object_get(e, "message"));
    json_int_t line = json_integer_value(json_object_get(e, "line"));
    if (line > 0) snprintf(buf, sizeof buf, "%lld: %s: %s", (long long)line, f ? f : "", m ? m : "");
    else snprintf(buf, sizeof buf, "%s: %s", f ? f : "", m ? m : "");
    json_decref(j);
    return buf;
}

static inline int fx_is_problem(const tc_resp *r)
{
    char ct[128];
    return tc_header(r, "Content-Type", ct, sizeof ct) == 0 && !strcmp(ct, "application/problem+json");
}

/* Moves the oldest queued job to running, as the scheduler's claim does
 * (callers include cmocka before this header). */
static inline void fx_claim(api_fx *fx, const char *expect_id)
{
    pt_store_job job;
    assert_int_equal(pt_store_job_claim_next(fx->db, "claimed by test", &job), PT_STORE_OK);
    assert_string_equal(job.id, expect_id);
    pt_store_job_clear(&job);
    pt_app_jobs_changed(&fx->app);
}

/* Cancels every job of "local" left queued, so a later claim takes the
 * job a test expects. */
static inline void fx_cancel_queued(api_fx *fx)
{
    pt_store_job_page page;
    assert_int_equal(pt_store_job_list(fx->db, "local", &(pt_store_job_filter){.state = "queued"}, 100, NULL, &page), PT_STORE_OK);
    for (size_t i = 0; i < page.n; i++)
        assert_int_equal(pt_store_job_cancel(fx->db, "local", page.items[i].id, "test cleanup", NULL), PT_STORE_OK);
    pt_store_job_page_clear(&page);
}

#endif
