/* test_train_resume.c — THE invariant of checkpoints, in process on 400 QM9
 * molecules (tests/data/train_qm9_400.extxyz.gz) with a tiny model:
 * training N steps straight, and training k steps, stopping (checkpoint),
 * and resuming in a fresh pt_train_run, end with bit-identical parameters,
 * optimizer moments, best model and state, and emit the same metrics lines
 * for every step after k — for k mid-epoch between step lines, k at an
 * epoch's last step, k in the second epoch, k after the plateau schedule
 * lowered the rate, from a periodic checkpoint into another directory, and
 * from the final checkpoint.  A job training on energies, forces and stress
 * (240 EMT structures, tests/data/emt_train_240.extxyz.gz) resumes the same
 * way, its force and stress sums and errors included.  A checkpoint of
 * another configuration, of other data (forces included, for a forces job),
 * or a cut one is refused with a message saying so. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/train/checkpoint.h"
#include "engine/train/config.h"
#include "engine/data/ingest.h"
#include "engine/run/run.h"
#include "engine/train/train.h"
#include "tests/unit/tmp_fixture.h"

#define MAX_LINES 256

static pt_dataset qm9, small, emt, emt_moved;
static int forces_mode;   /* the tests' job: 0 energies on QM9, 1 energies, forces, stress on EMT */
static char tmpdir[] = "/tmp/pt_test_resume_" "XX" "XX" "XX"; /* mkdtemp pattern */

static int ingest(const char *src, const char *name, pt_dataset *ds)
{
    char ptd[256];
    snprintf(ptd, sizeof ptd, "%s/%s", tmpdir, name);
    int rc = tfx_ingest(src, ptd);
    char err[512];
    return rc != 0 ? -1 : pt_dataset_open(ds, ptd, err, sizeof err);
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(tmpdir)) return -1;
    if (ingest("tests/data/train_qm9_400.extxyz.gz", "qm9.ptd", &qm9) != 0) return -1;
    if (ingest("tests/data/emt_train_240.extxyz.gz", "emt.ptd", &emt) != 0) return -1;
    /* the same structures and energies, one force component changed */
    char src[300], cmd[1000];
    snprintf(src, sizeof src, "%s/emt_moved.extxyz", tmpdir);
    snprintf(cmd, sizeof cmd, "zcat tests/data/emt_train_240.extxyz.gz | "
             "awk 'NR == 3 { $6 = $6 + 0.5 } { print }' > %s", src);
    if (system(cmd) != 0 || ingest(src, "emt_moved.ptd", &emt_moved) != 0) return -1;
    return ingest("tests/data/schnet_qm9_32.extxyz", "small.ptd", &small);
}

static int teardown(void **state)
{
    (void)state;
    pt_dataset_close(&qm9);
    pt_dataset_close(&small);
    pt_dataset_close(&emt);
    pt_dataset_close(&emt_moved);
    tfx_rmtree(tmpdir);
    return 0;
}
/* --- resume ---------------------------------------------------------------------- */

typedef struct recorder {
    int n;
    pt_train_metrics m[MAX_LINES];
    int64_t stop_at;         /* should_stop answers 1 once this many steps are done; 0 = never */
    int64_t steps_seen;      /* steps counted by the polls */
    int checkpoints;
    char last_ckpt[4400];
} recorder;

static void record(void *user, const pt_train_metrics *m, const char *json)
{
    (void)json;
    recorder *r = user;
    if (r->n < MAX_LINES) r->m[r->n++] = *m;
}

static int stop_at(void *user)
{
    recorder *r = user;
    r->steps_seen++;
    return r->stop_at && r->steps_seen >= r->stop_at;
}

static void saw_checkpoint(void *user, const pt_train_checkpoint *ck)
{
    recorder *r = user;
    r->checkpoints++;
    snprintf(r->last_ckpt, sizeof r->last_ckpt, "%s", ck->path);
    assert_int_equal(access(ck->path, F_OK), 0);   /* durable before it is announced */
}

/* H=F=16, T=1: three epochs of about 18 steps in well under a second. */
static void tiny_config(pt_job_config *cfg)
{
    pt_job_config_defaults(cfg);
    cfg->model.hidden = 16;
    cfg->model.filters = 16;
    cfg->model.interactions = 1;
    cfg->model.gaussians = 12;
    cfg->model.cutoff = 5.0;
    cfg->batching.model_batch_size = 4;
    cfg->training.epochs = 3;
    cfg->training.lr = 3e-3;
    cfg->training.log_every = 3;
    cfg->training.checkpoint_every = 0;
    cfg->training.seed = 5;
    /* plateau with no patience and early stopping keep state across epochs */
    cfg->training.schedule = pt_schedule_defaults(PT_SCHEDULE_PLATEAU, cfg->training.lr);
    cfg->training.schedule.patience = 0;
    cfg->training.schedule.threshold = 0.9;   /* every later epoch counts as bad */
    cfg->training.early_stopping_patience = 3;
    cfg->backend.threads = 1;
    if (forces_mode) {
        snprintf(cfg->target, sizeof cfg->target, "energy");
        cfg->model.cutoff = 4.0;
        cfg->model.max_neighbors = 0;
        cfg->training.loss.stress_weight = 10.0;
    }
}

static int train(const pt_job_config *cfg, const pt_dataset *ds, const char *out,
                 const char *resume, recorder *rec, pt_train_result *res, pt_errors *errs)
{
    rec->steps_seen = 0;
    pt_train_options opt = {.user = rec, .on_metrics = record, .should_stop = stop_at,
                            .resume_path = resume, .on_checkpoint = saw_checkpoint};
    return pt_run_train(cfg, ds, out, &opt, res, errs);
}

static void train_ok(const pt_job_config *cfg, const char *out, const char *resume,
                     recorder *rec, pt_train_result *res)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    int rc = train(cfg, forces_mode ? &emt : &qm9, out, resume, rec, res, &errs);
    if (rc != 0) {
        char buf[600];
        pt_errors_first(&errs, buf, sizeof buf);
        fprintf(stderr, "training failed: %s\n", buf);
    }
    assert_int_equal(rc, 0);
    pt_errors_close(&errs);
}

/* Output directories of the forces job's runs are apart from the energy job's. */
static void out_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s%s", tmpdir, forces_mode ? "forces-" : "", name);
}

/* Everything a metrics line says except times and throughput. */
static void assert_same_line(const pt_train_metrics *a, const pt_train_metrics *b)
{
    assert_string_equal(a->kind, b->kind);
    assert_int_equal(a->step, b->step);
    assert_int_equal(a->epoch, b->epoch);
    assert_memory_equal(&a->loss, &b->loss, sizeof(double));
    assert_memory_equal(&a->lr, &b->lr, sizeof(double));
    assert_memory_equal(&a->padding_fraction, &b->padding_fraction, sizeof(double));
    if (!strcmp(a->kind, "epoch")) {
        assert_memory_equal(&a->train_loss, &b->train_loss, sizeof(double));
        assert_memory_equal(&a->val_mae, &b->val_mae, sizeof(double));
        assert_memory_equal(&a->val_rmse, &b->val_rmse, sizeof(double));
    }
    assert_int_equal(a->has_forces, forces_mode);
    assert_int_equal(b->has_forces, forces_mode);
    if (forces_mode) {
        assert_memory_equal(&a->loss_energy, &b->loss_energy, sizeof(double));
        assert_memory_equal(&a->loss_forces, &b->loss_forces, sizeof(double));
        assert_memory_equal(&a->loss_stress, &b->loss_stress, sizeof(double));
        if (!strcmp(a->kind, "epoch")) {
            assert_memory_equal(&a->val_loss, &b->val_loss, sizeof(double));
            assert_memory_equal(&a->val_forces_mae, &b->val_forces_mae, sizeof(double));
            assert_memory_equal(&a->val_stress_mae, &b->val_stress_mae, sizeof(double));
            assert_true(isfinite(a->val_forces_mae) && isfinite(a->val_stress_mae));
        }
    }
}

/* The final checkpoints of two runs hold the same bits. */
static void assert_same_final_state(const char *a_path, const char *b_path)
{
    pt_checkpoint a, b;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_checkpoint_open(&a, a_path, &errs), 0);
    assert_int_equal(pt_checkpoint_open(&b, b_path, &errs), 0);
    const char *names[] = {"params", "adam.m", "adam.v", "best"};
    for (int i = 0; i < 4; i++) {
        const pt_st_tensor *x = pt_safetensors_find(&a.file, names[i]);
        const pt_st_tensor *y = pt_safetensors_find(&b.file, names[i]);
        assert_int_equal(x->numel, y->numel);
        assert_memory_equal(x->data, y->data, x->numel * sizeof(float));
    }
    /* and the same state in every field but the wall times */
    pt_checkpoint_state *sa = &a.state, *sb = &b.state;
    sa->seconds = sb->seconds = sa->step_seconds = sb->step_seconds = 0;
    sa->epoch_window.seconds = sb->epoch_window.seconds = 0;
    sa->step_window.seconds = sb->step_window.seconds = 0;
    assert_int_equal(sa->steps, sb->steps);
    assert_memory_equal(sa, sb, sizeof *sa);
    pt_checkpoint_close(&a);
    pt_checkpoint_close(&b);
    pt_errors_close(&errs);
}

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    for (int c; (c = getc(f)) != EOF;) n += c == '\n';
    fclose(f);
    return n;
}

/* The straight run every resume is compared with. */
typedef struct reference {
    recorder rec;
    pt_train_result res;
    int64_t steps_per_epoch;
    char final_ckpt[4400];
} reference;

static reference *ref, *energy_ref, *forces_ref;

static int make_reference(void)
{
    ref = calloc(1, sizeof *ref);
    pt_job_config cfg;
    tiny_config(&cfg);
    char out[300];
    out_path(out, sizeof out, "straight");
    train_ok(&cfg, out, NULL, &ref->rec, &ref->res);
    snprintf(ref->final_ckpt, sizeof ref->final_ckpt, "%s", ref->rec.last_ckpt);
    for (int i = 0; i < ref->rec.n && !ref->steps_per_epoch; i++)
        if (!strcmp(ref->rec.m[i].kind, "epoch")) ref->steps_per_epoch = ref->rec.m[i].step;
    return ref->steps_per_epoch > 5 && ref->res.epochs == 3 ? 0 : -1;
}

static int setup_all(void **state)
{
    if (setup(state) != 0) return -1;
    forces_mode = 1;
    int rc = make_reference();
    forces_ref = ref;
    forces_mode = 0;
    if (rc == 0) rc = make_reference();
    energy_ref = ref;
    return rc;
}

static int teardown_all(void **state)
{
    free(energy_ref);
    free(forces_ref);
    return teardown(state);
}

/* The tests below run the forces job; then back to the energy job. */
static int use_forces(void **state)
{
    (void)state;
    forces_mode = 1;
    ref = forces_ref;
    return 0;
}

static int use_energy(void **state)
{
    (void)state;
    forces_mode = 0;
    ref = energy_ref;
    return 0;
}

/* Stop after k steps, resume in a new run in the same directory. */
static void resume_after(int64_t k)
{
    pt_job_config cfg;
    tiny_config(&cfg);
    char name[64], out[300];
    snprintf(name, sizeof name, "stop%lld", (long long)k);
    out_path(out, sizeof out, name);
    recorder *first = calloc(1, sizeof *first), *second = calloc(1, sizeof *second);
    pt_train_result r1, r2;
    first->stop_at = k;
    train_ok(&cfg, out, NULL, first, &r1);
    assert_string_equal(r1.stop_reason, "cancelled");
    assert_int_equal(r1.steps, k);
    assert_true(first->checkpoints >= 1);
    assert_string_equal(r1.last_checkpoint, first->last_ckpt);
    /* the lines before the stop are the straight run's */
    for (int i = 0; i < first->n; i++) assert_same_line(&first->m[i], &ref->rec.m[i]);

    train_ok(&cfg, out, first->last_ckpt, second, &r2);
    assert_int_equal(r2.resumed_step, k);
    assert_int_equal(first->n + second->n, ref->rec.n);
    for (int i = 0; i < second->n; i++) {
        /* an epoch line of step k comes after a checkpoint at its last step */
        assert_true(second->m[i].step > k || (second->m[i].step == k && i == 0 &&
                                               !strcmp(second->m[i].kind, "epoch")));
        assert_same_line(&second->m[i], &ref->rec.m[first->n + i]);
    }
    assert_int_equal(r2.steps, ref->res.steps);
    assert_string_equal(r2.stop_reason, ref->res.stop_reason);
    assert_int_equal(r2.best_epoch, ref->res.best_epoch);
    assert_memory_equal(&r2.test_mae, &ref->res.test_mae, sizeof(double));
    assert_memory_equal(&r2.test_forces_mae, &ref->res.test_forces_mae, sizeof(double));
    assert_memory_equal(&r2.best_val_forces_mae, &ref->res.best_val_forces_mae, sizeof(double));
    assert_memory_equal(&r2.test_stress_mae, &ref->res.test_stress_mae, sizeof(double));
    assert_int_equal(r2.graphs, ref->res.graphs);
    assert_same_final_state(ref->final_ckpt, second->last_ckpt);
    /* metrics.jsonl: the lines up to the checkpoint, then the resumed ones */
    char path[400];
    snprintf(path, sizeof path, "%s/metrics.jsonl", out);
    assert_int_equal(count_lines(path), ref->rec.n);
    free(first);
    free(second);
}

static void test_resume_mid_epoch(void **state)
{
    (void)state;
    resume_after(4);   /* between step lines (log_every 3): the step window is restored */
}

static void test_resume_at_epoch_last_step(void **state)
{
    (void)state;
    resume_after(ref->steps_per_epoch);   /* the epoch's evaluation is still to do */
}

static void test_resume_second_epoch(void **state)
{
    (void)state;
    resume_after(ref->steps_per_epoch + 5);
}

/* after the plateau schedule has lowered the rate once */
static void test_resume_third_epoch(void **state)
{
    (void)state;
    resume_after(2 * ref->steps_per_epoch + 2);
}

/* Periodic checkpoints (checkpoint_every is not part of the identity): the
 * newest three are kept; the oldest of them resumes into a new directory. */
static void test_resume_periodic_elsewhere(void **state)
{
    (void)state;
    pt_job_config cfg;
    tiny_config(&cfg);
    cfg.training.checkpoint_every = 2;
    char out[300], other[300], path[400];
    out_path(out, sizeof out, "periodic");
    out_path(other, sizeof other, "periodic-resumed");
    recorder *first = calloc(1, sizeof *first), *second = calloc(1, sizeof *second);
    pt_train_result r1, r2;
    first->stop_at = 9;
    train_ok(&cfg, out, NULL, first, &r1);
    assert_int_equal(first->checkpoints, 5);   /* 2, 4, 6, 8, then 9 on stopping */
    for (int s = 2; s <= 9; s++) {
        snprintf(path, sizeof path, "%s/checkpoints/ckpt-%010d.safetensors", out, s);
        assert_int_equal(access(path, F_OK), s == 6 || s == 8 || s == 9 ? 0 : -1);
    }
    snprintf(path, sizeof path, "%s/checkpoints/ckpt-%010d.safetensors", out, 6);
    pt_checkpoint ck;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_checkpoint_open(&ck, path, &errs), 0);
    int64_t lines = ck.state.lines;
    assert_int_equal(ck.state.steps, 6);
    pt_checkpoint_close(&ck);
    pt_errors_close(&errs);

    cfg.training.checkpoint_every = 0;
    train_ok(&cfg, other, path, second, &r2);
    assert_int_equal(lines + second->n, ref->rec.n);
    for (int i = 0; i < second->n; i++) assert_same_line(&second->m[i], &ref->rec.m[lines + i]);
    assert_same_final_state(ref->final_ckpt, second->last_ckpt);
    snprintf(path, sizeof path, "%s/model.safetensors", other);
    assert_int_equal(access(path, F_OK), 0);
    free(first);
    free(second);
}

/* A checkpoint written as training ended: nothing left but the test. */
static void test_resume_finished(void **state)
{
    (void)state;
    pt_job_config cfg;
    tiny_config(&cfg);
    char out[300];
    out_path(out, sizeof out, "finished");
    recorder *rec = calloc(1, sizeof *rec);
    pt_train_result r;
    train_ok(&cfg, out, ref->final_ckpt, rec, &r);
    assert_int_equal(rec->n, 0);
    assert_int_equal(rec->checkpoints, 0);
    assert_int_equal(r.steps, ref->res.steps);
    assert_int_equal(r.epochs, 3);
    assert_string_equal(r.stop_reason, "epochs");
    assert_memory_equal(&r.test_mae, &ref->res.test_mae, sizeof(double));
    free(rec);
}

static void expect_resume_error(const pt_job_config *cfg, const pt_dataset *ds,
                                const char *resume, const char *field, const char *message)
{
    recorder *rec = calloc(1, sizeof *rec);
    pt_train_result r;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(train(cfg, ds, NULL, resume, rec, &r, &errs), -1);
    assert_true(errs.kept >= 1);
    assert_string_equal(errs.items[0].file, resume);
    assert_string_equal(errs.items[0].field, field);
    assert_non_null(strstr(errs.items[0].message, message));
    assert_int_equal(rec->n, 0);
    pt_errors_close(&errs);
    free(rec);
}

static void test_resume_errors(void **state)
{
    (void)state;
    pt_job_config cfg;
    tiny_config(&cfg);
    cfg.training.lr = 1e-3;
    expect_resume_error(&cfg, &qm9, ref->final_ckpt, "config_sha256",
                        "the checkpoint was made with another job configuration (sha256 ");
    tiny_config(&cfg);
    expect_resume_error(&cfg, &small, ref->final_ckpt, "data_crc32",
                        "the checkpoint was made on other data (400 structures, CRC-32 ");
    char path[300];
    out_path(path, sizeof path, "cut.ckpt");
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "head -c 200 %s > %s", ref->final_ckpt, path);
    assert_int_equal(system(cmd), 0);
    expect_resume_error(&cfg, &qm9, path, "header", "truncated: the header needs ");
}

/* Metrics lines a checkpoint had emitted. */
static int64_t checkpoint_lines(const char *path)
{
    pt_checkpoint ck;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_checkpoint_open(&ck, path, &errs), 0);
    int64_t n = ck.state.lines;
    pt_checkpoint_close(&ck);
    pt_errors_close(&errs);
    return n;
}

/* A checkpoint in the format before forces jobs existed (packtrain train on
 * train_qm9_400 with tiny_config's job as JSON and checkpoint_every 5, its
 * step-115 checkpoint, in epoch 3 after the plateau lowered the rate, with
 * only the keys that format had) opens, its missing keys read as an
 * energy-only run's, and resumes to the final state of this release's
 * straight run, bit for bit.  Its parameters carry the numerics of the build
 * that made it: a change of the training bits remakes it with
 * tests/data/ckpt_v1_regen.sh (last: the shifted softplus and basis kernels
 * of session 4, which moved the step-115 validation MAE by 2e−8). */
static void test_resume_checkpoint_of_the_previous_release(void **state)
{
    (void)state;
    const char *old = "tests/data/ckpt_v1_qm9_tiny_115.safetensors";
    pt_checkpoint ck;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_checkpoint_open(&ck, old, &errs), 0);
    assert_null(pt_safetensors_meta(&ck.file, "best_val_forces_mae"));
    assert_null(pt_safetensors_meta(&ck.file, "step_window.forces_sse"));
    assert_int_equal(ck.state.steps, 115);
    assert_true(ck.state.step_window.forces_sse == 0.0 && ck.state.epoch_window.force_components == 0);
    assert_true(isnan(ck.state.best_val_forces_mae));
    pt_checkpoint_close(&ck);
    pt_errors_close(&errs);
    pt_job_config cfg;
    tiny_config(&cfg);
    char out[300];
    out_path(out, sizeof out, "previous-release");
    recorder *rec = calloc(1, sizeof *rec);
    pt_train_result r;
    train_ok(&cfg, out, old, rec, &r);
    assert_int_equal(r.resumed_step, 115);
    assert_int_equal(r.steps, ref->res.steps);
    assert_int_equal(rec->n, ref->rec.n - (int)checkpoint_lines(old));
#ifndef __SANITIZE_ADDRESS__
    /* the bits need the release's compiler flags: the file was written by an
     * -O3 build, and `make asan`'s -O1 rounds differently from step 1 on */
    assert_memory_equal(&r.test_mae, &ref->res.test_mae, sizeof(double));
    for (int i = 0; i < rec->n; i++)
        assert_same_line(&rec->m[i], &ref->rec.m[ref->rec.n - rec->n + i]);
    assert_same_final_state(ref->final_ckpt, rec->last_ckpt);
#endif
    free(rec);
}

/* A forces job's checkpoint identifies its labels: the same structures and
 * energies with one force moved are other data. */
static void test_forces_resume_other_forces(void **state)
{
    (void)state;
    pt_job_config cfg;
    tiny_config(&cfg);
    expect_resume_error(&cfg, &emt_moved, ref->final_ckpt, "data_crc32",
                        "the checkpoint was made on other data (240 structures, CRC-32 ");
}
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_mid_epoch),
        cmocka_unit_test(test_resume_at_epoch_last_step),
        cmocka_unit_test(test_resume_second_epoch),
        cmocka_unit_test(test_resume_third_epoch),
        cmocka_unit_test(test_resume_periodic_elsewhere),
        cmocka_unit_test(test_resume_finished),
        cmocka_unit_test(test_resume_errors),
        cmocka_unit_test(test_resume_checkpoint_of_the_previous_release),
        cmocka_unit_test_setup_teardown(test_resume_mid_epoch, use_forces, use_energy),
        cmocka_unit_test_setup_teardown(test_resume_second_epoch, use_forces, use_energy),
        cmocka_unit_test_setup_teardown(test_resume_finished, use_forces, use_energy),
        cmocka_unit_test_setup_teardown(test_forces_resume_other_forces, use_forces, use_energy),
    };
    return cmocka_run_group_tests_name("train_resume", tests, setup_all, teardown_all);
}
