/* model_ref.h — the double-precision pieces every SchNet reference in the
 * unit tests is written with, spelled once:
 *   ssp_ref(x) = ln(1 + e^x) − ln 2   (PyG's shifted softplus, stable form)
 *   sig_ref(x) = 1 / (1 + e^−x)       (its derivative)
 *   ref_tensor(m, θ, fmt, t)          a named parameter tensor inside a
 *                                     double copy θ of m->params_memory
 *   ref_block_at(m, θ, t)             interaction block t's nine tensors
 *   ref_model_fill(m, ...)            the small test model's deterministic
 *                                     weights, atomrefs, mean/std and biases
 * Header-only; include <cmocka.h> and engine/model/schnet.h first where
 * ref_tensor / ref_model_fill are used (they assert). */
#ifndef PT_TESTS_MODEL_REF_H
#define PT_TESTS_MODEL_REF_H

#include <math.h>
#include <stdio.h>

#include "engine/core/rng.h"
#include "engine/model/schnet_ops.h"

/* every helper may go unused in one of the files that include this */
#define REF_FN static __attribute__((unused))

REF_FN double ssp_ref(double x) { return log1p(exp(-fabs(x))) + fmax(x, 0.0) - PT_LN2; }
REF_FN double sig_ref(double x) { return 1.0 / (1.0 + exp(-x)); }

#ifdef PT_SCHNET_H
REF_FN const double *ref_tensor(const pt_schnet *m, const double *theta, const char *fmt, int t)
{
    char name[PT_SCHNET_NAME_MAX];
    snprintf(name, sizeof(name), fmt, t);
    const pt_schnet_tensor *tt = pt_schnet_find_tensor(m, name);
    assert_non_null(tt);
    return theta + tt->offset;
}

/* Interaction block t's parameters in θ, by PyG's names: the filter
 * network mlp.0 (A1 [F,G], a1) and mlp.2 (A2 [F,F], a2), the convolution's
 * lin1 (L1 [F,H], no bias) and lin2 (L2 [H,F], c2), the block's lin (L3
 * [H,H], c3). */
typedef struct ref_block {
    const double *A1, *a1, *A2, *a2, *L1, *L2, *c2, *L3, *c3;
} ref_block;

REF_FN ref_block ref_block_at(const pt_schnet *m, const double *theta, int t)
{
    return (ref_block){
        .A1 = ref_tensor(m, theta, "interactions.%d.mlp.0.weight", t),
        .a1 = ref_tensor(m, theta, "interactions.%d.mlp.0.bias", t),
        .A2 = ref_tensor(m, theta, "interactions.%d.mlp.2.weight", t),
        .a2 = ref_tensor(m, theta, "interactions.%d.mlp.2.bias", t),
        .L1 = ref_tensor(m, theta, "interactions.%d.conv.lin1.weight", t),
        .L2 = ref_tensor(m, theta, "interactions.%d.conv.lin2.weight", t),
        .c2 = ref_tensor(m, theta, "interactions.%d.conv.lin2.bias", t),
        .L3 = ref_tensor(m, theta, "interactions.%d.lin.weight", t),
        .c3 = ref_tensor(m, theta, "interactions.%d.lin.bias", t),
    };
}

/* An initialised model (pt_schnet_init done) gets weights from weight_seed,
 * the atomrefs of H, C, N and O, mean/std of target 0, and uniform [-0.5,
 * 0.5) biases from bias_seed (they are zero after init; values test their
 * paths). */
REF_FN void ref_model_fill(pt_schnet *m, const double hcno[4], uint64_t weight_seed, double mean,
                           double std, uint64_t bias_seed)
{
    double ref[PT_SCHNET_ZROWS] = {0};
    ref[1] = hcno[0];
    ref[6] = hcno[1];
    ref[7] = hcno[2];
    ref[8] = hcno[3];
    pt_schnet_set_atomref(m, 0, ref);
    pt_schnet_init_weights(m, weight_seed);
    m->mean[0] = mean;
    m->std[0] = std;
    pt_rng r;
    pt_rng_init(&r, bias_seed, 0);
    for (size_t t = 0; t < m->n_tensors; t++)
        if (m->tensors[t].ndim == 1)
            for (size_t k = 0; k < m->tensors[t].numel; k++)
                m->params_memory[m->tensors[t].offset + k] = (float)(pt_rng_uniform(&r) - 0.5);
}
#endif

#endif
