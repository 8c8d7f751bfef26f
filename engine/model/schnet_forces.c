/* schnet_forces.c — forces and stress from SchNet's own energy, and the
 * parameter gradient of a loss on energies, forces and stress.
 *
 * The forward pass (schnet.c; symbols there) of an arena of mode ≥ FORCES
 * also computes each block's filter derivative in its distance,
 *   W'_u = (A2 s1'_u) C_u + P_u C'_u,   s1' = σ1 ⊙ (A1 e')
 * (pt_schnet_filter_deriv: two products), because W depends on d_u alone.
 * Then three passes, each over the blocks once, with the ops of
 * schnet_ops.h ("derivatives with respect to the distances"):
 *
 * 1. distance backward (pt_schnet_forces): the adjoints ā = ∂Y/∂a for
 *    Y = Σ_g y_g — the energy backward seeded with 1 on every graph, with
 *    no weight products and no filter network:
 *      ō = std (/count)  q̄ = ō w5  z̄4 = q̄ ⊙ σ4  h̄_T = z̄4 W4
 *      per block, last first:
 *        ū = h̄' L3   z̄2 = ū ⊙ σ2   m̄ = z̄2 L2
 *        x̄_j = Σ_{k: src=j} m̄_dst ⊙ W_u     g_u += Σ_{k∈u} ⟨m̄_dst ⊙ x_src, W'_u⟩
 *        h̄ = h̄' + x̄ L1
 *    then forces and stress from g (schnet.h).  ō, q̄, ū, m̄, x̄, h̄ are kept
 *    for pass 3.
 * 2. tangent (pt_schnet_backward_forces): with λ_u = ∂L/∂g_u from the loss,
 *    the derivative of every activation along ḋ = λ:  Ẇ = W' λ, ḣ_0 = 0,
 *      per block: ẋ = L1 ḣ   ṁ_i = Σ ẋ_src ⊙ W + x_src ⊙ Ẇ
 *                 u̇ = σ2 ⊙ (L2 ṁ)   ḣ' = ḣ + L3 u̇
 *      q̇ = σ4 ⊙ (W4 ḣ_T)
 *    so that Ẏ = Σ_i std·w5 q̇_i (/count) = Σ_u λ_u g_u.
 * 3. second backward: the reverse of forward + tangent for J = L_E(y) + Ẏ,
 *    whose parameter gradient is ∂L/∂θ (the force and stress terms of L
 *    depend on θ through g only, so their gradient is ∂(λ·g)/∂θ at fixed λ).
 *    The adjoint of each tangent ȧ is pass 1's ā (the tangent pass applies
 *    the forward pass's Jacobian, and Ẏ's seed is 1 like Y's), so only the
 *    primal adjoints â propagate, seeded with ô = ∂L_E/∂y · std:
 *      ẑ4 = (ô w5) ⊙ σ4 + q̄ ⊙ (1 − σ4) ⊙ q̇      ĥ_T = ẑ4 W4
 *      per block: û = ĥ' L3   ẑ2 = û ⊙ σ2 + ū ⊙ (1 − σ2) ⊙ u̇   m̂ = ẑ2 L2
 *                 x̂, P̂, P̄ (pt_cfconv_backward2)   [ŝ1; s̄1] = [P̂; P̄] A2
 *                 ẑ1 = ŝ1 ⊙ σ1 + s̄1 ⊙ (1 − σ1) ⊙ ṡ1, z̄1 = s̄1 ⊙ σ1, ṡ1 = s1' λ
 *                 ĥ = ĥ' + x̂ L1
 *      and for every product out = W in: dW += [âout; āout]ᵀ [in; i̇n], one
 *      product over the pair's 2 × rows; db += Σ âout.
 *
 * Cost, in products of the energy step's shapes (per block 5 forward and 9
 * backward: 14; filter ones, U×G·F and U×F·F, dominate): W' adds 2 filter
 * products, pass 1 has 3 node products, pass 2 has 3, pass 3 has 3 node and
 * 1 filter input products over twice the rows, and 5 weight products over
 * twice the rows: in filter products 6 FF + 4 GF against the energy step's
 * 3 FF + 2 GF, ≈ 2x; plus 3 edge passes per block and no filter network in
 * passes 1 and 2. */
#include "engine/model/schnet.h"

#include <math.h>
#include <string.h>

#include "engine/core/fpflush.h"
#include "engine/model/schnet_internal.h"

/* The second half of a pair of n-row arrays of `width` columns (schnet.h). */
static inline float *half2(float *pair, int n, int width)
{
    return pair + (size_t)n * (size_t)width;
}

/* The bar half of a pair: the second half when training, the whole array
 * when the arena only computes forces (no hat half). */
static inline float *bar(const pt_schnet_acts *a, float *pair, int n, int width)
{
    return a->mode == PT_SCHNET_FORCES_TRAIN ? half2(pair, n, width) : pair;
}

/* ---- forward: the filter's derivative in d ------------------------------------- */

void pt_schnet_filter_deriv(const pt_schnet *m, pt_schnet_acts *a, int t, pt_stopwatch *sw)
{
    const pt_schnet_config *c = &m->cfg;
    const pt_schnet_block *w = &m->params.block[t];
    pt_schnet_block_acts *k = &a->block[t];
    const int F = c->filters, G = c->gaussians, U = a->n_rows;
    /* s1' is kept for the second backward (ṡ1 = s1' λ) when training */
    float *s1d = a->mode == PT_SCHNET_FORCES_TRAIN ? half2(k->s1, U, F) : a->rows_b;

    /* A1 e' from 0: the Gaussians far from d (e ~ 1e-38) start every chain
     * with subnormal partial sums (engine/core/fpflush.h) */
    unsigned fp = pt_flush_begin(!a->ieee_subnormals);
    pt_linear_forward(s1d, a->de, w->mlp0_w, NULL, U, G, F, 0.0f, a->precision);
    pt_flush_end(fp);
    pt_lap(sw, PT_SCHNET_OP_FILTER_GEMM);
    pt_ssp_tangent(s1d, k->sig1, U, F);
    pt_lap(sw, PT_SCHNET_OP_FILTER_SSP);
    pt_linear_forward(k->wd, s1d, w->mlp2_w, NULL, U, F, F, 0.0f, a->precision);
    pt_lap(sw, PT_SCHNET_OP_FILTER_GEMM);
    pt_filter_cutoff_deriv(k->wd, k->p, a->cut, a->dcut, U, F);
    pt_lap(sw, PT_SCHNET_OP_CFCONV);
}

/* ---- pass 1: distance backward, forces, stress ------------------------------ */

static void block_dist_backward(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b, int t,
                                pt_stopwatch *sw)
{
    const pt_schnet_config *c = &m->cfg;
    const pt_schnet_block *w = &m->params.block[t];
    pt_schnet_block_acts *k = &a->block[t];
    const int N = b->cap_nodes, H = c->hidden, F = c->filters;
    const pt_precision prec = a->precision;
    float *hbar1 = bar(a, a->hb[t + 1], N, H), *hbar0 = bar(a, a->hb[t], N, H);
    float *ubar = bar(a, k->z2, N, H), *xbar = bar(a, k->xb, N, F);

    pt_linear_backward_input(ubar, hbar1, w->lin_w, N, H, H, 0.0f, prec);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
    pt_ssp_backward_to(a->zs, ubar, k->sig2, N, H);
    pt_lap(sw, PT_SCHNET_OP_NODE_SSP);
    pt_linear_backward_input(k->mbar, a->zs, w->conv_lin2_w, N, F, H, 0.0f, prec);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
    pt_cfconv_backward_dist(xbar, a->dist_grad, k->mbar, k->x, k->w, k->wd, a->row,
                            b->edge_src, b->dst_offset, N, F);
    pt_lap(sw, PT_SCHNET_OP_CFCONV);
    memcpy(hbar0, hbar1, (size_t)N * H * sizeof(float));
    pt_linear_backward_input(hbar0, xbar, w->conv_lin1_w, N, H, F, 1.0f, prec);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
}

/* Fully periodic: the graph has a cell volume (stress is defined). */
static int periodic(const pt_batch *b, int g)
{
    return b->graph_volume && b->graph_volume[g] > 0.0;
}

/* The row of edge k contributes to forces and stress once, through its first
 * edge; rows at or past the cutoff (static shapes: padding slots) carry no
 * gradient and are skipped. */
static int row_owner(const pt_schnet_acts *a, int32_t k, float cutoff)
{
    return a->row[k] >= 0 && a->first[k] && a->row_dist[a->row[k]] < cutoff &&
           a->row_dist[a->row[k]] > 0.0f;
}

static void forces_and_stress(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b)
{
    const int N = b->cap_nodes;
    memset(a->force, 0, (size_t)N * 3 * sizeof(double));
    memset(a->stress, 0, (size_t)b->cap_graphs * 9 * sizeof(double));
    for (int32_t k = 0; k < b->cap_edges; k++) {
        if (!row_owner(a, k, m->cfg.cutoff)) continue;
        const int32_t u = a->row[k], i = b->edge_dst[k], j = b->edge_src[k];
        const double s = (double)a->dist_grad[u] / (double)a->row_dist[u];
        const float *v = b->edge_vec + 3 * (size_t)k;
        /* i ← i across a periodic image moves with its own atom: no force */
        if (i != j)
            for (int x = 0; x < 3; x++) {
                a->force[3 * (size_t)i + x] += s * v[x];
                a->force[3 * (size_t)j + x] -= s * v[x];
            }
        const int32_t g = b->node_graph[i];
        if (g < 0 || !periodic(b, g)) continue;
        double *sg = a->stress + 9 * (size_t)g;
        for (int x = 0; x < 3; x++)
            for (int y = 0; y < 3; y++) sg[3 * x + y] += s * v[x] * v[y];
    }
    for (int g = 0; g < b->cap_graphs; g++)
        if (periodic(b, g))
            for (int x = 0; x < 9; x++) a->stress[9 * (size_t)g + x] /= b->graph_volume[g];
}

void pt_schnet_forces(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b)
{
    const pt_schnet_config *c = &m->cfg;
    const pt_schnet_params *p = &m->params;
    const int N = b->cap_nodes, H = c->hidden, H2 = c->hidden / 2;
    const int T = c->interactions;
    const pt_precision prec = a->precision;

    pt_schnet_layer_fn hook = a->on_layer;   /* ZeRO stage 3: each layer gathered before use */

    pt_stopwatch sw;
    pt_stopwatch_start(&sw, a->profile);
    if (hook) hook(a->layer_user, PT_LAYER_FORWARD, T + 1, NULL);
    memset(a->dist_grad, 0, (size_t)a->n_rows * sizeof(float));
    for (int g = 0; g < b->cap_graphs; g++) a->ones[g] = b->graph_id[g] >= 0 ? 1.0 : 0.0;
    float *obar = bar(a, a->ob, N, 1), *qbar = bar(a, a->z4, N, H2);
    pt_readout_backward(obar, NULL, a->ones, a->count, b->z, b->node_graph, m->std[0],
                        m->head[0].readout, N);
    pt_lap(&sw, PT_SCHNET_OP_OTHER);
    pt_linear_backward_input(qbar, obar, p->head[0].lin2_w, N, H2, 1, 0.0f, prec);
    pt_lap(&sw, PT_SCHNET_OP_NODE_GEMM);
    pt_ssp_backward_to(a->zs, qbar, a->sig4, N, H2);
    pt_lap(&sw, PT_SCHNET_OP_NODE_SSP);
    pt_linear_backward_input(bar(a, a->hb[T], N, H), a->zs, p->head[0].lin1_w, N, H, H2, 0.0f,
                             prec);
    pt_lap(&sw, PT_SCHNET_OP_NODE_GEMM);
    for (int t = T - 1; t >= 0; t--) {
        if (hook) hook(a->layer_user, PT_LAYER_FORWARD, 1 + t, NULL);
        block_dist_backward(m, a, b, t, &sw);
    }
    forces_and_stress(m, a, b);
    pt_lap(&sw, PT_SCHNET_OP_OTHER);
    if (a->profile) a->profile->backwards++;
}

/* ---- loss --------------------------------------------------------------------- */

/* Fully periodic, with a stress target. */
static int has_stress(const pt_batch *b, int g)
{
    return b->graph_id[g] >= 0 && b->graph_has_stress[g] && periodic(b, g);
}

double pt_schnet_loss_forces(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b,
                             const pt_schnet_loss_weights *w, const pt_schnet_loss_norm *norm,
                             pt_schnet_loss_parts *parts)
{
    const int N = b->cap_nodes, B = b->cap_graphs;
    double n_e = norm ? norm->graphs : 0.0, n_f = norm ? norm->force_components : 0.0;
    double n_s = norm ? norm->stress_components : 0.0;
    if (n_e <= 0.0) {
        n_e = 0.0;
        for (int g = 0; g < B; g++) n_e += b->graph_id[g] >= 0;
    }
    if (n_f <= 0.0 && w->forces != 0.0) {
        n_f = 0.0;
        for (int i = 0; i < N; i++) {
            int32_t g = b->node_graph[i];
            n_f += g >= 0 && b->graph_has_forces[g] ? 3.0 : 0.0;
        }
    }
    if (n_s <= 0.0 && w->stress != 0.0) {
        n_s = 0.0;
        for (int g = 0; g < B; g++) n_s += has_stress(b, g) ? 9.0 : 0.0;
    }
    pt_schnet_loss_parts lp = {0};
    /* a FORCES arena has no room for the seeds of the second backward */
    const int seeds = a->mode == PT_SCHNET_FORCES_TRAIN;

    for (int g = 0; g < B; g++) {
        a->dy[g] = 0.0;
        if (b->graph_id[g] < 0 || w->energy == 0.0 || n_e <= 0.0) continue;
        double r = a->y[g] - b->target[g];
        if (w->energy_per_atom) {
            /* e = y/n: dL/dy = dL/de / n */
            const double n = b->graph_natoms[g] > 0 ? (double)b->graph_natoms[g] : 1.0;
            r /= n;
            lp.energy += r * r / n_e;
            a->dy[g] = w->energy * 2.0 * r / n_e / n;
            continue;
        }
        lp.energy += r * r / n_e;
        a->dy[g] = w->energy * 2.0 * r / n_e;
    }
    if (seeds) memset(a->force_bar, 0, (size_t)N * 3 * sizeof(double));
    if (w->forces != 0.0 && n_f > 0.0)
        for (int i = 0; i < N; i++) {
            int32_t g = b->node_graph[i];
            if (g < 0 || !b->graph_has_forces[g]) continue;
            for (int x = 0; x < 3; x++) {
                double r = a->force[3 * (size_t)i + x] - (double)b->node_force[3 * (size_t)i + x];
                lp.forces += r * r / n_f;
                if (seeds) a->force_bar[3 * (size_t)i + x] = w->forces * 2.0 * r / n_f;
            }
        }
    if (seeds) memset(a->stress_bar, 0, (size_t)B * 9 * sizeof(double));
    if (w->stress != 0.0 && n_s > 0.0)
        for (int g = 0; g < B; g++) {
            if (!has_stress(b, g)) continue;
            for (int x = 0; x < 9; x++) {
                double r = a->stress[9 * (size_t)g + x] - b->graph_stress[9 * (size_t)g + x];
                lp.stress += r * r / n_s;
                if (seeds) a->stress_bar[9 * (size_t)g + x] = w->stress * 2.0 * r / n_s;
            }
        }
    lp.total = w->energy * lp.energy + w->forces * lp.forces + w->stress * lp.stress;
    if (parts) *parts = lp;
    if (!seeds) return lp.total;

    /* λ_u = ∂L/∂g_u: the transpose of forces_and_stress */
    memset(a->lambda, 0, (size_t)a->n_rows * sizeof(float));
    for (int32_t k = 0; k < b->cap_edges; k++) {
        if (!row_owner(a, k, m->cfg.cutoff)) continue;
        const int32_t u = a->row[k], i = b->edge_dst[k], j = b->edge_src[k];
        const float *v = b->edge_vec + 3 * (size_t)k;
        double l = 0.0;
        if (i != j)
            for (int x = 0; x < 3; x++)
                l += (a->force_bar[3 * (size_t)i + x] - a->force_bar[3 * (size_t)j + x]) * v[x];
        const int32_t g = b->node_graph[i];
        if (g >= 0 && periodic(b, g)) {
            const double *sb = a->stress_bar + 9 * (size_t)g;
            double q = 0.0;
            for (int x = 0; x < 3; x++)
                for (int y = 0; y < 3; y++) q += sb[3 * x + y] * v[x] * v[y];
            l += q / b->graph_volume[g];
        }
        a->lambda[u] = (float)(l / (double)a->row_dist[u]);
    }
    return lp.total;
}

/* ---- passes 2 and 3: tangent and second backward ---------------------------------- */

static void block_tangent(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b, int t,
                          pt_stopwatch *sw)
{
    const pt_schnet_config *c = &m->cfg;
    const pt_schnet_block *w = &m->params.block[t];
    pt_schnet_block_acts *k = &a->block[t];
    const int N = b->cap_nodes, H = c->hidden, F = c->filters;
    const pt_precision prec = a->precision;
    float *hdot = half2(a->h[t], N, H), *hdot1 = half2(a->h[t + 1], N, H);
    float *mdot = half2(k->m, N, F), *udot = half2(k->u, N, H);

    /* ḣ_0 = 0, so the first block's ẋ is 0 and skipped */
    if (t > 0) pt_linear_forward(k->xdot, hdot, w->conv_lin1_w, NULL, N, H, F, 0.0f, prec);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
    pt_cfconv_tangent(mdot, k->w, k->wd, a->lambda, a->row, k->x, t > 0 ? k->xdot : NULL,
                      b->edge_src, b->dst_offset, N, F);
    pt_lap(sw, PT_SCHNET_OP_CFCONV);
    pt_linear_forward(udot, mdot, w->conv_lin2_w, NULL, N, F, H, 0.0f, prec);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
    pt_ssp_tangent(udot, k->sig2, N, H);
    pt_lap(sw, PT_SCHNET_OP_NODE_SSP);
    memcpy(hdot1, hdot, (size_t)N * H * sizeof(float));
    pt_linear_forward(hdot1, udot, w->lin_w, NULL, N, H, H, 1.0f, prec);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
}

static void block_backward2(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b, int t,
                            pt_schnet_params *d, pt_stopwatch *sw)
{
    const pt_schnet_config *c = &m->cfg;
    const pt_schnet_block *w = &m->params.block[t];
    pt_schnet_block *dw = &d->block[t];
    pt_schnet_block_acts *k = &a->block[t];
    const int N = b->cap_nodes, H = c->hidden, F = c->filters, G = c->gaussians;
    const int U = a->n_rows;
    const pt_precision prec = a->precision;
    float *hh1 = a->hb[t + 1], *hh0 = a->hb[t];
    float *s1dot = half2(k->s1, U, F);
    float *pp = a->rows_a, *zz = a->rows_b; /* [P̂; P̄], [ŝ1; s̄1] → [ẑ1; z̄1] */

    /* L3: dL3 += [ĥ'; h̄']ᵀ [u; u̇], dc3 += Σ ĥ'; û = ĥ' L3 → ẑ2 */
    pt_linear_backward_weight(dw->lin_w, dw->lin_b, hh1, k->u, 2 * N, N, H, H, prec);
    pt_linear_backward_input(k->z2, hh1, w->lin_w, N, H, H, 0.0f, prec);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
    pt_ssp_backward2(k->z2, half2(k->z2, N, H), dw->conv_lin2_b, k->sig2, half2(k->u, N, H), N,
                     H);
    pt_lap(sw, PT_SCHNET_OP_NODE_SSP);
    /* L2: dL2 += [ẑ2; z̄2]ᵀ [m; ṁ]; m̂ = ẑ2 L2 */
    pt_linear_backward_weight(dw->conv_lin2_w, NULL, k->z2, k->m, 2 * N, 0, F, H, prec);
    pt_linear_backward_input(a->mhat, k->z2, w->conv_lin2_w, N, F, H, 0.0f, prec);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
    pt_cfconv_backward2(k->xb, pp, half2(pp, U, F), a->mhat, k->mbar, k->x,
                        t > 0 ? k->xdot : NULL, k->w, k->wd, a->lambda, a->cut, a->dcut,
                        a->row, a->first, a->row_last, b->edge_dst, a->snd_offset,
                        a->snd_edge, N, F);
    pt_lap(sw, PT_SCHNET_OP_CFCONV);
    /* filter network: [ŝ1; s̄1] = [P̂; P̄] A2, dA2 += [P̂; P̄]ᵀ [s1; ṡ1], ẑ1 and
     * z̄1, dA1 += [ẑ1; z̄1]ᵀ [e; ė] */
    pt_linear_backward_input(zz, pp, w->mlp2_w, 2 * U, F, F, 0.0f, prec);
    pt_lap(sw, PT_SCHNET_OP_FILTER_GEMM);
    pt_rows_scale(s1dot, s1dot, a->lambda, U, F);
    pt_lap(sw, PT_SCHNET_OP_FILTER_SSP);
    pt_linear_backward_weight(dw->mlp2_w, dw->mlp2_b, pp, k->s1, 2 * U, U, F, F, prec);
    pt_lap(sw, PT_SCHNET_OP_FILTER_GEMM);
    pt_ssp_backward2(zz, half2(zz, U, F), dw->mlp0_b, k->sig1, s1dot, U, F);
    pt_lap(sw, PT_SCHNET_OP_FILTER_SSP);
    /* ė = e' λ is partly subnormal (0.3–21% on EMT; engine/core/fpflush.h) */
    unsigned fp = pt_flush_begin(!a->ieee_subnormals);
    pt_linear_backward_weight(dw->mlp0_w, NULL, zz, a->e, 2 * U, 0, G, F, prec);
    pt_flush_end(fp);
    pt_lap(sw, PT_SCHNET_OP_FILTER_GEMM);
    /* L1: dL1 += [x̂; x̄]ᵀ [h; ḣ] (ḣ_0 = 0: the first block's half is skipped);
     * ĥ = ĥ' + x̂ L1 */
    pt_linear_backward_weight(dw->conv_lin1_w, NULL, k->xb, a->h[t], t > 0 ? 2 * N : N, 0, H, F,
                              prec);
    memcpy(hh0, hh1, (size_t)N * H * sizeof(float));
    pt_linear_backward_input(hh0, k->xb, w->conv_lin1_w, N, H, F, 1.0f, prec);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
}

void pt_schnet_backward_forces(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b,
                               float *grads)
{
    const pt_schnet_config *c = &m->cfg;
    const pt_schnet_params *p = &m->params;
    pt_schnet_params d;
    if (grads) pt_schnet_params_view(m, grads, &d);
    else memset(&d, 0, sizeof d);   /* the layer hook points every layer's gradient */
    const int N = b->cap_nodes, H = c->hidden, H2 = c->hidden / 2, G = c->gaussians;
    const int U = a->n_rows, T = c->interactions;
    const pt_precision prec = a->precision;
    float *qdot = half2(a->q, N, H2);
    /* ZeRO (engine/backend/backend_zero.h): the tangent pass gathers each
     * layer before use (stage 3); the second backward is the energy
     * backward's layer order, head to embedding, with the same events, so
     * stage 2 reduce-scatters each layer's gradient once it is complete */
    pt_schnet_layer_fn hook = a->on_layer;

    pt_stopwatch sw;
    pt_stopwatch_start(&sw, a->profile);
    /* pass 2: tangent along ḋ = λ */
    pt_rows_scale(half2(a->e, U, G), a->de, a->lambda, U, G);
    memset(half2(a->h[0], N, H), 0, (size_t)N * H * sizeof(float));
    pt_lap(&sw, PT_SCHNET_OP_EDGE_BASIS);
    for (int t = 0; t < T; t++) {
        if (hook) hook(a->layer_user, PT_LAYER_FORWARD, 1 + t, NULL);
        block_tangent(m, a, b, t, &sw);
    }
    if (hook) hook(a->layer_user, PT_LAYER_FORWARD, T + 1, NULL);
    pt_linear_forward(qdot, half2(a->h[T], N, H), p->head[0].lin1_w, NULL, N, H, H2, 0.0f, prec);
    pt_lap(&sw, PT_SCHNET_OP_NODE_GEMM);
    pt_ssp_tangent(qdot, a->sig4, N, H2);
    pt_lap(&sw, PT_SCHNET_OP_NODE_SSP);

    /* pass 3: second backward; head: ô = ∂L_E/∂y · std, dw5 += [ô; ō]ᵀ [q; q̇] */
    if (hook) hook(a->layer_user, PT_LAYER_BACKWARD, T + 1, &d);
    pt_readout_backward(a->ob, d.head[0].atomref, a->dy, a->count, b->z, b->node_graph,
                        m->std[0], m->head[0].readout, N);
    pt_lap(&sw, PT_SCHNET_OP_OTHER);
    pt_linear_backward_weight(d.head[0].lin2_w, d.head[0].lin2_b, a->ob, a->q, 2 * N, N, H2, 1,
                              prec);
    pt_linear_backward_input(a->z4, a->ob, p->head[0].lin2_w, N, H2, 1, 0.0f, prec);
    pt_lap(&sw, PT_SCHNET_OP_NODE_GEMM);
    pt_ssp_backward2(a->z4, half2(a->z4, N, H2), d.head[0].lin1_b, a->sig4, qdot, N, H2);
    pt_lap(&sw, PT_SCHNET_OP_NODE_SSP);
    pt_linear_backward_weight(d.head[0].lin1_w, NULL, a->z4, a->h[T], 2 * N, 0, H, H2, prec);
    pt_linear_backward_input(a->hb[T], a->z4, p->head[0].lin1_w, N, H, H2, 0.0f, prec);
    pt_lap(&sw, PT_SCHNET_OP_NODE_GEMM);
    /* the other heads reach h_T at first order only: ĥ_T += ∂L_k/∂h_T */
    for (int k = 1; k < m->n_heads; k++)
        pt_schnet_head_backward(m, a, b, k, &d, a->hb[T], 1.0f, &sw);
    if (hook) hook(a->layer_user, PT_LAYER_BACKWARD_DONE, T + 1, &d);
    for (int t = T - 1; t >= 0; t--) {
        if (hook) hook(a->layer_user, PT_LAYER_BACKWARD, 1 + t, &d);
        block_backward2(m, a, b, t, &d, &sw);
        if (hook) hook(a->layer_user, PT_LAYER_BACKWARD_DONE, 1 + t, &d);
    }
    if (hook) hook(a->layer_user, PT_LAYER_BACKWARD, 0, &d);
    pt_embedding_backward(d.embedding, a->hb[0], b->z, N, H);
    pt_lap(&sw, PT_SCHNET_OP_OTHER);
    if (hook) hook(a->layer_user, PT_LAYER_BACKWARD_DONE, 0, &d);
    if (a->profile) a->profile->backwards++;
}
