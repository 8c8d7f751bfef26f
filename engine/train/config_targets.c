/* config_targets.c — the `targets` list of a job configuration (config.h):
 * several targets trained by one model, one output head each.  Parsed after
 * the sections, since a target's normalize and readout default to
 * training.normalize and model.readout; its relations to `target` and to
 * training.loss are checked here, so every message about a target comes
 * from one place. */
#include "engine/train/config_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char *const level_names[] = {"graph", "atom", NULL};

const char *pt_job_level_name(pt_job_level l)
{
    return level_names[l];
}

const char *pt_job_readout_name(pt_job_readout r)
{
    return readout_names[r];
}

int pt_job_config_n_targets(const pt_job_config *cfg)
{
    return cfg->n_targets > 0 ? cfg->n_targets : 1;
}

pt_job_target pt_job_config_target(const pt_job_config *cfg, int k)
{
    if (cfg->n_targets > 0) return cfg->targets[k];
    pt_job_target t = {.level = PT_JOB_LEVEL_GRAPH, .weight = cfg->training.loss.energy_weight,
                       .normalize = cfg->training.normalize, .readout = cfg->model.readout};
    snprintf(t.key, sizeof t.key, "%s", cfg->target);
    return t;
}

int pt_job_config_multi_head(const pt_job_config *cfg)
{
    return cfg->n_targets > 1 || (cfg->n_targets == 1 && cfg->targets[0].level != PT_JOB_LEVEL_GRAPH);
}

/* A key names a head's tensors (heads.KEY.lin1.weight): letters, digits, _ . - */
static int key_ok(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n >= PT_KEY_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)k[i]) && !strchr("_.-", k[i])) return 0;
    return 1;
}

static void parse_one(parse_ctx *c, const json_t *o, int i, const pt_job_config *cfg,
                      pt_job_target *t)
{
    static const char *const keys[] = {"key", "level", "weight", "normalize", "readout", NULL};
    char s[32];
    snprintf(s, sizeof s, "targets[%d]", i);
    if (!json_is_object(o)) {
        fail(c, "", s, "must be an object {\"key\", \"level\", \"weight\", \"normalize\", "
             "\"readout\"}, got %s", type_name(o));
        return;
    }
    check_keys(c, o, s, keys);
    const json_t *k = json_object_get(o, "key");
    if (!k)
        fail(c, s, "key", "is required: the dataset key this target is trained on, e.g. \"gap\"");
    else if (!json_is_string(k) || !key_ok(json_string_value(k)))
        fail(c, s, "key", "must be a dataset key of 1 to %d letters, digits, '_', '.' or '-' "
             "(it names the head's tensors), got %s%.40s%s", PT_KEY_MAX - 1,
             json_is_string(k) ? "\"" : "", json_is_string(k) ? json_string_value(k)
                                                              : type_name(k),
             json_is_string(k) ? "\"" : "");
    else
        snprintf(t->key, sizeof t->key, "%s", json_string_value(k));
    int level = PT_JOB_LEVEL_GRAPH;
    read_enum(c, o, s, "level", level_names, &level);
    t->level = (pt_job_level)level;
    t->weight = 1.0;
    read_number(c, o, s, "weight", 0.0, 0, 1e6, 0, &t->weight);
    int atom = t->level == PT_JOB_LEVEL_ATOM;
    /* an atom target's values are per atom already: no per-element sum to fit */
    int norm = atom && cfg->training.normalize == PT_NORM_ATOMREF ? PT_NORM_MEAN_STD
                                                                   : (int)cfg->training.normalize;
    int given_norm = read_enum(c, o, s, "normalize", normalize_names, &norm);
    t->normalize = (pt_norm_kind)norm;
    int readout = atom ? PT_JOB_READOUT_SUM : (int)cfg->model.readout;
    int given_readout = read_enum(c, o, s, "readout", readout_names, &readout);
    t->readout = (pt_job_readout)readout;
    if (atom && given_readout == 1 && t->readout != PT_JOB_READOUT_SUM)
        fail(c, s, "readout", "an atom-level target is not read out (one prediction per atom): "
             "leave readout out, or \"sum\"");
    if (atom && given_norm == 1 && t->normalize == PT_NORM_ATOMREF)
        fail(c, s, "normalize", "an atom-level target has no per-element sum to fit: use "
             "\"mean_std\" or \"none\"");
    if (!atom && t->normalize == PT_NORM_ATOMREF && t->readout != PT_JOB_READOUT_SUM)
        fail(c, s, given_norm == 1 ? "normalize" : "readout",
             "\"atomref\" normalisation needs readout \"sum\" (per-atom references add up over "
             "atoms); use normalize \"mean_std\" or \"none\" with readout \"mean\"");
}

void pt_cfg_parse_targets(parse_ctx *c, const json_t *root, pt_job_config *cfg)
{
    const json_t *v = json_object_get(root, "targets");
    if (!v) return;
    if (json_object_get(root, "target")) {
        fail(c, "", "targets", "give \"target\" (one) or \"targets\" (a list), not both");
        return;
    }
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_array(v) || n < 1 || n > PT_JOB_MAX_TARGETS) {
        fail(c, "", "targets", "must be a list of 1 to %d targets {\"key\", ...}, got %s",
             PT_JOB_MAX_TARGETS, json_is_array(v) ? "a list of another length" : type_name(v));
        return;
    }
    int before = c->failed;
    c->failed = 0;
    for (size_t i = 0; i < n; i++) {
        pt_job_target *t = &cfg->targets[i];
        memset(t, 0, sizeof *t);
        parse_one(c, json_array_get(v, i), (int)i, cfg, t);
        for (size_t j = 0; j < i && t->key[0]; j++)
            if (!strcmp(cfg->targets[j].key, t->key)) {
                char s[32];
                snprintf(s, sizeof s, "targets[%zu]", i);
                fail(c, s, "key", "'%s' is targets[%zu] already: one head per key", t->key, j);
            }
    }
    int bad = c->failed;
    c->failed |= before;
    if (bad) return;
    cfg->n_targets = (int32_t)n;
    snprintf(cfg->target, sizeof cfg->target, "%s", cfg->targets[0].key);

    /* forces and stress are -d/dr of the first target, the energy: its weight
     * is the energy's */
    pt_job_loss *l = &cfg->training.loss;
    const json_t *tr = json_object_get(root, "training");
    const json_t *lo = tr ? json_object_get(tr, "loss") : NULL;
    if (lo && json_object_get(lo, "energy_weight") && l->energy_weight != cfg->targets[0].weight)
        fail(c, "training.loss", "energy_weight",
             "with targets, the energy is the first target ('%s') and its weight is "
             "targets[0].weight (%g); leave energy_weight out, or give it the same value, got %g",
             cfg->targets[0].key, cfg->targets[0].weight, l->energy_weight);
    l->energy_weight = cfg->targets[0].weight;
    /* a per-atom first target (charges, magnetic moments, ...) is trained on
     * its own per-atom errors: no energy, so no forces, stress or energy form */
    if (cfg->targets[0].level == PT_JOB_LEVEL_ATOM &&
        (l->forces_weight > 0.0 || l->stress_weight > 0.0))
        fail(c, "targets[0]", "level", "forces and stress are -d/dr of the first target, which "
             "must then be a graph-level energy, not per atom");
    if (cfg->targets[0].level == PT_JOB_LEVEL_ATOM && l->energy == PT_JOB_ENERGY_PER_ATOM)
        fail(c, "training.loss", "energy", "\"per_atom\" divides a structure's energy error by "
             "its atoms; the first target '%s' is per atom already (its loss is the mean over "
             "atoms): leave energy out", cfg->targets[0].key);
    int any = l->forces_weight != 0.0 || l->stress_weight != 0.0;
    for (size_t i = 0; i < n; i++) any |= cfg->targets[i].weight > 0.0;
    if (!any)
        fail(c, "", "targets", "every target's weight is 0 and training.loss trains no forces or "
             "stress: nothing would be trained");
}

json_t *pt_cfg_targets_to_json(const pt_job_config *cfg)
{
    if (cfg->n_targets == 0) return NULL;
    json_t *a = json_array();
    for (int i = 0; a && i < cfg->n_targets; i++) {
        const pt_job_target *t = &cfg->targets[i];
        json_array_append_new(a, json_pack("{s:s, s:s, s:f, s:s, s:s}", "key", t->key, "level",
                                           level_names[t->level], "weight", t->weight,
                                           "normalize", normalize_names[t->normalize],
                                           "readout", readout_names[t->readout]));
    }
    return a;
}
