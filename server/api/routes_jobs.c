/* routes_jobs.c — submitting, listing, reading, deleting and cancelling jobs:
 *   POST   /v1/jobs                validate fully, then queue (Idempotency-Key)
 *   GET    /v1/jobs                ?state=&dataset=&tag=&name=&limit=&page_token=, newest first
 *   GET    /v1/jobs/{id}           ETag, If-None-Match -> 304, ?wait=S long-poll
 *   DELETE /v1/jobs/{id}           a final job, with its files
 *   POST   /v1/jobs/{id}/cancel
 * The job's data (metrics, events, logs, model, predictions) is served by
 * routes_job_data.c.
 *
 * A submission is checked completely before anything is stored: the config
 * through the engine's validator (every problem with its JSON path), the
 * dataset (exists for this owner, ready), and the fit between the two
 * (pt_job_check_dataset: the engine's plan and memory plan).  The stored
 * config is the validator's canonical text, so two bodies that mean the same
 * job are the same job for Idempotency-Key purposes, and the scheduler hands
 * exactly that text to the worker. */
#include "server/api/routes.h"

#include <ctype.h>
#include <pthread.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "engine/train/config.h"

#define WAIT_MAX_S 300
#define ERRORS_KEPT 50
#define NAME_MAX_CHARS 200
#define TAGS_MAX 32
#define TAG_MAX_CHARS 64
#define METADATA_MAX_BYTES 16384

/* A submission: the job configuration plus what is not part of it (the
 * dataset, and the name, tags and metadata a user files the job under). */
typedef struct submission {
    const char *dataset;
    const char *name;
    char *tags_json, *metadata_json;   /* compact JSON, heap */
} submission;

/* ---- POST /v1/jobs ------------------------------------------------------------- */

/* Printable text without control characters (names, tags). */
static int plain_text(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return 0;
    return 1;
}

static int tag_ok(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n > TAG_MAX_CHARS) return 0;
    for (; *t; t++)
        if (!isalnum((unsigned char)*t) && !strchr("_.:=/-", *t)) return 0;
    return 1;
}

static void read_name(const json_t *v, submission *sub, pt_errors *errs)
{
    if (!v || json_is_null(v)) return;
    if (!json_is_string(v) || !json_string_length(v) || json_string_length(v) > NAME_MAX_CHARS ||
        !plain_text(json_string_value(v)))
        pt_errors_add(errs, NULL, 0, "name", "must be a string of 1 to %d characters without control characters",
                      NAME_MAX_CHARS);
    else sub->name = json_string_value(v);
}

static void read_tags(const json_t *v, submission *sub, pt_errors *errs)
{
    if (!v || json_is_null(v)) return;
    if (!json_is_array(v) || json_array_size(v) > TAGS_MAX) {
        pt_errors_add(errs, NULL, 0, "tags", "must be an array of at most %d tags", TAGS_MAX);
        return;
    }
    size_t i;
    const json_t *t;
    int ok = 1;
    json_array_foreach(v, i, t) {
        char field[32];
        snprintf(field, sizeof field, "tags[%zu]", i);
        if (!json_is_string(t) || !tag_ok(json_string_value(t))) {
            pt_errors_add(errs, NULL, 0, field, "must be 1 to %d letters, digits or _ . : = / -", TAG_MAX_CHARS);
            ok = 0;
            continue;
        }
        for (size_t k = 0; k < i; k++)
            if (json_equal(json_array_get(v, k), t)) {
                pt_errors_add(errs, NULL, 0, field, "repeats tags[%zu] (\"%s\")", k, json_string_value(t));
                ok = 0;
            }
    }
    if (ok) sub->tags_json = json_dumps(v, JSON_COMPACT);
}

static void read_metadata(const json_t *v, submission *sub, pt_errors *errs)
{
    if (!v || json_is_null(v)) return;
    if (!json_is_object(v)) {
        pt_errors_add(errs, NULL, 0, "metadata", "must be a JSON object (free-form: commit, pipeline, notes...)");
        return;
    }
    char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
    if (text && strlen(text) > METADATA_MAX_BYTES) {
        pt_errors_add(errs, NULL, 0, "metadata", "is %zu bytes as compact JSON, at most %d allowed", strlen(text),
                      METADATA_MAX_BYTES);
        free(text);
        return;
    }
    sub->metadata_json = text;
}

/* "dataset", "name", "tags" and "metadata" belong to the submission, not to
 * the job's configuration: taken out before the validator (which rejects
 * keys it does not know) sees the rest. */
static json_t *split_submission(const json_t *body, submission *sub, pt_errors *errs)
{
    json_t *cfg = json_deep_copy(body);
    if (!cfg) return NULL;
    const json_t *d = json_object_get(body, "dataset");
    if (!d || (json_is_string(d) && !json_string_length(d)))
        pt_errors_add(errs, NULL, 0, "dataset", "is required: the id of an uploaded dataset (POST /v1/datasets)");
    else if (!json_is_string(d)) pt_errors_add(errs, NULL, 0, "dataset", "must be a string (a dataset id)");
    else sub->dataset = json_string_value(d);
    read_name(json_object_get(body, "name"), sub, errs);
    read_tags(json_object_get(body, "tags"), sub, errs);
    read_metadata(json_object_get(body, "metadata"), sub, errs);
    json_object_del(cfg, "dataset");
    json_object_del(cfg, "name");
    json_object_del(cfg, "tags");
    json_object_del(cfg, "metadata");
    return cfg;
}

static void check_dataset_row(pt_store *s, const char *owner, const char *id, pt_store_dataset *ds, int *found,
                              pt_errors *errs)
{
    *found = 0;
    int rc = pt_store_dataset_get(s, owner, id, ds);
    if (rc == PT_STORE_NOT_FOUND || rc == PT_STORE_INVALID) {
        pt_errors_add(errs, NULL, 0, "dataset", "there is no dataset '%.64s'", id);
    } else if (rc != PT_STORE_OK) {
        pt_errors_add(errs, NULL, 0, "dataset", "cannot read dataset '%.64s': %s", id, pt_store_errmsg(s));
    } else if (strcmp(ds->status, "ready") != 0) {
        pt_errors_add(errs, NULL, 0, "dataset", "dataset '%.64s' is not ready (status %s)", id, ds->status);
    } else {
        *found = 1;
    }
}

static pt_response job_created(pt_app *app, pt_store_job *job, int created)
{
    pt_app_notify_scheduler(app);
    pt_app_jobs_changed(app);
    pt_response r = pt_response_json(created ? 201 : 200, pt_api_job_json(app, job, NULL));
    char loc[96];
    snprintf(loc, sizeof loc, "/v1/jobs/%s", job->id);
    pt_response_header(&r, "Location", loc);
    return r;
}

static pt_response submit(pt_app *app, pt_request *req, pt_store *s)
{
    const char *owner = pt_app_owner(req);
    const char *key = pt_request_header(req, "Idempotency-Key");
    if (key && !pt_api_idempotency_key_ok(key))
        return pt_problem(400, "Idempotency-Key must be 1..%d printable characters", PT_STORE_KEY_MAX - 1);
    if (!json_is_object(req->json)) return pt_problem(422, "the job must be a JSON object");
    /* the quota counts new jobs; a retry under a known Idempotency-Key
     * creates none and is answered as before */
    int known = 0, krc = key ? pt_store_idempotency_known(s, owner, key, &known) : PT_STORE_OK;
    if (krc != PT_STORE_OK) return pt_api_store_problem(s, krc, "cannot read the Idempotency-Key");
    pt_response r;
    if (!known && pt_api_disk_check(app, &r) != 0) return r;   /* a job writes checkpoints and a model */
    if (!known && pt_quota_jobs_check(app, s, owner, &r) != 0) return r;   /* before any work */
    pt_errors errs;
    pt_errors_init(&errs, ERRORS_KEPT);
    submission sub = {0};
    json_t *cfg_json = split_submission(req->json, &sub, &errs);
    const char *dataset_id = sub.dataset;
    if (!cfg_json) {
        pt_errors_close(&errs);
        return pt_problem(500, "out of memory");
    }
    pt_job_config cfg;
    int cfg_ok = pt_job_config_from_json(&cfg, cfg_json, NULL, &errs) == 0;
    json_decref(cfg_json);
    pt_store_dataset ds = {0};
    int found = 0;
    if (dataset_id) check_dataset_row(s, owner, dataset_id, &ds, &found, &errs);
    if (found && cfg_ok) pt_job_check_dataset(app, &cfg, &ds, &errs);
    pt_store_dataset_clear(&ds);
    if (errs.total) {
        r = pt_problem_errors(422, &errs, "the job is not valid: %zu problem%s", errs.total,
                              errs.total == 1 ? "" : "s");
        pt_errors_close(&errs);
        free(sub.tags_json);
        free(sub.metadata_json);
        return r;
    }
    pt_errors_close(&errs);
    /* the canonical text: what the scheduler hands the worker, untouched */
    char *text = pt_job_config_dump(&cfg);
    if (!text) {
        free(sub.tags_json);
        free(sub.metadata_json);
        return pt_problem(500, "out of memory");
    }
    pt_store_job_request jr = {.owner = owner, .dataset_id = dataset_id, .config_json = text, .idempotency_key = key,
                               .name = sub.name, .tags_json = sub.tags_json, .metadata_json = sub.metadata_json};
    pt_store_job job = {0};
    int created = 0, rc;
    pthread_mutex_lock(&app->quota_mu);
    if (!known && pt_quota_jobs_check(app, s, owner, &r) != 0) {
        pthread_mutex_unlock(&app->quota_mu);
        free(text);
        free(sub.tags_json);
        free(sub.metadata_json);
        return r;
    }
    rc = pt_store_job_create(s, &jr, &job, &created);
    pthread_mutex_unlock(&app->quota_mu);
    free(text);
    free(sub.tags_json);
    free(sub.metadata_json);
    if (rc == PT_STORE_OK) {
        r = job_created(app, &job, created);
    } else if (rc == PT_STORE_IDEMPOTENCY_MISMATCH) {
        r = pt_problem(422, "Idempotency-Key '%.64s' was already used for a different job; use a new key "
                            "for a different request", key);
    } else if (rc == PT_STORE_NOT_FOUND || rc == PT_STORE_CONFLICT || rc == PT_STORE_INVALID) {
        /* The dataset went away or changed between the check and the insert. */
        r = pt_problem(422, "the job cannot be queued: %s", pt_store_errmsg(s));
    } else {
        r = pt_api_store_problem(s, rc, "cannot queue the job");
    }
    pt_store_job_clear(&job);
    return r;
}

pt_response pt_api_jobs_create(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    char err[256];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) return pt_api_no_store(err);
    pt_response r = submit(app, req, s);
    pt_app_store_release(app, s);
    return r;
}

/* ---- GET /v1/jobs ------------------------------------------------------------------ */

pt_response pt_api_jobs_list(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    long limit = pt_request_query_long(req, "limit", PT_STORE_PAGE_DEFAULT, 1, PT_STORE_PAGE_MAX);
    /* ?state= (and ?status=, its older name) */
    const char *state = pt_request_query(req, "state"), *status = pt_request_query(req, "status");
    if (state && status && strcmp(state, status))
        pt_errors_add(&req->errors, NULL, 0, "query.status", "is the older name of query.state; give one of them");
    if (!state) state = status;
    pt_job_state st;
    if (state && pt_job_state_parse(state, &st) != 0)
        pt_errors_add(&req->errors, NULL, 0, status && state == status ? "query.status" : "query.state",
                      "unknown state '%.32s'; one of queued, running, cancelling, succeeded, failed, cancelled, "
                      "stopped", state);
    pt_store_job_filter filter = {.state = state, .dataset_id = pt_request_query(req, "dataset"),
                                  .name = pt_request_query(req, "name"), .tag = pt_request_query(req, "tag")};
    if (filter.tag && !tag_ok(filter.tag))
        pt_errors_add(&req->errors, NULL, 0, "query.tag", "must be 1 to %d letters, digits or _ . : = / -",
                      TAG_MAX_CHARS);
    if (req->errors.total) return pt_request_problem(req);
    char err[256];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) return pt_api_no_store(err);
    pt_store_job_page page;
    int rc = pt_store_job_list(s, pt_app_owner(req), &filter, (int)limit, pt_request_query(req, "page_token"), &page);
    pt_response r;
    if (rc != PT_STORE_OK) {
        r = pt_api_store_problem(s, rc, "cannot list jobs");
    } else {
        json_t *items = json_array();
        for (size_t i = 0; items && i < page.n; i++)
            json_array_append_new(items, pt_api_job_json(app, &page.items[i], NULL));
        r = pt_response_json(200, json_pack("{s:o,s:o}", "jobs", items, "next_page_token",
                                            page.next_token[0] ? json_string(page.next_token) : json_null()));
        pt_store_job_page_clear(&page);
    }
    pt_app_store_release(app, s);
    return r;
}

/* ---- GET /v1/jobs/{id} --------------------------------------------------------------- */

static pt_response job_document(pt_app *app, pt_store *s, const char *owner, const char *id, const char *etag)
{
    pt_store_job job = {0};
    pt_store_transition_list tl = {0};
    int rc = pt_store_job_get(s, owner, id, &job);
    if (rc == PT_STORE_OK) rc = pt_store_job_transitions(s, owner, id, &tl);
    pt_response r;
    if (rc == PT_STORE_NOT_FOUND) r = pt_api_not_found("job", id);
    else if (rc != PT_STORE_OK) r = pt_api_store_problem(s, rc, "cannot read the job");
    else {
        r = pt_response_json(200, pt_api_job_json(app, &job, &tl));
        pt_response_header(&r, "ETag", etag);
        pt_response_header(&r, "Cache-Control", "no-cache");
    }
    pt_store_transition_list_clear(&tl);
    pt_store_job_clear(&job);
    return r;
}

/* The ETag is the job's version: it moves with every state or progress
 * change, so a client holding it can wait for the next one. */
pt_response pt_api_jobs_get(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    const char *id = pt_request_param(req, "id");
    long wait = pt_request_query_long(req, "wait", 0, 0, WAIT_MAX_S);
    if (req->errors.total) return pt_request_problem(req);
    /* Read the watch before the store, so a change landing in between still
     * ends the wait below. */
    uint64_t seen = pt_watch_version(&app->jobs_watch);
    char err[256];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) return pt_api_no_store(err);
    int64_t version = 0;
    pt_job_state state;
    const char *owner = pt_app_owner(req);
    int rc = pt_store_job_version(s, owner, id, &version, &state);
    pt_response r;
    char etag[64];
    pt_etag_version((uint64_t)version, etag, sizeof etag);
    const char *inm = pt_request_header(req, "If-None-Match");
    if (rc == PT_STORE_NOT_FOUND || rc == PT_STORE_INVALID) {
        r = pt_api_not_found("job", id);
    } else if (rc != PT_STORE_OK) {
        r = pt_api_store_problem(s, rc, "cannot read the job");
    } else if (inm && pt_etag_matches(inm, etag)) {
        if (wait > 0 && !pt_request_wait_expired(req)) {
            pt_app_store_release(app, s);
            return pt_request_wait(req, &app->jobs_watch, seen, (int)wait * 1000);
        }
        r = pt_response_not_modified(etag);
    } else {
        r = job_document(app, s, owner, id, etag);
    }
    pt_app_store_release(app, s);
    return r;
}

/* ---- DELETE /v1/jobs/{id} ------------------------------------------------------------------ */

/* Only a job that has ended: its row (transitions, metrics, checkpoint
 * records and idempotency keys go with it) and then its directory (model,
 * checkpoints, logs).  A running job is refused: cancelling it first keeps
 * the worker from writing into a directory that is going away. */
pt_response pt_api_jobs_delete(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    const char *id = pt_request_param(req, "id");
    char err[256];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) return pt_api_no_store(err);
    pt_store_job removed = {0};
    int rc = pt_store_job_delete(s, pt_app_owner(req), id, &removed);
    pt_response r;
    if (rc == PT_STORE_OK) {
        char dir[PATH_MAX];
        if (pt_app_job_dir(app, removed.id, dir, sizeof dir) == 0 && pt_app_remove_tree(dir, err, sizeof err) != 0)
            r = pt_problem(500, "job %s was deleted, but its files were not: %s", id, err);
        else r = pt_response_empty(204);
        pt_app_jobs_changed(app);
    } else if (rc == PT_STORE_NOT_FOUND || rc == PT_STORE_INVALID) {
        r = pt_api_not_found("job", id);
    } else if (rc == PT_STORE_CONFLICT) {
        pt_store_job cur = {0};
        const char *st = pt_store_job_get(s, pt_app_owner(req), id, &cur) == PT_STORE_OK
                             ? pt_job_state_name(cur.state) : "not ended";
        r = pt_problem(409, "job %s is %s and cannot be deleted until it ends; cancel it first (POST "
                            "/v1/jobs/%s/cancel), then delete it", id, st, id);
        pt_store_job_clear(&cur);
    } else {
        r = pt_api_store_problem(s, rc, "cannot delete the job");
    }
    pt_store_job_clear(&removed);
    pt_app_store_release(app, s);
    return r;
}

/* ---- POST /v1/jobs/{id}/cancel ----------------------------------------------------------- */

pt_response pt_api_jobs_cancel(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    const char *id = pt_request_param(req, "id");
    const char *owner = pt_app_owner(req);
    char err[256], reason[PT_STORE_REASON_MAX];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) return pt_api_no_store(err);
    snprintf(reason, sizeof reason, "cancelled by %s through the API", owner);
    pt_store_job job = {0};
    int rc = pt_store_job_cancel(s, owner, id, reason, &job);
    pt_response r;
    if (rc == PT_STORE_OK) {
        pt_app_notify_scheduler(app);
        pt_app_jobs_changed(app);
        r = pt_response_json(job.state == PT_JOB_CANCELLING ? 202 : 200, pt_api_job_json(app, &job, NULL));
    } else if (rc == PT_STORE_NOT_FOUND || rc == PT_STORE_INVALID) {
        r = pt_api_not_found("job", id);
    } else if (rc == PT_STORE_ILLEGAL_TRANSITION) {
        pt_store_job cur = {0};
        const char *st = pt_store_job_get(s, owner, id, &cur) == PT_STORE_OK ? pt_job_state_name(cur.state) : "ended";
        r = pt_problem(409, "job %s has already ended (%s); only queued or running jobs can be cancelled", id, st);
        pt_store_job_clear(&cur);
    } else {
        r = pt_api_store_problem(s, rc, "cannot cancel the job");
    }
    pt_store_job_clear(&job);
    pt_app_store_release(app, s);
    return r;
}
