/* test_store_schema.c — opening the store: pragmas, migrations (fresh,
 * reopen, in order, atomic, newer-version refusal), open errors, the busy
 * error, and the shared helpers (ids, SHA-256, state names, the keyset page
 * reader every list uses). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "tests/unit/store_fixture.h"
#include "store/store_internal.h"

typedef store_fx fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (!f || store_fx_init(f, "store_schema", 0) != 0) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    store_fx_close(*state);
    free(*state);
    return 0;
}

/* Runs one SQL statement on a raw connection and returns its first integer. */
static long long raw_int(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    long long v = -1;
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static void raw_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static void test_fresh_open_applies_schema_and_pragmas(void **state)
{
    fixture *f = *state;
    pt_store *s = NULL;
    char err[256];
    assert_int_equal(pt_store_open(&s, f->path, err, sizeof(err)), PT_STORE_OK);
    assert_string_equal(err, "");
    int v = -1;
    assert_int_equal(pt_store_schema_version(s, &v), PT_STORE_OK);
    assert_int_equal(v, pt_store_schema_latest());
    assert_true(v >= 1);

    sqlite3_stmt *st = NULL;
    assert_int_equal(pt_store_stmt(s, "PRAGMA foreign_keys", &st), PT_STORE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 1);
    sqlite3_reset(st);
    assert_int_equal(pt_store_stmt(s, "PRAGMA synchronous", &st), PT_STORE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 2);   /* FULL */
    sqlite3_reset(st);
    pt_store_close(s);

    /* WAL is persistent in the file; every migration is listed in order. */
    assert_int_equal(raw_int(f->path, "SELECT journal_mode = 'wal' FROM pragma_journal_mode"), 1);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM schema_migrations"), pt_store_schema_latest());
    assert_int_equal(raw_int(f->path, "SELECT max(version) FROM schema_migrations"), pt_store_schema_latest());
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM sqlite_master WHERE name IN ('datasets', "
                                      "'jobs', 'job_transitions', 'step_metrics', 'epoch_metrics', "
                                      "'checkpoints', 'tokens', 'idempotency_keys')"), 8);
}

static void test_reopen_keeps_data_and_does_not_remigrate(void **state)
{
    fixture *f = *state;
    pt_store *s = NULL;
    assert_int_equal(pt_store_open(&s, f->path, NULL, 0), PT_STORE_OK);
    pt_store_dataset d = {.owner = "alice", .name = "qm9", .path = "/x/qm9.xyz", .format = "xyz",
                          .status = "ready", .n_structs = 3};
    pt_store_dataset made;
    assert_int_equal(pt_store_dataset_create(s, &d, &made), PT_STORE_OK);
    pt_store_close(s);

    assert_int_equal(pt_store_open(&s, f->path, NULL, 0), PT_STORE_OK);
    pt_store_dataset got;
    assert_int_equal(pt_store_dataset_get(s, "alice", made.id, &got), PT_STORE_OK);
    assert_int_equal(got.n_structs, 3);
    pt_store_dataset_clear(&got);
    pt_store_dataset_clear(&made);
    pt_store_close(s);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM schema_migrations"), pt_store_schema_latest());
}

static void test_newer_schema_is_refused(void **state)
{
    fixture *f = *state;
    pt_store *s = NULL;
    assert_int_equal(pt_store_open(&s, f->path, NULL, 0), PT_STORE_OK);
    pt_store_close(s);
    raw_exec(f->path, "PRAGMA user_version=99");
    char err[256];
    s = (pt_store *)1;
    assert_int_equal(pt_store_open(&s, f->path, err, sizeof(err)), PT_STORE_TOO_NEW);
    assert_null(s);
    assert_non_null(strstr(err, "schema version 99 is newer"));
    assert_non_null(strstr(err, f->path));
}

/* The real migrations, then two of the test's own. */
static const char **with_extra(const char *a, const char *b, int *n)
{
    static const char *list[64];
    int k = 0;
    for (; k < pt_store_n_migrations; k++) list[k] = pt_store_migrations[k];
    list[k++] = a;
    list[k++] = b;
    *n = k;
    return list;
}

static void test_migrations_run_in_order_and_atomically(void **state)
{
    fixture *f = *state;
    pt_store *s = NULL;
    int latest = pt_store_n_migrations, n = 0;
    assert_int_equal(pt_store_schema_latest(), latest);
    assert_int_equal(pt_store_open(&s, f->path, NULL, 0), PT_STORE_OK);

    /* The second extra version fails: neither extra one may remain. */
    const char **bad = with_extra("CREATE TABLE extra(x)", "CREATE TABLE extra(y)", &n);
    assert_int_equal(pt_store_migrate(s, bad, n), PT_STORE_IO);
    char want[64];
    snprintf(want, sizeof want, "migration to schema version %d failed", latest + 2);
    assert_non_null(strstr(pt_store_errmsg(s), want));
    assert_non_null(strstr(pt_store_errmsg(s), "already exists"));
    int v = 0;
    assert_int_equal(pt_store_schema_version(s, &v), PT_STORE_OK);
    assert_int_equal(v, latest);
    pt_store_close(s);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM sqlite_master WHERE name = 'extra'"), 0);

    /* The insert only works after the table of the migration before it. */
    assert_int_equal(pt_store_open(&s, f->path, NULL, 0), PT_STORE_OK);
    const char **good = with_extra("CREATE TABLE extra(x)", "INSERT INTO extra VALUES (7)", &n);
    assert_int_equal(pt_store_migrate(s, good, n), PT_STORE_OK);
    assert_int_equal(pt_store_schema_version(s, &v), PT_STORE_OK);
    assert_int_equal(v, latest + 2);
    /* Now the real list is older than the file. */
    assert_int_equal(pt_store_migrate(s, pt_store_migrations, latest), PT_STORE_TOO_NEW);
    snprintf(want, sizeof want, "schema version %d is newer", latest + 2);
    assert_non_null(strstr(pt_store_errmsg(s), want));
    pt_store_close(s);
    assert_int_equal(raw_int(f->path, "SELECT x FROM extra"), 7);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM schema_migrations"), latest + 2);
    assert_int_equal(raw_int(f->path, "SELECT max(version) = count(*) FROM schema_migrations"), 1);
}

/* A database made by the release with one migration upgrades in place
 * with its rows: migration 2 gives its job an empty result, migration 3
 * numbers the events of its jobs in the order they were stored
 * (transitions, epochs and steps by time), migration 4 rebuilds the jobs
 * table (a new state) keeping every row and its children. */
static void test_upgrade_from_version_1(void **state)
{
    fixture *f = *state;
    pt_store *s = NULL;
    /* schema 1 with rows a version-1 server would have stored */
    raw_exec(f->path, pt_store_migrations[0]);
    raw_exec(f->path, "PRAGMA user_version=1;"
                      "INSERT INTO datasets(id, owner, name, path, format, created_at, status)"
                      " VALUES ('ds_1', 'alice', 'd', '/x', 'xyz', 1, 'ready');"
                      "INSERT INTO jobs(id, owner, dataset_id, config_json, config_hash, state, created_at)"
                      " VALUES ('job_1', 'alice', 'ds_1', '{}', 'h', 'succeeded', 10);"
                      "INSERT INTO job_transitions(job_id, from_state, to_state, at, reason) VALUES"
                      " ('job_1', NULL, 'queued', 10, 'a'), ('job_1', 'queued', 'running', 20, 'b'),"
                      " ('job_1', 'running', 'succeeded', 90, 'c');"
                      "INSERT INTO step_metrics(job_id, step, epoch, at) VALUES ('job_1', 1, 0, 30), ('job_1', 2, 0, 40),"
                      " ('job_1', 3, 1, 60);"
                      "INSERT INTO epoch_metrics(job_id, epoch, step, at) VALUES ('job_1', 1, 2, 50), ('job_1', 2, 3, 70);");
    assert_int_equal(pt_store_open(&s, f->path, NULL, 0), PT_STORE_OK);
    pt_store_events ev;
    assert_int_equal(pt_store_events_read(s, "alice", "job_1", 0, 100, &ev), PT_STORE_OK);
    assert_int_equal(ev.last_id, 8);
    assert_int_equal(ev.transitions.n, 3);
    assert_int_equal(ev.transitions.items[0].event_id, 1);
    assert_int_equal(ev.transitions.items[1].event_id, 2);
    assert_int_equal(ev.transitions.items[2].event_id, 8);
    assert_int_equal(ev.steps.n, 3);
    assert_int_equal(ev.steps.items[0].event_id, 3);
    assert_int_equal(ev.steps.items[1].event_id, 4);
    assert_int_equal(ev.epochs.items[0].event_id, 5);
    assert_int_equal(ev.steps.items[2].event_id, 6);
    assert_int_equal(ev.epochs.items[1].event_id, 7);
    pt_store_events_clear(&ev);
    /* new rows continue the job's sequence */
    assert_int_equal(pt_store_job_transition(s, NULL, "job_1", PT_JOB_RUNNING, "x", NULL), PT_STORE_ILLEGAL_TRANSITION);
    pt_store_step_metric m = {.step = 4, .epoch = 2, .loss = 1};
    assert_int_equal(pt_store_steps_append(s, "job_1", &m, 1, NULL), PT_STORE_OK);
    assert_int_equal(pt_store_events_read(s, "alice", "job_1", 8, 100, &ev), PT_STORE_OK);
    assert_int_equal(ev.steps.n, 1);
    assert_int_equal(ev.steps.items[0].event_id, 9);
    assert_int_equal(ev.last_id, 9);
    pt_store_events_clear(&ev);
    pt_store_job j;
    assert_int_equal(pt_store_job_get(s, "alice", "job_1", &j), PT_STORE_OK);
    assert_int_equal(j.state, PT_JOB_SUCCEEDED);
    assert_null(j.result_json);
    assert_string_equal(j.dataset_id, "ds_1");
    assert_string_equal(j.tags_json, "[]");
    assert_string_equal(j.metadata_json, "{}");
    assert_string_equal(j.name, "");
    pt_store_job_clear(&j);
    int v = 0;
    assert_int_equal(pt_store_schema_version(s, &v), PT_STORE_OK);
    assert_int_equal(v, pt_store_schema_latest());
    pt_store_close(s);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM job_transitions WHERE job_id = 'job_1'"), 3);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM pragma_foreign_key_list('step_metrics') "
                                      "WHERE \"table\" = 'jobs'"), 1);
}

static void test_open_errors(void **state)
{
    fixture *f = *state;
    pt_store *s = NULL;
    char err[256];
    assert_int_equal(pt_store_open(&s, "", err, sizeof(err)), PT_STORE_INVALID);
    assert_string_equal(err, "store: empty database path");

    assert_int_equal(pt_store_open(&s, "/nonexistent-dir-pt/db.sqlite", err, sizeof(err)), PT_STORE_IO);
    assert_null(s);
    assert_non_null(strstr(err, "/nonexistent-dir-pt/db.sqlite: open: unable to open database file"));

    char garbage[160];
    snprintf(garbage, sizeof(garbage), "%s.garbage", f->path);
    FILE *fp = fopen(garbage, "w");
    assert_non_null(fp);
    for (int i = 0; i < 512; i++) fputs("this is not sqlite ", fp);
    fclose(fp);
    assert_int_equal(pt_store_open(&s, garbage, err, sizeof(err)), PT_STORE_IO);
    assert_null(s);
    assert_non_null(strstr(err, "file is not a database"));
}

static void test_busy_surfaces_after_timeout(void **state)
{
    fixture *f = *state;
    pt_store *s = NULL;
    assert_int_equal(pt_store_open(&s, f->path, NULL, 0), PT_STORE_OK);
    assert_int_equal(pt_store_set_busy_timeout(s, -1), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(s), "busy timeout must be >= 0 ms, got -1");
    assert_int_equal(pt_store_set_busy_timeout(s, 50), PT_STORE_OK);

    sqlite3 *holder = NULL;
    assert_int_equal(sqlite3_open(f->path, &holder), SQLITE_OK);
    assert_int_equal(sqlite3_exec(holder, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    pt_store_dataset d = {.owner = "alice", .name = "n", .path = "/p", .format = "xyz", .status = "ready"};
    assert_int_equal(pt_store_dataset_create(s, &d, NULL), PT_STORE_BUSY);
    assert_string_equal(pt_store_errmsg(s), "begin write transaction: database is locked");
    /* Readers are not blocked by the writer (WAL). */
    pt_store_dataset_page page;
    assert_int_equal(pt_store_dataset_list(s, "alice", 0, NULL, &page), PT_STORE_OK);
    pt_store_dataset_page_clear(&page);
    assert_int_equal(sqlite3_exec(holder, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(holder);
    assert_int_equal(pt_store_dataset_create(s, &d, NULL), PT_STORE_OK);
    pt_store_close(s);
}

static void test_status_names_and_errmsg(void **state)
{
    (void)state;
    assert_string_equal(pt_store_status_name(PT_STORE_OK), "ok");
    assert_string_equal(pt_store_status_name(PT_STORE_IN_USE), "in use");
    assert_string_equal(pt_store_status_name(PT_STORE_IO), "i/o error");
    assert_string_equal(pt_store_status_name(42), "unknown status");
    assert_string_equal(pt_store_errmsg(NULL), "no store handle");
}

static void test_ids_and_hashes(void **state)
{
    (void)state;
    char a[PT_STORE_ID_MAX], b[PT_STORE_ID_MAX];
    assert_int_equal(pt_store_new_id("job_", a, sizeof(a)), PT_STORE_OK);
    assert_int_equal(pt_store_new_id("job_", b, sizeof(b)), PT_STORE_OK);
    assert_int_equal(strlen(a), 20);
    assert_memory_equal(a, "job_", 4);
    assert_int_equal(strspn(a + 4, "0123456789abcdef"), 16);
    assert_string_not_equal(a, b);
    char small[8];
    assert_int_equal(pt_store_new_id("job_", small, sizeof(small)), PT_STORE_INVALID);

    char h[PT_STORE_HASH_HEX];
    pt_store_sha256_hex("abc", 3, h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    pt_store_sha256_hex("", 0, h);
    assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_state_names_and_lifecycle_table(void **state)
{
    (void)state;
    for (int i = 0; i < PT_JOB_STATE_COUNT; i++) {
        pt_job_state st = PT_JOB_ANY;
        assert_int_equal(pt_job_state_parse(pt_job_state_name((pt_job_state)i), &st), 0);
        assert_int_equal(st, i);
    }
    pt_job_state st = PT_JOB_QUEUED;
    assert_int_equal(pt_job_state_parse("done", &st), -1);
    assert_int_equal(pt_job_state_parse(NULL, &st), -1);
    assert_string_equal(pt_job_state_name(PT_JOB_ANY), "unknown");
    assert_true(pt_job_state_is_terminal(PT_JOB_CANCELLED));
    assert_true(pt_job_state_is_terminal(PT_JOB_STOPPED));
    assert_false(pt_job_state_is_terminal(PT_JOB_CANCELLING));

    /* Exactly the edges of the documented lifecycle. */
    static const int edges[][2] = {
        {PT_JOB_QUEUED, PT_JOB_RUNNING},        {PT_JOB_QUEUED, PT_JOB_CANCELLED},
        {PT_JOB_RUNNING, PT_JOB_SUCCEEDED},     {PT_JOB_RUNNING, PT_JOB_FAILED},
        {PT_JOB_RUNNING, PT_JOB_CANCELLING},    {PT_JOB_RUNNING, PT_JOB_QUEUED},
        {PT_JOB_RUNNING, PT_JOB_STOPPED},       {PT_JOB_CANCELLING, PT_JOB_STOPPED},
        {PT_JOB_CANCELLING, PT_JOB_FAILED},     {PT_JOB_CANCELLING, PT_JOB_SUCCEEDED},
    };
    int n_allowed = 0;
    for (int from = 0; from < PT_JOB_STATE_COUNT; from++)
        for (int to = 0; to < PT_JOB_STATE_COUNT; to++) {
            int expect = 0;
            for (size_t e = 0; e < sizeof(edges) / sizeof(edges[0]); e++)
                expect |= edges[e][0] == from && edges[e][1] == to;
            assert_int_equal(pt_job_transition_allowed((pt_job_state)from, (pt_job_state)to), expect);
            n_allowed += expect;
        }
    assert_int_equal(n_allowed, 10);
    assert_int_equal(pt_job_transition_allowed(PT_JOB_ANY, PT_JOB_QUEUED), 0);
}

/* The page reader: rows 1..5 of a VALUES table paged by the bound ?2
 * (limit + 1); a row the caller's from_row refuses stops the page with that
 * error and counts the row, so page_clear can free it; the extra row that
 * tells "more" is never converted. */
typedef struct { long long v; } int_item;

static int int_row(pt_store *s, sqlite3_stmt *st, void *item)
{
    long long v = sqlite3_column_int64(st, 0);
    if (v == 4) return pt_store_fail(s, PT_STORE_INVALID, "row %lld refused", v);
    ((int_item *)item)->v = v;
    return PT_STORE_OK;
}

static void test_page_reader(void **state)
{
    fixture *f = *state;
    assert_int_equal(pt_store_open(&f->s, f->path, NULL, 0), PT_STORE_OK);
    static const char sql[] =
        "WITH t(v) AS (VALUES (1), (2), (3), (4), (5)) SELECT v FROM t WHERE ?1 IS NOT NULL "
        "AND (?3 IS NULL OR v > ?3) ORDER BY v LIMIT ?2";
    pt_store_page_after after;
    assert_int_equal(pt_store_page_after_parse(f->s, NULL, &after), PT_STORE_OK);
    assert_int_equal(after.paged, 0);
    assert_int_equal(pt_store_page_after_parse(f->s, "", &after), PT_STORE_OK);
    assert_int_equal(after.paged, 0);
    assert_int_equal(pt_store_page_after_parse(f->s, "zz", &after), PT_STORE_INVALID);

    sqlite3_stmt *st = NULL;
    assert_int_equal(pt_store_stmt(f->s, sql, &st), PT_STORE_OK);
    void *items = NULL;
    size_t n = 0;
    int more = 0;
    pt_store_page_bind(st, "alice", 2, &after);
    assert_int_equal(pt_store_page_read(f->s, st, 2, sizeof(int_item), int_row, &items, &n, &more, "list ints"),
                     PT_STORE_OK);
    assert_int_equal(n, 2);
    assert_int_equal(more, 1);
    assert_int_equal(((int_item *)items)[0].v, 1);
    assert_int_equal(((int_item *)items)[1].v, 2);
    free(items);

    /* the next page starts after row 2 (only created_at is used by this SQL) */
    char token[PT_STORE_PAGE_TOKEN_MAX];
    pt_store_page_token_encode(2, "x", token);
    assert_int_equal(pt_store_page_after_parse(f->s, token, &after), PT_STORE_OK);
    assert_int_equal(after.paged, 1);
    assert_int_equal(after.at, 2);
    assert_string_equal(after.id, "x");
    pt_store_page_bind(st, "alice", 2, &after);
    assert_int_equal(pt_store_page_read(f->s, st, 2, sizeof(int_item), int_row, &items, &n, &more, "list ints"),
                     PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "row 4 refused");
    assert_int_equal(n, 2);   /* row 3 and the refused row 4 */
    assert_int_equal(more, 0);
    free(items);

    /* the statement was cleared: an unpaged bind starts from row 1 again */
    assert_int_equal(pt_store_page_after_parse(f->s, NULL, &after), PT_STORE_OK);
    pt_store_page_bind(st, "alice", 3, &after);
    assert_int_equal(pt_store_page_read(f->s, st, 3, sizeof(int_item), int_row, &items, &n, &more, "list ints"),
                     PT_STORE_OK);
    assert_int_equal(n, 3);
    assert_int_equal(more, 1);   /* row 4 exists; it was not read into the page */
    free(items);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fresh_open_applies_schema_and_pragmas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reopen_keeps_data_and_does_not_remigrate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_schema_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_from_version_1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrations_run_in_order_and_atomically, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_busy_surfaces_after_timeout, setup, teardown),
        cmocka_unit_test(test_status_names_and_errmsg),
        cmocka_unit_test(test_ids_and_hashes),
        cmocka_unit_test(test_state_names_and_lifecycle_table),
        cmocka_unit_test_setup_teardown(test_page_reader, setup, teardown),
    };
    return cmocka_run_group_tests_name("store_schema", tests, NULL, NULL);
}
