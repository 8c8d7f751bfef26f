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
    const char *keys[] = {"loss", "lr", "graphs_per_s", "nodes_per_s", "padding_fraction",
                          "seconds", "train_loss", "val_mae", "val_rmse"};
    const double vals[] = {m->loss, m->lr, m->graphs_per_s, m->nodes_per_s, m->padding_fraction,
                           m->seconds, m->train_loss, m->val_mae, m->val_rmse};
    int count = epoch_line ? 9 : 6;
    int phases = m->has_phases && !epoch_line;
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
    return o;
}
