/* routes_system.c — the routes about the server itself: /healthz (the
 * process answers), /readyz (it can do work: database writable, workers
 * able to run, disk space left), /metrics (Prometheus), /openapi.json, and
 * the dashboard's static files at / (registered last: a catch-all).
 *
 * /healthz, /readyz, /metrics, /openapi.json and the static files are public
 * even with auth on: probes and scrapers carry no token, and none of them
 * reveals a row of any owner. */
#include "server/api/routes.h"

#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "engine/model/bf16.h"

#define READY_DB_WAIT_MS 500

/* "bf16": whether jobs with training.precision "bf16" are accepted here, so
 * a client can choose before it submits (clients and the workers' CPU are
 * not the same machine). */
pt_response pt_api_healthz(pt_request *req, void *ctx)
{
    (void)req;
    pt_app *app = ctx;
    double uptime = (double)(pt_store_now_us() - app->started_us) / 1e6;
    return pt_response_json(200, json_pack("{s:s,s:f,s:b}", "status", "ok", "uptime_s", uptime, "bf16",
                                           pt_cpu_has_bf16()));
}

static json_t *check_database(pt_app *app, int *ok)
{
    char err[256];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) {
        *ok = 0;
        return json_pack("{s:b,s:s}", "ok", 0, "detail", err);
    }
    /* Pruning nothing still takes the write lock and commits: a real write.
     * A probe must answer within its own timeout, so the lock wait is short. */
    pt_store_set_busy_timeout(s, READY_DB_WAIT_MS);
    int rc = pt_store_idempotency_prune(s, 0, NULL);
    pt_store_set_busy_timeout(s, PT_STORE_BUSY_TIMEOUT_MS);
    json_t *o = rc == PT_STORE_OK ? json_pack("{s:b}", "ok", 1)
                                  : json_pack("{s:b,s:s}", "ok", 0, "detail", pt_store_errmsg(s));
    pt_app_store_release(app, s);
    if (rc != PT_STORE_OK) *ok = 0;
    return o;
}

static json_t *check_workers(pt_app *app, int *ok)
{
    if (!app->has_sched)
        return json_pack("{s:b,s:i,s:s}", "ok", 1, "slots", 0, "detail", "no worker slots (--workers 0): jobs stay queued");
    pt_scheduler_stats st;
    pt_scheduler_stats_get(&app->sched, &st);
    const char *prog = app->worker_argv[0];
    if (st.draining) {
        *ok = 0;
        return json_pack("{s:b,s:s}", "ok", 0, "detail", "the scheduler is draining");
    }
    if (access(prog, X_OK) != 0) {
        *ok = 0;
        return json_pack("{s:b,s:s+}", "ok", 0, "detail", "the worker program is not executable: ", prog);
    }
    return json_pack("{s:b,s:i,s:i,s:I,s:I}", "ok", 1, "slots", st.slots, "active", st.active, "spawned",
                     (json_int_t)st.spawned, "crashed", (json_int_t)st.crashed);
}

static json_t *check_disk(pt_app *app, int *ok)
{
    struct statvfs vfs;
    if (statvfs(app->data_dir, &vfs) != 0) {
        *ok = 0;
        return json_pack("{s:b,s:s}", "ok", 0, "detail", strerror(errno));
    }
    uint64_t free_bytes;
    int enough = !pt_app_disk_low(app, &free_bytes);
    if (!enough) *ok = 0;
    json_t *o = json_pack("{s:b,s:I,s:I}", "ok", enough, "free_bytes", (json_int_t)free_bytes, "min_free_bytes",
                          (json_int_t)app->opt.min_free_bytes);
    if (o && !enough) json_object_set_new(o, "detail", json_string("free space on the data directory is below the minimum"));
    return o;
}

pt_response pt_api_readyz(pt_request *req, void *ctx)
{
    (void)req;
    pt_app *app = ctx;
    int ok = 1;
    json_t *checks = json_pack("{s:o,s:o,s:o}", "database", check_database(app, &ok), "workers",
                               check_workers(app, &ok), "disk", check_disk(app, &ok));
    if (!checks) return pt_problem(500, "out of memory");
    if (ok) return pt_response_json(200, json_pack("{s:s,s:o}", "status", "ready", "checks", checks));
    json_t *p = pt_problem_new(503, NULL, "the server is not ready; see checks");
    json_object_set_new(p, "checks", checks);
    pt_response r = pt_problem_response(p);
    pt_response_header(&r, "Retry-After", "5");
    return r;
}

pt_response pt_api_openapi(pt_request *req, void *ctx)
{
    (void)ctx;
    char etag[64];
    size_t len;
    const char *doc = pt_openapi_doc(&len);
    if (!doc) return pt_problem(500, "out of memory");
    pt_etag_of(doc, len, etag, sizeof etag);
    const char *inm = pt_request_header(req, "If-None-Match");
    if (inm && pt_etag_matches(inm, etag)) return pt_response_not_modified(etag);
    pt_response r = pt_response_bytes(200, PT_CT_JSON, doc, len);
    pt_response_header(&r, "ETag", etag);
    pt_response_header(&r, "Cache-Control", "no-cache");
    return r;
}

/* The dashboard's index.html; without a web/ directory, / says where the
 * API is rather than 404. */
pt_response pt_api_index(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    if (app->has_web) return pt_static_handler(req, &app->web);
    return pt_response_json(200, json_pack("{s:s,s:s,s:s}", "service", "packtrain", "api", "/v1",
                                           "openapi", "/openapi.json"));
}

pt_response pt_api_static(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    return pt_static_handler(req, &app->web);
}

pt_response pt_api_prometheus(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    return pt_prom_handler(req, &app->prom);
}
