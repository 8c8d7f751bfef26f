/* store_lifecycle.c — the job state machine, enforced where the state lives:
 *
 *   queued     -> running | cancelled
 *   running    -> succeeded | failed | cancelling | stopped | queued (re-queued on restart)
 *   cancelling -> stopped | failed | succeeded
 *
 * Final: succeeded, failed, cancelled (never ran), stopped (ran, and was
 * ended early: from running by max_runtime_seconds, from cancelling by a
 * user's cancel; stop_reason says which, "max_runtime" or "cancelled").
 *
 * Every change runs in one BEGIN IMMEDIATE transaction that re-reads the
 * current state, checks the edge, updates the job (bumping its version) and
 * appends the job_transitions row, committed with synchronous=FULL.  Progress
 * updates bump the version too but commit with NORMAL (see store.h). */
#include "store/store_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const state_names[PT_JOB_STATE_COUNT] = {
    "queued", "running", "cancelling", "succeeded", "failed", "cancelled", "stopped",
};

/* allowed[from][to] */
static const unsigned char allowed[PT_JOB_STATE_COUNT][PT_JOB_STATE_COUNT] = {
    [PT_JOB_QUEUED] = {[PT_JOB_RUNNING] = 1, [PT_JOB_CANCELLED] = 1},
    [PT_JOB_RUNNING] = {[PT_JOB_SUCCEEDED] = 1, [PT_JOB_FAILED] = 1, [PT_JOB_CANCELLING] = 1,
                        [PT_JOB_STOPPED] = 1, [PT_JOB_QUEUED] = 1},
    [PT_JOB_CANCELLING] = {[PT_JOB_STOPPED] = 1, [PT_JOB_FAILED] = 1, [PT_JOB_SUCCEEDED] = 1},
};

static const char SQL_TRANSITION[] =
    "UPDATE jobs SET state = ?2, version = version + 1,"
    " started_at = CASE WHEN ?2 = 'running' THEN coalesce(started_at, ?3) ELSE started_at END,"
    " attempts = attempts + (?2 = 'running'),"
    " finished_at = CASE WHEN ?2 IN ('succeeded', 'failed', 'cancelled', 'stopped') THEN ?3 ELSE finished_at END,"
    " worker_pid = CASE WHEN ?2 IN ('running', 'cancelling') THEN worker_pid ELSE NULL END,"
    " failure_reason = CASE WHEN ?2 = 'failed' THEN ?4 ELSE failure_reason END,"
    " stop_reason = CASE WHEN ?2 != 'stopped' THEN stop_reason"
    "   WHEN state = 'cancelling' THEN 'cancelled' ELSE 'max_runtime' END "
    "WHERE id = ?1";
static const char SQL_RECORD[] =
    "INSERT INTO job_transitions(job_id, from_state, to_state, at, reason, event_id) VALUES (?, ?, ?, ?, ?, ?)";
static const char SQL_OLDEST_QUEUED[] =
    "SELECT id FROM jobs WHERE state = 'queued' ORDER BY created_at, id LIMIT 1";
static const char SQL_SET_WORKER[] = "UPDATE jobs SET worker_pid = ?2 WHERE id = ?1";
/* SQLite's JSON1 checks the text: anything but an object changes no row */
static const char SQL_RESULT[] =
    "UPDATE jobs SET result_json = ?2, version = version + 1 "
    "WHERE id = ?1 AND (CASE WHEN json_valid(?2) THEN json_type(?2) END) = 'object'";
static const char SQL_PROGRESS[] =
    "UPDATE jobs SET progress = ?2, epoch = ?3, step = ?4,"
    " latest_graphs_per_s = coalesce(?5, latest_graphs_per_s), version = version + 1 WHERE id = ?1";

const char *pt_job_state_name(pt_job_state st)
{
    if (st < 0 || st >= PT_JOB_STATE_COUNT) return "unknown";
    return state_names[st];
}

int pt_job_state_parse(const char *name, pt_job_state *st)
{
    for (int i = 0; name && i < PT_JOB_STATE_COUNT; i++) {
        if (strcmp(name, state_names[i]) == 0) {
            *st = (pt_job_state)i;
            return 0;
        }
    }
    return -1;
}

int pt_job_state_is_terminal(pt_job_state st)
{
    return st == PT_JOB_SUCCEEDED || st == PT_JOB_FAILED || st == PT_JOB_CANCELLED || st == PT_JOB_STOPPED;
}

int pt_job_transition_allowed(pt_job_state from, pt_job_state to)
{
    if (from < 0 || from >= PT_JOB_STATE_COUNT || to < 0 || to >= PT_JOB_STATE_COUNT) return 0;
    return allowed[from][to];
}

static void describe_exits(pt_job_state from, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int to = 0; to < PT_JOB_STATE_COUNT; to++) {
        if (!allowed[from][to]) continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", state_names[to]);
        if (n < 0 || (size_t)n >= len - used) break;
        used += (size_t)n;
    }
    if (!used) snprintf(buf, len, "none, it is final");
}

/* Runs inside the caller's write transaction; `job` holds the current row and
 * is refreshed on success. */
static int transition_in_tx(pt_store *s, pt_store_job *job, pt_job_state to, const char *reason)
{
    pt_job_state from = job->state;
    if (!pt_job_transition_allowed(from, to)) {
        char exits[96];
        describe_exits(from, exits, sizeof(exits));
        return pt_store_fail(s, PT_STORE_ILLEGAL_TRANSITION,
                             "job %s cannot go from %s to %s (from %s it may go to: %s)", job->id,
                             pt_job_state_name(from), pt_job_state_name(to), pt_job_state_name(from),
                             exits);
    }
    int64_t now = pt_store_now_us();
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_TRANSITION, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, job->id);
    pt_store_bind_text(st, 2, pt_job_state_name(to));
    sqlite3_bind_int64(st, 3, now);
    pt_store_bind_text(st, 4, reason);
    int step = sqlite3_step(st);
    sqlite3_reset(st);
    if (step != SQLITE_DONE) return pt_store_fail_sql(s, step, "update job state");

    int64_t event_id;
    rc = pt_store_next_event_id(s, job->id, &event_id);
    if (!rc) rc = pt_store_stmt(s, SQL_RECORD, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, job->id);
    pt_store_bind_text(st, 2, pt_job_state_name(from));
    pt_store_bind_text(st, 3, pt_job_state_name(to));
    sqlite3_bind_int64(st, 4, now);
    pt_store_bind_text(st, 5, reason);
    sqlite3_bind_int64(st, 6, event_id);
    step = sqlite3_step(st);
    sqlite3_reset(st);
    if (step != SQLITE_DONE) return pt_store_fail_sql(s, step, "record job transition");

    char id[PT_STORE_ID_MAX];
    memcpy(id, job->id, sizeof(id));
    pt_store_job_clear(job);
    return pt_store_job_load(s, NULL, id, job);
}

static int check_reason(pt_store *s, const char *reason)
{
    return pt_store_check_text(s, "transition reason", reason, PT_STORE_REASON_MAX);
}

/* Commits or rolls back, then hands the job to `out` or frees it. */
static int finish(pt_store *s, int rc, pt_store_job *job, pt_store_job *out)
{
    if (rc) pt_store_tx_rollback(s);
    else rc = pt_store_tx_commit(s);
    if (!rc && out) *out = *job;
    else pt_store_job_clear(job);
    return rc;
}

int pt_store_job_transition(pt_store *s, const char *owner, const char *id, pt_job_state to,
                            const char *reason, pt_store_job *out)
{
    if (out) memset(out, 0, sizeof(*out));
    int rc = check_reason(s, reason);
    if (!rc && (to < 0 || to >= PT_JOB_STATE_COUNT))
        rc = pt_store_fail(s, PT_STORE_INVALID, "target job state %d is not a state", (int)to);
    if (rc) return rc;
    rc = pt_store_tx_begin(s, 1);
    if (rc) return rc;
    pt_store_job job;
    rc = pt_store_job_load(s, owner, id, &job);
    if (!rc) rc = transition_in_tx(s, &job, to, reason);
    return finish(s, rc, &job, out);
}

int pt_store_job_cancel(pt_store *s, const char *owner, const char *id, const char *reason,
                        pt_store_job *out)
{
    if (out) memset(out, 0, sizeof(*out));
    int rc = check_reason(s, reason);
    if (rc) return rc;
    rc = pt_store_tx_begin(s, 1);
    if (rc) return rc;
    pt_store_job job;
    rc = pt_store_job_load(s, owner, id, &job);
    if (!rc) {
        if (job.state == PT_JOB_QUEUED) rc = transition_in_tx(s, &job, PT_JOB_CANCELLED, reason);
        else if (job.state == PT_JOB_RUNNING) rc = transition_in_tx(s, &job, PT_JOB_CANCELLING, reason);
        else if (pt_job_state_is_terminal(job.state))
            rc = pt_store_fail(s, PT_STORE_ILLEGAL_TRANSITION, "job %s already %s; nothing to cancel",
                               job.id, pt_job_state_name(job.state));
    }
    return finish(s, rc, &job, out);
}

int pt_store_job_claim_next(pt_store *s, const char *reason, pt_store_job *out)
{
    if (out) memset(out, 0, sizeof(*out));
    int rc = check_reason(s, reason);
    if (rc) return rc;
    rc = pt_store_tx_begin(s, 1);
    if (rc) return rc;
    sqlite3_stmt *st = NULL;
    char id[PT_STORE_ID_MAX] = "";
    rc = pt_store_stmt(s, SQL_OLDEST_QUEUED, &st);
    if (!rc) {
        int step = sqlite3_step(st);
        if (step == SQLITE_ROW) pt_store_col_copy(st, 0, id, sizeof(id));
        else if (step == SQLITE_DONE) rc = pt_store_fail(s, PT_STORE_NOT_FOUND, "no job is queued");
        else rc = pt_store_fail_sql(s, step, "find oldest queued job");
        sqlite3_reset(st);
    }
    pt_store_job job;
    memset(&job, 0, sizeof(job));
    if (!rc) rc = pt_store_job_load(s, NULL, id, &job);
    if (!rc) rc = transition_in_tx(s, &job, PT_JOB_RUNNING, reason);
    return finish(s, rc, &job, out);
}

static int require_active(pt_store *s, const pt_store_job *job, const char *what)
{
    if (job->state == PT_JOB_RUNNING || job->state == PT_JOB_CANCELLING) return PT_STORE_OK;
    return pt_store_fail(s, PT_STORE_CONFLICT, "job %s is %s; %s is only recorded while it runs", job->id,
                         pt_job_state_name(job->state), what);
}

int pt_store_job_set_worker(pt_store *s, const char *id, int64_t pid)
{
    if (pid <= 0) return pt_store_fail(s, PT_STORE_INVALID, "worker pid must be > 0, got %lld", (long long)pid);
    int rc = pt_store_tx_begin(s, 1);
    if (rc) return rc;
    pt_store_job job;
    rc = pt_store_job_load(s, NULL, id, &job);
    if (!rc) rc = require_active(s, &job, "a worker pid");
    sqlite3_stmt *st = NULL;
    if (!rc) rc = pt_store_stmt(s, SQL_SET_WORKER, &st);
    if (!rc) {
        pt_store_bind_text(st, 1, id);
        sqlite3_bind_int64(st, 2, pid);
        int step = sqlite3_step(st);
        sqlite3_reset(st);
        if (step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, "set worker pid");
    }
    return finish(s, rc, &job, NULL);
}

static int check_progress(pt_store *s, const pt_store_progress *p)
{
    if (!isfinite(p->progress) || p->progress < 0.0 || p->progress > 1.0)
        return pt_store_fail(s, PT_STORE_INVALID, "progress must be within [0, 1], got %g", p->progress);
    if (p->epoch < 0 || p->step < 0)
        return pt_store_fail(s, PT_STORE_INVALID, "epoch and step must be >= 0 (epoch %lld, step %lld)",
                             (long long)p->epoch, (long long)p->step);
    return PT_STORE_OK;
}

int pt_store_job_set_result(pt_store *s, const char *id, const char *result_json)
{
    if (!result_json) return pt_store_fail(s, PT_STORE_INVALID, "a job's result must be a JSON object");
    int rc = pt_store_tx_begin(s, 0);
    if (rc) return rc;
    pt_store_job job;
    rc = pt_store_job_load(s, NULL, id, &job);
    if (!rc) rc = require_active(s, &job, "result");
    sqlite3_stmt *st = NULL;
    if (!rc) rc = pt_store_stmt(s, SQL_RESULT, &st);
    if (!rc) {
        pt_store_bind_text(st, 1, id);
        pt_store_bind_text(st, 2, result_json);
        int step = sqlite3_step(st);
        sqlite3_reset(st);
        if (step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, "record job result");
        else if (sqlite3_changes(s->db) != 1)
            rc = pt_store_fail(s, PT_STORE_INVALID, "a job's result must be a JSON object");
    }
    return finish(s, rc, &job, NULL);
}

int pt_store_job_update_progress(pt_store *s, const char *id, const pt_store_progress *p)
{
    int rc = check_progress(s, p);
    if (rc) return rc;
    rc = pt_store_tx_begin(s, 0);
    if (rc) return rc;
    pt_store_job job;
    rc = pt_store_job_load(s, NULL, id, &job);
    if (!rc) rc = require_active(s, &job, "progress");
    sqlite3_stmt *st = NULL;
    if (!rc) rc = pt_store_stmt(s, SQL_PROGRESS, &st);
    if (!rc) {
        pt_store_bind_text(st, 1, id);
        sqlite3_bind_double(st, 2, p->progress);
        sqlite3_bind_int64(st, 3, p->epoch);
        sqlite3_bind_int64(st, 4, p->step);
        pt_store_bind_double(st, 5, p->graphs_per_s);
        int step = sqlite3_step(st);
        sqlite3_reset(st);
        if (step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, "update job progress");
    }
    return finish(s, rc, &job, NULL);
}
