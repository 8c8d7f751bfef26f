/* schnet.c — SchNet (PyTorch Geometric's numerics): parameters, forward,
 * loss and the hand-written backward pass (the activation arena is
 * schnet_acts.c, an interaction block's forward and backward
 * schnet_block.c; forces, stress and training on them schnet_forces.c).
 *
 *   ssp(x)  = softplus(x) − ln 2
 *   h_i     = Embedding[z_i]
 *   e_ijk   = exp(γ (d_ij − μ_k)²),  C_ij = ½ (cos(π d_ij / r_c) + 1), 0 beyond r_c
 *   for t in 1..T:
 *     W_ij  = (A2 · ssp(A1 e_ij + a1) + a2) ⊙ C_ij      (filter net, over ALL edges)
 *     x_j   = L1 h_j
 *     m_i   = Σ_{j→i} x_j ⊙ W_ij
 *     h_i  += L3 · ssp(L2 m_i + c2) + c3
 *   o_i     = w5ᵀ ssp(W4 h_i + b4) + b5
 *   o'_i    = o_i · std + mean + atomref[z_i]
 *   y_g     = Σ_{i∈g} o'_i   (or the mean)
 *
 * W_ij depends on d_ij alone, so the filter network runs once per filter
 * row — one per bond, shared by its two directions — and not at all for
 * edges with C_ij = 0 (padding edges): engine/pack/edge_rows.h.  The result is
 * PyG's up to float rounding (tests/unit/test_schnet.c checks against a
 * double-precision per-edge reference, tests/torch against PyTorch).
 * Products run over the whole batch (rows×G·G×F, rows×F·F×F, N×H·H×F…) with
 * every bias added inside its product (C starts as the bias rows, so
 * OpenBLAS skips its beta pass), in fp32 or bf16 (acts->precision).
 * Padding nodes and graphs are computed like real ones (fixed shape, as an
 * IPU would) and masked out by node_graph = −1.  With
 * pt_schnet_acts.profile set, the time of each kind of work is recorded
 * (bench/schnet_profile.c, docs/performance.md). */
#include "engine/model/schnet.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/pack/edge_rows.h"
#include "engine/model/schnet_internal.h"
#include "engine/model/ssp_kernels.h"
#include "engine/core/rng.h"

pt_schnet_config pt_schnet_config_default(void)
{
    pt_schnet_config c = {
        .hidden = 100, .filters = 100, .interactions = 4, .gaussians = 25,
        .cutoff = 6.0f, .max_neighbors = 32, .readout = PT_READOUT_SUM, .use_atomref = 0,
    };
    return c;
}

int pt_schnet_config_check(const pt_schnet_config *c, pt_errors *errs)
{
    int bad = 0;
#define PT_CHECK(cond, field, ...)                              \
    do {                                                        \
        if (!(cond)) {                                          \
            if (errs) pt_errors_add(errs, "", 0, field, __VA_ARGS__); \
            bad++;                                              \
        }                                                       \
    } while (0)
    PT_CHECK(c->hidden >= 2 && c->hidden <= 4096, "hidden",
             "must be in 2..4096 (the head is H/2 wide), got %d", c->hidden);
    PT_CHECK(c->filters >= 1 && c->filters <= 4096, "filters",
             "must be in 1..4096, got %d", c->filters);
    PT_CHECK(c->interactions >= 1 && c->interactions <= PT_SCHNET_MAX_INTERACTIONS,
             "interactions", "must be in 1..%d, got %d", PT_SCHNET_MAX_INTERACTIONS,
             c->interactions);
    PT_CHECK(c->gaussians >= 2 && c->gaussians <= 1024, "gaussians",
             "must be in 2..1024, got %d", c->gaussians);
    PT_CHECK(isfinite(c->cutoff) && c->cutoff > 0.0f && c->cutoff <= 100.0f, "cutoff",
             "must be in (0, 100] Å, got %g", (double)c->cutoff);
    PT_CHECK(c->max_neighbors >= 0 && c->max_neighbors <= 1024, "max_neighbors",
             "must be in 1..1024 or 0 (unlimited), got %d", c->max_neighbors);
    PT_CHECK(c->readout == PT_READOUT_SUM || c->readout == PT_READOUT_MEAN, "readout",
             "must be sum or mean, got %d", (int)c->readout);
    PT_CHECK(c->use_atomref == 0 || c->use_atomref == 1, "atomref",
             "must be 0 or 1, got %d", c->use_atomref);
    PT_CHECK(c->n_heads >= 0 && c->n_heads <= PT_SCHNET_MAX_HEADS, "heads",
             "must be 0 (one PyG head) to %d, got %d", PT_SCHNET_MAX_HEADS, c->n_heads);
    PT_CHECK(c->n_heads <= 0 || (c->readout == PT_READOUT_SUM && !c->use_atomref), "heads",
             "a model of named heads takes readout and atomref from each head");
    for (int k = 0; k < c->n_heads && k < PT_SCHNET_MAX_HEADS; k++) {
        const pt_schnet_head_config *h = &c->heads[k];
        size_t len = strnlen(h->key, PT_SCHNET_KEY_MAX);
        int ok = len > 0 && len < PT_SCHNET_KEY_MAX;
        for (size_t i = 0; ok && i < len; i++)
            ok = isalnum((unsigned char)h->key[i]) || strchr("_.-", h->key[i]);
        PT_CHECK(ok, "heads", "head %d: its key must be 1 to %d of A-Z a-z 0-9 _ . -", k,
                 PT_SCHNET_KEY_MAX - 1);
        for (int j = 0; ok && j < k; j++)
            PT_CHECK(strcmp(c->heads[j].key, h->key), "heads", "heads %d and %d both predict "
                     "'%s'", j, k, h->key);
        PT_CHECK(h->level == PT_HEAD_GRAPH || h->level == PT_HEAD_ATOM, "heads",
                 "head %d: level must be graph or atom, got %d", k, (int)h->level);
        PT_CHECK(h->readout == PT_READOUT_SUM ||
                     (h->readout == PT_READOUT_MEAN && h->level == PT_HEAD_GRAPH),
                 "heads", "head %d: readout must be sum or mean (graph heads), got %d", k,
                 (int)h->readout);
        PT_CHECK(h->use_atomref == 0 || h->use_atomref == 1, "heads",
                 "head %d: atomref must be 0 or 1, got %d", k, h->use_atomref);
    }
#undef PT_CHECK
    return bad;
}

int pt_schnet_head_count(const pt_schnet_config *cfg)
{
    return cfg->n_heads > 0 ? cfg->n_heads : 1;
}

/* Head k's description: the single PyG head from the config's own fields. */
static pt_schnet_head_config head_config(const pt_schnet_config *c, int k)
{
    if (c->n_heads > 0) return c->heads[k];
    return (pt_schnet_head_config){.key = "", .level = PT_HEAD_GRAPH, .readout = c->readout,
                                   .use_atomref = c->use_atomref};
}

/* Walks the state_dict order once: assigns the pointer views into `base` and,
 * when `t` is given, fills the tensor table.  Returns the float count. */
static size_t layout(const pt_schnet_config *c, float *base, pt_schnet_params *p,
                     pt_schnet_tensor *t)
{
    const int64_t H = c->hidden, F = c->filters, G = c->gaussians, H2 = c->hidden / 2;
    size_t off = 0, k = 0;
    memset(p, 0, sizeof(*p));
#define PT_TENSOR(ptr, d0, d1, ...)                                              \
    do {                                                                         \
        ptr = base ? base + off : NULL;                                          \
        if (t) {                                                                 \
            snprintf(t[k].name, sizeof(t[k].name), __VA_ARGS__);                 \
            t[k].offset = off;                                                   \
            t[k].ndim = (d1) > 0 ? 2 : 1;                                        \
            t[k].shape[0] = (d0);                                                \
            t[k].shape[1] = (d1) > 0 ? (d1) : 0;                                 \
            t[k].numel = (size_t)(d0) * (size_t)((d1) > 0 ? (d1) : 1);           \
        }                                                                        \
        off += (size_t)(d0) * (size_t)((d1) > 0 ? (d1) : 1);                     \
        k++;                                                                     \
    } while (0)
    PT_TENSOR(p->embedding, PT_SCHNET_ZROWS, H, "embedding.weight");
    for (int b = 0; b < c->interactions; b++) {
        pt_schnet_block *q = &p->block[b];
        PT_TENSOR(q->mlp0_w, F, G, "interactions.%d.mlp.0.weight", b);
        PT_TENSOR(q->mlp0_b, F, 0, "interactions.%d.mlp.0.bias", b);
        PT_TENSOR(q->mlp2_w, F, F, "interactions.%d.mlp.2.weight", b);
        PT_TENSOR(q->mlp2_b, F, 0, "interactions.%d.mlp.2.bias", b);
        PT_TENSOR(q->conv_lin1_w, F, H, "interactions.%d.conv.lin1.weight", b);
        PT_TENSOR(q->conv_lin2_w, H, F, "interactions.%d.conv.lin2.weight", b);
        PT_TENSOR(q->conv_lin2_b, H, 0, "interactions.%d.conv.lin2.bias", b);
        PT_TENSOR(q->lin_w, H, H, "interactions.%d.lin.weight", b);
        PT_TENSOR(q->lin_b, H, 0, "interactions.%d.lin.bias", b);
    }
    /* PyG's names for the single head, heads.KEY. for named ones */
    for (int h = 0; h < pt_schnet_head_count(c); h++) {
        pt_schnet_head *q = &p->head[h];
        const pt_schnet_head_config hc = head_config(c, h);
        char pre[PT_SCHNET_KEY_MAX + 8] = "";
        if (c->n_heads > 0) snprintf(pre, sizeof(pre), "heads.%s.", hc.key);
        PT_TENSOR(q->lin1_w, H2, H, "%slin1.weight", pre);
        PT_TENSOR(q->lin1_b, H2, 0, "%slin1.bias", pre);
        PT_TENSOR(q->lin2_w, 1, H2, "%slin2.weight", pre);
        PT_TENSOR(q->lin2_b, 1, 0, "%slin2.bias", pre);
        if (hc.use_atomref) PT_TENSOR(q->atomref, PT_SCHNET_ZROWS, 1, "%satomref.weight", pre);
    }
#undef PT_TENSOR
    return off;
}

static size_t tensor_count(const pt_schnet_config *c)
{
    size_t n = 1 + 9 * (size_t)c->interactions;
    for (int h = 0; h < pt_schnet_head_count(c); h++)
        n += 4 + (head_config(c, h).use_atomref ? 1 : 0);
    return n;
}

int pt_schnet_init(pt_schnet *m, const pt_schnet_config *cfg, pt_errors *errs)
{
    memset(m, 0, sizeof(*m));
    if (pt_schnet_config_check(cfg, errs)) return -1;
    m->cfg = *cfg;
    m->n_heads = pt_schnet_head_count(cfg);
    for (int k = 0; k < m->n_heads; k++) {
        m->head[k] = head_config(cfg, k);
        m->mean[k] = 0.0;
        m->std[k] = 1.0;
    }
    m->n_tensors = tensor_count(cfg);
    m->tensors = calloc(m->n_tensors, sizeof(*m->tensors));
    m->n_params = pt_schnet_param_count(cfg);
    m->params_memory = calloc(m->n_params, sizeof(float));
    if (!m->tensors || !m->params_memory) {
        if (errs) pt_errors_add(errs, "", 0, "model", "out of memory for %zu parameters",
                                m->n_params);
        pt_schnet_close(m);
        return -1;
    }
    layout(cfg, m->params_memory, &m->params, m->tensors);
    return 0;
}

void pt_schnet_close(pt_schnet *m)
{
    free(m->params_memory);
    free(m->tensors);
    memset(m, 0, sizeof(*m));
}

void pt_schnet_params_view(const pt_schnet *m, float *base, pt_schnet_params *view)
{
    layout(&m->cfg, base, view, NULL);
}

pt_schnet_tensor *pt_schnet_tensor_table(const pt_schnet_config *cfg, size_t *n)
{
    *n = tensor_count(cfg);
    pt_schnet_tensor *t = calloc(*n, sizeof(*t));
    pt_schnet_params probe;
    if (t) layout(cfg, NULL, &probe, t);
    return t;
}

const pt_schnet_tensor *pt_schnet_find_tensor(const pt_schnet *m, const char *name)
{
    for (size_t i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
    return NULL;
}

/* The head whose atomref table starts at v, or −1. */
static int atomref_head(const pt_schnet *m, const float *v)
{
    for (int k = 0; k < m->n_heads; k++)
        if (m->params.head[k].atomref == v) return k;
    return -1;
}

void pt_schnet_init_weights(pt_schnet *m, uint64_t seed)
{
    pt_rng rng;
    pt_rng_init(&rng, seed, PT_SCHNET_INIT_STREAM);
    for (size_t i = 0; i < m->n_tensors; i++) {
        const pt_schnet_tensor *t = &m->tensors[i];
        float *v = m->params_memory + t->offset;
        if (v == m->params.embedding) {
            for (size_t k = 0; k < t->numel; k++) v[k] = (float)pt_rng_normal(&rng);
            memset(v, 0, (size_t)t->shape[1] * sizeof(float)); /* padding_idx = 0 */
        } else if (atomref_head(m, v) >= 0) {
            const float *init = m->initial_atomref[atomref_head(m, v)];
            for (size_t k = 0; k < t->numel; k++) v[k] = init[k];
        } else if (t->ndim == 2) {
            /* xavier_uniform_: U(−a, a), a = √(6 / (fan_in + fan_out)) */
            double a = sqrt(6.0 / (double)(t->shape[0] + t->shape[1]));
            for (size_t k = 0; k < t->numel; k++)
                v[k] = (float)((2.0 * pt_rng_uniform(&rng) - 1.0) * a);
        } else {
            memset(v, 0, t->numel * sizeof(float));
        }
    }
}

void pt_schnet_set_atomref(pt_schnet *m, int k, const double *ref)
{
    float *table = m->params.head[k].atomref;
    for (int z = 0; z < PT_SCHNET_ZROWS; z++) {
        m->initial_atomref[k][z] = (float)ref[z];
        if (table) table[z] = (float)ref[z];
    }
}

int pt_schnet_find_head(const pt_schnet *m, const char *key)
{
    for (int k = 0; m->cfg.n_heads > 0 && k < m->n_heads; k++)
        if (!strcmp(m->head[k].key, key)) return k;
    return -1;
}

size_t pt_schnet_param_count(const pt_schnet_config *cfg)
{
    pt_schnet_params probe;
    return layout(cfg, NULL, &probe, NULL);
}

/* ---- batch validation ----------------------------------------------------- */

int pt_schnet_batch_check(const pt_schnet *m, const pt_schnet_acts *a, const pt_batch *b,
                          pt_errors *errs)
{
    int bad = 0;
#define PT_BAD(field, ...)                                                   \
    do {                                                                     \
        if (errs) pt_errors_add(errs, "", 0, field, __VA_ARGS__);            \
        bad++;                                                               \
    } while (0)
    if (b->cap_nodes < 1 || b->cap_nodes > a->cap_nodes || b->cap_edges < 0 ||
        b->cap_edges > a->cap_edges || b->cap_graphs < 1 || b->cap_graphs > a->cap_graphs) {
        PT_BAD("batch", "shape (%d nodes, %d edges, %d graphs) does not fit the activation "
               "arena (%d, %d, %d)", b->cap_nodes, b->cap_edges, b->cap_graphs, a->cap_nodes,
               a->cap_edges, a->cap_graphs);
        return bad;
    }
    if (b->cutoff < m->cfg.cutoff)
        PT_BAD("cutoff", "batch padding edges sit at %g Å, inside the model's cutoff %g Å, so "
               "they would carry messages", (double)b->cutoff, (double)m->cfg.cutoff);
    for (int i = 0; i < b->cap_nodes && bad < 20; i++) {
        if (b->z[i] >= PT_SCHNET_ZROWS)
            PT_BAD("z", "node %d has atomic number %d, above %d", i, b->z[i],
                   PT_SCHNET_ZROWS - 1);
        int32_t g = b->node_graph[i];
        if (g < -1 || g >= b->cap_graphs)
            PT_BAD("node_graph", "node %d points to graph slot %d of %d", i, g, b->cap_graphs);
        else if (g >= 0 && b->graph_id[g] < 0)
            PT_BAD("node_graph", "node %d belongs to graph slot %d, which is padding", i, g);
        else if (g >= 0 && b->z[i] == 0)
            PT_BAD("z", "node %d of graph slot %d has z = 0 (the padding element)", i, g);
    }
    if (b->dst_offset[0] != 0 || b->dst_offset[b->cap_nodes] != b->cap_edges)
        PT_BAD("dst_offset", "CSR must start at 0 and end at %d edges (got %d .. %d)",
               b->cap_edges, b->dst_offset[0], b->dst_offset[b->cap_nodes]);
    for (int i = 0; i < b->cap_nodes && bad < 20; i++) {
        int32_t lo = b->dst_offset[i], hi = b->dst_offset[i + 1];
        if (lo > hi || lo < 0 || hi > b->cap_edges) {
            PT_BAD("dst_offset", "row %d spans [%d, %d), not a valid CSR row", i, lo, hi);
            continue;
        }
        for (int32_t k = lo; k < hi; k++)
            if (b->edge_dst[k] != i)
                PT_BAD("edge_dst", "edge %d has receiver %d but lies in CSR row %d", k,
                       b->edge_dst[k], i);
    }
    for (int k = 0; k < b->cap_edges && bad < 20; k++) {
        if (b->edge_src[k] < 0 || b->edge_src[k] >= b->cap_nodes)
            PT_BAD("edge_src", "edge %d has sender %d outside 0..%d", k, b->edge_src[k],
                   b->cap_nodes - 1);
        if (!(b->edge_dist[k] >= 0.0f) || !isfinite(b->edge_dist[k]))
            PT_BAD("edge_dist", "edge %d has distance %g", k, (double)b->edge_dist[k]);
    }
    /* forces follow each distance back to its vector: the two must agree
     * (to float rounding: 1e-5 relative is ~100 ulp) */
    if (a->mode >= PT_SCHNET_FORCES && (!b->edge_vec || !b->graph_volume)) {
        PT_BAD("edge_vec", "a forces arena needs the batch's edge vectors and cell volumes");
        return bad;
    }
    for (int k = 0; a->mode >= PT_SCHNET_FORCES && k < b->cap_edges && bad < 20; k++) {
        const float *v = b->edge_vec + 3 * (size_t)k;
        double n = sqrt((double)v[0] * v[0] + (double)v[1] * v[1] + (double)v[2] * v[2]);
        if (!(fabs(n - (double)b->edge_dist[k]) <= 1e-5 * (double)b->edge_dist[k] + 1e-30))
            PT_BAD("edge_vec", "edge %d: |edge_vec| = %.9g Å but edge_dist = %.9g Å", k, n,
                   (double)b->edge_dist[k]);
    }
#undef PT_BAD
    return bad;
}

/* ---- profiling ----------------------------------------------------------- */

static const char *const op_names[PT_SCHNET_OP_COUNT] = {
    "edge_basis", "filter_gemm", "filter_ssp", "cfconv", "node_gemm", "node_ssp", "other",
};

const char *pt_schnet_op_name(pt_schnet_op op)
{
    return op >= 0 && op < PT_SCHNET_OP_COUNT ? op_names[op] : "unknown";
}

/* ---- forward / loss / backward ------------------------------------------- */

/* 1 when the batch's fill made its filter-row table at this model's cutoff
 * (bit for bit: the table keeps the edges with d < cutoff) */
static int batch_rows_fit(const pt_batch *b, float cutoff)
{
    uint32_t x, y;
    memcpy(&x, &b->cutoff, sizeof x);
    memcpy(&y, &cutoff, sizeof y);
    return b->n_rows >= 0 && b->edge_row && b->edge_first && b->row_last && b->row_dist &&
           x == y;
}

void pt_schnet_prepare_edges(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b)
{
    if (!a->static_shapes && batch_rows_fit(b, m->cfg.cutoff)) {
        /* the filler built it (batch.h): the same function on the same
         * arrays, so the same table, off this thread's critical path */
        a->row = b->edge_row;
        a->first = b->edge_first;
        a->row_last = b->row_last;
        a->row_dist = b->row_dist;
        a->n_rows = b->n_rows;
    } else {
        a->row = a->own_row;
        a->first = a->own_first;
        a->row_last = a->own_row_last;
        a->row_dist = a->own_row_dist;
        a->n_rows = a->static_shapes
                        ? pt_edge_rows_identity(a->row, a->first, a->row_dist, b->edge_dist,
                                                b->cap_edges)
                        /* snd_close as the search's scratch: the sender lists
                         * below fill it */
                        : pt_edge_rows_build(a->row, a->first, a->row_dist, a->snd_close,
                                             b->edge_src, b->dst_offset, b->edge_dist,
                                             b->edge_vec, b->cap_nodes, m->cfg.cutoff);
        pt_edge_rows_last(a->row_last, a->row, b->dst_offset, b->cap_nodes);
    }
    /* the energy backward's tables are made by its first block, those it
     * reads only (schnet_edges.c: by rows, or by senders for rows of three
     * edges); the force passes walk the sender lists */
    a->bwd_made = 0;
    if (!a->forward_only && a->mode >= PT_SCHNET_FORCES) {
        pt_cfconv_senders(a->snd_offset, a->snd_edge, a->snd_close, a->row, b->edge_src,
                          b->edge_dst, b->cap_nodes, b->cap_edges);
        a->bwd_made = PT_SCHNET_BWD_LISTS;
    }
    pt_edge_basis_forward(a->e, a->cut, a->row_dist, a->n_rows, m->cfg.gaussians,
                          m->cfg.cutoff);
    if (a->mode >= PT_SCHNET_FORCES)
        pt_edge_basis_deriv(a->de, a->dcut, a->e, a->row_dist, a->n_rows, m->cfg.gaussians,
                            m->cfg.cutoff);
}

/* Head k: q = ssp(W4 h_T + b4), o = w5 q + b5, then the readout (graph
 * heads) or the per-atom output (atom heads). */
static void head_forward(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b, int k,
                         pt_stopwatch *sw)
{
    const pt_schnet_head *p = &m->params.head[k];
    const pt_schnet_head_config *hc = &m->head[k];
    pt_schnet_head_acts *o = &a->head[k];
    const int N = b->cap_nodes, H = m->cfg.hidden, H2 = m->cfg.hidden / 2;
    pt_linear_forward(o->q, a->h[m->cfg.interactions], p->lin1_w, p->lin1_b, N, H, H2, 0.0f,
                      a->precision);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
    /* σ4 only for the force passes: the backward recovers it from q */
    pt_ssp_forward(o->q, pt_schnet_sig_stored(a) ? pt_schnet_keep_sig(a, o->sig4) : NULL, NULL,
                   N, H2);
    pt_lap(sw, PT_SCHNET_OP_NODE_SSP);
    pt_linear_forward(o->o, o->q, p->lin2_w, p->lin2_b, N, H2, 1, 0.0f, a->precision);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
    if (hc->level == PT_HEAD_GRAPH)
        pt_readout_forward(o->y, a->count, o->o, b->z, b->node_graph, p->atomref, m->mean[k],
                           m->std[k], hc->readout, N, b->cap_graphs);
    else
        pt_atom_output_forward(o->y, o->o, b->z, b->node_graph, p->atomref, m->mean[k],
                               m->std[k], N);
    pt_lap(sw, PT_SCHNET_OP_OTHER);
}

const double *pt_schnet_forward(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b)
{
    const pt_schnet_config *c = &m->cfg;
    const pt_schnet_params *p = &m->params;
    const int N = b->cap_nodes, H = c->hidden;

    pt_stopwatch sw;
    pt_stopwatch_start(&sw, a->profile);
    pt_schnet_prepare_edges(m, a, b);
    pt_lap(&sw, PT_SCHNET_OP_EDGE_BASIS);
    if (a->on_layer) a->on_layer(a->layer_user, PT_LAYER_FORWARD, 0, NULL);
    pt_embedding_forward(a->h[0], p->embedding, b->z, N, H);
    pt_lap(&sw, PT_SCHNET_OP_OTHER);
    for (int t = 0; t < c->interactions; t++) {
        if (a->on_layer) a->on_layer(a->layer_user, PT_LAYER_FORWARD, 1 + t, NULL);
        pt_schnet_block_forward(m, a, b, t, &sw);
    }
    if (a->on_layer) a->on_layer(a->layer_user, PT_LAYER_FORWARD, c->interactions + 1, NULL);
    for (int k = 0; k < m->n_heads; k++) head_forward(m, a, b, k, &sw);
    if (a->profile) a->profile->forwards++;
    return a->y;
}

double pt_schnet_loss(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b, double n_norm)
{
    (void)m;
    if (n_norm <= 0.0) {
        n_norm = 0.0;
        for (int g = 0; g < b->cap_graphs; g++) n_norm += b->graph_id[g] >= 0;
    }
    double loss = 0.0;
    for (int g = 0; g < b->cap_graphs; g++) {
        if (b->graph_id[g] < 0 || n_norm <= 0.0) {
            a->dy[g] = 0.0;
            continue;
        }
        double r = a->y[g] - b->target[g];
        loss += r * r;
        a->dy[g] = 2.0 * r / n_norm;
    }
    return n_norm > 0.0 ? loss / n_norm : 0.0;
}

double pt_schnet_loss_heads(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b,
                            const pt_schnet_head_loss *heads, double *sse)
{
    double total = 0.0;
    for (int k = 0; k < m->n_heads; k++) {
        const pt_schnet_head_loss *hl = &heads[k];
        if (sse) sse[k] = 0.0;
        if (!hl->target) continue;
        const int atom = m->head[k].level == PT_HEAD_ATOM;
        const int n = atom ? b->cap_nodes : b->cap_graphs;
        const int32_t *real = atom ? b->node_graph : b->graph_id; /* ≥ 0: real */
        double n_norm = hl->norm;
        if (n_norm <= 0.0) {
            n_norm = 0.0;
            for (int j = 0; j < n; j++) n_norm += real[j] >= 0;
        }
        double *y = a->head[k].y, *dy = a->head[k].dy, s = 0.0;
        for (int j = 0; j < n; j++) {
            if (real[j] < 0 || n_norm <= 0.0) {
                dy[j] = 0.0;
                continue;
            }
            double r = y[j] - hl->target[j];
            s += r * r;
            dy[j] = hl->weight * 2.0 * r / n_norm;
        }
        if (sse) sse[k] = s;
        if (n_norm > 0.0) total += hl->weight * (s / n_norm);
    }
    return total;
}

void pt_schnet_head_backward(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b, int k,
                             pt_schnet_params *d, float *dh, float beta, pt_stopwatch *sw)
{
    const pt_schnet_head *p = &m->params.head[k];
    pt_schnet_head *dp = &d->head[k];
    const pt_schnet_head_config *hc = &m->head[k];
    const pt_schnet_head_acts *o = &a->head[k];
    const int N = b->cap_nodes, H = m->cfg.hidden, H2 = m->cfg.hidden / 2;
    /* o'_i → o_i → q = ssp(W4 h + b4) → h_T */
    if (hc->level == PT_HEAD_GRAPH)
        pt_readout_backward(a->dout, dp->atomref, o->dy, a->count, b->z, b->node_graph,
                            m->std[k], hc->readout, N);
    else
        pt_atom_output_backward(a->dout, dp->atomref, o->dy, b->node_graph, b->z, m->std[k], N);
    pt_lap(sw, PT_SCHNET_OP_OTHER);
    pt_linear_backward(a->dq, dp->lin2_w, dp->lin2_b, a->dout, o->q, p->lin2_w, N, H2, 1, 0.0f,
                       a->precision);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
    pt_ssp_backward_s(a->dq, dp->lin1_b, o->q, N, H2);
    pt_lap(sw, PT_SCHNET_OP_NODE_SSP);
    pt_linear_backward(dh, dp->lin1_w, NULL, a->dq, a->h[m->cfg.interactions], p->lin1_w, N, H,
                       H2, beta, a->precision);
    pt_lap(sw, PT_SCHNET_OP_NODE_GEMM);
}

void pt_schnet_backward(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b,
                        float *grads)
{
    const pt_schnet_config *c = &m->cfg;
    pt_schnet_params d;
    if (grads) pt_schnet_params_view(m, grads, &d);
    else memset(&d, 0, sizeof d);
    const int N = b->cap_nodes, H = c->hidden;
    const int T = c->interactions;
    pt_schnet_layer_fn hook = a->on_layer;

    pt_stopwatch sw;
    pt_stopwatch_start(&sw, a->profile);
    /* heads: dh_T = Σ_k ∂L/∂h_T through head k */
    if (hook) hook(a->layer_user, PT_LAYER_BACKWARD, T + 1, &d);
    for (int k = 0; k < m->n_heads; k++)
        pt_schnet_head_backward(m, a, b, k, &d, a->dh, k ? 1.0f : 0.0f, &sw);
    if (hook) hook(a->layer_user, PT_LAYER_BACKWARD_DONE, T + 1, &d);
    for (int t = T - 1; t >= 0; t--) {
        if (hook) hook(a->layer_user, PT_LAYER_BACKWARD, 1 + t, &d);
        pt_schnet_block_backward(m, a, b, t, &d, &sw);
        if (hook) hook(a->layer_user, PT_LAYER_BACKWARD_DONE, 1 + t, &d);
    }
    if (hook) hook(a->layer_user, PT_LAYER_BACKWARD, 0, &d);
    pt_embedding_backward(d.embedding, a->dh, b->z, N, H);
    pt_lap(&sw, PT_SCHNET_OP_OTHER);
    if (hook) hook(a->layer_user, PT_LAYER_BACKWARD_DONE, 0, &d);
    if (a->profile) a->profile->backwards++;
}
