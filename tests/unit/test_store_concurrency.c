/* test_store_concurrency.c — several connections on one file: writer threads
 * hammering inserts with no SQLITE_BUSY surfacing, pagination that stays exact
 * while another connection inserts, and crash safety (a child process killed
 * with SIGKILL inside a transaction leaves a consistent, openable database). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "tests/unit/store_fixture.h"
#include "store/store_internal.h"

typedef store_fx fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (!f || store_fx_init(f, "store_conc", 1) != 0) return -1;
    if (store_fx_dataset(f->s, "alice", "ready", f->ds) != 0) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    store_fx_close(*state);
    free(*state);
    return 0;
}

static void new_job(pt_store *s, const char *ds, char id[PT_STORE_ID_MAX])
{
    pt_store_job_request req = {.owner = "alice", .dataset_id = ds, .config_json = "{\"epochs\":1}"};
    pt_store_job job;
    assert_int_equal(pt_store_job_create(s, &req, &job, NULL), PT_STORE_OK);
    memcpy(id, job.id, PT_STORE_ID_MAX);
    pt_store_job_clear(&job);
}

/* ---- writers hammering --------------------------------------------------- */

#define N_WRITERS 4
#define N_ROUNDS 100
#define BATCH 10

typedef struct worker {
    const fixture *f;
    char job[PT_STORE_ID_MAX];
    int failures;
    char first_error[256];
} worker;

static void note(worker *w, int rc, pt_store *s, const char *what)
{
    if (rc == PT_STORE_OK) return;
    if (!w->failures++)
        snprintf(w->first_error, sizeof(w->first_error), "%s: %s: %s", what, pt_store_status_name(rc),
                 pt_store_errmsg(s));
}

static void *writer_main(void *arg)
{
    worker *w = arg;
    pt_store *s = NULL;
    char err[200];
    if (pt_store_open(&s, w->f->path, err, sizeof(err)) != PT_STORE_OK) {
        w->failures++;
        snprintf(w->first_error, sizeof(w->first_error), "open: %s", err);
        return NULL;
    }
    note(w, pt_store_job_transition(s, NULL, w->job, PT_JOB_RUNNING, "start", NULL), s, "start");
    for (int r = 0; r < N_ROUNDS && !w->failures; r++) {
        pt_store_step_metric rows[BATCH];
        for (int i = 0; i < BATCH; i++)
            rows[i] = (pt_store_step_metric){.step = r * BATCH + i, .epoch = r / 10, .loss = 1.0, .mae = 0.5,
                                             .lr = 1e-3, .graphs_per_s = 100.0};
        size_t inserted = 0;
        note(w, pt_store_steps_append(s, w->job, rows, BATCH, &inserted), s, "append");
        if (inserted != BATCH) note(w, PT_STORE_CONFLICT, s, "append count");
        pt_store_progress p = {.progress = (r + 1) / (double)N_ROUNDS, .epoch = r / 10, .step = r * BATCH};
        note(w, pt_store_job_update_progress(s, w->job, &p), s, "progress");
        if (r % 10 == 9) {
            pt_store_epoch_metric e = {.epoch = r / 10, .step = r * BATCH + BATCH - 1, .val_mae = 1.0 / (r + 1)};
            note(w, pt_store_epoch_append(s, w->job, &e, NULL), s, "epoch");
            note(w, pt_store_checkpoint_record(s, w->job, r * BATCH, r / 10, "/ck"), s, "checkpoint");
            /* Contention on the jobs table too. */
            pt_store_job_request req = {.owner = "alice", .dataset_id = w->f->ds, .config_json = "{}"};
            pt_store_job extra;
            note(w, pt_store_job_create(s, &req, &extra, NULL), s, "create");
            pt_store_job_clear(&extra);
        }
        /* Readers beside the writers: a list and a metrics read. */
        pt_store_job_page page;
        note(w, pt_store_job_list(s, "alice", NULL, 10, NULL, &page), s, "list");
        pt_store_job_page_clear(&page);
        pt_store_step_series ser;
        note(w, pt_store_steps_read(s, "alice", w->job, -1, 50, &ser), s, "read");
        pt_store_step_series_clear(&ser);
    }
    note(w, pt_store_job_transition(s, NULL, w->job, PT_JOB_SUCCEEDED, "done", NULL), s, "finish");
    pt_store_close(s);
    return NULL;
}

static void test_writers_never_see_busy(void **state)
{
    fixture *f = *state;
    worker w[N_WRITERS];
    pthread_t th[N_WRITERS];
    memset(w, 0, sizeof(w));
    for (int i = 0; i < N_WRITERS; i++) {
        w[i].f = f;
        new_job(f->s, f->ds, w[i].job);
    }
    for (int i = 0; i < N_WRITERS; i++) assert_int_equal(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
    for (int i = 0; i < N_WRITERS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < N_WRITERS; i++) {
        if (w[i].failures) fail_msg("writer %d: %d failures, first: %s", i, w[i].failures, w[i].first_error);
        pt_store_step_series ser;
        assert_int_equal(pt_store_steps_read(f->s, "alice", w[i].job, -1, PT_STORE_POINTS_MAX, &ser), PT_STORE_OK);
        assert_int_equal(ser.total, N_ROUNDS * BATCH);
        pt_store_step_series_clear(&ser);
        pt_store_job j;
        assert_int_equal(pt_store_job_get(f->s, "alice", w[i].job, &j), PT_STORE_OK);
        assert_int_equal(j.state, PT_JOB_SUCCEEDED);
        /* created 1, +running, +N_ROUNDS progress, +10 epochs, +succeeded */
        assert_int_equal(j.version, 1 + 1 + N_ROUNDS + N_ROUNDS / 10 + 1);
        pt_store_job_clear(&j);
    }
}

/* ---- pagination while another connection inserts ------------------------- */

typedef struct inserter {
    const fixture *f;
    atomic_int stop;
    atomic_int inserted;
    int failures;
    char first_error[256];
} inserter;

static void *inserter_main(void *arg)
{
    inserter *in = arg;
    pt_store *s = NULL;
    if (pt_store_open(&s, in->f->path, NULL, 0) != PT_STORE_OK) {
        in->failures++;
        return NULL;
    }
    while (!atomic_load(&in->stop)) {
        pt_store_job_request req = {.owner = "alice", .dataset_id = in->f->ds, .config_json = "{}"};
        pt_store_job job;
        int rc = pt_store_job_create(s, &req, &job, NULL);
        if (rc && !in->failures++) snprintf(in->first_error, sizeof(in->first_error), "%s", pt_store_errmsg(s));
        pt_store_job_clear(&job);
        atomic_fetch_add(&in->inserted, 1);
    }
    pt_store_close(s);
    return NULL;
}

static void wait_for_more(inserter *in, int than)
{
    while (atomic_load(&in->inserted) <= than) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

#define N_ORIGINAL 57

static void test_pagination_exact_under_concurrent_inserts(void **state)
{
    fixture *f = *state;
    char original[N_ORIGINAL][PT_STORE_ID_MAX];
    for (int i = 0; i < N_ORIGINAL; i++) new_job(f->s, f->ds, original[i]);
    pt_store_job newest;
    assert_int_equal(pt_store_job_get(f->s, "alice", original[N_ORIGINAL - 1], &newest), PT_STORE_OK);

    inserter in = {.f = f};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, inserter_main, &in), 0);
    wait_for_more(&in, 0);

    int seen[N_ORIGINAL] = {0};
    int n_walked = 0, pages = 0;
    int64_t prev_at = INT64_MAX;
    char prev_id[PT_STORE_ID_MAX] = "~";
    char token[PT_STORE_PAGE_TOKEN_MAX] = "";
    do {
        pt_store_job_page page;
        assert_int_equal(pt_store_job_list(f->s, "alice", NULL, 5, token, &page), PT_STORE_OK);
        for (size_t i = 0; i < page.n; i++) {
            const pt_store_job *j = &page.items[i];
            /* strictly descending by (created_at, id) */
            assert_true(j->created_at < prev_at || (j->created_at == prev_at && strcmp(j->id, prev_id) < 0));
            prev_at = j->created_at;
            memcpy(prev_id, j->id, sizeof(prev_id));
            int k = -1;
            for (int o = 0; o < N_ORIGINAL; o++)
                if (!strcmp(original[o], j->id)) k = o;
            if (k >= 0) seen[k]++;
            else assert_true(j->created_at > newest.created_at);   /* only newer jobs may show up */
            n_walked++;
        }
        memcpy(token, page.next_token, sizeof(token));
        pt_store_job_page_clear(&page);
        pages++;
        /* Make sure inserts really happen between the page requests. */
        wait_for_more(&in, atomic_load(&in.inserted));
    } while (token[0]);
    atomic_store(&in.stop, 1);
    pthread_join(th, NULL);
    if (in.failures) fail_msg("inserter: %s", in.first_error);
    for (int o = 0; o < N_ORIGINAL; o++) assert_int_equal(seen[o], 1);
    assert_true(pages >= N_ORIGINAL / 5);
    assert_true(atomic_load(&in.inserted) >= pages);
    assert_true(n_walked >= N_ORIGINAL);
    pt_store_job_clear(&newest);
}

/* ---- the same Idempotency-Key from several connections at once ------------ */

typedef struct submitter {
    const fixture *f;
    char id[PT_STORE_ID_MAX];
    int created;
    int rc;
    char error[256];
} submitter;

static void *submitter_main(void *arg)
{
    submitter *sb = arg;
    pt_store *s = NULL;
    sb->rc = pt_store_open(&s, sb->f->path, sb->error, sizeof(sb->error));
    if (sb->rc) return NULL;
    pt_store_job_request req = {.owner = "alice", .dataset_id = sb->f->ds, .config_json = "{\"same\":1}",
                                .idempotency_key = "retry-storm"};
    pt_store_job job;
    sb->rc = pt_store_job_create(s, &req, &job, &sb->created);
    if (sb->rc) snprintf(sb->error, sizeof(sb->error), "%s", pt_store_errmsg(s));
    memcpy(sb->id, job.id, sizeof(sb->id));
    pt_store_job_clear(&job);
    pt_store_close(s);
    return NULL;
}

static void test_concurrent_idempotent_submissions_make_one_job(void **state)
{
    fixture *f = *state;
    submitter sb[6];
    pthread_t th[6];
    memset(sb, 0, sizeof(sb));
    for (int i = 0; i < 6; i++) {
        sb[i].f = f;
        assert_int_equal(pthread_create(&th[i], NULL, submitter_main, &sb[i]), 0);
    }
    for (int i = 0; i < 6; i++) pthread_join(th[i], NULL);
    int created = 0;
    for (int i = 0; i < 6; i++) {
        if (sb[i].rc) fail_msg("submitter %d: %s", i, sb[i].error);
        assert_string_equal(sb[i].id, sb[0].id);
        created += sb[i].created;
    }
    assert_int_equal(created, 1);
    int64_t counts[PT_JOB_STATE_COUNT];
    assert_int_equal(pt_store_job_count_by_state(f->s, "alice", counts), PT_STORE_OK);
    assert_int_equal(counts[PT_JOB_QUEUED], 1);
}

/* ---- crash safety ---------------------------------------------------------- */

static long long scalar(pt_store *s, const char *sql, const char *job)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(s->db, sql, -1, &st, NULL), SQLITE_OK);
    if (job) sqlite3_bind_text(st, 1, job, -1, SQLITE_TRANSIENT);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static void assert_consistent(const char *path, const char *job)
{
    pt_store *s = NULL;
    char err[256];
    if (pt_store_open(&s, path, err, sizeof(err)) != PT_STORE_OK) fail_msg("reopen after crash: %s", err);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(s->db, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
    sqlite3_finalize(st);
    assert_int_equal(scalar(s, "SELECT count(*) FROM pragma_foreign_key_check", NULL), 0);
    /* Batches are atomic: steps are 0..n-1 with n a multiple of the batch. */
    long long n = scalar(s, "SELECT count(*) FROM step_metrics WHERE job_id = ?", job);
    assert_int_equal(n % 50, 0);
    if (n) assert_int_equal(scalar(s, "SELECT max(step) FROM step_metrics WHERE job_id = ?", job), n - 1);
    /* The job's state is the end of an unbroken chain of transition rows. */
    assert_int_equal(scalar(s, "SELECT count(*) FROM job_transitions a JOIN job_transitions b "
                               "ON b.job_id = a.job_id AND b.seq = (SELECT min(seq) FROM job_transitions "
                               "WHERE job_id = a.job_id AND seq > a.seq) WHERE a.job_id = ?1 "
                               "AND b.from_state IS NOT a.to_state", job), 0);
    assert_int_equal(scalar(s, "SELECT (SELECT to_state FROM job_transitions WHERE job_id = ?1 ORDER BY seq "
                               "DESC LIMIT 1) = state FROM jobs WHERE id = ?1", job), 1);
    pt_store_close(s);
}

/* Child: loops over batches and state changes until killed. */
static void crash_child_loop(const char *path, const char *job, int ready_fd)
{
    pt_store *s = NULL;
    if (pt_store_open(&s, path, NULL, 0) != PT_STORE_OK) _exit(3);
    pt_store_step_series ser;
    if (pt_store_steps_read(s, NULL, job, -1, PT_STORE_POINTS_MAX, &ser) != PT_STORE_OK) _exit(4);
    int64_t next = ser.total;
    pt_store_step_series_clear(&ser);
    pt_store_step_metric rows[50];
    for (int round = 0;; round++) {
        for (int i = 0; i < 50; i++)
            rows[i] = (pt_store_step_metric){.step = next + i, .loss = 1.0, .json = "{\"pad\":\"padding-padding\"}"};
        if (pt_store_steps_append(s, job, rows, 50, NULL) != PT_STORE_OK) _exit(5);
        next += 50;
        pt_store_job j;
        if (pt_store_job_get(s, NULL, job, &j) != PT_STORE_OK) _exit(6);
        pt_job_state to = j.state == PT_JOB_RUNNING ? PT_JOB_QUEUED : PT_JOB_RUNNING;
        pt_store_job_clear(&j);
        if (pt_store_job_transition(s, NULL, job, to, "crash loop", NULL) != PT_STORE_OK) _exit(7);
        if (round == 2 && write(ready_fd, "r", 1) != 1) _exit(8);
    }
}

static void test_sigkill_in_loop_leaves_consistent_db(void **state)
{
    fixture *f = *state;
    char job[PT_STORE_ID_MAX];
    new_job(f->s, f->ds, job);
    for (int attempt = 0; attempt < 3; attempt++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            crash_child_loop(f->path, job, fds[1]);
        }
        close(fds[1]);
        char c;
        assert_int_equal(read(fds[0], &c, 1), 1);
        close(fds[0]);
        struct timespec ts = {0, (long)(3 + 7 * attempt) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));
        assert_consistent(f->path, job);
    }
}

/* Child: opens one big transaction (large enough to spill to the WAL before
 * commit), reports, and waits to be killed inside it. */
static void crash_child_mid_tx(const char *path, const char *job, int ready_fd)
{
    pt_store *s = NULL;
    if (pt_store_open(&s, path, NULL, 0) != PT_STORE_OK) _exit(3);
    if (pt_store_tx_begin(s, 1) != PT_STORE_OK) _exit(4);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "INSERT INTO step_metrics(job_id, step, epoch, at, json) "
                           "VALUES (?, ?, 0, 0, zeroblob(1000))", -1, &st, NULL) != SQLITE_OK) _exit(5);
    for (int i = 0; i < 20000; i++) {
        sqlite3_bind_text(st, 1, job, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(st, 2, 1000000 + i);
        if (sqlite3_step(st) != SQLITE_DONE) _exit(6);
        sqlite3_reset(st);
    }
    if (sqlite3_exec(s->db, "UPDATE jobs SET state = 'succeeded'", NULL, NULL, NULL) != SQLITE_OK) _exit(7);
    if (write(ready_fd, "r", 1) != 1) _exit(8);
    for (;;) pause();
}

static void test_sigkill_mid_transaction_rolls_back(void **state)
{
    fixture *f = *state;
    char job[PT_STORE_ID_MAX];
    new_job(f->s, f->ds, job);
    assert_int_equal(pt_store_job_transition(f->s, NULL, job, PT_JOB_RUNNING, "start", NULL), PT_STORE_OK);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        crash_child_mid_tx(f->path, job, fds[1]);
    }
    close(fds[1]);
    char c;
    assert_int_equal(read(fds[0], &c, 1), 1);
    close(fds[0]);
    char wal[160];
    snprintf(wal, sizeof(wal), "%s-wal", f->path);
    FILE *fp = fopen(wal, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long wal_bytes = ftell(fp);
    fclose(fp);
    assert_true(wal_bytes > 4 * 1024 * 1024);   /* uncommitted pages did reach the WAL */
    kill(pid, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));

    assert_consistent(f->path, job);
    pt_store *s = NULL;
    assert_int_equal(pt_store_open(&s, f->path, NULL, 0), PT_STORE_OK);
    pt_store_job j;
    assert_int_equal(pt_store_job_get(s, "alice", job, &j), PT_STORE_OK);
    assert_int_equal(j.state, PT_JOB_RUNNING);
    pt_store_job_clear(&j);
    pt_store_step_series ser;
    assert_int_equal(pt_store_steps_read(s, "alice", job, -1, 0, &ser), PT_STORE_OK);
    assert_int_equal(ser.total, 0);
    pt_store_step_series_clear(&ser);
    /* And the database takes writes again. */
    assert_int_equal(pt_store_job_transition(s, NULL, job, PT_JOB_SUCCEEDED, "after crash", NULL), PT_STORE_OK);
    pt_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_writers_never_see_busy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pagination_exact_under_concurrent_inserts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_idempotent_submissions_make_one_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigkill_in_loop_leaves_consistent_db, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigkill_mid_transaction_rolls_back, setup, teardown),
    };
    return cmocka_run_group_tests_name("store_concurrency", tests, NULL, NULL);
}
