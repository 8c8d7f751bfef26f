/* store_datasets.c — uploaded datasets' metadata: where the file lives, its
 * format and counts, the ingest report, and whether jobs may use it. */
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

#define DATASET_COLS \
    "id, owner, name, path, format, status, created_at, n_structs, n_atoms, bytes, report_json, " \
    "coalesce(content_sha256, ''), coalesce(ingest_hash, '')"

static const char SQL_MAX_CREATED[] = "SELECT max(created_at) FROM datasets";
static const char SQL_INSERT[] =
    "INSERT INTO datasets(id, owner, name, path, format, status, created_at, n_structs, n_atoms, bytes, report_json,"
    " content_sha256, ingest_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, nullif(?, ''), nullif(?, ''))";
static const char SQL_FIND_INGEST[] =
    "SELECT " DATASET_COLS " FROM datasets WHERE owner = ? AND ingest_hash = ?";
static const char SQL_KEY_GET[] =
    "SELECT request_hash, dataset_id FROM dataset_idempotency_keys WHERE owner = ? AND key = ?";
static const char SQL_KEY_PUT[] =
    "INSERT INTO dataset_idempotency_keys(owner, key, request_hash, dataset_id, created_at) VALUES (?, ?, ?, ?, ?)";
static const char SQL_UPDATE[] =
    "UPDATE datasets SET status = ?3, n_structs = ?4, n_atoms = ?5, bytes = ?6, report_json = ?7 "
    "WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)";
static const char SQL_GET[] =
    "SELECT " DATASET_COLS " FROM datasets WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)";
static const char SQL_LIST_FIRST[] =
    "SELECT " DATASET_COLS " FROM datasets WHERE owner = ?1 "
    "ORDER BY created_at DESC, id DESC LIMIT ?2";
static const char SQL_LIST_AFTER[] =
    "SELECT " DATASET_COLS " FROM datasets WHERE owner = ?1 AND (created_at, id) < (?3, ?4) "
    "ORDER BY created_at DESC, id DESC LIMIT ?2";
static const char SQL_USERS[] =
    "SELECT count(*), min(id) FROM jobs "
    "WHERE dataset_id = ? AND state IN ('queued', 'running', 'cancelling')";
static const char SQL_DELETE[] = "DELETE FROM datasets WHERE id = ?";

void pt_store_dataset_clear(pt_store_dataset *d)
{
    if (!d) return;
    free(d->report_json);
    memset(d, 0, sizeof(*d));
}

void pt_store_dataset_page_clear(pt_store_dataset_page *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) pt_store_dataset_clear(&p->items[i]);
    free(p->items);
    memset(p, 0, sizeof(*p));
}

static int dataset_from_row(pt_store *s, sqlite3_stmt *st, pt_store_dataset *d)
{
    memset(d, 0, sizeof(*d));
    pt_store_col_copy(st, 0, d->id, sizeof(d->id));
    pt_store_col_copy(st, 1, d->owner, sizeof(d->owner));
    pt_store_col_copy(st, 2, d->name, sizeof(d->name));
    pt_store_col_copy(st, 3, d->path, sizeof(d->path));
    pt_store_col_copy(st, 4, d->format, sizeof(d->format));
    pt_store_col_copy(st, 5, d->status, sizeof(d->status));
    d->created_at = sqlite3_column_int64(st, 6);
    d->n_structs = sqlite3_column_int64(st, 7);
    d->n_atoms = sqlite3_column_int64(st, 8);
    d->bytes = sqlite3_column_int64(st, 9);
    int oom = 0;
    d->report_json = pt_store_col_dup(st, 10, &oom);
    pt_store_col_copy(st, 11, d->content_sha256, sizeof(d->content_sha256));
    pt_store_col_copy(st, 12, d->ingest_hash, sizeof(d->ingest_hash));
    if (oom) return pt_store_fail(s, PT_STORE_IO, "dataset %s: out of memory", d->id);
    return PT_STORE_OK;
}

static int check_counts(pt_store *s, const pt_store_dataset *d)
{
    if (d->n_structs < 0 || d->n_atoms < 0 || d->bytes < 0)
        return pt_store_fail(s, PT_STORE_INVALID, "dataset counts must be >= 0 (structs %lld, atoms %lld, "
                             "bytes %lld)", (long long)d->n_structs, (long long)d->n_atoms,
                             (long long)d->bytes);
    return pt_store_check_text(s, "dataset status", d->status, sizeof(d->status));
}

static int check_new(pt_store *s, const pt_store_dataset *in)
{
    int rc = pt_store_check_text(s, "owner", in->owner, sizeof(in->owner));
    if (!rc) rc = pt_store_check_text(s, "dataset name", in->name, sizeof(in->name));
    if (!rc) rc = pt_store_check_text(s, "dataset path", in->path, sizeof(in->path));
    if (!rc) rc = pt_store_check_text(s, "dataset format", in->format, sizeof(in->format));
    if (!rc) rc = check_counts(s, in);
    if (!rc && in->id[0]) rc = pt_store_check_text(s, "dataset id", in->id, sizeof(in->id));
    /* Page tokens carry ids and accept only this alphabet (see store.c). */
    if (!rc && in->id[0] && strspn(in->id, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(in->id))
        rc = pt_store_fail(s, PT_STORE_INVALID, "dataset id '%s' may only contain a-z, 0-9 and '_'", in->id);
    return rc;
}

static int dataset_row(pt_store *s, sqlite3_stmt *st, void *item)
{
    return dataset_from_row(s, st, item);
}

static int get_in_tx(pt_store *s, const char *owner, const char *id, pt_store_dataset *out)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_GET, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, id);
    pt_store_bind_text(st, 2, owner);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) rc = dataset_from_row(s, st, out);
    else if (step == SQLITE_DONE) rc = pt_store_fail(s, PT_STORE_NOT_FOUND, "dataset %s not found", id);
    else rc = pt_store_fail_sql(s, step, "read dataset");
    sqlite3_reset(st);
    return rc;
}

int pt_store_dataset_create(pt_store *s, const pt_store_dataset *in, pt_store_dataset *out)
{
    return pt_store_dataset_create_unique(s, in, out, NULL);
}

/* Inside the caller's transaction. */
static int find_ingest(pt_store *s, const char *owner, const char *ingest_hash, pt_store_dataset *out)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_FIND_INGEST, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, owner);
    pt_store_bind_text(st, 2, ingest_hash);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) rc = dataset_from_row(s, st, out);
    else if (step == SQLITE_DONE) rc = pt_store_fail(s, PT_STORE_NOT_FOUND, "no dataset of that upload");
    else rc = pt_store_fail_sql(s, step, "find dataset by upload");
    sqlite3_reset(st);
    return rc;
}

int pt_store_dataset_find_ingest(pt_store *s, const char *owner, const char *ingest_hash, pt_store_dataset *out)
{
    memset(out, 0, sizeof(*out));
    if (!ingest_hash || !ingest_hash[0]) return pt_store_fail(s, PT_STORE_INVALID, "ingest hash is empty");
    return find_ingest(s, owner, ingest_hash, out);
}

int pt_store_dataset_create_unique(pt_store *s, const pt_store_dataset *in, pt_store_dataset *out,
                                   char existing_id[PT_STORE_ID_MAX])
{
    if (existing_id) existing_id[0] = '\0';
    int rc = check_new(s, in);
    if (rc) return rc;
    char id[PT_STORE_ID_MAX];
    if (in->id[0]) memcpy(id, in->id, sizeof(id));
    else if (pt_store_new_id("ds_", id, sizeof(id)))
        return pt_store_fail(s, PT_STORE_IO, "dataset id: getrandom failed");

    rc = pt_store_tx_begin(s, 1);
    if (rc) return rc;
    int64_t created_at = 0;
    rc = pt_store_next_created_at(s, SQL_MAX_CREATED, &created_at);
    sqlite3_stmt *st = NULL;
    if (!rc) rc = pt_store_stmt(s, SQL_INSERT, &st);
    if (!rc) {
        pt_store_bind_text(st, 1, id);
        pt_store_bind_text(st, 2, in->owner);
        pt_store_bind_text(st, 3, in->name);
        pt_store_bind_text(st, 4, in->path);
        pt_store_bind_text(st, 5, in->format);
        pt_store_bind_text(st, 6, in->status);
        sqlite3_bind_int64(st, 7, created_at);
        sqlite3_bind_int64(st, 8, in->n_structs);
        sqlite3_bind_int64(st, 9, in->n_atoms);
        sqlite3_bind_int64(st, 10, in->bytes);
        pt_store_bind_text(st, 11, in->report_json);
        pt_store_bind_text(st, 12, in->content_sha256);
        pt_store_bind_text(st, 13, in->ingest_hash);
        int step = sqlite3_step(st);
        int ext = sqlite3_extended_errcode(s->db);
        sqlite3_reset(st);
        if (step != SQLITE_DONE && ext == SQLITE_CONSTRAINT_UNIQUE && in->ingest_hash[0]) {
            pt_store_dataset twin;
            memset(&twin, 0, sizeof twin);
            rc = find_ingest(s, in->owner, in->ingest_hash, &twin);
            if (!rc) {
                if (existing_id) memcpy(existing_id, twin.id, PT_STORE_ID_MAX);
                rc = pt_store_fail(s, PT_STORE_CONFLICT, "the same upload is dataset %s", twin.id);
            }
            pt_store_dataset_clear(&twin);
        } else if ((step & 0xff) == SQLITE_CONSTRAINT) {
            rc = pt_store_fail(s, PT_STORE_CONFLICT, "dataset id %s already exists", id);
        } else if (step != SQLITE_DONE) {
            rc = pt_store_fail_sql(s, step, "insert dataset");
        }
    }
    if (!rc && out) rc = get_in_tx(s, in->owner, id, out);
    if (rc) {
        pt_store_tx_rollback(s);
        return rc;
    }
    return pt_store_tx_commit(s);
}

int pt_store_dataset_key_get(pt_store *s, const char *owner, const char *key, char request_hash[PT_STORE_HASH_HEX],
                             char dataset_id[PT_STORE_ID_MAX])
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_check_text(s, "Idempotency-Key", key, PT_STORE_KEY_MAX);
    if (!rc) rc = pt_store_stmt(s, SQL_KEY_GET, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, owner);
    pt_store_bind_text(st, 2, key);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        pt_store_col_copy(st, 0, request_hash, PT_STORE_HASH_HEX);
        pt_store_col_copy(st, 1, dataset_id, PT_STORE_ID_MAX);
    } else if (step == SQLITE_DONE) {
        rc = pt_store_fail(s, PT_STORE_NOT_FOUND, "Idempotency-Key '%s' is unused", key);
    } else {
        rc = pt_store_fail_sql(s, step, "read idempotency key");
    }
    sqlite3_reset(st);
    return rc;
}

int pt_store_dataset_key_put(pt_store *s, const char *owner, const char *key, const char *request_hash,
                             const char *dataset_id)
{
    int rc = pt_store_check_text(s, "Idempotency-Key", key, PT_STORE_KEY_MAX);
    if (!rc) rc = pt_store_tx_begin(s, 1);
    if (rc) return rc;
    sqlite3_stmt *st = NULL;
    rc = pt_store_stmt(s, SQL_KEY_PUT, &st);
    if (!rc) {
        pt_store_bind_text(st, 1, owner);
        pt_store_bind_text(st, 2, key);
        pt_store_bind_text(st, 3, request_hash);
        pt_store_bind_text(st, 4, dataset_id);
        sqlite3_bind_int64(st, 5, pt_store_now_us());
        int step = sqlite3_step(st);
        sqlite3_reset(st);
        if ((step & 0xff) == SQLITE_CONSTRAINT)
            rc = pt_store_fail(s, PT_STORE_CONFLICT, "Idempotency-Key '%s' is already used", key);
        else if (step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, "record idempotency key");
    }
    if (rc) {
        pt_store_tx_rollback(s);
        return rc;
    }
    return pt_store_tx_commit(s);
}

int pt_store_dataset_update(pt_store *s, const char *owner, const pt_store_dataset *d)
{
    int rc = check_counts(s, d);
    if (rc) return rc;
    rc = pt_store_tx_begin(s, 1);
    if (rc) return rc;
    sqlite3_stmt *st = NULL;
    rc = pt_store_stmt(s, SQL_UPDATE, &st);
    if (!rc) {
        pt_store_bind_text(st, 1, d->id);
        pt_store_bind_text(st, 2, owner);
        pt_store_bind_text(st, 3, d->status);
        sqlite3_bind_int64(st, 4, d->n_structs);
        sqlite3_bind_int64(st, 5, d->n_atoms);
        sqlite3_bind_int64(st, 6, d->bytes);
        pt_store_bind_text(st, 7, d->report_json);
        int step = sqlite3_step(st);
        sqlite3_reset(st);
        if (step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, "update dataset");
        else if (sqlite3_changes(s->db) == 0)
            rc = pt_store_fail(s, PT_STORE_NOT_FOUND, "dataset %s not found", d->id);
    }
    if (rc) {
        pt_store_tx_rollback(s);
        return rc;
    }
    return pt_store_tx_commit(s);
}

int pt_store_dataset_get(pt_store *s, const char *owner, const char *id, pt_store_dataset *out)
{
    memset(out, 0, sizeof(*out));
    if (!id || !id[0]) return pt_store_fail(s, PT_STORE_INVALID, "dataset id is empty");
    return get_in_tx(s, owner, id, out);
}

int pt_store_dataset_list(pt_store *s, const char *owner, int limit, const char *page_token,
                          pt_store_dataset_page *out)
{
    memset(out, 0, sizeof(*out));
    int rc = pt_store_check_text(s, "owner", owner, PT_STORE_OWNER_MAX);
    if (!rc) rc = pt_store_check_limit(s, limit, &limit);
    if (rc) return rc;
    pt_store_page_after after;
    if ((rc = pt_store_page_after_parse(s, page_token, &after))) return rc;
    sqlite3_stmt *st = NULL;
    if ((rc = pt_store_stmt(s, after.paged ? SQL_LIST_AFTER : SQL_LIST_FIRST, &st))) return rc;
    pt_store_page_bind(st, owner, limit, &after);
    int more = 0;
    rc = pt_store_page_read(s, st, limit, sizeof(*out->items), dataset_row, (void **)&out->items, &out->n,
                            &more, "list datasets");
    if (rc) {
        pt_store_dataset_page_clear(out);
        return rc;
    }
    if (more) {
        const pt_store_dataset *last = &out->items[out->n - 1];
        pt_store_page_token_encode(last->created_at, last->id, out->next_token);
    }
    return PT_STORE_OK;
}

static int check_unused(pt_store *s, const char *id)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, SQL_USERS, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, id);
    int step = sqlite3_step(st);
    if (step != SQLITE_ROW) {
        rc = pt_store_fail_sql(s, step, "find jobs using dataset");
    } else if (sqlite3_column_int64(st, 0) > 0) {
        char job[PT_STORE_ID_MAX];
        pt_store_col_copy(st, 1, job, sizeof(job));
        rc = pt_store_fail(s, PT_STORE_IN_USE, "dataset %s is used by %lld unfinished job(s) (e.g. %s); "
                           "cancel them or wait until they end", id,
                           (long long)sqlite3_column_int64(st, 0), job);
    }
    sqlite3_reset(st);
    return rc;
}

int pt_store_dataset_delete(pt_store *s, const char *owner, const char *id, pt_store_dataset *removed)
{
    if (removed) memset(removed, 0, sizeof(*removed));
    if (!id || !id[0]) return pt_store_fail(s, PT_STORE_INVALID, "dataset id is empty");
    int rc = pt_store_tx_begin(s, 1);
    if (rc) return rc;
    pt_store_dataset row;
    memset(&row, 0, sizeof(row));
    rc = get_in_tx(s, owner, id, &row);
    if (!rc) rc = check_unused(s, id);
    sqlite3_stmt *st = NULL;
    if (!rc) rc = pt_store_stmt(s, SQL_DELETE, &st);
    if (!rc) {
        pt_store_bind_text(st, 1, id);
        int step = sqlite3_step(st);
        sqlite3_reset(st);
        if (step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, "delete dataset");
    }
    if (!rc) rc = pt_store_tx_commit(s);
    else pt_store_tx_rollback(s);
    if (!rc && removed) *removed = row;
    else pt_store_dataset_clear(&row);
    return rc;
}
