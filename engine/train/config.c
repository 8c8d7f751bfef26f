/* config.c — the job configuration's validator (see config.h): the names of
 * its enumerations, the defaults, the one entry point pt_job_config_from_json
 * with the `model`, `batching` and `backend` sections and the relations
 * between sections, and the text/file front ends.  The other sections parse
 * in their own files (config_training.c, config_targets.c) through the typed
 * readers of config_read.c; the canonical form is config_json.c.  Each
 * section has one parse function that reads its keys one by one; every
 * reader reports into the same error list and leaves the default in place on
 * error, so all problems of a configuration are found in one pass.  The
 * section parsers look alike (keys, then one reader call per key): each is
 * the list of its keys and ranges. */
#include "engine/train/config.h"
#include "engine/train/config_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/schnet.h"   /* PT_SCHNET_MAX_INTERACTIONS */

const char *const readout_names[] = {"sum", "mean", NULL};
const char *const method_names[] = {"lpfhp", "tuple", "pad", "static64", "static2n",
                                           "dynamic", NULL};
const char *const optimizer_names[] = {"adam", "adamw", NULL};
const char *const schedule_names[] = {"constant", "plateau", "cosine", NULL};
const char *const normalize_names[] = {"none", "mean_std", "atomref", NULL};
const char *const backend_names[] = {"ipu-emulated", "mpi", NULL};
/* indexed by pt_precision */
const char *const precision_names[] = {"fp32", "bf16", NULL};
/* indexed by pt_job_energy_loss */
const char *const energy_loss_names[] = {"auto", "total", "per_atom", NULL};

const char *pt_job_batch_method_name(pt_job_batch_method m)
{
    return method_names[m];
}

const char *pt_job_normalize_name(pt_norm_kind n)
{
    return normalize_names[n];
}

const char *pt_job_precision_name(pt_precision p)
{
    return precision_names[p];
}

const char *pt_job_energy_loss_name(pt_job_energy_loss e)
{
    return energy_loss_names[e];
}

void pt_job_config_defaults(pt_job_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->target, sizeof(cfg->target), "%s", "energy_U0");
    snprintf(cfg->forces_key, sizeof(cfg->forces_key), "%s", "forces");
    cfg->model = (pt_job_model){.hidden = 100, .filters = 100, .interactions = 4,
                                .gaussians = 25, .cutoff = 6.0, .max_neighbors = PT_JOB_NEIGHBORS_AUTO,
                                .readout = PT_JOB_READOUT_SUM};
    cfg->batching = (pt_job_batching){.method = PT_JOB_BATCH_LPFHP, .model_batch_size = 0};
    pt_job_training *t = &cfg->training;
    t->epochs = 25;
    t->optimizer = PT_OPTIM_ADAM;
    t->lr = 1e-3;
    t->weight_decay = 0.0;
    t->schedule = pt_schedule_defaults(PT_SCHEDULE_CONSTANT, t->lr);
    t->split[0] = 0.8;
    t->split[1] = 0.1;
    t->split[2] = 0.1;
    t->normalize = PT_NORM_ATOMREF;
    t->log_every = 10;
    t->checkpoint_every = 200;
    t->precision = PT_PRECISION_FP32;
    t->loss = (pt_job_loss){.energy_weight = 1.0, .forces_weight = PT_JOB_WEIGHT_AUTO,
                            .stress_weight = 0.0, .energy = PT_JOB_ENERGY_AUTO};
    cfg->backend = (pt_job_backend){.kind = PT_JOB_BACKEND_IPU_EMULATED, .replication_factor = 0,
                                    .gradient_accumulation = 1, .device_iterations = 1,
                                    .merge_all_reduce = true, .use_async_loader = true,
                                    .prefetch_depth = 3, .device_memory_mb = 900,
                                    .ranks = 1};
}


/* --- sections (training: config_training.c; targets: config_targets.c) -- */

/* model.max_neighbors: 1..1024, "all" (or null, its older spelling) or "auto". */
static void read_neighbors(parse_ctx *c, const json_t *o, const char *s, int32_t *out)
{
    const json_t *v = json_object_get(o, "max_neighbors");
    if (!v) return;
    const char *w = json_is_string(v) ? json_string_value(v) : NULL;
    if (json_is_null(v) || (w && !strcmp(w, "all"))) {
        *out = PT_JOB_NEIGHBORS_ALL;
        return;
    }
    if (w && !strcmp(w, "auto")) {
        *out = PT_JOB_NEIGHBORS_AUTO;
        return;
    }
    const char *what = "an integer from 1 to 1024, \"all\", \"auto\" or null";
    if (w) fail(c, s, "max_neighbors", "must be %s, got \"%.40s\"", what, w);
    else if (!json_is_integer(v)) fail(c, s, "max_neighbors", "must be %s, got %s", what, type_name(v));
    else if (json_integer_value(v) < 1 || json_integer_value(v) > 1024)
        fail(c, s, "max_neighbors", "must be %s, got %lld", what,
             (long long)json_integer_value(v));
    else *out = (int32_t)json_integer_value(v);
}

static void parse_model(parse_ctx *c, const json_t *o, pt_job_model *m)
{
    static const char *const keys[] = {"hidden", "filters", "interactions", "gaussians", "cutoff",
                                       "max_neighbors", "readout", NULL};
    const char *s = "model";
    check_keys(c, o, s, keys);
    read_int(c, o, s, "hidden", 2, 4096, NULL, &m->hidden);
    read_int(c, o, s, "filters", 1, 4096, NULL, &m->filters);
    read_int(c, o, s, "interactions", 1, PT_SCHNET_MAX_INTERACTIONS, NULL, &m->interactions);
    read_int(c, o, s, "gaussians", 2, 1024, NULL, &m->gaussians);
    read_number(c, o, s, "cutoff", 0.0, 1, 100.0, 0, &m->cutoff);
    read_neighbors(c, o, s, &m->max_neighbors);
    int r = (int)m->readout;
    read_enum(c, o, s, "readout", readout_names, &r);
    m->readout = (pt_job_readout)r;
}

static void parse_batching(parse_ctx *c, const json_t *o, pt_job_batching *b)
{
    static const char *const keys[] = {"method", "max_nodes", "max_edges", "max_graphs",
                                       "model_batch_size", NULL};
    const char *s = "batching";
    check_keys(c, o, s, keys);
    int method = (int)b->method;
    read_enum(c, o, s, "method", method_names, &method);
    b->method = (pt_job_batch_method)method;
    read_int(c, o, s, "max_nodes", 1, 1000000, "auto", &b->max_nodes);
    read_int(c, o, s, "max_edges", 1, 100000000, "auto", &b->max_edges);
    read_int(c, o, s, "max_graphs", 1, 65536, "auto", &b->max_graphs);
    read_int(c, o, s, "model_batch_size", 1, 65536, "auto", &b->model_batch_size);
}

static void parse_backend(parse_ctx *c, const json_t *o, pt_job_backend *b)
{
    static const char *const keys[] = {"kind", "replication_factor", "gradient_accumulation",
                                       "device_iterations", "merge_all_reduce",
                                       "use_async_loader", "prefetch_depth", "device_memory_mb",
                                       "threads", "ranks", "static_shapes", "zero_stage",
                                       "offload_optimizer", NULL};
    const char *s = "backend";
    check_keys(c, o, s, keys);
    int kind = (int)b->kind;
    read_enum(c, o, s, "kind", backend_names, &kind);
    b->kind = (pt_job_backend_kind)kind;
    read_int(c, o, s, "replication_factor", 1, 1024, "auto", &b->replication_factor);
    read_int(c, o, s, "gradient_accumulation", 1, 65536, NULL, &b->gradient_accumulation);
    read_int(c, o, s, "device_iterations", 1, 65536, NULL, &b->device_iterations);
    read_bool(c, o, s, "merge_all_reduce", &b->merge_all_reduce);
    read_bool(c, o, s, "use_async_loader", &b->use_async_loader);
    read_bool(c, o, s, "static_shapes", &b->static_shapes);
    read_int(c, o, s, "prefetch_depth", 1, 64, NULL, &b->prefetch_depth);
    read_int(c, o, s, "device_memory_mb", 1, 1048576, NULL, &b->device_memory_mb);
    read_int(c, o, s, "threads", 1, 1024, "auto", &b->threads);
    read_int(c, o, s, "ranks", 1, 4096, NULL, &b->ranks);
    read_int(c, o, s, "zero_stage", 0, 3, NULL, &b->zero_stage);
    read_bool(c, o, s, "offload_optimizer", &b->offload_optimizer);
}

/* target and forces_key: a dataset's key name. */
static void parse_key(parse_ctx *c, const json_t *v, const char *key, const char *what,
                      const char *example, char *out)
{
    if (!json_is_string(v) || json_string_length(v) == 0 ||
        json_string_length(v) >= PT_KEY_MAX) {
        fail(c, "", key, "must be the name of %s (1 to %d characters, e.g. \"%s\"), got %s", what,
             PT_KEY_MAX - 1, example,
             json_is_string(v) ? "a string of the wrong length" : type_name(v));
        return;
    }
    snprintf(out, PT_KEY_MAX, "%s", json_string_value(v));
}

int pt_job_config_from_json(pt_job_config *cfg, const json_t *root, const char *file,
                            pt_errors *errs)
{
    parse_ctx c = {.errs = errs, .file = file};
    pt_job_config_defaults(cfg);
    if (!json_is_object(root)) {
        fail(&c, "", "", "the job configuration must be a JSON object, got %s",
             root ? type_name(root) : "nothing");
        return -1;
    }
    static const char *const keys[] = {"target", "targets", "forces_key", "model", "batching",
                                       "training", "backend", "max_runtime_seconds", NULL};
    check_keys(&c, root, "", keys);
    const json_t *v = json_object_get(root, "target");
    if (v)
        parse_key(&c, v, "target", "a numeric per-structure key of the dataset", "energy_U0",
                  cfg->target);
    if ((v = json_object_get(root, "forces_key")))
        parse_key(&c, v, "forces_key", "the dataset's per-atom force labels", "forces",
                  cfg->forces_key);
    if ((v = json_object_get(root, "max_runtime_seconds")) && !json_is_null(v)) {
        if (!json_is_number(v) || !(json_number_value(v) > 0) || !isfinite(json_number_value(v)))
            fail(&c, "", "max_runtime_seconds", "must be a number of seconds > 0, or null");
        else cfg->max_runtime_seconds = round15(json_number_value(v));
    }
    if ((v = get_section(&c, root, "", "model"))) parse_model(&c, v, &cfg->model);
    if ((v = get_section(&c, root, "", "batching"))) parse_batching(&c, v, &cfg->batching);
    if ((v = get_section(&c, root, "", "training"))) pt_cfg_parse_training(&c, v, &cfg->training);
    if ((v = get_section(&c, root, "", "backend"))) parse_backend(&c, v, &cfg->backend);
    cfg->training.schedule.lr = cfg->training.lr;
    pt_cfg_parse_targets(&c, root, cfg);

    /* relations between sections */
    if (cfg->training.normalize == PT_NORM_ATOMREF &&
        cfg->model.readout != PT_JOB_READOUT_SUM)
        fail(&c, "training", "normalize",
             "\"atomref\" needs model.readout \"sum\" (per-atom references add up over atoms); "
             "use \"mean_std\" or \"none\" with readout \"mean\"");
    const pt_job_backend *k = &cfg->backend;
    if (k->kind != PT_JOB_BACKEND_MPI && k->ranks != 1)
        fail(&c, "backend", "ranks", "more than one rank needs backend.kind \"mpi\", got %d ranks "
             "with \"%s\"", (int)k->ranks, backend_names[k->kind]);
    if (k->kind == PT_JOB_BACKEND_MPI && k->replication_factor % k->ranks != 0)   /* 0: auto */
        fail(&c, "backend", "replication_factor",
             "must be a multiple of backend.ranks (%d): each rank runs replication_factor / ranks "
             "replicas; got %d", (int)k->ranks, (int)k->replication_factor);
    if (k->offload_optimizer && k->zero_stage < 1)
        fail(&c, "backend", "offload_optimizer",
             "needs backend.zero_stage 1, 2 or 3: the Adam state offloaded is each replica's "
             "shard; got zero_stage 0");
    /* one process holds a step's packs and batch buffers: bounded well below
     * the 32-bit counts the engine indexes them with */
    int64_t R = k->replication_factor ? k->replication_factor : PT_JOB_AUTO_GLOBAL_PACKS;
    int64_t b = cfg->batching.model_batch_size ? cfg->batching.model_batch_size
                                               : PT_JOB_AUTO_GLOBAL_PACKS;
    int64_t step = R * k->gradient_accumulation * b;
    int64_t slots = R *
                    ((int64_t)k->gradient_accumulation * k->device_iterations +
                     (k->use_async_loader ? k->prefetch_depth : 0));
    if (step > PT_JOB_MAX_STEP_PACKS || slots > PT_JOB_MAX_STEP_PACKS)
        fail(&c, "backend", NULL,
             "replication_factor x gradient_accumulation x model_batch_size = %lld packs per "
             "step (with %lld batch buffers) is too large: at most %d of each", (long long)step,
             (long long)slots, PT_JOB_MAX_STEP_PACKS);
    return c.failed ? -1 : 0;
}

int pt_job_config_parse(pt_job_config *cfg, const char *text, size_t len, const char *file,
                        pt_errors *errs)
{
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        pt_job_config_defaults(cfg);
        pt_errors_add(errs, file, jerr.line > 0 ? jerr.line : 0, "",
                      "invalid JSON at column %d: %s", jerr.column, jerr.text);
        return -1;
    }
    int rc = pt_job_config_from_json(cfg, root, file, errs);
    json_decref(root);
    return rc;
}

int pt_job_config_load(pt_job_config *cfg, const char *path, pt_errors *errs)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        pt_job_config_defaults(cfg);
        pt_errors_add(errs, path, 0, "", "cannot open the job configuration: %s", strerror(errno));
        return -1;
    }
    /* a job configuration is a few hundred bytes; 1 MB is generous */
    enum { LIMIT = 1 << 20 };
    char *buf = malloc(LIMIT + 1);
    size_t n = buf ? fread(buf, 1, LIMIT + 1, f) : 0;
    int read_error = ferror(f);
    fclose(f);
    int rc = -1;
    pt_job_config_defaults(cfg);
    if (!buf) pt_errors_add(errs, path, 0, "", "out of memory reading the job configuration");
    else if (read_error) pt_errors_add(errs, path, 0, "", "read error");
    else if (n > LIMIT)
        pt_errors_add(errs, path, 0, "", "job configuration larger than %d bytes", LIMIT);
    else rc = pt_job_config_parse(cfg, buf, n, path, errs);
    free(buf);
    return rc;
}
