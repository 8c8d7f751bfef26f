/* routes_datasets.c — uploading and managing datasets:
 *   POST   /v1/datasets            body = the file (?name=&format=&skip_invalid=&forces_key=&stress_key=)
 *   GET    /v1/datasets            ?limit=&page_token=, newest first
 *   GET    /v1/datasets/{id}
 *   DELETE /v1/datasets/{id}       409 while a job uses it
 *   GET    /v1/datasets/{id}/packing   see routes_packing.c
 *   GET    /v1/datasets/events     SSE: progress of uploads (and packing reports)
 *                                  in flight, and how they ended
 *
 * An upload arrives as a temp file under data_dir/tmp (never in memory) and
 * is ingested from there into data_dir/datasets/ID/data.ptd; the upload
 * itself is removed after the response.  Errors name the file by its
 * ?name=, not by the server's temp path.  A dataset row exists only once
 * its .ptd is complete, so a job can never see a half-ingested dataset; while
 * it is being ingested the upload is a task of server/app_progress.c: GET
 * /v1/datasets/{id} and the list show it with status "ingesting" and its
 * progress (bytes read, structures, rate, time left), and the events stream
 * sends each change.  The engine reports through a callback
 * (pt_ingest_options.progress) on whichever thread ingests. */
#include "server/api/routes.h"

#include <ctype.h>
#include <pthread.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/data/ingest.h"
#include "server/http/sse.h"

#define ERRORS_KEPT 100

/* ---- import (shared with serve --demo) ------------------------------------------- */

static void remove_dataset_files(const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/data.ptd", dir) < (int)sizeof path) unlink(path);
    rmdir(dir);
}

/* The format most structures were read as ("mixed" never happens in one
 * file in practice, but the report keeps counts per format). */
static const char *detected_format(const pt_ingest_report *rep, pt_format asked)
{
    if (asked != PT_FORMAT_AUTO) return pt_format_name(asked);
    pt_format best = PT_FORMAT_AUTO;
    for (int f = PT_FORMAT_AUTO + 1; f < PT_FORMAT_COUNT; f++)
        if (best == PT_FORMAT_AUTO || rep->n_by_format[f] > rep->n_by_format[best]) best = (pt_format)f;
    return pt_format_name(best);
}

/* The engine's progress of one task, to the app's registry. */
static int import_to(pt_app *app, pt_store *s, const char *src, const pt_dataset_import *imp,
                     pt_store_dataset *row, pt_errors *errs, int *status, pt_response *quota);

int pt_app_dataset_import(pt_app *app, pt_store *s, const char *src, const pt_dataset_import *imp,
                          pt_store_dataset *out, pt_errors *errs, int *status, pt_response *quota)
{
    pt_store_dataset row;
    memset(&row, 0, sizeof row);
    if (pt_store_new_id("ds_", row.id, sizeof row.id) != PT_STORE_OK) {
        *status = 500;
        pt_errors_add(errs, NULL, 0, "", "cannot name the dataset's files");
        return -1;
    }
    pt_app_task_begin(app, row.id, imp->owner, imp->name, "ingest");
    int rc = import_to(app, s, src, imp, &row, errs, status, quota);
    if (rc == 0) *out = row;
    char first[256] = "";
    if (rc != 0) pt_errors_first(errs, first, sizeof first);
    pt_app_task_end(app, row.id, rc == 0, first);
    return rc;
}

static int import_to(pt_app *app, pt_store *s, const char *src, const pt_dataset_import *imp,
                     pt_store_dataset *out, pt_errors *errs, int *status, pt_response *quota)
{
    *status = 500;
    pt_store_dataset row;
    memset(&row, 0, sizeof row);
    snprintf(row.id, sizeof row.id, "%s", out->id);
    char dir[PATH_MAX];
    if (pt_app_dataset_dir(app, row.id, dir, sizeof dir) != 0 ||
        snprintf(row.path, sizeof row.path, "%s/data.ptd", dir) >= (int)sizeof row.path) {
        pt_errors_add(errs, NULL, 0, "", "cannot name the dataset's files");
        return -1;
    }
    if (mkdir(dir, 0755) != 0) {
        pt_errors_add(errs, NULL, 0, "", "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    pt_ingest_options io;
    pt_ingest_options_init(&io);
    io.format = imp->format;
    io.skip_invalid = imp->skip_invalid;
    io.forces_key = imp->forces_key;
    io.stress_key = imp->stress_key;
    io.display_name = imp->name;
    pt_api_task_sink ts;
    pt_progress sink = pt_api_task_progress(&ts, app, row.id);
    io.progress = &sink;
    const pt_app_limits *lim = &app->opt.limits;
    io.max_bytes = lim->upload_decompressed_bytes;
    io.max_structures = lim->upload_structures;
    io.max_total_atoms = lim->upload_atoms;
    if (imp->req) {
        io.should_stop = pt_request_should_stop;
        io.user = imp->req;
    }
    pt_ingest_report rep;
    memset(&rep, 0, sizeof rep);
    if (pt_ingest_files(&src, 1, row.path, &io, &rep, errs) != 0) {
        *status = rep.stopped ? 503 : rep.over_limit ? 413 : rep.write_failed ? 500 : 422;
        pt_ingest_report_close(&rep);
        remove_dataset_files(dir);
        return -1;
    }
    if (rep.n_structs == 0) {
        pt_errors_add(errs, imp->name, 0, "", "the file holds no structure");
        pt_ingest_report_close(&rep);
        remove_dataset_files(dir);
        *status = 422;
        return -1;
    }
    json_t *report = pt_ingest_report_json(&rep);
    struct stat st;
    if (report && stat(row.path, &st) == 0) json_object_set_new(report, "stored_bytes", json_integer((json_int_t)st.st_size));
    /* With skip_invalid the skipped structures' errors are kept, so nothing
     * is dropped silently. */
    if (report && errs->total) {
        json_object_set_new(report, "skipped_errors", pt_errors_to_json(errs));
        json_object_set_new(report, "skipped_errors_omitted", json_integer((json_int_t)(errs->total - errs->kept)));
    }
    row.report_json = report ? json_dumps(report, JSON_COMPACT) : NULL;
    json_decref(report);
    snprintf(row.owner, sizeof row.owner, "%s", imp->owner);
    snprintf(row.name, sizeof row.name, "%s", imp->name);
    snprintf(row.format, sizeof row.format, "%s", detected_format(&rep, imp->format));
    snprintf(row.status, sizeof row.status, "ready");
    row.n_structs = (int64_t)rep.n_structs;
    row.n_atoms = (int64_t)rep.n_atoms;
    row.bytes = (int64_t)imp->source_bytes;
    if (imp->content_sha256) snprintf(row.content_sha256, sizeof row.content_sha256, "%s", imp->content_sha256);
    if (imp->ingest_hash) snprintf(row.ingest_hash, sizeof row.ingest_hash, "%s", imp->ingest_hash);
    pt_ingest_report_close(&rep);
    if (!row.report_json) {
        remove_dataset_files(dir);
        pt_errors_add(errs, NULL, 0, "", "out of memory writing the report");
        return -1;
    }
    /* the owner's quota, checked with the insert it allows: uploads side
     * by side cannot pass it together */
    pthread_mutex_lock(&app->quota_mu);
    uint64_t stored = stat(row.path, &st) == 0 ? (uint64_t)st.st_size : 0;
    if (pt_quota_storage_check(app, s, imp->owner, stored, quota) != 0) {
        pthread_mutex_unlock(&app->quota_mu);
        free(row.report_json);
        remove_dataset_files(dir);
        pt_errors_add(errs, NULL, 0, "", "over the owner's storage quota");
        *status = quota->status;
        return -1;
    }
    char twin[PT_STORE_ID_MAX];
    int rc = pt_store_dataset_create_unique(s, &row, out, twin);
    pthread_mutex_unlock(&app->quota_mu);
    free(row.report_json);
    if (rc == PT_STORE_CONFLICT && twin[0]) {
        /* the same upload landed while this one was ingested: keep that one */
        remove_dataset_files(dir);
        rc = pt_store_dataset_get(s, imp->owner, twin, out);
        *status = rc == PT_STORE_OK ? 200 : pt_api_status_of(rc);
        if (rc != PT_STORE_OK) pt_errors_add(errs, NULL, 0, "", "cannot read dataset %s: %s", twin, pt_store_errmsg(s));
        return rc == PT_STORE_OK ? 0 : -1;
    }
    if (rc != PT_STORE_OK) {
        remove_dataset_files(dir);
        pt_errors_add(errs, NULL, 0, "", "cannot record the dataset: %s", pt_store_errmsg(s));
        *status = pt_api_status_of(rc);
        return -1;
    }
    *status = 201;
    return 0;
}

int pt_app_load_demo(pt_app *app, const char *path, char *err, size_t errlen)
{
    pt_store *s = pt_app_store_acquire(app, err, errlen);
    if (!s) return -1;
    pt_store_dataset_page page;
    int rc = pt_store_dataset_list(s, PT_APP_LOCAL_OWNER, PT_STORE_PAGE_MAX, NULL, &page);
    int have = 0;
    for (size_t i = 0; rc == PT_STORE_OK && i < page.n; i++) have |= !strcmp(page.items[i].name, "demo-qm9");
    if (rc == PT_STORE_OK) pt_store_dataset_page_clear(&page);
    struct stat st;
    if (rc != PT_STORE_OK) {
        snprintf(err, errlen, "cannot list datasets: %s", pt_store_errmsg(s));
    } else if (!have && stat(path, &st) != 0) {
        snprintf(err, errlen, "cannot read %s (run from the repository root): %s", path, strerror(errno));
        rc = -1;
    } else if (!have) {
        pt_dataset_import imp = {.owner = PT_APP_LOCAL_OWNER, .name = "demo-qm9", .format = PT_FORMAT_AUTO,
                                 .source_bytes = (uint64_t)st.st_size};
        pt_errors errs;
        pt_errors_init(&errs, 4);
        pt_store_dataset row = {0};
        int status;
        pt_response quota = {0, NULL};
        rc = pt_app_dataset_import(app, s, path, &imp, &row, &errs, &status, &quota);
        if (quota.mhd) MHD_destroy_response(quota.mhd);
        if (rc != 0) pt_errors_first(&errs, err, errlen);
        else fprintf(stderr, "packtrain: demo dataset %s (%lld structures) from %s\n", row.id, (long long)row.n_structs, path);
        pt_store_dataset_clear(&row);
        pt_errors_close(&errs);
    }
    pt_app_store_release(app, s);
    return rc == PT_STORE_OK ? 0 : -1;
}

/* ---- POST /v1/datasets ---------------------------------------------------------- */

static int parse_bool(const char *v, int *out)
{
    if (!strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "yes")) *out = 1;
    else if (!strcasecmp(v, "false") || !strcmp(v, "0") || !strcasecmp(v, "no")) *out = 0;
    else return -1;
    return 0;
}

static int name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= PT_STORE_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (iscntrl((unsigned char)name[i])) return 0;
    return 1;
}

void pt_api_ingest_hash(const char *content_sha256, const pt_dataset_import *imp, char out[PT_STORE_HASH_HEX])
{
    char *basis = NULL;
    int n = asprintf(&basis, "%s\nformat=%s\nskip_invalid=%d\nforces_key=%s\nstress_key=%s", content_sha256,
                     pt_format_name(imp->format), imp->skip_invalid, imp->forces_key ? imp->forces_key : "",
                     imp->stress_key ? imp->stress_key : "");
    if (n < 0) {
        out[0] = '\0';
        return;
    }
    pt_store_sha256_hex(basis, (size_t)n, out);
    free(basis);
}

static pt_response dataset_answer(int status, const pt_store_dataset *d)
{
    pt_response r = pt_response_json(status, pt_api_dataset_json(d));
    char loc[96];
    snprintf(loc, sizeof loc, "/v1/datasets/%s", d->id);
    pt_response_header(&r, "Location", loc);
    return r;
}

/* The answer for an Idempotency-Key already used, or {0} when it is not. */
static pt_response earlier_upload(pt_store *s, const pt_dataset_import *imp, const char *key, const char *request_hash)
{
    char stored[PT_STORE_HASH_HEX], id[PT_STORE_ID_MAX];
    int rc = pt_store_dataset_key_get(s, imp->owner, key, stored, id);
    if (rc == PT_STORE_NOT_FOUND) return (pt_response){0, NULL};
    if (rc != PT_STORE_OK) return pt_api_store_problem(s, rc, "cannot read the Idempotency-Key");
    if (strcmp(stored, request_hash) != 0)
        return pt_problem(422, "Idempotency-Key '%.64s' was already used for a different upload (dataset %s); use a "
                               "new key for a different file, name or option", key, id);
    pt_store_dataset d = {0};
    rc = pt_store_dataset_get(s, imp->owner, id, &d);
    pt_response r = rc == PT_STORE_OK ? dataset_answer(200, &d) : pt_api_store_problem(s, rc, "cannot read the dataset");
    pt_store_dataset_clear(&d);
    return r;
}

/* The owner's dataset of the same upload (200), or a new one (201). */
static pt_response import_upload(pt_app *app, pt_store *s, pt_request *req, const pt_dataset_import *imp,
                                 pt_store_dataset *row)
{
    int rc = pt_store_dataset_find_ingest(s, imp->owner, imp->ingest_hash, row);
    if (rc == PT_STORE_OK) return dataset_answer(200, row);
    if (rc != PT_STORE_NOT_FOUND) return pt_api_store_problem(s, rc, "cannot look for an earlier upload");
    pt_response r, quota = {0, NULL};
    /* an owner at its quota already is refused before any work (a file
     * stored before is answered above: it costs nothing more) */
    if (pt_quota_storage_check(app, s, imp->owner, 0, &r) != 0) return r;
    pt_errors errs;
    pt_errors_init(&errs, ERRORS_KEPT);
    int status;
    if (pt_app_dataset_import(app, s, req->body_path, imp, row, &errs, &status, &quota) == 0) {
        r = dataset_answer(status, row);
    } else if (status == 429) {
        r = quota;
        quota.mhd = NULL;
    } else if (status == 503 && pt_request_cancelled(req)) {
        r = pt_request_cancelled_response(req);
    } else if (status == 413) {
        r = pt_problem_errors(413, &errs, "'%s' is larger than this server accepts in one upload", imp->name);
    } else if (status == 422) {
        r = pt_problem_errors(422, &errs, "'%s' is not a valid dataset: %zu problem%s", imp->name, errs.total,
                              errs.total == 1 ? "" : "s");
    } else {
        char first[512];
        pt_errors_first(&errs, first, sizeof first);
        if (pt_api_no_space(first)) r = pt_api_disk_full("cannot store the dataset", strerror(ENOSPC));
        else r = pt_problem(status, "cannot store the dataset: %s", first);
    }
    pt_response_destroy(&quota);
    pt_errors_close(&errs);
    return r;
}

pt_response pt_api_datasets_upload(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    pt_dataset_import imp = {.owner = pt_app_owner(req), .name = pt_request_query(req, "name"),
                             .format = PT_FORMAT_AUTO, .source_bytes = req->body_size, .req = req};
    if (!imp.name) imp.name = "upload";
    if (!name_ok(imp.name))
        pt_errors_add(&req->errors, NULL, 0, "query.name", "must be 1..%d characters without control characters",
                      PT_STORE_NAME_MAX - 1);
    const char *fmt = pt_request_query(req, "format");
    if (fmt && pt_format_parse(fmt, &imp.format) != 0)
        pt_errors_add(&req->errors, NULL, 0, "query.format",
                      "unknown format '%.32s'; one of auto, extxyz, xyz, qm9, ase-db", fmt);
    static const char *const key_params[2] = {"forces_key", "stress_key"};
    static const char *const key_fields[2] = {"query.forces_key", "query.stress_key"};
    const char **keys[2] = {&imp.forces_key, &imp.stress_key};
    for (int k = 0; k < 2; k++) {
        *keys[k] = pt_request_query(req, key_params[k]);
        if (*keys[k] && (!**keys[k] || strlen(*keys[k]) > 200))
            pt_errors_add(&req->errors, NULL, 0, key_fields[k],
                          "must name an entry of the database (1 to 200 characters)");
    }
    const char *skip = pt_request_query(req, "skip_invalid");
    if (skip && parse_bool(skip, &imp.skip_invalid) != 0)
        pt_errors_add(&req->errors, NULL, 0, "query.skip_invalid", "must be true or false, got '%.32s'", skip);
    const char *key = pt_request_header(req, "Idempotency-Key");
    if (key && !pt_api_idempotency_key_ok(key))
        pt_errors_add(&req->errors, NULL, 0, "header.Idempotency-Key", "must be 1 to %d printable characters",
                      PT_STORE_KEY_MAX - 1);
    if (req->errors.total) return pt_request_problem(req);
    if (!req->body_path || req->body_size == 0)
        return pt_problem(422, "the request body is empty: send the dataset file as the body "
                               "(curl --data-binary @FILE)");
    pt_response r = {0, NULL};
    if (pt_api_disk_check(app, &r) != 0) return r;
    char ingest_hash[PT_STORE_HASH_HEX], request_hash[PT_STORE_HASH_HEX];
    pt_api_ingest_hash(req->body_sha256, &imp, ingest_hash);
    imp.content_sha256 = req->body_sha256;
    imp.ingest_hash = ingest_hash;
    /* an Idempotency-Key's request is the upload and its name */
    char basis[2 * PT_STORE_HASH_HEX + PT_STORE_NAME_MAX];
    int len = snprintf(basis, sizeof basis, "%s\n%s", ingest_hash, imp.name);
    pt_store_sha256_hex(basis, (size_t)len, request_hash);
    char err[256];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) return pt_api_no_store(err);
    pt_store_dataset row = {0};
    if (key) r = earlier_upload(s, &imp, key, request_hash);
    if (!r.status) r = import_upload(app, s, req, &imp, &row);
    if (key && (r.status == 200 || r.status == 201)) {
        int rc = pt_store_dataset_key_put(s, imp.owner, key, request_hash, row.id);
        if (rc == PT_STORE_CONFLICT) {
            /* the key was taken by a request running at the same time */
            pt_response_destroy(&r);
            r = earlier_upload(s, &imp, key, request_hash);
        } else if (rc != PT_STORE_OK) {
            pt_response_destroy(&r);
            r = pt_api_store_problem(s, rc, "cannot record the Idempotency-Key");
        }
    }
    pt_store_dataset_clear(&row);
    pt_app_store_release(app, s);
    return r;
}

/* ---- GET list / one, DELETE -------------------------------------------------------- */

/* An upload still being ingested, shaped like a stored dataset: status
 * "ingesting", what is known so far, and its progress. */
static json_t *ingesting_json(const pt_app_task *t)
{
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:o,s:I,s:I,s:I,s:n,s:n}", "id", t->id, "name", t->name,
                          "format", "auto", "status", "ingesting", "created_at",
                          pt_api_time(t->started_us), "n_structures", (json_int_t)t->structures,
                          "n_atoms", (json_int_t)0, "bytes", (json_int_t)t->total, "sha256", "report");
    if (o) json_object_set_new(o, "progress", pt_app_task_progress_json(t));
    return o;
}

static int ingesting(const pt_app_task *t)
{
    return t->state == PT_TASK_RUNNING && !strcmp(t->phase, "ingest");
}

pt_response pt_api_datasets_list(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    long limit = pt_request_query_long(req, "limit", PT_STORE_PAGE_DEFAULT, 1, PT_STORE_PAGE_MAX);
    if (req->errors.total) return pt_request_problem(req);
    char err[256];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) return pt_api_no_store(err);
    pt_store_dataset_page page;
    int rc = pt_store_dataset_list(s, pt_app_owner(req), (int)limit, pt_request_query(req, "page_token"), &page);
    pt_response r;
    if (rc != PT_STORE_OK) {
        r = pt_api_store_problem(s, rc, "cannot list datasets");
    } else {
        json_t *items = json_array();
        /* uploads in flight come first, on the first page */
        pt_app_task tasks[PT_APP_TASKS_MAX];
        size_t nt = pt_request_query(req, "page_token")
                        ? 0 : pt_app_tasks_since(app, pt_app_owner(req), 0, tasks, PT_APP_TASKS_MAX);
        for (size_t i = nt; items && i-- > 0;)
            if (ingesting(&tasks[i])) json_array_append_new(items, ingesting_json(&tasks[i]));
        for (size_t i = 0; items && i < page.n; i++) json_array_append_new(items, pt_api_dataset_json(&page.items[i]));
        r = pt_response_json(200, json_pack("{s:o,s:o}", "datasets", items, "next_page_token",
                                            page.next_token[0] ? json_string(page.next_token) : json_null()));
        pt_store_dataset_page_clear(&page);
    }
    pt_app_store_release(app, s);
    return r;
}

pt_response pt_api_datasets_get(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    const char *id = pt_request_param(req, "id");
    char err[256];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) return pt_api_no_store(err);
    pt_store_dataset d = {0};
    int rc = pt_store_dataset_get(s, pt_app_owner(req), id, &d);
    pt_app_task task;
    int has_task = pt_app_task_get(app, pt_app_owner(req), id, &task) == 0 &&
                   task.state == PT_TASK_RUNNING;
    pt_response r;
    if ((rc == PT_STORE_NOT_FOUND || rc == PT_STORE_INVALID) && has_task && ingesting(&task)) {
        r = pt_response_json(200, ingesting_json(&task));
    } else if (rc == PT_STORE_NOT_FOUND || rc == PT_STORE_INVALID) {
        r = pt_api_not_found("dataset", id);
    } else if (rc != PT_STORE_OK) {
        r = pt_api_store_problem(s, rc, "cannot read the dataset");
    } else {
        json_t *o = pt_api_dataset_json(&d);
        /* a packing report being planned on it right now */
        if (o && has_task) json_object_set_new(o, "progress", pt_app_task_progress_json(&task));
        r = pt_response_json_etag(200, o, pt_request_header(req, "If-None-Match"));
    }
    pt_store_dataset_clear(&d);
    pt_app_store_release(app, s);
    return r;
}

pt_response pt_api_datasets_delete(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    const char *id = pt_request_param(req, "id");
    char err[256];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) return pt_api_no_store(err);
    pt_store_dataset removed = {0};
    int rc = pt_store_dataset_delete(s, pt_app_owner(req), id, &removed);
    pt_response r;
    if (rc == PT_STORE_OK) {
        char dir[PATH_MAX];
        if (pt_app_dataset_dir(app, removed.id, dir, sizeof dir) == 0) remove_dataset_files(dir);
        r = pt_response_empty(204);
    } else if (rc == PT_STORE_NOT_FOUND || rc == PT_STORE_INVALID) {
        r = pt_api_not_found("dataset", id);
    } else if (rc == PT_STORE_IN_USE) {
        r = pt_problem(409, "dataset %s is used by a job that has not ended; cancel it or wait for it to end", id);
    } else {
        r = pt_api_store_problem(s, rc, "cannot delete the dataset");
    }
    pt_store_dataset_clear(&removed);
    pt_app_store_release(app, s);
    return r;
}

/* ---- GET /v1/datasets/events ----------------------------------------------------------- */

typedef struct events_ctx {
    pt_app *app;
    char owner[PT_STORE_OWNER_MAX];
} events_ctx;

/* Each task changed after `after`, as one event named by its state:
 * "progress" while it runs, then "done" or "failed". */
static int events_source(void *ctx, uint64_t after, pt_sse_writer *w)
{
    events_ctx *c = ctx;
    pt_app_task tasks[PT_APP_TASKS_MAX];
    size_t n = pt_app_tasks_since(c->app, c->owner, after, tasks, PT_APP_TASKS_MAX);
    for (size_t i = 0; i < n; i++) {
        const pt_app_task *t = &tasks[i];
        json_t *data = json_pack("{s:s,s:s,s:s,s:o}", "dataset", t->id, "name", t->name, "state",
                                 pt_app_task_state_name(t->state), "progress",
                                 pt_app_task_progress_json(t));
        if (data && t->state == PT_TASK_FAILED) json_object_set_new(data, "detail", json_string(t->message));
        const char *event = t->state == PT_TASK_RUNNING ? "progress"
                            : t->state == PT_TASK_DONE  ? "done" : "failed";
        int rc = data ? pt_sse_send_json(w, t->seq, event, data) : -1;
        json_decref(data);
        if (rc != 0) break;
    }
    return PT_SSE_OPEN;
}

pt_response pt_api_datasets_events(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    long heartbeat = pt_request_query_long(req, "heartbeat_ms", 15000, 100, 120000);
    if (req->errors.total) return pt_request_problem(req);
    events_ctx *c = calloc(1, sizeof(*c));
    if (!c) return pt_problem(500, "out of memory");
    c->app = app;
    snprintf(c->owner, sizeof c->owner, "%s", pt_app_owner(req));
    pt_sse_config cfg = {.watch = &app->datasets_watch, .source = events_source, .ctx = c,
                         .free_ctx = free, .heartbeat_ms = (int)heartbeat, .retry_ms = 2000};
    return pt_sse_response(req, &cfg);
}
