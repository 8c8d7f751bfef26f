/* cmd_eval.c — `packtrain eval`: a saved SchNet on the first N structures of
 * a dataset: per-structure predictions, loss, MAE and RMSE as JSON, and with
 * --grads the gradient of the loss for every parameter tensor, keyed by its
 * PyG name and flattened row-major — what PyTorch autograd gives for the
 * same weights and data (tests/torch/ compares the two).
 *
 * The loss is L = mean_g (y_g − t_g)²; with --forces-weight or
 * --stress-weight, L = w_E·mean_g (y_g − t_g)² + w_F·mean_{atoms,xyz}
 * (F − F_ref)² + w_S·mean_{periodic g, 3×3} (σ − σ_ref)², forces
 * F = −∂y/∂r and stress σ = (1/V) ∂y/∂ε from the model (eV/Å, eV/Å³: ASE's
 * units and signs, engine/model/schnet.h) printed next to each prediction,
 * and the gradient is that of this plain, unnormalised L (PyTorch:
 * create_graph=True).
 *
 * A model of named heads (engine/model/schnet.h) is evaluated on every head,
 * each against the dataset key it is named after (cmd_eval_heads.c).
 *
 * Structures go in file order into packs of up to --batch-graphs graphs, one
 * pack per batch, filled by the engine's batcher (engine/pack/batch.h) as
 * training fills them; the result does not depend on the grouping. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/pack/batch.h"
#include "engine/pack/packing.h"
#include "engine/data/dataset.h"
#include "engine/graph/graph.h"
#include "engine/model/schnet.h"
#include "server/cli/cmd_eval_internal.h"
#include "server/cli/commands.h"

static const char usage_text[] =
    "usage: packtrain eval --model MODEL.safetensors --data DATA [--target KEY]\n"
    "                      [--n N] [--grads OUT.json] [--batch-graphs B]\n"
    "                      [--forces-weight W] [--energy-weight W] [--stress-weight W]\n"
    "                      [--forces-key forces] [--head-weight KEY=W]...\n"
    "\n"
    "Evaluates a SchNet model file on the first N structures of a dataset (all by\n"
    "default) and prints JSON: {\"model\",\"data\",\"target\",\"n\",\"loss\",\"mae\",\"rmse\",\n"
    "\"predictions\":[{\"index\",\"prediction\",\"target\"},...]}, in target units, with\n"
    "loss = mean over structures of (prediction - target)^2.\n"
    "\n"
    "With --forces-weight or --stress-weight, each prediction also has \"forces\"\n"
    "(F = -dE/dr, [fx,fy,fz] per atom, eV/A) and, for structures periodic in a, b\n"
    "and c, \"stress\" (3x3, (1/V) dE/dstrain, eV/A^3, ASE's sign), and\n"
    "  loss = w_E mean (E - E_ref)^2 + w_F mean over atoms and xyz (F - F_ref)^2\n"
    "         + w_S mean over periodic structures and 3x3 (stress - stress_ref)^2\n"
    "over the structures that have each label; the output adds \"loss_energy\",\n"
    "\"loss_forces\", \"loss_stress\" (the three means), \"forces_mae\", \"forces_rmse\"\n"
    "(per component, eV/A) and the weights.\n"
    "\n"
    "A model of named heads (trained on several targets) predicts every target it\n"
    "has a head for: each prediction adds \"heads\" {KEY: value}, the output adds\n"
    "\"heads\" {KEY: {\"weight\",\"loss\",\"mae\",\"rmse\"}}, and\n"
    "  loss = sum over heads of w_k mean (y_k - t_k)^2   (+ the force terms)\n"
    "A model whose head 0 is per atom (a job whose first target is per atom) has no\n"
    "energy: \"prediction\" and \"target\" are that head's per-atom arrays and \"mae\",\n"
    "\"rmse\" its errors per atom.\n"
    "\n"
    "  --target KEY        energy key (default: the dataset's only key; for a model of\n"
    "                      named heads, head 0's key)\n"
    "  --n N               evaluate structures 0..N-1\n"
    "  --grads FILE        also write {\"loss\",\"n\",\"grads\":{tensor name: [values]}}:\n"
    "                      dLoss/d every parameter, flattened row-major, PyG tensor names\n"
    "  --batch-graphs B    structures per batch (default 32)\n"
    "  --forces-weight W   w_F >= 0 (forces are computed when this or --stress-weight\n"
    "                      is given)\n"
    "  --energy-weight W   w_E >= 0 (default 1)\n"
    "  --stress-weight W   w_S >= 0 (default 0)\n"
    "  --energy-per-atom   the energy term per atom, w_E mean ((E - E_ref)/N)^2, as\n"
    "                      training's default loss on data with forces\n"
    "  --forces-key KEY    the force labels: forces (the default; a dataset holds the\n"
    "                      one forces column ingest chose, under that name); an ASE\n"
    "                      database given as DATA is ingested with this key\n"
    "                      (atomic_forces, data.atomic_forces, ...)\n"
    "  --head-weight KEY=W w_k >= 0 of the head predicting KEY (default 1; repeat)\n"
    "\n"
    "DATA is a .ptd, or any file `packtrain ingest` reads (ingested once into a cache).\n"
    "Exit status: 0 done, 1 failure (bad model, dataset, target or labels), 2 usage error.\n";

/* A loss weight: finite and >= 0. */
static int parse_weight(const char *opt, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < 0.0) {
        fprintf(stderr, "packtrain eval: %s: '%s' is not a number >= 0\n", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, eval_args *a)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"data", required_argument, 0, 'd'},
        {"target", required_argument, 0, 't'}, {"n", required_argument, 0, 'n'},
        {"grads", required_argument, 0, 'g'}, {"batch-graphs", required_argument, 0, 'b'},
        {"forces-weight", required_argument, 0, 'F'}, {"energy-weight", required_argument, 0, 'E'},
        {"stress-weight", required_argument, 0, 'S'}, {"forces-key", required_argument, 0, 'K'},
        {"head-weight", required_argument, 0, 'W'}, {"energy-per-atom", no_argument, 0, 'A'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    memset(a, 0, sizeof(*a));
    a->n = -1;
    a->batch_graphs = 32;
    a->w.energy = 1.0;
    a->forces_key = "forces";
    optind = 1;
    opterr = 0;
    int c;
    long v;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'h':
            a->help = 1;
            return 0;
        case 'm': a->model = optarg; break;
        case 'd': a->data = optarg; break;
        case 't': a->target = optarg; break;
        case 'g': a->grads = optarg; break;
        case 'n':
            if (pt_cli_parse_long(optarg, 1, 4294967295L, &a->n)) {
                fprintf(stderr, "packtrain eval: --n: '%s' is not a count >= 1\n", optarg);
                return -1;
            }
            break;
        case 'F':
            if (parse_weight("--forces-weight", optarg, &a->w.forces)) return -1;
            a->forces = 1;
            break;
        case 'S':
            if (parse_weight("--stress-weight", optarg, &a->w.stress)) return -1;
            a->forces = 1;
            break;
        case 'E':
            if (parse_weight("--energy-weight", optarg, &a->w.energy)) return -1;
            break;
        case 'K': a->forces_key = optarg; break;
        case 'W': {
            const char *eq = strchr(optarg, '=');
            size_t len = eq ? (size_t)(eq - optarg) : 0;
            if (!eq || !len || len >= PT_SCHNET_KEY_MAX ||
                a->n_head_weights == PT_SCHNET_MAX_HEADS) {
                fprintf(stderr, "packtrain eval: --head-weight: '%s' is not KEY=W (at most %d)\n",
                        optarg, PT_SCHNET_MAX_HEADS);
                return -1;
            }
            memcpy(a->head_key[a->n_head_weights], optarg, len);
            a->head_key[a->n_head_weights][len] = 0;
            if (parse_weight("--head-weight", eq + 1, &a->head_weight[a->n_head_weights]))
                return -1;
            a->n_head_weights++;
            break;
        }
        case 'A': a->w.energy_per_atom = 1; break;
        case 'b':
            if (pt_cli_parse_long(optarg, 1, 4096, &v)) {
                fprintf(stderr, "packtrain eval: --batch-graphs: '%s' is not in 1..4096\n", optarg);
                return -1;
            }
            a->batch_graphs = (int)v;
            break;
        default:
            fprintf(stderr, "packtrain eval: unknown or incomplete option '%s'\n", argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "packtrain eval: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (!a->model || !a->data) {
        fprintf(stderr, "packtrain eval: --model and --data are required\n");
        return -1;
    }
    if (!a->forces &&
        (a->w.energy != 1.0 || a->w.energy_per_atom || strcmp(a->forces_key, "forces"))) {
        fprintf(stderr, "packtrain eval: --energy-weight, --energy-per-atom and --forces-key go "
                        "with --forces-weight or --stress-weight\n");
        return -1;
    }
    return 0;
}

/* ---- the command ------------------------------------------------------------ */

static int choose_target(const pt_dataset *ds, const char *want, uint32_t *key)
{
    if (want) {
        int k = pt_dataset_find_target(ds, want);
        if (k >= 0) {
            *key = (uint32_t)k;
            return 0;
        }
        fprintf(stderr, "packtrain eval: --target: the dataset has no key '%s'", want);
    } else if (ds->n_targets == 1) {
        *key = 0;
        return 0;
    } else {
        fprintf(stderr, "packtrain eval: --target is needed: the dataset has %u keys",
                ds->n_targets);
    }
    for (uint32_t t = 0; t < ds->n_targets; t++)
        fprintf(stderr, "%s%s", t ? ", " : " (", ds->target_names[t]);
    fprintf(stderr, "%s\n", ds->n_targets ? ")" : "");
    return -1;
}

/* Writes {"loss","n","grads":{name:[...]}} to path. */
static int write_grads(const char *path, const pt_schnet *m, const float *grads, double loss,
                       uint32_t n)
{
    json_t *root = json_pack("{s:f,s:I}", "loss", loss, "n", (json_int_t)n);
    json_t *gj = json_object();
    for (size_t t = 0; t < m->n_tensors; t++) {
        json_t *arr = json_array();
        for (size_t k = 0; k < m->tensors[t].numel; k++)
            json_array_append_new(arr, json_real(grads[m->tensors[t].offset + k]));
        json_object_set_new(gj, m->tensors[t].name, arr);
    }
    json_object_set_new(root, "grads", gj);
    int rc = json_dump_file(root, path, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(root);
    if (rc) fprintf(stderr, "packtrain eval: %s: cannot write: %s\n", path, strerror(errno));
    return rc ? -1 : 0;
}

static void state_close(eval_state *st)
{
    pt_schnet_acts_close(&st->acts);
    pt_batch_close(&st->batch);
    pt_packs_close(&st->packs);
    pt_graphs_close(&st->graphs);
    pt_dataset_close(&st->ds);
    pt_schnet_close(&st->model);
    free(st->grads);
    free(st->pred);
    free(st->force);
    free(st->stress);
    pt_eval_heads_close(st);
}

/* Structure s has force labels (NaN marks absence, as engine/pack/batch.c reads them). */
static int has_forces(const pt_dataset *ds, uint32_t s)
{
    return ds->forces && pt_dataset_natoms(ds, s) > 0 &&
           !isnan(ds->forces[3 * ds->atom_offset[s]]);
}

/* Structure s is periodic along a, b and c and has a stress label. */
static int has_stress(const pt_dataset *ds, uint32_t s)
{
    return ds->stress && pt_dataset_pbc(ds, s) == PT_PBC_ALL && !isnan(ds->stress[9 * (size_t)s]);
}

/* The denominators of the loss over structures 0..n-1, and a located error
 * for every label a nonzero weight asks for and no structure has. */
static int loss_norm(const eval_args *a, const pt_dataset *ds, int ingested, uint32_t n,
                     pt_schnet_loss_norm *nm, pt_errors *errs)
{
    memset(nm, 0, sizeof(*nm));
    nm->graphs = n;
    for (uint32_t s = 0; s < n; s++) {
        if (has_forces(ds, s)) nm->force_components += 3.0 * pt_dataset_natoms(ds, s);
        if (has_stress(ds, s)) nm->stress_components += 9.0;
    }
    if (!ingested && strcmp(a->forces_key, "forces"))   /* ingested: the key chose the forces */
        pt_errors_add(errs, a->data, 0, "--forces-key",
                      "a dataset holds one forces column, 'forces' (chosen at ingest: a "
                      "'forces' or 'force' column); '%s' is not in it", a->forces_key);
    if (a->w.forces > 0.0 && nm->force_components == 0.0)
        pt_errors_add(errs, a->data, 0, "--forces-weight",
                      "forces weight %g, but none of the %u structures has force labels",
                      a->w.forces, n);
    if (a->w.stress > 0.0 && nm->stress_components == 0.0)
        pt_errors_add(errs, a->data, 0, "--stress-weight",
                      "stress weight %g, but none of the %u structures is periodic along a, b "
                      "and c with a stress label", a->w.stress, n);
    return errs->total ? -1 : 0;
}

/* The forces and stress of the batch's real graphs into st->force (by the
 * dataset's atom order) and st->stress. */
static void keep_forces(eval_state *st)
{
    const pt_batch *b = &st->batch;
    for (int32_t g = 0; g < b->cap_graphs; g++) {
        int32_t s = b->graph_id[g];
        if (s < 0) continue;
        memcpy(st->stress + 9 * (size_t)s, st->acts.stress + 9 * (size_t)g, 9 * sizeof(double));
    }
    for (int32_t i = 0; i < b->cap_nodes;) {
        int32_t g = b->node_graph[i];
        if (g < 0) {
            i++;
            continue;
        }
        /* a graph's atoms are consecutive node slots, in dataset order */
        uint32_t s = (uint32_t)b->graph_id[g], na = pt_dataset_natoms(&st->ds, s);
        memcpy(st->force + 3 * st->ds.atom_offset[s], st->acts.force + 3 * (size_t)i,
               3 * (size_t)na * sizeof(double));
        i += (int32_t)na;
    }
}

static json_t *rows_json(const double *v, uint32_t rows)
{
    json_t *arr = json_array();
    for (uint32_t r = 0; r < rows; r++)
        json_array_append_new(arr, json_pack("[f,f,f]", v[3 * r], v[3 * r + 1], v[3 * r + 2]));
    return arr;
}

/* Structures 0..n-1 in order, bg per pack; limits fit the largest pack plus
 * one spare node and edge slot, so every pack has padding to exercise. */
static int run(const eval_args *a, eval_state *st, pt_errors *errs)
{
    if (pt_schnet_load(&st->model, a->model, errs)) return -1;
    char ptd[4096];
    int ingested;
    const char *forces_key = strcmp(a->forces_key, "forces") ? a->forces_key : NULL;
    if (pt_cli_dataset_open_keys("packtrain eval", a->data, forces_key, &st->ds, ptd, sizeof ptd, &ingested))
        return -1;
    const int named = st->model.cfg.n_heads > 0;
    /* head 0 per atom: no per-structure key; its labels are the per-atom
     * column named after it (cmd_eval_heads.c) */
    const int atom0 = named && st->model.head[0].level == PT_HEAD_ATOM;
    uint32_t key = UINT32_MAX;
    if (atom0 && a->target) {
        fprintf(stderr, "packtrain eval: --target: the model's first head '%s' is per atom; its "
                "labels are the dataset's per-atom column of that name\n", st->model.head[0].key);
        return -1;
    }
    if (!atom0 && choose_target(&st->ds, a->target ? a->target : named ? st->model.head[0].key
                                                                       : NULL, &key))
        return -1;
    uint32_t n = st->ds.n_structs;
    if (a->n > 0 && (uint64_t)a->n < n) n = (uint32_t)a->n;
    if (a->n > (long)st->ds.n_structs) {
        fprintf(stderr, "packtrain eval: --n %ld but %s holds %u structures\n", a->n, a->data,
                st->ds.n_structs);
        return -1;
    }
    if (pt_eval_heads_resolve(a, st, n, errs)) return -1;
    /* a zero energy weight needs no energy labels */
    if (a->w.energy > 0.0 && !atom0)
        for (uint32_t s = 0; s < n; s++)
            if (isnan(st->ds.targets[(size_t)key * st->ds.n_structs + s]))
                pt_errors_add(errs, a->data,
                              st->ds.source_line ? (long)st->ds.source_line[s] : 0,
                              st->ds.target_names[key], "structure %u has no value for this key",
                              s);
    pt_schnet_loss_norm norm;
    if (a->forces) loss_norm(a, &st->ds, ingested, n, &norm, errs);
    if (errs->total) return -1;

    const pt_schnet_config *c = &st->model.cfg;
    pt_graph_params gp = {.cutoff = c->cutoff, .max_neighbors = c->max_neighbors,
                          .mode = PT_GRAPH_RADIUS};
    if (pt_graphs_build(&st->graphs, &st->ds, &gp, errs)) return -1;
    uint32_t bg = (uint32_t)a->batch_graphs;
    if (pt_packs_consecutive(&st->packs, &st->ds, &st->graphs, n, bg, errs)) return -1;
    const pt_pack_limits lim = st->packs.limits;
    int rc = pt_batch_init(&st->batch, lim, 1, c->cutoff);
    if (rc != PT_BATCH_OK) {
        pt_errors_add(errs, a->data, 0, "", "%s", pt_batch_strerror(rc));
        return -1;
    }
    /* fp32 products (the default): the file's model as PyTorch computes it,
     * which tests/torch compares against */
    pt_schnet_mode mode = !a->forces ? PT_SCHNET_ENERGY
                          : a->grads ? PT_SCHNET_FORCES_TRAIN
                                     : PT_SCHNET_FORCES;
    if (pt_schnet_acts_init_mode(&st->acts, &st->model, lim.max_nodes, lim.max_edges,
                                 lim.max_graphs, mode, errs))
        return -1;
    st->acts.no_grad = !a->grads;   /* no backward without --grads */
    st->pred = calloc(n, sizeof(double));
    if (a->grads) st->grads = calloc(st->model.n_params, sizeof(float));
    if (a->forces) {
        st->force = calloc(3 * st->ds.atom_offset[n], sizeof(double));
        st->stress = calloc(9 * (size_t)n, sizeof(double));
    }
    if (named && pt_eval_heads_alloc(st, n, errs)) return -1;
    if (!st->pred || (a->grads && !st->grads) || (a->forces && (!st->force || !st->stress))) {
        pt_errors_add(errs, "", 0, "", "out of memory");
        return -1;
    }

    double loss = 0.0;
    pt_schnet_loss_parts parts = {0};
    for (uint32_t k = 0; k < st->packs.n_packs; k++) {
        rc = pt_batch_fill(&st->batch, &st->ds, &st->graphs, &st->packs, k, 1,
                           atom0 ? -1 : (int)key);
        if (rc != PT_BATCH_OK) {
            pt_errors_add(errs, a->data, 0, "", "%s", pt_batch_strerror(rc));
            return -1;
        }
        if (pt_schnet_batch_check(&st->model, &st->acts, &st->batch, errs)) return -1;
        const double *y = pt_schnet_forward(&st->model, &st->acts, &st->batch);
        for (int32_t g = 0; g < st->batch.cap_graphs && !atom0; g++)
            if (st->batch.graph_id[g] >= 0) st->pred[st->batch.graph_id[g]] = y[g];
        if (named) pt_eval_heads_batch(st);
        if (named && !a->forces) {
            loss += pt_schnet_loss_heads(&st->model, &st->acts, &st->batch, st->hl, NULL);
            if (st->grads) pt_schnet_backward(&st->model, &st->acts, &st->batch, st->grads);
            continue;
        }
        if (!a->forces) {
            loss += pt_schnet_loss(&st->model, &st->acts, &st->batch, (double)n);
            if (st->grads) pt_schnet_backward(&st->model, &st->acts, &st->batch, st->grads);
            continue;
        }
        pt_schnet_forces(&st->model, &st->acts, &st->batch);
        keep_forces(st);
        pt_schnet_loss_parts p;
        loss += pt_schnet_loss_forces(&st->model, &st->acts, &st->batch, &a->w, &norm, &p);
        if (named) {   /* head 0 is the energy, weighted by w_E */
            st->hl[0].target = NULL;
            loss += pt_schnet_loss_heads(&st->model, &st->acts, &st->batch, st->hl, NULL);
        }
        parts.energy += p.energy;
        parts.forces += p.forces;
        parts.stress += p.stress;
        if (st->grads) pt_schnet_backward_forces(&st->model, &st->acts, &st->batch, st->grads);
    }

    double mae = 0.0, sse = 0.0, fmae = 0.0, fsse = 0.0;
    json_t *preds = json_array();
    for (uint32_t s = 0; s < n; s++) {
        if (atom0) {   /* head 0's per-atom values and labels */
            json_t *p = json_pack("{s:I,s:o,s:o}", "index", (json_int_t)s, "prediction",
                                  pt_eval_heads_atoms(st, 0, s, 0), "target",
                                  pt_eval_heads_atoms(st, 0, s, 1));
            json_object_set_new(p, "heads", pt_eval_heads_prediction(st, s));
            json_array_append_new(preds, p);
            continue;
        }
        double t = st->ds.targets[(size_t)key * st->ds.n_structs + s];
        mae += fabs(st->pred[s] - t);
        sse += (st->pred[s] - t) * (st->pred[s] - t);
        json_t *p = json_pack("{s:I,s:f}", "index", (json_int_t)s, "prediction", st->pred[s]);
        /* JSON has no NaN: an absent energy label (allowed at weight 0) is null */
        json_object_set_new(p, "target", isnan(t) ? json_null() : json_real(t));
        if (a->forces) {
            const uint32_t na = pt_dataset_natoms(&st->ds, s);
            const double *f = st->force + 3 * st->ds.atom_offset[s];
            json_object_set_new(p, "forces", rows_json(f, na));
            if (has_forces(&st->ds, s))
                for (uint64_t q = 0; q < 3 * (uint64_t)na; q++) {
                    double r = f[q] - (double)st->ds.forces[3 * st->ds.atom_offset[s] + q];
                    fmae += fabs(r);
                    fsse += r * r;
                }
            if (pt_dataset_pbc(&st->ds, s) == PT_PBC_ALL)
                json_object_set_new(p, "stress", rows_json(st->stress + 9 * (size_t)s, 3));
        }
        if (named) json_object_set_new(p, "heads", pt_eval_heads_prediction(st, s));
        json_array_append_new(preds, p);
    }
    json_t *out = json_pack("{s:s,s:s,s:s,s:I,s:f}", "model", a->model, "data", a->data,
                            "target", atom0 ? st->model.head[0].key : st->ds.target_names[key],
                            "n", (json_int_t)n, "loss", loss);
    mae /= n;
    double rmse = sqrt(sse / n);
    if (atom0) pt_eval_heads_errors(st, 0, n, &mae, &rmse);   /* per atom */
    /* energy metrics: the mean over structures with an energy label */
    json_object_set_new(out, "mae", a->w.energy > 0.0 || !a->forces ? json_real(mae)
                                                                      : json_null());
    json_object_set_new(out, "rmse", a->w.energy > 0.0 || !a->forces ? json_real(rmse)
                                                                       : json_null());
    if (a->forces) {
        double nf = norm.force_components;
        json_object_set_new(out, "loss_energy", json_real(parts.energy));
        json_object_set_new(out, "loss_forces", json_real(parts.forces));
        json_object_set_new(out, "loss_stress", json_real(parts.stress));
        json_object_set_new(out, "forces_mae", nf > 0 ? json_real(fmae / nf) : json_null());
        json_object_set_new(out, "forces_rmse", nf > 0 ? json_real(sqrt(fsse / nf)) : json_null());
        json_object_set_new(out, "weights", json_pack("{s:f,s:f,s:f,s:b}", "energy", a->w.energy,
                                                      "forces", a->w.forces, "stress",
                                                      a->w.stress, "energy_per_atom",
                                                      a->w.energy_per_atom));
    }
    if (named) json_object_set_new(out, "heads", pt_eval_heads_summary(a, st, n));
    json_object_set_new(out, "predictions", preds);
    json_dumpf(out, stdout, JSON_COMPACT | JSON_REAL_PRECISION(17));
    printf("\n");
    json_decref(out);
    if (st->grads && write_grads(a->grads, &st->model, st->grads, loss, n)) return -1;
    return 0;
}

int pt_cmd_eval(int argc, char **argv)
{
    eval_args a;
    if (parse_args(argc, argv, &a)) {
        fputs(usage_text, stderr);
        return 2;
    }
    if (a.help) {
        fputs(usage_text, stdout);
        return 0;
    }
    eval_state st;
    memset(&st, 0, sizeof(st));
    pt_errors errs;
    pt_errors_init(&errs, 0);
    int rc = run(&a, &st, &errs);
    if (rc) pt_cli_print_errors("packtrain eval", &errs);
    pt_errors_close(&errs);
    state_close(&st);
    return rc ? 1 : 0;
}
