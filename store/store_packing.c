/* store_packing.c — packing reports kept with their dataset (issue 17 item
 * 2): planning the packs of a large dataset counts the edges of every
 * structure (minutes on millions), and a dataset never changes once stored,
 * so a report is computed once per set of parameters and read back after.
 *
 * Keyed by dataset id and a canonical text of the parameters (the caller's,
 * which names the code version too, so a release that packs differently
 * does not answer from an older one's reports).  The rows go with the
 * dataset (ON DELETE CASCADE); each dataset keeps its newest
 * PT_STORE_PACKING_KEEP, so distinct parameters cannot grow the database
 * without bound. */
#include "store/store_internal.h"

#include <string.h>

static const char SQL_GET[] = "SELECT report_json FROM packing_reports WHERE dataset_id = ? AND params = ?";
/* created_at strictly increases per dataset (two puts in one microsecond
 * still have an order), so the trim keeps exactly the newest. */
static const char SQL_PUT[] =
    "INSERT INTO packing_reports(dataset_id, params, report_json, created_at) VALUES (?1, ?2, ?3,"
    " max(?4, coalesce((SELECT max(created_at) + 1 FROM packing_reports WHERE dataset_id = ?1), 0)))"
    " ON CONFLICT(dataset_id, params) DO UPDATE SET report_json = excluded.report_json,"
    " created_at = excluded.created_at";
static const char SQL_TRIM[] =
    "DELETE FROM packing_reports WHERE dataset_id = ? AND params NOT IN ("
    " SELECT params FROM packing_reports WHERE dataset_id = ? ORDER BY created_at DESC, params LIMIT ?)";

static int check_key(pt_store *s, const char *dataset_id, const char *params)
{
    if (!dataset_id || !dataset_id[0]) return pt_store_fail(s, PT_STORE_INVALID, "dataset id is empty");
    if (!params || !params[0] || strlen(params) > PT_STORE_PACKING_PARAMS_MAX)
        return pt_store_fail(s, PT_STORE_INVALID, "packing parameters are empty or longer than %d bytes",
                             PT_STORE_PACKING_PARAMS_MAX);
    return PT_STORE_OK;
}

int pt_store_packing_get(pt_store *s, const char *dataset_id, const char *params, char **json)
{
    *json = NULL;
    int rc = check_key(s, dataset_id, params);
    sqlite3_stmt *st = NULL;
    if (!rc) rc = pt_store_stmt(s, SQL_GET, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, dataset_id);
    pt_store_bind_text(st, 2, params);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        int oom = 0;
        *json = pt_store_col_dup(st, 0, &oom);
        if (oom) rc = pt_store_fail(s, PT_STORE_IO, "read packing report: out of memory");
        else if (!*json) rc = pt_store_fail(s, PT_STORE_NOT_FOUND, "no packing report stored");
    } else if (step == SQLITE_DONE) {
        rc = pt_store_fail(s, PT_STORE_NOT_FOUND, "no packing report of dataset %s with these parameters",
                           dataset_id);
    } else {
        rc = pt_store_fail_sql(s, step, "read packing report");
    }
    sqlite3_reset(st);
    return rc;
}

/* Runs one statement of put's transaction: binds are (text, text, [text |
 * int]) as the SQL wants. */
static int exec_bound(pt_store *s, const char *sql, const char *a, const char *b, const char *c, int64_t n,
                      const char *what)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, sql, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, a);
    pt_store_bind_text(st, 2, b);
    if (c) {
        pt_store_bind_text(st, 3, c);
        sqlite3_bind_int64(st, 4, n);
    } else {
        sqlite3_bind_int64(st, 3, n);
    }
    int step = sqlite3_step(st);
    sqlite3_reset(st);
    if (step == SQLITE_CONSTRAINT || (step & 0xff) == SQLITE_CONSTRAINT)
        return pt_store_fail(s, PT_STORE_NOT_FOUND, "dataset %s no longer exists", a);
    if (step != SQLITE_DONE) return pt_store_fail_sql(s, step, what);
    return PT_STORE_OK;
}

int pt_store_packing_put(pt_store *s, const char *dataset_id, const char *params, const char *json)
{
    int rc = check_key(s, dataset_id, params);
    if (!rc && (!json || !json[0])) rc = pt_store_fail(s, PT_STORE_INVALID, "packing report is empty");
    if (rc) return rc;
    rc = pt_store_tx_begin(s, 0);   /* a cache: losing the last write to a crash costs a recount */
    if (rc) return rc;
    rc = exec_bound(s, SQL_PUT, dataset_id, params, json, pt_store_now_us(), "store packing report");
    if (!rc) rc = exec_bound(s, SQL_TRIM, dataset_id, dataset_id, NULL, PT_STORE_PACKING_KEEP,
                             "trim packing reports");
    if (!rc) rc = pt_store_tx_commit(s);
    else pt_store_tx_rollback(s);
    return rc;
}
