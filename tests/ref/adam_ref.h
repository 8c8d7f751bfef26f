/* adam_ref.h — Adam / AdamW's update as engine/train/optim.h states it, one
 * element at a time in scalar float, written apart from optim.c (the code it
 * checks and measures): the oracle of tests/unit/test_optim.c (the
 * vectorised clones must give these bits) and the scalar peer of
 * bench/elementwise_rate.c (the update before it was vectorised).
 * Header-only; include engine/train/optim.h first.
 *
 * Per element, s = 1 or the decay scale (0 for exempt elements):
 *   θ' = θ (1 + s (decay − 1)),  g = ∇ + s l2 θ
 *   m = β1 m + (1 − β1) g,  v = β2 v + (1 − β2) g²
 *   θ = θ' − step_size m / (√v inv_bc2_sqrt + eps)
 * gcc is told not to vectorise it, so it stays the scalar loop whichever
 * flags the caller builds with (-std=c11: no FMA contraction). */
#ifndef PT_TESTS_ADAM_REF_H
#define PT_TESTS_ADAM_REF_H

#include <math.h>
#include <stddef.h>

__attribute__((noinline, optimize("no-tree-vectorize"))) static void
pt_ref_adam_update(const pt_optim_coeffs *c, const float *scale, float *param, const float *grad,
                   float *m, float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float s = scale ? scale[i] : 1.0f;
        float theta = param[i] * (1.0f + s * (c->decay - 1.0f));
        float g = grad[i] + s * c->l2 * param[i];
        m[i] = c->b1 * m[i] + c->one_b1 * g;
        v[i] = c->b2 * v[i] + c->one_b2 * g * g;
        float denom = sqrtf(v[i]) * c->inv_bc2_sqrt + c->eps;
        param[i] = theta - c->step_size * m[i] / denom;
    }
}

#endif
