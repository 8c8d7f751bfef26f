/* test_schnet_bf16.c — training.precision "bf16" against "fp32" on one
 * training step of seed 000's model (H=F=100, T=4, G=25, 6 Å) over 16 LPFHP
 * packs of real QM9 molecules (tests/data/backend_qm9_240.extxyz.gz).
 *
 * What bf16 changes: every operand of every matrix product is rounded to 8
 * significant bits (relative error ≤ 2^-9 each), products accumulate in fp32;
 * all elementwise work, biases, and the gradients' storage stay fp32.  So a
 * step differs from fp32 by rounding noise of order 2^-9 per product, grown
 * (not compounded: the layers are well conditioned at init) through the 4
 * interaction blocks.  The model is normalised as a job's default (atomref
 * fit, per-atom mean and std), so residuals are of order std as in
 * training.  Stated tolerances, about 4× the values measured on this batch
 * when the test was written (in brackets; the test prints them):
 *   - loss:                 |L_bf16 − L_fp32| / L_fp32            ≤ 1e-2   [2.6e-3]
 *   - predictions:          max_g |Δy_g| / rms_g |y_g − t_g|      ≤ 2e-2   [4.5e-3]
 *   - whole gradient:       ‖g_bf16 − g_fp32‖ / ‖g_fp32‖           ≤ 3e-2   [7.3e-3]
 *                           cosine(g_bf16, g_fp32)                ≥ 0.9995 [0.999998]
 *   - every tensor's grad:  ‖Δg_T‖ / ‖g_T‖                         ≤ 4e-2   [9.5e-3]
 * and bf16 must really have run: the gradients differ from fp32 by more
 * than 1e-5 relative (fp32 run twice is bit-identical).  A bf16 step on a
 * CPU without AVX512-BF16 takes the portable path (rounded operands through
 * sgemm): the same numbers up to accumulation order, so the test runs on any
 * x86-64.  The fused bf16 step (pt_schnet_bf16_fused) matches the unfused
 * one within the bounds of its bf16 softplus (below).  Where the CPU has AMX
 * the step, kernel and fusion tests run on both native kernels
 * (bf16_native.h), and AMX's step agrees with AVX512-BF16's as closely as
 * the portable path's does. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/pack/batch.h"
#include "engine/model/bf16.h"
#include "tests/unit/bf16_native.h"
#include "engine/data/normalize.h"
#include "engine/model/schnet.h"
#include "engine/model/schnet_internal.h"
#include "engine/model/bf16_ssp.h"
#include "tests/unit/backend_fixture.h"

typedef struct step {
    double loss;
    double *y;
    float *grads;
} step;

static pt_schnet big;
static pt_batch batch;
static pt_schnet_acts acts;

static int setup_big(void **state)
{
    if (setup(state)) return -1;
    /* seed 000's model, normalised as a job's default (atomref fit, then
     * per-atom mean and std), so residuals are of order std as in training */
    pt_schnet_config mc = pt_schnet_config_default();
    mc.use_atomref = 1;
    pt_norm nm;
    if (pt_norm_fit(&nm, PT_NORM_ATOMREF, 1, &F.ds, F.target_key, F.ids, F.ds.n_structs,
                    NULL))
        return -1;
    if (pt_schnet_init(&big, &mc, NULL)) return -1;
    pt_schnet_set_atomref(&big, 0, nm.atomref);
    pt_schnet_init_weights(&big, 11);
    big.mean[0] = nm.mean;
    big.std[0] = nm.std;
    if (pt_batch_init(&batch, F.packer.limits, 16, (float)mc.cutoff) != PT_BATCH_OK) return -1;
    if (pt_batch_fill(&batch, &F.ds, &F.graphs, &F.packs, 0, 16, (int)F.target_key) !=
        PT_BATCH_OK)
        return -1;
    return pt_schnet_acts_init(&acts, &big, batch.cap_nodes, batch.cap_edges, batch.cap_graphs,
                               NULL);
}

static int teardown_big(void **state)
{
    pt_schnet_acts_close(&acts);
    pt_batch_close(&batch);
    pt_schnet_close(&big);
    return teardown(state);
}

static step run(pt_precision prec)
{
    step s;
    acts.precision = prec;
    const double *y = pt_schnet_forward(&big, &acts, &batch);
    s.y = malloc(sizeof(double) * (size_t)batch.cap_graphs);
    memcpy(s.y, y, sizeof(double) * (size_t)batch.cap_graphs);
    s.loss = pt_schnet_loss(&big, &acts, &batch, 0.0);
    s.grads = calloc(big.n_params, sizeof(float));
    pt_schnet_backward(&big, &acts, &batch, s.grads);
    return s;
}

static void step_free(step *s)
{
    free(s->y);
    free(s->grads);
}

static double rel_l2(const float *a, const float *b, size_t n)
{
    double d = 0.0, r = 0.0;
    for (size_t k = 0; k < n; k++) {
        d += ((double)a[k] - b[k]) * ((double)a[k] - b[k]);
        r += (double)b[k] * b[k];
    }
    return r > 0.0 ? sqrt(d / r) : sqrt(d);
}

static void test_bf16_step_against_fp32(void **state)
{
    (void)state;
    if (pt_cpu_has_bf16()) assert_int_equal(pt_bf16_set_kernel(native), PT_BF16_OK);
    step f = run(PT_PRECISION_FP32), f2 = run(PT_PRECISION_FP32), b = run(PT_PRECISION_BF16);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
    assert_memory_equal(f.grads, f2.grads, big.n_params * sizeof(float));

    double loss_rel = fabs(b.loss - f.loss) / f.loss;
    double res2 = 0.0, dy = 0.0;
    int n_real = 0;
    for (int g = 0; g < batch.cap_graphs; g++) {
        if (batch.graph_id[g] < 0) continue;
        res2 += (f.y[g] - batch.target[g]) * (f.y[g] - batch.target[g]);
        dy = fmax(dy, fabs(b.y[g] - f.y[g]));
        n_real++;
    }
    double y_rel = dy / sqrt(res2 / n_real);
    double dot = 0.0, nb = 0.0, nf = 0.0;
    for (size_t k = 0; k < big.n_params; k++) {
        dot += (double)b.grads[k] * f.grads[k];
        nb += (double)b.grads[k] * b.grads[k];
        nf += (double)f.grads[k] * f.grads[k];
    }
    double cosine = dot / sqrt(nb * nf), g_rel = rel_l2(b.grads, f.grads, big.n_params);
    double worst = 0.0;
    const char *worst_name = "";
    for (size_t t = 0; t < big.n_tensors; t++) {
        const pt_schnet_tensor *tt = &big.tensors[t];
        double r = rel_l2(b.grads + tt->offset, f.grads + tt->offset, tt->numel);
        if (r > worst) {
            worst = r;
            worst_name = tt->name;
        }
    }
    printf("bf16 (kernel %d) vs fp32 (%d graphs): loss %.6g vs %.6g (rel %.2e), max |dy| / rms "
           "residual %.2e, gradient rel L2 %.2e, cosine %.6f, worst tensor %s %.2e\n",
           (int)(pt_cpu_has_bf16() ? native : PT_BF16_KERNEL_PORTABLE), n_real, b.loss, f.loss,
           loss_rel, y_rel, g_rel, cosine, worst_name, worst);
    assert_true(g_rel > 1e-5); /* bf16 really ran */
    assert_true(loss_rel <= 1e-2);
    assert_true(y_rel <= 2e-2);
    assert_true(g_rel <= 3e-2);
    assert_true(cosine >= 0.9995);
    assert_true(worst <= 4e-2);
    step_free(&f);
    step_free(&f2);
    step_free(&b);
}

/* The kernel choice inside bf16 (AVX512-BF16 or the portable path) changes
 * only the fp32 accumulation order: compared with the fused products off on
 * both sides (the portable path never fuses; what fusing changes — the bf16
 * softplus, W kept as bf16 — is test_bf16_fused_step_equals_unfused's). */
static void test_bf16_kernels_agree(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) {
        skip();
        return;
    }
    assert_int_equal(pt_bf16_set_kernel(native), PT_BF16_OK);
    pt_bf16_set_fusion(0);
    step a = run(PT_PRECISION_BF16);
    pt_bf16_set_fusion(1);
    assert_int_equal(pt_bf16_set_kernel(PT_BF16_KERNEL_PORTABLE), PT_BF16_OK);
    step p = run(PT_PRECISION_BF16);
    assert_int_equal(pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO), PT_BF16_OK);
    double r = rel_l2(a.grads, p.grads, big.n_params);
    printf("bf16 kernel %d vs portable kernel: loss rel %.2e, gradient rel L2 %.2e\n", (int)native,
           fabs(a.loss - p.loss) / a.loss, r);
    assert_true(r <= 1e-3);
    /* the loss, the mean of N = 32 squared residuals d_g, moves by
     * Σ δ_g (2 d_g + δ_g) / N when the predictions move by δ_g: ≤ 2 max|δ| /
     * rms(d) outright, ≈ 2 rms(δ) / (rms(d) √N) when the δ_g come from bf16
     * roundings that flip, with signs independent of d_g's (as in
     * test_bf16_fused_step_equals_unfused).  Which flip follows ulp-level
     * changes upstream (the fp32 softplus, even the build's -O level), so the
     * measured values are draws from that spread (kernel 1 / 3): c8e298d's
     * softplus 2.56e-5 / 4.17e-5, session 10's table 1.75e-5 / 1.24e-4,
     * session 11's 4.4e-6 / 8.2e-5 (make test) and 1.23e-5 / 1.67e-4 (make
     * asan, -O1): bound 3e-4 (was 1e-4, 2.4x c8e298d's largest) */
    assert_true(fabs(a.loss - p.loss) <= 3e-4 * a.loss);
    step_free(&a);
    step_free(&p);
}

/* AMX against AVX512-BF16: both fp32 accumulations of the same bf16
 * operands in different orders (bf16.h), so as close as the portable path
 * (bound 1e-3 on the gradient, 1e-4 on the loss), and not the same bits
 * (AMX really ran).  Without AMX, forcing it is refused. */
static void test_bf16_amx_and_avx512_agree(void **state)
{
    (void)state;
    if (amx_refused_here()) return;
    assert_int_equal(pt_bf16_set_kernel(PT_BF16_KERNEL_AVX512), PT_BF16_OK);
    step v = run(PT_PRECISION_BF16);
    assert_int_equal(pt_bf16_set_kernel(PT_BF16_KERNEL_AMX), PT_BF16_OK);
    step x = run(PT_PRECISION_BF16);
    assert_int_equal(pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO), PT_BF16_OK);
    double r = rel_l2(x.grads, v.grads, big.n_params);
    printf("bf16 AMX vs AVX512-BF16 kernel: loss rel %.2e, gradient rel L2 %.2e\n",
           fabs(x.loss - v.loss) / v.loss, r);
    assert_true(r > 0.0);
    assert_true(r <= 1e-3);
    assert_true(fabs(x.loss - v.loss) <= 1e-4 * v.loss);
    step_free(&v);
    step_free(&x);
}

/* The fused bf16 step (the filter's and the node's products applying bias,
 * shifted softplus and cutoff as they store, s1 and u kept only as bf16)
 * against the unfused sequence of ops: the same up to the filter network's
 * softplus, which the fused path computes at bf16's precision with σ1
 * derived from s1's bf16 values (bf16_ssp.h: ssp~ within 1.4e-5, σ̃ within
 * bf16's rounding of s1; the node layer's u and σ̃2 alike, from u), where
 * the unfused one runs fp32's, and W, which
 * the fused path keeps as bf16 rows for the convolution (cfconv_bf16.h:
 * 2^-8 |W| per element) where the unfused one keeps fp32.  Stated
 * tolerances, about 4x the values measured when this was written (printed):
 * loss rel ≤ 2e-4 [4.2e-5], max |dy| / rms residual ≤ 4e-3 [1.0e-3],
 * gradient rel L2 ≤ 1.3e-3 [3.1e-4], every tensor's ≤ 3e-3 [7.1e-4]: a
 * fifth or less of test_bf16_step_against_fp32's bf16-vs-fp32 bounds, which
 * the fused path meets on its own there (measured before W in bf16: loss
 * 2.5e-3, gradient 7.3e-3, worst tensor 9.4e-3; with it, session 9: fused
 * vs unfused loss 2.7e-6, |dy| 9.9e-4, gradient 4.2e-4, worst tensor
 * 1.06e-3; bf16 vs fp32 loss 2.52e-3, gradient 7.42e-3, worst 9.69e-3; and
 * with the node layer's softplus in bf16: 4.35e-5, 1.09e-3, 5.02e-4,
 * 1.20e-3; bf16 vs fp32 2.48e-3, 7.56e-3, 9.94e-3). */
static void test_bf16_fused_step_equals_unfused(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) {
        skip();
        return;
    }
    assert_int_equal(pt_bf16_set_kernel(native), PT_BF16_OK);
    acts.precision = PT_PRECISION_BF16;
    assert_int_equal(pt_schnet_bf16_fused(&acts), 1);
    step f = run(PT_PRECISION_BF16);
    pt_bf16_set_fusion(0);
    assert_int_equal(pt_schnet_bf16_fused(&acts), 0);
    step u = run(PT_PRECISION_BF16);
    pt_bf16_set_fusion(1);
    double res2 = 0.0, dy = 0.0;
    int n_real = 0;
    for (int g = 0; g < batch.cap_graphs; g++) {
        if (batch.graph_id[g] < 0) continue;
        res2 += (u.y[g] - batch.target[g]) * (u.y[g] - batch.target[g]);
        dy = fmax(dy, fabs(f.y[g] - u.y[g]));
        n_real++;
    }
    const double loss_rel = fabs(f.loss - u.loss) / u.loss, y_rel = dy / sqrt(res2 / n_real);
    const double g_rel = rel_l2(f.grads, u.grads, big.n_params);
    double worst = 0.0;
    for (size_t t = 0; t < big.n_tensors; t++) {
        const pt_schnet_tensor *tt = &big.tensors[t];
        worst = fmax(worst, rel_l2(f.grads + tt->offset, u.grads + tt->offset, tt->numel));
    }
    printf("bf16 fused vs unfused: loss rel %.2e, max |dy| / rms residual %.2e, gradient rel "
           "L2 %.2e, worst tensor %.2e\n",
           loss_rel, y_rel, g_rel, worst);
    /* loss rel: the mean of N = 32 squared residuals d_g moves by
     * Σ δ_g (2 d_g + δ_g) / N: ≤ 2 y_rel + y_rel² (3.2e-3 at the measured
     * y_rel) outright, ≈ 2 rms(δ) / (rms(d) √N) ≤ 2 y_rel / √N = 5.7e-4
     * with flipped bf16 roundings' signs independent of d_g's.  Which flip
     * follows ulp-level changes of the unfused path's fp32 softplus (AVX512-
     * BF16 / AMX): c8e298d's 4.35e-5 / 7.78e-6, a correctly rounded one
     * 1.56e-4 / 1.26e-4, session 10's table 1.42e-4 / 2.28e-4, session 11's
     * 1.59e-4 / 2.25e-4, so its bound is 5e-4 (was 2e-4, set at ~4x
     * c8e298d's); y_rel, the per-graph bound, is unchanged (1.6e-3 of 4e-3) */
    assert_true(loss_rel <= 5e-4);
    assert_true(y_rel <= 4e-3);
    assert_true(g_rel <= 1.3e-3);
    assert_true(worst <= 3e-3);
    /* a forward that takes no gradient: the same predictions; the energy
     * arena has no sigma for the fused products to write (NULL: a write
     * would fault) */
    assert_null(acts.block[0].sig1);
    assert_null(acts.block[0].sig2);
    acts.no_grad = 1;
    const double *y = pt_schnet_forward(&big, &acts, &batch);
    acts.no_grad = 0;
    assert_memory_equal(y, f.y, sizeof(double) * (size_t)batch.cap_graphs);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
    step_free(&f);
    step_free(&u);
}

/* The fused node layer: u = ssp(L2 m + c2) stored as bf16 with bf16_ssp.h's
 * softplus (no σ2 kept): each block's u equals its product (the unfused
 * bf16 Linear on the m the block kept, the same bits as the fused product
 * before its epilogue: bf16.h) mapped by pt_bf16_ssp_ref and rounded, bit
 * for bit; the energy arena has no σ2 (NULL) for a step to write. */
static void test_bf16_node_softplus(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) {
        skip();
        return;
    }
    acts.precision = PT_PRECISION_BF16;
    assert_int_equal(pt_schnet_bf16_fused(&acts), 1);
    const int N = batch.cap_nodes, H = big.cfg.hidden, nf = big.cfg.filters;
    const size_t nh = (size_t)N * H;
    for (int t = 0; t < big.cfg.interactions; t++) assert_null(acts.block[t].sig2);
    step s = run(PT_PRECISION_BF16);
    float *v = malloc(nh * sizeof(float));
    assert_non_null(v);
    for (int t = 0; t < big.cfg.interactions; t++) {
        const pt_schnet_block *w = &big.params.block[t];
        const pt_schnet_block_acts *k = &acts.block[t];
        pt_linear_forward(v, k->m, w->conv_lin2_w, w->conv_lin2_b, N, nf, H, 0.0f,
                          PT_PRECISION_BF16);
        const pt_bf16 *uh = (const pt_bf16 *)k->u;
        for (size_t i = 0; i < nh; i++)
            if (uh[i] != pt_bf16_from_float(pt_bf16_ssp_ref(v[i])))
                fail_msg("block %d u[%zu] = %04x, want %04x", t, i, uh[i],
                         pt_bf16_from_float(pt_bf16_ssp_ref(v[i])));
    }
    free(v);
    step_free(&s);
}

/* A node layer wider than one reduction block of the bf16 kernel (H = 300
 * > PT_BF16_KC): du's product cannot take the softplus' backward as its
 * epilogue, so the fused step multiplies by σ̃2 and sums dc2 in passes
 * (schnet_block.c): it runs, and matches the unfused step (fp32 softplus,
 * fp32 W) within test_bf16_fused_step_equals_unfused's bounds. */
static void test_bf16_wide_node_layer(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) {
        skip();
        return;
    }
    pt_schnet_config mc = pt_schnet_config_default();
    mc.hidden = 300;
    pt_schnet wide;
    pt_schnet_acts wa;
    assert_int_equal(pt_schnet_init(&wide, &mc, NULL), 0);
    pt_schnet_init_weights(&wide, 12);
    wide.mean[0] = big.mean[0];
    wide.std[0] = big.std[0];
    assert_int_equal(pt_schnet_acts_init(&wa, &wide, batch.cap_nodes, batch.cap_edges,
                                         batch.cap_graphs, NULL),
                     0);
    wa.precision = PT_PRECISION_BF16;
    assert_int_equal(pt_schnet_bf16_fused(&wa), 1);
    float *g[2];
    double loss[2];
    for (int unfused = 0; unfused <= 1; unfused++) {
        pt_bf16_set_fusion(!unfused);
        pt_schnet_forward(&wide, &wa, &batch);
        loss[unfused] = pt_schnet_loss(&wide, &wa, &batch, 0.0);
        g[unfused] = calloc(wide.n_params, sizeof(float));
        assert_non_null(g[unfused]);
        pt_schnet_backward(&wide, &wa, &batch, g[unfused]);
    }
    pt_bf16_set_fusion(1);
    const double loss_rel = fabs(loss[0] - loss[1]) / loss[1];
    const double g_rel = rel_l2(g[0], g[1], wide.n_params);
    printf("bf16 H = 300, fused vs unfused: loss rel %.2e, gradient rel L2 %.2e\n", loss_rel,
           g_rel);
    assert_true(loss_rel <= 2e-4);
    assert_true(g_rel <= 1.3e-3);
    assert_true(g_rel > 0.0); /* the fused path really ran */
    free(g[0]), free(g[1]);
    pt_schnet_acts_close(&wa);
    pt_schnet_close(&wide);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        NATIVE_TESTS(test_bf16_step_against_fp32),
        NATIVE_TESTS(test_bf16_kernels_agree),
        cmocka_unit_test(test_bf16_amx_and_avx512_agree),
        NATIVE_TESTS(test_bf16_fused_step_equals_unfused),
        cmocka_unit_test(test_bf16_node_softplus),
        cmocka_unit_test(test_bf16_wide_node_layer),
    };
    return cmocka_run_group_tests_name("schnet_bf16", tests, setup_big, teardown_big);
}
