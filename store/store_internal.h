/* store_internal.h — what the store's .c files share and the public API hides:
 * the handle, the prepared-statement cache, error reporting, transactions,
 * page tokens and the schema migration runner.  *
 * Every statement function has one shape — prepare (cached), bind its
 * columns in the order of its SQL, step, reset, map the result — written out
 * per statement, so that each bind sits next to the SQL text it fills; the
 * likeness between them is that shape, not shared logic.
 */
#ifndef PT_STORE_INTERNAL_H
#define PT_STORE_INTERNAL_H

#include "store/store.h"

#include <sqlite3.h>

typedef struct pt_store_cached_stmt {
    const char *sql;      /* a string literal: the cache is keyed by its address */
    sqlite3_stmt *stmt;
} pt_store_cached_stmt;

struct pt_store {
    sqlite3 *db;
    char errmsg[512];
    int sync_full;        /* current PRAGMA synchronous: 1 FULL, 0 NORMAL */
    pt_store_cached_stmt *cache;
    size_t n_cache, cap_cache;
};

/* Records a message and returns `status`. */
int pt_store_fail(pt_store *s, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Makes room for one more element in a list read row by row: doubles *cap
 * (from `first`) when *n == *cap.  0, or PT_STORE_IO "WHAT: out of memory"
 * with *items untouched. */
int pt_store_list_grow(pt_store *s, void **items, size_t *cap, size_t n, size_t elem_size,
                       size_t first, const char *what);
/* The rows of an epoch-metrics query (eleven columns, store_metrics.c's order) appended to out. */
int pt_store_epoch_rows_read(pt_store *s, sqlite3_stmt *st, pt_store_epoch_series *out, const char *what);
/* Maps an SQLite result code to a status, message "what: sqlite's message". */
int pt_store_fail_sql(pt_store *s, int rc, const char *what);

/* A reset, unbound prepared statement for `sql` (a string literal), created on
 * first use and kept for the handle's lifetime.  Callers sqlite3_reset() it as
 * soon as they are done so no read snapshot stays open. */
int pt_store_stmt(pt_store *s, const char *sql, sqlite3_stmt **out);

/* BEGIN IMMEDIATE with synchronous FULL (durable = 1) or NORMAL (0). */
int pt_store_tx_begin(pt_store *s, int durable);
int pt_store_tx_commit(pt_store *s);
/* Rolls back if a transaction is open; keeps the earlier error message. */
void pt_store_tx_rollback(pt_store *s);
/* A deferred read transaction so multi-statement reads see one snapshot. */
int pt_store_read_begin(pt_store *s);
void pt_store_read_end(pt_store *s);

/* Binds a string, NULL as SQL NULL. */
int pt_store_bind_text(sqlite3_stmt *st, int idx, const char *text);
/* Binds a double, NaN as SQL NULL. */
int pt_store_bind_double(sqlite3_stmt *st, int idx, double v);
/* Copies column text into a fixed array ("" for NULL). */
void pt_store_col_copy(sqlite3_stmt *st, int col, char *dst, size_t cap);
/* Heap copy of column text, NULL for SQL NULL; *oom set on allocation failure. */
char *pt_store_col_dup(sqlite3_stmt *st, int col, int *oom);
/* Column as double, NaN for NULL. */
double pt_store_col_double(sqlite3_stmt *st, int col);

/* Checks a caller string: non-NULL, non-empty, shorter than cap. */
int pt_store_check_text(pt_store *s, const char *what, const char *text, size_t cap);
/* Normalises a list limit (0 -> default, > max -> max, < 0 -> INVALID). */
int pt_store_check_limit(pt_store *s, int limit, int *out);

/* created_at for a new row: now, but strictly after the newest row in the
 * table queried by `max_sql` ("SELECT max(created_at) FROM t"). */
int pt_store_next_created_at(pt_store *s, const char *max_sql, int64_t *out);

/* n_bytes random bytes from getrandom(), as 2 * n_bytes hex chars + NUL. */
int pt_store_random_hex(size_t n_bytes, char *out, size_t outlen);

/* Page tokens: opaque hex of (created_at, id).  decode returns INVALID with a
 * message for anything that encode did not produce. */
void pt_store_page_token_encode(int64_t created_at, const char *id, char out[PT_STORE_PAGE_TOKEN_MAX]);
int pt_store_page_token_decode(pt_store *s, const char *token, int64_t *created_at,
                               char id[PT_STORE_ID_MAX]);

/* Keyset pages, the one way every list pages: rows ordered by (created_at, id),
 * a page starting after the (created_at, id) its token names.
 * pt_store_page_after_parse decodes token (NULL or "" = the first page).
 * pt_store_page_bind binds a list statement's common parameters: ?1 owner,
 * ?2 limit + 1 (the extra row tells whether a next page exists) and, when
 * paged, ?3 created_at and ?4 id.  pt_store_page_read steps the bound
 * statement into *items (limit slots of item_size, allocated here) by from_row,
 * sets *n and *more (a further row exists), then clears and resets it; on
 * failure the caller frees the *n rows read with its page_clear. */
typedef int (*pt_store_row_fn)(pt_store *s, sqlite3_stmt *st, void *item);
typedef struct {
    int paged;
    int64_t at;
    char id[PT_STORE_ID_MAX];
} pt_store_page_after;
int pt_store_page_after_parse(pt_store *s, const char *token, pt_store_page_after *after);
void pt_store_page_bind(sqlite3_stmt *st, const char *owner, int limit, const pt_store_page_after *after);
int pt_store_page_read(pt_store *s, sqlite3_stmt *st, int limit, size_t item_size, pt_store_row_fn from_row,
                       void **items, size_t *n, int *more, const char *what);

/* Migrations: migrations[i] takes the schema from version i to i + 1.  All
 * pending ones run inside one BEGIN IMMEDIATE transaction, so a failure leaves
 * the database exactly as it was.  A database whose user_version exceeds n is
 * refused with PT_STORE_TOO_NEW. */
int pt_store_migrate(pt_store *s, const char *const *migrations, int n);
extern const char *const pt_store_migrations[];
extern const int pt_store_n_migrations;

/* Event ids (store_events.c): the job's next one, inside the caller's write
 * transaction (its jobs.event_seq moves on by one). */
int pt_store_next_event_id(pt_store *s, const char *job_id, int64_t *id);

/* Step rows (store_metrics.c).  pt_store_thin_rows marks which of n rows a
 * downsampling to m keeps (pure; see store_metrics.c).  pt_store_steps_thinned
 * reads the n rows of `scan` (bound, ordered, columns as SQL_STEPS_SCAN: step,
 * epoch, loss, mae, lr, graphs_per_s, at, json, event_id) into out, thinned
 * to max_points; the caller holds a read transaction. */
void pt_store_thin_rows(const double *loss, int64_t n, int64_t m, unsigned char *keep);
void pt_store_step_from_row(sqlite3_stmt *st, pt_store_step_metric *m, int *oom);
int pt_store_steps_thinned(pt_store *s, sqlite3_stmt *scan, int64_t n, int max_points, pt_store_step_series *out);

/* Job helpers shared between the job and lifecycle files. */
#define PT_STORE_JOB_COLS \
    "id, owner, dataset_id, config_hash, config_json, state, created_at, started_at, " \
    "finished_at, progress, epoch, step, best_val_mae, latest_graphs_per_s, " \
    "failure_reason, attempts, worker_pid, version, result_json, event_seq, name, tags_json, metadata_json, " \
    "stop_reason"
/* Fills j from a row selected with PT_STORE_JOB_COLS; returns PT_STORE_IO on OOM. */
int pt_store_job_from_row(pt_store *s, sqlite3_stmt *st, pt_store_job *j);
/* Loads a job inside the caller's transaction (owner NULL = any owner). */
int pt_store_job_load(pt_store *s, const char *owner, const char *id, pt_store_job *out);
/* PT_STORE_OK when the job exists for owner, else NOT_FOUND with a message. */
int pt_store_job_check_visible(pt_store *s, const char *owner, const char *id);

#endif
