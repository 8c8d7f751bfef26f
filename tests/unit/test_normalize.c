/* test_normalize.c — atomref least squares and mean/std statistics on
 * synthetic datasets whose answers are known in closed form. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/normalize.h"
#include "engine/core/rng.h"

/* A synthetic dataset: structures given by their element lists. */
typedef struct synth {
    pt_dataset ds;
    uint64_t off[512];
    uint8_t z[512 * 40];
    double y[512];
    uint64_t line[512];
    char names[1][PT_KEY_MAX];
} synth;

static void synth_begin(synth *s)
{
    memset(s, 0, sizeof(*s));
    strcpy(s->names[0], "energy");
    s->ds.atom_offset = s->off;
    s->ds.z = s->z;
    s->ds.targets = s->y;
    s->ds.n_targets = 1;
    s->ds.target_names = (const char (*)[PT_KEY_MAX])s->names;
    s->ds.source_line = s->line;
}

static void synth_add(synth *s, const uint8_t *z, int natoms, double y)
{
    uint32_t k = s->ds.n_structs++;
    memcpy(s->z + s->off[k], z, (size_t)natoms);
    s->off[k + 1] = s->off[k] + (uint64_t)natoms;
    s->y[k] = y;
    s->line[k] = 1 + 10 * (uint64_t)k;
    s->ds.n_atoms = s->off[k + 1];
}

static uint32_t ids_all[512];

static int setup(void **state)
{
    (void)state;
    for (uint32_t i = 0; i < 512; i++) ids_all[i] = i;
    return 0;
}

static void test_none_is_identity(void **state)
{
    (void)state;
    synth *s = calloc(1, sizeof *s);
    synth_begin(s);
    const uint8_t z[2] = {1, 8};
    synth_add(s, z, 2, -5.0);
    pt_norm nm;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_norm_fit(&nm, PT_NORM_NONE, 1, &s->ds, 0, ids_all, 1, &errs), 0);
    assert_float_equal(nm.mean, 0.0, 0);
    assert_float_equal(nm.std, 1.0, 0);
    assert_float_equal(pt_norm_baseline(&nm, &s->ds, 0), 0.0, 0);
    pt_errors_close(&errs);
    free(s);
}

/* per-atom energies 2, 1, 3 -> mean 2, sample std 1; structure-level 2, 2, 9
 * -> mean 13/3, sample std sqrt(49/3 * ... ) computed below. */
static void test_mean_std_per_atom_and_per_structure(void **state)
{
    (void)state;
    synth *s = calloc(1, sizeof *s);
    synth_begin(s);
    const uint8_t z[3] = {6, 1, 1};
    synth_add(s, z, 1, 2.0);
    synth_add(s, z, 2, 2.0);
    synth_add(s, z, 3, 9.0);
    pt_norm nm;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_norm_fit(&nm, PT_NORM_MEAN_STD, 1, &s->ds, 0, ids_all, 3, &errs), 0);
    assert_float_equal(nm.mean, 2.0, 1e-12);
    assert_float_equal(nm.std, 1.0, 1e-12);
    assert_float_equal(pt_norm_baseline(&nm, &s->ds, 2), 6.0, 1e-12);   /* 3 atoms * 2 */

    assert_int_equal(pt_norm_fit(&nm, PT_NORM_MEAN_STD, 0, &s->ds, 0, ids_all, 3, &errs), 0);
    double mean = 13.0 / 3.0;
    double var = ((2 - mean) * (2 - mean) * 2 + (9 - mean) * (9 - mean)) / 2.0;
    assert_float_equal(nm.mean, mean, 1e-12);
    assert_float_equal(nm.std, sqrt(var), 1e-12);
    assert_float_equal(pt_norm_baseline(&nm, &s->ds, 2), mean, 1e-12);
    pt_errors_close(&errs);
    free(s);
}

/* 300 molecules of random H/C/N/O composition with energies from known
 * references plus N(0, 0.01) noise per structure.  Least squares recovers the
 * references to within a few standard errors (each coefficient's error is
 * about 0.01 / sqrt(300 * var(count)) < 0.002; 0.01 is a safe bound). */
static void test_atomref_recovers_references(void **state)
{
    (void)state;
    synth *s = calloc(1, sizeof *s);
    synth_begin(s);
    const double ref[4] = {-13.6, -1029.8, -1485.3, -2042.6};
    const uint8_t elem[4] = {1, 6, 7, 8};
    pt_rng rng;
    pt_rng_init(&rng, 7, 0);
    for (int k = 0; k < 300; k++) {
        uint8_t z[40];
        int n = 0;
        double y = 0.01 * pt_rng_normal(&rng);
        for (int e = 0; e < 4; e++) {
            int c = (int)pt_rng_below(&rng, e == 0 ? 12 : 6) + (e < 2);
            for (int i = 0; i < c; i++) z[n++] = elem[e];
            y += c * ref[e];
        }
        synth_add(s, z, n, y);
    }
    pt_norm nm;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_norm_fit(&nm, PT_NORM_ATOMREF, 1, &s->ds, 0, ids_all, 300, &errs), 0);
    for (int e = 0; e < 4; e++) assert_float_equal(nm.atomref[elem[e]], ref[e], 0.01);
    assert_float_equal(nm.atomref[9], 0.0, 0);      /* fluorine absent: 0 */
    /* the per-atom residual is of the order of the noise */
    assert_true(fabs(nm.mean) < 0.01);
    assert_true(nm.std > 1e-5 && nm.std < 0.01);
    /* baseline reproduces the noiseless energy of a structure closely */
    double y0 = s->y[0];
    assert_float_equal(pt_norm_baseline(&nm, &s->ds, 0), y0, 0.1);
    pt_errors_close(&errs);
    free(s);
}

/* Water clusters: n_H = 2 n_O in every structure, so the counts are
 * collinear.  With E = -10 per molecule the minimum-norm solution of
 * x_O + 2 x_H = -10 is (x_O, x_H) = (-2, -4); the residual is exactly zero,
 * so std falls back to 1. */
static void test_atomref_collinear_minimum_norm(void **state)
{
    (void)state;
    synth *s = calloc(1, sizeof *s);
    synth_begin(s);
    for (int w = 1; w <= 10; w++) {
        uint8_t z[30];
        for (int i = 0; i < w; i++) {
            z[3 * i] = 8;
            z[3 * i + 1] = 1;
            z[3 * i + 2] = 1;
        }
        synth_add(s, z, 3 * w, -10.0 * w);
    }
    pt_norm nm;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_norm_fit(&nm, PT_NORM_ATOMREF, 1, &s->ds, 0, ids_all, 10, &errs), 0);
    assert_float_equal(nm.atomref[8], -2.0, 1e-9);
    assert_float_equal(nm.atomref[1], -4.0, 1e-9);
    assert_float_equal(nm.mean, 0.0, 1e-9);
    assert_float_equal(nm.std, 1.0, 0);
    pt_errors_close(&errs);
    free(s);
}

/* Statistics come from the listed (training) structures only. */
static void test_only_listed_structures_count(void **state)
{
    (void)state;
    synth *s = calloc(1, sizeof *s);
    synth_begin(s);
    const uint8_t z[1] = {1};
    synth_add(s, z, 1, 1.0);
    synth_add(s, z, 1, 1e6);      /* not in the training ids */
    synth_add(s, z, 1, 3.0);
    const uint32_t train[2] = {0, 2};
    pt_norm nm;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_norm_fit(&nm, PT_NORM_MEAN_STD, 1, &s->ds, 0, train, 2, &errs), 0);
    assert_float_equal(nm.mean, 2.0, 1e-12);
    assert_float_equal(nm.std, sqrt(2.0), 1e-12);
    pt_errors_close(&errs);
    free(s);
}

static void test_error_missing_target(void **state)
{
    (void)state;
    synth *s = calloc(1, sizeof *s);
    synth_begin(s);
    const uint8_t z[1] = {1};
    synth_add(s, z, 1, 1.0);
    synth_add(s, z, 1, NAN);
    pt_norm nm;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_norm_fit(&nm, PT_NORM_ATOMREF, 1, &s->ds, 0, ids_all, 2, &errs), -1);
    assert_int_equal(errs.items[0].line, 11);
    assert_string_equal(errs.items[0].field, "energy");
    assert_string_equal(errs.items[0].message, "structure 1 has no value for the target");
    pt_errors_close(&errs);
    free(s);
}

static void test_error_no_structures(void **state)
{
    (void)state;
    synth *s = calloc(1, sizeof *s);
    synth_begin(s);
    pt_norm nm;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_norm_fit(&nm, PT_NORM_MEAN_STD, 1, &s->ds, 0, ids_all, 0, &errs), -1);
    assert_string_equal(errs.items[0].field, "training.normalize");
    assert_string_equal(errs.items[0].message, "no training structures to fit on");
    pt_errors_close(&errs);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none_is_identity),
        cmocka_unit_test(test_mean_std_per_atom_and_per_structure),
        cmocka_unit_test(test_atomref_recovers_references),
        cmocka_unit_test(test_atomref_collinear_minimum_norm),
        cmocka_unit_test(test_only_listed_structures_count),
        cmocka_unit_test(test_error_missing_target),
        cmocka_unit_test(test_error_no_structures),
    };
    return cmocka_run_group_tests_name("normalize", tests, setup, NULL);
}
