/* routes.h — server/api, the REST API v1 of packtrain: its handlers, the one
 * table that lists them (api.c), and the small helpers they share.
 *
 * The room holds what the API means: HTTP requests in, jobs and datasets of
 * the store out, the submission check (job_check.c).  It uses the app
 * (server/app.h: store pool, scheduler notifications, watches), the HTTP
 * toolkit (server/http), the store and the engine's config and plan; it
 * starts nothing itself and is used only by server/serve.c and the CLI.
 *
 * Every handler takes the pt_app as its ctx, acts for pt_app_owner(req),
 * takes a store handle from the app's pool for the duration of the call, and
 * answers JSON or an RFC 9457 problem.  The routes and their documents are
 * described in api/openapi.yaml; the order of registration matters only for
 * the static catch-all, which the table lists last. */
#ifndef PT_ROUTES_H
#define PT_ROUTES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/data/reader.h"
#include "server/app.h"
#include "server/http/offload.h"
#include "server/http/request.h"
#include "server/http/response.h"
#include "store/store.h"

/* Registers every route of the table in api.c on app's router (the
 * static files only when app->has_web).  -1 with a message on failure. */
int pt_api_register(pt_app *app, char *err, size_t errlen);

/* The handlers of the table, by file; ctx is the pt_app. */
typedef pt_response pt_api_handler(pt_request *req, void *ctx);
pt_api_handler pt_api_healthz, pt_api_readyz, pt_api_prometheus, pt_api_openapi, pt_api_index,
    pt_api_static;                                                    /* routes_system.c */
pt_api_handler pt_api_datasets_upload, pt_api_datasets_list, pt_api_datasets_get,
    pt_api_datasets_delete, pt_api_datasets_events;                   /* routes_datasets.c */
pt_api_handler pt_api_dataset_packing;                                /* routes_packing.c */
pt_api_handler pt_api_jobs_create, pt_api_jobs_list, pt_api_jobs_get, pt_api_jobs_delete,
    pt_api_jobs_cancel;                                               /* routes_jobs.c */
pt_api_handler pt_api_job_metrics, pt_api_job_events, pt_api_job_model; /* routes_job_data.c */
pt_api_handler pt_api_job_logs, pt_api_job_log_stream;               /* routes_job_logs.c */
pt_api_handler pt_api_job_predict;                                    /* routes_predict.c */

struct pt_job_config;
/* Whether a valid config can train on a ready dataset (job_check.c: the
 * engine's pt_run_check on the opened dataset).  Adds located errors
 * ("target", "batching.max_nodes", "backend.device_memory_mb", ...) to errs. */
void pt_job_check_dataset(pt_app *app, const struct pt_job_config *cfg, const pt_store_dataset *ds,
                          pt_errors *errs);

/* One dataset file to ingest into a new dataset (the upload route and
 * `serve --demo`). */
typedef struct pt_dataset_import {
    const char *owner;
    const char *name;          /* also the file name in error messages */
    pt_format format;          /* PT_FORMAT_AUTO detects it */
    int skip_invalid;
    const char *forces_key;    /* ASE database: the forces (ase_db.h), NULL: "forces" */
    const char *stress_key;    /* ASE database: the stress, NULL: "stress" */
    uint64_t source_bytes;     /* size of the file as sent */
    pt_request *req;           /* the upload's request: the ingest stops when it is given
                                  up (pt_request_cancelled); NULL: never */
    const char *content_sha256;   /* of the file as sent; NULL: not known */
    const char *ingest_hash;      /* pt_api_ingest_hash(); NULL: no de-duplication */
} pt_dataset_import;

/* Ingests `src` into data_dir/datasets/ID/data.ptd and records the dataset,
 * within app->opt.limits (upload limits while it streams, the owner's
 * storage quota before recording).  0 with *out filled and *status 201,
 * or *status 200 and *out the owner's dataset of the same ingest_hash
 * (stored before, perhaps by a request running at the same time); -1 with
 * errs filled and *status the HTTP status (422 when the file is not a valid dataset,
 * 413 past an upload limit, 429 past the owner's storage quota, 5xx
 * otherwise; *quota then holds the 429 to send).  Nothing is left on disk
 * or in the database on failure. */
int pt_app_dataset_import(pt_app *app, pt_store *s, const char *src, const pt_dataset_import *imp,
                          pt_store_dataset *out, pt_errors *errs, int *status, pt_response *quota);
/* The identity of an upload: the SHA-256 of the content and of every
 * ingest option that changes what is stored (format, skip_invalid, forces
 * and stress keys), as hex into out. */
void pt_api_ingest_hash(const char *content_sha256, const pt_dataset_import *imp, char out[PT_STORE_HASH_HEX]);

/* Adds the dataset "demo-qm9" of owner "local" from `path` unless it exists. */
int pt_app_load_demo(pt_app *app, const char *path, char *err, size_t errlen);

/* Owner quotas (quota.c; app->opt.limits).  Each returns 0 when within,
 * or -1 with *r a 429 (Retry-After) saying what to free, or the store's
 * problem.  Call the *_check functions again under app->quota_mu just
 * before recording the row. */
/* Bytes of the owner's stored dataset files. */
int pt_quota_storage_used(pt_app *app, pt_store *s, const char *owner, uint64_t *bytes);
/* adding 0: is the owner below its quota at all?  Otherwise: would
 * `adding` more bytes fit? */
int pt_quota_storage_check(pt_app *app, pt_store *s, const char *owner, uint64_t adding, pt_response *r);
/* May the owner have one more unfinished job? */
int pt_quota_jobs_check(pt_app *app, pt_store *s, const char *owner, pt_response *r);

/* Full disk (issue 17 F6).  pt_api_disk_check: 0, or -1 with *r a 507
 * when the data directory is below the operator's minimum of free space
 * (pt_app_disk_low; /readyz says the same), so nothing new is accepted
 * that would need room.  pt_api_no_space: 1 when an error text is a full
 * disk's (ENOSPC, EDQUOT), whose answer is 507, not 500 or 422. */
int pt_api_disk_check(pt_app *app, pt_response *r);
int pt_api_no_space(const char *text);
pt_response pt_api_disk_full(const char *what, const char *why);

/* pt_router_add, also recording the route in app->routes. */
int pt_api_route_add(pt_app *app, const pt_route *route, char *err, size_t errlen);

/* An Idempotency-Key header: 1 to PT_STORE_KEY_MAX - 1 printable characters. */
int pt_api_idempotency_key_ok(const char *key);

/* HTTP status for a store status: NOT_FOUND 404, INVALID 400, CONFLICT,
 * IN_USE and ILLEGAL_TRANSITION 409, IDEMPOTENCY_MISMATCH 422, BUSY 503,
 * anything else 500. */
int pt_api_status_of(int store_status);
/* A problem for a failed store call: the mapped status, and the store's
 * message as detail prefixed by `what` ("cannot read job job_1: ...").  A
 * 503 carries Retry-After. */
pt_response pt_api_store_problem(pt_store *s, int store_status, const char *what);
/* 503 when no store handle could be had. */
pt_response pt_api_no_store(const char *why);
/* 404 worded the same for missing and foreign rows. */
pt_response pt_api_not_found(const char *kind, const char *id);

/* The state of job `id` of the request's owner: 0, or -1 with *r the answer
 * (404 for a missing or foreign job, 503 without a store handle, ...). */
int pt_api_job_state(pt_app *app, pt_request *req, const char *id, pt_job_state *state,
                     pt_response *r);

/* "2024-05-01T12:00:00.123Z" for Unix microseconds; JSON null for 0. */
json_t *pt_api_time(int64_t us);
/* A real or JSON null for NaN. */
json_t *pt_api_real(double v);
/* Parses a stored JSON document; a JSON null when absent or broken. */
json_t *pt_api_parse_doc(const char *text);

/* The units of the metric fields present in objs[0..n) (steps, epochs or a
 * result): {"val_forces_mae":"eV/Å","val_mae":"eV",...}, for a job trained
 * on forces or stress (whose energies are eV, ASE's units); NULL for an
 * energy-only job, whose errors are in its target's own units. */
json_t *pt_api_metric_units(json_t *const *objs, size_t n);
/* ... with, for a multi-task job (objs with "heads"), "heads": {KEY: unit}
 * for the targets whose unit is known (pt_api_target_unit). */

/* The engine's progress of the app's task `id` (an upload's ingest, a
 * packing report) for the app's registry (pt_app_task_progress), at most
 * every 0.2 s; ts holds what the sink points to and must outlive its use:
 *   pt_api_task_sink ts;
 *   pt_progress sink = pt_api_task_progress(&ts, app, id); */
typedef struct pt_api_task_sink {
    pt_app *app;
    const char *id;
} pt_api_task_sink;
pt_progress pt_api_task_progress(pt_api_task_sink *ts, pt_app *app, const char *id);

/* The unit of a target key when known (QM9's keys, "energy"), else NULL. */
const char *pt_api_target_unit(const char *key);

/* Resource documents, as the OpenAPI schemas Dataset, Job and Transition
 * describe them. */
json_t *pt_api_dataset_json(const pt_store_dataset *d);
json_t *pt_api_job_json(const pt_app *app, const pt_store_job *j, const pt_store_transition_list *transitions);

/* The embedded OpenAPI document (api/openapi.json, see api/gen_openapi.py),
 * compact JSON, *len bytes; NULL when memory ran out joining its parts. */
const char *pt_openapi_doc(size_t *len);

#endif
