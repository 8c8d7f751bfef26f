/* schnet_fixture.h — shared by the SchNet model tests (header-only, so it
 * is compiled into test_schnet only): hand-built batches of small molecules
 * laid out as engine/batch.h prescribes (padding nodes, padding edges on each
 * pack's last node slot at the cutoff, padding graph slots), a small model
 * with atomref, mean and std, and a double-precision reference forward pass
 * written as plain loops over PyG's equations.  Include after <cmocka.h>. */
#ifndef PT_SCHNET_FIXTURE_H
#define PT_SCHNET_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/model/schnet.h"
#include "tests/ref/model_ref.h"
/* ---- hand-built batches ---------------------------------------------------- */

enum { MAXA = 6, MAXM = 6 };

typedef struct mol {
    int n;
    uint8_t z[MAXA];
    double pos[MAXA][3];
    double target;
} mol;

typedef struct hand_batch {
    pt_batch b;
    int32_t slot_of_mol[MAXM];   /* graph slot of each molecule */
} hand_batch;

/* Packs molecule k into pack pack_of[k]; edges are every ordered pair within
 * `cutoff` (receiver-major, then sender), padding edges point from and to the
 * pack's last node slot at distance `cutoff`, as batch.h prescribes. */
static void batch_build(hand_batch *hb, const mol *mols, const int *pack_of, int n_mols,
                        int n_packs, pt_pack_limits lim, float cutoff)
{
    pt_batch *b = &hb->b;
    memset(hb, 0, sizeof(*hb));
    b->limits = lim;
    b->n_packs = n_packs;
    b->cap_nodes = n_packs * lim.max_nodes;
    b->cap_edges = n_packs * lim.max_edges;
    b->cap_graphs = n_packs * lim.max_graphs;
    b->cutoff = cutoff;
    b->z = calloc((size_t)b->cap_nodes, 1);
    b->node_graph = malloc(sizeof(int32_t) * (size_t)b->cap_nodes);
    b->edge_src = malloc(sizeof(int32_t) * (size_t)b->cap_edges);
    b->edge_dst = malloc(sizeof(int32_t) * (size_t)b->cap_edges);
    b->edge_dist = malloc(sizeof(float) * (size_t)b->cap_edges);
    b->edge_vec = malloc(sizeof(float) * 3 * (size_t)b->cap_edges);
    b->dst_offset = calloc((size_t)b->cap_nodes + 1, sizeof(int32_t));
    b->graph_id = malloc(sizeof(int32_t) * (size_t)b->cap_graphs);
    b->graph_natoms = calloc((size_t)b->cap_graphs, sizeof(int32_t));
    b->target = calloc((size_t)b->cap_graphs, sizeof(double));
    for (int i = 0; i < b->cap_nodes; i++) b->node_graph[i] = -1;
    for (int g = 0; g < b->cap_graphs; g++) b->graph_id[g] = -1;
    for (int p = 0; p < n_packs; p++) {
        int node = p * lim.max_nodes, edge = p * lim.max_edges, slot = p * lim.max_graphs;
        int first_node[MAXM];
        for (int k = 0; k < n_mols; k++) {
            if (pack_of[k] != p) continue;
            first_node[k] = node;
            hb->slot_of_mol[k] = slot;
            b->graph_id[slot] = k;
            b->graph_natoms[slot] = mols[k].n;
            b->target[slot] = mols[k].target;
            for (int a = 0; a < mols[k].n; a++) {
                b->z[node] = mols[k].z[a];
                b->node_graph[node++] = slot;
            }
            slot++;
            b->n_real_graphs++;
        }
        assert_true(node <= (p + 1) * lim.max_nodes);
        assert_true(slot <= (p + 1) * lim.max_graphs);
        for (int k = 0; k < n_mols; k++) {
            if (pack_of[k] != p) continue;
            for (int i = 0; i < mols[k].n; i++)
                for (int j = 0; j < mols[k].n; j++) {
                    if (i == j) continue;
                    double d2 = 0.0;
                    for (int c = 0; c < 3; c++) {
                        double dd = mols[k].pos[i][c] - mols[k].pos[j][c];
                        d2 += dd * dd;
                    }
                    if (sqrt(d2) >= cutoff) continue;
                    b->edge_src[edge] = first_node[k] + j;
                    b->edge_dst[edge] = first_node[k] + i;
                    for (int c = 0; c < 3; c++)   /* r_j - r_i: the reverse is exactly its negation */
                        b->edge_vec[3 * edge + c] = (float)(mols[k].pos[j][c] - mols[k].pos[i][c]);
                    b->edge_dist[edge++] = (float)sqrt(d2);
                    b->n_real_edges++;
                }
            b->n_real_nodes += mols[k].n;
        }
        assert_true(edge <= (p + 1) * lim.max_edges);
        int last = (p + 1) * lim.max_nodes - 1;
        for (; edge < (p + 1) * lim.max_edges; edge++) {
            b->edge_src[edge] = b->edge_dst[edge] = last;
            b->edge_dist[edge] = cutoff;
            b->edge_vec[3 * edge] = cutoff;
            b->edge_vec[3 * edge + 1] = b->edge_vec[3 * edge + 2] = 0.0f;
        }
    }
    for (int k = 0; k < b->cap_edges; k++) b->dst_offset[b->edge_dst[k] + 1]++;
    for (int i = 0; i < b->cap_nodes; i++) b->dst_offset[i + 1] += b->dst_offset[i];
}

static void batch_free(hand_batch *hb)
{
    pt_batch *b = &hb->b;
    free(b->z);
    free(b->node_graph);
    free(b->edge_src);
    free(b->edge_dst);
    free(b->edge_dist);
    free(b->edge_vec);
    free(b->dst_offset);
    free(b->graph_id);
    free(b->graph_natoms);
    free(b->target);
}

/* five small molecules: 3 + 4 atoms fill pack 0 of 7 slots exactly */
static mol mols[5];
static const int n_mols = 5;

static void make_molecules(void)
{
    static const int sizes[5] = {3, 4, 5, 2, 6};
    static const uint8_t elems[4] = {1, 6, 7, 8};
    pt_rng r;
    pt_rng_init(&r, 11, 0);
    for (int k = 0; k < n_mols; k++) {
        mols[k].n = sizes[k];
        for (int a = 0; a < sizes[k]; a++) {
            mols[k].z[a] = elems[pt_rng_below(&r, 4)];
            for (int c = 0; c < 3; c++) mols[k].pos[a][c] = 2.2 * pt_rng_uniform(&r);
        }
        mols[k].target = -3.0 + 2.0 * k;
    }
    /* one pair beyond the cutoff so not every molecule is fully connected */
    mols[4].pos[5][0] = 9.0;
}

static const float cutoff = 3.0f;
static const pt_pack_limits small_limits = {.max_nodes = 7, .max_edges = 40, .max_graphs = 3};
static const int small_packs[5] = {0, 0, 1, 1, 2};

static pt_schnet_config small_config(pt_readout readout)
{
    pt_schnet_config c = pt_schnet_config_default();
    c.hidden = 6;
    c.filters = 5;
    c.interactions = 2;
    c.gaussians = 4;
    c.cutoff = cutoff;
    c.readout = readout;
    c.use_atomref = 1;
    return c;
}

static void make_model(pt_schnet *m, pt_readout readout)
{
    pt_schnet_config c = small_config(readout);
    assert_int_equal(pt_schnet_init(m, &c, NULL), 0);
    ref_model_fill(m, (const double[4]){-0.6, -37.8, -54.5, -75.0}, 5, -0.75, 2.5, 99);
}

/* ---- double-precision reference -------------------------------------------- */

/* The trunk's output h_T [N,H] (malloc'd; the caller frees it). */
static double *reference_trunk(const pt_schnet *m, const double *theta, const pt_batch *b)
{
    const int H = m->cfg.hidden, F = m->cfg.filters, G = m->cfg.gaussians;
    const int N = b->cap_nodes, E = b->cap_edges;
    const double rc = m->cfg.cutoff, step = rc / (G - 1), gamma = -0.5 / (step * step);
    double *h = calloc((size_t)N * H, sizeof(double)), *x = calloc((size_t)N * F, sizeof(double));
    double *mm = calloc((size_t)N * F, sizeof(double)), *W = calloc((size_t)E * F, sizeof(double));
    const double *emb = ref_tensor(m, theta, "embedding.weight", 0);
    for (int i = 0; i < N; i++)
        for (int c = 0; c < H; c++) h[i * H + c] = emb[b->z[i] * H + c];
    for (int t = 0; t < m->cfg.interactions; t++) {
        const ref_block B = ref_block_at(m, theta, t);
        for (int k = 0; k < E; k++) {
            double d = b->edge_dist[k], e[64], s1[64];
            double C = d < rc ? 0.5 * (cos(M_PI * d / rc) + 1.0) : 0.0;
            for (int g = 0; g < G; g++) e[g] = exp(gamma * (d - g * step) * (d - g * step));
            for (int f = 0; f < F; f++) {
                double v = B.a1[f];
                for (int g = 0; g < G; g++) v += B.A1[f * G + g] * e[g];
                s1[f] = ssp_ref(v);
            }
            for (int f = 0; f < F; f++) {
                double v = B.a2[f];
                for (int q = 0; q < F; q++) v += B.A2[f * F + q] * s1[q];
                W[k * F + f] = v * C;
            }
        }
        for (int i = 0; i < N; i++)
            for (int f = 0; f < F; f++) {
                double v = 0.0;
                for (int c = 0; c < H; c++) v += B.L1[f * H + c] * h[i * H + c];
                x[i * F + f] = v;
            }
        memset(mm, 0, sizeof(double) * (size_t)N * F);
        for (int k = 0; k < E; k++)
            for (int f = 0; f < F; f++)
                mm[b->edge_dst[k] * F + f] += x[b->edge_src[k] * F + f] * W[k * F + f];
        for (int i = 0; i < N; i++) {
            double u[64];
            for (int c = 0; c < H; c++) {
                double v = B.c2[c];
                for (int f = 0; f < F; f++) v += B.L2[c * F + f] * mm[i * F + f];
                u[c] = ssp_ref(v);
            }
            for (int c = 0; c < H; c++) {
                double v = B.c3[c];
                for (int q = 0; q < H; q++) v += B.L3[c * H + q] * u[q];
                h[i * H + c] += v;
            }
        }
    }
    free(x);
    free(mm);
    free(W);
    return h;
}

/* y[slot] for every graph slot; returns the loss (mean over real graphs). */
static double reference(const pt_schnet *m, const double *theta, const pt_batch *b, double *y)
{
    const int H = m->cfg.hidden, H2 = H / 2, N = b->cap_nodes;
    double *h = reference_trunk(m, theta, b);
    const double *W4 = ref_tensor(m, theta, "lin1.weight", 0), *b4 = ref_tensor(m, theta, "lin1.bias", 0);
    const double *w5 = ref_tensor(m, theta, "lin2.weight", 0), *b5 = ref_tensor(m, theta, "lin2.bias", 0);
    const double *aref = m->cfg.use_atomref ? ref_tensor(m, theta, "atomref.weight", 0) : NULL;
    int count[64] = {0};
    for (int g = 0; g < b->cap_graphs; g++) y[g] = 0.0;
    for (int i = 0; i < N; i++) {
        if (b->node_graph[i] < 0) continue;
        double o = b5[0];
        for (int j = 0; j < H2; j++) {
            double v = b4[j];
            for (int c = 0; c < H; c++) v += W4[j * H + c] * h[i * H + c];
            o += w5[j] * ssp_ref(v);
        }
        o = o * m->std[0] + m->mean[0] + (aref ? aref[b->z[i]] : 0.0);
        y[b->node_graph[i]] += o;
        count[b->node_graph[i]]++;
    }
    double loss = 0.0;
    int n_real = 0;
    for (int g = 0; g < b->cap_graphs; g++) {
        if (m->cfg.readout == PT_READOUT_MEAN && count[g]) y[g] /= count[g];
        if (b->graph_id[g] < 0) continue;
        loss += (y[g] - b->target[g]) * (y[g] - b->target[g]);
        n_real++;
    }
    free(h);
    return loss / n_real;
}

typedef struct fixture {
    pt_schnet m;
    pt_schnet_acts a;
    hand_batch hb;
    float *grads;
} fixture;

static void fixture_open(fixture *fx, pt_readout readout)
{
    make_molecules();
    make_model(&fx->m, readout);
    batch_build(&fx->hb, mols, small_packs, n_mols, 3, small_limits, cutoff);
    assert_int_equal(pt_schnet_acts_init(&fx->a, &fx->m, fx->hb.b.cap_nodes, fx->hb.b.cap_edges,
                                         fx->hb.b.cap_graphs, NULL), 0);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_schnet_batch_check(&fx->m, &fx->a, &fx->hb.b, &errs), 0);
    pt_errors_close(&errs);
    fx->grads = calloc(fx->m.n_params, sizeof(float));
}

static void fixture_close(fixture *fx)
{
    free(fx->grads);
    batch_free(&fx->hb);
    pt_schnet_acts_close(&fx->a);
    pt_schnet_close(&fx->m);
}

static double *theta_of(const pt_schnet *m)
{
    double *th = malloc(sizeof(double) * m->n_params);
    for (size_t i = 0; i < m->n_params; i++) th[i] = m->params_memory[i];
    return th;
}

#endif
