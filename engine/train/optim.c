/* optim.c — Adam / AdamW over a flat buffer, torch.optim semantics; see optim.h.
 *
 * The update is one pass over four arrays, vectorised (AVX-512 or AVX2
 * clones, engine/core/simd.h).  gcc vectorises sqrtf only when it need not
 * set errno: the Makefile builds this file with -fno-math-errno (the
 * argument, Adam's v, is never negative).  Every operation stays IEEE-exact
 * as written — vsqrtps and vdivps round like sqrtf and '/', contraction is
 * off (-std=c11) — so every clone gives the bits of the scalar loop. */
#include "engine/train/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/simd.h"

pt_optim_params pt_optim_defaults(pt_optim_kind kind)
{
    pt_optim_params p = {
        .kind = kind,
        .beta1 = 0.9,
        .beta2 = 0.999,
        .eps = 1e-8,
        .weight_decay = kind == PT_OPTIM_ADAMW ? 0.01 : 0.0,
    };
    return p;
}

int pt_optim_init(pt_optim *opt, const pt_optim_params *params, size_t n)
{
    memset(opt, 0, sizeof(*opt));
    opt->p = *params;
    opt->n = n;
    size_t bytes = (n ? n : 1) * sizeof(float);
    opt->m = calloc(1, bytes);
    opt->v = calloc(1, bytes);
    if (!opt->m || !opt->v) {
        pt_optim_close(opt);
        return -1;
    }
    return 0;
}

void pt_optim_close(pt_optim *opt)
{
    free(opt->m);
    free(opt->v);
    free(opt->decay_scale);
    memset(opt, 0, sizeof(*opt));
}

int pt_optim_exempt_decay(pt_optim *opt, size_t offset, size_t count)
{
    if (!opt->decay_scale) {
        opt->decay_scale = malloc((opt->n ? opt->n : 1) * sizeof(float));
        if (!opt->decay_scale) return -1;
        for (size_t i = 0; i < opt->n; i++) opt->decay_scale[i] = 1.0f;
    }
    for (size_t i = offset; i < offset + count && i < opt->n; i++) opt->decay_scale[i] = 0.0f;
    return 0;
}

void pt_optim_reset(pt_optim *opt)
{
    opt->step = 0;
    if (opt->n) {
        memset(opt->m, 0, opt->n * sizeof(float));
        memset(opt->v, 0, opt->n * sizeof(float));
    }
}

/* torch.optim.Adam (single-tensor path), per element, step t:
 *   g      = grad + lambda*theta                 (Adam only)
 *   theta *= 1 - lr*lambda                       (AdamW only)
 *   m      = beta1*m + (1-beta1)*g
 *   v      = beta2*v + (1-beta2)*g^2
 *   theta -= lr/(1-beta1^t) * m / (sqrt(v)/sqrt(1-beta2^t) + eps)
 * The scalar factors are formed in double and applied in float, as torch does
 * for float32 parameters.  With a decay_scale, lambda is lambda * scale[i]
 * (0 or 1), i.e. two parameter groups. */
pt_optim_coeffs pt_optim_begin(pt_optim *opt, double lr)
{
    pt_optim_coeffs c = pt_optim_coeffs_next(opt, lr);
    opt->step++;
    return c;
}

pt_optim_coeffs pt_optim_coeffs_next(const pt_optim *opt, double lr)
{
    const double t = (double)(opt->step + 1);
    const int adamw = opt->p.kind == PT_OPTIM_ADAMW;
    return (pt_optim_coeffs){
        .b1 = (float)opt->p.beta1,
        .b2 = (float)opt->p.beta2,
        .one_b1 = (float)(1.0 - opt->p.beta1),
        .one_b2 = (float)(1.0 - opt->p.beta2),
        .step_size = (float)(lr / (1.0 - pow(opt->p.beta1, t))),
        .inv_bc2_sqrt = (float)(1.0 / sqrt(1.0 - pow(opt->p.beta2, t))),
        .eps = (float)opt->p.eps,
        .l2 = adamw ? 0.0f : (float)opt->p.weight_decay,
        .decay = adamw ? (float)(1.0 - lr * opt->p.weight_decay) : 1.0f,
    };
}

/* The loop of pt_optim_update; scale NULL means every element decays (s = 1,
 * which the compiler folds: x·1 and 1 + (decay − 1) are exact). */
static inline __attribute__((always_inline)) void adam_run(const pt_optim_coeffs *c,
                                                           float *restrict param,
                                                           const float *restrict grad,
                                                           float *restrict m, float *restrict v,
                                                           const float *restrict scale, size_t n)
{
    const float b1 = c->b1, b2 = c->b2, one_b1 = c->one_b1, one_b2 = c->one_b2;
    const float step_size = c->step_size, inv_bc2_sqrt = c->inv_bc2_sqrt, eps = c->eps;
    const float l2 = c->l2, decay = c->decay;
    for (size_t i = 0; i < n; i++) {
        float s = scale ? scale[i] : 1.0f;
        float theta = param[i] * (1.0f + s * (decay - 1.0f));
        float g = grad[i] + s * l2 * param[i];
        float mi = b1 * m[i] + one_b1 * g;
        float vi = b2 * v[i] + one_b2 * g * g;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) * inv_bc2_sqrt + eps;
        param[i] = theta - step_size * mi / denom;
    }
}

PT_SIMD_CLONES
void pt_optim_update(const pt_optim *opt, const pt_optim_coeffs *c, float *param,
                     const float *grad, float *m, float *v, size_t first, size_t n)
{
    if (opt->decay_scale) adam_run(c, param, grad, m, v, opt->decay_scale + first, n);
    else adam_run(c, param, grad, m, v, NULL, n);
}

void pt_optim_step(pt_optim *opt, float *param, const float *grad, double lr)
{
    pt_optim_coeffs c = pt_optim_begin(opt, lr);
    pt_optim_update(opt, &c, param, grad, opt->m, opt->v, 0, opt->n);
}

double pt_grad_norm(const float *grad, size_t n)
{
    return sqrt(pt_grad_sumsq(grad, n));
}

double pt_grad_sumsq(const float *grad, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)grad[i] * grad[i];
    return s;
}

float pt_grad_clip_coef(double norm, double max_norm)
{
    double coef = max_norm / (norm + 1e-6);
    return coef < 1.0 ? (float)coef : 1.0f;
}

double pt_grad_clip(float *grad, size_t n, double max_norm)
{
    double norm = pt_grad_norm(grad, n);
    float c = pt_grad_clip_coef(norm, max_norm);
    if (c != 1.0f)
        for (size_t i = 0; i < n; i++) grad[i] *= c;
    return norm;
}
