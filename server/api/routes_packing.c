/* routes_packing.c — GET /v1/datasets/{id}/packing: how a packing method
 * would group this dataset, without training.
 *
 *   ?method=lpfhp|tuple|pad|static64|static2n|dynamic   (default lpfhp)
 *   &max_nodes=&max_edges=&max_graphs=   per-pack limits, 0 or absent = auto
 *   &batch_size=                         graph slots (static64, static2n, dynamic)
 *   &heuristic=                          tuple packing's priority
 *   &cutoff=&max_neighbors=              the neighbour graph (cutoff 6 Å, 32 neighbours
 *                                        as an energy job's default; max_neighbors=all:
 *                                        every neighbour within the cutoff)
 *
 * The whole dataset is planned (every structure, not a split), and the
 * efficiencies are those of the epoch-0 draw, as pt_packer_report defines
 * them.  Limits that some graph cannot fit are a 422 naming the graph.
 * While the edges are counted (the long part on a large dataset) the
 * dataset's JSON and GET /v1/datasets/events report the progress (phase
 * "count_edges"), as for an upload.
 *
 * A report is computed once per dataset and parameters and kept with the
 * dataset (store_packing.c; deleted with it): a second call is answered from
 * the store without counting anything, with "cached": true and the
 * "seconds" the computation took. */
#include "server/api/routes.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/core/version.h"
#include "engine/train/config.h"
#include "engine/graph/graph.h"
#include "engine/pack/packing.h"

#define LIMIT_MAX 1000000

/* A real query parameter in [min, max]; `def` when absent. */
static double query_real(pt_request *req, const char *name, double def, double min, double max)
{
    const char *v = pt_request_query(req, name);
    if (!v) return def;
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    if (!v[0] || *end || errno || !(d >= min && d <= max)) {
        char field[PT_ERR_FIELD_MAX];
        snprintf(field, sizeof field, "query.%s", name);
        pt_errors_add(&req->errors, "", 0, field, "must be a number in [%g, %g], got '%.32s'", min, max, v);
        return def;
    }
    return d;
}

static int read_request(pt_request *req, pt_pack_request *pr, pt_graph_params *gp)
{
    pt_job_config defaults;
    pt_job_config_defaults(&defaults);
    memset(pr, 0, sizeof(*pr));
    const char *m = pt_request_query(req, "method");
    if (m && pt_pack_method_parse(m, &pr->method) != 0)
        pt_errors_add(&req->errors, NULL, 0, "query.method",
                      "unknown method '%.32s'; one of lpfhp, tuple, pad, static64, static2n, dynamic", m);
    const char *h = pt_request_query(req, "heuristic");
    if (h && pt_pack_heuristic_parse(h, &pr->heuristic) != 0)
        pt_errors_add(&req->errors, NULL, 0, "query.heuristic",
                      "unknown heuristic '%.32s'; one of product, sum, max, min, nodes, edges", h);
    pr->max_nodes = (int32_t)pt_request_query_long(req, "max_nodes", 0, 0, LIMIT_MAX);
    pr->max_edges = (int32_t)pt_request_query_long(req, "max_edges", 0, 0, LIMIT_MAX);
    pr->max_graphs = (int32_t)pt_request_query_long(req, "max_graphs", 0, 0, LIMIT_MAX);
    pr->batch_size = (int32_t)pt_request_query_long(req, "batch_size", 0, 0, LIMIT_MAX);
    gp->cutoff = (float)query_real(req, "cutoff", defaults.model.cutoff, 1e-3, 100);
    /* "all": every neighbour within the cutoff; a job's "auto" is not
     * accepted here, it depends on the job's loss (engine/train/plan.h) */
    const char *k = pt_request_query(req, "max_neighbors");
    gp->max_neighbors = k && !strcmp(k, "all")
                            ? PT_GRAPH_UNLIMITED
                            : (int32_t)pt_request_query_long(req, "max_neighbors",
                                                             PT_JOB_ENERGY_MAX_NEIGHBORS, 1, 1024);
    gp->mode = PT_GRAPH_RADIUS;
    return req->errors.total ? -1 : 0;
}

/* The report's key in the store: every parameter the report depends on, as
 * parsed (so "cutoff=6" and "cutoff=6.0" are one report), and the release
 * (one that packs differently does not answer from another's reports). */
static void cache_key(const pt_pack_request *pr, const pt_graph_params *gp, char *out, size_t cap)
{
    snprintf(out, cap, "v=%s;method=%s;heuristic=%d;max_nodes=%d;max_edges=%d;max_graphs=%d;batch_size=%d;"
             "cutoff=%.9g;max_neighbors=%d;mode=%d", PT_VERSION, pt_pack_method_name(pr->method), (int)pr->heuristic,
             pr->max_nodes, pr->max_edges, pr->max_graphs, pr->batch_size, (double)gp->cutoff, gp->max_neighbors,
             (int)gp->mode);
}

/* The stored report of this key as a 200, or {0} when there is none (or it
 * cannot be read: then it is computed again). */
static pt_response from_cache(pt_store *s, const char *id, const char *key)
{
    char *text = NULL;
    if (pt_store_packing_get(s, id, key, &text) != PT_STORE_OK) return (pt_response){0, NULL};
    json_t *report = json_loads(text, 0, NULL);
    free(text);
    if (!json_is_object(report)) {
        json_decref(report);
        return (pt_response){0, NULL};
    }
    json_object_set_new(report, "cached", json_true());
    return pt_response_json(200, report);
}

/* Keeps a computed report with its dataset.  A failure costs only the next
 * call a recount, so it does not fail this answer. */
static void to_cache(pt_app *app, const char *id, const char *key, const json_t *report)
{
    char err[256];
    char *text = json_dumps(report, JSON_COMPACT);
    pt_store *s = text ? pt_app_store_acquire(app, err, sizeof err) : NULL;
    if (s) {
        pt_store_packing_put(s, id, key, text);
        pt_app_store_release(app, s);
    }
    free(text);
}

static json_t *report_json(const char *id, const pt_pack_report *r, const pt_graph_params *gp, double seconds)
{
    return json_pack("{s:s,s:s,s:{s:i,s:i,s:i},s:{s:f,s:i},s:I,s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:f}",
                     "dataset", id, "method", pt_pack_method_name(r->method), "limits", "max_nodes",
                     r->limits.max_nodes, "max_edges", r->limits.max_edges, "max_graphs", r->limits.max_graphs,
                     "graph", "cutoff", (double)gp->cutoff, "max_neighbors", gp->max_neighbors, "packs",
                     (json_int_t)r->n_packs, "graphs", (json_int_t)r->n_graphs, "real_nodes",
                     (json_int_t)r->real_nodes, "real_edges", (json_int_t)r->real_edges, "graphs_per_pack",
                     r->graphs_per_pack, "node_efficiency", r->node_efficiency, "edge_efficiency",
                     r->edge_efficiency, "graph_efficiency", r->graph_efficiency, "node_padding", r->node_padding,
                     "edge_padding", r->edge_padding, "node_capacity_efficiency", r->node_capacity_efficiency,
                     "compositions", (json_int_t)r->n_compositions, "seconds", seconds);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Plans the packs of the whole dataset; 0, or -1 with errs (422) or a
 * server-side failure in *fatal. */
static int plan(pt_request *req, const pt_dataset *ds, const pt_pack_request *pr, const pt_graph_params *gp,
                pt_pack_report *rep, const pt_progress *progress, pt_errors *errs, int *fatal)
{
    uint32_t n = ds->n_structs;
    uint32_t *natoms = malloc(sizeof(uint32_t) * n), *nedges = malloc(sizeof(uint32_t) * n);
    uint32_t *ids = malloc(sizeof(uint32_t) * n);
    int rc = -1;
    *fatal = 0;
    if (!natoms || !nedges || !ids) {
        *fatal = 1;
        goto done;
    }
    for (uint32_t s = 0; s < n; s++) {
        natoms[s] = pt_dataset_natoms(ds, s);
        ids[s] = s;
    }
    /* a request given up (client gone, deadline, server stopping) stops
     * the count, the long part */
    int stopped = 0;
    pt_graphs_count_opts co = {.threads = (int)sysconf(_SC_NPROCESSORS_ONLN), .progress = progress,
                               .should_stop = pt_request_should_stop, .user = req, .stopped = &stopped};
    if (pt_graphs_count_ex(nedges, ds, gp, &co, errs) != 0) goto done;
    if (pt_request_cancelled(req)) goto done;
    pt_packer pk;
    if (pt_packer_init(&pk, pr, natoms, nedges, n, ids, n, errs) != 0) goto done;
    rc = pt_packer_report(&pk, 0, rep);
    if (rc != 0) *fatal = 1;
    pt_packer_close(&pk);
done:
    free(natoms);
    free(nedges);
    free(ids);
    return rc;
}

pt_response pt_api_dataset_packing(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    const char *id = pt_request_param(req, "id");
    pt_pack_request pr;
    pt_graph_params gp;
    if (read_request(req, &pr, &gp) != 0) return pt_request_problem(req);
    char err[512];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) return pt_api_no_store(err);
    pt_store_dataset row = {0};
    int rc = pt_store_dataset_get(s, pt_app_owner(req), id, &row);
    pt_response r = {0, NULL};
    char key[PT_STORE_PACKING_PARAMS_MAX];
    cache_key(&pr, &gp, key, sizeof key);
    if (rc == PT_STORE_NOT_FOUND || rc == PT_STORE_INVALID) r = pt_api_not_found("dataset", id);
    else if (rc != PT_STORE_OK) r = pt_api_store_problem(s, rc, "cannot read the dataset");
    else r = from_cache(s, id, key);
    pt_app_store_release(app, s);
    if (rc != PT_STORE_OK || r.mhd || r.status) {
        pt_store_dataset_clear(&row);
        return r;
    }
    pt_dataset ds;
    memset(&ds, 0, sizeof ds);
    if (pt_dataset_open(&ds, row.path, err, sizeof err) != 0) {
        pt_store_dataset_clear(&row);
        return pt_problem(500, "cannot open the dataset: %s", err);
    }
    char name[PT_STORE_NAME_MAX];
    snprintf(name, sizeof name, "%s", row.name);
    pt_store_dataset_clear(&row);
    double t0 = now_s();
    pt_errors errs;
    pt_errors_init(&errs, 20);
    pt_pack_report rep;
    int fatal = 0;
    pt_app_task_begin(app, id, pt_app_owner(req), name, "count_edges");
    pt_api_task_sink ts;
    pt_progress sink = pt_api_task_progress(&ts, app, id);
    int ok = plan(req, &ds, &pr, &gp, &rep, &sink, &errs, &fatal) == 0;
    char first[256] = "";
    if (!ok) pt_errors_first(&errs, first, sizeof first);
    pt_app_task_end(app, id, ok, fatal ? "out of memory planning the packs" : first);
    if (pt_request_cancelled(req))
        r = pt_request_cancelled_response(req);
    else if (ok) {
        json_t *report = report_json(id, &rep, &gp, now_s() - t0);
        if (report) to_cache(app, id, key, report);
        json_object_set_new(report, "cached", json_false());
        r = pt_response_json(200, report);
    }
    else if (fatal) r = pt_problem(500, "out of memory planning the packs");
    else r = pt_problem_errors(422, &errs, "dataset %s cannot be packed this way", id);
    pt_errors_close(&errs);
    pt_dataset_close(&ds);
    return r;
}
