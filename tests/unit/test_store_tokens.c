/* test_store_tokens.c — API tokens: format of the secret, only the SHA-256
 * stored, verify, revoke (owner-scoped, idempotent), list, argument errors. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "tests/unit/store_fixture.h"

typedef store_fx fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (!f || store_fx_init(f, "store_tok", 1) != 0) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    store_fx_close(*state);
    free(*state);
    return 0;
}

/* Counts rows of the tokens table whose hash column equals `text`. */
static long long count_hash(const char *path, const char *text)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM tokens WHERE hash = ?", -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, text, -1, SQLITE_TRANSIENT);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long long n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

static void test_create_verify_and_only_hash_stored(void **state)
{
    fixture *f = *state;
    char secret[PT_STORE_SECRET_MAX];
    pt_store_token row;
    assert_int_equal(pt_store_token_create(f->s, "alice", "laptop", secret, &row), PT_STORE_OK);
    assert_int_equal(strlen(secret), 67);
    assert_memory_equal(secret, "pt_", 3);
    assert_int_equal(strspn(secret + 3, "0123456789abcdef"), 64);
    assert_memory_equal(row.id, "tok_", 4);
    assert_string_equal(row.owner, "alice");
    assert_string_equal(row.name, "laptop");
    assert_int_equal(row.revoked, 0);

    char hash[PT_STORE_HASH_HEX];
    pt_store_sha256_hex(secret, strlen(secret), hash);
    assert_int_equal(count_hash(f->path, hash), 1);
    assert_int_equal(count_hash(f->path, secret), 0);

    pt_store_token who;
    assert_int_equal(pt_store_token_verify(f->s, secret, &who), PT_STORE_OK);
    assert_string_equal(who.owner, "alice");
    assert_string_equal(who.id, row.id);

    char second[PT_STORE_SECRET_MAX];
    assert_int_equal(pt_store_token_create(f->s, "alice", "ci", second, NULL), PT_STORE_OK);
    assert_string_not_equal(second, secret);

    /* A near miss does not verify. */
    char wrong[PT_STORE_SECRET_MAX];
    memcpy(wrong, secret, sizeof(wrong));
    wrong[10] = wrong[10] == 'a' ? 'b' : 'a';
    assert_int_equal(pt_store_token_verify(f->s, wrong, &who), PT_STORE_NOT_FOUND);
    assert_string_equal(pt_store_errmsg(f->s), "token is unknown or revoked");
    assert_int_equal(pt_store_token_verify(f->s, "", &who), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "token is empty");
}

static void test_revoke_and_list(void **state)
{
    fixture *f = *state;
    char s1[PT_STORE_SECRET_MAX], s2[PT_STORE_SECRET_MAX], s3[PT_STORE_SECRET_MAX];
    pt_store_token t1, t2, t3;
    assert_int_equal(pt_store_token_create(f->s, "alice", "one", s1, &t1), PT_STORE_OK);
    assert_int_equal(pt_store_token_create(f->s, "alice", "two", s2, &t2), PT_STORE_OK);
    assert_int_equal(pt_store_token_create(f->s, "bob", "bob's", s3, &t3), PT_STORE_OK);

    assert_int_equal(pt_store_token_revoke(f->s, "bob", t1.id), PT_STORE_NOT_FOUND);
    char expect[64];
    snprintf(expect, sizeof(expect), "token %s not found", t1.id);
    assert_string_equal(pt_store_errmsg(f->s), expect);
    assert_int_equal(pt_store_token_verify(f->s, s1, NULL), PT_STORE_OK);

    assert_int_equal(pt_store_token_revoke(f->s, "alice", t1.id), PT_STORE_OK);
    assert_int_equal(pt_store_token_verify(f->s, s1, NULL), PT_STORE_NOT_FOUND);
    assert_string_equal(pt_store_errmsg(f->s), "token is unknown or revoked");
    assert_int_equal(pt_store_token_revoke(f->s, "alice", t1.id), PT_STORE_OK);   /* idempotent */
    assert_int_equal(pt_store_token_verify(f->s, s2, NULL), PT_STORE_OK);

    pt_store_token_array list;
    assert_int_equal(pt_store_token_list(f->s, "alice", &list), PT_STORE_OK);
    assert_int_equal(list.n, 2);
    int revoked = 0;
    for (size_t i = 0; i < list.n; i++) {
        assert_string_equal(list.items[i].owner, "alice");
        if (!strcmp(list.items[i].id, t1.id)) revoked = list.items[i].revoked;
    }
    assert_int_equal(revoked, 1);
    pt_store_token_array_clear(&list);
    assert_int_equal(pt_store_token_list(f->s, "carol", &list), PT_STORE_OK);
    assert_int_equal(list.n, 0);
    pt_store_token_array_clear(&list);
}

static void test_argument_errors(void **state)
{
    fixture *f = *state;
    char secret[PT_STORE_SECRET_MAX];
    assert_int_equal(pt_store_token_create(f->s, "", "n", secret, NULL), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "owner is empty");
    assert_string_equal(secret, "");
    assert_int_equal(pt_store_token_create(f->s, "alice", NULL, secret, NULL), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "token name is empty");
    assert_int_equal(pt_store_token_revoke(f->s, "alice", ""), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "token id is empty");
    pt_store_token_array list;
    assert_int_equal(pt_store_token_list(f->s, NULL, &list), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "owner is empty");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_verify_and_only_hash_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_revoke_and_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_argument_errors, setup, teardown),
    };
    return cmocka_run_group_tests_name("store_tokens", tests, NULL, NULL);
}
