/* test_scheduler_stop.c — the scheduler stopping and restarting workers,
 * with real processes (tests/data/sched_*.sh): cancel honoured on SIGTERM,
 * SIGKILL for a worker that ignores it, a cancelled queued job never starting,
 * max_runtime_seconds, the slot bound, restart recovery (requeue, resume from
 * the checkpoint, stale worker killed, cancelling -> stopped) and a drain
 * that leaves jobs running for the next start (but a job whose worker
 * reported done on the way out is recorded as succeeded). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <spawn.h>
#include <sys/wait.h>

#include "tests/unit/sched_fixture.h"

extern char **environ;

static void test_cancel_running_is_graceful(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "{}", id);
    const char *argv[] = {"/bin/sh", "tests/data/sched_graceful.sh", NULL};
    pt_scheduler_options o;
    sched_options(f, &o, argv, 1);
    o.cancel_grace_s = 5;   /* ample, so a loaded machine cannot turn this into a SIGKILL */
    start_with(f, &o);
    int64_t pid = wait_worker(f, id, 2);
    assert_int_equal(pt_store_job_cancel(f->s, OWNER, id, "cancelled by alice", NULL), PT_STORE_OK);
    pt_scheduler_notify(&f->sched);
    pt_store_job job;
    /* it ran: stopped (not cancelled, which is for jobs that never ran) */
    wait_state(f, id, PT_JOB_STOPPED, &job);
    assert_string_equal(job.stop_reason, "cancelled");
    assert_string_equal(job.failure_reason, "");
    pt_store_job_clear(&job);
    assert_true(has_transition(f, id, PT_JOB_STOPPED, "cancelled; worker stopped on SIGTERM (exit status 0)"));
    /* The checkpoint the worker wrote on SIGTERM is recorded. */
    pt_store_checkpoint ck;
    assert_int_equal(pt_store_checkpoint_latest(f->s, OWNER, id, &ck), PT_STORE_OK);
    assert_true(ck.step >= 2);
    char *log = worker_log(f, id);
    assert_non_null(strstr(log, "sending SIGTERM (job cancelled)"));
    assert_non_null(strstr(log, "sched_graceful: got SIGTERM"));
    free(log);
    wait_group_gone(pid);
}

static void test_cancel_ignoring_sigterm_gets_sigkill(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "{}", id);
    start(f, "tests/data/sched_hang.sh", 1);
    int64_t pid = wait_worker(f, id, 0);
    assert_true(group_alive(pid));
    assert_int_equal(pt_store_job_cancel(f->s, OWNER, id, "cancelled by alice", NULL), PT_STORE_OK);
    pt_scheduler_notify(&f->sched);
    wait_state(f, id, PT_JOB_STOPPED, NULL);
    assert_true(has_transition(f, id, PT_JOB_STOPPED,
                               "cancelled; worker killed with SIGKILL after the grace period (exit signal 9 (SIGKILL))"));
    char *log = worker_log(f, id);
    assert_non_null(strstr(log, "worker still running after the grace period; sending SIGKILL"));
    free(log);
    wait_group_gone(pid);   /* the sleeping child went too */
}

static void test_cancel_queued_never_starts(void **state)
{
    fixture *f = *state;
    char a[PT_STORE_ID_MAX], b[PT_STORE_ID_MAX];
    new_job(f, "{}", a);
    new_job(f, "{}", b);
    start(f, "tests/data/sched_graceful.sh", 1);
    wait_worker(f, a, 1);
    assert_int_equal(pt_store_job_cancel(f->s, OWNER, b, "not needed", NULL), PT_STORE_OK);
    pt_scheduler_notify(&f->sched);
    assert_int_equal(pt_store_job_cancel(f->s, OWNER, a, "not needed either", NULL), PT_STORE_OK);
    pt_scheduler_notify(&f->sched);
    wait_state(f, a, PT_JOB_STOPPED, NULL);
    sleep_ms(200);   /* the freed slot has been offered by now */
    pt_store_job job;
    assert_int_equal(pt_store_job_get(f->s, OWNER, b, &job), PT_STORE_OK);
    assert_int_equal(job.state, PT_JOB_CANCELLED);
    assert_int_equal(job.attempts, 0);
    pt_store_job_clear(&job);
    char path[256];
    snprintf(path, sizeof(path), "%s/jobs/%s", f->data, b);
    assert_int_equal(access(path, F_OK), -1);
    pt_scheduler_stats st;
    pt_scheduler_stats_get(&f->sched, &st);
    assert_int_equal(st.spawned, 1);
}

static void test_max_runtime_stops_job(void **state)
{
    fixture *f = *state;
    char a[PT_STORE_ID_MAX], b[PT_STORE_ID_MAX];
    new_job(f, "{\"max_runtime_seconds\":0.4}", a);
    new_job(f, "{}", b);
    const char *argv[] = {"/bin/sh", "tests/data/sched_hang.sh", NULL};
    pt_scheduler_options o;
    sched_options(f, &o, argv, 2);
    o.max_runtime_s = 0.6;
    start_with(f, &o);
    pt_store_job job;
    /* stopped, not failed: a run cut short by its time budget */
    wait_state(f, a, PT_JOB_STOPPED, &job);
    assert_string_equal(job.stop_reason, "max_runtime");
    assert_string_equal(job.failure_reason, "");
    pt_store_job_clear(&job);
    wait_state(f, b, PT_JOB_STOPPED, &job);
    assert_string_equal(job.stop_reason, "max_runtime");
    pt_store_job_clear(&job);
    assert_true(has_transition(f, a, PT_JOB_STOPPED, "stopped after max_runtime_seconds=0.4; worker killed with "
                                                   "SIGKILL after the grace period (exit signal 9 (SIGKILL))"));
    char *log = worker_log(f, a);
    assert_non_null(strstr(log, "max_runtime_seconds=0.4 reached"));
    assert_non_null(strstr(log, "sending SIGKILL"));   /* sched_hang ignores SIGTERM */
    free(log);
}

static void test_slots_bound_concurrency(void **state)
{
    fixture *f = *state;
    enum { N = 5 };
    char bad[PT_STORE_ID_MAX], ids[N][PT_STORE_ID_MAX];
    /* The first job cannot start (its worker.log is a directory): the slot it
     * frees at once must not let the next poll overbook the other slot. */
    new_job(f, "{}", bad);
    char path[256];
    snprintf(path, sizeof(path), "mkdir -p '%s/jobs/%s/worker.log'", f->data, bad);
    assert_int_equal(system(path), 0);
    for (int i = 0; i < N; i++) new_job(f, "{}", ids[i]);
    start(f, "tests/data/sched_slots.sh", 2);
    pt_store_job failed;
    wait_state(f, bad, PT_JOB_FAILED, &failed);
    snprintf(path, sizeof(path), "could not start the worker: cannot open %s/jobs/%s/worker.log: Is a directory",
             f->data, bad);
    assert_string_equal(failed.failure_reason, path);
    pt_store_job_clear(&failed);
    int64_t start_at[N], end_at[N];
    for (int i = 0; i < N; i++) {
        pt_store_job job;
        wait_state(f, ids[i], PT_JOB_SUCCEEDED, &job);
        start_at[i] = job.started_at;
        end_at[i] = job.finished_at;
        pt_store_job_clear(&job);
    }
    /* [claimed, finished] spans contain each worker's life: at most 2 overlap. */
    int peak = 0;
    for (int i = 0; i < N; i++) {
        int overlap = 0;
        for (int k = 0; k < N; k++) overlap += start_at[k] <= start_at[i] && start_at[i] < end_at[k];
        if (overlap > peak) peak = overlap;
    }
    assert_int_equal(peak, 2);
    pt_scheduler_stats st;
    pt_scheduler_stats_get(&f->sched, &st);
    assert_int_equal(st.slots, 2);
    assert_int_equal(st.peak_active, 2);
    assert_int_equal(st.spawned, N);
    assert_int_equal(st.active, 0);
}

static void test_restart_recovery_resumes(void **state)
{
    fixture *f = *state;
    char a[PT_STORE_ID_MAX], b[PT_STORE_ID_MAX];
    new_job(f, "{}", a);
    new_job(f, "{}", b);
    /* What a killed server leaves: `a` running with a checkpoint at step 3 and
     * steps 1..5, its pid pointing at an unrelated process (this test, which
     * must survive), and `b` half-way through a cancel with its old worker
     * still alive in its own session. */
    pt_store_job job;
    assert_int_equal(pt_store_job_claim_next(f->s, "old server", &job), PT_STORE_OK);
    assert_string_equal(job.id, a);
    pt_store_job_clear(&job);
    assert_int_equal(pt_store_job_set_worker(f->s, a, getpid()), PT_STORE_OK);
    assert_int_equal(pt_store_job_claim_next(f->s, "old server", NULL), PT_STORE_OK);
    assert_int_equal(pt_store_job_cancel(f->s, OWNER, b, "cancel during crash", NULL), PT_STORE_OK);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    char *stale_argv[] = {"/bin/sh", "-c", "sleep 20; true", "stale-worker", "--job", b, NULL};
    pid_t stale;
    assert_int_equal(posix_spawn(&stale, "/bin/sh", NULL, &attr, stale_argv, environ), 0);
    posix_spawnattr_destroy(&attr);
    assert_int_equal(pt_store_job_set_worker(f->s, b, stale), PT_STORE_OK);
    char ckpt[256];
    snprintf(ckpt, sizeof(ckpt), "%s/jobs/%s/ckpt-3", f->data, a);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", ckpt);
    assert_int_equal(system(cmd), 0);
    pt_store_step_metric rows[5];
    for (int i = 0; i < 5; i++) rows[i] = (pt_store_step_metric){.step = i + 1, .loss = 101 + i, .lr = NAN,
                                                                  .mae = NAN, .graphs_per_s = NAN};
    assert_int_equal(pt_store_steps_append(f->s, a, rows, 5, NULL), PT_STORE_OK);
    assert_int_equal(pt_store_checkpoint_record(f->s, a, 3, 0, ckpt), PT_STORE_OK);

    start(f, "tests/data/sched_resume.sh", 1);
    wait_state(f, a, PT_JOB_SUCCEEDED, &job);
    assert_int_equal(job.attempts, 2);
    pt_store_job_clear(&job);
    assert_true(has_transition(f, a, PT_JOB_QUEUED, "server restarted; resuming from checkpoint step 3"));
    wait_state(f, b, PT_JOB_STOPPED, NULL);
    assert_true(has_transition(f, b, PT_JOB_STOPPED, "server restarted while the job was cancelling"));
    int status = 0;
    pid_t reaped = 0;
    for (int i = 0; i < 250 && reaped == 0; i++) {
        reaped = waitpid(stale, &status, WNOHANG);
        if (reaped == 0) sleep_ms(20);
    }
    if (reaped == 0) kill(stale, SIGKILL);
    assert_int_equal(reaped, stale);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    wait_group_gone(stale);   /* its sleep went with it */
    pthread_mutex_lock(&f->mu);
    assert_non_null(strstr(f->logs, "killed the previous server's worker pid"));
    pthread_mutex_unlock(&f->mu);
    pt_store_step_series ser;
    expect_steps(f, a, 1, 8, &ser);
    assert_true(ser.items[2].loss == 103.0);
    assert_true(ser.items[3].loss == 0.4);
    pt_store_step_series_clear(&ser);
}

/* The app's check of a checkpoint file (the format's CRC); here: a path
 * naming "damaged" is not whole. */
static int checkpoint_ok(void *ctx, const char *path, char *why, size_t len)
{
    (void)ctx;
    if (!strstr(path, "damaged")) return 1;
    snprintf(why, len, "%s: state_crc32 does not match", path);
    return 0;
}

/* Issue 17 F5: a truncated latest checkpoint failed the job for good (one
 * was kept, and resumed from blindly).  Now the newest that passes the
 * check is resumed from, and the metrics are cut back to it. */
static void test_damaged_latest_checkpoint_falls_back(void **state)
{
    fixture *f = *state;
    char a[PT_STORE_ID_MAX];
    new_job(f, "{}", a);
    pt_store_job job;
    assert_int_equal(pt_store_job_claim_next(f->s, "old server", &job), PT_STORE_OK);
    pt_store_job_clear(&job);
    char good[256], bad[256], cmd[600];
    snprintf(good, sizeof good, "%s/jobs/%s/ckpt-3", f->data, a);
    snprintf(bad, sizeof bad, "%s/jobs/%s/ckpt-5-damaged", f->data, a);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' '%s'", good, bad);
    assert_int_equal(system(cmd), 0);
    pt_store_step_metric rows[5];
    for (int i = 0; i < 5; i++) rows[i] = (pt_store_step_metric){.step = i + 1, .loss = 101 + i, .lr = NAN,
                                                                  .mae = NAN, .graphs_per_s = NAN};
    assert_int_equal(pt_store_steps_append(f->s, a, rows, 5, NULL), PT_STORE_OK);
    assert_int_equal(pt_store_checkpoint_record(f->s, a, 3, 0, good), PT_STORE_OK);
    assert_int_equal(pt_store_checkpoint_record(f->s, a, 5, 0, bad), PT_STORE_OK);

    const char *argv[] = {"/bin/sh", "tests/data/sched_resume.sh", NULL};
    pt_scheduler_options o;
    sched_options(f, &o, argv, 1);
    o.checkpoint_ok = checkpoint_ok;
    start_with(f, &o);
    wait_state(f, a, PT_JOB_SUCCEEDED, &job);   /* sched_resume.sh insists on --resume OUT/ckpt-3 */
    assert_int_equal(job.attempts, 2);
    pt_store_job_clear(&job);
    char *log = worker_log_with(f, a, "trying the one before");
    if (!strstr(log, "checkpoint of step 5 cannot be resumed from (") ||
        !strstr(log, "ckpt-5-damaged: state_crc32 does not match); trying the one before"))
        fail_msg("worker.log does not say why step 5 was passed over:\n%s", log);
    free(log);
    pt_store_step_series ser;
    expect_steps(f, a, 1, 8, &ser);
    assert_true(ser.items[2].loss == 103.0);   /* kept: at or before the checkpoint used */
    assert_true(ser.items[3].loss == 0.4);     /* redone by the resumed run */
    pt_store_step_series_clear(&ser);
}

static void test_drain_leaves_jobs_for_next_start(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "{}", id);
    start(f, "tests/data/sched_graceful.sh", 1);
    int64_t pid = wait_worker(f, id, 3);
    assert_int_equal(pt_scheduler_drain(&f->sched, 2.0), 0);
    pt_scheduler_stats st;
    pt_scheduler_stats_get(&f->sched, &st);
    assert_int_equal(st.draining, 1);
    assert_int_equal(st.active, 0);
    wait_group_gone(pid);
    /* Drain returned after the SIGTERM checkpoint was written to the store. */
    pt_store_job job;
    assert_int_equal(pt_store_job_get(f->s, OWNER, id, &job), PT_STORE_OK);
    assert_int_equal(job.state, PT_JOB_RUNNING);
    pt_store_job_clear(&job);
    pt_store_checkpoint ck;
    assert_int_equal(pt_store_checkpoint_latest(f->s, OWNER, id, &ck), PT_STORE_OK);
    assert_true(ck.step >= 3);
    pt_scheduler_notify(&f->sched);   /* ignored once drained */
    assert_int_equal(pt_scheduler_drain(&f->sched, 1.0), 0);
    stop(f);

    start(f, "tests/data/sched_ok.sh", 1);
    wait_state(f, id, PT_JOB_SUCCEEDED, NULL);
    char reason[128];
    snprintf(reason, sizeof(reason), "server restarted; resuming from checkpoint step %lld", (long long)ck.step);
    assert_true(has_transition(f, id, PT_JOB_QUEUED, reason));
    pt_store_step_series ser;
    expect_steps(f, id, 1, 250, &ser);
    assert_true(ser.items[ck.step - 1].loss == 1.0);   /* the drained run's last step */
    assert_true(ser.items[ck.step].loss == (double)(ck.step + 1) + 0.5);   /* the resumed run's first */
    pt_store_step_series_clear(&ser);
    char *log = worker_log(f, id);
    assert_non_null(strstr(log, "server draining: job left running for the next start"));
    char want[512];
    snprintf(want, sizeof(want), "resume %s/jobs/%s/checkpoint", f->data, id);
    assert_non_null(strstr(log, want));
    free(log);
}

static void test_drain_keeps_a_finished_job_finished(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "{}", id);
    assert_int_equal(setenv("SCHED_TEST_DONE_ON_TERM", "1", 1), 0);   /* before any thread starts */
    start(f, "tests/data/sched_graceful.sh", 1);
    wait_worker(f, id, 1);
    assert_int_equal(pt_scheduler_drain(&f->sched, 2.0), 0);
    stop(f);
    unsetenv("SCHED_TEST_DONE_ON_TERM");
    pt_store_job job;
    assert_int_equal(pt_store_job_get(f->s, OWNER, id, &job), PT_STORE_OK);
    assert_int_equal(job.state, PT_JOB_SUCCEEDED);
    pt_store_job_clear(&job);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cancel_running_is_graceful, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_ignoring_sigterm_gets_sigkill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_queued_never_starts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_runtime_stops_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slots_bound_concurrency, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_recovery_resumes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_latest_checkpoint_falls_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain_leaves_jobs_for_next_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain_keeps_a_finished_job_finished, setup, teardown),
    };
    return cmocka_run_group_tests_name("scheduler_stop", tests, NULL, NULL);
}
