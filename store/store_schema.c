/* store_schema.c — the database schema as an ordered list of migrations and
 * the runner that applies them.  PRAGMA user_version holds the schema version;
 * schema_migrations keeps when each version was applied.  A migration, once
 * released, is never edited: changes go into a new entry at the end. */
#include "store/store_internal.h"

#include <stdio.h>

static const char MIGRATION_1[] =
    "CREATE TABLE datasets ("
    "  id TEXT PRIMARY KEY,"
    "  owner TEXT NOT NULL,"
    "  name TEXT NOT NULL,"
    "  path TEXT NOT NULL,"
    "  format TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  n_structs INTEGER NOT NULL DEFAULT 0,"
    "  n_atoms INTEGER NOT NULL DEFAULT 0,"
    "  bytes INTEGER NOT NULL DEFAULT 0,"
    "  report_json TEXT,"
    "  status TEXT NOT NULL"
    ");"
    "CREATE INDEX datasets_owner_created ON datasets(owner, created_at, id);"
    "CREATE INDEX datasets_created ON datasets(created_at);"
    "CREATE TABLE jobs ("
    "  id TEXT PRIMARY KEY,"
    "  owner TEXT NOT NULL,"
    /* SET NULL: a finished job outlives its dataset (deletion is refused
     * while an unfinished job uses it, in code). */
    "  dataset_id TEXT REFERENCES datasets(id) ON DELETE SET NULL,"
    "  config_json TEXT NOT NULL,"
    "  config_hash TEXT NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN ('queued','running','cancelling',"
    "                                       'succeeded','failed','cancelled')),"
    "  created_at INTEGER NOT NULL,"
    "  started_at INTEGER,"
    "  finished_at INTEGER,"
    "  progress REAL NOT NULL DEFAULT 0,"
    "  epoch INTEGER NOT NULL DEFAULT 0,"
    "  step INTEGER NOT NULL DEFAULT 0,"
    "  best_val_mae REAL,"
    "  latest_graphs_per_s REAL,"
    "  failure_reason TEXT,"
    "  attempts INTEGER NOT NULL DEFAULT 0,"
    "  worker_pid INTEGER,"
    "  version INTEGER NOT NULL DEFAULT 1"
    ");"
    "CREATE INDEX jobs_owner_created ON jobs(owner, created_at, id);"
    "CREATE INDEX jobs_owner_state_created ON jobs(owner, state, created_at, id);"
    "CREATE INDEX jobs_state_created ON jobs(state, created_at, id);"
    "CREATE INDEX jobs_created ON jobs(created_at);"
    "CREATE INDEX jobs_dataset ON jobs(dataset_id);"
    "CREATE TABLE job_transitions ("
    "  seq INTEGER PRIMARY KEY,"
    "  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  from_state TEXT,"
    "  to_state TEXT NOT NULL,"
    "  at INTEGER NOT NULL,"
    "  reason TEXT NOT NULL"
    ");"
    "CREATE INDEX job_transitions_job ON job_transitions(job_id, seq);"
    /* The primary keys below are the UNIQUE(job, step) / UNIQUE(job, epoch)
     * that make replayed metrics of a resumed job idempotent. */
    "CREATE TABLE step_metrics ("
    "  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  step INTEGER NOT NULL,"
    "  epoch INTEGER NOT NULL,"
    "  loss REAL, mae REAL, lr REAL, graphs_per_s REAL,"
    "  at INTEGER NOT NULL,"
    "  json TEXT,"
    "  PRIMARY KEY (job_id, step)"
    ") WITHOUT ROWID;"
    "CREATE TABLE epoch_metrics ("
    "  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  epoch INTEGER NOT NULL,"
    "  step INTEGER NOT NULL,"
    "  train_loss REAL, train_mae REAL, val_loss REAL, val_mae REAL,"
    "  graphs_per_s REAL, seconds REAL,"
    "  at INTEGER NOT NULL,"
    "  json TEXT,"
    "  PRIMARY KEY (job_id, epoch)"
    ") WITHOUT ROWID;"
    "CREATE TABLE checkpoints ("
    "  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  step INTEGER NOT NULL,"
    "  epoch INTEGER NOT NULL,"
    "  path TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  PRIMARY KEY (job_id, step)"
    ") WITHOUT ROWID;"
    "CREATE TABLE tokens ("
    "  id TEXT PRIMARY KEY,"
    "  owner TEXT NOT NULL,"
    "  name TEXT NOT NULL,"
    "  hash TEXT NOT NULL UNIQUE,"
    "  created_at INTEGER NOT NULL,"
    "  revoked INTEGER NOT NULL DEFAULT 0,"
    "  revoked_at INTEGER"
    ");"
    "CREATE INDEX tokens_owner ON tokens(owner, created_at);"
    "CREATE TABLE idempotency_keys ("
    "  owner TEXT NOT NULL,"
    "  key TEXT NOT NULL,"
    "  request_hash TEXT NOT NULL,"
    "  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  created_at INTEGER NOT NULL,"
    "  PRIMARY KEY (owner, key)"
    ") WITHOUT ROWID;"
    "CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);";

/* A finished run's result (the worker's done line: final validation and
 * test errors, worker_proto.h), as a JSON object. */
static const char MIGRATION_2[] = "ALTER TABLE jobs ADD COLUMN result_json TEXT;";

/* Event ids (store_events.c): one sequence per job over its transitions,
 * epochs and steps, so an event stream's id is a small integer that orders
 * the job's events.  Rows already stored are numbered in the order they
 * were stored (time, then transitions before epochs before steps). */
static const char MIGRATION_3[] =
    "ALTER TABLE jobs ADD COLUMN event_seq INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE job_transitions ADD COLUMN event_id INTEGER;"
    "ALTER TABLE epoch_metrics ADD COLUMN event_id INTEGER;"
    "ALTER TABLE step_metrics ADD COLUMN event_id INTEGER;"
    "CREATE TEMP TABLE event_order AS SELECT job_id, kind, k,"
    "  row_number() OVER (PARTITION BY job_id ORDER BY at, kind, k) AS n FROM ("
    "    SELECT job_id, 0 AS kind, seq AS k, at FROM job_transitions UNION ALL"
    "    SELECT job_id, 1, epoch, at FROM epoch_metrics UNION ALL"
    "    SELECT job_id, 2, step, at FROM step_metrics);"
    "CREATE INDEX temp.event_order_key ON event_order(job_id, kind, k);"
    "UPDATE job_transitions SET event_id = (SELECT n FROM event_order o WHERE o.job_id = job_transitions.job_id"
    "  AND o.kind = 0 AND o.k = job_transitions.seq);"
    "UPDATE epoch_metrics SET event_id = (SELECT n FROM event_order o WHERE o.job_id = epoch_metrics.job_id"
    "  AND o.kind = 1 AND o.k = epoch_metrics.epoch);"
    "UPDATE step_metrics SET event_id = (SELECT n FROM event_order o WHERE o.job_id = step_metrics.job_id"
    "  AND o.kind = 2 AND o.k = step_metrics.step);"
    "UPDATE jobs SET event_seq = coalesce((SELECT max(n) FROM event_order o WHERE o.job_id = jobs.id), 0);"
    "DROP TABLE event_order;"
    "CREATE INDEX step_metrics_event ON step_metrics(job_id, event_id);";

/* Jobs: a `stopped` state (a run ended early by max_runtime_seconds or a
 * user's cancel, distinct from failed), a name, tags and free metadata from
 * the submission, why a job stopped.  A
 * CHECK constraint cannot be altered, so the table is rebuilt as SQLite's
 * ALTER TABLE page describes (foreign keys are off while migrations run and
 * checked before they commit).  Datasets: the SHA-256 of the uploaded
 * content and the identity of an upload (content and ingest options), one
 * dataset per identity and owner; Idempotency-Keys of uploads. */
static const char MIGRATION_4[] =
    "CREATE TABLE jobs_v4 ("
    "  id TEXT PRIMARY KEY,"
    "  owner TEXT NOT NULL,"
    "  dataset_id TEXT REFERENCES datasets(id) ON DELETE SET NULL,"
    "  config_json TEXT NOT NULL,"
    "  config_hash TEXT NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN ('queued','running','cancelling',"
    "                                       'succeeded','failed','cancelled','stopped')),"
    "  created_at INTEGER NOT NULL,"
    "  started_at INTEGER,"
    "  finished_at INTEGER,"
    "  progress REAL NOT NULL DEFAULT 0,"
    "  epoch INTEGER NOT NULL DEFAULT 0,"
    "  step INTEGER NOT NULL DEFAULT 0,"
    "  best_val_mae REAL,"
    "  latest_graphs_per_s REAL,"
    "  failure_reason TEXT,"
    "  attempts INTEGER NOT NULL DEFAULT 0,"
    "  worker_pid INTEGER,"
    "  version INTEGER NOT NULL DEFAULT 1,"
    "  result_json TEXT,"
    "  event_seq INTEGER NOT NULL DEFAULT 0,"
    "  name TEXT,"
    "  tags_json TEXT NOT NULL DEFAULT '[]',"
    "  metadata_json TEXT NOT NULL DEFAULT '{}',"
    "  stop_reason TEXT"
    ");"
    "INSERT INTO jobs_v4(id, owner, dataset_id, config_json, config_hash, state, created_at, started_at,"
    "  finished_at, progress, epoch, step, best_val_mae, latest_graphs_per_s, failure_reason, attempts,"
    "  worker_pid, version, result_json, event_seq)"
    " SELECT id, owner, dataset_id, config_json, config_hash, state, created_at, started_at,"
    "  finished_at, progress, epoch, step, best_val_mae, latest_graphs_per_s, failure_reason, attempts,"
    "  worker_pid, version, result_json, event_seq FROM jobs;"
    "DROP TABLE jobs;"
    "ALTER TABLE jobs_v4 RENAME TO jobs;"
    "CREATE INDEX jobs_owner_created ON jobs(owner, created_at, id);"
    "CREATE INDEX jobs_owner_state_created ON jobs(owner, state, created_at, id);"
    "CREATE INDEX jobs_state_created ON jobs(state, created_at, id);"
    "CREATE INDEX jobs_created ON jobs(created_at);"
    "CREATE INDEX jobs_dataset ON jobs(dataset_id);"
    "CREATE INDEX jobs_owner_name ON jobs(owner, name, created_at, id);"
    "ALTER TABLE datasets ADD COLUMN content_sha256 TEXT;"
    "ALTER TABLE datasets ADD COLUMN ingest_hash TEXT;"
    "CREATE UNIQUE INDEX datasets_owner_ingest ON datasets(owner, ingest_hash) WHERE ingest_hash IS NOT NULL;"
    "CREATE TABLE dataset_idempotency_keys ("
    "  owner TEXT NOT NULL,"
    "  key TEXT NOT NULL,"
    "  request_hash TEXT NOT NULL,"
    "  dataset_id TEXT NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,"
    "  created_at INTEGER NOT NULL,"
    "  PRIMARY KEY (owner, key)"
    ") WITHOUT ROWID;"
    "CREATE INDEX dataset_idempotency_keys_created ON dataset_idempotency_keys(created_at);";

/* Packing reports kept with their dataset (store_packing.c), gone with it. */
static const char MIGRATION_5[] =
    "CREATE TABLE packing_reports ("
    "  dataset_id TEXT NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,"
    "  params TEXT NOT NULL,"
    "  report_json TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  PRIMARY KEY (dataset_id, params)"
    ") WITHOUT ROWID;";

const char *const pt_store_migrations[] = {MIGRATION_1, MIGRATION_2, MIGRATION_3, MIGRATION_4, MIGRATION_5};
const int pt_store_n_migrations = (int)(sizeof(pt_store_migrations) / sizeof(pt_store_migrations[0]));

int pt_store_schema_latest(void)
{
    return pt_store_n_migrations;
}

static int read_user_version(pt_store *s, int *version)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL);
    if (rc != SQLITE_OK) return pt_store_fail_sql(s, rc, "read schema version");
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW) return pt_store_fail_sql(s, rc, "read schema version");
    return PT_STORE_OK;
}

int pt_store_schema_version(pt_store *s, int *version)
{
    return read_user_version(s, version);
}

static int too_new(pt_store *s, int found, int known)
{
    return pt_store_fail(s, PT_STORE_TOO_NEW,
                         "database schema version %d is newer than this packtrain understands "
                         "(up to %d); run a newer packtrain or restore an older database",
                         found, known);
}

static int apply_one(pt_store *s, const char *sql, int to_version)
{
    char *msg = NULL;
    /* Migrations are constant SQL compiled into the binary, never user text,
     * so sqlite3_exec of the multi-statement script is safe here. */
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        pt_store_fail(s, PT_STORE_IO, "migration to schema version %d failed: %s", to_version,
                      msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return PT_STORE_IO;
    }
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(s->db, "INSERT INTO schema_migrations(version, applied_at) VALUES (?, ?)",
                            -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int(st, 1, to_version);
        sqlite3_bind_int64(st, 2, pt_store_now_us());
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) return pt_store_fail_sql(s, rc, "record applied migration");
    return PT_STORE_OK;
}

static int set_user_version(pt_store *s, int version)
{
    /* PRAGMA takes no bound parameters; the value is an int from this code. */
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA user_version=%d", version);
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) return pt_store_fail_sql(s, rc, "write schema version");
    return PT_STORE_OK;
}

/* Every foreign key still points at a row (PRAGMA foreign_key_check). */
static int check_foreign_keys(pt_store *s)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA foreign_key_check", -1, &st, NULL);
    if (rc != SQLITE_OK) return pt_store_fail_sql(s, rc, "check foreign keys");
    rc = sqlite3_step(st);
    int out = PT_STORE_OK;
    if (rc == SQLITE_ROW)
        out = pt_store_fail(s, PT_STORE_IO, "after the migration, table %s has a row whose foreign key into %s "
                            "points at nothing", (const char *)sqlite3_column_text(st, 0),
                            (const char *)sqlite3_column_text(st, 2));
    else if (rc != SQLITE_DONE) out = pt_store_fail_sql(s, rc, "check foreign keys");
    sqlite3_finalize(st);
    return out;
}

int pt_store_migrate(pt_store *s, const char *const *migrations, int n)
{
    int version = 0;
    int rc = read_user_version(s, &version);
    if (rc) return rc;
    if (version > n) return too_new(s, version, n);
    if (version == n) return PT_STORE_OK;

    /* Foreign keys are off while the migrations run (a table rebuild drops
     * the old table, which must not cascade) and checked before they commit;
     * the pragma is a no-op inside a transaction, hence here. */
    sqlite3_exec(s->db, "PRAGMA foreign_keys=OFF", NULL, NULL, NULL);
    rc = pt_store_tx_begin(s, 1);
    if (rc) {
        sqlite3_exec(s->db, "PRAGMA foreign_keys=ON", NULL, NULL, NULL);
        return rc;
    }
    /* Another connection may have migrated between our read and our lock. */
    rc = read_user_version(s, &version);
    if (!rc && version > n) rc = too_new(s, version, n);
    if (!rc && version < n) {
        int e = sqlite3_exec(s->db,
                             "CREATE TABLE IF NOT EXISTS schema_migrations ("
                             "  version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
                             NULL, NULL, NULL);
        if (e != SQLITE_OK) rc = pt_store_fail_sql(s, e, "create schema_migrations");
        for (int v = version; !rc && v < n; v++) rc = apply_one(s, migrations[v], v + 1);
        if (!rc) rc = check_foreign_keys(s);
        if (!rc) rc = set_user_version(s, n);
    }
    if (rc) pt_store_tx_rollback(s);
    else rc = pt_store_tx_commit(s);
    sqlite3_exec(s->db, "PRAGMA foreign_keys=ON", NULL, NULL, NULL);
    return rc;
}
