/* test_worker_proto.c — the worker's JSON-lines protocol: every kind parses
 * into the right fields, optional fields are NaN when absent or null, fields
 * without a store column land in extra_json, and every kind of bad line is
 * rejected with a message that names the problem. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/sched/worker_proto.h"

static int parse(const char *line, pt_worker_msg *m, char *err)
{
    return pt_worker_msg_parse(line, strlen(line), m, err, 256);
}

static void expect_error(const char *line, const char *fragment)
{
    pt_worker_msg m;
    char err[256] = "";
    if (parse(line, &m, err) != -1) fail_msg("accepted: %s", line);
    if (!strstr(err, fragment)) fail_msg("line %s\nerror \"%s\" lacks \"%s\"", line, err, fragment);
    assert_null(m.extra_json);
    pt_worker_msg_clear(&m);
}

static void test_step_line(void **state)
{
    (void)state;
    pt_worker_msg m;
    char err[256];
    const char *line = "{\"kind\":\"step\",\"step\":120,\"epoch\":3,\"loss\":0.25,\"lr\":0.001,"
                       "\"graphs_per_s\":512.5,\"nodes_per_s\":9000,\"padding_fraction\":0.05,"
                       "\"seconds\":0.1,\"phase_io_s\":0.01,\"phase_forward_s\":0.07}\r";
    assert_int_equal(parse(line, &m, err), 0);
    assert_int_equal(m.kind, PT_WORKER_MSG_STEP);
    assert_int_equal(m.step, 120);
    assert_int_equal(m.epoch, 3);
    assert_true(m.loss == 0.25);
    assert_true(m.lr == 0.001);
    assert_true(m.graphs_per_s == 512.5);
    assert_true(isnan(m.mae));
    assert_true(m.seconds == 0.1);
    /* Fields without a column are kept, in the worker's order. */
    assert_string_equal(m.extra_json, "{\"nodes_per_s\":9000,\"padding_fraction\":0.05,\"seconds\":0.1,"
                                      "\"phase_io_s\":0.01,\"phase_forward_s\":0.07}");
    pt_worker_msg_clear(&m);
}

static void test_step_minimal_and_unknown_keys(void **state)
{
    (void)state;
    pt_worker_msg m;
    char err[256];
    assert_int_equal(parse("{\"kind\":\"step\",\"step\":0,\"epoch\":0,\"loss\":null,\"grad_norm\":2.5}", &m, err), 0);
    assert_true(isnan(m.loss));
    assert_true(isnan(m.lr));
    assert_string_equal(m.extra_json, "{\"grad_norm\":2.5}");
    pt_worker_msg_clear(&m);
    assert_int_equal(parse("{\"kind\":\"step\",\"step\":1,\"epoch\":0,\"loss\":1}", &m, err), 0);
    assert_null(m.extra_json);
    assert_true(m.loss == 1.0);
    pt_worker_msg_clear(&m);
}

static void test_epoch_line(void **state)
{
    (void)state;
    pt_worker_msg m;
    char err[256];
    assert_int_equal(parse("{\"kind\":\"epoch\",\"step\":400,\"epoch\":2,\"train_loss\":0.5,\"val_mae\":0.03,"
                           "\"val_rmse\":0.05,\"seconds\":12.5,\"graphs_per_s\":800}", &m, err), 0);
    assert_int_equal(m.kind, PT_WORKER_MSG_EPOCH);
    assert_int_equal(m.step, 400);
    assert_int_equal(m.epoch, 2);
    assert_true(m.train_loss == 0.5);
    assert_true(m.val_mae == 0.03);
    assert_true(m.seconds == 12.5);
    assert_true(m.graphs_per_s == 800.0);
    assert_true(isnan(m.val_loss));
    assert_string_equal(m.extra_json, "{\"val_rmse\":0.05}");
    pt_worker_msg_clear(&m);

    /* a forces job's epoch line: its val_loss column, the rest as extras */
    assert_int_equal(parse("{\"kind\":\"epoch\",\"step\":8,\"epoch\":1,\"train_loss\":1.5,\"val_mae\":0.4,"
                           "\"val_loss\":1.25,\"loss_energy\":0.01,\"loss_forces\":1.49,"
                           "\"val_forces_mae\":0.3,\"val_forces_rmse\":0.5}", &m, err), 0);
    assert_true(m.val_loss == 1.25);
    assert_string_equal(m.extra_json, "{\"loss_energy\":0.01,\"loss_forces\":1.49,\"val_forces_mae\":0.3,"
                                      "\"val_forces_rmse\":0.5}");
    pt_worker_msg_clear(&m);
}

static void test_progress_checkpoint_done_error(void **state)
{
    (void)state;
    pt_worker_msg m;
    char err[256];
    assert_int_equal(parse("{\"kind\":\"progress\",\"progress\":0.5,\"epoch\":1,\"step\":50}", &m, err), 0);
    assert_int_equal(m.kind, PT_WORKER_MSG_PROGRESS);
    assert_true(m.progress == 0.5);
    assert_int_equal(m.step, 50);
    pt_worker_msg_clear(&m);

    assert_int_equal(parse("{\"kind\":\"checkpoint\",\"step\":50,\"epoch\":1,\"path\":\"/x/ckpt\",\"bytes\":9}",
                           &m, err), 0);
    assert_int_equal(m.kind, PT_WORKER_MSG_CHECKPOINT);
    assert_string_equal(m.path, "/x/ckpt");
    assert_null(m.extra_json);   /* unknown keys on non-metric lines are ignored */
    pt_worker_msg_clear(&m);

    assert_int_equal(parse("{\"kind\":\"done\",\"best_val_mae\":0.02,\"model\":\"/x/model.safetensors\"}", &m, err), 0);
    assert_int_equal(m.kind, PT_WORKER_MSG_DONE);
    assert_true(m.best_val_mae == 0.02);
    assert_string_equal(m.path, "/x/model.safetensors");
    pt_worker_msg_clear(&m);

    assert_int_equal(parse("{\"kind\":\"done\"}", &m, err), 0);
    assert_true(isnan(m.best_val_mae));
    assert_string_equal(m.path, "");
    assert_null(m.extra_json);
    pt_worker_msg_clear(&m);

    /* the run's result travels in extra_json (best_val_mae too), the model path not */
    assert_int_equal(parse("{\"kind\":\"done\",\"best_val_mae\":0.5,\"model\":\"/x/m\",\"best_epoch\":3,"
                           "\"test_mae\":0.6,\"test_rmse\":null,\"test_forces_mae\":0.2,"
                           "\"test_forces_zero_mae\":0.7}", &m, err), 0);
    assert_true(m.best_val_mae == 0.5);
    assert_string_equal(m.extra_json, "{\"best_val_mae\":0.5,\"best_epoch\":3,\"test_mae\":0.6,"
                                      "\"test_rmse\":null,\"test_forces_mae\":0.2,"
                                      "\"test_forces_zero_mae\":0.7}");
    pt_worker_msg_clear(&m);

    assert_int_equal(parse("{\"kind\":\"error\",\"message\":\"dataset has 0 structures\"}", &m, err), 0);
    assert_int_equal(m.kind, PT_WORKER_MSG_ERROR);
    assert_string_equal(m.message, "dataset has 0 structures");
    pt_worker_msg_clear(&m);
}

static void test_long_error_message_truncated(void **state)
{
    (void)state;
    size_t n = PT_STORE_REASON_MAX + 200;
    char *line = malloc(n + 64);
    assert_non_null(line);
    int off = sprintf(line, "{\"kind\":\"error\",\"message\":\"");
    memset(line + off, 'e', n);
    strcpy(line + off + n, "\"}");
    pt_worker_msg m;
    char err[256];
    assert_int_equal(parse(line, &m, err), 0);
    assert_int_equal(strlen(m.message), PT_STORE_REASON_MAX - 1);
    pt_worker_msg_clear(&m);
    free(line);
}

static void test_rejects_bad_lines(void **state)
{
    (void)state;
    expect_error("", "empty line");
    expect_error("this is not json", "not JSON:");
    expect_error("{\"kind\":\"step\",", "not JSON:");
    expect_error("[1,2]", "not a JSON object: [1,2]");
    expect_error("{\"step\":1}", "field \"kind\" is missing");
    expect_error("{\"kind\":7}", "field \"kind\": must be a string, got 7");
    expect_error("{\"kind\":\"stepp\"}", "unknown kind \"stepp\"");
    expect_error("{\"kind\":\"step\",\"kind\":\"epoch\"}", "duplicate");
    expect_error("{\"kind\":\"step\",\"epoch\":0,\"loss\":1}", "field \"step\" is missing (required on step lines)");
    expect_error("{\"kind\":\"step\",\"step\":-3,\"epoch\":0,\"loss\":1}",
                 "field \"step\": must be an integer >= 0, got -3");
    expect_error("{\"kind\":\"step\",\"step\":1.5,\"epoch\":0,\"loss\":1}",
                 "field \"step\": must be an integer >= 0, got 1.5");
    expect_error("{\"kind\":\"step\",\"step\":1,\"epoch\":\"x\",\"loss\":1}", "field \"epoch\": must be an integer");
    expect_error("{\"kind\":\"step\",\"step\":1,\"epoch\":0}", "field \"loss\" is missing");
    expect_error("{\"kind\":\"step\",\"step\":1,\"epoch\":0,\"loss\":\"big\"}",
                 "field \"loss\": must be a number or null, got \"big\"");
    expect_error("{\"kind\":\"step\",\"step\":1,\"epoch\":0,\"loss\":1,\"lr\":-1}",
                 "field \"lr\": must be a number >= 0 or null, got -1");
    expect_error("{\"kind\":\"step\",\"step\":1,\"epoch\":0,\"loss\":1,\"padding_fraction\":1.5}",
                 "field \"padding_fraction\": must be a number within [0, 1] or null, got 1.5");
    expect_error("{\"kind\":\"step\",\"step\":1,\"epoch\":0,\"loss\":NaN}", "not JSON:");
    expect_error("{\"kind\":\"epoch\",\"step\":1,\"epoch\":0}", "field \"train_loss\" is missing (required on epoch lines)");
    expect_error("{\"kind\":\"progress\",\"progress\":1.01,\"epoch\":0,\"step\":1}",
                 "field \"progress\": must be a number within [0, 1]");
    expect_error("{\"kind\":\"progress\",\"epoch\":0,\"step\":1}", "field \"progress\" is missing");
    expect_error("{\"kind\":\"checkpoint\",\"step\":1,\"epoch\":0}", "field \"path\" is missing");
    expect_error("{\"kind\":\"checkpoint\",\"step\":1,\"epoch\":0,\"path\":\"\"}",
                 "field \"path\": must be a non-empty string, got \"\"");
    expect_error("{\"kind\":\"done\",\"model\":42}", "field \"model\": must be a non-empty string, got 42");
    expect_error("{\"kind\":\"done\",\"test_forces_mae\":-0.1}",
                 "field \"test_forces_mae\": must be a number >= 0 or null, got -0.1");
    expect_error("{\"kind\":\"done\",\"best_epoch\":\"3\"}", "field \"best_epoch\": must be an integer >= 0");
    expect_error("{\"kind\":\"epoch\",\"step\":1,\"epoch\":0,\"train_loss\":1,\"val_forces_mae\":\"x\"}",
                 "field \"val_forces_mae\": must be a number >= 0 or null, got \"x\"");
    expect_error("{\"kind\":\"step\",\"step\":1,\"epoch\":0,\"loss\":1,\"loss_forces\":-2}",
                 "field \"loss_forces\": must be a number >= 0 or null, got -2");
    expect_error("{\"kind\":\"error\"}", "field \"message\" is missing (required on error lines)");
    expect_error("{\"kind\":\"error\",\"message\":[\"a\",\"b\",\"cccccccccccccccccccccccccccccccccccccccc\"]}",
                 "got [\"a\",\"b\",\"ccccccccccccccccccccccccccc...");
}

static void test_rejects_long_path_and_line(void **state)
{
    (void)state;
    char *line = malloc(PT_STORE_PATH_MAX + 100);
    assert_non_null(line);
    int off = sprintf(line, "{\"kind\":\"checkpoint\",\"step\":1,\"epoch\":0,\"path\":\"");
    memset(line + off, 'p', PT_STORE_PATH_MAX);
    strcpy(line + off + PT_STORE_PATH_MAX, "\"}");
    expect_error(line, "field \"path\": path is 1024 bytes, at most 1023 allowed");
    free(line);

    size_t n = PT_WORKER_LINE_MAX + 1;
    char *big = malloc(n);
    assert_non_null(big);
    memset(big, ' ', n);
    pt_worker_msg m;
    char err[256];
    assert_int_equal(pt_worker_msg_parse(big, n, &m, err, sizeof(err)), -1);
    assert_string_equal(err, "line is 1048577 bytes, at most 1048576 allowed");
    free(big);
}

static void test_kind_names(void **state)
{
    (void)state;
    assert_string_equal(pt_worker_msg_kind_name(PT_WORKER_MSG_STEP), "step");
    assert_string_equal(pt_worker_msg_kind_name(PT_WORKER_MSG_ERROR), "error");
    assert_string_equal(pt_worker_msg_kind_name((pt_worker_msg_kind)99), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_line),
        cmocka_unit_test(test_step_minimal_and_unknown_keys),
        cmocka_unit_test(test_epoch_line),
        cmocka_unit_test(test_progress_checkpoint_done_error),
        cmocka_unit_test(test_long_error_message_truncated),
        cmocka_unit_test(test_rejects_bad_lines),
        cmocka_unit_test(test_rejects_long_path_and_line),
        cmocka_unit_test(test_kind_names),
    };
    return cmocka_run_group_tests_name("worker_proto", tests, NULL, NULL);
}
