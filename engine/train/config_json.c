/* config_json.c — the canonical form of a job configuration (config.h):
 * every key present with its default filled, as the server stores and hashes
 * it for idempotent submissions.  Printing then re-parsing (config.c) gives
 * the same values: reals were kept to 15 significant digits when read. */
#include "engine/train/config_internal.h"

#include <stdlib.h>

static json_t *int_or(long long x, const char *word)
{
    if (x) return json_integer(x);
    return word ? json_string(word) : json_null();
}

static json_t *neighbors_json(int32_t k)
{
    if (k == PT_JOB_NEIGHBORS_AUTO) return json_string("auto");
    return int_or(k, "all");
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
        "cutoff", m->cutoff, "max_neighbors", neighbors_json(m->max_neighbors),
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
