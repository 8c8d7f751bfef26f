/* store_metrics.c — a job's step and epoch metric series and its checkpoint
 * records.  (job, step) and (job, epoch) are primary keys and inserts use
 * ON CONFLICT DO NOTHING, so a worker that resumes from a checkpoint and
 * replays steps can never create a duplicate: the first row stays.  A new
 * row gets the job's next event id (store_events.c) in the same transaction.
 *
 * Downsampling keeps what a chart must not lose: when more rows match than
 * max_points, the first and the last row, and in each of the equal runs of
 * rows between them (by rank) the rows of lowest and highest loss, in step
 * order — so a spike or the best loss is never thinned away
 * (pt_store_thin_rows). */
#include "store/store_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char SQL_JOB_EXISTS[] = "SELECT 1 FROM jobs WHERE id = ?";
static const char SQL_STEP_INSERT[] =
    "INSERT INTO step_metrics(job_id, step, epoch, loss, mae, lr, graphs_per_s, at, json) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(job_id, step) DO NOTHING";
static const char SQL_EPOCH_INSERT[] =
    "INSERT INTO epoch_metrics(job_id, epoch, step, train_loss, train_mae, val_loss, val_mae, "
    "graphs_per_s, seconds, at, json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT(job_id, epoch) DO NOTHING";
static const char SQL_BEST_MAE[] =
    "UPDATE jobs SET best_val_mae = min(coalesce(best_val_mae, ?2), ?2), version = version + 1 "
    "WHERE id = ?1";
static const char SQL_STEPS_COUNT[] = "SELECT count(*) FROM step_metrics WHERE job_id = ? AND step > ?";
static const char SQL_STEPS_SCAN[] =
    "SELECT step, epoch, loss, mae, lr, graphs_per_s, at, json, event_id FROM step_metrics "
    "WHERE job_id = ? AND step > ? ORDER BY step";
static const char SQL_STEPS_PAGE[] =
    "SELECT step, epoch, loss, mae, lr, graphs_per_s, at, json, event_id FROM step_metrics "
    "WHERE job_id = ? AND step > ? ORDER BY step LIMIT ?";
static const char SQL_STEP_EVENT[] = "UPDATE step_metrics SET event_id = ?3 WHERE job_id = ?1 AND step = ?2";
static const char SQL_EPOCH_EVENT[] = "UPDATE epoch_metrics SET event_id = ?3 WHERE job_id = ?1 AND epoch = ?2";
static const char SQL_STEP_LAST[] =
    "SELECT step, epoch, loss, mae, lr, graphs_per_s, at, json, event_id FROM step_metrics "
    "WHERE job_id = ? ORDER BY step DESC LIMIT 1";
static const char SQL_EPOCHS_READ[] =
    "SELECT epoch, step, train_loss, train_mae, val_loss, val_mae, graphs_per_s, seconds, at, json, event_id "
    "FROM epoch_metrics WHERE job_id = ? ORDER BY epoch";
static const char SQL_DISCARD_STEPS[] = "DELETE FROM step_metrics WHERE job_id = ? AND step > ?";
static const char SQL_DISCARD_EPOCHS[] = "DELETE FROM epoch_metrics WHERE job_id = ? AND step > ?";
static const char SQL_RESET_BEST[] =
    "UPDATE jobs SET best_val_mae = (SELECT min(val_mae) FROM epoch_metrics WHERE job_id = ?1), "
    "version = version + 1 WHERE id = ?1";
static const char SQL_CKPT_UPSERT[] =
    "INSERT INTO checkpoints(job_id, step, epoch, path, created_at) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT(job_id, step) DO UPDATE SET epoch = excluded.epoch, path = excluded.path, "
    "created_at = excluded.created_at";
static const char SQL_CKPT_RECENT[] =
    "SELECT job_id, step, epoch, created_at, path FROM checkpoints WHERE job_id = ? "
    "ORDER BY step DESC LIMIT ?";

void pt_store_step_series_clear(pt_store_step_series *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) free(s->items[i].json);
    free(s->items);
    memset(s, 0, sizeof(*s));
}

void pt_store_epoch_series_clear(pt_store_epoch_series *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) free(s->items[i].json);
    free(s->items);
    memset(s, 0, sizeof(*s));
}

/* Inside a transaction: NOT_FOUND unless the job exists (any owner). */
static int job_exists(pt_store *s, const char *job_id)
{
    if (!job_id || !job_id[0]) return pt_store_fail(s, PT_STORE_INVALID, "job id is empty");
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_JOB_EXISTS, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, job_id);
    int step = sqlite3_step(st);
    sqlite3_reset(st);
    if (step == SQLITE_DONE) return pt_store_fail(s, PT_STORE_NOT_FOUND, "job %s not found", job_id);
    if (step != SQLITE_ROW) return pt_store_fail_sql(s, step, "find job");
    return PT_STORE_OK;
}

static int end_write(pt_store *s, int rc)
{
    if (rc) {
        pt_store_tx_rollback(s);
        return rc;
    }
    return pt_store_tx_commit(s);
}

/* Gives the row (job, key) of `sql`'s table the job's next event id. */
static int set_event_id(pt_store *s, const char *sql, const char *job_id, int64_t key)
{
    int64_t id;
    int rc = pt_store_next_event_id(s, job_id, &id);
    sqlite3_stmt *st = NULL;
    if (!rc) rc = pt_store_stmt(s, sql, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, job_id);
    sqlite3_bind_int64(st, 2, key);
    sqlite3_bind_int64(st, 3, id);
    int step = sqlite3_step(st);
    sqlite3_reset(st);
    if (step != SQLITE_DONE) return pt_store_fail_sql(s, step, "number a metric event");
    return PT_STORE_OK;
}

static int insert_step(pt_store *s, sqlite3_stmt *st, const char *job_id, const pt_store_step_metric *r,
                       int64_t now, size_t *inserted)
{
    if (r->step < 0 || r->epoch < 0)
        return pt_store_fail(s, PT_STORE_INVALID, "step metric: step and epoch must be >= 0 (step %lld, "
                             "epoch %lld)", (long long)r->step, (long long)r->epoch);
    sqlite3_reset(st);
    pt_store_bind_text(st, 1, job_id);
    sqlite3_bind_int64(st, 2, r->step);
    sqlite3_bind_int64(st, 3, r->epoch);
    pt_store_bind_double(st, 4, r->loss);
    pt_store_bind_double(st, 5, r->mae);
    pt_store_bind_double(st, 6, r->lr);
    pt_store_bind_double(st, 7, r->graphs_per_s);
    sqlite3_bind_int64(st, 8, r->at ? r->at : now);
    pt_store_bind_text(st, 9, r->json);
    int step = sqlite3_step(st);
    sqlite3_reset(st);
    if (step != SQLITE_DONE) return pt_store_fail_sql(s, step, "insert step metric");
    if (sqlite3_changes(s->db) == 0) return PT_STORE_OK;   /* a replayed step: the first row stays */
    *inserted += 1;
    return set_event_id(s, SQL_STEP_EVENT, job_id, r->step);
}

int pt_store_steps_append(pt_store *s, const char *job_id, const pt_store_step_metric *rows,
                          size_t n, size_t *n_inserted)
{
    if (n_inserted) *n_inserted = 0;
    int rc = pt_store_tx_begin(s, 0);
    if (rc) return rc;
    rc = job_exists(s, job_id);
    sqlite3_stmt *st = NULL;
    if (!rc) rc = pt_store_stmt(s, SQL_STEP_INSERT, &st);
    size_t inserted = 0;
    int64_t now = pt_store_now_us();
    for (size_t i = 0; !rc && i < n; i++) rc = insert_step(s, st, job_id, &rows[i], now, &inserted);
    rc = end_write(s, rc);
    if (!rc && n_inserted) *n_inserted = inserted;
    return rc;
}

static int insert_epoch(pt_store *s, const char *job_id, const pt_store_epoch_metric *r, int *inserted)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_EPOCH_INSERT, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, job_id);
    sqlite3_bind_int64(st, 2, r->epoch);
    sqlite3_bind_int64(st, 3, r->step);
    pt_store_bind_double(st, 4, r->train_loss);
    pt_store_bind_double(st, 5, r->train_mae);
    pt_store_bind_double(st, 6, r->val_loss);
    pt_store_bind_double(st, 7, r->val_mae);
    pt_store_bind_double(st, 8, r->graphs_per_s);
    pt_store_bind_double(st, 9, r->seconds);
    sqlite3_bind_int64(st, 10, r->at ? r->at : pt_store_now_us());
    pt_store_bind_text(st, 11, r->json);
    int step = sqlite3_step(st);
    sqlite3_reset(st);
    if (step != SQLITE_DONE) return pt_store_fail_sql(s, step, "insert epoch metric");
    *inserted = sqlite3_changes(s->db) > 0;
    if (!*inserted) return PT_STORE_OK;   /* a replayed epoch */
    rc = set_event_id(s, SQL_EPOCH_EVENT, job_id, r->epoch);
    if (rc || isnan(r->val_mae)) return rc;
    rc = pt_store_stmt(s, SQL_BEST_MAE, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, job_id);
    sqlite3_bind_double(st, 2, r->val_mae);
    step = sqlite3_step(st);
    sqlite3_reset(st);
    if (step != SQLITE_DONE) return pt_store_fail_sql(s, step, "update best validation MAE");
    return PT_STORE_OK;
}

int pt_store_epoch_append(pt_store *s, const char *job_id, const pt_store_epoch_metric *row, int *inserted)
{
    if (inserted) *inserted = 0;
    if (row->epoch < 0 || row->step < 0)
        return pt_store_fail(s, PT_STORE_INVALID, "epoch metric: epoch and step must be >= 0 (epoch "
                             "%lld, step %lld)", (long long)row->epoch, (long long)row->step);
    int rc = pt_store_tx_begin(s, 0);
    if (rc) return rc;
    int fresh = 0;
    rc = job_exists(s, job_id);
    if (!rc) rc = insert_epoch(s, job_id, row, &fresh);
    rc = end_write(s, rc);
    if (!rc && inserted) *inserted = fresh;
    return rc;
}

static int count_steps(pt_store *s, const char *job_id, int64_t since_step, int64_t *n)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_STEPS_COUNT, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, job_id);
    sqlite3_bind_int64(st, 2, since_step);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) *n = sqlite3_column_int64(st, 0);
    else rc = pt_store_fail_sql(s, step, "count step metrics");
    sqlite3_reset(st);
    return rc;
}

/* Which of n rows to keep, at most m of them when m < n (see the file
 * comment): keep[0] and keep[n-1]; the n - 2 rows between split by rank
 * into (m - 2) / 2 equal runs, each keeping its lowest and its highest loss
 * (so the global lowest and highest are always kept once m >= 4); when m - 2
 * is odd, also the middle row.  A run without a finite loss keeps its first
 * row; NaN never wins a comparison. */
void pt_store_thin_rows(const double *loss, int64_t n, int64_t m, unsigned char *keep)
{
    memset(keep, 0, (size_t)n);
    if (n <= m) {
        memset(keep, 1, (size_t)n);
        return;
    }
    keep[0] = keep[n - 1] = 1;
    int64_t inner = n - 2, runs = (m - 2) / 2;
    for (int64_t r = 0; r < runs; r++) {
        int64_t lo = 1 + r * inner / runs, hi = 1 + (r + 1) * inner / runs;   /* rows [lo, hi) */
        int64_t imin = -1, imax = -1;
        for (int64_t i = lo; i < hi; i++) {
            if (!isfinite(loss[i])) continue;
            if (imin < 0 || loss[i] < loss[imin]) imin = i;
            if (imax < 0 || loss[i] > loss[imax]) imax = i;
        }
        if (imin < 0 && lo < hi) imin = imax = lo;
        if (imin >= 0) keep[imin] = keep[imax] = 1;
    }
    if ((m - 2) % 2) keep[1 + inner / 2] = 1;
}

void pt_store_step_from_row(sqlite3_stmt *st, pt_store_step_metric *m, int *oom)
{
    m->step = sqlite3_column_int64(st, 0);
    m->epoch = sqlite3_column_int64(st, 1);
    m->loss = pt_store_col_double(st, 2);
    m->mae = pt_store_col_double(st, 3);
    m->lr = pt_store_col_double(st, 4);
    m->graphs_per_s = pt_store_col_double(st, 5);
    m->at = sqlite3_column_int64(st, 6);
    m->json = pt_store_col_dup(st, 7, oom);
    m->event_id = sqlite3_column_int64(st, 8);
}

int pt_store_steps_thinned(pt_store *s, sqlite3_stmt *scan, int64_t n, int max_points, pt_store_step_series *out)
{
    out->total = n;
    if (n == 0) return PT_STORE_OK;
    size_t want = n < max_points ? (size_t)n : (size_t)max_points;
    double *loss = malloc((size_t)n * sizeof(double));
    unsigned char *keep = malloc((size_t)n);
    out->items = calloc(want, sizeof(*out->items));
    int rc = PT_STORE_OK, step = SQLITE_DONE, oom = 0;
    if (!loss || !keep || !out->items) rc = pt_store_fail(s, PT_STORE_IO, "metrics: out of memory");
    /* pass 1: the losses (columns are decoded lazily, so this costs the scan) */
    int64_t k = 0;
    while (!rc && n > (int64_t)want && (step = sqlite3_step(scan)) == SQLITE_ROW && k < n)
        loss[k++] = pt_store_col_double(scan, 2);
    if (!rc && n > (int64_t)want) {
        if (step != SQLITE_ROW && step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, "read step metrics");
        else if (k != n) rc = pt_store_fail(s, PT_STORE_IO, "metrics: counted %lld rows, read %lld", (long long)n,
                                            (long long)k);
        sqlite3_reset(scan);   /* bindings stay */
    }
    if (!rc) pt_store_thin_rows(loss, n, (int64_t)want, keep);
    /* pass 2: the kept rows */
    for (k = 0; !rc && (step = sqlite3_step(scan)) == SQLITE_ROW && k < n; k++)
        if (keep[k] && out->n < want) pt_store_step_from_row(scan, &out->items[out->n++], &oom);
    if (!rc && step != SQLITE_DONE && step != SQLITE_ROW) rc = pt_store_fail_sql(s, step, "read step metrics");
    else if (!rc && oom) rc = pt_store_fail(s, PT_STORE_IO, "metrics: out of memory");
    sqlite3_reset(scan);
    free(loss);
    free(keep);
    return rc;
}

static int read_steps(pt_store *s, const char *job_id, int64_t since_step, int max_points,
                      pt_store_step_series *out)
{
    int rc = count_steps(s, job_id, since_step, &out->total);
    sqlite3_stmt *st = NULL;
    if (!rc) rc = pt_store_stmt(s, SQL_STEPS_SCAN, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, job_id);
    sqlite3_bind_int64(st, 2, since_step);
    return pt_store_steps_thinned(s, st, out->total, max_points, out);
}

int pt_store_steps_read(pt_store *s, const char *owner, const char *job_id, int64_t since_step,
                        int max_points, pt_store_step_series *out)
{
    memset(out, 0, sizeof(*out));
    if (max_points == 0) max_points = PT_STORE_POINTS_DEFAULT;
    if (max_points < 2 || max_points > PT_STORE_POINTS_MAX)
        return pt_store_fail(s, PT_STORE_INVALID, "max_points must be within [2, %d], got %d",
                             PT_STORE_POINTS_MAX, max_points);
    int rc = pt_store_read_begin(s);
    if (rc) return rc;
    rc = pt_store_job_check_visible(s, owner, job_id);
    if (!rc) rc = read_steps(s, job_id, since_step, max_points, out);
    pt_store_read_end(s);
    if (rc) pt_store_step_series_clear(out);
    return rc;
}

static int page_steps(pt_store *s, const char *job_id, int64_t since_step, int limit, pt_store_step_series *out)
{
    int rc = count_steps(s, job_id, since_step, &out->total);
    sqlite3_stmt *st = NULL;
    if (!rc) rc = pt_store_stmt(s, SQL_STEPS_PAGE, &st);
    if (rc) return rc;
    size_t want = out->total < limit ? (size_t)out->total : (size_t)limit;
    out->items = calloc(want ? want : 1, sizeof(*out->items));
    if (!out->items) return pt_store_fail(s, PT_STORE_IO, "metrics: out of memory");
    pt_store_bind_text(st, 1, job_id);
    sqlite3_bind_int64(st, 2, since_step);
    sqlite3_bind_int(st, 3, limit);
    int step, oom = 0;
    while ((step = sqlite3_step(st)) == SQLITE_ROW && out->n < want)
        pt_store_step_from_row(st, &out->items[out->n++], &oom);
    if (step != SQLITE_DONE && step != SQLITE_ROW) rc = pt_store_fail_sql(s, step, "read step metrics");
    else if (oom) rc = pt_store_fail(s, PT_STORE_IO, "metrics: out of memory");
    sqlite3_reset(st);
    return rc;
}

int pt_store_steps_page(pt_store *s, const char *owner, const char *job_id, int64_t since_step, int limit,
                        pt_store_step_series *out)
{
    memset(out, 0, sizeof(*out));
    if (limit < 1 || limit > PT_STORE_POINTS_MAX)
        return pt_store_fail(s, PT_STORE_INVALID, "page_size must be within [1, %d], got %d", PT_STORE_POINTS_MAX,
                             limit);
    int rc = pt_store_read_begin(s);
    if (rc) return rc;
    rc = pt_store_job_check_visible(s, owner, job_id);
    if (!rc) rc = page_steps(s, job_id, since_step, limit, out);
    pt_store_read_end(s);
    if (rc) pt_store_step_series_clear(out);
    return rc;
}

int pt_store_steps_last(pt_store *s, const char *owner, const char *job_id, pt_store_step_metric *out)
{
    memset(out, 0, sizeof(*out));
    int rc = pt_store_read_begin(s);
    if (rc) return rc;
    rc = pt_store_job_check_visible(s, owner, job_id);
    sqlite3_stmt *st = NULL;
    if (!rc) rc = pt_store_stmt(s, SQL_STEP_LAST, &st);
    if (!rc) {
        pt_store_bind_text(st, 1, job_id);
        int step = sqlite3_step(st), oom = 0;
        if (step == SQLITE_ROW) pt_store_step_from_row(st, out, &oom);
        if (step == SQLITE_DONE) rc = pt_store_fail(s, PT_STORE_NOT_FOUND, "job %s has no step metric yet", job_id);
        else if (step != SQLITE_ROW) rc = pt_store_fail_sql(s, step, "read the last step metric");
        else if (oom) rc = pt_store_fail(s, PT_STORE_IO, "metrics: out of memory");
        sqlite3_reset(st);
    }
    pt_store_read_end(s);
    if (rc) {
        free(out->json);
        out->json = NULL;
    }
    return rc;
}

/* The rows of an epoch query (SQL_EPOCHS_READ, or store_events.c's SQL_EPOCHS_AFTER: both select
 * the same eleven columns in this order) appended to out; the statement is stepped, not reset. */
int pt_store_epoch_rows_read(pt_store *s, sqlite3_stmt *st, pt_store_epoch_series *out, const char *what)
{
    size_t cap = 0;
    int rc = 0, step = SQLITE_DONE, oom = 0;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        void *items = out->items;
        rc = pt_store_list_grow(s, &items, &cap, out->n, sizeof(*out->items), 16, what);
        out->items = items;
        if (rc) return rc;
        pt_store_epoch_metric *m = &out->items[out->n++];
        memset(m, 0, sizeof(*m));
        m->epoch = sqlite3_column_int64(st, 0);
        m->step = sqlite3_column_int64(st, 1);
        m->train_loss = pt_store_col_double(st, 2);
        m->train_mae = pt_store_col_double(st, 3);
        m->val_loss = pt_store_col_double(st, 4);
        m->val_mae = pt_store_col_double(st, 5);
        m->graphs_per_s = pt_store_col_double(st, 6);
        m->seconds = pt_store_col_double(st, 7);
        m->at = sqlite3_column_int64(st, 8);
        m->json = pt_store_col_dup(st, 9, &oom);
        m->event_id = sqlite3_column_int64(st, 10);
    }
    if (step != SQLITE_DONE) return pt_store_fail_sql(s, step, "read epoch metrics");
    if (oom) return pt_store_fail(s, PT_STORE_IO, "%s: out of memory", what);
    return 0;
}

static int read_epochs(pt_store *s, const char *job_id, pt_store_epoch_series *out)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_EPOCHS_READ, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, job_id);
    rc = pt_store_epoch_rows_read(s, st, out, "metrics");
    sqlite3_reset(st);
    return rc;
}

int pt_store_epochs_read(pt_store *s, const char *owner, const char *job_id, pt_store_epoch_series *out)
{
    memset(out, 0, sizeof(*out));
    int rc = pt_store_read_begin(s);
    if (rc) return rc;
    rc = pt_store_job_check_visible(s, owner, job_id);
    if (!rc) rc = read_epochs(s, job_id, out);
    pt_store_read_end(s);
    if (rc) pt_store_epoch_series_clear(out);
    return rc;
}

static int exec_job_step(pt_store *s, const char *sql, const char *job_id, int64_t step_value,
                         const char *what)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, sql, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, job_id);
    sqlite3_bind_int64(st, 2, step_value);
    int step = sqlite3_step(st);
    sqlite3_reset(st);
    if (step != SQLITE_DONE) return pt_store_fail_sql(s, step, what);
    return PT_STORE_OK;
}

int pt_store_metrics_discard_after(pt_store *s, const char *job_id, int64_t step)
{
    int rc = pt_store_tx_begin(s, 1);
    if (rc) return rc;
    rc = job_exists(s, job_id);
    if (!rc) rc = exec_job_step(s, SQL_DISCARD_STEPS, job_id, step, "discard step metrics");
    if (!rc) rc = exec_job_step(s, SQL_DISCARD_EPOCHS, job_id, step, "discard epoch metrics");
    sqlite3_stmt *st = NULL;
    if (!rc) rc = pt_store_stmt(s, SQL_RESET_BEST, &st);
    if (!rc) {
        pt_store_bind_text(st, 1, job_id);
        int r = sqlite3_step(st);
        sqlite3_reset(st);
        if (r != SQLITE_DONE) rc = pt_store_fail_sql(s, r, "recompute best validation MAE");
    }
    return end_write(s, rc);
}

int pt_store_checkpoint_record(pt_store *s, const char *job_id, int64_t step, int64_t epoch,
                               const char *path)
{
    int rc = pt_store_check_text(s, "checkpoint path", path, PT_STORE_PATH_MAX);
    if (!rc && (step < 0 || epoch < 0))
        rc = pt_store_fail(s, PT_STORE_INVALID, "checkpoint: step and epoch must be >= 0 (step %lld, "
                           "epoch %lld)", (long long)step, (long long)epoch);
    if (rc) return rc;
    rc = pt_store_tx_begin(s, 1);
    if (rc) return rc;
    rc = job_exists(s, job_id);
    sqlite3_stmt *st = NULL;
    if (!rc) rc = pt_store_stmt(s, SQL_CKPT_UPSERT, &st);
    if (!rc) {
        pt_store_bind_text(st, 1, job_id);
        sqlite3_bind_int64(st, 2, step);
        sqlite3_bind_int64(st, 3, epoch);
        pt_store_bind_text(st, 4, path);
        sqlite3_bind_int64(st, 5, pt_store_now_us());
        int r = sqlite3_step(st);
        sqlite3_reset(st);
        if (r != SQLITE_DONE) rc = pt_store_fail_sql(s, r, "record checkpoint");
    }
    return end_write(s, rc);
}

static int read_recent_checkpoints(pt_store *s, const char *job_id, pt_store_checkpoint *out, size_t max,
                                   size_t *n)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_CKPT_RECENT, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, job_id);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)max);
    int step;
    while (*n < max && (step = sqlite3_step(st)) == SQLITE_ROW) {
        pt_store_checkpoint *c = &out[(*n)++];
        memset(c, 0, sizeof(*c));
        pt_store_col_copy(st, 0, c->job_id, sizeof(c->job_id));
        c->step = sqlite3_column_int64(st, 1);
        c->epoch = sqlite3_column_int64(st, 2);
        c->created_at = sqlite3_column_int64(st, 3);
        pt_store_col_copy(st, 4, c->path, sizeof(c->path));
    }
    if (*n < max && step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, "read recent checkpoints");
    sqlite3_reset(st);
    return rc;
}

int pt_store_checkpoint_recent(pt_store *s, const char *owner, const char *job_id, pt_store_checkpoint *out,
                               size_t max, size_t *n)
{
    *n = 0;
    int rc = pt_store_read_begin(s);
    if (rc) return rc;
    rc = pt_store_job_check_visible(s, owner, job_id);
    if (!rc && max) rc = read_recent_checkpoints(s, job_id, out, max, n);
    pt_store_read_end(s);
    return rc;
}

int pt_store_checkpoint_latest(pt_store *s, const char *owner, const char *job_id, pt_store_checkpoint *out)
{
    memset(out, 0, sizeof(*out));
    size_t n = 0;
    int rc = pt_store_checkpoint_recent(s, owner, job_id, out, 1, &n);
    if (!rc && n == 0) rc = pt_store_fail(s, PT_STORE_NOT_FOUND, "job %s has no checkpoint yet", job_id);
    return rc;
}
