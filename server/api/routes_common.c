/* routes_common.c — what every v1 handler shares: store statuses mapped to
 * HTTP problems, times and numbers in JSON, and the Dataset and Job
 * documents (their schemas are in api/openapi.yaml). */
#include "server/api/routes.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int pt_api_route_add(pt_app *app, const pt_route *route, char *err, size_t errlen)
{
    if (app->n_routes >= PT_APP_ROUTES_MAX) {
        snprintf(err, errlen, "more than %d routes", PT_APP_ROUTES_MAX);
        return -1;
    }
    if (pt_router_add(&app->router, route, err, errlen) != 0) return -1;
    pt_app_route *r = &app->routes[app->n_routes++];
    snprintf(r->method, sizeof r->method, "%s", route->method);
    snprintf(r->pattern, sizeof r->pattern, "%s", route->pattern);
    return 0;
}

int pt_api_idempotency_key_ok(const char *key)
{
    size_t n = strlen(key);
    if (n == 0 || n >= PT_STORE_KEY_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isprint((unsigned char)key[i])) return 0;
    return 1;
}

int pt_api_status_of(int store_status)
{
    switch (store_status) {
    case PT_STORE_OK: return 200;
    case PT_STORE_NOT_FOUND: return 404;
    case PT_STORE_INVALID: return 400;
    case PT_STORE_CONFLICT:
    case PT_STORE_IN_USE:
    case PT_STORE_ILLEGAL_TRANSITION: return 409;
    case PT_STORE_IDEMPOTENCY_MISMATCH: return 422;
    case PT_STORE_BUSY: return 503;
    default: return 500;
    }
}

pt_response pt_api_store_problem(pt_store *s, int store_status, const char *what)
{
    int status = pt_api_status_of(store_status);
    pt_response r = pt_problem(status, "%s: %s", what, s ? pt_store_errmsg(s) : pt_store_status_name(store_status));
    if (status == 503) pt_response_header(&r, "Retry-After", "1");
    return r;
}

int pt_api_disk_check(pt_app *app, pt_response *r)
{
    uint64_t free_bytes;
    if (!pt_app_disk_low(app, &free_bytes)) return 0;
    *r = pt_problem(507, "the server's data directory has %.1f MiB free, below its minimum of %.1f MiB: "
                    "nothing new is accepted until space is freed (GET /readyz says the same)",
                    free_bytes / 1048576.0, app->opt.min_free_bytes / 1048576.0);
    return -1;
}

int pt_api_no_space(const char *text)
{
    return strstr(text, strerror(ENOSPC)) || strstr(text, strerror(EDQUOT));
}

pt_response pt_api_disk_full(const char *what, const char *why)
{
    return pt_problem(507, "%s: the server's disk is full (%s); nothing was kept, retry once space is freed", what,
                      why);
}

pt_response pt_api_no_store(const char *why)
{
    pt_response r = pt_problem(503, "the database is unavailable: %s", why);
    pt_response_header(&r, "Retry-After", "1");
    return r;
}

pt_response pt_api_not_found(const char *kind, const char *id)
{
    return pt_problem(404, "there is no %s '%.64s'", kind, id);
}

int pt_api_job_state(pt_app *app, pt_request *req, const char *id, pt_job_state *state,
                     pt_response *r)
{
    char err[256];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) {
        *r = pt_api_no_store(err);
        return -1;
    }
    int64_t version;
    int rc = pt_store_job_version(s, pt_app_owner(req), id, &version, state);
    if (rc == PT_STORE_NOT_FOUND || rc == PT_STORE_INVALID) *r = pt_api_not_found("job", id);
    else if (rc != PT_STORE_OK) *r = pt_api_store_problem(s, rc, "cannot read the job");
    pt_app_store_release(app, s);
    return rc == PT_STORE_OK ? 0 : -1;
}

json_t *pt_api_time(int64_t us)
{
    if (us <= 0) return json_null();
    time_t sec = (time_t)(us / 1000000);
    struct tm tm;
    gmtime_r(&sec, &tm);
    char buf[40];
    size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, sizeof buf - n, ".%03dZ", (int)((us % 1000000) / 1000));
    return json_string(buf);
}

json_t *pt_api_real(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

json_t *pt_api_parse_doc(const char *text)
{
    json_t *doc = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    return doc ? doc : json_null();
}

/* A forces job's metric fields and their units (engine/train/train.h). */
static const char *const metric_units[][2] = {
    {"val_mae", "eV"}, {"val_rmse", "eV"}, {"best_val_mae", "eV"}, {"best_val_rmse", "eV"},
    {"test_mae", "eV"}, {"test_rmse", "eV"},
    {"loss_forces", "(eV/Å)²"}, {"val_forces_mae", "eV/Å"}, {"val_forces_rmse", "eV/Å"},
    {"best_val_forces_mae", "eV/Å"}, {"best_val_forces_rmse", "eV/Å"},
    {"test_forces_mae", "eV/Å"}, {"test_forces_rmse", "eV/Å"}, {"test_forces_zero_mae", "eV/Å"},
    {"loss_stress", "(eV/Å³)²"}, {"val_stress_mae", "eV/Å³"}, {"val_stress_rmse", "eV/Å³"},
    {"best_val_stress_mae", "eV/Å³"}, {"test_stress_mae", "eV/Å³"}, {"test_stress_rmse", "eV/Å³"},
};

/* Units of the targets whose units are known: QM9's keys (its README:
 * energies and orbital energies in eV, mu in D, alpha in a0³, cv in
 * cal/(mol K), r2 in a0²), the usual name of an energy, and ASE's names of
 * per-atom energies and charges (atom-level targets; errors per atom). */
static const char *const target_units[][2] = {
    {"energy", "eV"},       {"energy_U0", "eV"}, {"energy_U", "eV"}, {"enthalpy_H", "eV"},
    {"free_energy", "eV"},  {"homo", "eV"},      {"lumo", "eV"},     {"gap", "eV"},
    {"zpve", "eV"},         {"mu", "D"},         {"alpha", "a0³"},   {"cv", "cal/(mol K)"},
    {"r2", "a0²"},          {"energies", "eV"},  {"charges", "e"},
};

const char *pt_api_target_unit(const char *key)
{
    for (size_t i = 0; key && i < sizeof target_units / sizeof target_units[0]; i++)
        if (!strcmp(target_units[i][0], key)) return target_units[i][1];
    return NULL;
}

/* {"heads": {KEY: unit}} for the targets of objs' "heads" whose unit is
 * known, or NULL. */
static json_t *head_units(json_t *const *objs, size_t n)
{
    json_t *u = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(objs[i], "heads"), key, v) {
            const char *unit = pt_api_target_unit(key);
            if (!unit) continue;
            if (!u) u = json_object();
            json_object_set_new(u, key, json_string(unit));
        }
    }
    return u;
}

static json_t *forces_units(json_t *const *objs, size_t n)
{
    const size_t rows = sizeof metric_units / sizeof metric_units[0];
    int forces = 0;
    for (size_t i = 0; i < n && !forces; i++)
        forces = json_object_get(objs[i], "loss_forces") || json_object_get(objs[i], "loss_stress") ||
                 json_object_get(objs[i], "test_forces_mae") ||
                 json_object_get(objs[i], "best_val_forces_mae") ||
                 json_object_get(objs[i], "best_val_stress_mae");
    if (!forces) return NULL;
    json_t *u = json_object();
    for (size_t r = 0; u && r < rows; r++)
        for (size_t i = 0; i < n; i++)
            if (json_object_get(objs[i], metric_units[r][0])) {
                json_object_set_new(u, metric_units[r][0], json_string(metric_units[r][1]));
                break;
            }
    return u;
}

json_t *pt_api_metric_units(json_t *const *objs, size_t n)
{
    json_t *u = forces_units(objs, n), *heads = head_units(objs, n);
    if (!heads) return u;
    if (!u) u = json_object();
    json_object_set_new(u, "heads", heads);
    return u;
}

json_t *pt_api_dataset_json(const pt_store_dataset *d)
{
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:o,s:I,s:I,s:I}", "id", d->id, "name", d->name, "format", d->format,
                          "status", d->status, "created_at", pt_api_time(d->created_at), "n_structures",
                          (json_int_t)d->n_structs, "n_atoms", (json_int_t)d->n_atoms, "bytes",
                          (json_int_t)d->bytes);
    if (o) json_object_set_new(o, "report", pt_api_parse_doc(d->report_json));
    if (o) json_object_set_new(o, "sha256", d->content_sha256[0] ? json_string(d->content_sha256) : json_null());
    return o;
}

/* Reasons come from the scheduler and the worker (an error of the engine,
 * a file it could not read): the client gets them without server paths. */
static json_t *reason_json(const char *text)
{
    char buf[PT_STORE_REASON_MAX];
    snprintf(buf, sizeof buf, "%s", text);
    pt_text_hide_paths(buf);
    return json_string(buf);
}

static json_t *transition_json(const pt_store_transition *t)
{
    return json_pack("{s:o,s:s,s:o,s:o}", "from", t->from == PT_JOB_ANY ? json_null() : json_string(pt_job_state_name(t->from)),
                     "to", pt_job_state_name(t->to), "at", pt_api_time(t->at), "reason", reason_json(t->reason));
}

/* "model": where the trained weights are, and whether they are final (a
 * succeeded job's best-by-validation model) or partial (the best model of a
 * job that stopped or failed before its end); null while there is none. */
static json_t *model_json(const pt_app *app, const pt_store_job *j)
{
    if (!pt_job_state_is_terminal(j->state)) return json_null();
    char path[PATH_MAX];
    if (pt_app_job_dir(app, j->id, path, sizeof path - 24) != 0) return json_null();
    strcat(path, "/model.safetensors");
    struct stat st;
    if (stat(path, &st) != 0) return json_null();
    char url[96];
    snprintf(url, sizeof url, "/v1/jobs/%s/model", j->id);
    return json_pack("{s:s,s:b,s:I}", "url", url, "partial", j->state != PT_JOB_SUCCEEDED, "bytes",
                     (json_int_t)st.st_size);
}

json_t *pt_api_job_json(const pt_app *app, const pt_store_job *j, const pt_store_transition_list *transitions)
{
    double pct = isfinite(j->progress) ? round(j->progress * 1000.0) / 10.0 : 0.0;
    json_t *o = json_pack("{s:s,s:o,s:s,s:o,s:o,s:o,s:f,s:f,s:I,s:I,s:o,s:o,s:o,s:i,s:I}", "id", j->id, "dataset",
                          j->dataset_id[0] ? json_string(j->dataset_id) : json_null(), "state",
                          pt_job_state_name(j->state), "created_at", pt_api_time(j->created_at), "started_at",
                          pt_api_time(j->started_at), "finished_at", pt_api_time(j->finished_at), "progress",
                          isfinite(j->progress) ? j->progress : 0.0, "progress_percent", pct, "epoch",
                          (json_int_t)j->epoch, "step", (json_int_t)j->step, "best_val_mae",
                          pt_api_real(j->best_val_mae), "latest_graphs_per_s", pt_api_real(j->latest_graphs_per_s),
                          "failure_reason", j->failure_reason[0] ? reason_json(j->failure_reason) : json_null(),
                          "attempts", j->attempts, "version", (json_int_t)j->version);
    if (!o) return NULL;
    json_object_set_new(o, "name", j->name[0] ? json_string(j->name) : json_null());
    json_t *tags = pt_api_parse_doc(j->tags_json);
    json_object_set_new(o, "tags", json_is_array(tags) ? tags : (json_decref(tags), json_array()));
    json_t *meta = pt_api_parse_doc(j->metadata_json);
    json_object_set_new(o, "metadata", json_is_object(meta) ? meta : (json_decref(meta), json_object()));
    json_object_set_new(o, "stop_reason", j->stop_reason[0] ? json_string(j->stop_reason) : json_null());
    json_object_set_new(o, "model", model_json(app, j));
    json_object_set_new(o, "config", pt_api_parse_doc(j->config_json));
    /* a finished run's final validation and test errors, with their units */
    json_t *result = pt_api_parse_doc(j->result_json);
    if (json_is_object(result)) {
        json_t *units = pt_api_metric_units(&result, 1);
        if (units) json_object_set_new(result, "units", units);
    }
    json_object_set_new(o, "result", result);
    if (transitions) {
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < transitions->n; i++) json_array_append_new(arr, transition_json(&transitions->items[i]));
        json_object_set_new(o, "transitions", arr ? arr : json_null());
    }
    return o;
}

static void on_task_progress(void *user, const pt_progress_info *info)
{
    const pt_api_task_sink *t = user;
    pt_app_task_progress(t->app, t->id, info);
}

pt_progress pt_api_task_progress(pt_api_task_sink *ts, pt_app *app, const char *id)
{
    *ts = (pt_api_task_sink){app, id};
    return (pt_progress){.fn = on_task_progress, .user = ts, .every = 0.2};
}
