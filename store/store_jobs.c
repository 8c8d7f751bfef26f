/* store_jobs.c — creating and reading jobs: idempotent submission, lookup,
 * cursor-paginated listing, transition history, counts and the lists the
 * scheduler needs on restart.  State changes live in store_lifecycle.c. */
#include "store/store_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SQL_LOAD[] =
    "SELECT " PT_STORE_JOB_COLS " FROM jobs WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)";
static const char SQL_VERSION[] =
    "SELECT version, state FROM jobs WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)";
static const char SQL_MAX_CREATED[] = "SELECT max(created_at) FROM jobs";
static const char SQL_IDEM_GET[] =
    "SELECT request_hash, job_id FROM idempotency_keys WHERE owner = ? AND key = ?";
static const char SQL_IDEM_PUT[] =
    "INSERT INTO idempotency_keys(owner, key, request_hash, job_id, created_at) VALUES (?, ?, ?, ?, ?)";
static const char SQL_IDEM_PRUNE[] = "DELETE FROM idempotency_keys WHERE created_at < ?";
static const char SQL_IDEM_PRUNE_DATASETS[] = "DELETE FROM dataset_idempotency_keys WHERE created_at < ?";
static const char SQL_DATASET_STATUS[] = "SELECT status FROM datasets WHERE id = ? AND owner = ?";
static const char SQL_INSERT[] =
    "INSERT INTO jobs(id, owner, dataset_id, config_json, config_hash, name, tags_json, metadata_json, state,"
    " created_at) VALUES (?, ?, ?, ?, ?, nullif(?, ''), ?, ?, 'queued', ?)";
static const char SQL_INSERT_TRANSITION[] =
    "INSERT INTO job_transitions(job_id, from_state, to_state, at, reason, event_id) "
    "VALUES (?, NULL, 'queued', ?, ?, ?)";
/* One statement for every combination of filters: an absent filter is a
 * NULL parameter that matches every row. */
static const char SQL_LIST[] =
    "SELECT " PT_STORE_JOB_COLS " FROM jobs WHERE owner = ?1"
    " AND (?3 IS NULL OR (created_at, id) < (?3, ?4))"
    " AND (?5 IS NULL OR state = ?5) AND (?6 IS NULL OR dataset_id = ?6) AND (?7 IS NULL OR name = ?7)"
    " AND (?8 IS NULL OR EXISTS (SELECT 1 FROM json_each(jobs.tags_json) WHERE value = ?8))"
    " ORDER BY created_at DESC, id DESC LIMIT ?2";
static const char SQL_DELETE_JOB[] = "DELETE FROM jobs WHERE id = ?";
static const char SQL_TRANSITIONS[] =
    "SELECT from_state, to_state, at, reason, event_id FROM job_transitions WHERE job_id = ? ORDER BY seq";
static const char SQL_COUNT_ALL[] = "SELECT state, count(*) FROM jobs GROUP BY state";
static const char SQL_COUNT_OWNER[] = "SELECT state, count(*) FROM jobs WHERE owner = ? GROUP BY state";
static const char SQL_UNFINISHED[] =
    "SELECT " PT_STORE_JOB_COLS " FROM jobs WHERE state IN ('running', 'cancelling') "
    "ORDER BY created_at, id";

/* ---- rows ----------------------------------------------------------------- */

void pt_store_job_clear(pt_store_job *j)
{
    if (!j) return;
    free(j->config_json);
    free(j->tags_json);
    free(j->metadata_json);
    free(j->result_json);
    memset(j, 0, sizeof(*j));
}

void pt_store_job_page_clear(pt_store_job_page *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) pt_store_job_clear(&p->items[i]);
    free(p->items);
    memset(p, 0, sizeof(*p));
}

void pt_store_job_array_clear(pt_store_job_array *l)
{
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) pt_store_job_clear(&l->items[i]);
    free(l->items);
    memset(l, 0, sizeof(*l));
}

void pt_store_transition_list_clear(pt_store_transition_list *l)
{
    if (!l) return;
    free(l->items);
    memset(l, 0, sizeof(*l));
}

static pt_job_state col_state(sqlite3_stmt *st, int col)
{
    pt_job_state state = PT_JOB_ANY;
    const unsigned char *t = sqlite3_column_text(st, col);
    if (t) pt_job_state_parse((const char *)t, &state);
    return state;
}

int pt_store_job_from_row(pt_store *s, sqlite3_stmt *st, pt_store_job *j)
{
    memset(j, 0, sizeof(*j));
    pt_store_col_copy(st, 0, j->id, sizeof(j->id));
    pt_store_col_copy(st, 1, j->owner, sizeof(j->owner));
    pt_store_col_copy(st, 2, j->dataset_id, sizeof(j->dataset_id));
    pt_store_col_copy(st, 3, j->config_hash, sizeof(j->config_hash));
    int oom = 0;
    j->config_json = pt_store_col_dup(st, 4, &oom);
    j->state = col_state(st, 5);
    j->created_at = sqlite3_column_int64(st, 6);
    j->started_at = sqlite3_column_int64(st, 7);
    j->finished_at = sqlite3_column_int64(st, 8);
    j->progress = sqlite3_column_double(st, 9);
    j->epoch = sqlite3_column_int64(st, 10);
    j->step = sqlite3_column_int64(st, 11);
    j->best_val_mae = pt_store_col_double(st, 12);
    j->latest_graphs_per_s = pt_store_col_double(st, 13);
    pt_store_col_copy(st, 14, j->failure_reason, sizeof(j->failure_reason));
    j->attempts = sqlite3_column_int(st, 15);
    j->worker_pid = sqlite3_column_int64(st, 16);
    j->version = sqlite3_column_int64(st, 17);
    j->result_json = pt_store_col_dup(st, 18, &oom);
    j->event_seq = sqlite3_column_int64(st, 19);
    pt_store_col_copy(st, 20, j->name, sizeof(j->name));
    j->tags_json = pt_store_col_dup(st, 21, &oom);
    j->metadata_json = pt_store_col_dup(st, 22, &oom);
    pt_store_col_copy(st, 23, j->stop_reason, sizeof(j->stop_reason));
    if (oom) return pt_store_fail(s, PT_STORE_IO, "job %s: out of memory", j->id);
    return PT_STORE_OK;
}

int pt_store_job_load(pt_store *s, const char *owner, const char *id, pt_store_job *out)
{
    memset(out, 0, sizeof(*out));
    if (!id || !id[0]) return pt_store_fail(s, PT_STORE_INVALID, "job id is empty");
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_LOAD, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, id);
    pt_store_bind_text(st, 2, owner);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) rc = pt_store_job_from_row(s, st, out);
    else if (step == SQLITE_DONE) rc = pt_store_fail(s, PT_STORE_NOT_FOUND, "job %s not found", id);
    else rc = pt_store_fail_sql(s, step, "read job");
    sqlite3_reset(st);
    return rc;
}

int pt_store_job_get(pt_store *s, const char *owner, const char *id, pt_store_job *out)
{
    return pt_store_job_load(s, owner, id, out);
}

int pt_store_job_version(pt_store *s, const char *owner, const char *id, int64_t *version,
                         pt_job_state *state)
{
    if (!id || !id[0]) return pt_store_fail(s, PT_STORE_INVALID, "job id is empty");
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_VERSION, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, id);
    pt_store_bind_text(st, 2, owner);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        *version = sqlite3_column_int64(st, 0);
        if (state) *state = col_state(st, 1);
    } else if (step == SQLITE_DONE) {
        rc = pt_store_fail(s, PT_STORE_NOT_FOUND, "job %s not found", id);
    } else {
        rc = pt_store_fail_sql(s, step, "read job version");
    }
    sqlite3_reset(st);
    return rc;
}

int pt_store_job_check_visible(pt_store *s, const char *owner, const char *id)
{
    int64_t version;
    return pt_store_job_version(s, owner, id, &version, NULL);
}

/* ---- create ---------------------------------------------------------------- */

static int check_request(pt_store *s, const pt_store_job_request *req)
{
    int rc = pt_store_check_text(s, "owner", req->owner, PT_STORE_OWNER_MAX);
    if (!rc) rc = pt_store_check_text(s, "dataset id", req->dataset_id, PT_STORE_ID_MAX);
    if (!rc && (!req->config_json || !req->config_json[0]))
        rc = pt_store_fail(s, PT_STORE_INVALID, "job config is empty");
    if (!rc && req->idempotency_key && req->idempotency_key[0])
        rc = pt_store_check_text(s, "Idempotency-Key", req->idempotency_key, PT_STORE_KEY_MAX);
    if (!rc && req->name && strlen(req->name) >= PT_STORE_NAME_MAX)
        rc = pt_store_fail(s, PT_STORE_INVALID, "job name is %zu bytes, at most %d allowed", strlen(req->name),
                           PT_STORE_NAME_MAX - 1);
    return rc;
}

/* Looks the key up: PT_STORE_OK with job_id[0] == 0 when unused. */
static int idempotency_lookup(pt_store *s, const pt_store_job_request *req, const char *request_hash,
                              char job_id[PT_STORE_ID_MAX])
{
    job_id[0] = '\0';
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_IDEM_GET, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, req->owner);
    pt_store_bind_text(st, 2, req->idempotency_key);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        const char *stored = (const char *)sqlite3_column_text(st, 0);
        pt_store_col_copy(st, 1, job_id, PT_STORE_ID_MAX);
        if (!stored || strcmp(stored, request_hash) != 0)
            rc = pt_store_fail(s, PT_STORE_IDEMPOTENCY_MISMATCH,
                               "Idempotency-Key '%s' was already used for a different request "
                               "(job %s); use a new key for a new job", req->idempotency_key, job_id);
    } else if (step != SQLITE_DONE) {
        rc = pt_store_fail_sql(s, step, "read idempotency key");
    }
    sqlite3_reset(st);
    return rc;
}

static int check_dataset_ready(pt_store *s, const pt_store_job_request *req)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_DATASET_STATUS, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, req->dataset_id);
    pt_store_bind_text(st, 2, req->owner);
    int step = sqlite3_step(st);
    if (step == SQLITE_DONE) {
        rc = pt_store_fail(s, PT_STORE_NOT_FOUND, "dataset %s not found", req->dataset_id);
    } else if (step != SQLITE_ROW) {
        rc = pt_store_fail_sql(s, step, "read dataset status");
    } else {
        char status[PT_STORE_STATUS_MAX];
        pt_store_col_copy(st, 0, status, sizeof(status));
        if (strcmp(status, "ready") != 0)
            rc = pt_store_fail(s, PT_STORE_CONFLICT, "dataset %s is '%s', not 'ready'; jobs need a "
                               "ready dataset", req->dataset_id, status);
    }
    sqlite3_reset(st);
    return rc;
}

static int run_write(pt_store *s, const char *sql, const char *what, const char *const *texts,
                      int n_texts, const int64_t *ints, int n_ints)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, sql, &st);
    if (rc) return rc;
    for (int i = 0; i < n_texts; i++) pt_store_bind_text(st, i + 1, texts[i]);
    for (int i = 0; i < n_ints; i++) sqlite3_bind_int64(st, n_texts + i + 1, ints[i]);
    int step = sqlite3_step(st);
    sqlite3_reset(st);
    if (step != SQLITE_DONE) return pt_store_fail_sql(s, step, what);
    return PT_STORE_OK;
}

static int insert_job(pt_store *s, const pt_store_job_request *req, const char *config_hash,
                      const char *request_hash, char id[PT_STORE_ID_MAX])
{
    if (pt_store_new_id("job_", id, PT_STORE_ID_MAX))
        return pt_store_fail(s, PT_STORE_IO, "job id: getrandom failed");
    int64_t created_at;
    int rc = pt_store_next_created_at(s, SQL_MAX_CREATED, &created_at);
    if (rc) return rc;
    const char *job[] = {id, req->owner, req->dataset_id, req->config_json, config_hash, req->name ? req->name : "",
                         req->tags_json ? req->tags_json : "[]", req->metadata_json ? req->metadata_json : "{}"};
    rc = run_write(s, SQL_INSERT, "insert job", job, 8, &created_at, 1);
    if (rc) return rc;
    int64_t event_id;
    rc = pt_store_next_event_id(s, id, &event_id);
    sqlite3_stmt *st = NULL;
    if (!rc) rc = pt_store_stmt(s, SQL_INSERT_TRANSITION, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, id);
    sqlite3_bind_int64(st, 2, created_at);
    pt_store_bind_text(st, 3, "submitted");
    sqlite3_bind_int64(st, 4, event_id);
    int step = sqlite3_step(st);
    sqlite3_reset(st);
    if (step != SQLITE_DONE) return pt_store_fail_sql(s, step, "record job creation");
    if (req->idempotency_key && req->idempotency_key[0]) {
        const char *key[] = {req->owner, req->idempotency_key, request_hash, id};
        rc = run_write(s, SQL_IDEM_PUT, "record idempotency key", key, 4, &created_at, 1);
    }
    return rc;
}

int pt_store_job_create(pt_store *s, const pt_store_job_request *req, pt_store_job *out, int *created)
{
    memset(out, 0, sizeof(*out));
    if (created) *created = 0;
    int rc = check_request(s, req);
    if (rc) return rc;
    char config_hash[PT_STORE_HASH_HEX], request_hash[PT_STORE_HASH_HEX];
    pt_store_sha256_hex(req->config_json, strlen(req->config_json), config_hash);
    /* the whole request: the same key with another name or tags is another request */
    char *basis = NULL;
    int len = asprintf(&basis, "%s\n%s\n%s\n%s\n%s", req->dataset_id, config_hash, req->name ? req->name : "",
                       req->tags_json ? req->tags_json : "[]", req->metadata_json ? req->metadata_json : "{}");
    if (len < 0) return pt_store_fail(s, PT_STORE_IO, "job: out of memory");
    pt_store_sha256_hex(basis, (size_t)len, request_hash);
    free(basis);

    rc = pt_store_tx_begin(s, 1);
    if (rc) return rc;
    char id[PT_STORE_ID_MAX] = "";
    int fresh = 0;
    if (req->idempotency_key && req->idempotency_key[0])
        rc = idempotency_lookup(s, req, request_hash, id);
    if (!rc && !id[0]) {
        rc = check_dataset_ready(s, req);
        if (!rc) rc = insert_job(s, req, config_hash, request_hash, id);
        fresh = 1;
    }
    if (!rc) rc = pt_store_job_load(s, req->owner, id, out);
    if (rc) {
        pt_store_tx_rollback(s);
        pt_store_job_clear(out);
        return rc;
    }
    rc = pt_store_tx_commit(s);
    if (rc) {
        pt_store_job_clear(out);
        return rc;
    }
    if (created) *created = fresh;
    return PT_STORE_OK;
}

int pt_store_idempotency_known(pt_store *s, const char *owner, const char *key, int *known)
{
    *known = 0;
    int rc = pt_store_read_begin(s);
    if (rc) return rc;
    sqlite3_stmt *st = NULL;
    rc = pt_store_stmt(s, SQL_IDEM_GET, &st);
    if (!rc) {
        pt_store_bind_text(st, 1, owner);
        pt_store_bind_text(st, 2, key);
        int step = sqlite3_step(st);
        if (step == SQLITE_ROW) *known = 1;
        else if (step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, "read idempotency key");
        sqlite3_reset(st);
    }
    pt_store_read_end(s);
    return rc;
}

int pt_store_idempotency_prune(pt_store *s, int64_t before_us, int64_t *n_removed)
{
    int rc = pt_store_tx_begin(s, 1);
    if (rc) return rc;
    rc = run_write(s, SQL_IDEM_PRUNE, "prune idempotency keys", NULL, 0, &before_us, 1);
    int64_t n = sqlite3_changes(s->db);
    if (!rc) rc = run_write(s, SQL_IDEM_PRUNE_DATASETS, "prune idempotency keys", NULL, 0, &before_us, 1);
    if (!rc) n += sqlite3_changes(s->db);
    if (rc) {
        pt_store_tx_rollback(s);
        return rc;
    }
    rc = pt_store_tx_commit(s);
    if (!rc && n_removed) *n_removed = n;
    return rc;
}

/* ---- lists ----------------------------------------------------------------- */

static int job_row(pt_store *s, sqlite3_stmt *st, void *item)
{
    return pt_store_job_from_row(s, st, item);
}

int pt_store_job_list(pt_store *s, const char *owner, const pt_store_job_filter *filter, int limit,
                      const char *page_token, pt_store_job_page *out)
{
    memset(out, 0, sizeof(*out));
    pt_store_job_filter none = {0};
    const pt_store_job_filter *f = filter ? filter : &none;
    pt_job_state state;
    int rc = pt_store_check_text(s, "owner", owner, PT_STORE_OWNER_MAX);
    if (!rc) rc = pt_store_check_limit(s, limit, &limit);
    if (!rc && f->state && pt_job_state_parse(f->state, &state) != 0)
        rc = pt_store_fail(s, PT_STORE_INVALID, "job state filter '%.32s' is not a state", f->state);
    if (rc) return rc;
    pt_store_page_after after;
    if ((rc = pt_store_page_after_parse(s, page_token, &after))) return rc;
    sqlite3_stmt *st = NULL;
    if ((rc = pt_store_stmt(s, SQL_LIST, &st))) return rc;
    pt_store_page_bind(st, owner, limit, &after);
    pt_store_bind_text(st, 5, f->state);
    pt_store_bind_text(st, 6, f->dataset_id);
    pt_store_bind_text(st, 7, f->name);
    pt_store_bind_text(st, 8, f->tag);
    int more = 0;
    rc = pt_store_page_read(s, st, limit, sizeof(*out->items), job_row, (void **)&out->items, &out->n, &more,
                            "list jobs");
    if (rc) {
        pt_store_job_page_clear(out);
        return rc;
    }
    if (more) {
        const pt_store_job *last = &out->items[out->n - 1];
        pt_store_page_token_encode(last->created_at, last->id, out->next_token);
    }
    return PT_STORE_OK;
}

int pt_store_job_delete(pt_store *s, const char *owner, const char *id, pt_store_job *removed)
{
    pt_store_job job = {0};
    int rc = pt_store_tx_begin(s, 1);
    if (rc) return rc;
    rc = pt_store_job_load(s, owner, id, &job);
    if (!rc && !pt_job_state_is_terminal(job.state))
        rc = pt_store_fail(s, PT_STORE_CONFLICT, "job %s is %s; only a job that has ended can be deleted", id,
                           pt_job_state_name(job.state));
    if (!rc) rc = run_write(s, SQL_DELETE_JOB, "delete job", &id, 1, NULL, 0);
    if (rc) {
        pt_store_tx_rollback(s);
        pt_store_job_clear(&job);
        return rc;
    }
    rc = pt_store_tx_commit(s);
    if (!rc && removed) *removed = job;
    else pt_store_job_clear(&job);
    return rc;
}

static int grow(pt_store *s, void **items, size_t n, size_t *cap, size_t size)
{
    if (n < *cap) return PT_STORE_OK;
    size_t c = *cap ? *cap * 2 : 16;
    void *p = realloc(*items, c * size);
    if (!p) return pt_store_fail(s, PT_STORE_IO, "list: out of memory");
    memset((char *)p + *cap * size, 0, (c - *cap) * size);
    *items = p;
    *cap = c;
    return PT_STORE_OK;
}

int pt_store_job_list_unfinished(pt_store *s, pt_store_job_array *out)
{
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_UNFINISHED, &st);
    if (rc) return rc;
    size_t cap = 0;
    int step = SQLITE_DONE;
    while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
        rc = grow(s, (void **)&out->items, out->n, &cap, sizeof(*out->items));
        if (!rc) rc = pt_store_job_from_row(s, st, &out->items[out->n++]);
    }
    if (!rc && step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, "list unfinished jobs");
    sqlite3_reset(st);
    if (rc) pt_store_job_array_clear(out);
    return rc;
}

static int read_transitions(pt_store *s, const char *id, pt_store_transition_list *out)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_TRANSITIONS, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, id);
    size_t cap = 0;
    int step = SQLITE_DONE;
    while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
        rc = grow(s, (void **)&out->items, out->n, &cap, sizeof(*out->items));
        if (rc) break;
        pt_store_transition *t = &out->items[out->n++];
        t->from = col_state(st, 0);
        t->to = col_state(st, 1);
        t->at = sqlite3_column_int64(st, 2);
        pt_store_col_copy(st, 3, t->reason, sizeof(t->reason));
        t->event_id = sqlite3_column_int64(st, 4);
    }
    if (!rc && step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, "read job transitions");
    sqlite3_reset(st);
    return rc;
}

int pt_store_job_transitions(pt_store *s, const char *owner, const char *id,
                             pt_store_transition_list *out)
{
    memset(out, 0, sizeof(*out));
    int rc = pt_store_read_begin(s);
    if (rc) return rc;
    rc = pt_store_job_check_visible(s, owner, id);
    if (!rc) rc = read_transitions(s, id, out);
    pt_store_read_end(s);
    if (rc) pt_store_transition_list_clear(out);
    return rc;
}

int pt_store_job_count_by_state(pt_store *s, const char *owner, int64_t counts[PT_JOB_STATE_COUNT])
{
    for (int i = 0; i < PT_JOB_STATE_COUNT; i++) counts[i] = 0;
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, owner ? SQL_COUNT_OWNER : SQL_COUNT_ALL, &st);
    if (rc) return rc;
    if (owner) pt_store_bind_text(st, 1, owner);
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        pt_job_state state = col_state(st, 0);
        if (state != PT_JOB_ANY) counts[state] = sqlite3_column_int64(st, 1);
    }
    if (step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, "count jobs");
    sqlite3_reset(st);
    return rc;
}
