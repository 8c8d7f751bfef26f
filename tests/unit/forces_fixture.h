/* forces_fixture.h — shared by the force tests (header-only; include after
 * <cmocka.h>):
 *   - small structures: molecules, a slab periodic in x and y, and fully
 *     periodic triclinic cells shorter than the cutoff (an atom neighbours
 *     its own images), with energy, force and stress targets;
 *   - their neighbour lists with image shifts (brute force over ±3 cells),
 *     packed into a fixed-shape pt_batch as engine/pack/batch.h prescribes
 *     (edge_vec = r_src + S·cell − r_dst, padding edges (cutoff,0,0) on the
 *     pack's last node slot);
 *   - a float64 reference of PyG's SchNet on every directed edge, in dual
 *     numbers: each structure's energy and its exact derivative along a
 *     tangent of the edge vectors, from which forces (−∂E/∂r) and stress
 *     ((1/V) ∂E/∂ε) follow without finite differences, and the combined loss
 *     of schnet.h as a plain function of the parameters. */
#ifndef PT_FORCES_FIXTURE_H
#define PT_FORCES_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/model/schnet.h"
#include "tests/ref/model_ref.h"

/* every helper may go unused in one of the test files that include this */
#define FX_FN static __attribute__((unused))

enum { FX_MAXA = 6, FX_MAXS = 6, FX_MAXE = 160, FX_MAXW = 16 };

typedef struct fstruct {
    int n;
    uint8_t z[FX_MAXA];
    double pos[FX_MAXA][3];
    int pbc[3];
    double cell[3][3];        /* rows are the cell vectors */
    double energy;
    double force[FX_MAXA][3];
    double stress[9];
    int has_forces, has_stress;
} fstruct;

/* One structure's directed edges: receiver, sender, image shift. */
typedef struct fedges {
    int n;
    int dst[FX_MAXE], src[FX_MAXE];
    int shift[FX_MAXE][3];
} fedges;

FX_FN double fx_volume(const fstruct *s)
{
    const double(*c)[3] = s->cell;
    return fabs(c[0][0] * (c[1][1] * c[2][2] - c[1][2] * c[2][1]) -
                c[0][1] * (c[1][0] * c[2][2] - c[1][2] * c[2][0]) +
                c[0][2] * (c[1][0] * c[2][1] - c[1][1] * c[2][0]));
}

FX_FN int fx_fully_periodic(const fstruct *s) { return s->pbc[0] && s->pbc[1] && s->pbc[2]; }

/* v = r_src + S·cell − r_dst in double */
FX_FN void fx_vec(const fstruct *s, const fedges *el, int k, double v[3])
{
    for (int x = 0; x < 3; x++) {
        v[x] = s->pos[el->src[k]][x] - s->pos[el->dst[k]][x];
        for (int a = 0; a < 3; a++) v[x] += el->shift[k][a] * s->cell[a][x];
    }
}

/* Every (i, j, S) with |v| < cutoff, receivers in order, then senders, then shifts. */
FX_FN void fx_edges(const fstruct *s, double cutoff, fedges *el)
{
    el->n = 0;
    int r[3];
    for (int x = 0; x < 3; x++) r[x] = s->pbc[x] ? 3 : 0;
    for (int i = 0; i < s->n; i++)
        for (int j = 0; j < s->n; j++)
            for (int a = -r[0]; a <= r[0]; a++)
                for (int b = -r[1]; b <= r[1]; b++)
                    for (int c = -r[2]; c <= r[2]; c++) {
                        if (i == j && !a && !b && !c) continue;
                        int k = el->n;
                        el->dst[k] = i;
                        el->src[k] = j;
                        el->shift[k][0] = a;
                        el->shift[k][1] = b;
                        el->shift[k][2] = c;
                        double v[3];
                        fx_vec(s, el, k, v);
                        if (sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) >= cutoff) continue;
                        assert_true(el->n < FX_MAXE);
                        el->n++;
                    }
}

/* ---- the structures ----------------------------------------------------------- */

static fstruct fx_structs[FX_MAXS];
static int fx_n_structs;

FX_FN void fx_rand_target(pt_rng *r, fstruct *s)
{
    s->energy = -2.0 + 4.0 * pt_rng_uniform(r);
    for (int i = 0; i < s->n; i++)
        for (int x = 0; x < 3; x++) s->force[i][x] = 0.6 * (pt_rng_uniform(r) - 0.5);
    for (int x = 0; x < 9; x++) s->stress[x] = 0.05 * (pt_rng_uniform(r) - 0.5);
}

/* Two molecules, a 3-atom slab periodic along x and y, a 2-atom and a 1-atom
 * triclinic cell (fully periodic, shorter than the 3 Å cutoff). */
FX_FN void fx_make_structs(void)
{
    static const uint8_t elems[4] = {1, 6, 7, 8};
    pt_rng r;
    pt_rng_init(&r, 21, 0);
    memset(fx_structs, 0, sizeof fx_structs);
    const int sizes[5] = {3, 4, 3, 2, 1};
    for (int k = 0; k < 5; k++) {
        fstruct *s = &fx_structs[k];
        s->n = sizes[k];
        for (int a = 0; a < s->n; a++) {
            s->z[a] = elems[pt_rng_below(&r, 4)];
            for (int x = 0; x < 3; x++) s->pos[a][x] = 2.0 * pt_rng_uniform(&r);
        }
        s->has_forces = 1;
        fx_rand_target(&r, s);
    }
    /* slab: cell vectors in x, y (the z row only for completeness) */
    fstruct *slab = &fx_structs[2];
    slab->pbc[0] = slab->pbc[1] = 1;
    const double cs[3][3] = {{2.9, 0.1, 0.0}, {0.8, 2.7, 0.0}, {0.0, 0.0, 12.0}};
    memcpy(slab->cell, cs, sizeof cs);
    /* triclinic cells with an atom whose images are its own neighbours */
    const double c2[3][3] = {{2.6, 0.15, -0.1}, {0.5, 2.4, 0.2}, {-0.3, 0.4, 2.8}};
    const double c1[3][3] = {{0.1, 1.7, 1.8}, {1.75, 0.05, 1.7}, {1.8, 1.65, 0.2}};
    memcpy(fx_structs[3].cell, c2, sizeof c2);
    memcpy(fx_structs[4].cell, c1, sizeof c1);
    for (int k = 3; k < 5; k++) {
        fx_structs[k].pbc[0] = fx_structs[k].pbc[1] = fx_structs[k].pbc[2] = 1;
        fx_structs[k].has_stress = 1;
    }
    fx_n_structs = 5;
}

/* ---- batches ------------------------------------------------------------------- */

typedef struct fx_batch {
    pt_batch b;
    int32_t slot[FX_MAXS];        /* graph slot of each structure */
    int32_t first_node[FX_MAXS];  /* its first node slot */
} fx_batch;

/* The fixture's batch is allocated field by field below (zeroed first), as
 * pt_batch_init would: pt_batch_close frees it, so a field batch.h adds is
 * freed here too. */
FX_FN void fx_batch_free(fx_batch *fb)
{
    pt_batch_close(&fb->b);
}

/* Structure k into pack pack_of[k] (−1: left out), as batch.h lays packs out. */
FX_FN void fx_batch_build(fx_batch *fb, const int *pack_of, int n_packs, pt_pack_limits lim,
                           float cutoff)
{
    pt_batch *b = &fb->b;
    memset(fb, 0, sizeof(*fb));
    b->limits = lim;
    b->n_packs = n_packs;
    b->cap_nodes = n_packs * lim.max_nodes;
    b->cap_edges = n_packs * lim.max_edges;
    b->cap_graphs = n_packs * lim.max_graphs;
    b->cutoff = cutoff;
    const size_t N = (size_t)b->cap_nodes, E = (size_t)b->cap_edges, B = (size_t)b->cap_graphs;
    b->z = calloc(N, 1);
    b->node_graph = malloc(sizeof(int32_t) * N);
    b->edge_src = malloc(sizeof(int32_t) * E);
    b->edge_dst = malloc(sizeof(int32_t) * E);
    b->edge_dist = malloc(sizeof(float) * E);
    b->edge_vec = malloc(sizeof(float) * 3 * E);
    b->dst_offset = calloc(N + 1, sizeof(int32_t));
    b->graph_id = malloc(sizeof(int32_t) * B);
    b->graph_natoms = calloc(B, sizeof(int32_t));
    b->target = calloc(B, sizeof(double));
    b->node_force = calloc(3 * N, sizeof(float));
    b->graph_has_forces = calloc(B, 1);
    b->graph_stress = calloc(9 * B, sizeof(double));
    b->graph_has_stress = calloc(B, 1);
    b->graph_volume = calloc(B, sizeof(double));
    for (size_t i = 0; i < N; i++) b->node_graph[i] = -1;
    for (size_t g = 0; g < B; g++) b->graph_id[g] = -1;
    for (int p = 0; p < n_packs; p++) {
        int node = p * lim.max_nodes, edge = p * lim.max_edges, slot = p * lim.max_graphs;
        for (int k = 0; k < fx_n_structs; k++) {
            if (pack_of[k] != p) continue;
            const fstruct *s = &fx_structs[k];
            fb->first_node[k] = node;
            fb->slot[k] = slot;
            b->graph_id[slot] = k;
            b->graph_natoms[slot] = s->n;
            b->target[slot] = s->energy;
            b->graph_has_forces[slot] = (uint8_t)s->has_forces;
            b->graph_has_stress[slot] = (uint8_t)s->has_stress;
            b->graph_volume[slot] = fx_fully_periodic(s) ? fx_volume(s) : 0.0;
            memcpy(b->graph_stress + 9 * (size_t)slot, s->stress, sizeof s->stress);
            for (int a = 0; a < s->n; a++) {
                b->z[node] = s->z[a];
                for (int x = 0; x < 3; x++) b->node_force[3 * (size_t)node + x] = (float)s->force[a][x];
                b->node_graph[node++] = slot;
            }
            slot++;
            b->n_real_graphs++;
            b->n_real_nodes += s->n;
        }
        assert_true(node <= (p + 1) * lim.max_nodes);
        assert_true(slot <= (p + 1) * lim.max_graphs);
        for (int k = 0; k < fx_n_structs; k++) {
            if (pack_of[k] != p) continue;
            fedges el;
            fx_edges(&fx_structs[k], cutoff, &el);
            for (int e = 0; e < el.n; e++) {
                double v[3];
                fx_vec(&fx_structs[k], &el, e, v);
                assert_true(edge < (p + 1) * lim.max_edges);
                b->edge_src[edge] = fb->first_node[k] + el.src[e];
                b->edge_dst[edge] = fb->first_node[k] + el.dst[e];
                for (int x = 0; x < 3; x++) b->edge_vec[3 * (size_t)edge + x] = (float)v[x];
                b->edge_dist[edge++] = (float)sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
                b->n_real_edges++;
            }
        }
        int last = (p + 1) * lim.max_nodes - 1;
        for (; edge < (p + 1) * lim.max_edges; edge++) {
            b->edge_src[edge] = b->edge_dst[edge] = last;
            b->edge_dist[edge] = cutoff;
            b->edge_vec[3 * (size_t)edge] = cutoff;
            b->edge_vec[3 * (size_t)edge + 1] = b->edge_vec[3 * (size_t)edge + 2] = 0.0f;
        }
    }
    for (size_t k = 0; k < E; k++) b->dst_offset[b->edge_dst[k] + 1]++;
    for (size_t i = 0; i < N; i++) b->dst_offset[i + 1] += b->dst_offset[i];
}

/* ---- the model ---------------------------------------------------------------------- */

static const float fx_cutoff = 3.0f;

FX_FN void fx_make_model(pt_schnet *m, pt_readout readout)
{
    pt_schnet_config c = pt_schnet_config_default();
    c.hidden = 6;
    c.filters = 5;
    c.interactions = 2;
    c.gaussians = 4;
    c.cutoff = fx_cutoff;
    c.readout = readout;
    c.use_atomref = 1;
    assert_int_equal(pt_schnet_init(m, &c, NULL), 0);
    ref_model_fill(m, (const double[4]){-0.6, -3.8, -5.4, -7.5}, 8, -0.25, 1.7, 98);
}

/* ---- float64 dual-number reference ------------------------------------------------ */

/* y = E of structure s and ydot = dE along the edge-vector tangent vdot[k]
 * (NULL: 0), PyG's equations on every directed edge of el. */
FX_FN void fx_ref_energy(const pt_schnet *m, const double *theta, const fstruct *s,
                          const fedges *el, const double (*vdot)[3], double *y, double *ydot)
{
    const int H = m->cfg.hidden, F = m->cfg.filters, G = m->cfg.gaussians, H2 = H / 2, n = s->n;
    const double rc = m->cfg.cutoff, step = rc / (G - 1), gamma = -0.5 / (step * step);
    static double h[FX_MAXA][FX_MAXW], hd[FX_MAXA][FX_MAXW], e[FX_MAXE][FX_MAXW],
        ed[FX_MAXE][FX_MAXW], C[FX_MAXE], Cd[FX_MAXE], W[FX_MAXE][FX_MAXW], Wd[FX_MAXE][FX_MAXW];
    assert_true(H <= FX_MAXW && F <= FX_MAXW && G <= FX_MAXW);
    const double *emb = ref_tensor(m, theta, "embedding.weight", 0);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < H; c++) {
            h[i][c] = emb[s->z[i] * H + c];
            hd[i][c] = 0.0;
        }
    for (int k = 0; k < el->n; k++) {
        double v[3], d2 = 0.0, vv = 0.0;
        fx_vec(s, el, k, v);
        for (int x = 0; x < 3; x++) {
            d2 += v[x] * v[x];
            vv += vdot ? v[x] * vdot[k][x] : 0.0;
        }
        double d = sqrt(d2), dd = vv / d;
        for (int g = 0; g < G; g++) {
            double diff = d - g * step;
            e[k][g] = exp(gamma * diff * diff);
            ed[k][g] = e[k][g] * 2.0 * gamma * diff * dd;
        }
        C[k] = d < rc ? 0.5 * (cos(M_PI * d / rc) + 1.0) : 0.0;
        Cd[k] = d < rc ? -0.5 * sin(M_PI * d / rc) * M_PI / rc * dd : 0.0;
    }
    for (int t = 0; t < m->cfg.interactions; t++) {
        const ref_block B = ref_block_at(m, theta, t);
        for (int k = 0; k < el->n; k++) {
            double s1[FX_MAXW], s1d[FX_MAXW];
            for (int f = 0; f < F; f++) {
                double z = B.a1[f], zd = 0.0;
                for (int g = 0; g < G; g++) {
                    z += B.A1[f * G + g] * e[k][g];
                    zd += B.A1[f * G + g] * ed[k][g];
                }
                s1[f] = ssp_ref(z);
                s1d[f] = sig_ref(z) * zd;
            }
            for (int f = 0; f < F; f++) {
                double p = B.a2[f], pd = 0.0;
                for (int q = 0; q < F; q++) {
                    p += B.A2[f * F + q] * s1[q];
                    pd += B.A2[f * F + q] * s1d[q];
                }
                W[k][f] = p * C[k];
                Wd[k][f] = pd * C[k] + p * Cd[k];
            }
        }
        double x[FX_MAXA][FX_MAXW], xd[FX_MAXA][FX_MAXW], mm[FX_MAXA][FX_MAXW],
            md[FX_MAXA][FX_MAXW];
        for (int i = 0; i < n; i++)
            for (int f = 0; f < F; f++) {
                x[i][f] = xd[i][f] = mm[i][f] = md[i][f] = 0.0;
                for (int c = 0; c < H; c++) {
                    x[i][f] += B.L1[f * H + c] * h[i][c];
                    xd[i][f] += B.L1[f * H + c] * hd[i][c];
                }
            }
        for (int k = 0; k < el->n; k++)
            for (int f = 0; f < F; f++) {
                int i = el->dst[k], j = el->src[k];
                mm[i][f] += x[j][f] * W[k][f];
                md[i][f] += xd[j][f] * W[k][f] + x[j][f] * Wd[k][f];
            }
        for (int i = 0; i < n; i++) {
            double u[FX_MAXW], ud[FX_MAXW];
            for (int c = 0; c < H; c++) {
                double z = B.c2[c], zd = 0.0;
                for (int f = 0; f < F; f++) {
                    z += B.L2[c * F + f] * mm[i][f];
                    zd += B.L2[c * F + f] * md[i][f];
                }
                u[c] = ssp_ref(z);
                ud[c] = sig_ref(z) * zd;
            }
            for (int c = 0; c < H; c++) {
                double v = B.c3[c], vd = 0.0;
                for (int q = 0; q < H; q++) {
                    v += B.L3[c * H + q] * u[q];
                    vd += B.L3[c * H + q] * ud[q];
                }
                h[i][c] += v;
                hd[i][c] += vd;
            }
        }
    }
    const double *W4 = ref_tensor(m, theta, "lin1.weight", 0), *b4 = ref_tensor(m, theta, "lin1.bias", 0);
    const double *w5 = ref_tensor(m, theta, "lin2.weight", 0), *b5 = ref_tensor(m, theta, "lin2.bias", 0);
    const double *aref = ref_tensor(m, theta, "atomref.weight", 0);
    double sum = 0.0, sumd = 0.0;
    for (int i = 0; i < n; i++) {
        double o = b5[0], od = 0.0;
        for (int j = 0; j < H2; j++) {
            double z = b4[j], zd = 0.0;
            for (int c = 0; c < H; c++) {
                z += W4[j * H + c] * h[i][c];
                zd += W4[j * H + c] * hd[i][c];
            }
            o += w5[j] * ssp_ref(z);
            od += w5[j] * sig_ref(z) * zd;
        }
        sum += o * m->std[0] + m->mean[0] + aref[s->z[i]];
        sumd += od * m->std[0];
    }
    double div = m->cfg.readout == PT_READOUT_MEAN ? n : 1.0;
    *y = sum / div;
    if (ydot) *ydot = sumd / div;
}

/* Forces −∂E/∂r (3n dual passes) and, for fully periodic s, stress
 * (1/V) ∂E/∂ε (9 passes: r → (1+ε) r and cell → (1+ε) cell move every edge
 * vector to (1+ε) v, so v̇ = ε_ab e_b v_a for the unit strain (a,b)). */
FX_FN void fx_ref_forces(const pt_schnet *m, const double *theta, const fstruct *s,
                          double *energy, double force[][3], double stress[9])
{
    fedges el;
    fx_edges(s, m->cfg.cutoff, &el);
    static double vdot[FX_MAXE][3];
    double yd;
    fx_ref_energy(m, theta, s, &el, NULL, energy, NULL);
    for (int i = 0; i < s->n; i++)
        for (int x = 0; x < 3; x++) {
            for (int k = 0; k < el.n; k++) {
                vdot[k][0] = vdot[k][1] = vdot[k][2] = 0.0;
                vdot[k][x] = (el.src[k] == i) - (el.dst[k] == i);
            }
            double y;
            fx_ref_energy(m, theta, s, &el, (const double(*)[3])vdot, &y, &yd);
            force[i][x] = -yd;
        }
    for (int q = 0; q < 9; q++) stress[q] = 0.0;
    if (!fx_fully_periodic(s)) return;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            for (int k = 0; k < el.n; k++) {
                double v[3];
                fx_vec(s, &el, k, v);
                vdot[k][0] = vdot[k][1] = vdot[k][2] = 0.0;
                vdot[k][b] = v[a];
            }
            double y;
            fx_ref_energy(m, theta, s, &el, (const double(*)[3])vdot, &y, &yd);
            stress[3 * a + b] = yd / fx_volume(s);
        }
}

/* The combined loss of schnet.h over the structures with in[k] set. */
FX_FN double fx_ref_loss(const pt_schnet *m, const double *theta, const int *in,
                          const pt_schnet_loss_weights *w, pt_schnet_loss_parts *parts)
{
    double le = 0.0, lf = 0.0, ls = 0.0, ne = 0.0, nf = 0.0, ns = 0.0;
    for (int k = 0; k < fx_n_structs; k++) {
        if (!in[k]) continue;
        const fstruct *s = &fx_structs[k];
        double y, f[FX_MAXA][3], sg[9];
        fx_ref_forces(m, theta, s, &y, f, sg);
        double re = (y - s->energy) / (w->energy_per_atom ? (double)s->n : 1.0);
        le += re * re;
        ne += 1.0;
        if (s->has_forces)
            for (int i = 0; i < s->n; i++)
                for (int x = 0; x < 3; x++) {
                    double r = f[i][x] - (double)(float)s->force[i][x];
                    lf += r * r;
                    nf += 1.0;
                }
        if (s->has_stress && fx_fully_periodic(s))
            for (int q = 0; q < 9; q++) {
                ls += (sg[q] - s->stress[q]) * (sg[q] - s->stress[q]);
                ns += 1.0;
            }
    }
    pt_schnet_loss_parts p = {le / ne, nf ? lf / nf : 0.0, ns ? ls / ns : 0.0, 0.0};
    p.total = w->energy * p.energy + w->forces * p.forces + w->stress * p.stress;
    if (parts) *parts = p;
    return p.total;
}

FX_FN double *fx_theta(const pt_schnet *m)
{
    double *th = malloc(sizeof(double) * m->n_params);
    for (size_t i = 0; i < m->n_params; i++) th[i] = m->params_memory[i];
    return th;
}

#endif
