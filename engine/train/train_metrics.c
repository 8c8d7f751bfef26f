/* train_metrics.c — the training loop's outputs as JSON: one metrics line
 * (the field names every consumer uses: CLI, worker protocol, REST API,
 * dashboard) and the run's result object (see train.h). */
#include "engine/train/train.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int put_num(char *buf, size_t len, const char *key, double x, int last)
{
    const char *sep = last ? "}" : ",";
    if (!isfinite(x)) return snprintf(buf, len, "\"%s\":null%s", key, sep);
    return snprintf(buf, len, "\"%s\":%.9g%s", key, x, sep);
}

/* snprintf's arguments for appending at n to a buffer of len bytes. */
#define AT(n) buf + ((n) < len ? (n) : len), (n) < len ? len - (n) : 0

int pt_train_metrics_json(const pt_train_metrics *m, char *buf, size_t len)
{
    int epoch_line = !strcmp(m->kind, "epoch");
    size_t n = (size_t)snprintf(buf, len, "{\"kind\":\"%s\",\"step\":%lld,\"epoch\":%d,", m->kind,
                                (long long)m->step, (int)m->epoch);
    /* in print order: the common fields, an epoch line's, a forces job's */
    const char *keys[20];
    double vals[20];
    int count = 0;
#define PUT(k, v) (keys[count] = (k), vals[count++] = (v))
    PUT("loss", m->loss);
    PUT("lr", m->lr);
    PUT("graphs_per_s", m->graphs_per_s);
    PUT("nodes_per_s", m->nodes_per_s);
    PUT("padding_fraction", m->padding_fraction);
    PUT("seconds", m->seconds);
    if (epoch_line) {
        PUT("train_loss", m->train_loss);
        PUT("val_mae", m->val_mae);
        PUT("val_rmse", m->val_rmse);
    }
    if (m->has_forces) {
        PUT("loss_energy", m->loss_energy);
        PUT("loss_forces", m->loss_forces);
        if (m->has_stress) PUT("loss_stress", m->loss_stress);
        if (epoch_line) {
            PUT("val_loss", m->val_loss);
            PUT("val_forces_mae", m->val_forces_mae);
            PUT("val_forces_rmse", m->val_forces_rmse);
            if (m->has_stress) {
                PUT("val_stress_mae", m->val_stress_mae);
                PUT("val_stress_rmse", m->val_stress_rmse);
            }
        }
    }
#undef PUT
    int phases = m->has_phases && !epoch_line;
    /* a multi-task job's per-target errors: one object, before the last key */
    if (epoch_line && m->n_heads > 1) {
        n += (size_t)snprintf(AT(n), "\"heads\":{");
        for (int k = 0; k < m->n_heads; k++) {
            n += (size_t)snprintf(AT(n), "%s\"%s\":{", k ? "," : "", m->head_key[k]);
            n += (size_t)put_num(AT(n), "val_mae", m->val_head[k].mae, 0);
            n += (size_t)put_num(AT(n), "val_rmse", m->val_head[k].rmse, 1);
        }
        n += (size_t)snprintf(AT(n), "},");
    }
    for (int i = 0; i < count; i++)
        n += (size_t)put_num(AT(n), keys[i], vals[i], i == count - 1 && !phases);
    if (phases) {
        n += (size_t)pt_phase_json_fields(&m->phases, AT(n));
        n += (size_t)snprintf(AT(n), "}");
    }
    return (int)n;
}

static json_t *num_or_null(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

json_t *pt_train_result_json(const pt_train_result *r)
{
    json_t *o = json_pack(
        "{s:I, s:i, s:i, s:o, s:o, s:o, s:o, s:o, s:s, s:f, s:f, s:i, s:i, s:i, s:i, s:i, s:i,"
        " s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
        "steps", (json_int_t)r->steps, "epochs", (int)r->epochs, "best_epoch", (int)r->best_epoch,
        "best_val_loss", num_or_null(r->best_val_loss), "best_val_mae", num_or_null(r->best_val_mae),
        "best_val_rmse", num_or_null(r->best_val_rmse), "test_mae", num_or_null(r->test_mae),
        "test_rmse", num_or_null(r->test_rmse), "stop_reason", r->stop_reason,
        "seconds", r->seconds, "step_seconds", r->step_seconds, "n_train", (int)r->n_train,
        "n_val", (int)r->n_val, "n_test", (int)r->n_test, "split_moved", (int)r->split_moved,
        "max_nodes", (int)r->limits.max_nodes,
        "max_edges", (int)r->limits.max_edges, "max_graphs", (int)r->limits.max_graphs,
        "micro_packs", (int)r->micro_packs, "global_packs", (json_int_t)r->global_packs,
        "graphs", (json_int_t)r->graphs, "nodes", (json_int_t)r->nodes,
        "edges", (json_int_t)r->edges, "node_slots", (json_int_t)r->node_slots,
        "edge_slots", (json_int_t)r->edge_slots, "resumed_step", (json_int_t)r->resumed_step);
    json_t *l = json_pack("{s:i, s:i, s:i, s:i}", "replicas", (int)r->layout.replicas,
                          "accumulation", (int)r->layout.accumulation, "ranks",
                          (int)r->layout.ranks, "threads", (int)r->layout.threads);
    if (o && l) json_object_update(o, l);
    json_decref(l);
    const pt_train_loss *ls = &r->loss;
    json_t *loss = json_pack("{s:f, s:f, s:f, s:s}", "energy_weight", ls->w.energy,
                             "forces_weight", ls->w.forces, "stress_weight", ls->w.stress,
                             "energy", ls->w.energy_per_atom ? "per_atom" : "total");
    if (o && loss) json_object_set(o, "loss", loss);
    json_decref(loss);
    if (o && ls->forces) {
        json_object_set_new(o, "best_val_forces_mae", num_or_null(r->best_val_forces_mae));
        json_object_set_new(o, "best_val_forces_rmse", num_or_null(r->best_val_forces_rmse));
        json_object_set_new(o, "test_forces_mae", num_or_null(r->test_forces_mae));
        json_object_set_new(o, "test_forces_rmse", num_or_null(r->test_forces_rmse));
        json_object_set_new(o, "test_forces_zero_mae", num_or_null(r->test_forces_zero_mae));
    }
    if (o && r->n_heads > 1) {
        json_t *h = json_object();
        for (int k = 0; h && k < r->n_heads; k++)
            json_object_set_new(h, r->head_key[k],
                                json_pack("{s:o, s:o, s:o, s:o}", "best_val_mae",
                                          num_or_null(r->val_head[k].mae), "best_val_rmse",
                                          num_or_null(r->val_head[k].rmse), "test_mae",
                                          num_or_null(r->test_head[k].mae), "test_rmse",
                                          num_or_null(r->test_head[k].rmse)));
        json_object_set_new(o, "heads", h);
    }
    if (o && ls->w.stress > 0.0) {
        json_object_set_new(o, "best_val_stress_mae", num_or_null(r->best_val_stress_mae));
        json_object_set_new(o, "test_stress_mae", num_or_null(r->test_stress_mae));
        json_object_set_new(o, "test_stress_rmse", num_or_null(r->test_stress_rmse));
    }
    return o;
}
