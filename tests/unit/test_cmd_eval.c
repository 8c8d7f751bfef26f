/* test_cmd_eval.c — `packtrain eval` run in-process on datasets ingested
 * from tests/data: the JSON it prints is self-consistent (loss, MAE, RMSE
 * from the predictions; with --forces-weight the forces of every atom, the
 * loss from its parts, force MAE and RMSE from the forces and the labels),
 * does not depend on how structures are grouped into batches, the gradient
 * file names every parameter tensor, and each error path prints its message.
 * (The comparison with PyTorch autograd is tests/torch/run.sh; forces
 * against finite differences test_schnet_forces.c.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/data/dataset.h"
#include "engine/model/schnet.h"
#include "server/cli/commands.h"
#include "tests/unit/cmd_fixture.h"

static char dir[64], ptd[128], wptd[128], model[128];

static int setup(void **state)
{
    (void)state;
    if (tfx_mkdtemp(dir, sizeof dir, "eval_test")) return -1;
    snprintf(ptd, sizeof(ptd), "%s/q.ptd", dir);
    snprintf(model, sizeof(model), "%s/m.safetensors", dir);
    if (tfx_ingest("tests/data/schnet_qm9_32.extxyz", ptd)) return -1;
    /* water clusters with TIP4P forces */
    snprintf(wptd, sizeof(wptd), "%s/w.ptd", dir);
    if (tfx_ingest("tests/data/schnet_water_6.extxyz", wptd)) return -1;
    pt_schnet m;
    pt_schnet_config c = pt_schnet_config_default();
    c.hidden = 16;
    c.filters = 12;
    c.interactions = 2;
    c.gaussians = 8;
    c.cutoff = 5.0f;
    if (pt_schnet_init(&m, &c, NULL)) return -1;
    pt_schnet_init_weights(&m, 4);
    m.mean[0] = -400.0; /* per atom, so predictions land near QM9 energies */
    m.std[0] = 10.0;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    int rc = pt_schnet_save(&m, model, &errs);
    pt_errors_close(&errs);
    pt_schnet_close(&m);
    return rc;
}

static int teardown(void **state)
{
    (void)state;
    tfx_rmtree(dir);
    return 0;
}

/* Runs `packtrain eval ARGS...` (NULL-terminated) in this process. */
static int run_eval(char **out, char **err, ...)
{
    va_list ap;
    va_start(ap, err);
    int rc = cfx_runv(pt_cmd_eval, "eval", dir, out, err, ap);
    va_end(ap);
    return rc;
}

static void test_eval_json_is_consistent_and_batch_independent(void **state)
{
    (void)state;
    char *out, *err, grads1[160], grads2[160];
    snprintf(grads1, sizeof(grads1), "%s/g1.json", dir);
    snprintf(grads2, sizeof(grads2), "%s/g2.json", dir);
    assert_int_equal(run_eval(&out, &err, "--model", model, "--data", ptd, "--target", "energy_U0",
                              "--grads", grads1, NULL), 0);
    json_error_t je;
    json_t *a = json_loads(out, 0, &je);
    assert_non_null(a);
    assert_int_equal(json_integer_value(json_object_get(a, "n")), 32);
    assert_string_equal(json_string_value(json_object_get(a, "target")), "energy_U0");
    json_t *preds = json_object_get(a, "predictions");
    assert_int_equal(json_array_size(preds), 32);
    double sse = 0, sae = 0;
    for (size_t i = 0; i < 32; i++) {
        json_t *p = json_array_get(preds, i);
        assert_int_equal(json_integer_value(json_object_get(p, "index")), (json_int_t)i);
        double r = json_real_value(json_object_get(p, "prediction")) -
                   json_real_value(json_object_get(p, "target"));
        sse += r * r;
        sae += fabs(r);
    }
    double loss = json_real_value(json_object_get(a, "loss"));
    assert_true(fabs(loss - sse / 32) <= 1e-12 * loss);
    assert_true(fabs(json_real_value(json_object_get(a, "mae")) - sae / 32) <= 1e-12 * sae);
    assert_true(fabs(json_real_value(json_object_get(a, "rmse")) - sqrt(loss)) <= 1e-12 * loss);
    assert_true(fabs(json_real_value(json_object_get(json_array_get(preds, 0), "target")) -
                     -2170.493149) < 1e-9);
    free(out);
    free(err);

    /* batches of 5 structures: same predictions, loss and gradients */
    assert_int_equal(run_eval(&out, &err, "--model", model, "--data", ptd, "--target", "energy_U0",
                              "--grads", grads2, "--batch-graphs", "5", NULL), 0);
    json_t *b = json_loads(out, 0, &je);
    for (size_t i = 0; i < 32; i++) {
        double ya = json_real_value(json_object_get(json_array_get(preds, i), "prediction"));
        double yb = json_real_value(
            json_object_get(json_array_get(json_object_get(b, "predictions"), i), "prediction"));
        /* float per-atom outputs (ε = 6e-8, |o·std| ≲ 100) summed over ≤ 29 atoms
         * in a different row order: ≤ 3e-4 eV; measured ~1e-5 */
        assert_true(fabs(ya - yb) <= 3e-4);
    }
    json_t *g1 = json_load_file(grads1, 0, &je), *g2 = json_load_file(grads2, 0, &je);
    assert_non_null(g1);
    /* the gradient file prints 9 significant digits (exact for floats) */
    assert_true(fabs(json_real_value(json_object_get(g1, "loss")) - loss) <= 1e-8 * loss);
    json_t *t1 = json_object_get(g1, "grads"), *t2 = json_object_get(g2, "grads");
    assert_int_equal(json_object_size(t1), 1 + 9 * 2 + 4);
    const char *name;
    json_t *v;
    size_t total = 0;
    json_object_foreach(t1, name, v) {
        json_t *w = json_object_get(t2, name);
        assert_non_null(w);
        total += json_array_size(v);
        double mx = 0;
        for (size_t k = 0; k < json_array_size(v); k++)
            mx = fmax(mx, fabs(json_real_value(json_array_get(v, k))));
        for (size_t k = 0; k < json_array_size(v); k++)
            if (fabs(json_real_value(json_array_get(v, k)) - json_real_value(json_array_get(w, k))) >
                1e-5 * mx)
                fail_msg("%s[%zu] differs between batchings", name, k);
    }
    assert_int_equal(total, 100 * 16 + 2 * (8 * 12 + 12 + 144 + 12 + 192 + 192 + 16 + 256 + 16) +
                                8 * 16 + 8 + 8 + 1);
    assert_int_equal(json_array_size(json_object_get(t1, "interactions.1.conv.lin1.weight")), 192);
    json_decref(a);
    json_decref(b);
    json_decref(g1);
    json_decref(g2);
    free(out);
    free(err);
}

static void test_eval_first_n(void **state)
{
    (void)state;
    char *out, *err;
    assert_int_equal(run_eval(&out, &err, "--model", model, "--data", ptd, "--target", "homo",
                              "--n", "3", NULL), 0);
    json_error_t je;
    json_t *a = json_loads(out, 0, &je);
    assert_int_equal(json_integer_value(json_object_get(a, "n")), 3);
    assert_int_equal(json_array_size(json_object_get(a, "predictions")), 3);
    json_decref(a);
    free(out);
    free(err);
}

/* rc and the first line of stderr for one invocation */
static void expect_failure(int want_rc, const char *want_err, ...)
{
    char *out, *err;
    va_list ap;
    va_start(ap, want_err);
    int rc = cfx_runv(pt_cmd_eval, "eval", dir, &out, &err, ap);
    va_end(ap);
    char *nl = strchr(err, '\n');
    if (nl) *nl = 0;
    assert_int_equal(rc, want_rc);
    assert_string_equal(err, want_err);
    free(out);
    free(err);
}

static void test_eval_usage_errors(void **state)
{
    (void)state;
    char *out, *err;
    assert_int_equal(run_eval(&out, &err, "--help", NULL), 0);
    assert_non_null(strstr(out, "usage: packtrain eval --model MODEL.safetensors --data DATA "));
    free(out);
    free(err);
    expect_failure(2, "packtrain eval: --model and --data are required", "--model", model, NULL);
    expect_failure(2, "packtrain eval: --n: '0' is not a count >= 1", "--n", "0", NULL);
    expect_failure(2, "packtrain eval: --batch-graphs: 'x' is not in 1..4096", "--batch-graphs",
                   "x", NULL);
    expect_failure(2, "packtrain eval: unknown or incomplete option '--bogus'", "--bogus", NULL);
    expect_failure(2, "packtrain eval: unexpected argument 'extra'", "--model", model, "extra", NULL);
}

static void test_eval_runtime_errors(void **state)
{
    (void)state;
    char msg[512];
    expect_failure(1, "packtrain eval: --target: the dataset has no key 'nope' (qm9_id, energy_U0, "
                      "energy_U, enthalpy_H, free_energy, homo, lumo, gap, zpve, mu, alpha, cv)",
                   "--model", model, "--data", ptd, "--target", "nope", NULL);
    expect_failure(1, "packtrain eval: --target is needed: the dataset has 12 keys (qm9_id, "
                      "energy_U0, energy_U, enthalpy_H, free_energy, homo, lumo, gap, zpve, mu, "
                      "alpha, cv)",
                   "--model", model, "--data", ptd, NULL);
    snprintf(msg, sizeof(msg), "packtrain eval: --n 33 but %s holds 32 structures", ptd);
    expect_failure(1, msg, "--model", model, "--data", ptd, "--target", "gap", "--n", "33", NULL);
    expect_failure(1, "packtrain eval: /nonexistent.safetensors: cannot open: No such file or directory",
                   "--model", "/nonexistent.safetensors", "--data", ptd, NULL);
    char *out, *err;
    assert_int_equal(run_eval(&out, &err, "--model", model, "--data", "/nonexistent.ptd", NULL), 1);
    assert_non_null(strstr(err, "packtrain eval: /nonexistent.ptd"));
    free(out);
    free(err);
    expect_failure(1, "packtrain eval: /nonexistent/g.json: cannot write: No such file or directory",
                   "--model", model, "--data", ptd, "--target", "gap", "--n", "2", "--grads",
                   "/nonexistent/g.json", NULL);
}

static void test_eval_structure_without_target(void **state)
{
    (void)state;
    char xyz[160], d2[160];
    snprintf(xyz, sizeof(xyz), "%s/two.extxyz", dir);
    snprintf(d2, sizeof(d2), "%s/two.ptd", dir);
    FILE *f = fopen(xyz, "w");
    fputs("2\nenergy=-1.5 gap=2.0\nH 0 0 0\nH 0 0 0.74\n"
          "2\ngap=3.0\nH 0 0 0\nH 0 0 0.75\n", f);
    fclose(f);
    assert_int_equal(tfx_ingest(xyz, d2), 0);
    char msg[512];
    snprintf(msg, sizeof(msg),
             "packtrain eval: %s:5: energy: structure 1 has no value for this key", d2);
    expect_failure(1, msg, "--model", model, "--data", d2, "--target", "energy", NULL);
}

/* --forces-weight: forces of every atom (summing to zero in a molecule's
 * frame), the loss from its parts and weights, force MAE and RMSE from the
 * forces and the labels; nothing depends on the batching. */
static void test_eval_forces_json(void **state)
{
    (void)state;
    char *out[2], *err, gpath[2][160];
    const char *bg[2] = {"1", "4"};
    for (int r = 0; r < 2; r++) {
        snprintf(gpath[r], sizeof(gpath[r]), "%s/fg%d.json", dir, r);
        assert_int_equal(run_eval(&out[r], &err, "--model", model, "--data", wptd, "--target",
                                  "energy", "--forces-weight", "3", "--energy-weight", "0.5",
                                  "--batch-graphs", bg[r], "--grads", gpath[r], NULL), 0);
        free(err);
    }
    json_error_t je;
    json_t *a = json_loads(out[0], 0, &je), *b = json_loads(out[1], 0, &je);
    assert_non_null(a);
    assert_non_null(b);
    pt_dataset ds;
    char emsg[256];
    assert_int_equal(pt_dataset_open(&ds, wptd, emsg, sizeof emsg), 0);
    double le = json_real_value(json_object_get(a, "loss_energy"));
    double lf = json_real_value(json_object_get(a, "loss_forces"));
    double loss = json_real_value(json_object_get(a, "loss"));
    assert_true(fabs(loss - (0.5 * le + 3.0 * lf)) <= 1e-12 * loss);
    assert_true(json_real_value(json_object_get(a, "loss_stress")) == 0.0);
    json_t *w = json_object_get(a, "weights");
    assert_true(json_real_value(json_object_get(w, "forces")) == 3.0);
    json_t *pa = json_object_get(a, "predictions"), *pb = json_object_get(b, "predictions");
    assert_int_equal(json_array_size(pa), ds.n_structs);
    double sse = 0.0, sae = 0.0, ncomp = 0.0;
    for (uint32_t s = 0; s < ds.n_structs; s++) {
        json_t *fa = json_object_get(json_array_get(pa, s), "forces");
        json_t *fb = json_object_get(json_array_get(pb, s), "forces");
        uint32_t na = pt_dataset_natoms(&ds, s);
        assert_int_equal(json_array_size(fa), na);
        assert_null(json_object_get(json_array_get(pa, s), "stress")); /* molecules */
        double tot[3] = {0}, mx = 0.0;
        for (uint32_t i = 0; i < na; i++)
            for (int x = 0; x < 3; x++)
                mx = fmax(mx, fabs(json_real_value(json_array_get(json_array_get(fa, i), x))));
        for (uint32_t i = 0; i < na; i++)
            for (int x = 0; x < 3; x++) {
                double f = json_real_value(json_array_get(json_array_get(fa, i), x));
                double g = json_real_value(json_array_get(json_array_get(fb, i), x));
                double r = f - ds.forces[3 * (ds.atom_offset[s] + i) + x];
                /* other batches, other sgemm blocking: float rounding of the
                 * per-edge terms, relative to the structure's largest force */
                assert_true(fabs(f - g) <= 1e-5 * mx);
                tot[x] += f;
                sse += r * r;
                sae += fabs(r);
                ncomp += 1.0;
            }
        for (int x = 0; x < 3; x++) assert_true(fabs(tot[x]) <= 1e-5 * mx * na);
    }
    assert_true(fabs(lf - sse / ncomp) <= 1e-6 * lf);
    assert_true(fabs(json_real_value(json_object_get(a, "forces_mae")) - sae / ncomp) <=
                1e-9 * sae / ncomp);
    assert_true(fabs(json_real_value(json_object_get(a, "forces_rmse")) - sqrt(sse / ncomp)) <=
                1e-9 * sqrt(sse / ncomp));
    assert_true(fabs(json_real_value(json_object_get(b, "loss")) - loss) <= 1e-6 * loss);
    /* the gradients do not depend on the batching either */
    json_t *ga = json_load_file(gpath[0], 0, &je), *gb = json_load_file(gpath[1], 0, &je);
    json_t *ta = json_object_get(ga, "grads"), *tb = json_object_get(gb, "grads");
    const char *name;
    json_t *v;
    json_object_foreach(ta, name, v) {
        json_t *u = json_object_get(tb, name);
        double mx = 0.0;
        for (size_t k = 0; k < json_array_size(v); k++)
            mx = fmax(mx, fabs(json_real_value(json_array_get(v, k))));
        for (size_t k = 0; k < json_array_size(v); k++)
            if (fabs(json_real_value(json_array_get(v, k)) - json_real_value(json_array_get(u, k))) >
                1e-5 * mx)
                fail_msg("%s[%zu] depends on the batching", name, k);
    }
    json_decref(ga);
    json_decref(gb);
    pt_dataset_close(&ds);
    json_decref(a);
    json_decref(b);
    free(out[0]);
    free(out[1]);
}

static void test_eval_forces_errors(void **state)
{
    (void)state;
    char msg[512];
    expect_failure(2, "packtrain eval: --forces-weight: '-1' is not a number >= 0", "--model",
                   model, "--data", wptd, "--forces-weight", "-1", NULL);
    expect_failure(2, "packtrain eval: --stress-weight: 'nan' is not a number >= 0", "--model",
                   model, "--data", wptd, "--stress-weight", "nan", NULL);
    expect_failure(2, "packtrain eval: --energy-weight, --energy-per-atom and --forces-key go "
                      "with --forces-weight or --stress-weight",
                   "--model", model, "--data", wptd, "--energy-weight", "2", NULL);
    expect_failure(2, "packtrain eval: --energy-weight, --energy-per-atom and --forces-key go "
                      "with --forces-weight or --stress-weight",
                   "--model", model, "--data", wptd, "--energy-per-atom", NULL);
    snprintf(msg, sizeof(msg), "packtrain eval: %s: --forces-weight: forces weight 1, but none "
             "of the 32 structures has force labels", ptd);
    expect_failure(1, msg, "--model", model, "--data", ptd, "--target", "gap",
                   "--forces-weight", "1", NULL);
    snprintf(msg, sizeof(msg), "packtrain eval: %s: --stress-weight: stress weight 2, but none "
             "of the 6 structures is periodic along a, b and c with a stress label", wptd);
    expect_failure(1, msg, "--model", model, "--data", wptd, "--target", "energy",
                   "--forces-weight", "1", "--stress-weight", "2", NULL);
    snprintf(msg, sizeof(msg), "packtrain eval: %s: --forces-key: a dataset holds one forces "
             "column, 'forces' (chosen at ingest: a 'forces' or 'force' column); 'dft_forces' "
             "is not in it", wptd);
    expect_failure(1, msg, "--model", model, "--data", wptd, "--target", "energy",
                   "--forces-weight", "1", "--forces-key", "dft_forces", NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eval_json_is_consistent_and_batch_independent),
        cmocka_unit_test(test_eval_first_n),
        cmocka_unit_test(test_eval_usage_errors),
        cmocka_unit_test(test_eval_runtime_errors),
        cmocka_unit_test(test_eval_structure_without_target),
        cmocka_unit_test(test_eval_forces_json),
        cmocka_unit_test(test_eval_forces_errors),
    };
    return cmocka_run_group_tests_name("cmd_eval", tests, setup, teardown);
}
