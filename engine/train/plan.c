/* plan.c — what a job configuration means on a dataset and this machine
 * (plan.h): target, graphs, split, one packer per part, layout. */
#include "engine/train/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* "all" is the graph layer's unlimited (config.h) */
_Static_assert(PT_JOB_NEIGHBORS_ALL == PT_GRAPH_UNLIMITED, "max_neighbors \"all\"");

int pt_online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int64_t pt_train_layout_global_packs(const pt_train_layout *l)
{
    return (int64_t)l->replicas * l->accumulation * l->micro_packs;
}

/* The largest power of two <= x (x >= 1). */
static int32_t pow2_floor(int64_t x)
{
    int32_t p = 1;
    while ((int64_t)p * 2 <= x && p < (1 << 30)) p *= 2;
    return p;
}

int pt_train_layout_resolve(pt_train_layout *l, const pt_job_config *cfg, int cores, int forces,
                            int32_t max_edges, pt_errors *errs)
{
    (void)errs;
    const pt_job_backend *k = &cfg->backend;
    const int32_t A = k->gradient_accumulation;
    *l = (pt_train_layout){.ranks = k->ranks, .replicas = k->replication_factor,
                           .accumulation = A, .micro_packs = cfg->batching.model_batch_size,
                           .threads = k->threads > 0 ? k->threads : (cores > 0 ? cores : 1)};
    const int64_t G = PT_JOB_AUTO_GLOBAL_PACKS;
    if (l->replicas == 0) {
        if (k->kind == PT_JOB_BACKEND_MPI) l->replicas = l->ranks;
        else if (l->micro_packs) l->replicas = 1;   /* b given: the global batch is A·b */
        else l->replicas = pow2_floor(l->threads < G / A ? l->threads : G / A);
    }
    if (l->micro_packs == 0) {
        int64_t b = G / ((int64_t)l->replicas * A);
        l->micro_packs = b > 0 ? (int32_t)b : 1;
        if (forces) {   /* micro-batches of one pack, as many more of them */
            l->accumulation = A * l->micro_packs;
            l->micro_packs = 1;
        }
        /* large packs: halve b (twice the micro-batches) until one per-edge
         * array of the micro-batch fits the budget; the global batch stays */
        const int64_t edge_array = (int64_t)max_edges * cfg->model.filters * (int64_t)sizeof(float);
        while (l->micro_packs % 2 == 0 && l->micro_packs * edge_array > PT_PLAN_MICRO_EDGE_BYTES) {
            l->micro_packs /= 2;
            l->accumulation *= 2;
        }
    }
    return 0;
}

/* --- the plan ------------------------------------------------------------ */

static int oom(pt_errors *errs)
{
    pt_errors_add(errs, NULL, 0, "", "out of memory");
    return -1;
}

/* The n names as "a, b, c" in out (as many as cap holds), or "none". */
static const char *key_list(char *out, size_t cap, const char (*names)[PT_KEY_MAX], uint32_t n)
{
    size_t len = 0;
    out[0] = '\0';
    for (uint32_t j = 0; j < n && len < cap; j++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s", j ? ", " : "", names[j]);
    return n ? out : "none";
}

/* Atom-level target k: a per-atom column of the dataset (dataset.h
 * atom_cols) on every atom.  Any target may be one, the first too: a job of
 * per-atom targets only (charges, magnetic moments) is trained and measured
 * per atom (train_engine.c). */
static int find_atom_column(pt_train_plan *p, const pt_dataset *ds, const char *key, int k,
                            const char *field, pt_errors *errs)
{
    int c = pt_dataset_find_atom_col(ds, key);
    if (c < 0) {
        char list[400];
        pt_errors_add(errs, NULL, 0, field, "'%s' is not a per-atom column of this dataset; its "
                      "per-atom columns: %s%s", key,
                      key_list(list, sizeof list, ds->atom_col_names, ds->n_atom_cols),
                      ds->version && ds->version < 4 ? " (it was ingested before datasets kept "
                      "per-atom columns: upload it again)" : "");
        return -1;
    }
    p->head_key[k] = (uint32_t)c;
    const float *col = ds->atom_cols + (size_t)c * ds->n_atoms;
    uint32_t missing = 0, first = 0;
    for (uint32_t s = 0; s < ds->n_structs; s++)   /* NaN marks a whole structure's absence */
        if (pt_dataset_natoms(ds, s) && isnan(col[ds->atom_offset[s]]) && !missing++) first = s;
    if (!missing) return 0;
    pt_errors_add(errs, NULL, ds->source_line ? (long)ds->source_line[first] : 0, field,
                  "%u of %u structures have no per-atom '%s' column (the first is structure %u); "
                  "ingest only structures that have it", missing, ds->n_structs, key, first);
    return -1;
}

/* Target k of the job: a numeric key of the dataset on every structure
 * (graph level), or a per-atom column (atom level).  Errors are located at
 * "target" for a job of one target, "targets[k].key" for a list. */
static int find_target(pt_train_plan *p, const pt_job_config *cfg, const pt_dataset *ds, int k,
                       pt_errors *errs)
{
    const pt_job_target t = pt_job_config_target(cfg, k);
    char field[40];
    if (cfg->n_targets) snprintf(field, sizeof field, "targets[%d].key", k);
    else snprintf(field, sizeof field, "target");
    if (t.level == PT_JOB_LEVEL_ATOM) return find_atom_column(p, ds, t.key, k, field, errs);
    int key = pt_dataset_find_target(ds, t.key);
    if (key < 0) {
        char list[200];
        pt_errors_add(errs, NULL, 0, field, "the dataset has no numeric key '%s'; its keys: %s",
                      t.key, key_list(list, sizeof list, ds->target_names, ds->n_targets));
        return -1;
    }
    p->head_key[k] = (uint32_t)key;
    const double *col = ds->targets + (size_t)key * ds->n_structs;
    uint32_t missing = 0, first = 0;
    for (uint32_t s = 0; s < ds->n_structs; s++)
        if (isnan(col[s]) && !missing++) first = s;
    if (!missing) return 0;
    pt_errors_add(errs, NULL, ds->source_line ? (long)ds->source_line[first] : 0, field,
                  "%u of %u structures have no '%s' value (the first is structure %u); "
                  "choose another target or ingest only structures that have it",
                  missing, ds->n_structs, t.key, first);
    return -1;
}

static int find_targets(pt_train_plan *p, const pt_job_config *cfg, const pt_dataset *ds,
                        pt_errors *errs)
{
    int rc = 0;
    p->n_heads = pt_job_config_n_targets(cfg);
    for (int k = 0; k < p->n_heads; k++)
        if (find_target(p, cfg, ds, k, errs) != 0) rc = -1;
    p->target_key = p->head_key[0];
    return rc;
}

static pt_readout readout_of(pt_job_readout r)
{
    return r == PT_JOB_READOUT_SUM ? PT_READOUT_SUM : PT_READOUT_MEAN;
}

int32_t pt_train_max_neighbors(const pt_job_config *cfg, int forces)
{
    const int32_t k = cfg->model.max_neighbors;
    if (k != PT_JOB_NEIGHBORS_AUTO) return k;   /* PT_JOB_NEIGHBORS_ALL = PT_GRAPH_UNLIMITED */
    return forces ? PT_GRAPH_UNLIMITED : PT_JOB_ENERGY_MAX_NEIGHBORS;
}

pt_schnet_config pt_train_model_config(const pt_job_config *cfg, int forces)
{
    const pt_job_target t0 = pt_job_config_target(cfg, 0);
    pt_schnet_config mc = {.hidden = cfg->model.hidden, .filters = cfg->model.filters,
                           .interactions = cfg->model.interactions,
                           .gaussians = cfg->model.gaussians, .cutoff = (float)cfg->model.cutoff,
                           .max_neighbors = pt_train_max_neighbors(cfg, forces),
                           .readout = readout_of(t0.readout),
                           .use_atomref = t0.normalize == PT_NORM_ATOMREF};
    if (!pt_job_config_multi_head(cfg)) return mc;
    mc.readout = PT_READOUT_SUM;
    mc.use_atomref = 0;
    mc.n_heads = cfg->n_targets;
    for (int k = 0; k < cfg->n_targets; k++) {
        const pt_job_target *t = &cfg->targets[k];
        pt_schnet_head_config *h = &mc.heads[k];
        snprintf(h->key, sizeof h->key, "%s", t->key);
        h->level = t->level == PT_JOB_LEVEL_ATOM ? PT_HEAD_ATOM : PT_HEAD_GRAPH;
        h->readout = readout_of(t->readout);
        h->use_atomref = t->normalize == PT_NORM_ATOMREF;
    }
    return mc;
}

int pt_train_has_forces(const pt_dataset *ds, uint32_t s)
{
    /* NaN only ever marks absence (dataset.h), for a whole structure */
    return ds->forces && pt_dataset_natoms(ds, s) > 0 &&
           !isnan(ds->forces[3 * ds->atom_offset[s]]);
}

int pt_train_has_stress(const pt_dataset *ds, uint32_t s)
{
    return ds->stress && pt_dataset_pbc(ds, s) == PT_PBC_ALL && !isnan(ds->stress[9 * (size_t)s]);
}

int pt_train_loss_resolve(pt_train_loss *out, const pt_job_config *cfg, const pt_dataset *ds,
                          pt_errors *errs)
{
    const pt_job_loss *l = &cfg->training.loss;
    memset(out, 0, sizeof(*out));
    for (uint32_t s = 0; s < ds->n_structs; s++) {
        out->with_forces += (uint32_t)pt_train_has_forces(ds, s);
        out->with_stress += (uint32_t)pt_train_has_stress(ds, s);
    }
    size_t before = errs->total;
    /* the dataset holds one set of force labels, under the name "forces" */
    if (strcmp(cfg->forces_key, "forces") && l->forces_weight != 0.0)
        pt_errors_add(errs, NULL, 0, "forces_key",
                      "'%s' names no force labels of this dataset; its per-atom labels: %s",
                      cfg->forces_key,
                      out->with_forces ? "forces (a dataset keeps one set of force labels, "
                                         "chosen at upload: an extended XYZ 'forces' or 'force' "
                                         "column, or an ASE database's ?forces_key=)"
                                       : "none (no structure has force labels)");
    if (l->forces_weight > 0.0 && !out->with_forces)
        pt_errors_add(errs, NULL, 0, "training.loss.forces_weight",
                      "forces weight %g, but none of the dataset's %u structures has force "
                      "labels (a per-atom 'forces' column); set it to 0 or \"auto\", or "
                      "upload structures with forces", l->forces_weight, ds->n_structs);
    if (l->stress_weight > 0.0 && !out->with_stress)
        pt_errors_add(errs, NULL, 0, "training.loss.stress_weight",
                      "stress weight %g, but none of the dataset's %u structures has a stress "
                      "label on a cell periodic along a, b and c (extended XYZ 'stress' with "
                      "pbc=\"T T T\"); set it to 0", l->stress_weight, ds->n_structs);
    if (errs->total != before) return -1;
    /* forces are -d/dr of a graph-level first target (the energy): a per-atom
     * first target has none, so "auto" is 0 whatever labels the data holds
     * (a weight above 0 is the configuration's 422, config_targets.c) */
    const int atom0 = pt_job_config_target(cfg, 0).level == PT_JOB_LEVEL_ATOM;
    double wf = l->forces_weight == PT_JOB_WEIGHT_AUTO
                    ? (out->with_forces && !atom0 ? 1.0 : 0.0) : l->forces_weight;
    out->w = (pt_schnet_loss_weights){.energy = l->energy_weight, .forces = wf,
                                      .stress = l->stress_weight};
    out->forces = wf > 0.0 || l->stress_weight > 0.0;
    out->w.energy_per_atom = l->energy == PT_JOB_ENERGY_PER_ATOM ||
                             (l->energy == PT_JOB_ENERGY_AUTO && out->forces);
    out->heads = pt_job_config_n_targets(cfg);
    double others = 0.0;
    for (int k = 0; k < out->heads; k++) {
        out->head_weight[k] = k ? pt_job_config_target(cfg, k).weight : l->energy_weight;
        out->head_atom[k] = pt_job_config_target(cfg, k).level == PT_JOB_LEVEL_ATOM;
        if (k) others += out->head_weight[k];
    }
    if (out->w.energy == 0.0 && !out->forces && others == 0.0) {
        pt_errors_add(errs, NULL, 0, "training.loss.energy_weight",
                      "energy weight 0 and forces weight \"auto\" on a dataset without force "
                      "labels: nothing would be trained; give energy_weight a value above 0");
        return -1;
    }
    return 0;
}

static int size_graphs(pt_train_plan *p, const pt_job_config *cfg, const pt_dataset *ds,
                       int graphs, pt_errors *errs)
{
    uint32_t n = ds->n_structs;
    p->natoms = malloc((size_t)(n ? n : 1) * sizeof(uint32_t));
    p->nedges = malloc((size_t)(n ? n : 1) * sizeof(uint32_t));
    if (!p->natoms || !p->nedges) return oom(errs);
    for (uint32_t s = 0; s < n; s++) p->natoms[s] = pt_dataset_natoms(ds, s);
    p->max_neighbors = pt_train_max_neighbors(cfg, p->loss.forces);
    pt_graph_params gp = {.cutoff = (float)cfg->model.cutoff, .max_neighbors = p->max_neighbors,
                          .mode = PT_GRAPH_RADIUS};
    if (graphs != PT_PLAN_GRAPHS) return pt_graphs_count(p->nedges, ds, &gp, errs);
    if (pt_graphs_build(&p->graphs, ds, &gp, errs) != 0) return -1;
    p->has_graphs = 1;
    for (uint32_t s = 0; s < n; s++) p->nedges[s] = pt_graphs_nedges(&p->graphs, s);
    return 0;
}

/* batching.method and its limits as a pack request: the static and dynamic
 * methods take max_graphs as their batch size. */
static int plan_packer(pt_train_plan *p, const pt_job_config *cfg, pt_packer *pk,
                       const uint32_t *ids, uint32_t n, pt_errors *errs)
{
    const pt_job_batching *b = &cfg->batching;
    pt_pack_request req = {.method = (pt_pack_method)b->method, .max_nodes = b->max_nodes,
                           .max_edges = b->max_edges, .heuristic = PT_HEUR_PRODUCT};
    int batched = b->method == PT_JOB_BATCH_STATIC64 || b->method == PT_JOB_BATCH_STATIC2N ||
                  b->method == PT_JOB_BATCH_DYNAMIC;
    if (batched) req.batch_size = b->max_graphs;
    else req.max_graphs = b->max_graphs;
    const char *scope = errs->scope;
    errs->scope = "batching.";
    int rc = pt_packer_init(pk, &req, p->natoms, p->nedges, p->n_structs, ids, n, errs);
    errs->scope = scope;
    return rc;
}

int pt_train_plan_init(pt_train_plan *p, const pt_job_config *cfg, const pt_dataset *ds,
                       int graphs, int cores, pt_errors *errs)
{
    memset(p, 0, sizeof(*p));
    p->n_structs = ds->n_structs;
    const pt_job_training *t = &cfg->training;
    int rc = find_targets(p, cfg, ds, errs);
    if (pt_train_loss_resolve(&p->loss, cfg, ds, errs) != 0) rc = -1;
    if (rc == 0) rc = size_graphs(p, cfg, ds, graphs, errs);
    if (rc == 0) rc = pt_split_init(&p->split, ds->n_structs, t->split, t->seed, errs);
    if (rc == 0) rc = pt_split_cover_elements(&p->split, ds, &p->split_moved, errs);
    if (rc == 0)
        rc = plan_packer(p, cfg, &p->train_pk, p->split.train, p->split.n_train, errs) ||
             plan_packer(p, cfg, &p->val_pk, p->split.val, p->split.n_val, errs) ||
             (p->split.n_test &&
              plan_packer(p, cfg, &p->test_pk, p->split.test, p->split.n_test, errs));
    if (rc == 0) rc = pt_train_layout_resolve(&p->layout, cfg, cores, p->loss.forces,
                                     p->train_pk.limits.max_edges, errs);
    if (rc != 0) {
        pt_train_plan_close(p);
        return -1;
    }
    return 0;
}

void pt_train_plan_close(pt_train_plan *p)
{
    pt_packer_close(&p->train_pk);
    pt_packer_close(&p->val_pk);
    pt_packer_close(&p->test_pk);
    pt_split_close(&p->split);
    if (p->has_graphs) pt_graphs_close(&p->graphs);
    free(p->natoms);
    free(p->nedges);
    memset(p, 0, sizeof(*p));
}
