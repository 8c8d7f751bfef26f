/* test_schnet_edges.c — an interaction block's edge part as one pipeline
 * (engine/model/schnet_edges.c: each filter chunk followed by the
 * convolution of the receivers it completes) against the unfused
 * whole-batch sequence it replaced (pt_schnet_filter_forward, then
 * pt_cfconv_forward; pt_cfconv_backward, then pt_schnet_filter_backward),
 * bit for bit, on real batches: 8 LPFHP packs (seed 000's shapes: H = F =
 * 100, G = 25, 6 Å, 32 neighbours) of
 *   - QM9 molecules (tests/data/backend_qm9_240.extxyz.gz): padding edges,
 *     every bond two-sided;
 *   - water clusters (tests/data/ingest_water_slice.extxyz.gz): neighbour
 *     lists truncated at 32, so some bonds are one-sided (a row per edge);
 *   - periodic EMT cells (tests/data/emt_train_240.extxyz.gz): bonds to
 *     images, an atom bonded to its own images;
 * each checked to really have those features and several chunks of rows.
 * Compared: s1, σ1 (where kept: not in bf16 energy), W (bf16 energy: as the
 * bf16 rows it keeps, its reference convolution the fp32 loops on them
 * widened, the walk by rows too since session 17), m (forward); dx and the four filter gradients
 * accumulated onto non-zero values (backward; dP and ds1 are scratch: dP
 * in a window of the rows in flight, ds1 one chunk's); outputs and scratch
 * the pipeline must write are poisoned first.  The unfused sequence's
 * convolution runs the generic loops, the pipeline's the policy's kernel
 * (AVX-512 or AVX2, cfconv_kernels.h).  On the policy's kernels and the
 * AVX2 kernel forced and bf16 (chunks of 256 rows), OpenBLAS forced (one
 * chunk of all rows), and on the static-shape table (a row per edge slot,
 * padding included).  Also: row_last (edge_rows.h) is the receiver of each
 * row's last edge, and a whole step on an energy arena (pipeline) and on a
 * forces arena (its forward unfused) predicts the same bits. */
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

#include "engine/data/ingest.h"
#include "engine/graph/graph.h"
#include "engine/model/bf16.h"
#include "engine/model/cfconv_kernels.h"
#include "engine/pack/edge_rows.h"
#include "engine/model/schnet_internal.h"
#include "engine/model/sgemm_kernels.h"
#include "engine/pack/batch.h"
#include "engine/pack/packing.h"

#include "tests/unit/real_batch_fixture.h"
#include "tests/unit/sum_order_bound.h"

/* ---- helpers --------------------------------------------------------------- */

#define PT_TEST_SEED 0x9e3779b97f4a7c15ull
#include "tests/unit/rand_fixture.h"

static void fill(float *p, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) p[i] = scale * rnd();
}

#define SAME(x, y, n) assert_memory_equal((x), (y), sizeof(float) * (size_t)(n))

/* A block's filter gradients: four tensors in one buffer. */
typedef struct grads {
    float buf[100 * 25 + 100 + 100 * 100 + 100];
    pt_schnet_block dw;
} grads;

static void grads_init(grads *g, int G, int F, const grads *from)
{
    g->dw.mlp0_w = g->buf;
    g->dw.mlp0_b = g->dw.mlp0_w + F * G;
    g->dw.mlp2_w = g->dw.mlp0_b + F;
    g->dw.mlp2_b = g->dw.mlp2_w + F * F;
    if (from) memcpy(g->buf, from->buf, sizeof g->buf);
    else fill(g->buf, sizeof g->buf / sizeof(float), 0.01f); /* accumulated onto */
}

/* The batch's table, and what it has: padding edges, one-sided bonds
 * (a row used by one edge of two real atoms), rows over several chunks. */
typedef struct features {
    int pad_edges, one_sided, rows;
} features;

static features table_features(const pt_schnet_acts *a, const pt_batch *b)
{
    features f = {0, 0, a->n_rows};
    int *uses = calloc((size_t)a->n_rows + 1, sizeof(int));
    assert_non_null(uses);
    for (int k = 0; k < b->cap_edges; k++) {
        if (a->row[k] < 0) f.pad_edges++;
        else uses[a->row[k]]++;
    }
    for (int u = 0; u < a->n_rows; u++) f.one_sided += uses[u] == 1;
    free(uses);
    /* row_last: the receiver of each row's last edge */
    for (int i = 0; i < b->cap_nodes; i++)
        for (int32_t k = b->dst_offset[i]; k < b->dst_offset[i + 1]; k++)
            if (a->row[k] >= 0) assert_true(a->row_last[a->row[k]] >= i);
    for (int i = 0; i < b->cap_nodes; i++)
        for (int32_t k = b->dst_offset[i]; k < b->dst_offset[i + 1]; k++)
            if (a->row[k] >= 0 && a->row_last[a->row[k]] == i) a->row_last[a->row[k]] = -1 - i;
    for (int u = 0; u < a->n_rows; u++) { /* each row's last receiver was one of its own */
        assert_true(a->row_last[u] < 0);
        a->row_last[u] = -1 - a->row_last[u];
    }
    return f;
}

/* The backward's W prefetch (schnet_edges.c) fetches rows [made(c0),
 * made(c1)) for the receivers between two boundaries no edge crosses:
 * every row they read must lie there, and the counts add up. */
static void check_rows_made(const pt_schnet_acts *a, const pt_batch *b)
{
    const int N = b->cap_nodes;
    int ranges = 0;
    int32_t made = 0;
    for (int c0 = 0; c0 < N; ranges++) {
        const int c1 = a->snd_close[c0 + 1];
        assert_true(c1 > c0 && c1 <= N);
        const int32_t made1 = pt_schnet_rows_made(a, b, c0, c1, made);
        assert_int_equal(made1, pt_schnet_rows_made(a, b, 0, c1, 0));
        for (int32_t k = b->dst_offset[c0]; k < b->dst_offset[c1]; k++)
            if (a->row[k] >= 0) {
                assert_true(a->row[k] >= made);
                assert_true(a->row[k] < made1);
            }
        made = made1;
        c0 = c1;
    }
    assert_int_equal(made, a->n_rows);
    assert_true(ranges > 1);
}

/* ---- the block-level comparison -------------------------------------------- */

/* The backward by rows (pt_cfconv_backward_rows, the pipeline's for fp32
 * W) over the whole batch against receiver order (pt_cfconv_backward's
 * results in a->dx and a->dp, replaced by the rows' walk, the pipeline's
 * reference): dP bit for bit; dx_j sums the same terms dm_i ⊙ W_u in row
 * order instead of receiver order, within sum_order_bound.h's bound.
 * Returns the largest |Δ| over its bound; *moved counts the elements that
 * differ. */
static double rows_against_receivers(pt_schnet_acts *a, const pt_batch *b, const float *x,
                                     const float *w, int F, int *moved)
{
    const int N = b->cap_nodes, U = a->n_rows;
    const size_t nf = (size_t)N * F, uf = (size_t)U * F;
    float *dx_r = floats_copy(a->dx, nf), *dp_r = floats_copy(a->dp, uf);
    memset(a->dx, 0, nf * sizeof(float));
    pt_cfconv_backward_rows(a->dx, a->dp, a->dm, x, w, 0, a->row_rec, 0, U, F);
    SAME(a->dp, dp_r, uf);
    const double worst =
        sum_order_check(a->dx, dx_r, a->dm, w, b->dst_offset, b->edge_src, a->row, N, F, moved);
    free(dx_r), free(dp_r);
    return worst;
}

/* ring: the pipeline must have kept dP in a window of rows (the chunked
 * path on a batch whose bonds stay within a few chunks), seen as dp's last
 * row still poisoned */
static void compare_block(data *d, pt_precision prec, int static_shapes, int ring)
{
    pt_schnet *m = &d->m;
    const pt_batch *b = &d->b;
    pt_schnet_acts a;
    assert_int_equal(pt_schnet_acts_init(&a, m, b->cap_nodes, b->cap_edges, b->cap_graphs, NULL),
                     0);
    a.precision = prec;
    a.static_shapes = static_shapes;
    pt_schnet_prepare_edges(m, &a, b);
    const int N = b->cap_nodes, U = a.n_rows, F = m->cfg.filters, G = m->cfg.gaussians;
    const size_t nf = (size_t)N * F, uf = (size_t)U * F;
    const pt_schnet_block *w = &m->params.block[0];
    pt_schnet_block_acts *k = &a.block[0];
    fill(k->x, nf, 1.0f);
    fill(a.dm, nf, 1.0f);
    pt_stopwatch sw;
    pt_stopwatch_start(&sw, NULL);

    /* the unfused sequence */
    grads gr, gf, gs;
    grads_init(&gr, G, F, NULL);
    grads_init(&gf, G, F, &gr);
    grads_init(&gs, G, F, &gr);
    pt_schnet_filter_forward(w, k, &a, U, G, F, &sw);
    /* the convolution by the generic loops here, the policy's kernel in
     * the pipeline: the same bits on real batches too */
    pt_cfconv_force(PT_CFCONV_GENERIC);
    /* bf16 energy keeps W as bf16 rows (cfconv_bf16.h): the fp32 loops on
     * those values widened are its reference */
    const pt_bf16 *wh = pt_schnet_w_bf16(k, &a);
    assert_int_equal(wh != NULL, prec == PT_PRECISION_BF16 && pt_schnet_bf16_fused(&a));
    float *wf = wh ? malloc(uf * sizeof(float)) : k->w;
    assert_non_null(wf);
    if (wh) pt_bf16_to_floats(wf, wh, uf);
    pt_cfconv_forward(k->m, wf, a.row, k->x, b->edge_src, b->dst_offset, N, F);
    pt_cfconv_backward(a.dx, a.dp, a.dm, k->x, wf, a.cut, a.row, a.first, b->edge_src,
                       b->dst_offset, N, F);
    /* the pipeline walks rows (every row here is an edge and at most its
     * reverse), fp32 W and bf16's W̃ rows alike (since session 17) */
    const int simple = pt_cfconv_row_edges(a.row_rec, a.row, a.first, b->edge_src,
                                           b->dst_offset, a.cut, N);
    assert_true(simple);
    float *dx_recv = floats_copy(a.dx, nf);
    {
        int moved;
        const double worst = rows_against_receivers(&a, b, k->x, wf, F, &moved);
        print_message("  by rows%s: %d of %zu dx elements moved, at most %.3g of the bound\n",
                      wh ? " (bf16 W)" : "", moved, nf, worst);
    }
    if (wh) free(wf);
    pt_cfconv_force(PT_CFCONV_AUTO);
    pt_schnet_filter_backward(w, &gr.dw, k, &a, U, G, F, &sw);
    /* all of s1's memory: bf16 keeps s1's pairs in its free half, past uf
     * floats' worth of rows where they need more than that */
    /* an energy arena has no σ1 (the backward derives σ̃1 from s1) */
    assert_int_equal(k->sig1 != NULL, pt_schnet_sig_stored(&a));
    float *s1 = floats_copy(k->s1, (size_t)a.cap_edges * F), *W = floats_copy(k->w, uf);
    float *sig1 = k->sig1 ? floats_copy(k->sig1, uf) : NULL;
    float *mm = floats_copy(k->m, nf), *dx = floats_copy(a.dx, nf);

    /* the pipeline, on poisoned outputs */
    memset(k->s1, 0xff, (size_t)a.cap_edges * F * sizeof(float));
    if (k->sig1) memset(k->sig1, 0xff, uf * sizeof(float));
    memset(k->w, 0xff, uf * sizeof(float));
    memset(k->m, 0xff, nf * sizeof(float));
    memset(a.dx, 0xff, nf * sizeof(float));
    memset(a.dp, 0xff, uf * sizeof(float));
    memset(a.ds1, 0xff, uf * sizeof(float));
    pt_schnet_edges_forward(w, k, &a, b, G, F, &sw);
    /* bf16 energy keeps s1 as pairs in the free half of s1's memory, or
     * without room for them as bf16 rows in its first half */
    const uint32_t *s1p = pt_schnet_s1_pairs(k, &a, G, F);
    if (s1p) {
        const size_t at = (size_t)((const char *)s1p - (const char *)k->s1);
        assert_memory_equal(s1p, (const char *)s1 + at,
                            (size_t)(U + 1) / 2 * pt_bf16_pairs_ld(F) * sizeof(uint32_t));
    } else {
        assert_memory_equal(
            k->s1, s1, uf * (pt_schnet_s1_bf16(k, &a, G, F) ? sizeof(pt_bf16) : sizeof(float)));
    }
    /* energy keeps no σ1 (derived from s1 in the backward), fp32 or bf16 */
    if (!pt_schnet_bf16_fused(&a) && pt_schnet_sig_stored(&a)) SAME(k->sig1, sig1, uf);
    if (wh) {
        assert_memory_equal(k->w, W, uf * sizeof(pt_bf16));
    } else {
        /* fp32 W: the forward leaves P in W's memory (every edge forms
         * W = P ⊙ C itself, and the backward by rows again): the cutoff
         * pass on it gives the sequence's W bit for bit */
        float *pw = floats_copy(k->w, uf);
        pt_filter_cutoff_forward(pw, pw, a.cut, U, F);
        SAME(pw, W, uf);
        free(pw);
    }
    SAME(k->m, mm, nf);
    a.bwd_made = 0; /* as pt_schnet_prepare_edges leaves it */
    pt_schnet_edges_backward(w, &gf.dw, k, &a, b, G, F, &sw);
    SAME(a.dx, dx, nf);
    /* the tables its walk reads, and only those: by rows (no sender lists,
     * ring or entries), fp32 W and bf16's W̃ rows alike */
    assert_int_equal(a.bwd_made, PT_SCHNET_BWD_ROWS);
    SAME(gf.buf, gr.buf, sizeof gr.buf / sizeof(float));
    {
        /* a batch pt_cfconv_row_edges refuses (a row of three edges) walks
         * senders: receiver order's dx, the same gradients (bf16's W̃:
         * cfconv_bf16.h's walk by senders) */
        a.bwd_made = PT_SCHNET_BWD_ROWS;
        a.rows_simple = 0;
        memset(a.dx, 0xff, nf * sizeof(float));
        pt_schnet_edges_backward(w, &gs.dw, k, &a, b, G, F, &sw);
        SAME(a.dx, dx_recv, nf);
        SAME(gs.buf, gr.buf, sizeof gr.buf / sizeof(float));
        assert_true(a.bwd_made & PT_SCHNET_BWD_RING);
    }
    free(dx_recv);
    if (ring) {
        const uint32_t *last_row = (const uint32_t *)(a.dp + uf - F);
        for (int c = 0; c < F; c++) assert_int_equal(last_row[c], 0xffffffffu);
    }
    free(s1), free(sig1), free(W), free(mm), free(dx);
    pt_schnet_acts_close(&a);
}

static void check_data(const char *src, const char *target, int want_one_sided)
{
    data d;
    data_open(&d, src, target);
    pt_schnet_acts a;
    assert_int_equal(pt_schnet_acts_init(&a, &d.m, d.b.cap_nodes, d.b.cap_edges, d.b.cap_graphs,
                                         NULL),
                     0);
    pt_schnet_prepare_edges(&d.m, &a, &d.b);
    /* the sender lists as the backward by senders makes them (bf16) */
    pt_cfconv_senders(a.snd_offset, a.snd_edge, a.snd_close, a.row, d.b.edge_src, d.b.edge_dst,
                      d.b.cap_nodes, d.b.cap_edges);
    features f = table_features(&a, &d.b);
    check_rows_made(&a, &d.b);
    print_message("%s: %d edge slots, %d rows, %d padding edges, %d one-sided rows\n", src,
                  d.b.cap_edges, f.rows, f.pad_edges, f.one_sided);
    pt_schnet_acts_close(&a);
    assert_true(f.pad_edges > 0);
    assert_true(f.rows > 4 * 256); /* several chunks, a ragged last one or not */
    if (want_one_sided) assert_true(f.one_sided > 0);

    pt_sgemm_force(PT_SGEMM_AUTO);
    compare_block(&d, PT_PRECISION_FP32, 0, 1);
    compare_block(&d, PT_PRECISION_FP32, 1, 1);
    compare_block(&d, PT_PRECISION_BF16, 0, pt_cpu_has_bf16());
    if (pt_sgemm_supported(PT_SGEMM_AVX2)) {
        pt_sgemm_force(PT_SGEMM_AVX2);
        compare_block(&d, PT_PRECISION_FP32, 0, 1);
    }
    pt_sgemm_force(PT_SGEMM_OPENBLAS);
    compare_block(&d, PT_PRECISION_FP32, 0, 0);
    pt_sgemm_force(PT_SGEMM_AUTO);
    data_close(&d);
}

static void test_qm9(void **state)
{
    (void)state;
    check_data("tests/data/backend_qm9_240.extxyz.gz", "energy_U0", 0);
}

static void test_water(void **state)
{
    (void)state;
    check_data("tests/data/ingest_water_slice.extxyz.gz", "energy", 1);
}

static void test_periodic(void **state)
{
    (void)state;
    check_data("tests/data/emt_train_240.extxyz.gz", "energy", 1);
}

/* A whole forward on an energy arena (the pipeline) and on a forces arena
 * (filter network, its d-derivative, then the convolution, unfused): the
 * same predictions bit for bit, on water. */
static void test_step_arenas(void **state)
{
    (void)state;
    data d;
    data_open(&d, "tests/data/ingest_water_slice.extxyz.gz", "energy");
    const pt_batch *b = &d.b;
    pt_schnet_acts e, f;
    assert_int_equal(pt_schnet_acts_init_mode(&e, &d.m, b->cap_nodes, b->cap_edges,
                                              b->cap_graphs, PT_SCHNET_ENERGY, NULL),
                     0);
    assert_int_equal(pt_schnet_acts_init_mode(&f, &d.m, b->cap_nodes, b->cap_edges,
                                              b->cap_graphs, PT_SCHNET_FORCES, NULL),
                     0);
    const double *ye = pt_schnet_forward(&d.m, &e, b);
    const double *yf = pt_schnet_forward(&d.m, &f, b);
    int real = 0;
    for (int g = 0; g < b->cap_graphs; g++) {
        real += b->graph_id[g] >= 0;
        assert_memory_equal(&ye[g], &yf[g], sizeof(double));
    }
    assert_true(real > 8);
    for (int t = 0; t < d.m.cfg.interactions; t++)
        SAME(e.block[t].m, f.block[t].m, (size_t)b->cap_nodes * d.m.cfg.filters);
    pt_schnet_acts_close(&e);
    pt_schnet_acts_close(&f);
    data_close(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qm9),
        cmocka_unit_test(test_water),
        cmocka_unit_test(test_periodic),
        cmocka_unit_test(test_step_arenas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
