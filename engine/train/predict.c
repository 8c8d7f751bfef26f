/* predict.c — forward passes of a saved SchNet over a dataset; see
 * predict.h.  Structures go through the engine's own batches (consecutive
 * packs of PREDICT_BATCH, engine/batch.c), so prediction sees exactly the
 * layout training and eval see. */
#include "engine/train/predict.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/pack/batch.h"
#include "engine/graph/graph.h"
#include "engine/pack/packing.h"
#include "engine/model/schnet.h"

#define PREDICT_BATCH 32

int pt_predict_dataset(pt_prediction *p, const char *model_path, const pt_dataset *ds, pt_errors *errs)
{
    return pt_predict_dataset_ex(p, model_path, ds, NULL, errs);
}

int pt_predict_dataset_ex(pt_prediction *p, const char *model_path, const pt_dataset *ds,
                          pt_predict_options *o, pt_errors *errs)
{
    memset(p, 0, sizeof(*p));
    if (o) o->stopped = 0;
    pt_schnet m;
    memset(&m, 0, sizeof m);
    if (pt_schnet_load(&m, model_path, errs) != 0) return -1;
    pt_graphs g;
    memset(&g, 0, sizeof g);
    pt_batch b;
    memset(&b, 0, sizeof b);
    pt_packs packs;
    memset(&packs, 0, sizeof packs);
    pt_schnet_acts acts;
    memset(&acts, 0, sizeof acts);
    int rc = -1;
    pt_graph_params gp = {.cutoff = m.cfg.cutoff, .max_neighbors = m.cfg.max_neighbors, .mode = PT_GRAPH_RADIUS};
    if (pt_graphs_build(&g, ds, &gp, errs) != 0) goto done;
    if (o && o->max_edges && g.n_edges > o->max_edges) {
        pt_errors_add(errs, NULL, 0, "", "the structures have %llu neighbour edges at the model's cutoff of %g "
                      "Å, more than the %llu accepted in one call", (unsigned long long)g.n_edges,
                      (double)m.cfg.cutoff, (unsigned long long)o->max_edges);
        o->stopped = 1;
        goto done;
    }
    if (pt_packs_consecutive(&packs, ds, &g, ds->n_structs, PREDICT_BATCH, errs) != 0) goto done;
    int brc = pt_batch_init(&b, packs.limits, 1, m.cfg.cutoff);
    if (brc != PT_BATCH_OK || !(p->y = calloc(ds->n_structs ? ds->n_structs : 1, sizeof(double)))) {
        pt_errors_add(errs, NULL, 0, "", "%s", brc != PT_BATCH_OK ? pt_batch_strerror(brc) : "out of memory");
        goto done;
    }
    /* fp32 (the default of every arena), whatever training.precision
     * the job trained under: the saved weights are fp32, and predictions are
     * the model's full-precision answer, as PyG would give it */
    if (pt_schnet_acts_init_forward(&acts, &m, b.cap_nodes, b.cap_edges, b.cap_graphs, errs) != 0)
        goto done;   /* forwards only: the blocks share their arrays, no sigmoids */
    p->n_heads = m.cfg.n_heads;
    const int atom0 = m.head[0].level == PT_HEAD_ATOM;
    for (int k = 0; k < p->n_heads; k++) {
        snprintf(p->head_key[k], sizeof p->head_key[k], "%s", m.head[k].key);
        p->head_atom[k] = m.head[k].level == PT_HEAD_ATOM;
        size_t len = p->head_atom[k] ? ds->n_atoms : ds->n_structs;
        if (!(p->head_y[k] = calloc(len ? len : 1, sizeof(double)))) {
            pt_errors_add(errs, NULL, 0, "", "out of memory");
            goto done;
        }
    }
    for (uint32_t k = 0; k < packs.n_packs; k++) {
        if (o && o->should_stop && o->should_stop(o->user)) {
            pt_errors_add(errs, NULL, 0, "", "stopped");
            o->stopped = 2;
            goto done;
        }
        brc = pt_batch_fill(&b, ds, &g, &packs, k, 1, -1);
        if (brc != PT_BATCH_OK) {
            pt_errors_add(errs, NULL, 0, "", "%s", pt_batch_strerror(brc));
            goto done;
        }
        if (pt_schnet_batch_check(&m, &acts, &b, errs) != 0) goto done;
        const double *y = pt_schnet_forward(&m, &acts, &b);
        for (int32_t s = 0; s < b.cap_graphs; s++)   /* a per-atom head 0: head_y[0] */
            if (b.graph_id[s] >= 0) p->y[b.graph_id[s]] = atom0 ? NAN : y[s];
        for (int h = 0; h < p->n_heads; h++) {
            const double *yk = acts.head[h].y;
            if (!p->head_atom[h]) {
                for (int32_t s = 0; s < b.cap_graphs; s++)
                    if (b.graph_id[s] >= 0) p->head_y[h][b.graph_id[s]] = yk[s];
                continue;
            }
            /* a graph's atoms are consecutive node slots, in dataset order */
            for (int32_t i = 0; i < b.cap_nodes;) {
                int32_t slot = b.node_graph[i];
                if (slot < 0) {
                    i++;
                    continue;
                }
                uint32_t s = (uint32_t)b.graph_id[slot], na = pt_dataset_natoms(ds, s);
                memcpy(p->head_y[h] + ds->atom_offset[s], yk + i, na * sizeof(double));
                i += (int32_t)na;
            }
        }
    }
    p->n = ds->n_structs;
    p->cutoff = m.cfg.cutoff;
    p->hidden = m.cfg.hidden;
    p->interactions = m.cfg.interactions;
    rc = 0;
done:
    pt_schnet_acts_close(&acts);
    pt_batch_close(&b);
    pt_packs_close(&packs);
    pt_graphs_close(&g);
    pt_schnet_close(&m);
    if (rc != 0) pt_prediction_close(p);
    return rc;
}

void pt_prediction_close(pt_prediction *p)
{
    for (int k = 0; k < PT_PREDICT_MAX_HEADS; k++) free(p->head_y[k]);
    free(p->y);
    memset(p, 0, sizeof(*p));
}
