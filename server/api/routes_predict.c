/* routes_predict.c — POST /v1/jobs/{id}/predict: structures in (the body is
 * an XYZ / extended XYZ / QM9 file or an ASE database, like a dataset upload; ?format=, ?name=
 * for error messages), the trained model's predictions out, in the job's
 * target units.  The body is ingested and validated exactly as an upload is
 * (422 with line numbers, or row ids for a database), into a temporary .ptd
 * that is removed after the answer; each prediction says the line or row of
 * its structure.  Energies or other keys in the file are ignored. */
#include "server/api/routes.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/data/ingest.h"
#include "engine/train/config.h"
#include "engine/train/predict.h"

#define PREDICT_MAX_STRUCTURES 10000

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The job's model file when the job has ended with one; else a 404/409. */
static int find_model(pt_app *app, pt_request *req, const char *id, char *model, size_t cap, char *target,
                      size_t tcap, pt_response *r)
{
    char err[256];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) {
        *r = pt_api_no_store(err);
        return -1;
    }
    pt_store_job job = {0};
    int rc = pt_store_job_get(s, pt_app_owner(req), id, &job);
    if (rc == PT_STORE_NOT_FOUND || rc == PT_STORE_INVALID) *r = pt_api_not_found("job", id);
    else if (rc != PT_STORE_OK) *r = pt_api_store_problem(s, rc, "cannot read the job");
    pt_app_store_release(app, s);
    if (rc != PT_STORE_OK) return -1;
    /* the stored canonical text, read through the validator like every job */
    pt_job_config cfg;
    pt_errors perrs;
    pt_errors_init(&perrs, 1);
    const char *text = job.config_json ? job.config_json : "";
    int parsed = pt_job_config_parse(&cfg, text, strlen(text), NULL, &perrs) == 0;
    pt_errors_close(&perrs);
    snprintf(target, tcap, "%s", parsed ? cfg.target : "");
    pt_job_state state = job.state;
    pt_store_job_clear(&job);
    if (!pt_job_state_is_terminal(state)) {
        *r = pt_problem(409, "job %s has no model yet: the job is %s", id, pt_job_state_name(state));
        return -1;
    }
    struct stat st;
    if (pt_app_job_dir(app, id, model, cap - 24) != 0) {
        *r = pt_problem(500, "job directory path too long");
        return -1;
    }
    strcat(model, "/model.safetensors");
    if (stat(model, &st) != 0) {
        *r = pt_problem(409, "job %s ended (%s) without a model", id, pt_job_state_name(state));
        return -1;
    }
    return 0;
}

/* Structure s's per-atom values of y (indexed by the dataset's atoms). */
static json_t *atom_values(const pt_dataset *ds, const double *y, uint32_t s)
{
    json_t *v = json_array();
    for (uint64_t a = ds->atom_offset[s]; v && a < ds->atom_offset[s + 1]; a++)
        json_array_append_new(v, json_real(y[a]));
    return v;
}

/* where: "line" (text formats) or "row" (an ASE database): what source_line holds */
static json_t *predictions_json(const char *id, const char *target, const pt_dataset *ds, const pt_prediction *p,
                                double seconds, const char *where)
{
    json_t *arr = json_array();
    for (uint32_t s = 0; arr && s < p->n; s++) {
        /* the first target's: a number, or one per atom when it is per atom */
        json_t *o = json_pack("{s:I,s:o}", "index", (json_int_t)s, "prediction",
                              p->n_heads && p->head_atom[0] ? atom_values(ds, p->head_y[0], s)
                                                            : json_real(p->y[s]));
        if (o && ds->source_line) json_object_set_new(o, where, json_integer((json_int_t)ds->source_line[s]));
        /* a multi-task model: every target (an atom target: one value per atom) */
        json_t *heads = p->n_heads ? json_object() : NULL;
        for (int k = 0; heads && k < p->n_heads; k++) {
            json_t *v;
            if (p->head_atom[k]) v = atom_values(ds, p->head_y[k], s);
            else v = json_real(p->head_y[k][s]);
            json_object_set_new(heads, p->head_key[k], v);
        }
        if (o && heads) json_object_set_new(o, "heads", heads);
        json_array_append_new(arr, o);
    }
    return json_pack("{s:s,s:s,s:I,s:f,s:o}", "job", id, "target", target, "n", (json_int_t)p->n, "seconds", seconds,
                     "predictions", arr);
}

/* Ingests the body into tmp_ptd; 0, or -1 with *r set. */
static int ingest_body(pt_app *app, pt_request *req, const char *tmp_ptd, const char *name, pt_format format,
                       int *is_db, pt_response *r)
{
    pt_ingest_options io;
    pt_ingest_options_init(&io);
    io.format = format;
    io.display_name = name;
    /* the work of one request is bounded by its atoms (and its edges,
     * pt_predict_options), not only its structures: a small gzip of a few
     * large structures would otherwise cost CPU-minutes */
    io.max_structures = PREDICT_MAX_STRUCTURES;
    io.max_total_atoms = app->opt.limits.predict_atoms;
    io.should_stop = pt_request_should_stop;
    io.user = req;
    pt_ingest_report rep;
    memset(&rep, 0, sizeof rep);
    pt_errors errs;
    pt_errors_init(&errs, 100);
    const char *src = req->body_path;
    int rc = pt_ingest_files(&src, 1, tmp_ptd, &io, &rep, &errs);
    *is_db = rep.n_by_format[PT_FORMAT_ASE_DB] > 0;
    if (rc != 0 && rep.stopped) {
        *r = pt_request_cancelled_response(req);
    } else if (rc != 0 && rep.over_limit) {
        *r = pt_problem_errors(413, &errs, "'%s' holds more than one prediction request may: send at most %d "
                               "structures and %llu atoms at once", name, PREDICT_MAX_STRUCTURES,
                               (unsigned long long)app->opt.limits.predict_atoms);
    } else if (rc != 0 && rep.write_failed) {
        char first[512];
        pt_errors_first(&errs, first, sizeof first);
        *r = pt_api_no_space(first) ? pt_api_disk_full("cannot hold the structures", strerror(ENOSPC))
                                    : pt_problem(500, "cannot hold the structures: %s", first);
    } else if (rc != 0) {
        *r = pt_problem_errors(422, &errs, "'%s' is not a valid structure file: %zu problem%s", name, errs.total,
                               errs.total == 1 ? "" : "s");
    } else if (rep.n_structs == 0 || rep.n_structs > PREDICT_MAX_STRUCTURES) {
        *r = pt_problem(422, "'%s' holds %llu structures; send 1 to %d per request", name,
                        (unsigned long long)rep.n_structs, PREDICT_MAX_STRUCTURES);
        rc = -1;
    }
    pt_errors_close(&errs);
    pt_ingest_report_close(&rep);
    return rc;
}

pt_response pt_api_job_predict(pt_request *req, void *ctx)
{
    pt_app *app = ctx;
    const char *id = pt_request_param(req, "id");
    const char *name = pt_request_query(req, "name");
    if (!name || !name[0]) name = "structures";
    pt_format format = PT_FORMAT_AUTO;
    const char *fmt = pt_request_query(req, "format");
    if (fmt && pt_format_parse(fmt, &format) != 0)
        pt_errors_add(&req->errors, "", 0, "query.format",
                      "unknown format '%.32s'; one of auto, extxyz, xyz, qm9, ase-db", fmt);
    if (req->errors.total) return pt_request_problem(req);
    char model[PATH_MAX], target[PT_STORE_NAME_MAX];
    pt_response r;
    if (pt_api_disk_check(app, &r) != 0) return r;
    if (find_model(app, req, id, model, sizeof model, target, sizeof target, &r) != 0) return r;
    if (!req->body_path || req->body_size == 0)
        return pt_problem(422, "the request body is empty: send the structures as an XYZ or extended XYZ file");
    char tmp[PATH_MAX], rid[PT_STORE_ID_MAX];
    if (pt_store_new_id("predict_", rid, sizeof rid) != PT_STORE_OK ||
        snprintf(tmp, sizeof tmp, "%s/%s.ptd", app->tmp_dir, rid) >= (int)sizeof tmp)
        return pt_problem(500, "cannot name a temporary file");
    int is_db = 0;
    if (ingest_body(app, req, tmp, name, format, &is_db, &r) != 0) {
        unlink(tmp);
        return r;
    }
    double t0 = now_s();
    pt_dataset ds;
    memset(&ds, 0, sizeof ds);
    char err[512];
    if (pt_dataset_open(&ds, tmp, err, sizeof err) != 0) {
        unlink(tmp);
        return pt_problem(500, "cannot read the ingested structures: %s", err);
    }
    unlink(tmp);   /* the mapping keeps the data until close */
    pt_errors errs;
    pt_errors_init(&errs, 10);
    pt_prediction p;
    pt_predict_options po = {.max_edges = app->opt.limits.predict_edges, .should_stop = pt_request_should_stop,
                             .user = req};
    if (pt_predict_dataset_ex(&p, model, &ds, &po, &errs) == 0) {
        r = pt_response_json(200, predictions_json(id, target, &ds, &p, now_s() - t0, is_db ? "row" : "line"));
        pt_prediction_close(&p);
    } else if (po.stopped == 2) {
        r = pt_request_cancelled_response(req);
    } else if (po.stopped == 1) {
        r = pt_problem_errors(413, &errs, "'%s' is more work than one prediction request may be", name);
    } else {
        char first[512];
        pt_errors_first(&errs, first, sizeof first);
        r = pt_problem(500, "cannot run the model of job %s: %s", id, first);
    }
    pt_errors_close(&errs);
    pt_dataset_close(&ds);
    return r;
}
