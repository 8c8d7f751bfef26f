/* routes_job_data.c — what a job produces, read while it runs or after:
 *   GET /v1/jobs/{id}/metrics   ?since_step=&max_points=  (downsampled steps, epochs),
 *                               or ?since_step=&page_size= (every step, a page at a time)
 *   GET /v1/jobs/{id}/events    Server-Sent Events: state, epoch, step
 *   GET /v1/jobs/{id}/model     the trained model (safetensors)
 * The worker's log is in routes_job_logs.c, prediction with the model in
 * routes_predict.c.
 *
 * Event ids are the store's (store.h, "events"): each transition, epoch and
 * step row of a job has the next number of the job's one sequence, so a
 * stream is the three series merged by id and Last-Event-ID says exactly
 * where it resumes.  (Steps a worker re-does after resuming from a
 * checkpoint replace the discarded ones with new, larger ids: a client sees
 * them again, with their new values.) */
#include "server/api/routes.h"
#include "server/http/sse.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Steps sent per call of the event source; a longer backlog (a client
 * connecting late to a long job) is thinned by the store's downsampling. */
#define EV_STEP_BATCH 2000

/* ---- metric rows ------------------------------------------------------------------- */

/* The row's columns plus the worker's extra fields (nodes_per_s, phase
 * times, val_rmse, ...); a column wins over an extra field of the same name. */
static json_t *with_extra(json_t *o, const char *extra)
{
    json_t *x = extra ? json_loads(extra, 0, NULL) : NULL;
    if (o && json_is_object(x)) json_object_update_missing(o, x);
    json_decref(x);
    return o;
}

static json_t *step_json(const pt_store_step_metric *m)
{
    json_t *o = json_pack("{s:s,s:I,s:I,s:o,s:o,s:o,s:o,s:o}", "kind", "step", "step", (json_int_t)m->step, "epoch",
                          (json_int_t)m->epoch, "loss", pt_api_real(m->loss), "mae", pt_api_real(m->mae), "lr",
                          pt_api_real(m->lr), "graphs_per_s", pt_api_real(m->graphs_per_s), "at", pt_api_time(m->at));
    return with_extra(o, m->json);
}

static json_t *epoch_json(const pt_store_epoch_metric *m)
{
    json_t *o = json_pack("{s:s,s:I,s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "kind", "epoch", "epoch", (json_int_t)m->epoch,
                          "step", (json_int_t)m->step, "train_loss", pt_api_real(m->train_loss), "train_mae",
                          pt_api_real(m->train_mae), "val_loss", pt_api_real(m->val_loss), "val_mae",
                          pt_api_real(m->val_mae), "graphs_per_s", pt_api_real(m->graphs_per_s), "seconds",
                          pt_api_real(m->seconds), "at", pt_api_time(m->at));
    return with_extra(o, m->json);
}

pt_response pt_api_job_metrics(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    const char *id = pt_request_param(req, "id");
    long since = pt_request_query_long(req, "since_step", -1, -1, LONG_MAX);
    long points = pt_request_query_long(req, "max_points", PT_STORE_POINTS_DEFAULT, 2, PT_STORE_POINTS_MAX);
    /* paging: every step, page_size at a time; next_since_step goes on */
    long page = pt_request_query_long(req, "page_size", 0, 1, PT_STORE_POINTS_MAX);
    if (page && pt_request_query(req, "max_points"))
        pt_errors_add(&req->errors, NULL, 0, "query.page_size",
                      "pages hold every step; max_points thins them instead: give one of the two");
    if (req->errors.total) return pt_request_problem(req);
    char err[256];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) return pt_api_no_store(err);
    const char *owner = pt_app_owner(req);
    pt_store_step_series steps = {0};
    pt_store_epoch_series epochs = {0};
    int rc = page ? pt_store_steps_page(s, owner, id, since, (int)page, &steps)
                  : pt_store_steps_read(s, owner, id, since, (int)points, &steps);
    if (rc == PT_STORE_OK) rc = pt_store_epochs_read(s, owner, id, &epochs);
    pt_response r;
    if (rc == PT_STORE_NOT_FOUND) {
        r = pt_api_not_found("job", id);
    } else if (rc != PT_STORE_OK) {
        r = pt_api_store_problem(s, rc, "cannot read the metrics");
    } else {
        json_t *sa = json_array(), *ea = json_array();
        for (size_t i = 0; sa && i < steps.n; i++) json_array_append_new(sa, step_json(&steps.items[i]));
        /* a page has the epochs that end within its steps */
        int more = page && steps.total > (int64_t)steps.n;
        int64_t upto = more && steps.n ? steps.items[steps.n - 1].step : INT64_MAX;
        for (size_t i = 0; ea && i < epochs.n; i++)
            if (epochs.items[i].step > since && epochs.items[i].step <= upto)
                json_array_append_new(ea, epoch_json(&epochs.items[i]));
        json_t *doc = json_pack("{s:s,s:I,s:I,s:b,s:o,s:o,s:o}", "job", id, "since_step", (json_int_t)since,
                                "total_steps", (json_int_t)steps.total, "downsampled",
                                !page && steps.total > (int64_t)steps.n, "steps", sa, "epochs", ea,
                                "next_since_step", more ? json_integer((json_int_t)upto) : json_null());
        /* a forces job's fields with their units (the first rows say which) */
        json_t *rows[2] = {json_array_get(ea, 0), json_array_get(sa, 0)};
        json_t *units = doc ? pt_api_metric_units(rows, 2) : NULL;
        if (units) json_object_set_new(doc, "units", units);
        r = pt_response_json(200, doc);
        pt_response_header(&r, "Cache-Control", "no-cache");
    }
    pt_store_step_series_clear(&steps);
    pt_store_epoch_series_clear(&epochs);
    pt_app_store_release(app, s);
    return r;
}

/* ---- events (SSE) ---------------------------------------------------------------------- */

typedef struct ev_ctx {
    pt_app *app;
    char owner[PT_STORE_OWNER_MAX];
    char id[PT_STORE_ID_MAX];
} ev_ctx;

static json_t *state_event(const pt_store_transition *t)
{
    return json_pack("{s:s,s:o,s:s,s:o,s:s}", "kind", "state", "from",
                     t->from == PT_JOB_ANY ? json_null() : json_string(pt_job_state_name(t->from)), "state",
                     pt_job_state_name(t->to), "at", pt_api_time(t->at), "reason", t->reason);
}

static int send_event(pt_sse_writer *w, int64_t id, const char *name, json_t *data)
{
    int rc = data ? pt_sse_send_json(w, (uint64_t)id, name, data) : -1;
    json_decref(data);
    return rc;
}

/* Emits the three series merged by event id (each is ascending). */
static void emit_merged(pt_sse_writer *w, const pt_store_events *ev)
{
    size_t ti = 0, ei = 0, si = 0;
    const pt_store_transition_list *tl = &ev->transitions;
    const pt_store_epoch_series *es = &ev->epochs;
    const pt_store_step_series *ss = &ev->steps;
    for (;;) {
        int64_t t_id = ti < tl->n ? tl->items[ti].event_id : INT64_MAX;
        int64_t e_id = ei < es->n ? es->items[ei].event_id : INT64_MAX;
        int64_t s_id = si < ss->n ? ss->items[si].event_id : INT64_MAX;
        int rc;
        if (t_id == INT64_MAX && e_id == INT64_MAX && s_id == INT64_MAX) return;
        if (t_id < e_id && t_id < s_id) rc = send_event(w, t_id, "state", state_event(&tl->items[ti++]));
        else if (e_id < s_id) rc = send_event(w, e_id, "epoch", epoch_json(&es->items[ei++]));
        else rc = send_event(w, s_id, "step", step_json(&ss->items[si++]));
        if (rc != 0) return;
    }
}

static int events_source(void *ctx, uint64_t after_id, pt_sse_writer *w)
{
    ev_ctx *c = ctx;
    char err[256];
    pt_store *s = pt_app_store_acquire(c->app, err, sizeof err);
    if (!s) return PT_SSE_OPEN;   /* tried again at the next change or heartbeat */
    pt_store_events ev;
    int rc = pt_store_events_read(s, c->owner, c->id, (int64_t)after_id, EV_STEP_BATCH, &ev);
    pt_app_store_release(c->app, s);
    int result = PT_SSE_OPEN;
    if (rc == PT_STORE_OK) {
        emit_merged(w, &ev);
        /* one snapshot: a final state means every event is in this batch */
        if (pt_job_state_is_terminal(ev.state)) result = PT_SSE_DONE;
    } else if (rc == PT_STORE_NOT_FOUND) {
        result = PT_SSE_DONE;   /* the job is gone: nothing more will come */
    }
    pt_store_events_clear(&ev);
    return result;
}

/* Event ids are the job's event numbers (1, 2, ...), far below 2^53, so a
 * browser's Last-Event-ID is exact.  Per the HTML standard a 204 tells an
 * EventSource to stop reconnecting: it is the answer once the job is final
 * and the client has seen its last event. */
pt_response pt_api_job_events(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    const char *id = pt_request_param(req, "id");
    long heartbeat = pt_request_query_long(req, "heartbeat_ms", 15000, 100, 120000);
    uint64_t last = 0;
    if (pt_sse_last_event_id(req, &last) != 0)
        pt_errors_add(&req->errors, NULL, 0, "header.Last-Event-ID", "must be a decimal event id");
    if (req->errors.total) return pt_request_problem(req);
    char err[256];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) return pt_api_no_store(err);
    pt_store_job job = {0};
    int rc = pt_store_job_get(s, pt_app_owner(req), id, &job);
    pt_response r = {0, NULL};
    if (rc == PT_STORE_NOT_FOUND || rc == PT_STORE_INVALID) r = pt_api_not_found("job", id);
    else if (rc != PT_STORE_OK) r = pt_api_store_problem(s, rc, "cannot read the job");
    else if (last > (uint64_t)job.event_seq)
        r = pt_problem(400, "Last-Event-ID %llu is after the last event of job %s (%lld)", (unsigned long long)last,
                       id, (long long)job.event_seq);
    else if (pt_job_state_is_terminal(job.state) && last == (uint64_t)job.event_seq)
        r = pt_response_empty(204);
    pt_store_job_clear(&job);
    pt_app_store_release(app, s);
    if (r.status) return r;
    ev_ctx *c = calloc(1, sizeof(*c));
    if (!c) return pt_problem(500, "out of memory");
    c->app = app;
    snprintf(c->owner, sizeof c->owner, "%s", pt_app_owner(req));
    snprintf(c->id, sizeof c->id, "%s", id);
    pt_sse_config cfg = {.watch = &app->jobs_watch, .source = events_source, .ctx = c, .free_ctx = free,
                         .heartbeat_ms = (int)heartbeat, .retry_ms = 2000};
    return pt_sse_response(req, &cfg);
}

/* ---- model -------------------------------------------------------------------------------- */

pt_response pt_api_job_model(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    const char *id = pt_request_param(req, "id");
    pt_job_state state;
    pt_response r = {0, NULL};
    if (pt_api_job_state(app, req, id, &state, &r) != 0) return r;
    /* While the worker runs it rewrites the file on every improvement. */
    if (!pt_job_state_is_terminal(state))
        return pt_problem(409, "the model of job %s is not available yet: the job is %s", id, pt_job_state_name(state));
    char path[PATH_MAX];
    if (pt_app_job_dir(app, id, path, sizeof path - 24) != 0) return pt_problem(500, "job directory path too long");
    strcat(path, "/model.safetensors");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0) close(fd);
        return pt_problem(409, "job %s ended (%s) without a model", id, pt_job_state_name(state));
    }
    char etag[64], disposition[128];
    snprintf(etag, sizeof etag, "\"%llx-%llx\"", (unsigned long long)st.st_size, (unsigned long long)st.st_mtime);
    const char *inm = pt_request_header(req, "If-None-Match");
    if (inm && pt_etag_matches(inm, etag)) {
        close(fd);
        return pt_response_not_modified(etag);
    }
    struct MHD_Response *m = MHD_create_response_from_fd64((uint64_t)st.st_size, fd);
    if (!m) {
        close(fd);
        return pt_problem(500, "cannot send the model");
    }
    r = (pt_response){200, m};
    /* A job that did not succeed (stopped, failed) may still have its best
     * model so far: offered, but never as if it were the final one. */
    int partial = state != PT_JOB_SUCCEEDED;
    snprintf(disposition, sizeof disposition, "attachment; filename=\"%s%s.safetensors\"", id,
             partial ? ".partial" : "");
    pt_response_header(&r, "Content-Type", "application/octet-stream");
    pt_response_header(&r, "Content-Disposition", disposition);
    pt_response_header(&r, "ETag", etag);
    pt_response_header(&r, "Packtrain-Model", partial ? "partial" : "final");
    return r;
}
