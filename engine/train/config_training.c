/* config_training.c — the `training` section of a job configuration
 * (config.h): the optimizer and its learning rate, the schedule object, the
 * split, normalisation, logging and checkpoint cadence, precision, and the
 * loss weights.  One parse function per object, each the list of its keys
 * and ranges read through the typed readers (config_read.c); called by the
 * validator's one entry point, pt_job_config_from_json (config.c). */
#include "engine/train/config_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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

void pt_cfg_parse_training(parse_ctx *c, const json_t *o, pt_job_training *t)
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
