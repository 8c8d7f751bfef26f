/* job_check.c — whether a valid job configuration can train on a dataset,
 * decided at submission so a job that would fail in its first second is
 * refused with a 422 instead of being queued:
 *
 *   target        the dataset has that numeric key on every structure
 *                 (from the ingest report, without opening the dataset);
 *   split         the seeded split leaves training and validation parts;
 *   packing       every graph of each part fits the configured pack limits;
 *   memory plan   one replica's memory for the resolved limits fits
 *                 backend.device_memory_mb (engine/memplan.h, issue 4);
 *   precision     "bf16" only on a CPU with AVX512-BF16 (the workers run on
 *                 this host; pt_train_check_cpu).
 *
 * The split and packing steps repeat what pt_train_run's set-up does
 * (engine/train.c: split over all structures with the job seed, one packer
 * per part, method and limits mapped the same way), so "auto" limits resolve
 * here to exactly the limits the worker will use. */
#include "server/api/routes.h"

#include <stdlib.h>
#include <string.h>

#include "engine/train/config.h"
#include "engine/graph/graph.h"
#include "engine/backend/memplan.h"
#include "engine/mpi/mpi_backend.h"
#include "engine/pack/packing.h"
#include "engine/data/split.h"
#include "engine/train/train.h"

static int check_target(const pt_job_config *cfg, const pt_store_dataset *ds, pt_errors *errs)
{
    json_t *report = pt_api_parse_doc(ds->report_json);
    const json_t *targets = json_object_get(report, "targets");
    const json_t *t = json_object_get(targets, cfg->target);
    int ok = 0;
    if (!t) {
        char keys[200] = "";
        size_t n = 0;
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)targets, k, v) {
            if (n + strlen(k) + 3 >= sizeof keys) break;
            n += (size_t)snprintf(keys + n, sizeof keys - n, "%s%s", n ? ", " : "", k);
        }
        pt_errors_add(errs, NULL, 0, "target", "dataset %s has no numeric key '%s'; its keys: %s", ds->id, cfg->target,
                      n ? keys : "none");
    } else if (json_integer_value(json_object_get(t, "count")) < ds->n_structs) {
        pt_errors_add(errs, NULL, 0, "target", "only %lld of the %lld structures of dataset %s have '%s'",
                      (long long)json_integer_value(json_object_get(t, "count")), (long long)ds->n_structs, ds->id,
                      cfg->target);
    } else {
        ok = 1;
    }
    json_decref(report);
    return ok ? 0 : -1;
}

/* The packer names its limits without their section; the API speaks in
 * paths of the submitted config. */
static void prefix_batching_fields(pt_errors *errs, size_t from)
{
    for (size_t i = from; i < errs->kept; i++) {
        char *f = errs->items[i].field;
        if (!strcmp(f, "max_nodes") || !strcmp(f, "max_edges") || !strcmp(f, "max_graphs")) {
            char tmp[PT_ERR_FIELD_MAX];
            snprintf(tmp, sizeof tmp, "batching.%.20s", f);
            snprintf(f, PT_ERR_FIELD_MAX, "%s", tmp);
        }
    }
}

/* As train.c's plan_packer. */
static int plan_part(pt_packer *pk, const pt_job_config *cfg, const uint32_t *natoms, const uint32_t *nedges,
                     uint32_t n_structs, const uint32_t *ids, uint32_t n, pt_errors *errs)
{
    const pt_job_batching *b = &cfg->batching;
    pt_pack_request req = {.method = (pt_pack_method)b->method, .max_nodes = b->max_nodes,
                           .max_edges = b->max_edges, .heuristic = PT_HEUR_PRODUCT};
    int batched = b->method == PT_JOB_BATCH_STATIC64 || b->method == PT_JOB_BATCH_STATIC2N ||
                  b->method == PT_JOB_BATCH_DYNAMIC;
    if (batched) req.batch_size = b->max_graphs;
    else req.max_graphs = b->max_graphs;
    size_t before = errs->kept;
    int rc = pt_packer_init(pk, &req, natoms, nedges, n_structs, ids, n, errs);
    prefix_batching_fields(errs, before);
    return rc;
}

/* Resolves the training pack limits; 0, or -1 with errors. */
static int resolve_limits(const pt_job_config *cfg, const pt_dataset *ds, pt_pack_limits *limits, pt_errors *errs)
{
    uint32_t n = ds->n_structs;
    uint32_t *natoms = malloc(sizeof(uint32_t) * (n ? n : 1)), *nedges = malloc(sizeof(uint32_t) * (n ? n : 1));
    pt_split sp;
    memset(&sp, 0, sizeof sp);
    int rc = -1;
    if (!natoms || !nedges) {
        pt_errors_add(errs, NULL, 0, "", "out of memory");
        goto done;
    }
    for (uint32_t s = 0; s < n; s++) natoms[s] = pt_dataset_natoms(ds, s);
    pt_graph_params gp = {.cutoff = (float)cfg->model.cutoff, .max_neighbors = cfg->model.max_neighbors,
                          .mode = PT_GRAPH_RADIUS};
    if (pt_graphs_count(nedges, ds, &gp, errs) != 0) goto done;
    if (pt_split_init(&sp, n, cfg->training.split, cfg->training.seed, errs) != 0) goto done;
    pt_packer train, val;
    if (plan_part(&train, cfg, natoms, nedges, n, sp.train, sp.n_train, errs) != 0) goto done;
    *limits = train.limits;
    pt_packer_close(&train);
    if (plan_part(&val, cfg, natoms, nedges, n, sp.val, sp.n_val, errs) != 0) goto done;
    pt_packer_close(&val);
    rc = 0;
done:
    pt_split_close(&sp);
    free(natoms);
    free(nedges);
    return rc;
}

void pt_job_check_dataset(pt_app *app, const pt_job_config *cfg, const pt_store_dataset *ds, pt_errors *errs)
{
    (void)app;
    /* independent of the dataset: reported along with whatever else is wrong */
    pt_train_check_cpu(cfg, errs);
    if (pt_mpi_check_job(cfg, errs) != 0) return;
    if (check_target(cfg, ds, errs) != 0) return;
    pt_dataset data;
    memset(&data, 0, sizeof data);
    char err[512];
    if (pt_dataset_open(&data, ds->path, err, sizeof err) != 0) {
        pt_errors_add(errs, NULL, 0, "dataset", "cannot open dataset %s: %s", ds->id, err);
        return;
    }
    pt_pack_limits limits;
    if (resolve_limits(cfg, &data, &limits, errs) == 0) {
        pt_memplan plan;
        pt_train_layout layout;
        if (pt_train_layout_resolve(&layout, cfg, pt_online_cores(), errs) == 0 &&
            pt_memplan_for_job(&plan, cfg, &layout, limits, errs) == 0)
            pt_memplan_check(&plan, errs);
    }
    pt_dataset_close(&data);
}
