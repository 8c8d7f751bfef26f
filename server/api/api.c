/* api.c — the whole REST API of packtrain in one table: every route, its
 * handler (in the routes_*.c file of its group), the body it takes and
 * whether it is public.  pt_api_register puts them on the app's router in
 * this order; the static catch-all must come last.  api/openapi.yaml
 * documents the same routes (test_routes_system holds the two together). */
#include "server/api/routes.h"

typedef struct api_route {
    const char *method, *pattern;
    pt_handler_fn handler;
    pt_body_kind body;
    unsigned flags;           /* PT_ROUTE_PUBLIC: no token needed */
    int web_only;             /* registered only with a dashboard directory */
} api_route;

#define PUBLIC PT_ROUTE_PUBLIC
#define HEAVY PT_ROUTE_HEAVY      /* runs off the HTTP threads (server/http/offload.h) */

static const api_route api[] = {
    /* the server itself (routes_system.c) */
    {"GET", "/healthz", pt_api_healthz, PT_BODY_NONE, PUBLIC, 0},
    {"GET", "/readyz", pt_api_readyz, PT_BODY_NONE, PUBLIC, 0},
    {"GET", "/metrics", pt_api_prometheus, PT_BODY_NONE, PUBLIC, 0},
    {"GET", "/openapi.json", pt_api_openapi, PT_BODY_NONE, PUBLIC, 0},
    /* datasets (routes_datasets.c, routes_packing.c) */
    {"POST", "/v1/datasets", pt_api_datasets_upload, PT_BODY_FILE, HEAVY, 0},
    {"GET", "/v1/datasets", pt_api_datasets_list, PT_BODY_NONE, 0, 0},
    {"GET", "/v1/datasets/events", pt_api_datasets_events, PT_BODY_NONE, 0, 0},
    {"GET", "/v1/datasets/{id}", pt_api_datasets_get, PT_BODY_NONE, 0, 0},
    {"DELETE", "/v1/datasets/{id}", pt_api_datasets_delete, PT_BODY_NONE, 0, 0},
    {"GET", "/v1/datasets/{id}/packing", pt_api_dataset_packing, PT_BODY_NONE, HEAVY, 0},
    /* jobs (routes_jobs.c) */
    {"POST", "/v1/jobs", pt_api_jobs_create, PT_BODY_JSON, 0, 0},
    {"GET", "/v1/jobs", pt_api_jobs_list, PT_BODY_NONE, 0, 0},
    {"GET", "/v1/jobs/{id}", pt_api_jobs_get, PT_BODY_NONE, 0, 0},
    {"DELETE", "/v1/jobs/{id}", pt_api_jobs_delete, PT_BODY_NONE, 0, 0},
    {"POST", "/v1/jobs/{id}/cancel", pt_api_jobs_cancel, PT_BODY_NONE, 0, 0},
    /* a job's data (routes_job_data.c, routes_job_logs.c, routes_predict.c) */
    {"GET", "/v1/jobs/{id}/metrics", pt_api_job_metrics, PT_BODY_NONE, 0, 0},
    {"GET", "/v1/jobs/{id}/events", pt_api_job_events, PT_BODY_NONE, 0, 0},
    {"GET", "/v1/jobs/{id}/logs", pt_api_job_logs, PT_BODY_NONE, 0, 0},
    {"GET", "/v1/jobs/{id}/logs/stream", pt_api_job_log_stream, PT_BODY_NONE, 0, 0},
    {"GET", "/v1/jobs/{id}/model", pt_api_job_model, PT_BODY_NONE, 0, 0},
    {"POST", "/v1/jobs/{id}/predict", pt_api_job_predict, PT_BODY_FILE, HEAVY, 0},
    /* the dashboard (routes_system.c): "/" is index.html, or a pointer to
     * the API without a web directory; the catch-all goes last */
    {"GET", "/", pt_api_index, PT_BODY_NONE, PUBLIC, 0},
    {"GET", "/{path...}", pt_api_static, PT_BODY_NONE, PUBLIC, 1},
};

int pt_api_register(pt_app *app, char *err, size_t errlen)
{
    for (size_t i = 0; i < sizeof api / sizeof api[0]; i++) {
        const api_route *a = &api[i];
        if (a->web_only && !app->has_web) continue;
        pt_route r = {a->method, a->pattern, a->handler, app, a->body, a->flags};
        if (pt_api_route_add(app, &r, err, errlen) != 0) return -1;
    }
    return 0;
}
