/* sched_fixture.h — what the scheduler tests share: a fresh SQLite file and
 * data directory under /tmp per test, a dataset row, a scheduler running the
 * tests/data/sched_*.sh test doubles, and helpers that poll the store (with a
 * 15 s ceiling) until a job reaches a state.  Header-only (static inline), so
 * the Makefile's one-binary-per-test rule needs nothing extra. */
#ifndef PT_SCHED_FIXTURE_H
#define PT_SCHED_FIXTURE_H

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/sched/scheduler.h"
#include "store/store.h"
#include "tests/unit/tmp_fixture.h"

#define OWNER "alice"

typedef struct fixture {
    char dir[96], db[128], data[128];
    pt_store *s;
    char ds[PT_STORE_ID_MAX];
    pt_scheduler sched;
    int started;
    pthread_mutex_t mu;
    char logs[8192];
    int changes;
} fixture;

static inline void on_log(void *ctx, const char *line)
{
    fixture *f = ctx;
    pthread_mutex_lock(&f->mu);
    size_t n = strlen(f->logs);
    snprintf(f->logs + n, sizeof(f->logs) - n, "%s\n", line);
    pthread_mutex_unlock(&f->mu);
}

static inline void on_change(void *ctx, const char *id, int64_t version)
{
    fixture *f = ctx;
    assert_true(id[0] && version > 0);
    pthread_mutex_lock(&f->mu);
    f->changes++;
    pthread_mutex_unlock(&f->mu);
}

static inline int setup(void **state)
{
    static int serial;
    fixture *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    snprintf(f->dir, sizeof(f->dir), "/tmp/pt_sched_%d_%d", (int)getpid(), serial++);
    if (mkdir(f->dir, 0700) != 0) return -1;
    snprintf(f->db, sizeof(f->db), "%s/db.sqlite", f->dir);
    snprintf(f->data, sizeof(f->data), "%s/data", f->dir);
    if (pt_store_open(&f->s, f->db, NULL, 0) != PT_STORE_OK) return -1;
    pt_store_dataset d = {.owner = OWNER, .name = "set", .format = "ptd", .status = "ready"}, out;
    snprintf(d.path, sizeof(d.path), "%s/set.ptd", f->dir);
    if (pt_store_dataset_create(f->s, &d, &out) != PT_STORE_OK) return -1;
    memcpy(f->ds, out.id, sizeof(f->ds));
    pt_store_dataset_clear(&out);
    pthread_mutex_init(&f->mu, NULL);
    *state = f;
    return 0;
}

static inline int teardown(void **state)
{
    fixture *f = *state;
    if (f->started) pt_scheduler_close(&f->sched);
    pt_store_close(f->s);
    tfx_rmtree(f->dir);
    pthread_mutex_destroy(&f->mu);
    free(f);
    return 0;
}

static inline void sched_options(fixture *f, pt_scheduler_options *o, const char *const *argv, int slots)
{
    *o = (pt_scheduler_options){
        .db_path = f->db, .data_dir = f->data, .slots = slots, .worker_argv = argv,
        .cancel_grace_s = 0.3, .max_attempts = 3,
        .poll_interval_ms = 60000,   /* every wake-up under test must come from an event */
        .on_change = on_change, .change_ctx = f, .log = on_log, .log_ctx = f,
    };
}

static inline void start_with(fixture *f, const pt_scheduler_options *o)
{
    if (pt_scheduler_init(&f->sched, o) != 0) fail_msg("init: %s", pt_scheduler_errmsg(&f->sched));
    if (pt_scheduler_start(&f->sched) != 0) fail_msg("start: %s", pt_scheduler_errmsg(&f->sched));
    f->started = 1;
}

static inline void start(fixture *f, const char *script, int slots)
{
    const char *argv[] = {"/bin/sh", script, NULL};
    pt_scheduler_options o;
    sched_options(f, &o, argv, slots);
    start_with(f, &o);
}

static inline void stop(fixture *f)
{
    pt_scheduler_close(&f->sched);
    f->started = 0;
}

static inline void new_job(fixture *f, const char *config, char id[PT_STORE_ID_MAX])
{
    pt_store_job_request req = {.owner = OWNER, .dataset_id = f->ds, .config_json = config};
    pt_store_job job;
    assert_int_equal(pt_store_job_create(f->s, &req, &job, NULL), PT_STORE_OK);
    memcpy(id, job.id, PT_STORE_ID_MAX);
    pt_store_job_clear(&job);
}

/* The whole file ("" when missing); read in chunks since /proc files have no size. */
static inline char *read_text(const char *path)
{
    FILE *fp = fopen(path, "rb");
    size_t len = 0, cap = 4096;
    char *buf = calloc(1, cap + 1);
    assert_non_null(buf);
    if (!fp) return buf;
    size_t n;
    while ((n = fread(buf + len, 1, cap - len, fp)) > 0) {
        len += n;
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            assert_non_null(buf);
        }
    }
    buf[len] = '\0';
    fclose(fp);
    return buf;
}

static inline char *worker_log(fixture *f, const char *id)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/jobs/%s/worker.log", f->data, id);
    return read_text(path);
}

/* The worker log once it holds `text` (the scheduler notes a job's end in
 * the log just after it records the transition), or as it is after ~5 s. */
static inline char *worker_log_with(fixture *f, const char *id, const char *text)
{
    char *log = worker_log(f, id);
    for (int i = 0; i < 500 && !strstr(log, text); i++) {
        free(log);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        log = worker_log(f, id);
    }
    return log;
}

static inline void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Polls the store until the job is in `want` (15 s at most). */
static inline void wait_state(fixture *f, const char *id, pt_job_state want, pt_store_job *out)
{
    pt_store_job job;
    for (int i = 0; i < 750; i++) {
        assert_int_equal(pt_store_job_get(f->s, OWNER, id, &job), PT_STORE_OK);
        if (job.state == want) {
            if (out) *out = job;
            else pt_store_job_clear(&job);
            return;
        }
        pt_store_job_clear(&job);
        sleep_ms(20);
    }
    assert_int_equal(pt_store_job_get(f->s, OWNER, id, &job), PT_STORE_OK);
    char *log = worker_log(f, id);
    fail_msg("job %s is %s (reason \"%s\"), expected %s\nworker.log:\n%s\nscheduler:\n%s", id,
             pt_job_state_name(job.state), job.failure_reason, pt_job_state_name(want), log, f->logs);
}

/* Waits until the job has a worker pid recorded and at least `steps` steps. */
static inline int64_t wait_worker(fixture *f, const char *id, size_t steps)
{
    for (int i = 0; i < 750; i++) {
        pt_store_job job;
        pt_store_step_series ser;
        assert_int_equal(pt_store_job_get(f->s, OWNER, id, &job), PT_STORE_OK);
        assert_int_equal(pt_store_steps_read(f->s, OWNER, id, -1, PT_STORE_POINTS_MAX, &ser), PT_STORE_OK);
        int64_t pid = job.worker_pid;
        size_t n = ser.n;
        pt_store_job_clear(&job);
        pt_store_step_series_clear(&ser);
        if (pid > 0 && n >= steps) return pid;
        sleep_ms(20);
    }
    fail_msg("job %s never reported a worker with %zu steps", id, steps);
    return 0;
}

/* Exactly the steps first..last, each once; returns the series. */
static inline void expect_steps(fixture *f, const char *id, int64_t first, int64_t last, pt_store_step_series *out)
{
    assert_int_equal(pt_store_steps_read(f->s, OWNER, id, -1, PT_STORE_POINTS_MAX, out), PT_STORE_OK);
    assert_int_equal(out->n, (size_t)(last - first + 1));
    for (size_t i = 0; i < out->n; i++) assert_int_equal(out->items[i].step, first + (int64_t)i);
}

static inline int has_transition(fixture *f, const char *id, pt_job_state to, const char *reason)
{
    pt_store_transition_list l;
    assert_int_equal(pt_store_job_transitions(f->s, OWNER, id, &l), PT_STORE_OK);
    int found = 0;
    for (size_t i = 0; i < l.n; i++)
        if (l.items[i].to == to && !strcmp(l.items[i].reason, reason)) found = 1;
    pt_store_transition_list_clear(&l);
    return found;
}

/* A live (non-zombie) process in group `pgid`? */
static inline int group_alive(int64_t pgid)
{
    DIR *d = opendir("/proc");
    assert_non_null(d);
    int alive = 0;
    struct dirent *e;
    while (!alive && (e = readdir(d))) {
        char path[300], buf[512];
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        FILE *fp = fopen(path, "r");
        if (!fp) continue;
        size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
        fclose(fp);
        buf[n] = '\0';
        char *rp = strrchr(buf, ')');
        char st;
        long ppid, pgrp;
        if (rp && sscanf(rp + 1, " %c %ld %ld", &st, &ppid, &pgrp) == 3 && pgrp == pgid && st != 'Z') alive = 1;
    }
    closedir(d);
    return alive;
}

static inline void wait_group_gone(int64_t pgid)
{
    for (int i = 0; i < 100 && group_alive(pgid); i++) sleep_ms(20);
    assert_false(group_alive(pgid));
}

#endif
