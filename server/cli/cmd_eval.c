/* cmd_eval.c — `packtrain eval`: a saved SchNet on the first N structures of
 * a dataset: per-structure predictions, loss, MAE and RMSE as JSON, and with
 * --grads the gradient of L = mean_g (y_g − t_g)² for every parameter tensor,
 * keyed by its PyG name and flattened row-major — what PyTorch autograd gives
 * for the same weights and data (tests/torch/ compares the two).
 *
 * Structures go in file order into packs of up to --batch-graphs graphs, one
 * pack per batch, filled by the engine's batcher (engine/batch.h) as training
 * fills them; the result does not depend on the grouping. */
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
#include "server/cli/commands.h"

static const char usage_text[] =
    "usage: packtrain eval --model MODEL.safetensors --data DATA.ptd [--target KEY]\n"
    "                      [--n N] [--grads OUT.json] [--batch-graphs B]\n"
    "\n"
    "Evaluates a SchNet model file on the first N structures of a dataset (all by\n"
    "default) and prints JSON: {\"model\",\"data\",\"target\",\"n\",\"loss\",\"mae\",\"rmse\",\n"
    "\"predictions\":[{\"index\",\"prediction\",\"target\"},...]}, in target units, with\n"
    "loss = mean over structures of (prediction - target)^2.\n"
    "\n"
    "  --target KEY      target key (default: the dataset's only key)\n"
    "  --n N             evaluate structures 0..N-1\n"
    "  --grads FILE      also write {\"loss\",\"n\",\"grads\":{tensor name: [values]}}: dLoss/d\n"
    "                    every parameter, flattened row-major, PyG tensor names\n"
    "  --batch-graphs B  structures per batch (default 32)\n"
    "\n"
    "Exit status: 0 done, 1 failure (bad model, dataset or target), 2 usage error.\n";

typedef struct eval_args {
    const char *model, *data, *target, *grads;
    long n;
    int batch_graphs;
    int help;
} eval_args;

static int parse_args(int argc, char **argv, eval_args *a)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"data", required_argument, 0, 'd'},
        {"target", required_argument, 0, 't'}, {"n", required_argument, 0, 'n'},
        {"grads", required_argument, 0, 'g'}, {"batch-graphs", required_argument, 0, 'b'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    memset(a, 0, sizeof(*a));
    a->n = -1;
    a->batch_graphs = 32;
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

typedef struct eval_state {
    pt_schnet model;
    pt_dataset ds;
    pt_graphs graphs;
    pt_packs packs;
    pt_batch batch;
    pt_schnet_acts acts;
    float *grads;
    double *pred;
} eval_state;

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
}

/* Structures 0..n-1 in order, bg per pack; limits fit the largest pack plus
 * one spare node and edge slot, so every pack has padding to exercise. */
static int run(const eval_args *a, eval_state *st, pt_errors *errs)
{
    char err[512];
    if (pt_schnet_load(&st->model, a->model, errs)) return -1;
    if (pt_dataset_open(&st->ds, a->data, err, sizeof err)) {
        fprintf(stderr, "packtrain eval: %s\n", err);
        return -1;
    }
    uint32_t key;
    if (choose_target(&st->ds, a->target, &key)) return -1;
    uint32_t n = st->ds.n_structs;
    if (a->n > 0 && (uint64_t)a->n < n) n = (uint32_t)a->n;
    if (a->n > (long)st->ds.n_structs) {
        fprintf(stderr, "packtrain eval: --n %ld but %s holds %u structures\n", a->n, a->data,
                st->ds.n_structs);
        return -1;
    }
    for (uint32_t s = 0; s < n; s++)
        if (isnan(st->ds.targets[(size_t)key * st->ds.n_structs + s]))
            pt_errors_add(errs, a->data, st->ds.source_line ? (long)st->ds.source_line[s] : 0,
                          st->ds.target_names[key], "structure %u has no value for this key", s);
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
    if (pt_schnet_acts_init(&st->acts, &st->model, lim.max_nodes, lim.max_edges, lim.max_graphs,
                            errs))
        return -1;
    st->pred = calloc(n, sizeof(double));
    if (a->grads) st->grads = calloc(st->model.n_params, sizeof(float));
    if (!st->pred || (a->grads && !st->grads)) {
        pt_errors_add(errs, "", 0, "", "out of memory");
        return -1;
    }

    double loss = 0.0;
    for (uint32_t k = 0; k < st->packs.n_packs; k++) {
        rc = pt_batch_fill(&st->batch, &st->ds, &st->graphs, &st->packs, k, 1, (int)key);
        if (rc != PT_BATCH_OK) {
            pt_errors_add(errs, a->data, 0, "", "%s", pt_batch_strerror(rc));
            return -1;
        }
        if (pt_schnet_batch_check(&st->model, &st->acts, &st->batch, errs)) return -1;
        const double *y = pt_schnet_forward(&st->model, &st->acts, &st->batch);
        for (int32_t g = 0; g < st->batch.cap_graphs; g++)
            if (st->batch.graph_id[g] >= 0) st->pred[st->batch.graph_id[g]] = y[g];
        loss += pt_schnet_loss(&st->model, &st->acts, &st->batch, (double)n);
        if (st->grads) pt_schnet_backward(&st->model, &st->acts, &st->batch, st->grads);
    }

    double mae = 0.0;
    json_t *preds = json_array();
    for (uint32_t s = 0; s < n; s++) {
        double t = st->ds.targets[(size_t)key * st->ds.n_structs + s];
        mae += fabs(st->pred[s] - t);
        json_array_append_new(preds, json_pack("{s:I,s:f,s:f}", "index", (json_int_t)s,
                                               "prediction", st->pred[s], "target", t));
    }
    json_t *out = json_pack("{s:s,s:s,s:s,s:I,s:f,s:f,s:f,s:o}", "model", a->model, "data",
                            a->data, "target", st->ds.target_names[key], "n", (json_int_t)n,
                            "loss", loss, "mae", mae / n, "rmse", sqrt(loss), "predictions", preds);
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
