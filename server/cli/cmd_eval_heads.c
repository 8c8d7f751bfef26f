/* cmd_eval_heads.c — `packtrain eval` on a model of named heads
 * (engine/model/schnet.h): every head against the dataset label it is named
 * after, a graph head's numeric key per structure, an atom head's per-atom
 * column (dataset.h atom_cols) per atom, with
 *   L = Σ_k w_k mean (y_k − t_k)²
 * the mean over the n structures for a graph head, over their atoms for an
 * atom head (--head-weight KEY=W, default 1; with forces head 0 is the energy
 * and its term is w_E's, cmd_eval.c).  Atom heads print one prediction per
 * atom, in the dataset's atom order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server/cli/cmd_eval_internal.h"

/* Atom head k's column on the first n structures: present, or an error
 * located at the first structure without it. */
static void check_atom_labels(const eval_args *a, const eval_state *st, int k, uint32_t n,
                              pt_errors *errs)
{
    const pt_dataset *ds = &st->ds;
    const float *col = ds->atom_cols + (size_t)st->head_key[k] * ds->n_atoms;
    for (uint32_t s = 0; s < n; s++)
        if (pt_dataset_natoms(ds, s) && isnan(col[ds->atom_offset[s]])) {
            pt_errors_add(errs, a->data, ds->source_line ? (long)ds->source_line[s] : 0,
                          st->model.head[k].key, "structure %u has no per-atom values for head %d",
                          s, k);
            return;
        }
}

int pt_eval_heads_resolve(const eval_args *a, eval_state *st, uint32_t n, pt_errors *errs)
{
    const pt_schnet *m = &st->model;
    for (int w = 0; w < a->n_head_weights; w++)
        if (pt_schnet_find_head(m, a->head_key[w]) < 0)
            pt_errors_add(errs, a->model, 0, "--head-weight", "the model has no head '%s'%s",
                          a->head_key[w], m->cfg.n_heads ? "" : " (it has PyG's single head)");
    for (int k = 0; m->cfg.n_heads && k < m->n_heads; k++) {
        const char *key = m->head[k].key;
        const int atom = m->head[k].level == PT_HEAD_ATOM;
        int t = atom ? pt_dataset_find_atom_col(&st->ds, key) : pt_dataset_find_target(&st->ds, key);
        if (t < 0)
            pt_errors_add(errs, a->data, 0, key, "head %d predicts '%s'%s, which the dataset "
                          "does not have%s", k, key, atom ? " per atom" : "",
                          atom && st->ds.n_atom_cols == 0 ? " (it keeps no per-atom columns)" : "");
        st->head_key[k] = t < 0 ? 0 : (uint32_t)t;
        st->head_atom[k] = (uint8_t)atom;
        if (atom && t >= 0) check_atom_labels(a, st, k, n, errs);
        st->hl[k].weight = 1.0;
        for (int w = 0; w < a->n_head_weights; w++)
            if (!strcmp(a->head_key[w], key)) st->hl[k].weight = a->head_weight[w];
    }
    return errs->total ? -1 : 0;
}

int pt_eval_heads_alloc(eval_state *st, uint32_t n, pt_errors *errs)
{
    const pt_pack_limits lim = st->packs.limits;
    const uint64_t atoms = st->ds.atom_offset[n];
    for (int k = 0; k < st->model.n_heads; k++) {
        const int atom = st->head_atom[k];
        st->head_target[k] = calloc(atom ? (size_t)lim.max_nodes : (size_t)lim.max_graphs,
                                    sizeof(double));
        st->head_pred[k] = calloc(atom ? (size_t)atoms : (size_t)n, sizeof(double));
        st->hl[k].norm = atom ? (double)atoms : (double)n;
        if (!st->head_target[k] || !st->head_pred[k]) {
            pt_errors_add(errs, "", 0, "", "out of memory");
            return -1;
        }
    }
    return 0;
}

void pt_eval_heads_batch(eval_state *st)
{
    const pt_batch *b = &st->batch;
    const pt_dataset *ds = &st->ds;
    for (int k = 0; k < st->model.n_heads; k++) {
        const double *y = st->acts.head[k].y;
        double *t = st->head_target[k];
        st->hl[k].target = t;
        if (!st->head_atom[k]) {
            for (int32_t g = 0; g < b->cap_graphs; g++) {
                const int32_t s = b->graph_id[g];
                t[g] = s < 0 ? 0.0 : ds->targets[(size_t)st->head_key[k] * ds->n_structs + (size_t)s];
                if (s >= 0) st->head_pred[k][s] = y[g];
            }
            continue;
        }
        /* a graph's atoms are consecutive node slots, in dataset order */
        const float *col = ds->atom_cols + (size_t)st->head_key[k] * ds->n_atoms;
        int32_t prev = -1;
        uint64_t at = 0;
        for (int32_t i = 0; i < b->cap_nodes; i++) {
            const int32_t g = b->node_graph[i];
            if (g < 0) {
                t[i] = 0.0;
                continue;
            }
            if (g != prev) at = ds->atom_offset[b->graph_id[g]];   /* the graph's first atom */
            prev = g;
            t[i] = col[at];
            st->head_pred[k][at++] = y[i];
        }
    }
}

json_t *pt_eval_heads_atoms(const eval_state *st, int k, uint32_t s, int labels)
{
    const pt_dataset *ds = &st->ds;
    const float *col = ds->atom_cols + (size_t)st->head_key[k] * ds->n_atoms;
    json_t *v = json_array();
    for (uint64_t a = ds->atom_offset[s]; a < ds->atom_offset[s + 1]; a++)
        json_array_append_new(v, json_real(labels ? (double)col[a] : st->head_pred[k][a]));
    return v;
}

json_t *pt_eval_heads_prediction(const eval_state *st, uint32_t s)
{
    json_t *h = json_object();
    for (int k = 0; k < st->model.n_heads; k++)
        json_object_set_new(h, st->model.head[k].key,
                            st->head_atom[k] ? pt_eval_heads_atoms(st, k, s, 0)
                                             : json_real(st->head_pred[k][s]));
    return h;
}

/* Σ|r| and Σr² of head k over the first n structures' labels; the count. */
static double head_sums(const eval_state *st, int k, uint32_t n, double *ae, double *se)
{
    const pt_dataset *ds = &st->ds;
    const uint64_t count = st->head_atom[k] ? ds->atom_offset[n] : n;
    *ae = *se = 0.0;
    for (uint64_t j = 0; j < count; j++) {
        const double t = st->head_atom[k]
                             ? ds->atom_cols[(size_t)st->head_key[k] * ds->n_atoms + j]
                             : ds->targets[(size_t)st->head_key[k] * ds->n_structs + j];
        const double r = st->head_pred[k][j] - t;
        *ae += fabs(r);
        *se += r * r;
    }
    return (double)count;
}

void pt_eval_heads_errors(const eval_state *st, int k, uint32_t n, double *mae, double *rmse)
{
    double ae, se, c = head_sums(st, k, n, &ae, &se);
    *mae = ae / c;
    *rmse = sqrt(se / c);
}

json_t *pt_eval_heads_summary(const eval_args *a, const eval_state *st, uint32_t n)
{
    json_t *h = json_object();
    for (int k = 0; k < st->model.n_heads; k++) {
        double ae, se, c = head_sums(st, k, n, &ae, &se);
        /* head 0's weight is w_E when forces are trained */
        const double w = a->forces && k == 0 ? a->w.energy : st->hl[k].weight;
        json_object_set_new(h, st->model.head[k].key,
                            json_pack("{s:s,s:f,s:f,s:f,s:f}", "level",
                                      st->head_atom[k] ? "atom" : "graph", "weight", w, "loss",
                                      se / c, "mae", ae / c, "rmse", sqrt(se / c)));
    }
    return h;
}

void pt_eval_heads_close(eval_state *st)
{
    for (int k = 0; k < PT_SCHNET_MAX_HEADS; k++) {
        free(st->head_target[k]);
        free(st->head_pred[k]);
    }
}
