/* predict.c — forward passes of a saved SchNet over a dataset; see
 * predict.h.  The batch layout is engine/batch.h's: real atoms, edges and
 * graphs first, then padding (z = 0, node_graph = -1, edges on the last node
 * slot at the cutoff so the cosine cutoff zeroes them, graph_id = -1). */
#include "server/predict.h"

#include <stdlib.h>
#include <string.h>

#include "engine/batch.h"
#include "engine/graph.h"
#include "engine/schnet.h"

#define PREDICT_BATCH 32

static int batch_alloc(pt_batch *b, int32_t nodes, int32_t edges, int32_t graphs, float cutoff)
{
    memset(b, 0, sizeof(*b));
    b->limits = (pt_pack_limits){nodes, edges, graphs};
    b->n_packs = 1;
    b->cap_nodes = nodes;
    b->cap_edges = edges;
    b->cap_graphs = graphs;
    b->cutoff = cutoff;
    b->z = calloc((size_t)nodes, 1);
    b->node_graph = calloc((size_t)nodes, sizeof(int32_t));
    b->edge_src = calloc((size_t)edges, sizeof(int32_t));
    b->edge_dst = calloc((size_t)edges, sizeof(int32_t));
    b->edge_dist = calloc((size_t)edges, sizeof(float));
    b->dst_offset = calloc((size_t)nodes + 1, sizeof(int32_t));
    b->graph_id = calloc((size_t)graphs, sizeof(int32_t));
    b->graph_natoms = calloc((size_t)graphs, sizeof(int32_t));
    b->target = calloc((size_t)graphs, sizeof(double));
    return b->z && b->node_graph && b->edge_src && b->edge_dst && b->edge_dist && b->dst_offset && b->graph_id &&
                   b->graph_natoms && b->target
               ? 0
               : -1;
}

static void batch_free(pt_batch *b)
{
    free(b->z);
    free(b->node_graph);
    free(b->edge_src);
    free(b->edge_dst);
    free(b->edge_dist);
    free(b->dst_offset);
    free(b->graph_id);
    free(b->graph_natoms);
    free(b->target);
    memset(b, 0, sizeof(*b));
}

/* Structures [first, first + count) into the one pack of b. */
static void batch_fill(pt_batch *b, const pt_dataset *ds, const pt_graphs *g, uint32_t first, uint32_t count)
{
    int32_t node = 0, edge = 0;
    memset(b->dst_offset, 0, sizeof(int32_t) * ((size_t)b->cap_nodes + 1));
    b->n_real_graphs = (int32_t)count;
    for (int32_t s = 0; s < b->cap_graphs; s++) {
        b->target[s] = 0.0;
        if ((uint32_t)s >= count) {
            b->graph_id[s] = -1;
            b->graph_natoms[s] = 0;
            continue;
        }
        uint32_t id = first + (uint32_t)s;
        uint32_t na = pt_dataset_natoms(ds, id);
        b->graph_id[s] = (int32_t)id;
        b->graph_natoms[s] = (int32_t)na;
        for (uint64_t e = g->edge_offset[id]; e < g->edge_offset[id + 1]; e++) {
            b->edge_src[edge] = node + (int32_t)g->src[e];
            b->edge_dst[edge] = node + (int32_t)g->dst[e];
            b->edge_dist[edge++] = g->dist[e];
        }
        for (uint32_t a = 0; a < na; a++) {
            b->z[node] = ds->z[ds->atom_offset[id] + a];
            b->node_graph[node++] = s;
        }
    }
    b->n_real_nodes = node;
    b->n_real_edges = edge;
    for (; node < b->cap_nodes; node++) {
        b->z[node] = 0;
        b->node_graph[node] = -1;
    }
    for (; edge < b->cap_edges; edge++) {
        b->edge_src[edge] = b->edge_dst[edge] = b->cap_nodes - 1;
        b->edge_dist[edge] = b->cutoff;
    }
    for (int32_t k = 0; k < b->cap_edges; k++) b->dst_offset[b->edge_dst[k] + 1]++;
    for (int32_t i = 0; i < b->cap_nodes; i++) b->dst_offset[i + 1] += b->dst_offset[i];
}

/* The largest node and edge totals over the batches, so one arena fits all. */
static void batch_sizes(const pt_dataset *ds, const pt_graphs *g, int64_t *nodes, int64_t *edges)
{
    *nodes = *edges = 0;
    for (uint32_t first = 0; first < ds->n_structs; first += PREDICT_BATCH) {
        uint32_t end = first + PREDICT_BATCH < ds->n_structs ? first + PREDICT_BATCH : ds->n_structs;
        int64_t nn = (int64_t)(ds->atom_offset[end] - ds->atom_offset[first]);
        int64_t ne = (int64_t)(g->edge_offset[end] - g->edge_offset[first]);
        if (nn > *nodes) *nodes = nn;
        if (ne > *edges) *edges = ne;
    }
}

int pt_predict_dataset(pt_prediction *p, const char *model_path, const pt_dataset *ds, pt_errors *errs)
{
    memset(p, 0, sizeof(*p));
    pt_schnet m;
    memset(&m, 0, sizeof m);
    if (pt_schnet_load(&m, model_path, errs) != 0) return -1;
    pt_graphs g;
    memset(&g, 0, sizeof g);
    pt_batch b;
    memset(&b, 0, sizeof b);
    pt_schnet_acts acts;
    memset(&acts, 0, sizeof acts);
    int rc = -1;
    pt_graph_params gp = {.cutoff = m.cfg.cutoff, .max_neighbors = m.cfg.max_neighbors, .mode = PT_GRAPH_RADIUS};
    if (pt_graphs_build(&g, ds, &gp, errs) != 0) goto done;
    int64_t nodes, edges;
    batch_sizes(ds, &g, &nodes, &edges);
    if (nodes + 1 > INT32_MAX / 4 || edges + 1 > INT32_MAX / 4) {
        pt_errors_add(errs, NULL, 0, "", "%d structures at once are too large to evaluate", PREDICT_BATCH);
        goto done;
    }
    /* One spare node and edge slot: padding edges have a node of their own. */
    if (batch_alloc(&b, (int32_t)nodes + 1, (int32_t)edges + 1, PREDICT_BATCH, m.cfg.cutoff) != 0 ||
        !(p->y = calloc(ds->n_structs ? ds->n_structs : 1, sizeof(double)))) {
        pt_errors_add(errs, NULL, 0, "", "out of memory");
        goto done;
    }
    if (pt_schnet_acts_init(&acts, &m, b.cap_nodes, b.cap_edges, b.cap_graphs, errs) != 0) goto done;
    for (uint32_t first = 0; first < ds->n_structs; first += PREDICT_BATCH) {
        uint32_t count = ds->n_structs - first < PREDICT_BATCH ? ds->n_structs - first : PREDICT_BATCH;
        batch_fill(&b, ds, &g, first, count);
        if (pt_schnet_batch_check(&m, &acts, &b, errs) != 0) goto done;
        const double *y = pt_schnet_forward(&m, &acts, &b);
        for (uint32_t s = 0; s < count; s++) p->y[first + s] = y[s];
    }
    p->n = ds->n_structs;
    p->cutoff = m.cfg.cutoff;
    p->hidden = m.cfg.hidden;
    p->interactions = m.cfg.interactions;
    rc = 0;
done:
    pt_schnet_acts_close(&acts);
    batch_free(&b);
    pt_graphs_close(&g);
    pt_schnet_close(&m);
    if (rc != 0) pt_prediction_close(p);
    return rc;
}

void pt_prediction_close(pt_prediction *p)
{
    free(p->y);
    memset(p, 0, sizeof(*p));
}
