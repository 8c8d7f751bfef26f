/* store_tokens.c — API bearer tokens.  A token is "pt_" + 32 random bytes in
 * hex, shown once at creation; the database keeps only its SHA-256 (nettle),
 * so a leaked database does not leak usable credentials.  Verification is a
 * lookup by hash: the secret has 256 bits of entropy, so no slow KDF is
 * needed and the index lookup leaks nothing useful through timing. */
#include "store/store_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SQL_INSERT[] =
    "INSERT INTO tokens(id, owner, name, hash, created_at) VALUES (?, ?, ?, ?, ?)";
static const char SQL_BY_HASH[] =
    "SELECT id, owner, name, created_at, revoked FROM tokens WHERE hash = ?";
static const char SQL_BY_ID[] =
    "SELECT id, owner, name, created_at, revoked FROM tokens WHERE id = ? AND owner = ?";
static const char SQL_REVOKE[] =
    "UPDATE tokens SET revoked = 1, revoked_at = ? WHERE id = ? AND owner = ? AND revoked = 0";
static const char SQL_LIST[] =
    "SELECT id, owner, name, created_at, revoked FROM tokens WHERE owner = ? ORDER BY created_at, id";

void pt_store_token_array_clear(pt_store_token_array *l)
{
    if (!l) return;
    free(l->items);
    memset(l, 0, sizeof(*l));
}

static void token_from_row(sqlite3_stmt *st, pt_store_token *t)
{
    memset(t, 0, sizeof(*t));
    pt_store_col_copy(st, 0, t->id, sizeof(t->id));
    pt_store_col_copy(st, 1, t->owner, sizeof(t->owner));
    pt_store_col_copy(st, 2, t->name, sizeof(t->name));
    t->created_at = sqlite3_column_int64(st, 3);
    t->revoked = sqlite3_column_int(st, 4) != 0;
}

/* One-row lookup; NOT_FOUND carries `missing` as its message. */
static int token_lookup(pt_store *s, const char *sql, const char *a, const char *b, pt_store_token *out,
                        const char *missing)
{
    sqlite3_stmt *st = NULL;
    int rc = pt_store_stmt(s, sql, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, a);
    if (b) pt_store_bind_text(st, 2, b);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) token_from_row(st, out);
    else if (step == SQLITE_DONE) rc = pt_store_fail(s, PT_STORE_NOT_FOUND, "%s", missing);
    else rc = pt_store_fail_sql(s, step, "read token");
    sqlite3_reset(st);
    return rc;
}

int pt_store_token_create(pt_store *s, const char *owner, const char *name,
                          char secret[PT_STORE_SECRET_MAX], pt_store_token *row)
{
    secret[0] = '\0';
    if (row) memset(row, 0, sizeof(*row));
    int rc = pt_store_check_text(s, "owner", owner, PT_STORE_OWNER_MAX);
    if (!rc) rc = pt_store_check_text(s, "token name", name, PT_STORE_NAME_MAX);
    if (rc) return rc;
    char id[PT_STORE_ID_MAX], made[PT_STORE_SECRET_MAX] = "pt_", hash[PT_STORE_HASH_HEX];
    if (pt_store_new_id("tok_", id, sizeof(id)) || pt_store_random_hex(32, made + 3, sizeof(made) - 3))
        return pt_store_fail(s, PT_STORE_IO, "token: getrandom failed");
    pt_store_sha256_hex(made, strlen(made), hash);

    rc = pt_store_tx_begin(s, 1);
    if (rc) return rc;
    sqlite3_stmt *st = NULL;
    rc = pt_store_stmt(s, SQL_INSERT, &st);
    if (!rc) {
        pt_store_bind_text(st, 1, id);
        pt_store_bind_text(st, 2, owner);
        pt_store_bind_text(st, 3, name);
        pt_store_bind_text(st, 4, hash);
        sqlite3_bind_int64(st, 5, pt_store_now_us());
        int step = sqlite3_step(st);
        sqlite3_reset(st);
        if (step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, "insert token");
    }
    pt_store_token stored;
    if (!rc) rc = token_lookup(s, SQL_BY_ID, id, owner, &stored, "token vanished after insert");
    if (rc) {
        pt_store_tx_rollback(s);
        return rc;
    }
    rc = pt_store_tx_commit(s);
    if (rc) return rc;
    memcpy(secret, made, sizeof(made));
    if (row) *row = stored;
    return PT_STORE_OK;
}

int pt_store_token_verify(pt_store *s, const char *secret, pt_store_token *row)
{
    pt_store_token found;
    if (row) memset(row, 0, sizeof(*row));
    if (!secret || !secret[0]) return pt_store_fail(s, PT_STORE_INVALID, "token is empty");
    char hash[PT_STORE_HASH_HEX];
    pt_store_sha256_hex(secret, strlen(secret), hash);
    int rc = token_lookup(s, SQL_BY_HASH, hash, NULL, &found, "token is unknown or revoked");
    if (rc) return rc;
    if (found.revoked) return pt_store_fail(s, PT_STORE_NOT_FOUND, "token is unknown or revoked");
    if (row) *row = found;
    return PT_STORE_OK;
}

int pt_store_token_revoke(pt_store *s, const char *owner, const char *token_id)
{
    int rc = pt_store_check_text(s, "owner", owner, PT_STORE_OWNER_MAX);
    if (!rc) rc = pt_store_check_text(s, "token id", token_id, PT_STORE_ID_MAX);
    if (rc) return rc;
    rc = pt_store_tx_begin(s, 1);
    if (rc) return rc;
    pt_store_token found;
    char missing[96];
    snprintf(missing, sizeof(missing), "token %s not found", token_id);
    /* Revoking twice is fine; revoking another owner's token is NOT_FOUND. */
    rc = token_lookup(s, SQL_BY_ID, token_id, owner, &found, missing);
    sqlite3_stmt *st = NULL;
    if (!rc && !found.revoked) rc = pt_store_stmt(s, SQL_REVOKE, &st);
    if (!rc && !found.revoked) {
        sqlite3_bind_int64(st, 1, pt_store_now_us());
        pt_store_bind_text(st, 2, token_id);
        pt_store_bind_text(st, 3, owner);
        int step = sqlite3_step(st);
        sqlite3_reset(st);
        if (step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, "revoke token");
    }
    if (rc) {
        pt_store_tx_rollback(s);
        return rc;
    }
    return pt_store_tx_commit(s);
}

int pt_store_token_list(pt_store *s, const char *owner, pt_store_token_array *out)
{
    memset(out, 0, sizeof(*out));
    int rc = pt_store_check_text(s, "owner", owner, PT_STORE_OWNER_MAX);
    if (rc) return rc;
    sqlite3_stmt *st = NULL;
    rc = pt_store_stmt(s, SQL_LIST, &st);
    if (rc) return rc;
    pt_store_bind_text(st, 1, owner);
    size_t cap = 0;
    int step = SQLITE_DONE;
    while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
        void *items = out->items;
        rc = pt_store_list_grow(s, &items, &cap, out->n, sizeof(*out->items), 8, "token list");
        out->items = items;
        if (rc) break;
        token_from_row(st, &out->items[out->n++]);
    }
    if (!rc && step != SQLITE_DONE) rc = pt_store_fail_sql(s, step, "list tokens");
    sqlite3_reset(st);
    if (rc) pt_store_token_array_clear(out);
    return rc;
}
