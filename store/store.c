/* store.c — the store handle: opening a connection with the pragmas packtrain
 * relies on, error messages, the prepared-statement cache, transactions and
 * the small helpers (ids, hashes, page tokens) every table file uses. */
#include "store/store_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <nettle/sha2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static const char *const status_names[] = {
    "ok", "not found", "invalid argument", "conflict", "in use", "illegal transition",
    "idempotency key mismatch", "busy", "schema too new", "i/o error",
};

const char *pt_store_status_name(int status)
{
    if (status < 0 || status >= (int)(sizeof(status_names) / sizeof(status_names[0])))
        return "unknown status";
    return status_names[status];
}

int pt_store_fail(pt_store *s, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
    va_end(ap);
    return status;
}

int pt_store_fail_sql(pt_store *s, int rc, const char *what)
{
    int primary = rc & 0xff;
    int status = PT_STORE_IO;
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) status = PT_STORE_BUSY;
    else if (primary == SQLITE_CONSTRAINT) status = PT_STORE_CONFLICT;
    const char *msg = s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
    /* sqlite3_errmsg describes the most recent call on the handle, which may
     * not be the one that failed (e.g. after a reset); prefer the code's text
     * when they disagree. */
    if (s->db && (sqlite3_errcode(s->db) & 0xff) != primary) msg = sqlite3_errstr(rc);
    return pt_store_fail(s, status, "%s: %s", what, msg);
}

const char *pt_store_errmsg(const pt_store *s)
{
    return s ? s->errmsg : "no store handle";
}

/* ---- statement cache ----------------------------------------------------- */

int pt_store_stmt(pt_store *s, const char *sql, sqlite3_stmt **out)
{
    *out = NULL;
    for (size_t i = 0; i < s->n_cache; i++) {
        if (s->cache[i].sql == sql) {
            sqlite3_reset(s->cache[i].stmt);
            sqlite3_clear_bindings(s->cache[i].stmt);
            *out = s->cache[i].stmt;
            return PT_STORE_OK;
        }
    }
    if (s->n_cache == s->cap_cache) {
        size_t cap = s->cap_cache ? s->cap_cache * 2 : 32;
        pt_store_cached_stmt *c = realloc(s->cache, cap * sizeof(*c));
        if (!c) return pt_store_fail(s, PT_STORE_IO, "statement cache: out of memory");
        s->cache = c;
        s->cap_cache = cap;
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
    if (rc != SQLITE_OK) return pt_store_fail_sql(s, rc, "prepare");
    s->cache[s->n_cache].sql = sql;
    s->cache[s->n_cache].stmt = st;
    s->n_cache++;
    *out = st;
    return PT_STORE_OK;
}

static int exec_cached(pt_store *s, const char *sql, const char *what)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, sql, &st);
    if (rc) return rc;
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return pt_store_fail_sql(s, rc, what);
    return PT_STORE_OK;
}

/* ---- transactions -------------------------------------------------------- */

static const char SQL_SYNC_FULL[] = "PRAGMA synchronous=FULL";
static const char SQL_SYNC_NORMAL[] = "PRAGMA synchronous=NORMAL";
static const char SQL_BEGIN_IMMEDIATE[] = "BEGIN IMMEDIATE";
static const char SQL_BEGIN_DEFERRED[] = "BEGIN DEFERRED";
static const char SQL_COMMIT[] = "COMMIT";
static const char SQL_ROLLBACK[] = "ROLLBACK";

int pt_store_tx_begin(pt_store *s, int durable)
{
    durable = durable != 0;
    if (s->sync_full != durable) {
        /* synchronous can only change outside a transaction; it then applies
         * to the commit of the transaction we are about to open. */
        int rc = exec_cached(s, durable ? SQL_SYNC_FULL : SQL_SYNC_NORMAL, "set synchronous");
        if (rc) return rc;
        s->sync_full = durable;
    }
    return exec_cached(s, SQL_BEGIN_IMMEDIATE, "begin write transaction");
}

int pt_store_tx_commit(pt_store *s)
{
    int rc = exec_cached(s, SQL_COMMIT, "commit");
    if (rc) pt_store_tx_rollback(s);
    return rc;
}

void pt_store_tx_rollback(pt_store *s)
{
    if (sqlite3_get_autocommit(s->db)) return;   /* SQLite already rolled back */
    char saved[sizeof(s->errmsg)];
    memcpy(saved, s->errmsg, sizeof(saved));
    exec_cached(s, SQL_ROLLBACK, "rollback");
    memcpy(s->errmsg, saved, sizeof(saved));
}

int pt_store_read_begin(pt_store *s)
{
    return exec_cached(s, SQL_BEGIN_DEFERRED, "begin read transaction");
}

void pt_store_read_end(pt_store *s)
{
    if (sqlite3_get_autocommit(s->db)) return;
    char saved[sizeof(s->errmsg)];
    memcpy(saved, s->errmsg, sizeof(saved));
    /* A read-only transaction has nothing to lose: if COMMIT fails, roll back. */
    if (exec_cached(s, SQL_COMMIT, "end read transaction")) exec_cached(s, SQL_ROLLBACK, "rollback");
    memcpy(s->errmsg, saved, sizeof(saved));
}

/* ---- open / close ------------------------------------------------------- */

static int set_pragmas(pt_store *s)
{
    /* Pragmas cannot take bound parameters; these are constant strings. */
    sqlite3_busy_timeout(s->db, PT_STORE_BUSY_TIMEOUT_MS);
    int rc = sqlite3_exec(s->db, "PRAGMA foreign_keys=ON", NULL, NULL, NULL);
    if (rc != SQLITE_OK) return pt_store_fail_sql(s, rc, "enable foreign keys");
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
    if (rc != SQLITE_OK) return pt_store_fail_sql(s, rc, "set WAL mode");
    rc = sqlite3_step(st);
    char mode[16] = "";
    if (rc == SQLITE_ROW) pt_store_col_copy(st, 0, mode, sizeof(mode));
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW) return pt_store_fail_sql(s, rc, "set WAL mode");
    if (strcmp(mode, "wal") != 0)
        return pt_store_fail(s, PT_STORE_IO, "set WAL mode: database stays in '%s' journal mode", mode);
    rc = sqlite3_exec(s->db, "PRAGMA synchronous=FULL", NULL, NULL, NULL);
    if (rc != SQLITE_OK) return pt_store_fail_sql(s, rc, "set synchronous");
    s->sync_full = 1;
    return PT_STORE_OK;
}

static int open_fail(pt_store *s, int status, char *err, size_t errlen, const char *path)
{
    if (err && errlen) snprintf(err, errlen, "%s: %s", path, s->errmsg);
    pt_store_close(s);
    return status;
}

int pt_store_open(pt_store **out, const char *path, char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen) err[0] = '\0';
    if (!path || !path[0]) {
        if (err && errlen) snprintf(err, errlen, "store: empty database path");
        return PT_STORE_INVALID;
    }
    pt_store *s = calloc(1, sizeof(*s));
    if (!s) {
        if (err && errlen) snprintf(err, errlen, "%s: out of memory", path);
        return PT_STORE_IO;
    }
    if (!sqlite3_threadsafe()) {
        pt_store_fail(s, PT_STORE_IO, "the SQLite library was built without thread support");
        return open_fail(s, PT_STORE_IO, err, errlen, path);
    }
    /* NOMUTEX: a handle belongs to one thread (see store.h), so SQLite's
     * per-connection mutex would only cost time. */
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    int rc = sqlite3_open_v2(path, &s->db, flags, NULL);
    if (rc != SQLITE_OK) {
        pt_store_fail_sql(s, rc, "open");
        return open_fail(s, PT_STORE_IO, err, errlen, path);
    }
    sqlite3_extended_result_codes(s->db, 1);
    rc = set_pragmas(s);
    if (rc) return open_fail(s, rc, err, errlen, path);
    rc = pt_store_migrate(s, pt_store_migrations, pt_store_n_migrations);
    if (rc) return open_fail(s, rc, err, errlen, path);
    s->errmsg[0] = '\0';
    *out = s;
    return PT_STORE_OK;
}

void pt_store_close(pt_store *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_cache; i++) sqlite3_finalize(s->cache[i].stmt);
    free(s->cache);
    if (s->db) sqlite3_close(s->db);
    free(s);
}

int pt_store_set_busy_timeout(pt_store *s, int ms)
{
    if (ms < 0) return pt_store_fail(s, PT_STORE_INVALID, "busy timeout must be >= 0 ms, got %d", ms);
    int rc = sqlite3_busy_timeout(s->db, ms);
    if (rc != SQLITE_OK) return pt_store_fail_sql(s, rc, "set busy timeout");
    return PT_STORE_OK;
}

/* ---- binding and column helpers ----------------------------------------- */

int pt_store_bind_text(sqlite3_stmt *st, int idx, const char *text)
{
    if (!text) return sqlite3_bind_null(st, idx);
    return sqlite3_bind_text(st, idx, text, -1, SQLITE_TRANSIENT);
}

int pt_store_bind_double(sqlite3_stmt *st, int idx, double v)
{
    if (isnan(v)) return sqlite3_bind_null(st, idx);
    return sqlite3_bind_double(st, idx, v);
}

void pt_store_col_copy(sqlite3_stmt *st, int col, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

char *pt_store_col_dup(sqlite3_stmt *st, int col, int *oom)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    if (!t) return NULL;
    char *copy = strdup((const char *)t);
    if (!copy) *oom = 1;
    return copy;
}

double pt_store_col_double(sqlite3_stmt *st, int col)
{
    if (sqlite3_column_type(st, col) == SQLITE_NULL) return NAN;
    return sqlite3_column_double(st, col);
}

int pt_store_check_text(pt_store *s, const char *what, const char *text, size_t cap)
{
    if (!text || !text[0]) return pt_store_fail(s, PT_STORE_INVALID, "%s is empty", what);
    size_t len = strlen(text);
    if (len >= cap)
        return pt_store_fail(s, PT_STORE_INVALID, "%s is %zu bytes long; the limit is %zu", what, len,
                             cap - 1);
    return PT_STORE_OK;
}

int pt_store_check_limit(pt_store *s, int limit, int *out)
{
    if (limit < 0) return pt_store_fail(s, PT_STORE_INVALID, "limit must be >= 0, got %d", limit);
    *out = limit == 0 ? PT_STORE_PAGE_DEFAULT : limit > PT_STORE_PAGE_MAX ? PT_STORE_PAGE_MAX : limit;
    return PT_STORE_OK;
}

int pt_store_next_created_at(pt_store *s, const char *max_sql, int64_t *out)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, max_sql, &st);
    if (rc) return rc;
    int64_t now = pt_store_now_us();
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_reset(st);
        return pt_store_fail_sql(s, rc, "read newest created_at");
    }
    if (sqlite3_column_type(st, 0) != SQLITE_NULL) {
        int64_t newest = sqlite3_column_int64(st, 0);
        if (newest >= now) now = newest + 1;
    }
    sqlite3_reset(st);
    *out = now;
    return PT_STORE_OK;
}

/* ---- ids, hashes, time -------------------------------------------------- */

static void hex_encode(const unsigned char *bytes, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}

static int random_bytes(unsigned char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(buf + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

int pt_store_new_id(const char *prefix, char *out, size_t outlen)
{
    unsigned char raw[8];
    size_t plen = strlen(prefix);
    if (plen + 2 * sizeof(raw) + 1 > outlen) return PT_STORE_INVALID;
    if (random_bytes(raw, sizeof(raw))) return PT_STORE_IO;
    memcpy(out, prefix, plen);
    hex_encode(raw, sizeof(raw), out + plen);
    return PT_STORE_OK;
}

int pt_store_random_hex(size_t n_bytes, char *out, size_t outlen)
{
    unsigned char raw[64];
    if (n_bytes > sizeof(raw) || 2 * n_bytes + 1 > outlen) return PT_STORE_INVALID;
    if (random_bytes(raw, n_bytes)) return PT_STORE_IO;
    hex_encode(raw, n_bytes, out);
    return PT_STORE_OK;
}

void pt_store_sha256_hex(const void *data, size_t len, char out[PT_STORE_HASH_HEX])
{
    struct sha256_ctx ctx;
    unsigned char digest[SHA256_DIGEST_SIZE];
    sha256_init(&ctx);
    sha256_update(&ctx, len, data);
    sha256_digest(&ctx, SHA256_DIGEST_SIZE, digest);
    hex_encode(digest, sizeof(digest), out);
}

int64_t pt_store_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- page tokens ---------------------------------------------------------- */

void pt_store_page_token_encode(int64_t created_at, const char *id, char out[PT_STORE_PAGE_TOKEN_MAX])
{
    int n = snprintf(out, PT_STORE_PAGE_TOKEN_MAX, "%016" PRIx64, (uint64_t)created_at);
    hex_encode((const unsigned char *)id, strnlen(id, PT_STORE_ID_MAX - 1), out + n);
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static int page_token_bad(pt_store *s, const char *why)
{
    return pt_store_fail(s, PT_STORE_INVALID, "page_token is malformed (%s); pass the next_page_token "
                         "of a previous response unchanged", why);
}

int pt_store_page_token_decode(pt_store *s, const char *token, int64_t *created_at,
                               char id[PT_STORE_ID_MAX])
{
    size_t len = strlen(token);
    if (len < 18 || len % 2 != 0 || len > 16 + 2 * (PT_STORE_ID_MAX - 1))
        return page_token_bad(s, "wrong length");
    for (size_t i = 0; i < len; i++)
        if (hex_value(token[i]) < 0) return page_token_bad(s, "not lowercase hex");
    uint64_t t = 0;
    for (int i = 0; i < 16; i++) t = t << 4 | (uint64_t)hex_value(token[i]);
    if (t > (uint64_t)INT64_MAX) return page_token_bad(s, "time out of range");
    size_t n = (len - 16) / 2;
    for (size_t i = 0; i < n; i++) {
        char c = (char)(hex_value(token[16 + 2 * i]) << 4 | hex_value(token[17 + 2 * i]));
        int ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
        if (!ok) return page_token_bad(s, "bad id");
        id[i] = c;
    }
    id[n] = '\0';
    *created_at = (int64_t)t;
    return PT_STORE_OK;
}

int pt_store_page_after_parse(pt_store *s, const char *token, pt_store_page_after *after)
{
    memset(after, 0, sizeof(*after));
    after->paged = token && token[0];
    return after->paged ? pt_store_page_token_decode(s, token, &after->at, after->id) : PT_STORE_OK;
}

void pt_store_page_bind(sqlite3_stmt *st, const char *owner, int limit, const pt_store_page_after *after)
{
    pt_store_bind_text(st, 1, owner);
    sqlite3_bind_int(st, 2, limit + 1);
    if (after->paged) {
        sqlite3_bind_int64(st, 3, after->at);
        pt_store_bind_text(st, 4, after->id);
    }
}

int pt_store_page_read(pt_store *s, sqlite3_stmt *st, int limit, size_t item_size, pt_store_row_fn from_row,
                       void **items, size_t *n, int *more, const char *what)
{
    int rc = PT_STORE_OK, step = SQLITE_DONE;
    *n = 0;
    *more = 0;
    *items = calloc((size_t)limit, item_size);
    if (!*items) rc = pt_store_fail(s, PT_STORE_IO, "%s: out of memory", what);
    while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == (size_t)limit) {
            *more = 1;
            break;
        }
        rc = from_row(s, st, (char *)*items + *n * item_size);
        (*n)++;   /* counted even when it failed: page_clear frees what the row got */
    }
    if (!rc && !*more && step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, what);
    sqlite3_clear_bindings(st);
    sqlite3_reset(st);
    return rc;
}

int pt_store_list_grow(pt_store *s, void **items, size_t *cap, size_t n, size_t elem_size,
                       size_t first, const char *what)
{
    if (n < *cap) return 0;
    size_t c = *cap ? *cap * 2 : first;
    void *p = realloc(*items, c * elem_size);
    if (!p) return pt_store_fail(s, PT_STORE_IO, "%s: out of memory", what);
    *items = p;
    *cap = c;
    return 0;
}
