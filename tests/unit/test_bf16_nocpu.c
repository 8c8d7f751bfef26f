/* test_bf16_nocpu.c — training.precision "bf16" on a CPU without
 * AVX512-BF16, every place a job can start: POST /v1/jobs (422 at
 * training.precision, along with the job's other problems), `packtrain
 * train` (exit 2 before any output), pt_train_run (a worker or an MPI rank on
 * such a CPU), and /healthz saying "bf16": false.  fp32 jobs go through.
 *
 * The CPU's features are detected once per process, so main() sets
 * PACKTRAIN_CPU_HIDE_BF16=1 before anything can detect them: this binary
 * sees any CPU as one without AVX512-BF16. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "engine/model/bf16.h"
#include "engine/data/ingest.h"
#include "engine/run/run.h"
#include "engine/train/train.h"
#include "server/cli/commands.h"
#include "tests/unit/api_fixture.h"
#include "tests/unit/tmp_fixture.h"

#define DEMO "tests/data/api_demo_qm9_64.extxyz"

static char tmpdir[] = "/tmp/pt_test_bf16_nocpu_" "XX" "XX" "XX"; /* mkdtemp pattern */
static char data_path[300];
static char why[PT_ERR_MSG_MAX];   /* what the CPU check says */

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(tmpdir)) return -1;
    snprintf(data_path, sizeof data_path, "%s/demo.ptd", tmpdir);
    int rc = tfx_ingest(DEMO, data_path);
    pt_cpu_features f;
    pt_cpu_features_get(&f);
    if (pt_bf16_cpu_explain(&f, why, sizeof why)) return -1;   /* the variable did not hide it */
    return rc;
}

static int teardown(void **state)
{
    (void)state;
    tfx_rmtree(tmpdir);
    return 0;
}

/* The hidden CPU lacks avx512_bf16, and the message says it was hidden. */
static void test_features_hidden(void **state)
{
    (void)state;
    pt_cpu_features f;
    pt_cpu_features_get(&f);
    assert_true(f.hidden);
    assert_false(f.avx512bf16);
    assert_false(pt_cpu_has_bf16());
    assert_non_null(strstr(why, "training.precision \"bf16\" needs a CPU with AVX512-BF16"));
    assert_non_null(strstr(why, "avx512_bf16"));
    assert_non_null(strstr(why, "(hidden by PACKTRAIN_CPU_HIDE_BF16)"));
}

static void test_check_cpu(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_job_config_defaults(&cfg);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_train_check_cpu(&cfg, &errs), 0);   /* fp32 needs nothing */
    assert_int_equal(errs.total, 0);
    cfg.training.precision = PT_PRECISION_BF16;
    assert_int_equal(pt_train_check_cpu(&cfg, &errs), -1);
    assert_int_equal(errs.total, 1);
    assert_string_equal(errs.items[0].field, "training.precision");
    assert_string_equal(errs.items[0].message, why);
    pt_errors_close(&errs);
}

/* A worker (or MPI rank) refuses before it writes anything. */
static void test_train_run_refuses(void **state)
{
    (void)state;
    pt_dataset ds;
    char err[512];
    assert_int_equal(pt_dataset_open(&ds, data_path, err, sizeof err), 0);
    pt_job_config cfg;
    pt_job_config_defaults(&cfg);
    cfg.training.precision = PT_PRECISION_BF16;
    char out[400];
    snprintf(out, sizeof out, "%s/run", tmpdir);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_train_result res;
    assert_int_equal(pt_run_train(&cfg, &ds, out, NULL, &res, &errs), -1);
    assert_int_equal(errs.total, 1);
    assert_string_equal(errs.items[0].field, "training.precision");
    assert_string_equal(errs.items[0].message, why);
    assert_int_equal(access(out, F_OK), -1);
    pt_errors_close(&errs);
    pt_dataset_close(&ds);
}

/* Runs `packtrain train ARGS` in a child with stdout and stderr to files. */
static int run_train(const char *name, char *out, size_t outlen, char *errtext, size_t errlen,
                     const char *cfg_path, const char *out_dir)
{
    char out_path[400], err_path[400];
    snprintf(out_path, sizeof out_path, "%s/%s.out", tmpdir, name);
    snprintf(err_path, sizeof err_path, "%s/%s.err", tmpdir, name);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(o, 1);
        dup2(e, 2);
        char *argv[] = {"train", data_path, "--config", (char *)cfg_path, "--out", (char *)out_dir,
                        NULL};
        int rc = pt_cmd_train(6, argv);
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    const char *paths[2] = {out_path, err_path};
    char *bufs[2] = {out, errtext};
    size_t lens[2] = {outlen, errlen};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(paths[i], "r");
        assert_non_null(f);
        size_t n = fread(bufs[i], 1, lens[i] - 1, f);
        bufs[i][n] = '\0';
        fclose(f);
    }
    return WEXITSTATUS(status);
}

/* `packtrain train` says why and exits 2 (a configuration error) without
 * training a step; the same job in fp32 trains. */
static void test_cmd_train_refuses(void **state)
{
    (void)state;
    char cfg_path[400], out_dir[400], out[4096], err[4096], want[PT_ERR_MSG_MAX + 64];
    snprintf(cfg_path, sizeof cfg_path, "%s/bf16.json", tmpdir);
    snprintf(out_dir, sizeof out_dir, "%s/cli-bf16", tmpdir);
    assert_int_equal(tfx_write(cfg_path, "{\"model\":{\"hidden\":8,\"filters\":8,\"interactions\":1,\"gaussians\":8},"
                         "\"training\":{\"epochs\":1,\"precision\":\"bf16\"},\"backend\":{\"threads\":1}}"), 0);
    assert_int_equal(run_train("bf16", out, sizeof out, err, sizeof err, cfg_path, out_dir), 2);
    snprintf(want, sizeof want, "packtrain train: training.precision: %s\n", why);
    assert_string_equal(err, want);
    assert_string_equal(out, "");
    assert_int_equal(access(out_dir, F_OK), -1);

    snprintf(cfg_path, sizeof cfg_path, "%s/fp32.json", tmpdir);
    snprintf(out_dir, sizeof out_dir, "%s/cli-fp32", tmpdir);
    assert_int_equal(tfx_write(cfg_path, "{\"model\":{\"hidden\":8,\"filters\":8,\"interactions\":1,\"gaussians\":8},"
                         "\"training\":{\"epochs\":1,\"precision\":\"fp32\"},\"backend\":{\"threads\":1}}"), 0);
    assert_int_equal(run_train("fp32", out, sizeof out, err, sizeof err, cfg_path, out_dir), 0);
    assert_non_null(strstr(out, "\"kind\":\"epoch\""));
}

/* POST /v1/jobs: 422 naming training.precision with the CPU's reason, next
 * to the job's other problems; the same job in fp32 is queued; /healthz
 * tells clients beforehand. */
static void test_submit_refused(void **state)
{
    (void)state;
    api_fx fx;
    assert_int_equal(fx_start(&fx, NULL), 0);
    char ds[64], body[256], want[PT_ERR_MSG_MAX + 64];
    assert_int_equal(fx_demo_dataset(&fx, NULL, ds, sizeof ds), 0);
    tc_resp r;
    snprintf(body, sizeof body, "{\"dataset\":\"%s\",\"training\":{\"precision\":\"bf16\"}}", ds);
    assert_int_equal(fx_call(&fx, "POST", NULL, body, &r, "/v1/jobs"), 422);
    assert_true(fx_is_problem(&r));
    assert_string_equal(fx_detail(&r), "the job is not valid: 1 problem");
    snprintf(want, sizeof want, "training.precision: %s", why);
    assert_string_equal(fx_error(&r, 0), want);
    tc_free(&r);

    snprintf(body, sizeof body, "{\"dataset\":\"%s\",\"target\":\"nope\",\"training\":{\"precision\":\"bf16\"}}",
             ds);
    assert_int_equal(fx_call(&fx, "POST", NULL, body, &r, "/v1/jobs"), 422);
    assert_string_equal(fx_detail(&r), "the job is not valid: 2 problems");
    assert_string_equal(fx_error(&r, 0), want);
    assert_non_null(strstr(fx_error(&r, 1), "target: the dataset has no numeric key"));
    tc_free(&r);

    snprintf(body, sizeof body, "{\"dataset\":\"%s\",\"training\":{\"precision\":\"fp32\"}}", ds);
    assert_int_equal(fx_call(&fx, "POST", NULL, body, &r, "/v1/jobs"), 201);
    tc_free(&r);

    assert_int_equal(fx_call(&fx, "GET", NULL, NULL, &r, "/healthz"), 200);
    json_t *j = tc_json(&r);
    assert_true(json_is_false(json_object_get(j, "bf16")));
    json_decref(j);
    tc_free(&r);
    fx_stop(&fx);
}

int main(void)
{
    /* before the first detection, which is once per process */
    setenv("PACKTRAIN_CPU_HIDE_BF16", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_features_hidden),
        cmocka_unit_test(test_check_cpu),
        cmocka_unit_test(test_train_run_refuses),
        cmocka_unit_test(test_cmd_train_refuses),
        cmocka_unit_test(test_submit_refused),
    };
    return cmocka_run_group_tests_name("bf16_nocpu", tests, setup, teardown);
}
