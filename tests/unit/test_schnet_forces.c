/* test_schnet_forces.c — forces, stress and the gradient of the combined
 * loss (engine/model/schnet_forces.c) against finite differences, on tiny
 * models over molecules, a slab (periodic in x and y) and triclinic cells
 * shorter than the cutoff (tests/unit/forces_fixture.h):
 *   - the float64 dual-number reference's forces equal central differences
 *     of its energy in the positions, and its stress central differences
 *     under a strain of positions and cell (so the reference itself, and the
 *     sign convention σ = (1/V) ∂E/∂ε, are checked without trusting it);
 *   - packtrain's float forces and stress equal the reference's;
 *   - the parameter gradient of L = w_E MSE(E) + w_F MSE(F) + w_S MSE(σ)
 *     equals central differences of the reference loss, for sum and mean
 *     readouts, and the loss and its parts equal the reference's.
 *
 * Tolerances.  Reference vs its own differences: float64 central
 * differences with h = 1e-5 are exact to ~h²·E''' + 1e-16/h ≈ 1e-10 of O(1)
 * values; 1e-7 of the largest value is the bound.  packtrain vs reference:
 * packtrain runs in float (ε = 6e-8) through ~10 layers forward and as many
 * back, sums of ≤ 60 terms (edges of the 1-atom cell), so ~1e-5 of the
 * magnitudes summed; forces are sums of large per-edge terms that cancel,
 * so the bound is relative to the largest per-structure force or stress:
 * |Δ| ≤ 2e-5·max.  Loss gradient: the reference loss is differenced with
 * h = 1e-6 (≈1e-9 relative); packtrain's gradient goes through three passes
 * (~30 layers), so |g − fd| ≤ 1e-4·|fd| + 2e-5·max|fd| over the sampled
 * entries.  Each test prints its worst error as a fraction of its bound. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/forces_fixture.h"

/* all five structures: the two molecules share pack 0 (filled to its last
 * node slot, so its padding edges are self-loops on a real atom), the slab
 * and the 2-atom cell pack 1, the 1-atom cell pack 2 */
static const int all_packs[5] = {0, 0, 1, 1, 2};
static const int all_in[5] = {1, 1, 1, 1, 1};
static const pt_pack_limits fx_limits = {.max_nodes = 7, .max_edges = 200, .max_graphs = 3};

typedef struct ffix {
    pt_schnet m;
    pt_schnet_acts a;
    fx_batch fb;
    float *grads;
} ffix;

static void ffix_open(ffix *f, pt_readout readout, pt_schnet_mode mode)
{
    fx_make_structs();
    fx_make_model(&f->m, readout);
    fx_batch_build(&f->fb, all_packs, 3, fx_limits, fx_cutoff);
    assert_int_equal(pt_schnet_acts_init_mode(&f->a, &f->m, f->fb.b.cap_nodes, f->fb.b.cap_edges,
                                              f->fb.b.cap_graphs, mode, NULL), 0);
    assert_int_equal(pt_schnet_batch_check(&f->m, &f->a, &f->fb.b, NULL), 0);
    f->grads = calloc(f->m.n_params, sizeof(float));
}

static void ffix_close(ffix *f)
{
    free(f->grads);
    fx_batch_free(&f->fb);
    pt_schnet_acts_close(&f->a);
    pt_schnet_close(&f->m);
}

/* ---- the reference against its own finite differences ----------------------------- */

static void test_reference_forces_and_stress_are_derivatives(void **state)
{
    (void)state;
    fx_make_structs();
    pt_schnet m;
    fx_make_model(&m, PT_READOUT_SUM);
    double *theta = fx_theta(&m);
    const double h = 1e-5;
    for (int k = 0; k < fx_n_structs; k++) {
        fstruct s = fx_structs[k];
        fedges el;
        fx_edges(&s, fx_cutoff, &el);
        double y, f[FX_MAXA][3], sg[9], yp, ym, mx = 0.0;
        fx_ref_forces(&m, theta, &s, &y, f, sg);
        double fd[FX_MAXA][3];
        for (int i = 0; i < s.n; i++)
            for (int x = 0; x < 3; x++) {
                double keep = s.pos[i][x];
                s.pos[i][x] = keep + h;
                fx_ref_energy(&m, theta, &s, &el, NULL, &yp, NULL);
                s.pos[i][x] = keep - h;
                fx_ref_energy(&m, theta, &s, &el, NULL, &ym, NULL);
                s.pos[i][x] = keep;
                fd[i][x] = -(yp - ym) / (2 * h);
                mx = fmax(mx, fabs(fd[i][x]));
            }
        for (int i = 0; i < s.n; i++)
            for (int x = 0; x < 3; x++)
                if (fabs(f[i][x] - fd[i][x]) > 1e-7 * (mx + 1.0))
                    fail_msg("structure %d atom %d: dual force %.12g, -dE/dr %.12g", k, i,
                             f[i][x], fd[i][x]);
        /* Newton's third law: the forces of a structure sum to zero */
        for (int x = 0; x < 3; x++) {
            double tot = 0.0;
            for (int i = 0; i < s.n; i++) tot += f[i][x];
            assert_true(fabs(tot) <= 1e-12 * (mx + 1.0));
        }
        if (!fx_fully_periodic(&s)) continue;
        /* strain positions and cell: r → r (I + h e_a e_bᵀ), E' by differences */
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) {
                double e2[2];
                for (int sign = 0; sign < 2; sign++) {
                    fstruct t = s;
                    double hh = sign ? -h : h;
                    for (int i = 0; i < t.n; i++) t.pos[i][b] += hh * s.pos[i][a];
                    for (int r = 0; r < 3; r++) t.cell[r][b] += hh * s.cell[r][a];
                    fx_ref_energy(&m, theta, &t, &el, NULL, &e2[sign], NULL);
                }
                double want = (e2[0] - e2[1]) / (2 * h) / fx_volume(&s);
                if (fabs(sg[3 * a + b] - want) > 1e-7 * (fabs(want) + 1e-3))
                    fail_msg("structure %d stress[%d][%d]: dual %.12g, (1/V) dE/de %.12g", k, a,
                             b, sg[3 * a + b], want);
            }
        /* a rotation-invariant energy has a symmetric stress */
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < a; b++)
                assert_true(fabs(sg[3 * a + b] - sg[3 * b + a]) <= 1e-12 + 1e-9 * fabs(sg[3 * a + b]));
    }
    free(theta);
    pt_schnet_close(&m);
}

/* ---- packtrain against the reference ---------------------------------------------- */

static void check_forces(pt_readout readout, int static_shapes)
{
    ffix f;
    ffix_open(&f, readout, PT_SCHNET_FORCES);
    f.a.static_shapes = static_shapes;
    const double *y = pt_schnet_forward(&f.m, &f.a, &f.fb.b);
    pt_schnet_forces(&f.m, &f.a, &f.fb.b);
    double *theta = fx_theta(&f.m), worst = 0.0;
    for (int k = 0; k < fx_n_structs; k++) {
        const fstruct *s = &fx_structs[k];
        double yr, fr[FX_MAXA][3], sr[9], fmx = 0.0, smx = 0.0;
        fx_ref_forces(&f.m, theta, s, &yr, fr, sr);
        int slot = f.fb.slot[k], n0 = f.fb.first_node[k];
        if (fabs(y[slot] - yr) > 2e-5 * (1.0 + fabs(yr)))
            fail_msg("structure %d: energy %.9g, reference %.9g", k, y[slot], yr);
        for (int i = 0; i < s->n; i++)
            for (int x = 0; x < 3; x++) fmx = fmax(fmx, fabs(fr[i][x]));
        for (int i = 0; i < s->n; i++)
            for (int x = 0; x < 3; x++) {
                double got = f.a.force[3 * (size_t)(n0 + i) + x], tol = 2e-5 * fmx + 1e-7;
                worst = fmax(worst, fabs(got - fr[i][x]) / tol);
                if (fabs(got - fr[i][x]) > tol)
                    fail_msg("structure %d atom %d axis %d: force %.9g, reference %.9g", k, i, x,
                             got, fr[i][x]);
            }
        for (int q = 0; q < 9; q++) smx = fmax(smx, fabs(sr[q]));
        for (int q = 0; q < 9; q++) {
            double got = f.a.stress[9 * (size_t)slot + q], tol = 2e-5 * smx + 1e-9;
            if (!fx_fully_periodic(s)) {
                assert_true(got == 0.0);
                continue;
            }
            worst = fmax(worst, fabs(got - sr[q]) / tol);
            if (fabs(got - sr[q]) > tol)
                fail_msg("structure %d: stress[%d] %.9g, reference %.9g", k, q, got, sr[q]);
        }
    }
    /* padding nodes and graph slots get nothing */
    for (int i = 0; i < f.fb.b.cap_nodes; i++)
        if (f.fb.b.node_graph[i] < 0)
            for (int x = 0; x < 3; x++) assert_true(f.a.force[3 * (size_t)i + x] == 0.0);
    /* the 1-atom cell only has edges to its own images: no force */
    for (int x = 0; x < 3; x++) assert_true(f.a.force[3 * (size_t)f.fb.first_node[4] + x] == 0.0);
    print_message("forces and stress: worst error %.3f of tolerance\n", worst);
    free(theta);
    ffix_close(&f);
}

static void test_forces_sum(void **state)
{
    (void)state;
    check_forces(PT_READOUT_SUM, 0);
}

static void test_forces_mean(void **state)
{
    (void)state;
    check_forces(PT_READOUT_MEAN, 0);
}

static void test_forces_static_shapes(void **state)
{
    (void)state;
    check_forces(PT_READOUT_SUM, 1);
}

/* The gradient of the combined loss: every tensor, up to 12 sampled entries. */
static void check_loss_gradient(pt_readout readout, pt_schnet_loss_weights w)
{
    ffix f;
    ffix_open(&f, readout, PT_SCHNET_FORCES_TRAIN);
    pt_schnet_forward(&f.m, &f.a, &f.fb.b);
    pt_schnet_forces(&f.m, &f.a, &f.fb.b);
    pt_schnet_loss_parts parts, ref_parts;
    double loss = pt_schnet_loss_forces(&f.m, &f.a, &f.fb.b, &w, NULL, &parts);
    pt_schnet_backward_forces(&f.m, &f.a, &f.fb.b, f.grads);
    double *theta = fx_theta(&f.m);
    double lref = fx_ref_loss(&f.m, theta, all_in, &w, &ref_parts);
    if (fabs(loss - lref) > 1e-4 * lref)
        fail_msg("loss %.9g, reference %.9g", loss, lref);
    /* a term of weight 0 is not evaluated (schnet.h) */
    assert_true(w.energy ? fabs(parts.energy - ref_parts.energy) <= 1e-4 * ref_parts.energy
                         : parts.energy == 0.0);
    assert_true(w.forces ? fabs(parts.forces - ref_parts.forces) <= 1e-4 * ref_parts.forces
                         : parts.forces == 0.0);
    assert_true(w.stress ? fabs(parts.stress - ref_parts.stress) <= 1e-4 * ref_parts.stress
                         : parts.stress == 0.0);

    pt_rng r;
    pt_rng_init(&r, 4, 0);
    enum { MAXS = 400 };
    size_t idx[MAXS], ns = 0;
    double fd[MAXS], mx = 0.0;
    for (size_t t = 0; t < f.m.n_tensors; t++) {
        const pt_schnet_tensor *tt = &f.m.tensors[t];
        size_t take = tt->numel <= 12 ? tt->numel : 12;
        for (size_t s = 0; s < take; s++) {
            size_t k = tt->numel <= 12 ? s : (size_t)pt_rng_below(&r, tt->numel);
            if (!strcmp(tt->name, "embedding.weight") || !strcmp(tt->name, "atomref.weight")) {
                static const int rows[5] = {0, 1, 6, 7, 8};
                int cols = (int)(tt->numel / PT_SCHNET_ZROWS);
                k = (size_t)rows[s % 5] * cols + (size_t)(s / 5) % cols;
            }
            idx[ns++] = tt->offset + k;
        }
    }
    for (size_t s = 0; s < ns; s++) {
        double keep = theta[idx[s]], h = 1e-6;
        theta[idx[s]] = keep + h;
        double lp = fx_ref_loss(&f.m, theta, all_in, &w, NULL);
        theta[idx[s]] = keep - h;
        double lm = fx_ref_loss(&f.m, theta, all_in, &w, NULL);
        theta[idx[s]] = keep;
        fd[s] = (lp - lm) / (2 * h);
        mx = fmax(mx, fabs(fd[s]));
    }
    double worst = 0.0;
    for (size_t s = 0; s < ns; s++) {
        double g = f.grads[idx[s]], tol = 1e-4 * fabs(fd[s]) + 2e-5 * mx;
        worst = fmax(worst, fabs(g - fd[s]) / tol);
        if (fabs(g - fd[s]) > tol) {
            const char *name = "?";
            for (size_t t = 0; t < f.m.n_tensors; t++)
                if (idx[s] >= f.m.tensors[t].offset) name = f.m.tensors[t].name;
            fail_msg("%s: analytic %.9g vs finite difference %.9g (tol %.3g)", name, g, fd[s],
                     tol);
        }
    }
    print_message("%zu entries, loss %.6g (E %.4g F %.4g S %.4g): worst %.3f of tolerance\n", ns,
                  loss, parts.energy, parts.forces, parts.stress, worst);
    for (int c = 0; c < f.m.cfg.hidden; c++) assert_true(f.grads[c] == 0.0f);
    free(theta);
    ffix_close(&f);
}

static void test_loss_gradient_sum(void **state)
{
    (void)state;
    /* weights that make the three terms comparable (E ≈ 130, F ≈ 0.06, σ ≈ 6e-4) */
    check_loss_gradient(PT_READOUT_SUM, (pt_schnet_loss_weights){1.0, 2000.0, 2e5});
}

static void test_loss_gradient_mean(void **state)
{
    (void)state;
    check_loss_gradient(PT_READOUT_MEAN, (pt_schnet_loss_weights){0.5, 700.0, 4e4});
}

/* forces alone (no energy term) and energy alone through the force path */
static void test_loss_gradient_single_terms(void **state)
{
    (void)state;
    check_loss_gradient(PT_READOUT_SUM, (pt_schnet_loss_weights){0.0, 1.0, 0.0});
    check_loss_gradient(PT_READOUT_SUM, (pt_schnet_loss_weights){0.0, 0.0, 1.0});
    check_loss_gradient(PT_READOUT_SUM, (pt_schnet_loss_weights){1.0, 0.0, 0.0});
}

/* the energy term per atom (NequIP's PerAtomMSELoss), alone and with forces */
static void test_loss_gradient_per_atom(void **state)
{
    (void)state;
    check_loss_gradient(PT_READOUT_SUM, (pt_schnet_loss_weights){1.0, 0.0, 0.0, 1});
    check_loss_gradient(PT_READOUT_SUM, (pt_schnet_loss_weights){3.0, 2000.0, 0.0, 1});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_forces_and_stress_are_derivatives),
        cmocka_unit_test(test_forces_sum),
        cmocka_unit_test(test_forces_mean),
        cmocka_unit_test(test_forces_static_shapes),
        cmocka_unit_test(test_loss_gradient_sum),
        cmocka_unit_test(test_loss_gradient_mean),
        cmocka_unit_test(test_loss_gradient_single_terms),
        cmocka_unit_test(test_loss_gradient_per_atom),
    };
    return cmocka_run_group_tests_name("schnet_forces", tests, NULL, NULL);
}
