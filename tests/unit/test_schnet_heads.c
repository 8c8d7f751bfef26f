/* test_schnet_heads.c — multi-task SchNet (schnet.h, heads): one trunk and
 * several named output heads, graph heads (sum and mean readouts, with and
 * without atomref) and an atom head.  The weighted loss's gradient against
 * central differences of a double-precision reference (schnet_fixture.h's
 * trunk, each head's MLP written out), a single named head against PyG's
 * single head bit for bit, the model file (names, metadata, round trip,
 * located errors), configuration errors, the no-allocation rule, and the
 * forces path with an extra head (the other heads enter at first order). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/rng.h"
#include "engine/core/safetensors.h"
#include "engine/model/schnet.h"

#include "tests/unit/alloc_count.h"
#include "tests/unit/schnet_fixture.h"

enum { K = 4 };
static const char *const keys[K] = {"gap", "homo", "lumo", "charge"};
static const double weights[K] = {1.0, 2.0, 0.5, 3.0};

static pt_schnet_config heads_config(void)
{
    pt_schnet_config c = small_config(PT_READOUT_SUM);
    c.use_atomref = 0;
    c.n_heads = K;
    for (int k = 0; k < K; k++) snprintf(c.heads[k].key, sizeof c.heads[k].key, "%s", keys[k]);
    c.heads[0] = (pt_schnet_head_config){.key = "gap", .level = PT_HEAD_GRAPH,
                                         .readout = PT_READOUT_SUM, .use_atomref = 1};
    c.heads[1] = (pt_schnet_head_config){.key = "homo", .level = PT_HEAD_GRAPH,
                                         .readout = PT_READOUT_MEAN};
    c.heads[2] = (pt_schnet_head_config){.key = "lumo", .level = PT_HEAD_GRAPH,
                                         .readout = PT_READOUT_SUM};
    c.heads[3] = (pt_schnet_head_config){.key = "charge", .level = PT_HEAD_ATOM,
                                         .readout = PT_READOUT_SUM, .use_atomref = 1};
    return c;
}

/* The model with every bias and both atomref tables away from zero, and
 * per-head mean and std. */
static void make_heads_model(pt_schnet *m)
{
    pt_schnet_config c = heads_config();
    assert_int_equal(pt_schnet_init(m, &c, NULL), 0);
    double ref[PT_SCHNET_ZROWS] = {0};
    ref[1] = -0.6;
    ref[6] = 1.8;
    ref[7] = -0.5;
    ref[8] = 0.75;
    pt_schnet_set_atomref(m, 0, ref);
    ref[1] = 0.3;
    ref[8] = -0.4;
    pt_schnet_set_atomref(m, 3, ref);
    pt_schnet_init_weights(m, 8);
    static const double mean[K] = {-0.75, 0.2, 1.5, -0.1}, std[K] = {2.5, 0.4, 1.1, 0.3};
    for (int k = 0; k < K; k++) {
        m->mean[k] = mean[k];
        m->std[k] = std[k];
    }
    pt_rng r;
    pt_rng_init(&r, 77, 0);
    for (size_t t = 0; t < m->n_tensors; t++)
        if (m->tensors[t].ndim == 1)
            for (size_t k = 0; k < m->tensors[t].numel; k++)
                m->params_memory[m->tensors[t].offset + k] = (float)(pt_rng_uniform(&r) - 0.5);
}

/* Targets: per graph slot for the graph heads, per node slot for the atom
 * head (0 on padding: never read). */
typedef struct targets {
    double graph[3][64];
    double atom[64];
} targets;

static void make_targets(const pt_batch *b, targets *t)
{
    memset(t, 0, sizeof *t);
    for (int g = 0; g < b->cap_graphs; g++)
        for (int k = 0; k < 3; k++)
            if (b->graph_id[g] >= 0) t->graph[k][g] = 0.7 * k - 0.3 * b->graph_id[g] + 0.1;
    for (int i = 0; i < b->cap_nodes; i++)
        if (b->node_graph[i] >= 0) t->atom[i] = 0.05 * (i % 7) - 0.2 * (b->z[i] == 8);
}

static void head_losses(const targets *t, pt_schnet_head_loss hl[K])
{
    for (int k = 0; k < K; k++)
        hl[k] = (pt_schnet_head_loss){.target = k < 3 ? t->graph[k] : t->atom,
                                      .weight = weights[k]};
}

static const double *head_tensor(const pt_schnet *m, const double *theta, const char *key,
                                 const char *what)
{
    char name[PT_SCHNET_NAME_MAX];
    snprintf(name, sizeof name, "heads.%s.%s", key, what);
    const pt_schnet_tensor *tt = pt_schnet_find_tensor(m, name);
    assert_non_null(tt);
    return theta + tt->offset;
}

/* Σ_k w_k MSE_k in double precision; y[k][...] the predictions. */
static double reference_heads(const pt_schnet *m, const double *theta, const pt_batch *b,
                              const targets *t, double y[K][64])
{
    const int H = m->cfg.hidden, H2 = H / 2, N = b->cap_nodes;
    double *h = reference_trunk(m, theta, b), loss = 0.0;
    for (int k = 0; k < K; k++) {
        const pt_schnet_head_config *hc = &m->head[k];
        const double *W4 = head_tensor(m, theta, hc->key, "lin1.weight");
        const double *b4 = head_tensor(m, theta, hc->key, "lin1.bias");
        const double *w5 = head_tensor(m, theta, hc->key, "lin2.weight");
        const double *b5 = head_tensor(m, theta, hc->key, "lin2.bias");
        const double *aref = hc->use_atomref ? head_tensor(m, theta, hc->key, "atomref.weight")
                                             : NULL;
        int count[64] = {0};
        memset(y[k], 0, sizeof y[k]);
        for (int i = 0; i < N; i++) {
            if (b->node_graph[i] < 0) continue;
            double o = b5[0];
            for (int j = 0; j < H2; j++) {
                double v = b4[j];
                for (int c = 0; c < H; c++) v += W4[j * H + c] * h[i * H + c];
                o += w5[j] * ssp_ref(v);
            }
            o = o * m->std[k] + m->mean[k] + (aref ? aref[b->z[i]] : 0.0);
            if (hc->level == PT_HEAD_ATOM) {
                y[k][i] = o;
            } else {
                y[k][b->node_graph[i]] += o;
                count[b->node_graph[i]]++;
            }
        }
        double s = 0.0;
        int n = 0;
        if (hc->level == PT_HEAD_ATOM) {
            for (int i = 0; i < N; i++)
                if (b->node_graph[i] >= 0) {
                    s += (y[k][i] - t->atom[i]) * (y[k][i] - t->atom[i]);
                    n++;
                }
        } else {
            for (int g = 0; g < b->cap_graphs; g++) {
                if (hc->readout == PT_READOUT_MEAN && count[g]) y[k][g] /= count[g];
                if (b->graph_id[g] < 0) continue;
                s += (y[k][g] - t->graph[k][g]) * (y[k][g] - t->graph[k][g]);
                n++;
            }
        }
        loss += weights[k] * s / n;
    }
    free(h);
    return loss;
}

typedef struct hfix {
    pt_schnet m;
    pt_schnet_acts a;
    hand_batch hb;
    targets t;
    pt_schnet_head_loss hl[K];
    float *grads;
} hfix;

static void hfix_open(hfix *fx)
{
    make_molecules();
    make_heads_model(&fx->m);
    batch_build(&fx->hb, mols, small_packs, n_mols, 3, small_limits, cutoff);
    assert_int_equal(pt_schnet_acts_init(&fx->a, &fx->m, fx->hb.b.cap_nodes, fx->hb.b.cap_edges,
                                         fx->hb.b.cap_graphs, NULL), 0);
    make_targets(&fx->hb.b, &fx->t);
    head_losses(&fx->t, fx->hl);
    fx->grads = calloc(fx->m.n_params, sizeof(float));
}

static void hfix_close(hfix *fx)
{
    free(fx->grads);
    batch_free(&fx->hb);
    pt_schnet_acts_close(&fx->a);
    pt_schnet_close(&fx->m);
}

/* Predictions and loss against the reference (2e-5 relative, as test_schnet). */
static void test_forward_every_head_matches_reference(void **state)
{
    (void)state;
    hfix fx;
    hfix_open(&fx);
    pt_schnet_forward(&fx.m, &fx.a, &fx.hb.b);
    double sse[K];
    double loss = pt_schnet_loss_heads(&fx.m, &fx.a, &fx.hb.b, fx.hl, sse);
    double *theta = theta_of(&fx.m), yr[K][64];
    double lr = reference_heads(&fx.m, theta, &fx.hb.b, &fx.t, yr);
    for (int k = 0; k < K; k++) {
        int n = fx.m.head[k].level == PT_HEAD_ATOM ? fx.hb.b.cap_nodes : fx.hb.b.cap_graphs;
        const int32_t *real = fx.m.head[k].level == PT_HEAD_ATOM ? fx.hb.b.node_graph
                                                                 : fx.hb.b.graph_id;
        double scale = 0.0;
        for (int j = 0; j < n; j++) scale = fmax(scale, fabs(yr[k][j]));
        for (int j = 0; j < n; j++) {
            const double y = fx.a.head[k].y[j];
            if (real[j] < 0) {
                assert_true(y == 0.0);
                continue;
            }
            if (fabs(y - yr[k][j]) > 2e-5 * scale)
                fail_msg("head %s slot %d: y = %.9g, reference %.9g", keys[k], j, y, yr[k][j]);
        }
        assert_true(sse[k] > 0.0);
    }
    /* head 0's arrays are the arena's y */
    assert_ptr_equal(fx.a.y, fx.a.head[0].y);
    (void)reference; /* test_schnet's single-head reference: not used here */
    if (fabs(loss - lr) > 1e-4 * lr) fail_msg("loss %.9g, reference %.9g", loss, lr);
    free(theta);
    hfix_close(&fx);
}

/* Every tensor of the trunk and the four heads: the analytic gradient of
 * Σ w_k MSE_k against central differences of the reference, with
 * test_schnet's tolerance (|g − fd| ≤ 1e-5 |fd| + 1e-6 max|fd|). */
static void test_gradients_of_weighted_loss_match_finite_differences(void **state)
{
    (void)state;
    hfix fx;
    hfix_open(&fx);
    pt_schnet_forward(&fx.m, &fx.a, &fx.hb.b);
    pt_schnet_loss_heads(&fx.m, &fx.a, &fx.hb.b, fx.hl, NULL);
    pt_schnet_backward(&fx.m, &fx.a, &fx.hb.b, fx.grads);
    double *theta = theta_of(&fx.m), y[K][64];
    pt_rng r;
    pt_rng_init(&r, 4, 0);
    enum { MAXS = 600 };
    size_t idx[MAXS], ns = 0;
    double fd[MAXS];
    for (size_t t = 0; t < fx.m.n_tensors; t++) {
        const pt_schnet_tensor *tt = &fx.m.tensors[t];
        size_t take = tt->numel <= 12 ? tt->numel : 12;
        for (size_t s = 0; s < take; s++) {
            size_t k = tt->numel <= 12 ? s : (size_t)pt_rng_below(&r, tt->numel);
            if (tt->shape[0] == PT_SCHNET_ZROWS) {
                static const int rows[4] = {0, 1, 6, 8};
                int cols = (int)(tt->numel / PT_SCHNET_ZROWS);
                k = (size_t)rows[s % 4] * cols + (size_t)(s / 4) % cols;
            }
            idx[ns++] = tt->offset + k;
        }
    }
    double mx = 0.0;
    for (size_t s = 0; s < ns; s++) {
        double keep = theta[idx[s]], h = 1e-6;
        theta[idx[s]] = keep + h;
        double lp = reference_heads(&fx.m, theta, &fx.hb.b, &fx.t, y);
        theta[idx[s]] = keep - h;
        double lm = reference_heads(&fx.m, theta, &fx.hb.b, &fx.t, y);
        theta[idx[s]] = keep;
        fd[s] = (lp - lm) / (2 * h);
        mx = fmax(mx, fabs(fd[s]));
    }
    double worst = 0.0;
    int heads_seen[K] = {0};
    for (size_t s = 0; s < ns; s++) {
        const char *name = "?";
        for (size_t t = 0; t < fx.m.n_tensors; t++)
            if (idx[s] >= fx.m.tensors[t].offset) name = fx.m.tensors[t].name;
        for (int k = 0; k < K; k++) {
            char pre[32];
            snprintf(pre, sizeof pre, "heads.%s.", keys[k]);
            if (!strncmp(name, pre, strlen(pre)) && fd[s] != 0.0) heads_seen[k] = 1;
        }
        double g = fx.grads[idx[s]], tol = 1e-5 * fabs(fd[s]) + 1e-6 * mx;
        worst = fmax(worst, fabs(g - fd[s]) / tol);
        if (fabs(g - fd[s]) > tol)
            fail_msg("%s: analytic %.9g vs finite difference %.9g (tol %.3g)", name, g, fd[s],
                     tol);
    }
    /* every head's loss reaches its own tensors */
    for (int k = 0; k < K; k++) assert_true(heads_seen[k]);
    print_message("%zu entries checked, worst error = %.3f of tolerance\n", ns, worst);
    free(theta);
    hfix_close(&fx);
}

/* A head of weight 0 sends nothing back: its tensors get no gradient. */
static void test_zero_weight_head_gets_no_gradient(void **state)
{
    (void)state;
    hfix fx;
    hfix_open(&fx);
    fx.hl[1].weight = 0.0;
    pt_schnet_forward(&fx.m, &fx.a, &fx.hb.b);
    pt_schnet_loss_heads(&fx.m, &fx.a, &fx.hb.b, fx.hl, NULL);
    pt_schnet_backward(&fx.m, &fx.a, &fx.hb.b, fx.grads);
    for (size_t t = 0; t < fx.m.n_tensors; t++) {
        const pt_schnet_tensor *tt = &fx.m.tensors[t];
        int homo = !strncmp(tt->name, "heads.homo.", 11);
        double s = 0.0;
        for (size_t k = 0; k < tt->numel; k++) s += fabs(fx.grads[tt->offset + k]);
        if (homo ? s != 0.0 : s == 0.0) fail_msg("%s: |gradient| sums to %g", tt->name, s);
    }
    hfix_close(&fx);
}

/* One named head is PyG's single head under other names: same layout, same
 * predictions, same gradients, bit for bit; pt_schnet_loss_heads of weight 1
 * gives pt_schnet_loss's seeds. */
static void test_one_named_head_equals_the_pyg_head(void **state)
{
    (void)state;
    fixture fx;
    fixture_open(&fx, PT_READOUT_MEAN);
    pt_schnet_config c = small_config(PT_READOUT_SUM);
    c.use_atomref = 0;
    c.n_heads = 1;
    c.heads[0] = (pt_schnet_head_config){.key = "energy_U0", .level = PT_HEAD_GRAPH,
                                         .readout = PT_READOUT_MEAN, .use_atomref = 1};
    pt_schnet named;
    assert_int_equal(pt_schnet_init(&named, &c, NULL), 0);
    assert_int_equal(named.n_params, fx.m.n_params);
    assert_int_equal(named.n_tensors, fx.m.n_tensors);
    for (size_t t = 0; t < named.n_tensors; t++)
        assert_int_equal(named.tensors[t].offset, fx.m.tensors[t].offset);
    assert_string_equal(named.tensors[named.n_tensors - 1].name, "heads.energy_U0.atomref.weight");
    assert_string_equal(fx.m.tensors[fx.m.n_tensors - 1].name, "atomref.weight");
    memcpy(named.params_memory, fx.m.params_memory, named.n_params * sizeof(float));
    named.mean[0] = fx.m.mean[0];
    named.std[0] = fx.m.std[0];
    pt_schnet_acts a;
    const pt_batch *b = &fx.hb.b;
    assert_int_equal(pt_schnet_acts_init(&a, &named, b->cap_nodes, b->cap_edges, b->cap_graphs,
                                         NULL), 0);
    const double *y1 = pt_schnet_forward(&fx.m, &fx.a, b);
    pt_schnet_loss(&fx.m, &fx.a, b, 0.0);
    pt_schnet_backward(&fx.m, &fx.a, b, fx.grads);
    const double *y2 = pt_schnet_forward(&named, &a, b);
    pt_schnet_head_loss hl = {.target = b->target, .weight = 1.0};
    pt_schnet_loss_heads(&named, &a, b, &hl, NULL);
    float *g2 = calloc(named.n_params, sizeof(float));
    pt_schnet_backward(&named, &a, b, g2);
    assert_memory_equal(y1, y2, sizeof(double) * (size_t)b->cap_graphs);
    assert_memory_equal(fx.a.dy, a.dy, sizeof(double) * (size_t)b->cap_graphs);
    assert_memory_equal(fx.grads, g2, sizeof(float) * named.n_params);
    assert_int_equal(pt_schnet_find_head(&named, "energy_U0"), 0);
    assert_int_equal(pt_schnet_find_head(&fx.m, ""), -1);
    free(g2);
    pt_schnet_acts_close(&a);
    pt_schnet_close(&named);
    fixture_close(&fx);
}

/* The file: heads.KEY.* tensors and initial_atomref buffers, "heads" and
 * "head.KEY" metadata; loads back to the same model and predictions. */
static void test_model_file_names_heads_after_targets(void **state)
{
    (void)state;
    hfix fx;
    hfix_open(&fx);
    char path[] = "/tmp/pt_heads_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_schnet_save(&fx.m, path, &errs), 0);
    pt_safetensors st;
    assert_int_equal(pt_safetensors_open(&st, path, &errs), 0);
    assert_non_null(pt_safetensors_find(&st, "heads.gap.lin1.weight"));
    assert_non_null(pt_safetensors_find(&st, "heads.charge.lin2.bias"));
    assert_non_null(pt_safetensors_find(&st, "heads.gap.initial_atomref"));
    assert_non_null(pt_safetensors_find(&st, "heads.charge.atomref.weight"));
    assert_null(pt_safetensors_find(&st, "heads.homo.atomref.weight"));
    assert_null(pt_safetensors_find(&st, "lin1.weight"));
    assert_non_null(pt_safetensors_find(&st, "interactions.1.conv.nn.2.bias"));
    assert_string_equal(pt_safetensors_meta(&st, "heads"), "gap,homo,lumo,charge");
    assert_non_null(strstr(pt_safetensors_meta(&st, "head.homo"), "level=graph readout=mean"));
    assert_non_null(strstr(pt_safetensors_meta(&st, "head.charge"), "level=atom"));
    pt_safetensors_close(&st);

    pt_schnet r;
    assert_int_equal(pt_schnet_load(&r, path, &errs), 0);
    assert_int_equal(r.n_heads, K);
    for (int k = 0; k < K; k++) {
        assert_string_equal(r.head[k].key, keys[k]);
        assert_int_equal(r.head[k].level, fx.m.head[k].level);
        assert_int_equal(r.head[k].readout, fx.m.head[k].readout);
        assert_int_equal(r.head[k].use_atomref, fx.m.head[k].use_atomref);
        assert_true(r.mean[k] == fx.m.mean[k] && r.std[k] == fx.m.std[k]);
    }
    assert_memory_equal(r.params_memory, fx.m.params_memory, r.n_params * sizeof(float));
    assert_memory_equal(r.initial_atomref[3], fx.m.initial_atomref[3],
                        sizeof(r.initial_atomref[3]));
    pt_schnet_close(&r);
    unlink(path);
    pt_errors_close(&errs);
    hfix_close(&fx);
}

/* A head's metadata that does not parse is reported under its key. */
static void test_model_file_bad_head_metadata_is_located(void **state)
{
    (void)state;
    pt_schnet m;
    pt_schnet_config c = heads_config();
    c.n_heads = 1;
    c.heads[0].use_atomref = 0;
    assert_int_equal(pt_schnet_init(&m, &c, NULL), 0);
    char path[] = "/tmp/pt_heads_bad_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    /* the tensors of the model, metadata of our own */
    pt_st_entry e[64];
    size_t n = 0;
    for (size_t t = 0; t < m.n_tensors; t++) {
        const pt_schnet_tensor *tt = &m.tensors[t];
        e[n++] = (pt_st_entry){.name = tt->name, .ndim = tt->ndim,
                               .shape = {tt->shape[0], tt->shape[1]},
                               .data = m.params_memory + tt->offset};
    }
    const pt_st_meta meta[] = {{"cutoff", "3"},
                               {"heads", "gap"},
                               {"head.gap", "level=node readout=add mean=0 std=1 atomref=false"}};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_safetensors_write(path, e, n, meta, 3, &errs), 0);
    pt_schnet r;
    assert_int_equal(pt_schnet_load(&r, path, &errs), -1);
    assert_string_equal(errs.items[0].field, "head.gap");
    assert_non_null(strstr(errs.items[0].message, "level=graph|atom"));
    unlink(path);
    pt_errors_close(&errs);
    pt_schnet_close(&m);
}

static void check_config_error(void (*spoil)(pt_schnet_config *), const char *msg)
{
    pt_schnet_config c = heads_config();
    spoil(&c);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_true(pt_schnet_config_check(&c, &errs) > 0);
    assert_string_equal(errs.items[0].field, "heads");
    if (!strstr(errs.items[0].message, msg)) fail_msg("'%s' lacks '%s'", errs.items[0].message, msg);
    pt_errors_close(&errs);
}

static void too_many(pt_schnet_config *c) { c->n_heads = PT_SCHNET_MAX_HEADS + 1; }
static void twice(pt_schnet_config *c) { strcpy(c->heads[2].key, "gap"); }
static void bad_key(pt_schnet_config *c) { strcpy(c->heads[1].key, "ho mo"); }
static void empty_key(pt_schnet_config *c) { c->heads[1].key[0] = 0; }
static void atom_mean(pt_schnet_config *c) { c->heads[3].readout = PT_READOUT_MEAN; }
static void top_atomref(pt_schnet_config *c) { c->use_atomref = 1; }
static void bad_level(pt_schnet_config *c) { c->heads[0].level = (pt_head_level)5; }

static void test_config_errors_name_the_heads(void **state)
{
    (void)state;
    check_config_error(too_many, "must be 0 (one PyG head) to 16");
    check_config_error(twice, "heads 0 and 2 both predict 'gap'");
    check_config_error(bad_key, "head 1: its key must be");
    check_config_error(empty_key, "head 1: its key must be");
    check_config_error(atom_mean, "head 3: readout must be sum or mean (graph heads)");
    check_config_error(top_atomref, "takes readout and atomref from each head");
    check_config_error(bad_level, "head 0: level must be graph or atom");
}

/* Forces are −∂/∂r of head 0: an arena for them refuses an atom head there. */
static void test_forces_need_a_graph_head_first(void **state)
{
    (void)state;
    pt_schnet_config c = heads_config();
    pt_schnet_head_config t = c.heads[0];
    c.heads[0] = c.heads[3];
    c.heads[3] = t;
    pt_schnet m;
    assert_int_equal(pt_schnet_init(&m, &c, NULL), 0);
    pt_schnet_acts a;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_schnet_acts_init_mode(&a, &m, 8, 16, 2, PT_SCHNET_FORCES, &errs), -1);
    assert_non_null(strstr(errs.items[0].message, "predicts per atom ('charge')"));
    assert_int_equal(pt_schnet_acts_init_mode(&a, &m, 8, 16, 2, PT_SCHNET_ENERGY, &errs), 0);
    pt_schnet_acts_close(&a);
    pt_errors_close(&errs);
    pt_schnet_close(&m);
}

/* The multi-head step allocates nothing. */
static void test_multi_head_step_does_not_allocate(void **state)
{
    (void)state;
    hfix fx;
    hfix_open(&fx);
    pt_schnet_forward(&fx.m, &fx.a, &fx.hb.b);
    pt_schnet_loss_heads(&fx.m, &fx.a, &fx.hb.b, fx.hl, NULL);
    pt_schnet_backward(&fx.m, &fx.a, &fx.hb.b, fx.grads);
    n_allocs = 0;
    counting = 1;
    for (int rep = 0; rep < 3; rep++) {
        pt_schnet_forward(&fx.m, &fx.a, &fx.hb.b);
        pt_schnet_loss_heads(&fx.m, &fx.a, &fx.hb.b, fx.hl, NULL);
        pt_schnet_backward(&fx.m, &fx.a, &fx.hb.b, fx.grads);
    }
    counting = 0;
    assert_int_equal(n_allocs, 0);
    hfix_close(&fx);
}

/* Energies and forces on head 0 with a second head: the gradient is, by
 * linearity, the forces loss's (second head's dy 0) plus the second head's
 * (head 0's dy 0) through the plain backward, to float rounding of the sum. */
static void test_forces_with_another_head_add_its_first_order_term(void **state)
{
    (void)state;
    make_molecules();
    pt_schnet_config c = small_config(PT_READOUT_SUM);
    c.use_atomref = 0;
    c.n_heads = 2;
    c.heads[0] = (pt_schnet_head_config){.key = "energy", .level = PT_HEAD_GRAPH,
                                         .readout = PT_READOUT_SUM};
    c.heads[1] = (pt_schnet_head_config){.key = "gap", .level = PT_HEAD_GRAPH,
                                         .readout = PT_READOUT_MEAN, .use_atomref = 1};
    pt_schnet m;
    assert_int_equal(pt_schnet_init(&m, &c, NULL), 0);
    pt_schnet_init_weights(&m, 21);
    m.mean[1] = 0.3;
    m.std[1] = 0.7;
    hand_batch hb;
    batch_build(&hb, mols, small_packs, n_mols, 3, small_limits, cutoff);
    pt_batch *b = &hb.b;
    /* force labels: something to compare against */
    b->node_force = calloc(3 * (size_t)b->cap_nodes, sizeof(float));
    b->graph_has_forces = calloc((size_t)b->cap_graphs, 1);
    b->graph_has_stress = calloc((size_t)b->cap_graphs, 1);
    b->graph_stress = calloc(9 * (size_t)b->cap_graphs, sizeof(double));
    b->graph_volume = calloc((size_t)b->cap_graphs, sizeof(double));
    for (int g = 0; g < b->cap_graphs; g++) b->graph_has_forces[g] = b->graph_id[g] >= 0;
    for (int i = 0; i < 3 * b->cap_nodes; i++) b->node_force[i] = 0.1f * (float)(i % 5) - 0.2f;
    targets t;
    make_targets(b, &t);
    pt_schnet_acts a;
    assert_int_equal(pt_schnet_acts_init_mode(&a, &m, b->cap_nodes, b->cap_edges, b->cap_graphs,
                                              PT_SCHNET_FORCES_TRAIN, NULL), 0);
    const pt_schnet_loss_weights w = {.energy = 1.0, .forces = 5.0};
    float *both = calloc(m.n_params, sizeof(float)), *sum = calloc(m.n_params, sizeof(float));
    pt_schnet_head_loss hl[2] = {{.target = NULL}, {.target = t.graph[1], .weight = 2.0}};
    /* both terms at once */
    pt_schnet_forward(&m, &a, b);
    pt_schnet_forces(&m, &a, b);
    pt_schnet_loss_forces(&m, &a, b, &w, NULL, NULL);
    pt_schnet_loss_heads(&m, &a, b, hl, NULL);
    pt_schnet_backward_forces(&m, &a, b, both);
    /* the forces loss alone, then the gap head alone (the second backward
     * works in place on the distance backward's arrays: run again) */
    pt_schnet_forward(&m, &a, b);
    pt_schnet_forces(&m, &a, b);
    pt_schnet_loss_forces(&m, &a, b, &w, NULL, NULL);
    memset(a.head[1].dy, 0, sizeof(double) * (size_t)b->cap_graphs);
    pt_schnet_backward_forces(&m, &a, b, sum);
    pt_schnet_forward(&m, &a, b);
    pt_schnet_loss_heads(&m, &a, b, hl, NULL);
    memset(a.head[0].dy, 0, sizeof(double) * (size_t)b->cap_graphs);
    pt_schnet_backward(&m, &a, b, sum);
    double mx = 0.0, worst = 0.0;
    for (size_t i = 0; i < m.n_params; i++) mx = fmax(mx, fabs(both[i]));
    for (size_t i = 0; i < m.n_params; i++) worst = fmax(worst, fabs(both[i] - sum[i]));
    print_message("max |joint - parts| = %.3g of max |g| = %.3g\n", worst, mx);
    assert_true(worst <= 1e-5 * mx);
    /* the gap head's tensors are reached, and only through the gap loss */
    const pt_schnet_tensor *gw = pt_schnet_find_tensor(&m, "heads.gap.lin2.weight");
    assert_true(both[gw->offset] != 0.0f);
    free(both);
    free(sum);
    free(b->node_force);
    free(b->graph_has_forces);
    free(b->graph_has_stress);
    free(b->graph_stress);
    free(b->graph_volume);
    batch_free(&hb);
    pt_schnet_acts_close(&a);
    pt_schnet_close(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_every_head_matches_reference),
        cmocka_unit_test(test_gradients_of_weighted_loss_match_finite_differences),
        cmocka_unit_test(test_zero_weight_head_gets_no_gradient),
        cmocka_unit_test(test_one_named_head_equals_the_pyg_head),
        cmocka_unit_test(test_model_file_names_heads_after_targets),
        cmocka_unit_test(test_model_file_bad_head_metadata_is_located),
        cmocka_unit_test(test_config_errors_name_the_heads),
        cmocka_unit_test(test_forces_need_a_graph_head_first),
        cmocka_unit_test(test_multi_head_step_does_not_allocate),
        cmocka_unit_test(test_forces_with_another_head_add_its_first_order_term),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
