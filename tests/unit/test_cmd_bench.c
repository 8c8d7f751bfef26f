/* test_cmd_bench.c — `packtrain bench` run in-process on the backend tests'
 * QM9 slice with a small model: the JSON it prints has the measured window
 * (steps, graphs, a positive rate consistent with graphs / seconds), the
 * backend settings that --set asked for and a memory plan; the local engine
 * reports no phases; every usage and configuration error prints its message
 * and returns its exit status. */
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

#include "server/cli/commands.h"
#include "tests/unit/cmd_fixture.h"

static char dir[64], ptd[128], cfg[128];

static int setup(void **state)
{
    (void)state;
    if (tfx_mkdtemp(dir, sizeof dir, "test_bench")) return -1;
    snprintf(ptd, sizeof ptd, "%s/q.ptd", dir);
    snprintf(cfg, sizeof cfg, "%s/job.json", dir);
    if (tfx_ingest("tests/data/backend_qm9_240.extxyz.gz", ptd)) return -1;
    return tfx_write(cfg, "{\"target\":\"energy_U0\",\"model\":{\"hidden\":16,\"filters\":16,"
                          "\"interactions\":2,\"gaussians\":8},\"batching\":{\"model_batch_size\":2},"
                          "\"backend\":{\"threads\":1}}\n");
}

static int teardown(void **state)
{
    (void)state;
    tfx_rmtree(dir);
    return 0;
}

/* Runs `packtrain bench ARGS...` (NULL-terminated) in this process. */
static int run_bench(char **out, char **err, ...)
{
    va_list ap;
    va_start(ap, err);
    int rc = cfx_runv(pt_cmd_bench, "bench", dir, out, err, ap);
    va_end(ap);
    return rc;
}

static void test_backend_run(void **state)
{
    (void)state;
    char *out, *err;
    assert_int_equal(run_bench(&out, &err, ptd, "--config", cfg, "--steps", "4", "--warmup", "1",
                               "--set", "backend.replication_factor=2", "--set",
                               "backend.gradient_accumulation=2", NULL), 0);
    json_error_t je;
    json_t *r = json_loads(out, 0, &je);
    if (!r) fail_msg("not JSON (%s): %s / %s", je.text, out, err);
    assert_int_equal(json_integer_value(json_object_get(r, "steps")), 4);
    double graphs = (double)json_integer_value(json_object_get(r, "graphs"));
    double seconds = json_real_value(json_object_get(r, "seconds"));
    double rate = json_real_value(json_object_get(r, "graphs_per_s"));
    assert_true(graphs > 0 && seconds > 0 && rate > 0);
    assert_true(fabs(rate - graphs / seconds) <= 1e-3 * rate);
    /* per_step: one entry per measured step, summing to the totals (to the
     * JSON's precision: reals are printed to 6 significant digits) */
    json_t *ps = json_object_get(r, "per_step");
    json_t *pg = json_object_get(ps, "graphs"), *pm = json_object_get(ps, "ms");
    assert_int_equal(json_array_size(pg), 4);
    assert_int_equal(json_array_size(pm), 4);
    double sum_g = 0.0, sum_ms = 0.0;
    for (size_t k = 0; k < 4; k++) {
        assert_true(json_integer_value(json_array_get(pg, k)) > 0);
        assert_true(json_real_value(json_array_get(pm, k)) > 0);
        sum_g += (double)json_integer_value(json_array_get(pg, k));
        sum_ms += json_real_value(json_array_get(pm, k));
    }
    assert_true(sum_g == graphs);
    assert_true(fabs(sum_ms - 1000.0 * seconds) <= 1e-4 * sum_ms);
    json_t *be = json_object_get(r, "backend");
    assert_string_equal(json_string_value(json_object_get(be, "engine")), "backend");
    assert_int_equal(json_integer_value(json_object_get(be, "replication_factor")), 2);
    assert_int_equal(json_integer_value(json_object_get(be, "global_packs")), 8);
    assert_int_equal(json_integer_value(json_object_get(be, "blas_threads")), 1);
    json_t *ph = json_object_get(r, "phases_ms");
    assert_true(json_real_value(json_object_get(ph, "forward")) > 0);
    assert_true(json_is_true(json_object_get(json_object_get(r, "memplan"), "fits")));
    /* the replicas' compute and wait over the measured steps: each replica
     * computes within the step, and waits at most for the slowest one */
    json_t *rm = json_object_get(be, "replicas_ms");
    const double busy = json_real_value(json_object_get(rm, "busy"));
    const double wait = json_real_value(json_object_get(rm, "wait"));
    const double step = json_real_value(json_object_get(r, "step_ms"));
    assert_true(busy > 0 && busy <= step * 1.001);
    assert_true(wait >= 0 && wait < busy);
    assert_true(json_real_value(json_object_get(rm, "busy_cpu")) > 0);
    assert_true(json_real_value(json_object_get(rm, "wait_cpu")) >= 0);
    assert_true(json_real_value(json_object_get(rm, "start_lag")) >= 0);
    /* the host's serial work per step: each piece within the step (the gap
     * and the update in it are the loop's, between steps: the window's
     * first gap is cut by its start), and the batches filled */
    json_t *hm = json_object_get(be, "host_ms");
    const char *host[] = {"prep", "join", "post", "gap", "update"};
    for (int k = 0; k < 5; k++) {
        json_t *v = json_object_get(hm, host[k]);
        assert_true(json_is_real(v));
        assert_true(json_real_value(v) >= 0);
        if (k < 3) assert_true(json_real_value(v) <= step * 1.001);
    }
    json_t *fills = json_object_get(be, "fills");
    json_int_t filled = 0;
    const char *by[] = {"thread", "consumer", "helper"};
    for (int k = 0; k < 3; k++) {
        json_t *v = json_object_get(fills, by[k]);
        assert_true(json_is_integer(v) && json_integer_value(v) >= 0);
        filled += json_integer_value(v);
    }
    assert_true(filled > 0);
    json_decref(r);
    free(out);
    free(err);
}

static void test_local_engine_has_no_phases(void **state)
{
    (void)state;
    char *out, *err;
    assert_int_equal(run_bench(&out, &err, ptd, "--config", cfg, "--steps", "2", "--warmup", "0",
                               "--engine", "local", NULL), 0);
    json_t *r = json_loads(out, 0, NULL);
    assert_non_null(r);
    json_t *ph = json_object_get(r, "phases_ms");
    assert_true(json_is_null(json_object_get(ph, "forward")));
    assert_true(json_real_value(json_object_get(ph, "outside")) > 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "backend"), "engine")),
                        "local");
    json_decref(r);
    free(out);
    free(err);
}

static void expect_error(int status, const char *message, ...)
{
    char *out, *err;
    va_list ap;
    va_start(ap, message);
    int rc = cfx_runv(pt_cmd_bench, "bench", dir, &out, &err, ap);
    va_end(ap);
    if (rc != status) fail_msg("status %d, not %d, for '%s': %s", rc, status, message, err);
    if (!strstr(err, message)) fail_msg("expected '%s' in stderr, got '%s'", message, err);
    assert_string_equal(out, "");
    free(out);
    free(err);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error(2, "packtrain bench: DATA.ptd and --config are required\n", ptd, NULL);
    expect_error(2, "packtrain bench: --steps: '0' is not in 1..1000000\n", ptd, "--config", cfg,
                 "--steps", "0", NULL);
    expect_error(2, "packtrain bench: --warmup: 'x' is not in 0..1000000\n", ptd, "--config", cfg,
                 "--warmup", "x", NULL);
    expect_error(2, "packtrain bench: --engine: 'gpu' is not backend or local\n", ptd, "--config",
                 cfg, "--engine", "gpu", NULL);
    expect_error(2, "packtrain bench: unexpected argument 'extra'\n", ptd, "extra", "--config", cfg,
                 NULL);
    expect_error(1, "packtrain bench: --set 'threads=2' is not SECTION.KEY=VALUE\n", ptd,
                 "--config", cfg, "--set", "threads=2", NULL);
    expect_error(1, "packtrain bench: --set 'target.x=1': section 'target' is not an object\n",
                 ptd, "--config", cfg, "--set", "target.x=1", NULL);
    char longset[128];
    snprintf(longset, sizeof longset, "%0100d.x=1", 0);
    char want[192];
    snprintf(want, sizeof want, "packtrain bench: --set '%s': name too long\n", longset);
    expect_error(1, want, ptd, "--config", cfg, "--set", longset, NULL);
    expect_error(1, "backend.replication_factor", ptd, "--config", cfg, "--set",
                 "backend.replication_factor=0", NULL);
    expect_error(1, "packtrain bench: /nonexistent/job.json:", ptd, "--config",
                 "/nonexistent/job.json", NULL);
    expect_error(1, "packtrain bench: /nonexistent.ptd", "/nonexistent.ptd", "--config", cfg,
                 NULL);
    /* the memory plan refuses the job when the backend opens */
    expect_error(1, "more than the 1 MB of device memory", ptd, "--config", cfg, "--set",
                 "backend.device_memory_mb=1", "--set", "batching.model_batch_size=64", NULL);
}

static void test_help(void **state)
{
    (void)state;
    char *out, *err;
    assert_int_equal(run_bench(&out, &err, "--help", NULL), 0);
    assert_non_null(strstr(out, "usage: packtrain bench DATA.ptd --config JOB.json"));
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backend_run),
        cmocka_unit_test(test_local_engine_has_no_phases),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_help),
    };
    return cmocka_run_group_tests_name("cmd_bench", tests, setup, teardown);
}
