/* test_train_atom_first.c — a job whose first (or only) target is per atom
 * (charges, magnetic moments, per-atom energies: NequIP / SchNetPack
 * per-atom properties), on the EMT file with ASE's per-atom energies
 * (tests/data/README.md), which also carries forces: the job learns the
 * column with no energy and no forces ("auto" is 0), its single-number
 * errors (val_mae, test_mae) are per atom and are those of the model file
 * it saves (recomputed here from pt_predict_dataset's per-atom
 * predictions), a graph target after it is trained too, a resumed run ends
 * with the bits of an unbroken one (its checkpoints identify the per-atom
 * column as the data), and the global batch is invariant to its split into
 * replicas and micro-batches. */
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

#include "engine/run/run.h"
#include "engine/train/config.h"
#include "engine/train/plan.h"
#include "engine/train/predict.h"
#include "engine/train/train.h"
#include "tests/unit/train_fixture.h"

static pt_dataset emt;
static int col;   /* "energies" */
static char tmpdir[] = "/tmp/pt_test_atom_first_" "XX" "XX" "XX";

static int setup(void **state)
{
    (void)state;
    if (trf_open_ingested(tmpdir, "tests/data/emt_atom_energies_120.extxyz.gz", &emt) != 0) return -1;
    col = pt_dataset_find_atom_col(&emt, "energies");
    return col < 0 || !emt.forces ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_dataset_close(&emt);
    tfx_rmtree(tmpdir);
    return 0;
}

static void config_of(pt_job_config *cfg, const char *targets, int epochs)
{
    char job[1024];
    snprintf(job, sizeof job,
             "{\"targets\":%s,"
             "\"model\":{\"hidden\":32,\"filters\":32,\"interactions\":2,\"gaussians\":16,"
             "\"cutoff\":5.0},"
             "\"batching\":{\"model_batch_size\":4},"
             "\"training\":{\"epochs\":%d,\"lr\":0.003,\"log_every\":5,\"seed\":3},"
             "\"backend\":{\"threads\":1}}", targets, epochs);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_job_config_parse(cfg, job, strlen(job), "job.json", &errs), 0);
    pt_errors_close(&errs);
}

static const char only[] = "[{\"key\":\"energies\",\"level\":\"atom\"}]";

/* 15 epochs of the per-atom column alone: validation errors per atom fall
 * and end below the column's spread; no forces on data that has them. */
static void test_atom_only_job_learns(void **state)
{
    (void)state;
    pt_job_config cfg;
    config_of(&cfg, only, 15);
    trf_recorder *rec = calloc(1, sizeof *rec);
    pt_train_result res;
    assert_int_equal(trf_run(&cfg, &emt, NULL, rec, &res), 0);
    assert_int_equal(res.loss.forces, 0);
    assert_int_equal(res.loss.head_atom[0], 1);
    double first = NAN, best = INFINITY;
    int epochs = 0;
    for (int i = 0; i < rec->n; i++) {
        const pt_train_metrics *m = &rec->m[i];
        assert_true(isfinite(m->loss));
        assert_null(strstr(rec->json[i], "loss_forces"));
        if (strcmp(m->kind, "epoch")) continue;
        epochs++;
        /* the training loss is the per-atom MSE, of the same size as val's */
        assert_true(m->loss > 0.1 * m->val_rmse * m->val_rmse &&
                    m->loss < 10.0 * m->val_rmse * m->val_rmse);
        if (isnan(first)) first = m->val_rmse;
        best = fmin(best, m->val_rmse);
    }
    assert_int_equal(epochs, 15);
    double sum = 0, sq = 0;
    const float *v = emt.atom_cols + (size_t)col * emt.n_atoms;
    for (uint64_t a = 0; a < emt.n_atoms; a++) sum += v[a];
    for (uint64_t a = 0; a < emt.n_atoms; a++)
        sq += (v[a] - sum / emt.n_atoms) * (v[a] - sum / emt.n_atoms);
    const double spread = sqrt(sq / (double)emt.n_atoms);
    fprintf(stderr, "  per-atom val RMSE first %.3g -> best %.3g (spread %.3g)\n", first, best,
            spread);
    assert_true(best < 0.8 * first);
    assert_true(best < spread);
    assert_true(res.best_val_rmse == best);
    assert_true(isfinite(res.test_mae) && res.test_mae <= res.test_rmse);
    free(rec);
}

/* test_mae / test_rmse are the saved model's errors per atom over the test
 * structures: recomputed from pt_predict_dataset (whose per-structure y is
 * NaN for a per-atom head 0: its values are head_y[0]). */
static void test_errors_are_per_atom_of_the_saved_model(void **state)
{
    (void)state;
    pt_job_config cfg;
    config_of(&cfg, only, 3);
    char out[300], model[340];
    snprintf(out, sizeof out, "%s/run", tmpdir);
    snprintf(model, sizeof model, "%s/model.safetensors", out);
    trf_recorder *rec = calloc(1, sizeof *rec);
    pt_train_result res;
    assert_int_equal(trf_run(&cfg, &emt, out, rec, &res), 0);
    free(rec);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_train_plan plan;   /* the run's split */
    assert_int_equal(pt_train_plan_init(&plan, &cfg, &emt, PT_PLAN_COUNT_EDGES, 1, &errs), 0);
    pt_prediction p;
    assert_int_equal(pt_predict_dataset(&p, model, &emt, &errs), 0);
    assert_int_equal(p.n_heads, 1);
    assert_true(p.head_atom[0]);
    assert_true(isnan(p.y[0]));
    double ae = 0, se = 0, per_structure = 0;
    uint64_t n = 0;
    const float *t = emt.atom_cols + (size_t)col * emt.n_atoms;
    assert_true(plan.split.n_test > 0);
    for (uint32_t i = 0; i < plan.split.n_test; i++) {
        const uint32_t s = plan.split.test[i];
        double sum_e = 0;
        for (uint64_t a = emt.atom_offset[s]; a < emt.atom_offset[s + 1]; a++, n++) {
            const double e = p.head_y[0][a] - (double)t[a];
            ae += fabs(e);
            se += e * e;
            sum_e += e;
        }
        per_structure += fabs(sum_e);
    }
    fprintf(stderr, "  test MAE per atom %.6g (recomputed %.6g; per structure it would be %.3g)\n",
            res.test_mae, ae / (double)n, per_structure / plan.split.n_test);
    assert_float_equal(res.test_mae, ae / (double)n, 1e-5 * res.test_mae);
    assert_float_equal(res.test_rmse, sqrt(se / (double)n), 1e-5 * res.test_rmse);
    assert_true(fabs(per_structure / plan.split.n_test - res.test_mae) > 0.1 * res.test_mae);
    pt_prediction_close(&p);
    pt_train_plan_close(&plan);
    pt_errors_close(&errs);
}

/* A per-atom first target, a graph target after it: both trained and
 * reported, the job's val_mae the first target's (per atom). */
static void test_atom_first_then_graph(void **state)
{
    (void)state;
    pt_job_config cfg;
    config_of(&cfg, "[{\"key\":\"energies\",\"level\":\"atom\"},{\"key\":\"energy\","
                    "\"weight\":0.5}]", 2);
    trf_recorder *rec = calloc(1, sizeof *rec);
    pt_train_result res;
    assert_int_equal(trf_run(&cfg, &emt, NULL, rec, &res), 0);
    int epochs = 0;
    for (int i = 0; i < rec->n; i++) {
        const pt_train_metrics *m = &rec->m[i];
        if (strcmp(m->kind, "epoch")) continue;
        epochs++;
        assert_int_equal(m->n_heads, 2);
        assert_true(m->val_mae == m->val_head[0].mae && isfinite(m->val_head[1].mae));
        assert_non_null(strstr(rec->json[i], "\"energies\":{\"val_mae\":"));
        assert_non_null(strstr(rec->json[i], "\"energy\":{\"val_mae\":"));
    }
    assert_int_equal(epochs, 2);
    assert_int_equal(res.n_heads, 2);
    assert_true(res.test_mae == res.test_head[0].mae);
    assert_true(isfinite(res.test_head[1].mae));
    free(rec);
}

/* A run stopped mid-way and resumed from its checkpoint ends with the bits
 * of one that never stopped; the checkpoint names the per-atom column as
 * the run's data: the same structures with one label moved are refused. */
static int resume_run(const pt_job_config *cfg, const pt_dataset *ds, const char *out,
                      const char *resume, trf_recorder *rec, pt_train_result *res, pt_errors *errs)
{
    pt_train_options opt = {.user = rec, .on_metrics = trf_record,
                            .should_stop = trf_stop_when_told, .resume_path = resume};
    return pt_run_train(cfg, ds, out, &opt, res, errs);
}

static void test_resume_is_bit_exact_and_checks_the_column(void **state)
{
    (void)state;
    pt_job_config cfg;
    config_of(&cfg, only, 3);
    char whole[300], parts[300];
    snprintf(whole, sizeof whole, "%s/whole", tmpdir);
    snprintf(parts, sizeof parts, "%s/parts", tmpdir);
    trf_recorder *rec = calloc(1, sizeof *rec);
    pt_train_result ref, res;
    assert_int_equal(trf_run(&cfg, &emt, whole, rec, &ref), 0);
    memset(rec, 0, sizeof *rec);
    rec->stop_after = (int)(ref.steps / 2);   /* mid-way through */
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(resume_run(&cfg, &emt, parts, NULL, rec, &res, &errs), 0);
    assert_string_equal(res.stop_reason, "cancelled");
    assert_true(res.steps < ref.steps && res.last_checkpoint[0]);
    char ckpt[sizeof res.last_checkpoint];
    snprintf(ckpt, sizeof ckpt, "%s", res.last_checkpoint);
    /* one per-atom label moved: other data */
    pt_dataset moved = emt;
    float *copy = malloc(emt.n_atoms * sizeof(float));
    memcpy(copy, emt.atom_cols + (size_t)col * emt.n_atoms, emt.n_atoms * sizeof(float));
    copy[5] += 0.25f;
    float *cols = malloc((size_t)emt.n_atom_cols * emt.n_atoms * sizeof(float));
    memcpy(cols, emt.atom_cols, (size_t)emt.n_atom_cols * emt.n_atoms * sizeof(float));
    memcpy(cols + (size_t)col * emt.n_atoms, copy, emt.n_atoms * sizeof(float));
    moved.atom_cols = cols;
    memset(rec, 0, sizeof *rec);
    assert_int_equal(resume_run(&cfg, &moved, parts, ckpt, rec, &res, &errs), -1);
    assert_string_equal(errs.items[0].field, "data_crc32");
    assert_non_null(strstr(errs.items[0].message, "the checkpoint was made on other data"));
    pt_errors_close(&errs);
    free(cols);
    free(copy);
    pt_errors_init(&errs, 0);
    memset(rec, 0, sizeof *rec);
    assert_int_equal(resume_run(&cfg, &emt, parts, ckpt, rec, &res, &errs), 0);
    assert_int_equal(res.steps, ref.steps);
    assert_true(res.best_val_mae == ref.best_val_mae && res.test_mae == ref.test_mae &&
                res.test_rmse == ref.test_rmse && res.last_loss == ref.last_loss);
    pt_errors_close(&errs);
    free(rec);
}

static void test_global_batch_invariance(void **state)
{
    (void)state;
    pt_job_config cfg;
    config_of(&cfg, only, 1);
    trf_check_global_batch_invariance(&cfg, &emt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_atom_only_job_learns),
        cmocka_unit_test(test_errors_are_per_atom_of_the_saved_model),
        cmocka_unit_test(test_atom_first_then_graph),
        cmocka_unit_test(test_resume_is_bit_exact_and_checks_the_column),
        cmocka_unit_test(test_global_batch_invariance),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
