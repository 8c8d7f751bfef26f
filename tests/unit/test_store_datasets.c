/* test_store_datasets.c — dataset rows: create/get/update/list/delete, owner
 * isolation, pagination, the in-use refusal and every argument error. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

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
    if (!f || store_fx_init(f, "store_ds", 1) != 0) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    store_fx_close(*state);
    free(*state);
    return 0;
}

static pt_store_dataset sample(const char *owner, const char *name)
{
    pt_store_dataset d;
    memset(&d, 0, sizeof(d));
    snprintf(d.owner, sizeof(d.owner), "%s", owner);
    snprintf(d.name, sizeof(d.name), "%s", name);
    snprintf(d.path, sizeof(d.path), "/data/%s.extxyz", name);
    snprintf(d.format, sizeof(d.format), "extxyz");
    snprintf(d.status, sizeof(d.status), "ready");
    d.n_structs = 100;
    d.n_atoms = 1800;
    d.bytes = 123456;
    d.report_json = "{\"histogram\":[1,2,3]}";
    return d;
}

static void test_create_get_roundtrip(void **state)
{
    fixture *f = *state;
    pt_store_dataset in = sample("alice", "water");
    pt_store_dataset out;
    assert_int_equal(pt_store_dataset_create(f->s, &in, &out), PT_STORE_OK);
    assert_memory_equal(out.id, "ds_", 3);
    assert_int_equal(strlen(out.id), 19);
    assert_true(out.created_at > 1600000000000000LL);

    pt_store_dataset got;
    assert_int_equal(pt_store_dataset_get(f->s, "alice", out.id, &got), PT_STORE_OK);
    assert_string_equal(got.owner, "alice");
    assert_string_equal(got.name, "water");
    assert_string_equal(got.path, "/data/water.extxyz");
    assert_string_equal(got.format, "extxyz");
    assert_string_equal(got.status, "ready");
    assert_int_equal(got.n_structs, 100);
    assert_int_equal(got.n_atoms, 1800);
    assert_int_equal(got.bytes, 123456);
    assert_string_equal(got.report_json, "{\"histogram\":[1,2,3]}");
    assert_int_equal(got.created_at, out.created_at);
    pt_store_dataset_clear(&got);

    /* System scope (NULL owner) sees it too. */
    assert_int_equal(pt_store_dataset_get(f->s, NULL, out.id, &got), PT_STORE_OK);
    pt_store_dataset_clear(&got);
    pt_store_dataset_clear(&out);
}

static void test_caller_chosen_id_and_conflict(void **state)
{
    fixture *f = *state;
    pt_store_dataset in = sample("alice", "a");
    snprintf(in.id, sizeof(in.id), "ds_00000000000000aa");
    assert_int_equal(pt_store_dataset_create(f->s, &in, NULL), PT_STORE_OK);
    assert_int_equal(pt_store_dataset_create(f->s, &in, NULL), PT_STORE_CONFLICT);
    assert_string_equal(pt_store_errmsg(f->s), "dataset id ds_00000000000000aa already exists");
    snprintf(in.id, sizeof(in.id), "ds_Upper");
    assert_int_equal(pt_store_dataset_create(f->s, &in, NULL), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "dataset id 'ds_Upper' may only contain a-z, 0-9 and '_'");
}

static void test_owner_isolation(void **state)
{
    fixture *f = *state;
    pt_store_dataset in = sample("alice", "secret");
    pt_store_dataset out, got;
    assert_int_equal(pt_store_dataset_create(f->s, &in, &out), PT_STORE_OK);
    assert_int_equal(pt_store_dataset_get(f->s, "bob", out.id, &got), PT_STORE_NOT_FOUND);
    char expect[96];
    snprintf(expect, sizeof(expect), "dataset %s not found", out.id);
    assert_string_equal(pt_store_errmsg(f->s), expect);
    pt_store_dataset upd = out;
    upd.report_json = NULL;
    assert_int_equal(pt_store_dataset_update(f->s, "bob", &upd), PT_STORE_NOT_FOUND);
    assert_int_equal(pt_store_dataset_delete(f->s, "bob", out.id, NULL), PT_STORE_NOT_FOUND);
    pt_store_dataset_page page;
    assert_int_equal(pt_store_dataset_list(f->s, "bob", 0, NULL, &page), PT_STORE_OK);
    assert_int_equal(page.n, 0);
    assert_string_equal(page.next_token, "");
    pt_store_dataset_page_clear(&page);
    /* Still there for alice. */
    assert_int_equal(pt_store_dataset_get(f->s, "alice", out.id, &got), PT_STORE_OK);
    pt_store_dataset_clear(&got);
    pt_store_dataset_clear(&out);
}

static void test_update(void **state)
{
    fixture *f = *state;
    pt_store_dataset in = sample("alice", "up");
    snprintf(in.status, sizeof(in.status), "uploading");
    in.report_json = NULL;
    pt_store_dataset out;
    assert_int_equal(pt_store_dataset_create(f->s, &in, &out), PT_STORE_OK);
    assert_null(out.report_json);
    pt_store_dataset upd = out;
    snprintf(upd.status, sizeof(upd.status), "ready");
    upd.n_structs = 7;
    upd.report_json = "{\"ok\":true}";
    assert_int_equal(pt_store_dataset_update(f->s, "alice", &upd), PT_STORE_OK);
    pt_store_dataset got;
    assert_int_equal(pt_store_dataset_get(f->s, "alice", out.id, &got), PT_STORE_OK);
    assert_string_equal(got.status, "ready");
    assert_int_equal(got.n_structs, 7);
    assert_string_equal(got.report_json, "{\"ok\":true}");
    pt_store_dataset_clear(&got);

    upd.n_atoms = -1;
    assert_int_equal(pt_store_dataset_update(f->s, "alice", &upd), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "dataset counts must be >= 0 (structs 7, atoms -1, bytes 123456)");
    upd.n_atoms = 1;
    upd.status[0] = '\0';
    assert_int_equal(pt_store_dataset_update(f->s, "alice", &upd), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "dataset status is empty");
    pt_store_dataset_clear(&out);
}

static void test_invalid_arguments(void **state)
{
    fixture *f = *state;
    pt_store_dataset in = sample("alice", "x");
    in.owner[0] = '\0';
    assert_int_equal(pt_store_dataset_create(f->s, &in, NULL), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "owner is empty");
    in = sample("alice", "x");
    in.format[0] = '\0';
    assert_int_equal(pt_store_dataset_create(f->s, &in, NULL), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "dataset format is empty");
    in = sample("alice", "x");
    in.bytes = -5;
    assert_int_equal(pt_store_dataset_create(f->s, &in, NULL), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "dataset counts must be >= 0 (structs 100, atoms 1800, bytes -5)");

    pt_store_dataset got;
    assert_int_equal(pt_store_dataset_get(f->s, "alice", "", &got), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "dataset id is empty");
    assert_int_equal(pt_store_dataset_delete(f->s, "alice", NULL, NULL), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "dataset id is empty");

    pt_store_dataset_page page;
    assert_int_equal(pt_store_dataset_list(f->s, NULL, 0, NULL, &page), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "owner is empty");
    char long_owner[200];
    memset(long_owner, 'o', sizeof(long_owner) - 1);
    long_owner[199] = '\0';
    assert_int_equal(pt_store_dataset_list(f->s, long_owner, 0, NULL, &page), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "owner is 199 bytes long; the limit is 127");
    assert_int_equal(pt_store_dataset_list(f->s, "alice", -1, NULL, &page), PT_STORE_INVALID);
    assert_string_equal(pt_store_errmsg(f->s), "limit must be >= 0, got -1");
    assert_int_equal(pt_store_dataset_list(f->s, "alice", 5, "zz", &page), PT_STORE_INVALID);
    assert_non_null(strstr(pt_store_errmsg(f->s), "page_token is malformed"));
}

static void test_list_pagination_newest_first(void **state)
{
    fixture *f = *state;
    char ids[7][PT_STORE_ID_MAX];
    for (int i = 0; i < 7; i++) {
        char name[16];
        snprintf(name, sizeof(name), "set%d", i);
        pt_store_dataset in = sample("alice", name), out;
        assert_int_equal(pt_store_dataset_create(f->s, &in, &out), PT_STORE_OK);
        memcpy(ids[i], out.id, sizeof(ids[i]));
        pt_store_dataset_clear(&out);
    }
    pt_store_dataset in = sample("bob", "other");
    assert_int_equal(pt_store_dataset_create(f->s, &in, NULL), PT_STORE_OK);

    char token[PT_STORE_PAGE_TOKEN_MAX] = "";
    int seen = 0, pages = 0;
    do {
        pt_store_dataset_page page;
        assert_int_equal(pt_store_dataset_list(f->s, "alice", 3, token, &page), PT_STORE_OK);
        for (size_t i = 0; i < page.n; i++) {
            assert_string_equal(page.items[i].id, ids[6 - seen]);
            seen++;
        }
        memcpy(token, page.next_token, sizeof(token));
        pages++;
        pt_store_dataset_page_clear(&page);
    } while (token[0]);
    assert_int_equal(seen, 7);
    assert_int_equal(pages, 3);

    /* limit above the maximum is clamped, 0 means the default. */
    pt_store_dataset_page page;
    assert_int_equal(pt_store_dataset_list(f->s, "alice", 100000, NULL, &page), PT_STORE_OK);
    assert_int_equal(page.n, 7);
    assert_string_equal(page.next_token, "");
    pt_store_dataset_page_clear(&page);
}

static void test_delete_refused_while_job_unfinished(void **state)
{
    fixture *f = *state;
    pt_store_dataset in = sample("alice", "busy"), ds;
    assert_int_equal(pt_store_dataset_create(f->s, &in, &ds), PT_STORE_OK);
    pt_store_job_request req = {.owner = "alice", .dataset_id = ds.id, .config_json = "{\"epochs\":1}"};
    pt_store_job job;
    assert_int_equal(pt_store_job_create(f->s, &req, &job, NULL), PT_STORE_OK);

    pt_store_dataset removed;
    assert_int_equal(pt_store_dataset_delete(f->s, "alice", ds.id, &removed), PT_STORE_IN_USE);
    char expect[256];
    snprintf(expect, sizeof(expect), "dataset %s is used by 1 unfinished job(s) (e.g. %s); cancel them or "
             "wait until they end", ds.id, job.id);
    assert_string_equal(pt_store_errmsg(f->s), expect);
    assert_int_equal(pt_store_job_transition(f->s, NULL, job.id, PT_JOB_RUNNING, "start", NULL), PT_STORE_OK);
    assert_int_equal(pt_store_dataset_delete(f->s, "alice", ds.id, &removed), PT_STORE_IN_USE);
    assert_int_equal(pt_store_job_transition(f->s, NULL, job.id, PT_JOB_CANCELLING, "user", NULL), PT_STORE_OK);
    assert_int_equal(pt_store_dataset_delete(f->s, "alice", ds.id, &removed), PT_STORE_IN_USE);
    assert_int_equal(pt_store_job_transition(f->s, NULL, job.id, PT_JOB_STOPPED, "stopped", NULL), PT_STORE_OK);

    /* Finished jobs do not pin the dataset; they keep their row. */
    assert_int_equal(pt_store_dataset_delete(f->s, "alice", ds.id, &removed), PT_STORE_OK);
    assert_string_equal(removed.path, "/data/busy.extxyz");
    pt_store_dataset_clear(&removed);
    pt_store_dataset got;
    assert_int_equal(pt_store_dataset_get(f->s, "alice", ds.id, &got), PT_STORE_NOT_FOUND);
    assert_int_equal(pt_store_dataset_delete(f->s, "alice", ds.id, NULL), PT_STORE_NOT_FOUND);
    pt_store_job after;
    assert_int_equal(pt_store_job_get(f->s, "alice", job.id, &after), PT_STORE_OK);
    assert_string_equal(after.dataset_id, "");
    assert_int_equal(after.state, PT_JOB_STOPPED);
    pt_store_job_clear(&after);
    pt_store_job_clear(&job);
    pt_store_dataset_clear(&ds);
}

/* One dataset per upload identity and owner; the twin is named. */
static void test_unique_upload(void **state)
{
    fixture *f = *state;
    pt_store_dataset in = sample("alice", "water");
    snprintf(in.content_sha256, sizeof in.content_sha256, "%064d", 7);
    snprintf(in.ingest_hash, sizeof in.ingest_hash, "%064d", 1);
    pt_store_dataset a, b;
    char twin[PT_STORE_ID_MAX];
    assert_int_equal(pt_store_dataset_create_unique(f->s, &in, &a, twin), PT_STORE_OK);
    assert_string_equal(twin, "");
    assert_string_equal(a.content_sha256, in.content_sha256);
    assert_string_equal(a.ingest_hash, in.ingest_hash);
    assert_int_equal(pt_store_dataset_create_unique(f->s, &in, &b, twin), PT_STORE_CONFLICT);
    assert_string_equal(twin, a.id);
    char expect[96];
    snprintf(expect, sizeof expect, "the same upload is dataset %s", a.id);
    assert_string_equal(pt_store_errmsg(f->s), expect);
    assert_int_equal(pt_store_dataset_find_ingest(f->s, "alice", in.ingest_hash, &b), PT_STORE_OK);
    assert_string_equal(b.id, a.id);
    pt_store_dataset_clear(&b);
    /* another owner, or no identity, is another dataset */
    assert_int_equal(pt_store_dataset_find_ingest(f->s, "bob", in.ingest_hash, &b), PT_STORE_NOT_FOUND);
    pt_store_dataset other = in;
    snprintf(other.owner, sizeof other.owner, "bob");
    assert_int_equal(pt_store_dataset_create_unique(f->s, &other, &b, twin), PT_STORE_OK);
    pt_store_dataset_clear(&b);
    pt_store_dataset plain = sample("alice", "water");
    assert_int_equal(pt_store_dataset_create(f->s, &plain, &b), PT_STORE_OK);
    assert_int_equal(pt_store_dataset_create(f->s, &plain, NULL), PT_STORE_OK);
    assert_string_equal(b.ingest_hash, "");
    pt_store_dataset_clear(&b);
    assert_int_equal(pt_store_dataset_find_ingest(f->s, "alice", "", &b), PT_STORE_INVALID);

    /* Idempotency-Keys of uploads: one per (owner, key), gone with the dataset */
    char hash[PT_STORE_HASH_HEX], id[PT_STORE_ID_MAX];
    assert_int_equal(pt_store_dataset_key_get(f->s, "alice", "up-1", hash, id), PT_STORE_NOT_FOUND);
    assert_int_equal(pt_store_dataset_key_put(f->s, "alice", "up-1", "h1", a.id), PT_STORE_OK);
    assert_int_equal(pt_store_dataset_key_put(f->s, "alice", "up-1", "h2", a.id), PT_STORE_CONFLICT);
    assert_int_equal(pt_store_dataset_key_get(f->s, "alice", "up-1", hash, id), PT_STORE_OK);
    assert_string_equal(hash, "h1");
    assert_string_equal(id, a.id);
    assert_int_equal(pt_store_dataset_key_get(f->s, "bob", "up-1", hash, id), PT_STORE_NOT_FOUND);
    assert_int_equal(pt_store_dataset_key_get(f->s, "alice", "", hash, id), PT_STORE_INVALID);
    assert_int_equal(pt_store_dataset_delete(f->s, "alice", a.id, NULL), PT_STORE_OK);
    assert_int_equal(pt_store_dataset_key_get(f->s, "alice", "up-1", hash, id), PT_STORE_NOT_FOUND);
    pt_store_dataset_clear(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_get_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_caller_chosen_id_and_conflict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_owner_isolation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_pagination_newest_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_refused_while_job_unfinished, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unique_upload, setup, teardown),
    };
    return cmocka_run_group_tests_name("store_datasets", tests, NULL, NULL);
}
