/* test_scheduler_disk.c — a job whose worker finds the disk full (issue 17
 * item 8), against a real SQLite file, libuv loop and child processes (the
 * tests/data/sched_diskfull.sh test double): the job goes back to the queue
 * with the worker's error and the checkpoint it will resume from, is not
 * started while the data directory has no room, resumes from that
 * checkpoint once there is room, with every step once; a job that finds the
 * disk full at every start fails after max_attempts with a clear reason.
 * The integration test (test_api_hardening.sh) fills a real disk, the
 * store's included. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/sched_fixture.h"

/* Room while DATA/full does not exist (the test double creates it). */
static int room_fn(void *ctx, char *why, size_t len)
{
    fixture *f = ctx;
    char path[256];
    snprintf(path, sizeof path, "%s/full", f->data);
    if (access(path, F_OK) != 0) return 1;
    snprintf(why, len, "DATA/full exists");
    return 0;
}

static int queued_for_disk(fixture *f, const char *id)
{
    pt_store_transition_list l;
    assert_int_equal(pt_store_job_transitions(f->s, OWNER, id, &l), PT_STORE_OK);
    int found = 0;
    for (size_t i = 0; i < l.n; i++)
        if (l.items[i].to == PT_JOB_QUEUED && !strncmp(l.items[i].reason, "the server's disk is full", 25)) found = 1;
    pt_store_transition_list_clear(&l);
    return found;
}

static void test_disk_full_waits_for_room_and_resumes(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "{}", id);
    const char *argv[] = {"/bin/sh", "tests/data/sched_diskfull.sh", NULL};
    pt_scheduler_options o;
    sched_options(f, &o, argv, 1);
    o.poll_interval_ms = 50;   /* room comes back without an event */
    o.has_room = room_fn;
    o.room_ctx = f;
    start_with(f, &o);
    for (int i = 0; i < 750 && !queued_for_disk(f, id); i++) sleep_ms(20);
    char want[512];
    snprintf(want, sizeof want, "the server's disk is full (%s/jobs/%s/ckpt-4.partial: cannot write: No space left on "
             "device); queued again: retry 1 of 2 resumes from checkpoint step 3 once the data directory has room",
             f->data, id);
    assert_true(has_transition(f, id, PT_JOB_QUEUED, want));
    /* no room: polled many times, not started again */
    sleep_ms(400);
    pt_store_job job;
    assert_int_equal(pt_store_job_get(f->s, OWNER, id, &job), PT_STORE_OK);
    assert_int_equal(job.state, PT_JOB_QUEUED);
    assert_int_equal(job.attempts, 1);
    pt_store_job_clear(&job);
    pthread_mutex_lock(&f->mu);
    assert_non_null(strstr(f->logs, "queued jobs wait until there is room: DATA/full exists"));
    pthread_mutex_unlock(&f->mu);
    /* room again: it resumes from the checkpoint and finishes */
    char full[256];
    snprintf(full, sizeof full, "%s/full", f->data);
    assert_int_equal(unlink(full), 0);
    wait_state(f, id, PT_JOB_SUCCEEDED, &job);
    assert_int_equal(job.attempts, 2);
    pt_store_job_clear(&job);
    pt_store_step_series ser;
    expect_steps(f, id, 1, 8, &ser);
    assert_true(ser.items[2].loss == 103.0);   /* kept: at the checkpoint */
    assert_true(ser.items[3].loss == 0.4);     /* the full disk's run's step 4 was discarded */
    pt_store_step_series_clear(&ser);
    char *log = worker_log(f, id);
    assert_non_null(strstr(log, "sched_diskfull: resumed from"));
    free(log);
    pt_scheduler_stats st;
    pt_scheduler_stats_get(&f->sched, &st);
    assert_int_equal(st.crashed, 0);   /* not a crash */
}

static void test_disk_full_every_time_fails(void **state)
{
    fixture *f = *state;
    char id[PT_STORE_ID_MAX];
    new_job(f, "{}", id);
    char always[256];
    assert_int_equal(mkdir(f->data, 0700), 0);
    snprintf(always, sizeof always, "%s/always", f->data);
    FILE *fp = fopen(always, "w");
    assert_non_null(fp);
    fclose(fp);
    start(f, "tests/data/sched_diskfull.sh", 1);   /* no room check: it starts at once each time */
    pt_store_job job;
    wait_state(f, id, PT_JOB_FAILED, &job);
    char want[512];
    snprintf(want, sizeof want, "the server's disk is full (%s/jobs/%s/ckpt-9.partial: cannot write: No space left on "
             "device); not retried after 3 such ends: free space on the server, then submit again (kept: "
             "checkpoint step 3)", f->data, id);
    assert_string_equal(job.failure_reason, want);
    assert_int_equal(job.attempts, 3);
    pt_store_job_clear(&job);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_disk_full_waits_for_room_and_resumes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_full_every_time_fails, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
