/* test_scheduler.c — how a job ends, against a real SQLite file under /tmp,
 * a real libuv loop and real child processes (the tests/data/sched_*.sh test
 * doubles speak the worker protocol): success with every metric recorded, an
 * error line's reason, exit 0 without done, crash -> retry -> resume with no
 * duplicate or missing step, the crash limit, a worker that cannot start, a
 * config that cannot be prepared, rejected stdout lines, a stdout held open
 * by an escaped grandchild, option errors.
 * Stopping, slots, restart and drain are in test_scheduler_stop.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/sched_fixture.h"

static void test_success_records_everything(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "{\"max_runtime_seconds\":60,\"training\":{\"epochs\":3}}", id);
    start(f, "tests/data/sched_ok.sh", 1);
    pt_store_job job;
    wait_state(f, id, PT_JOB_SUCCEEDED, &job);
    assert_int_equal(job.attempts, 1);
    assert_true(job.progress == 1.0);
    assert_int_equal(job.step, 250);
    assert_true(job.best_val_mae == 0.7);
    assert_true(job.latest_graphs_per_s == 100.0);
    assert_int_equal(job.worker_pid, 0);
    pt_store_job_clear(&job);
    assert_true(has_transition(f, id, PT_JOB_RUNNING, "claimed by the scheduler"));
    assert_true(has_transition(f, id, PT_JOB_SUCCEEDED, "worker finished"));

    pt_store_step_series ser;
    expect_steps(f, id, 1, 250, &ser);
    assert_true(ser.items[6].loss == 7.5);   /* the line written in two pieces */
    assert_true(ser.items[249].lr == 0.001);
    assert_string_equal(ser.items[0].json, "{\"nodes_per_s\":1800,\"padding_fraction\":0.1,\"seconds\":0.01}");
    pt_store_step_series_clear(&ser);
    pt_store_epoch_series ep;
    assert_int_equal(pt_store_epochs_read(f->s, OWNER, id, &ep), PT_STORE_OK);
    assert_int_equal(ep.n, 3);
    assert_int_equal(ep.items[2].step, 250);
    assert_true(ep.items[1].val_mae == 0.8);
    assert_string_equal(ep.items[0].json, "{\"val_rmse\":0.9}");
    pt_store_epoch_series_clear(&ep);
    pt_store_checkpoint ck;
    assert_int_equal(pt_store_checkpoint_latest(f->s, OWNER, id, &ck), PT_STORE_OK);
    assert_int_equal(ck.step, 250);
    char want[512];
    snprintf(want, sizeof(want), "%s/jobs/%s/checkpoint", f->data, id);   /* relative path resolved */
    assert_string_equal(ck.path, want);

    char *log = worker_log_with(f, id, "[scheduler] job succeeded: worker finished");
    snprintf(want, sizeof(want), "sched_ok: job %s data %s/set.ptd out %s/jobs/%s resume none", id, f->dir, f->data, id);
    assert_non_null(strstr(log, want));
    assert_non_null(strstr(log, "sched_ok: config {"));
    assert_non_null(strstr(log, "[scheduler] job succeeded: worker finished"));
    free(log);
    /* config.json is the stored text, untouched */
    snprintf(want, sizeof(want), "%s/jobs/%s/config.json", f->data, id);
    log = read_text(want);
    assert_string_equal(log, "{\"max_runtime_seconds\":60,\"training\":{\"epochs\":3}}");
    free(log);
    pthread_mutex_lock(&f->mu);
    assert_true(f->changes >= 4);   /* claim, metrics, checkpoints, end */
    pthread_mutex_unlock(&f->mu);
}

/* The worker keeps every checkpoint; the scheduler deletes each one only
 * after recording its successors, so exactly the newest two recorded
 * remain (issue 17 F5: with one, a damaged latest checkpoint left nothing
 * to resume from). */
static void test_superseded_checkpoints_deleted_after_record(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "{}", id);
    start(f, "tests/data/sched_ckpts.sh", 1);
    pt_store_job job;
    wait_state(f, id, PT_JOB_SUCCEEDED, &job);
    pt_store_job_clear(&job);
    pt_store_checkpoint ck;
    assert_int_equal(pt_store_checkpoint_latest(f->s, OWNER, id, &ck), PT_STORE_OK);
    assert_int_equal(ck.step, 50);
    assert_int_equal(access(ck.path, F_OK), 0);
    for (int step = 10; step < 50; step += 10) {
        char path[512];
        snprintf(path, sizeof(path), "%s/jobs/%s/checkpoints/ckpt-%d", f->data, id, step);
        assert_int_equal(access(path, F_OK), step == 40 ? 0 : -1);
    }
}

static void test_error_line_fails_with_its_message(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "{}", id);
    start(f, "tests/data/sched_fail.sh", 1);
    pt_store_job job;
    wait_state(f, id, PT_JOB_FAILED, &job);
    assert_string_equal(job.failure_reason, "dataset too small: 3 structures");
    assert_int_equal(job.attempts, 1);   /* a reported error is not retried */
    pt_store_job_clear(&job);
    pt_store_step_series ser;
    expect_steps(f, id, 1, 2, &ser);
    pt_store_step_series_clear(&ser);
}

static void test_exit_zero_without_done_fails(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "{}", id);
    start(f, "tests/data/sched_silent.sh", 1);
    pt_store_job job;
    wait_state(f, id, PT_JOB_FAILED, &job);
    assert_string_equal(job.failure_reason, "worker exited with status 0 without reporting done");
    pt_store_job_clear(&job);
}

static void test_crash_retries_and_resumes(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "{}", id);
    start(f, "tests/data/sched_resume.sh", 1);
    pt_store_job job;
    wait_state(f, id, PT_JOB_SUCCEEDED, &job);
    assert_int_equal(job.attempts, 2);
    pt_store_job_clear(&job);
    assert_true(has_transition(f, id, PT_JOB_QUEUED,
                               "worker crashed (exit signal 11 (SIGSEGV)); retry 1 of 2 resumes from checkpoint step 3"));
    pt_store_step_series ser;
    expect_steps(f, id, 1, 8, &ser);
    assert_true(ser.items[2].loss == 103.0);   /* kept: at or before the checkpoint */
    assert_true(ser.items[3].loss == 0.4);     /* replaced: the crashed run's step 4 was discarded */
    pt_store_step_series_clear(&ser);
    char *log = worker_log(f, id);
    assert_non_null(strstr(log, "exited: signal 11 (SIGSEGV)"));
    assert_non_null(strstr(log, "starting attempt 2, resuming from"));
    assert_non_null(strstr(log, "sched_resume: resumed from"));
    free(log);
    pt_scheduler_stats st;
    pt_scheduler_stats_get(&f->sched, &st);
    assert_int_equal(st.spawned, 2);
    assert_int_equal(st.crashed, 1);
}

static void test_crash_limit_fails(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "{}", id);
    start(f, "tests/data/sched_crash.sh", 1);
    pt_store_job job;
    wait_state(f, id, PT_JOB_FAILED, &job);
    assert_string_equal(job.failure_reason, "worker crashed 3 times: last exit signal 11 (SIGSEGV)");
    assert_int_equal(job.attempts, 3);
    pt_store_job_clear(&job);
    assert_true(has_transition(f, id, PT_JOB_QUEUED,
                               "worker crashed (exit signal 11 (SIGSEGV)); retry 2 of 2 starts over (no checkpoint yet)"));
    pt_store_step_series ser;
    expect_steps(f, id, 1, 1, &ser);   /* each run's step 1, stored once */
    pt_store_step_series_clear(&ser);
}

static void test_spawn_failure_fails_job(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "{}", id);
    const char *argv[] = {"/nonexistent/packtrain-worker", "worker", NULL};
    pt_scheduler_options o;
    sched_options(f, &o, argv, 1);
    start_with(f, &o);
    pt_store_job job;
    wait_state(f, id, PT_JOB_FAILED, &job);
    assert_string_equal(job.failure_reason,
                        "could not start the worker /nonexistent/packtrain-worker: no such file or directory");
    pt_store_job_clear(&job);
}

static void test_bad_config_fails_before_spawn(void **state)
{
    fixture *f = *state;
    char a[PT_STORE_ID_MAX], b[PT_STORE_ID_MAX], c[PT_STORE_ID_MAX];
    new_job(f, "{not json", a);
    new_job(f, "{\"max_runtime_seconds\":-1}", b);
    new_job(f, "[1]", c);
    start(f, "tests/data/sched_ok.sh", 1);
    pt_store_job job;
    wait_state(f, a, PT_JOB_FAILED, &job);
    assert_non_null(strstr(job.failure_reason, "could not prepare the worker: stored config: line 1: invalid JSON at column "));
    pt_store_job_clear(&job);
    wait_state(f, b, PT_JOB_FAILED, &job);
    assert_string_equal(job.failure_reason, "could not prepare the worker: stored config: "
                                            "max_runtime_seconds: must be a number of seconds > 0, or null");
    pt_store_job_clear(&job);
    wait_state(f, c, PT_JOB_FAILED, &job);
    assert_string_equal(job.failure_reason, "could not prepare the worker: stored config: the job "
                                            "configuration must be a JSON object, got an array");
    pt_store_job_clear(&job);
    pt_scheduler_stats st;
    pt_scheduler_stats_get(&f->sched, &st);
    assert_int_equal(st.spawned, 0);
}

static void test_malformed_lines_are_logged(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "{}", id);
    start(f, "tests/data/sched_garbage.sh", 1);
    wait_state(f, id, PT_JOB_SUCCEEDED, NULL);   /* the unterminated done line counted */
    pt_store_step_series ser;
    expect_steps(f, id, 1, 3, &ser);
    assert_true(ser.items[2].loss == 0.25);
    pt_store_step_series_clear(&ser);
    char *log = worker_log(f, id);
    assert_non_null(strstr(log, "rejected stdout line 1: not JSON: "));
    assert_non_null(strstr(log, "the line was: hello from a print statement"));
    assert_non_null(strstr(log, "rejected stdout line 3: field \"step\" is missing (required on step lines); "
                                "the line was: {\"kind\":\"step\"}"));
    assert_non_null(strstr(log, "rejected stdout line 5: field \"kind\": unknown kind \"teleport\""));
    assert_non_null(strstr(log, "rejected stdout line 7: 1100000 bytes, longer than the 1048576 allowed"));
    assert_non_null(strstr(log, "rejected stdout line 8: field \"epoch\": must be an integer >= 0, got \"zero\""));
    assert_null(strstr(log, "line 4:"));   /* the blank line is not an error */
    free(log);
}

static void test_stdout_held_open_is_given_up(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "{}", id);
    start(f, "tests/data/sched_escape.sh", 1);
    wait_state(f, id, PT_JOB_SUCCEEDED, NULL);
    char *log = worker_log(f, id);
    assert_non_null(strstr(log, "stdout still open 2000 ms after the worker exited; closing it"));
    free(log);
    char path[256];
    snprintf(path, sizeof(path), "%s/jobs/%s/escaped.pid", f->data, id);
    char *pid = read_text(path);
    assert_true(atoi(pid) > 0);
    snprintf(path, sizeof(path), "/proc/%d/comm", atoi(pid));
    char *comm = read_text(path);
    if (!strcmp(comm, "sleep\n")) kill(atoi(pid), SIGKILL);   /* the test's to clean up */
    free(comm);
    free(pid);
}

static void expect_init_error(pt_scheduler_options o, const char *msg)
{
    pt_scheduler s;
    assert_int_equal(pt_scheduler_init(&s, &o), -1);
    assert_string_equal(pt_scheduler_errmsg(&s), msg);
    pt_scheduler_close(&s);   /* harmless after a failed init */
}

static void test_init_and_start_errors(void **state)
{
    fixture *f = *state;
    const char *argv[] = {"/bin/true", NULL}, *empty[] = {NULL};
    pt_scheduler_options o;
    sched_options(f, &o, argv, 1);
    pt_scheduler s;
    assert_int_equal(pt_scheduler_init(&s, NULL), -1);
    assert_string_equal(pt_scheduler_errmsg(&s), "scheduler options are missing");
    pt_scheduler_options bad = o;
    bad.db_path = "";
    expect_init_error(bad, "scheduler option db_path is empty");
    bad = o;
    bad.data_dir = NULL;
    expect_init_error(bad, "scheduler option data_dir is empty");
    bad = o;
    bad.slots = 0;
    expect_init_error(bad, "scheduler option slots must be within 1..1024, got 0");
    bad = o;
    bad.worker_argv = empty;
    expect_init_error(bad, "scheduler option worker_argv must name the worker program");
    bad = o;
    bad.max_runtime_s = -1;
    expect_init_error(bad, "scheduler option max_runtime_s must be >= 0");
    bad = o;
    bad.cancel_grace_s = NAN;
    expect_init_error(bad, "scheduler option cancel_grace_s must be >= 0");
    bad = o;
    bad.max_attempts = -2;
    expect_init_error(bad, "scheduler option max_attempts must be >= 0 (0 = default)");
    bad = o;
    bad.poll_interval_ms = -5;
    expect_init_error(bad, "scheduler option poll_interval_ms must be >= 0 (0 = default)");
    const char *many[PT_SCHEDULER_ARGV_MAX + 2];
    for (int i = 0; i <= PT_SCHEDULER_ARGV_MAX; i++) many[i] = "x";
    many[PT_SCHEDULER_ARGV_MAX + 1] = NULL;
    bad = o;
    bad.worker_argv = many;
    expect_init_error(bad, "scheduler option worker_argv has 33 words, at most 32 allowed");

    bad = o;
    bad.db_path = "/nonexistent/dir/db.sqlite";
    assert_int_equal(pt_scheduler_init(&s, &bad), 0);
    assert_int_equal(pt_scheduler_start(&s), -1);
    assert_non_null(strstr(pt_scheduler_errmsg(&s), "cannot open the job database /nonexistent/dir/db.sqlite: "));
    assert_int_equal(pt_scheduler_drain(&s, 1), 0);   /* never started: nothing to wait for */
    pt_scheduler_close(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_success_records_everything, setup, teardown),
        cmocka_unit_test_setup_teardown(test_superseded_checkpoints_deleted_after_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_line_fails_with_its_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exit_zero_without_done_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_retries_and_resumes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_limit_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spawn_failure_fails_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_config_fails_before_spawn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_lines_are_logged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stdout_held_open_is_given_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_init_and_start_errors, setup, teardown),
    };
    return cmocka_run_group_tests_name("scheduler", tests, NULL, NULL);
}
