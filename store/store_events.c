/* store_events.c — a job's events (transitions, epochs, steps) by event id,
 * for event streams that resume after the last id a client saw (see store.h).
 *
 * Ids come from jobs.event_seq, raised by one in the write transaction that
 * stores the row, so a reader's snapshot never holds id N + 1 without N, and
 * the ids of one job order its events as they were stored. */
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

static const char SQL_NEXT[] = "UPDATE jobs SET event_seq = event_seq + 1 WHERE id = ? RETURNING event_seq";
static const char SQL_JOB[] =
    "SELECT state, event_seq FROM jobs WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)";
static const char SQL_TRANSITIONS_AFTER[] =
    "SELECT from_state, to_state, at, reason, event_id FROM job_transitions "
    "WHERE job_id = ? AND event_id > ? ORDER BY event_id";
static const char SQL_EPOCHS_AFTER[] =
    "SELECT epoch, step, train_loss, train_mae, val_loss, val_mae, graphs_per_s, seconds, at, json, event_id "
    "FROM epoch_metrics WHERE job_id = ? AND event_id > ? ORDER BY event_id";
static const char SQL_STEPS_COUNT_AFTER[] =
    "SELECT count(*) FROM step_metrics WHERE job_id = ? AND event_id > ?";
static const char SQL_STEPS_AFTER[] =
    "SELECT step, epoch, loss, mae, lr, graphs_per_s, at, json, event_id FROM step_metrics "
    "WHERE job_id = ? AND event_id > ? ORDER BY event_id";

int pt_store_next_event_id(pt_store *s, const char *job_id, int64_t *id)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_NEXT, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, job_id);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) *id = sqlite3_column_int64(st, 0);
    else if (step == SQLITE_DONE) rc = pt_store_fail(s, PT_STORE_NOT_FOUND, "job %s not found", job_id);
    else rc = pt_store_fail_sql(s, step, "take the next event id");
    sqlite3_reset(st);
    return rc;
}

void pt_store_events_clear(pt_store_events *e)
{
    if (!e) return;
    pt_store_transition_list_clear(&e->transitions);
    pt_store_epoch_series_clear(&e->epochs);
    pt_store_step_series_clear(&e->steps);
    memset(e, 0, sizeof(*e));
}

/* A prepared statement of the job's rows after an event id. */
static int bind_after(pt_store *s, const char *sql, const char *job_id, int64_t after, sqlite3_stmt **st)
{
    int rc = pt_store_stmt(s, sql, st);
    if (rc) return rc;
    pt_store_bind_text(*st, 1, job_id);
    sqlite3_bind_int64(*st, 2, after);
    return PT_STORE_OK;
}

static int read_job(pt_store *s, const char *owner, const char *job_id, pt_store_events *out)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_JOB, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, job_id);
    pt_store_bind_text(st, 2, owner);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        out->state = PT_JOB_ANY;
        if (t) pt_job_state_parse((const char *)t, &out->state);
        out->last_id = sqlite3_column_int64(st, 1);
    } else if (step == SQLITE_DONE) {
        rc = pt_store_fail(s, PT_STORE_NOT_FOUND, "job %s not found", job_id);
    } else {
        rc = pt_store_fail_sql(s, step, "read job");
    }
    sqlite3_reset(st);
    return rc;
}

static int read_transitions(pt_store *s, const char *job_id, int64_t after, pt_store_transition_list *out)
{
    sqlite3_stmt *st = NULL;
    int rc = bind_after(s, SQL_TRANSITIONS_AFTER, job_id, after, &st);
    size_t cap = 0;
    int step = SQLITE_DONE;
    while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
        void *items = out->items;
        rc = pt_store_list_grow(s, &items, &cap, out->n, sizeof(*out->items), 8, "events");
        out->items = items;
        if (rc) break;
        pt_store_transition *t = &out->items[out->n++];
        memset(t, 0, sizeof(*t));
        const unsigned char *from = sqlite3_column_text(st, 0), *to = sqlite3_column_text(st, 1);
        t->from = t->to = PT_JOB_ANY;
        if (from) pt_job_state_parse((const char *)from, &t->from);
        if (to) pt_job_state_parse((const char *)to, &t->to);
        t->at = sqlite3_column_int64(st, 2);
        pt_store_col_copy(st, 3, t->reason, sizeof(t->reason));
        t->event_id = sqlite3_column_int64(st, 4);
    }
    if (!rc && step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, "read job transitions");
    if (st) sqlite3_reset(st);
    return rc;
}

static int read_epochs(pt_store *s, const char *job_id, int64_t after, pt_store_epoch_series *out)
{
    sqlite3_stmt *st = NULL;
    int rc = bind_after(s, SQL_EPOCHS_AFTER, job_id, after, &st);
    if (!rc) rc = pt_store_epoch_rows_read(s, st, out, "events");
    if (st) sqlite3_reset(st);
    return rc;
}

static int read_steps(pt_store *s, const char *job_id, int64_t after, int max_steps, pt_store_step_series *out)
{
    sqlite3_stmt *st = NULL;
    int64_t n = 0;
    int rc = bind_after(s, SQL_STEPS_COUNT_AFTER, job_id, after, &st);
    if (!rc) {
        int step = sqlite3_step(st);
        if (step == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
        else rc = pt_store_fail_sql(s, step, "count step metrics");
        sqlite3_reset(st);
    }
    if (!rc) rc = bind_after(s, SQL_STEPS_AFTER, job_id, after, &st);
    if (!rc) rc = pt_store_steps_thinned(s, st, n, max_steps, out);
    return rc;
}

int pt_store_events_read(pt_store *s, const char *owner, const char *job_id, int64_t after_id, int max_steps,
                         pt_store_events *out)
{
    memset(out, 0, sizeof(*out));
    if (max_steps < 2 || max_steps > PT_STORE_POINTS_MAX)
        return pt_store_fail(s, PT_STORE_INVALID, "max_steps must be within [2, %d], got %d", PT_STORE_POINTS_MAX,
                             max_steps);
    if (!job_id || !job_id[0]) return pt_store_fail(s, PT_STORE_INVALID, "job id is empty");
    int rc = pt_store_read_begin(s);
    if (rc) return rc;
    rc = read_job(s, owner, job_id, out);
    if (!rc) rc = read_transitions(s, job_id, after_id, &out->transitions);
    if (!rc) rc = read_epochs(s, job_id, after_id, &out->epochs);
    if (!rc) rc = read_steps(s, job_id, after_id, max_steps, &out->steps);
    pt_store_read_end(s);
    if (rc) pt_store_events_clear(out);
    return rc;
}
