/* config.c — job configuration: defaults, validating parser, canonical JSON;
 * see config.h.  Each section has one parse function that reads its keys one
 * by one through small typed readers; every reader reports into the same
 * error list and leaves the default in place on error, so all problems of a
 * configuration are found in one pass.  The section parsers look alike (keys,
 * then one reader call per key): each is the list of its keys and ranges. */
#include "engine/train/config.h"
#include "engine/train/config_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/schnet.h"   /* PT_SCHNET_MAX_INTERACTIONS */

const char *const readout_names[] = {"sum", "mean", NULL};
static const char *const method_names[] = {"lpfhp", "tuple", "pad", "static64", "static2n",
                                           "dynamic", NULL};
static const char *const optimizer_names[] = {"adam", "adamw", NULL};
static const char *const schedule_names[] = {"constant", "plateau", "cosine", NULL};
const char *const normalize_names[] = {"none", "mean_std", "atomref", NULL};
static const char *const backend_names[] = {"ipu-emulated", "mpi", NULL};
/* indexed by pt_precision */
static const char *const precision_names[] = {"fp32", "bf16", NULL};
/* indexed by pt_job_energy_loss */
static const char *const energy_loss_names[] = {"auto", "total", "per_atom", NULL};

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
                                .gaussians = 25, .cutoff = 6.0, .max_neighbors = 32,
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

/* --- typed readers ------------------------------------------------------ */

void fail(parse_ctx *c, const char *section, const char *key, const char *fmt, ...)
{
    char path[PT_ERR_FIELD_MAX];
    if (section && section[0] && key) snprintf(path, sizeof path, "%s.%s", section, key);
    else snprintf(path, sizeof path, "%s", key ? key : section ? section : "");
    va_list ap;
    va_start(ap, fmt);
    pt_errors_addv(c->errs, c->file, 0, path, fmt, ap);
    va_end(ap);
    c->failed = 1;
}

const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Keeps 15 significant digits so that printing and re-parsing is exact. */
double round15(double x)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.15g", x);
    return strtod(buf, NULL);
}

void check_keys(parse_ctx *c, const json_t *obj, const char *section,
                       const char *const *allowed)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)obj, key, value) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++) ok |= !strcmp(*a, key);
        if (ok) continue;
        char list[PT_ERR_MSG_MAX - 64] = "";
        size_t n = 0;
        for (const char *const *a = allowed; *a && n < sizeof list; a++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", a == allowed ? "" : ", ", *a);
        fail(c, section, key, "unknown key; allowed here: %s", list);
    }
}

/* An integer in lo..hi, or (when alt is "auto" or "null") that alternative,
 * stored as 0.  Returns 1 when set, 0 when absent, -1 on error. */
static int read_int64(parse_ctx *c, const json_t *obj, const char *section, const char *key,
                      long long lo, long long hi, const char *alt, int64_t *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    if (alt && (!strcmp(alt, "null") ? json_is_null(v)
                : json_is_string(v) && !strcmp(json_string_value(v), alt))) {
        *out = 0;
        return 1;
    }
    char what[128];
    snprintf(what, sizeof what, "an integer from %lld to %lld%s%s%s%s", lo, hi,
             alt ? " or " : "", alt && strcmp(alt, "null") ? "\"" : "", alt ? alt : "",
             alt && strcmp(alt, "null") ? "\"" : "");
    if (!json_is_integer(v)) {
        if (json_is_string(v))
            fail(c, section, key, "must be %s, got \"%.40s\"", what, json_string_value(v));
        else
            fail(c, section, key, "must be %s, got %s", what, type_name(v));
        return -1;
    }
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        fail(c, section, key, "must be %s, got %lld", what, x);
        return -1;
    }
    *out = x;
    return 1;
}

static int read_int(parse_ctx *c, const json_t *obj, const char *section, const char *key,
                    long long lo, long long hi, const char *alt, int32_t *out)
{
    int64_t x = *out;
    int rc = read_int64(c, obj, section, key, lo, hi, alt, &x);
    *out = (int32_t)x;
    return rc;
}

/* A number in the interval lo..hi; `open_lo` excludes lo.  With `nullable`,
 * JSON null is accepted and stored as 0. */
int read_number(parse_ctx *c, const json_t *obj, const char *section, const char *key,
                       double lo, int open_lo, double hi, int nullable, double *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    if (nullable && json_is_null(v)) {
        *out = 0.0;
        return 1;
    }
    char range[96];
    snprintf(range, sizeof range, "a number %s %g and at most %g%s",
             open_lo ? "above" : "of at least", lo, hi, nullable ? ", or null" : "");
    if (!json_is_number(v)) {
        fail(c, section, key, "must be %s, got %s", range, type_name(v));
        return -1;
    }
    double x = json_number_value(v);
    if (x < lo || (open_lo && x == lo) || x > hi) {
        fail(c, section, key, "must be %s, got %g", range, x);
        return -1;
    }
    *out = round15(x);
    return 1;
}

int read_enum(parse_ctx *c, const json_t *obj, const char *section, const char *key,
                     const char *const *names, int *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    char list[160] = "";
    size_t n = 0;
    for (const char *const *a = names; *a && n < sizeof list; a++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s\"%s\"", a == names ? "" : ", ", *a);
    if (!json_is_string(v)) {
        fail(c, section, key, "must be one of %s, got %s", list, type_name(v));
        return -1;
    }
    for (int i = 0; names[i]; i++) {
        if (!strcmp(names[i], json_string_value(v))) {
            *out = i;
            return 1;
        }
    }
    fail(c, section, key, "must be one of %s, got \"%.40s\"", list, json_string_value(v));
    return -1;
}

static void read_bool(parse_ctx *c, const json_t *obj, const char *section, const char *key,
                      bool *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return;
    if (!json_is_boolean(v)) {
        fail(c, section, key, "must be true or false, got %s", type_name(v));
        return;
    }
    *out = json_is_true(v);
}

/* The object at key, or NULL when absent (defaults apply) or not an object. */
static const json_t *get_section(parse_ctx *c, const json_t *obj, const char *section,
                                 const char *key)
{
    const json_t *v = json_object_get(obj, key);
    if (v && !json_is_object(v)) {
        fail(c, section, key, "must be an object, got %s", type_name(v));
        return NULL;
    }
    return v;
}

/* --- sections ----------------------------------------------------------- */

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
    read_int(c, o, s, "max_neighbors", 1, 1024, "null", &m->max_neighbors);   /* null: unlimited (0) */
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

/* Keys of the schedule object and the kind each belongs to (-1: every kind,
 * -2: every kind but constant). */
static const char *const schedule_keys[] = {"kind", "factor", "patience", "threshold",
                                            "cooldown", "min_lr", "warmup_steps", NULL};
static const int schedule_key_kind[] = {-1, PT_SCHEDULE_PLATEAU, PT_SCHEDULE_PLATEAU,
                                        PT_SCHEDULE_PLATEAU, PT_SCHEDULE_PLATEAU, -2,
                                        PT_SCHEDULE_COSINE};

static void parse_schedule(parse_ctx *c, const json_t *o, double lr, pt_schedule_params *p)
{
    const char *s = "training.schedule";
    check_keys(c, o, s, schedule_keys);
    int kind = PT_SCHEDULE_CONSTANT;
    int rc = read_enum(c, o, s, "kind", schedule_names, &kind);
    if (rc == 0) fail(c, s, "kind", "is required: one of \"constant\", \"plateau\", \"cosine\"");
    *p = pt_schedule_defaults((pt_schedule_kind)kind, lr);
    if (rc != 1) return;
    for (int i = 1; schedule_keys[i]; i++) {
        int want = schedule_key_kind[i];
        int applies = want == kind || (want == -2 && kind != PT_SCHEDULE_CONSTANT);
        if (json_object_get(o, schedule_keys[i]) && !applies)
            fail(c, s, schedule_keys[i], "does not apply to schedule kind \"%s\"",
                 schedule_names[kind]);
    }
    if (kind == PT_SCHEDULE_PLATEAU) {
        read_number(c, o, s, "factor", 0.0, 1, 0.999999, 0, &p->factor);
        read_int(c, o, s, "patience", 0, 1000000, NULL, &p->patience);
        read_number(c, o, s, "threshold", 0.0, 0, 0.999999, 0, &p->threshold);
        read_int(c, o, s, "cooldown", 0, 1000000, NULL, &p->cooldown);
    }
    if (kind == PT_SCHEDULE_COSINE) {
        int64_t w = 0;
        read_int64(c, o, s, "warmup_steps", 0, 1000000000, NULL, &w);
        p->warmup_steps = (long)w;
    }
    if (kind != PT_SCHEDULE_CONSTANT) {
        int given = read_number(c, o, s, "min_lr", 0.0, 0, 10.0, 0, &p->min_lr);
        if (given >= 0 && p->min_lr >= lr)
            fail(c, s, "min_lr", "must be below training.lr (%g), got %g%s", lr, p->min_lr,
                 given ? "" : " (the default)");
    }
}

static void parse_split(parse_ctx *c, const json_t *v, double split[3])
{
    const char *s = "training";
    if (!json_is_array(v) || json_array_size(v) != 3) {
        if (json_is_array(v))
            fail(c, s, "split", "must be an array of 3 fractions [train, validation, test], "
                 "got %zu elements", json_array_size(v));
        else
            fail(c, s, "split", "must be an array of 3 fractions [train, validation, test], "
                 "got %s", type_name(v));
        return;
    }
    double f[3];
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        const json_t *x = json_array_get(v, (size_t)i);
        char path[32];
        snprintf(path, sizeof path, "split[%d]", i);
        f[i] = json_is_number(x) ? json_number_value(x) : -1.0;
        if (!json_is_number(x) || f[i] < 0.0 || f[i] > 1.0 || (i < 2 && f[i] == 0.0)) {
            const char *what = i == 0 ? "the train fraction, above 0 and at most 1"
                             : i == 1 ? "the validation fraction, above 0 and at most 1"
                                      : "the test fraction, from 0 to 1";
            if (json_is_number(x)) fail(c, s, path, "must be %s, got %g", what, f[i]);
            else fail(c, s, path, "must be %s, got %s", what, type_name(x));
            ok = 0;
        }
    }
    if (!ok) return;
    double sum = f[0] + f[1] + f[2];
    if (fabs(sum - 1.0) > 1e-6) {
        fail(c, s, "split", "fractions must sum to 1, got %g", sum);
        return;
    }
    for (int i = 0; i < 3; i++) split[i] = round15(f[i]);
}

/* A loss weight: a number in [0, 1e6], or "auto" when the key has one. */
static void read_weight(parse_ctx *c, const json_t *o, const char *key, int can_auto,
                        double *out)
{
    const char *s = "training.loss";
    const json_t *v = json_object_get(o, key);
    if (!v) return;
    if (can_auto && json_is_string(v) && !strcmp(json_string_value(v), "auto")) {
        *out = PT_JOB_WEIGHT_AUTO;
        return;
    }
    const char *alt = can_auto ? ", or \"auto\"" : "";
    if (!json_is_number(v) || !(json_number_value(v) >= 0.0) || json_number_value(v) > 1e6) {
        if (json_is_number(v))
            fail(c, s, key, "must be a weight from 0 to 1e+06%s, got %g", alt,
                 json_number_value(v));
        else if (json_is_string(v))
            fail(c, s, key, "must be a weight from 0 to 1e+06%s, got \"%.40s\"", alt,
                 json_string_value(v));
        else
            fail(c, s, key, "must be a weight from 0 to 1e+06%s, got %s", alt, type_name(v));
        return;
    }
    *out = round15(json_number_value(v));
}

static void parse_loss(parse_ctx *c, const json_t *o, pt_job_loss *l)
{
    static const char *const keys[] = {"energy_weight", "forces_weight", "stress_weight",
                                       "energy", NULL};
    check_keys(c, o, "training.loss", keys);
    read_weight(c, o, "energy_weight", 0, &l->energy_weight);
    read_weight(c, o, "forces_weight", 1, &l->forces_weight);
    read_weight(c, o, "stress_weight", 0, &l->stress_weight);
    int e = (int)l->energy;
    read_enum(c, o, "training.loss", "energy", energy_loss_names, &e);
    l->energy = (pt_job_energy_loss)e;
    if (l->energy_weight == 0.0 && l->forces_weight == 0.0 && l->stress_weight == 0.0)
        fail(c, "training", "loss", "every weight is 0: nothing would be trained; give "
             "energy_weight, forces_weight or stress_weight a value above 0");
}

static void parse_training(parse_ctx *c, const json_t *o, pt_job_training *t)
{
    static const char *const keys[] = {"epochs", "max_steps", "optimizer", "lr", "weight_decay",
                                       "clip_grad_norm", "schedule", "early_stopping_patience",
                                       "split", "seed", "normalize", "log_every",
                                       "checkpoint_every", "precision", "loss", NULL};
    const char *s = "training";
    check_keys(c, o, s, keys);
    read_int(c, o, s, "epochs", 1, 1000000, NULL, &t->epochs);
    read_int64(c, o, s, "max_steps", 1, INT64_MAX, "null", &t->max_steps);
    int opt = (int)t->optimizer;
    read_enum(c, o, s, "optimizer", optimizer_names, &opt);
    t->optimizer = (pt_optim_kind)opt;
    read_number(c, o, s, "lr", 0.0, 1, 10.0, 0, &t->lr);
    t->weight_decay = pt_optim_defaults(t->optimizer).weight_decay;
    read_number(c, o, s, "weight_decay", 0.0, 0, 1.0, 0, &t->weight_decay);
    read_number(c, o, s, "clip_grad_norm", 0.0, 1, 1e9, 1, &t->clip_grad_norm);
    const json_t *sched = get_section(c, o, s, "schedule");
    t->schedule = pt_schedule_defaults(PT_SCHEDULE_CONSTANT, t->lr);
    if (sched) parse_schedule(c, sched, t->lr, &t->schedule);
    read_int(c, o, s, "early_stopping_patience", 1, 1000000, "null", &t->early_stopping_patience);
    const json_t *split = json_object_get(o, "split");
    if (split) parse_split(c, split, t->split);
    int64_t seed = (int64_t)t->seed;
    read_int64(c, o, s, "seed", 0, INT64_MAX, NULL, &seed);
    t->seed = (uint64_t)seed;
    int norm = (int)t->normalize;
    read_enum(c, o, s, "normalize", normalize_names, &norm);
    t->normalize = (pt_norm_kind)norm;
    read_int(c, o, s, "log_every", 1, 1000000, NULL, &t->log_every);
    read_int(c, o, s, "checkpoint_every", 1, 1000000000, "null", &t->checkpoint_every);
    int prec = (int)t->precision;
    read_enum(c, o, s, "precision", precision_names, &prec);
    t->precision = (pt_precision)prec;
    const json_t *loss = get_section(c, o, s, "loss");
    if (loss) parse_loss(c, loss, &t->loss);
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
    if ((v = get_section(&c, root, "", "training"))) parse_training(&c, v, &cfg->training);
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

/* --- canonical form ----------------------------------------------------- */

static json_t *int_or(long long x, const char *word)
{
    if (x) return json_integer(x);
    return word ? json_string(word) : json_null();
}

static json_t *schedule_to_json(const pt_schedule_params *p)
{
    json_t *o = json_object();
    json_object_set_new(o, "kind", json_string(schedule_names[p->kind]));
    if (p->kind == PT_SCHEDULE_PLATEAU) {
        json_object_set_new(o, "factor", json_real(p->factor));
        json_object_set_new(o, "patience", json_integer(p->patience));
        json_object_set_new(o, "threshold", json_real(p->threshold));
        json_object_set_new(o, "cooldown", json_integer(p->cooldown));
    }
    if (p->kind == PT_SCHEDULE_COSINE) json_object_set_new(o, "warmup_steps", json_integer(p->warmup_steps));
    if (p->kind != PT_SCHEDULE_CONSTANT) json_object_set_new(o, "min_lr", json_real(p->min_lr));
    return o;
}

json_t *pt_job_config_to_json(const pt_job_config *cfg)
{
    const pt_job_model *m = &cfg->model;
    const pt_job_batching *b = &cfg->batching;
    const pt_job_training *t = &cfg->training;
    const pt_job_backend *k = &cfg->backend;
    json_t *o = json_pack(
        "{s:s, s:{s:i, s:i, s:i, s:i, s:f, s:o, s:s}, s:{s:s, s:o, s:o, s:o, s:o},"
        " s:{s:i, s:o, s:s, s:f, s:f, s:o, s:o, s:o, s:[f,f,f], s:I, s:s, s:i, s:o, s:s},"
        " s:{s:s, s:o, s:i, s:i, s:b, s:b, s:i, s:i, s:o, s:i, s:b}}",
        "target", cfg->target,
        "model", "hidden", (int)m->hidden, "filters", (int)m->filters,
        "interactions", (int)m->interactions, "gaussians", (int)m->gaussians,
        "cutoff", m->cutoff, "max_neighbors", int_or(m->max_neighbors, NULL),
        "readout", readout_names[m->readout],
        "batching", "method", method_names[b->method], "max_nodes", int_or(b->max_nodes, "auto"),
        "max_edges", int_or(b->max_edges, "auto"), "max_graphs", int_or(b->max_graphs, "auto"),
        "model_batch_size", int_or(b->model_batch_size, "auto"),
        "training", "epochs", (int)t->epochs, "max_steps", int_or(t->max_steps, NULL),
        "optimizer", optimizer_names[t->optimizer], "lr", t->lr, "weight_decay", t->weight_decay,
        "clip_grad_norm", t->clip_grad_norm > 0 ? json_real(t->clip_grad_norm) : json_null(),
        "schedule", schedule_to_json(&t->schedule),
        "early_stopping_patience", int_or(t->early_stopping_patience, NULL),
        "split", t->split[0], t->split[1], t->split[2], "seed", (json_int_t)t->seed,
        "normalize", normalize_names[t->normalize], "log_every", (int)t->log_every,
        "checkpoint_every", int_or(t->checkpoint_every, NULL),
        "precision", precision_names[t->precision],
        "backend", "kind", backend_names[k->kind], "replication_factor",
        int_or(k->replication_factor, "auto"),
        "gradient_accumulation", (int)k->gradient_accumulation,
        "device_iterations", (int)k->device_iterations, "merge_all_reduce", (int)k->merge_all_reduce,
        "use_async_loader", (int)k->use_async_loader, "prefetch_depth", (int)k->prefetch_depth,
        "device_memory_mb", (int)k->device_memory_mb, "threads", int_or(k->threads, "auto"),
        "ranks", (int)k->ranks, "static_shapes", (int)k->static_shapes);
    const pt_job_loss *l = &t->loss;
    json_t *loss = json_pack("{s:f, s:o, s:f, s:s}", "energy_weight", l->energy_weight,
                             "forces_weight", l->forces_weight == PT_JOB_WEIGHT_AUTO
                                                  ? json_string("auto")
                                                  : json_real(l->forces_weight),
                             "stress_weight", l->stress_weight, "energy",
                             energy_loss_names[l->energy]);
    if (!o || !loss) {
        json_decref(o);
        json_decref(loss);
        return NULL;
    }
    json_object_set_new(json_object_get(o, "training"), "loss", loss);
    json_object_set_new(o, "forces_key", json_string(cfg->forces_key));
    if (cfg->n_targets) {   /* the list replaces the single target */
        json_object_del(o, "target");
        json_object_set_new(o, "targets", pt_cfg_targets_to_json(cfg));
    }
    /* only when set: the form jobs were stored in before the key existed */
    if (o && cfg->max_runtime_seconds > 0)
        json_object_set_new(o, "max_runtime_seconds", json_real(cfg->max_runtime_seconds));
    json_t *ob = o ? json_object_get(o, "backend") : NULL;
    if (ob && k->zero_stage) json_object_set_new(ob, "zero_stage", json_integer(k->zero_stage));
    if (ob && k->offload_optimizer) json_object_set_new(ob, "offload_optimizer", json_true());
    return o;
}

char *pt_job_config_dump(const pt_job_config *cfg)
{
    json_t *o = pt_job_config_to_json(cfg);
    if (!o) return NULL;
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
    json_decref(o);
    return s;
}
