/* test_optim.c — Adam, AdamW and gradient clipping against PyTorch's equations.
 *
 * The expected parameters below were computed in double precision from the
 * update torch.optim.Adam / AdamW documents (lr 0.01, betas 0.9/0.999,
 * eps 1e-8), three steps from theta0 with the gradients G[0..2]:
 *   Adam : g += wd*theta;  AdamW: theta *= 1 - lr*wd
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   theta -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)
 * The engine runs in float32, so agreement is asserted to 1e-6. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/train/optim.h"
#include "tests/ref/adam_ref.h"

static const float theta0[4] = {0.5f, -1.0f, 2.0f, 0.0f};
static const float G[3][4] = {
    {0.1f, -0.2f, 0.3f, 1e-3f},
    {-0.05f, 0.4f, 0.3f, 0.0f},
    {0.2f, 0.0f, -0.1f, -2.0f},
};

static void run_three_steps(pt_optim_kind kind, double wd, const double expect[3][4])
{
    pt_optim_params p = pt_optim_defaults(kind);
    p.weight_decay = wd;
    pt_optim opt;
    assert_int_equal(pt_optim_init(&opt, &p, 4), 0);
    float theta[4];
    memcpy(theta, theta0, sizeof theta);
    for (int t = 0; t < 3; t++) {
        pt_optim_step(&opt, theta, G[t], 0.01);
        assert_int_equal(opt.step, t + 1);
        for (int i = 0; i < 4; i++) assert_float_equal(theta[i], expect[t][i], 1e-6);
    }
    pt_optim_close(&opt);
}

static void test_adam_matches_reference(void **state)
{
    (void)state;
    static const double expect[3][4] = {
        {0.490000001, -0.990000000, 1.990000000, -0.009999900},
        {0.487336631, -0.993661036, 1.980000001, -0.016700388},
        {0.480755515, -0.996491026, 1.973943021, -0.010314840},
    };
    run_three_steps(PT_OPTIM_ADAM, 0.0, expect);
}

/* Adam's weight decay is an L2 term inside the gradient, so it passes through
 * the moments (the first step is still lr*sign because |m/sqrt(v)| = 1). */
static void test_adam_l2_weight_decay(void **state)
{
    (void)state;
    static const double expect[3][4] = {
        {0.490000001, -0.990000000, 1.990000000, -0.009999900},
        {0.483349201, -0.990542954, 1.980000527, -0.009473639},
        {0.475223551, -0.989500550, 1.971465865, -0.003085218},
    };
    run_three_steps(PT_OPTIM_ADAM, 0.1, expect);
}

/* AdamW shrinks theta by (1 - lr*wd) before the Adam step: decoupled. */
static void test_adamw_decoupled_weight_decay(void **state)
{
    (void)state;
    static const double expect[3][4] = {
        {0.489500001, -0.989000000, 1.988000000, -0.009999900},
        {0.486347131, -0.991672036, 1.976012001, -0.016690388},
        {0.479279668, -0.993510354, 1.967979009, -0.010288150},
    };
    run_three_steps(PT_OPTIM_ADAMW, 0.1, expect);
}

/* Exempted elements follow plain Adam (the wd 0 reference), the others keep
 * their decay: two parameter groups in one buffer. */
static void test_decay_exemption(void **state)
{
    (void)state;
    static const double adam0[3][4] = {
        {0.490000001, -0.990000000, 1.990000000, -0.009999900},
        {0.487336631, -0.993661036, 1.980000001, -0.016700388},
        {0.480755515, -0.996491026, 1.973943021, -0.010314840},
    };
    static const double adamw[3][4] = {
        {0.489500001, -0.989000000, 1.988000000, -0.009999900},
        {0.486347131, -0.991672036, 1.976012001, -0.016690388},
        {0.479279668, -0.993510354, 1.967979009, -0.010288150},
    };
    static const double adam_l2[3][4] = {
        {0.490000001, -0.990000000, 1.990000000, -0.009999900},
        {0.483349201, -0.990542954, 1.980000527, -0.009473639},
        {0.475223551, -0.989500550, 1.971465865, -0.003085218},
    };
    for (int kind = 0; kind < 2; kind++) {
        pt_optim_params p = pt_optim_defaults(kind ? PT_OPTIM_ADAMW : PT_OPTIM_ADAM);
        p.weight_decay = 0.1;
        pt_optim opt;
        assert_int_equal(pt_optim_init(&opt, &p, 4), 0);
        assert_int_equal(pt_optim_exempt_decay(&opt, 1, 2), 0);   /* elements 1 and 2 */
        float theta[4];
        memcpy(theta, theta0, sizeof theta);
        for (int t = 0; t < 3; t++) {
            pt_optim_step(&opt, theta, G[t], 0.01);
            for (int i = 0; i < 4; i++) {
                double expect = (i == 1 || i == 2) ? adam0[t][i] : kind ? adamw[t][i] : adam_l2[t][i];
                assert_float_equal(theta[i], expect, 1e-6);
            }
        }
        pt_optim_close(&opt);
    }
}

static void test_defaults_are_pytorch(void **state)
{
    (void)state;
    pt_optim_params a = pt_optim_defaults(PT_OPTIM_ADAM);
    pt_optim_params w = pt_optim_defaults(PT_OPTIM_ADAMW);
    assert_float_equal(a.beta1, 0.9, 0);
    assert_float_equal(a.beta2, 0.999, 0);
    assert_float_equal(a.eps, 1e-8, 0);
    assert_float_equal(a.weight_decay, 0.0, 0);
    assert_float_equal(w.weight_decay, 0.01, 0);
}

static void test_reset_restarts_bias_correction(void **state)
{
    (void)state;
    pt_optim_params p = pt_optim_defaults(PT_OPTIM_ADAM);
    pt_optim opt;
    assert_int_equal(pt_optim_init(&opt, &p, 4), 0);
    float a[4], b[4];
    memcpy(a, theta0, sizeof a);
    memcpy(b, theta0, sizeof b);
    pt_optim_step(&opt, a, G[0], 0.01);
    pt_optim_step(&opt, a, G[1], 0.01);
    pt_optim_reset(&opt);
    assert_int_equal(opt.step, 0);
    pt_optim_step(&opt, b, G[2], 0.01);
    /* after a reset the first step moves every coordinate by lr * sign(g)
     * (|m_hat| = sqrt(v_hat)), except where g = 0 */
    for (int i = 0; i < 4; i++) {
        float expect = theta0[i] - (G[2][i] > 0 ? 0.01f : G[2][i] < 0 ? -0.01f : 0.0f);
        assert_float_equal(b[i], expect, 1e-6);
    }
    pt_optim_close(&opt);
}

static void test_clip_scales_to_max_norm(void **state)
{
    (void)state;
    float g[2] = {3.0f, 4.0f};
    double before = pt_grad_clip(g, 2, 1.0);
    assert_float_equal(before, 5.0, 1e-12);
    /* torch: coef = max_norm / (norm + 1e-6) */
    assert_float_equal(g[0], 0.599999880, 1e-7);
    assert_float_equal(g[1], 0.799999840, 1e-7);
    assert_float_equal(pt_grad_norm(g, 2), 1.0, 1e-6);
}

static void test_clip_leaves_small_gradients(void **state)
{
    (void)state;
    float g[3] = {0.1f, -0.2f, 0.2f};
    double before = pt_grad_clip(g, 3, 1.0);
    assert_float_equal(before, 0.3, 1e-7);
    assert_float_equal(g[0], 0.1f, 0);
    assert_float_equal(g[1], -0.2f, 0);
    assert_float_equal(g[2], 0.2f, 0);
}

/* A step on a zero-length buffer is legal (a model with no trainable part)
 * and only counts. */
static void test_empty_buffer(void **state)
{
    (void)state;
    pt_optim_params p = pt_optim_defaults(PT_OPTIM_ADAMW);
    pt_optim opt;
    assert_int_equal(pt_optim_init(&opt, &p, 0), 0);
    pt_optim_step(&opt, NULL, NULL, 0.1);
    assert_int_equal(opt.step, 1);
    assert_float_equal(pt_grad_norm(NULL, 0), 0.0, 0);
    pt_optim_close(&opt);
}

static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Over lengths that leave every vector remainder (and offsets that start
 * off a vector boundary), ten steps with gradients over nine decades, Adam
 * and AdamW, with and without exempt ranges: the same bits as the scalar
 * loop, every element, every step. */
static void test_vectorised_update_is_scalar_bits(void **state)
{
    (void)state;
    static const size_t lens[] = {1, 7, 15, 16, 17, 33, 100, 1001};
    uint32_t seed = 12345;
    for (int kind = 0; kind < 2; kind++) {
        for (int exempt = 0; exempt < 2; exempt++) {
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                const size_t n = lens[li] + 3;   /* 3 leading floats: first = 3 */
                pt_optim_params p = pt_optim_defaults((pt_optim_kind)kind);
                p.weight_decay = 0.05;
                pt_optim opt;
                assert_int_equal(pt_optim_init(&opt, &p, n), 0);
                if (exempt) assert_int_equal(pt_optim_exempt_decay(&opt, 5, n / 3), 0);
                float *pa = malloc(n * sizeof(float)), *pb = malloc(n * sizeof(float));
                float *g = malloc(n * sizeof(float));
                float *mb = calloc(n, sizeof(float)), *vb = calloc(n, sizeof(float));
                for (size_t i = 0; i < n; i++)
                    pa[i] = pb[i] = ((float)lcg(&seed) / 16777216.0f - 0.5f) * 4.0f;
                for (int t = 0; t < 10; t++) {
                    for (size_t i = 0; i < n; i++) {
                        float mag = powf(10.0f, (float)(lcg(&seed) % 10) - 8.0f);
                        g[i] = ((float)lcg(&seed) / 16777216.0f - 0.5f) * mag;
                    }
                    if (t == 3) g[n / 2] = 0.0f;
                    pt_optim_coeffs c = pt_optim_begin(&opt, 1e-3 * (t + 1));
                    pt_optim_update(&opt, &c, pa + 3, g + 3, opt.m + 3, opt.v + 3, 3, n - 3);
                    pt_ref_adam_update(&c, opt.decay_scale ? opt.decay_scale + 3 : NULL, pb + 3,
                                       g + 3, mb + 3, vb + 3, n - 3);
                    assert_memory_equal(pa, pb, n * sizeof(float));
                    assert_memory_equal(opt.m, mb, n * sizeof(float));
                    assert_memory_equal(opt.v, vb, n * sizeof(float));
                }
                free(pa);
                free(pb);
                free(g);
                free(mb);
                free(vb);
                pt_optim_close(&opt);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adam_matches_reference),
        cmocka_unit_test(test_adam_l2_weight_decay),
        cmocka_unit_test(test_adamw_decoupled_weight_decay),
        cmocka_unit_test(test_decay_exemption),
        cmocka_unit_test(test_defaults_are_pytorch),
        cmocka_unit_test(test_reset_restarts_bias_correction),
        cmocka_unit_test(test_clip_scales_to_max_norm),
        cmocka_unit_test(test_clip_leaves_small_gradients),
        cmocka_unit_test(test_empty_buffer),
        cmocka_unit_test(test_vectorised_update_is_scalar_bits),
    };
    return cmocka_run_group_tests_name("optim", tests, NULL, NULL);
}
