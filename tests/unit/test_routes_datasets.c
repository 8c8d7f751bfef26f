/* test_routes_datasets.c — the dataset routes against a real app: upload
 * (201 with counts and histogram, 422 with line numbers, skip_invalid, 413,
 * 415, bad parameters), list with pagination, get with ETag, delete (204,
 * files gone, 404, 409 while a job uses it) and the packing report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "tests/unit/api_fixture.h"

#define GOOD_XYZ                                                                                             \
    "3\nProperties=species:S:1:pos:R:3 energy=-1.5\nO 0 0 0\nH 0.96 0 0\nH -0.24 0.93 0\n"                  \
    "2\nProperties=species:S:1:pos:R:3 energy=-0.5\nH 0 0 0\nH 0.74 0 0\n"

/* Structure 2 has an unknown element on line 8. */
#define BAD_XYZ                                                                                              \
    "3\nProperties=species:S:1:pos:R:3 energy=-1.5\nO 0 0 0\nH 0.96 0 0\nH -0.24 0.93 0\n"                  \
    "2\nProperties=species:S:1:pos:R:3 energy=-0.5\nXx 0 0 0\nH 0.74 0 0\n"

static int setup(void **state)
{
    static api_fx fx;
    pt_app_options o;
    pt_app_options_defaults(&o);
    o.workers = 0;
    o.upload_max = 200000;   /* the demo file (49 KB) fits, 413 is reachable */
    if (fx_start(&fx, &o) != 0) return -1;
    *state = &fx;
    return 0;
}

static int teardown(void **state)
{
    fx_stop(*state);
    return 0;
}

static void test_upload_created(void **state)
{
    api_fx *fx = *state;
    tc_resp r;
    assert_int_equal(fx_upload_text(fx, "?name=water%20pair.xyz", GOOD_XYZ, NULL, &r), 201);
    json_t *j = tc_json(&r);
    const char *id = json_string_value(json_object_get(j, "id"));
    assert_non_null(id);
    assert_int_equal(strncmp(id, "ds_", 3), 0);
    char loc[128], want[128];
    assert_int_equal(tc_header(&r, "Location", loc, sizeof loc), 0);
    snprintf(want, sizeof want, "/v1/datasets/%s", id);
    assert_string_equal(loc, want);
    assert_string_equal(json_string_value(json_object_get(j, "name")), "water pair.xyz");
    assert_string_equal(json_string_value(json_object_get(j, "status")), "ready");
    assert_string_equal(json_string_value(json_object_get(j, "format")), "extxyz");
    assert_int_equal(json_integer_value(json_object_get(j, "n_structures")), 2);
    assert_int_equal(json_integer_value(json_object_get(j, "n_atoms")), 5);
    assert_int_equal(json_integer_value(json_object_get(j, "bytes")), (json_int_t)strlen(GOOD_XYZ));
    json_t *hist = json_object_get(json_object_get(json_object_get(j, "report"), "atoms_per_structure"), "histogram");
    assert_int_equal(json_array_size(hist), 2);   /* [[2,1],[3,1]] */
    assert_int_equal(json_integer_value(json_array_get(json_array_get(hist, 0), 0)), 2);
    assert_int_equal(json_integer_value(json_array_get(json_array_get(hist, 1), 1)), 1);
    assert_non_null(json_object_get(json_object_get(json_object_get(j, "report"), "targets"), "energy"));
    char ptd[PATH_MAX + 128];
    snprintf(ptd, sizeof ptd, "%s/%s/data.ptd", fx->app.datasets_dir, id);
    struct stat st;
    assert_int_equal(stat(ptd, &st), 0);
    json_decref(j);
    tc_free(&r);
}

static void test_upload_invalid_lists_lines(void **state)
{
    api_fx *fx = *state;
    tc_resp r;
    assert_int_equal(fx_upload_text(fx, "?name=bad.xyz", BAD_XYZ, NULL, &r), 422);
    assert_true(fx_is_problem(&r));
    assert_string_equal(fx_detail(&r), "'bad.xyz' is not a valid dataset: 1 problem");
    json_t *j = tc_json(&r);
    json_t *e = json_array_get(json_object_get(j, "errors"), 0);
    assert_int_equal(json_integer_value(json_object_get(e, "line")), 8);
    assert_string_equal(json_string_value(json_object_get(e, "file")), "bad.xyz");
    assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "Xx"));
    json_decref(j);
    tc_free(&r);
    /* Nothing was recorded. */
    pt_store_dataset_page page;
    assert_int_equal(pt_store_dataset_list(fx->db, "local", 100, NULL, &page), PT_STORE_OK);
    for (size_t i = 0; i < page.n; i++) assert_string_not_equal(page.items[i].name, "bad.xyz");
    pt_store_dataset_page_clear(&page);
}

static void test_upload_skip_invalid(void **state)
{
    api_fx *fx = *state;
    tc_resp r;
    assert_int_equal(fx_upload_text(fx, "?name=bad.xyz&skip_invalid=true", BAD_XYZ, NULL, &r), 201);
    json_t *j = tc_json(&r);
    assert_int_equal(json_integer_value(json_object_get(j, "n_structures")), 1);
    json_t *rep = json_object_get(j, "report");
    assert_int_equal(json_integer_value(json_object_get(rep, "skipped")), 1);
    json_t *e = json_array_get(json_object_get(rep, "skipped_errors"), 0);
    assert_int_equal(json_integer_value(json_object_get(e, "line")), 8);
    json_decref(j);
    tc_free(&r);
}

/* A periodic upload: the dataset JSON says so and lists its labels; a
 * periodic structure without its cell is refused with its line. */
#define SLAB_XYZ                                                                                              \
    "1\nLattice=\"5.76 0 0 2.88 4.99 0 0 0 21\" Properties=species:S:1:pos:R:3:forces:R:3 energy=2.5 "     \
    "pbc=\"T T F\"\nPt 0 0 10 0.1 0.2 0.3\n"                                                               \
    "1\nLattice=\"0 2 2 2 0 2 2 2 0\" Properties=species:S:1:pos:R:3:forces:R:3 energy=0.1 "               \
    "stress=\"1e-3 0 0 0 1e-3 0 0 0 1e-3\" pbc=\"T T T\"\nCu 0 0 0 0 0 0\n"

static void test_upload_periodic(void **state)
{
    api_fx *fx = *state;
    tc_resp r;
    assert_int_equal(fx_upload_text(fx, "?name=slab.extxyz", SLAB_XYZ, NULL, &r), 201);
    json_t *j = tc_json(&r);
    json_t *rep = json_object_get(j, "report");
    assert_true(json_is_true(json_object_get(rep, "periodic")));
    assert_int_equal(json_integer_value(json_object_get(rep, "structures_periodic")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(rep, "pbc"), "T T F")), 1);
    char *labels = json_dumps(json_object_get(rep, "labels"), JSON_COMPACT);
    assert_string_equal(labels, "[\"energy\",\"forces\",\"stress\"]");
    free(labels);
    json_decref(j);
    tc_free(&r);
    assert_int_equal(fx_upload_text(fx, "?name=nocell.extxyz",
                                    "1\npbc=\"T T T\" energy=1\nCu 0 0 0\n", NULL, &r), 422);
    j = tc_json(&r);
    json_t *e = json_array_get(json_object_get(j, "errors"), 0);
    assert_int_equal(json_integer_value(json_object_get(e, "line")), 2);
    assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "there is no Lattice"));
    json_decref(j);
    tc_free(&r);
}

static void test_upload_bad_parameters(void **state)
{
    api_fx *fx = *state;
    tc_resp r;
    assert_int_equal(fx_upload_text(fx, "?format=pdb&skip_invalid=maybe", GOOD_XYZ, NULL, &r), 400);
    assert_string_equal(fx_detail(&r), "2 invalid request parameters");
    assert_string_equal(fx_error(&r, 0), "query.format: unknown format 'pdb'; one of auto, extxyz, xyz, qm9, ase-db");
    assert_string_equal(fx_error(&r, 1), "query.skip_invalid: must be true or false, got 'maybe'");
    tc_free(&r);
    assert_int_equal(fx_upload_text(fx, "?forces_key=&stress_key=", GOOD_XYZ, NULL, &r), 400);
    assert_string_equal(fx_error(&r, 0), "query.forces_key: must name an entry of the database (1 to 200 characters)");
    assert_string_equal(fx_error(&r, 1), "query.stress_key: must name an entry of the database (1 to 200 characters)");
    tc_free(&r);
    /* a forces_key for a text file: its forces column is "forces" */
    assert_int_equal(fx_upload_text(fx, "?name=w.xyz&forces_key=atomic_forces", GOOD_XYZ, NULL, &r), 422);
    assert_non_null(strstr(fx_error(&r, 0), "forces_key: 'atomic_forces' names per-atom vectors of an ASE"));
    tc_free(&r);
    assert_int_equal(fx_upload_text(fx, "?name=", GOOD_XYZ, NULL, &r), 400);
    assert_string_equal(fx_error(&r, 0), "query.name: must be 1..255 characters without control characters");
    tc_free(&r);
}

static void test_upload_empty_and_multipart(void **state)
{
    api_fx *fx = *state;
    tc_resp r;
    assert_int_equal(fx_upload_text(fx, "", "", NULL, &r), 422);
    assert_string_equal(fx_detail(&r), "the request body is empty: send the dataset file as the body "
                                       "(curl --data-binary @FILE)");
    tc_free(&r);
    const char *mp[] = {"Content-Type: multipart/form-data; boundary=x", NULL};
    assert_int_equal(fx_upload_text(fx, "", GOOD_XYZ, mp, &r), 415);
    assert_true(fx_is_problem(&r));
    tc_free(&r);
}

static void test_upload_too_large(void **state)
{
    api_fx *fx = *state;
    size_t n = 300000;
    char *big = malloc(n + 1);
    memset(big, 'x', n);
    big[n] = '\0';
    tc_resp r;
    assert_int_equal(fx_upload_text(fx, "", big, NULL, &r), 413);
    assert_string_equal(fx_detail(&r), "the request body is larger than the limit of 200000 bytes");
    free(big);
    tc_free(&r);
}

static void test_list_pagination(void **state)
{
    api_fx *fx = *state;
    tc_resp r;
    for (int i = 0; i < 3; i++) {
        char q[64], text[256];
        snprintf(q, sizeof q, "?name=page-%d", i);
        /* three files (the same file again would be the same dataset) */
        snprintf(text, sizeof text, "1\nProperties=species:S:1:pos:R:3 energy=%d\nH 0 0 0\n", i);
        assert_int_equal(fx_upload_text(fx, q, text, NULL, &r), 201);
        tc_free(&r);
    }
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets?limit=2"), 200);
    json_t *j = tc_json(&r);
    json_t *items = json_object_get(j, "datasets");
    assert_int_equal(json_array_size(items), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "name")), "page-2");
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 1), "name")), "page-1");
    const char *next = json_string_value(json_object_get(j, "next_page_token"));
    assert_non_null(next);
    char path[256];
    snprintf(path, sizeof path, "/v1/datasets?limit=1&page_token=%s", next);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "%s", path), 200);
    json_t *j2 = tc_json(&r);
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(j2, "datasets"), 0), "name")),
                        "page-0");
    json_decref(j);
    json_decref(j2);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets?limit=0"), 400);
    assert_string_equal(fx_error(&r, 0), "query.limit: 0 is out of range [1, 100]");
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets?page_token=garbage"), 400);
    assert_true(fx_is_problem(&r));
    assert_non_null(strstr(fx_detail(&r), "cannot list datasets: "));
    tc_free(&r);
}

/* The same file (and ingest options) again is the same dataset: 200 with
 * the first one.  An Idempotency-Key names one upload: the same again
 * answers the first, another file under it is a 422. */
static void test_upload_dedup_and_idempotency(void **state)
{
    api_fx *fx = *state;
    const char *text = "1\nProperties=species:S:1:pos:R:3 energy=-7.25\nHe 0 0 0\n";
    const char *other = "1\nProperties=species:S:1:pos:R:3 energy=-7.5\nHe 0 0 0\n";
    tc_resp r;
    assert_int_equal(fx_upload_text(fx, "?name=he.xyz", text, NULL, &r), 201);
    json_t *j = tc_json(&r);
    char id[64];
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(j, "id")));
    const char *sha = json_string_value(json_object_get(j, "sha256"));
    assert_non_null(sha);
    assert_int_equal(strlen(sha), 64);
    json_decref(j);
    tc_free(&r);
    /* same bytes, another name: the dataset stored before */
    assert_int_equal(fx_upload_text(fx, "?name=again.xyz", text, NULL, &r), 200);
    j = tc_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "id")), id);
    assert_string_equal(json_string_value(json_object_get(j, "name")), "he.xyz");
    char loc[128], want[128];
    assert_int_equal(tc_header(&r, "Location", loc, sizeof loc), 0);
    snprintf(want, sizeof want, "/v1/datasets/%s", id);
    assert_string_equal(loc, want);
    json_decref(j);
    tc_free(&r);
    /* same bytes read otherwise (skip_invalid) are another dataset */
    assert_int_equal(fx_upload_text(fx, "?name=he.xyz&skip_invalid=true", text, NULL, &r), 201);
    j = tc_json(&r);
    assert_string_not_equal(json_string_value(json_object_get(j, "id")), id);
    json_decref(j);
    tc_free(&r);

    const char *key[] = {"Idempotency-Key: upload-7", NULL};
    assert_int_equal(fx_upload_text(fx, "?name=other.xyz", other, key, &r), 201);
    j = tc_json(&r);
    char oid[64];
    snprintf(oid, sizeof oid, "%s", json_string_value(json_object_get(j, "id")));
    json_decref(j);
    tc_free(&r);
    assert_int_equal(fx_upload_text(fx, "?name=other.xyz", other, key, &r), 200);
    j = tc_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "id")), oid);
    json_decref(j);
    tc_free(&r);
    /* the key with another name or file */
    assert_int_equal(fx_upload_text(fx, "?name=renamed.xyz", other, key, &r), 422);
    char detail[256];
    snprintf(detail, sizeof detail, "Idempotency-Key 'upload-7' was already used for a different upload (dataset %s); "
             "use a new key for a different file, name or option", oid);
    assert_string_equal(fx_detail(&r), detail);
    tc_free(&r);
    assert_int_equal(fx_upload_text(fx, "?name=other.xyz", text, key, &r), 422);
    tc_free(&r);
    const char *bad[] = {"Idempotency-Key: \x01", NULL};
    assert_int_equal(fx_upload_text(fx, "?name=other.xyz", other, bad, &r), 400);
    assert_string_equal(fx_error(&r, 0), "header.Idempotency-Key: must be 1 to 255 printable characters");
    tc_free(&r);
    /* a dataset deleted takes its key and its identity along */
    assert_int_equal(fx_call(fx, "DELETE", NULL, NULL, &r, "/v1/datasets/%s", oid), 204);
    tc_free(&r);
    assert_int_equal(fx_upload_text(fx, "?name=other.xyz", other, key, &r), 201);
    tc_free(&r);
}

static void test_get_etag(void **state)
{
    api_fx *fx = *state;
    char id[64];
    assert_int_equal(fx_demo_dataset(fx, NULL, id, sizeof id), 0);
    tc_resp r;
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets/%s", id), 200);
    char etag[128], inm[160];
    assert_int_equal(tc_header(&r, "ETag", etag, sizeof etag), 0);
    json_t *j = tc_json(&r);
    assert_int_equal(json_integer_value(json_object_get(j, "n_structures")), 64);
    json_decref(j);
    tc_free(&r);
    snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
    const char *h[] = {inm, NULL};
    assert_int_equal(fx_call(fx, "GET", h, NULL, &r, "/v1/datasets/%s", id), 304);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets/ds_0000000000000000"), 404);
    assert_string_equal(fx_detail(&r), "there is no dataset 'ds_0000000000000000'");
    tc_free(&r);
}

static void test_delete(void **state)
{
    api_fx *fx = *state;
    char id[64], job[64], ptd[PATH_MAX + 128];
    assert_int_equal(fx_demo_dataset(fx, NULL, id, sizeof id), 0);
    snprintf(ptd, sizeof ptd, "%s/%s/data.ptd", fx->app.datasets_dir, id);
    assert_int_equal(fx_job(fx, NULL, id, job, sizeof job), 0);
    tc_resp r;
    assert_int_equal(fx_call(fx, "DELETE", NULL, NULL, &r, "/v1/datasets/%s", id), 409);
    char want[256];
    snprintf(want, sizeof want, "dataset %s is used by a job that has not ended; cancel it or wait for it to end", id);
    assert_string_equal(fx_detail(&r), want);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "POST", NULL, NULL, &r, "/v1/jobs/%s/cancel", job), 200);
    tc_free(&r);
    assert_int_equal(fx_call(fx, "DELETE", NULL, NULL, &r, "/v1/datasets/%s", id), 204);
    tc_free(&r);
    struct stat st;
    assert_int_not_equal(stat(ptd, &st), 0);
    assert_int_equal(fx_call(fx, "DELETE", NULL, NULL, &r, "/v1/datasets/%s", id), 404);
    tc_free(&r);
    /* The finished job stays, without its dataset. */
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/jobs/%s", job), 200);
    json_t *j = tc_json(&r);
    assert_true(json_is_null(json_object_get(j, "dataset")));
    json_decref(j);
    tc_free(&r);
}

static void test_packing(void **state)
{
    api_fx *fx = *state;
    char id[64];
    assert_int_equal(fx_demo_dataset(fx, NULL, id, sizeof id), 0);
    tc_resp r;
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets/%s/packing?method=lpfhp&max_nodes=40", id), 200);
    json_t *j = tc_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "method")), "lpfhp");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "limits"), "max_nodes")), 40);
    assert_int_equal(json_integer_value(json_object_get(j, "graphs")), 64);
    assert_int_equal(json_integer_value(json_object_get(j, "real_nodes")), 775);
    double eff = json_number_value(json_object_get(j, "node_efficiency"));
    assert_true(eff > 0.5 && eff <= 1.0);
    json_decref(j);
    tc_free(&r);
    /* Padding is less efficient than packing on the same data. */
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets/%s/packing?method=pad", id), 200);
    j = tc_json(&r);
    assert_true(json_number_value(json_object_get(j, "node_efficiency")) < eff);
    assert_int_equal(json_integer_value(json_object_get(j, "packs")), 64);
    json_decref(j);
    tc_free(&r);
    /* the neighbour graph: 32 per atom by default, every neighbour (all), or a cap */
    long long edges[3];
    const char *k[3] = {"", "&max_neighbors=all", "&max_neighbors=2"};
    const int echo[3] = {32, 0, 2};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets/%s/packing?cutoff=10%s", id,
                                 k[i]), 200);
        j = tc_json(&r);
        json_t *g = json_object_get(j, "graph");
        assert_int_equal(json_integer_value(json_object_get(g, "max_neighbors")), echo[i]);
        edges[i] = json_integer_value(json_object_get(j, "real_edges"));
        json_decref(j);
        tc_free(&r);
    }
    /* QM9 molecules of up to 29 atoms: a cap of 32 cuts nothing, one of 2 does */
    assert_true(edges[0] > 0 && edges[0] == edges[1] && edges[2] < edges[1]);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets/%s/packing?max_neighbors=auto", id), 400);
    assert_non_null(strstr(fx_error(&r, 0), "query.max_neighbors"));
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets/%s/packing?method=best&cutoff=-1", id), 400);
    assert_string_equal(fx_error(&r, 0),
                        "query.method: unknown method 'best'; one of lpfhp, tuple, pad, static64, static2n, dynamic");
    assert_string_equal(fx_error(&r, 1), "query.cutoff: must be a number in [0.001, 100], got '-1'");
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets/%s/packing?method=tuple&max_nodes=5", id), 422);
    char want[128];
    snprintf(want, sizeof want, "dataset %s cannot be packed this way", id);
    assert_string_equal(fx_detail(&r), want);
    assert_string_equal(fx_error(&r, 0), "max_nodes: graph 0 has 8 atoms, more than max_nodes 5");
    tc_free(&r);
    assert_int_equal(fx_call(fx, "GET", NULL, NULL, &r, "/v1/datasets/ds_0000000000000000/packing"), 404);
    tc_free(&r);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_upload_created),
        cmocka_unit_test(test_upload_invalid_lists_lines),
        cmocka_unit_test(test_upload_skip_invalid),
        cmocka_unit_test(test_upload_periodic),
        cmocka_unit_test(test_upload_bad_parameters),
        cmocka_unit_test(test_upload_empty_and_multipart),
        cmocka_unit_test(test_upload_too_large),
        cmocka_unit_test(test_list_pagination),
        cmocka_unit_test(test_upload_dedup_and_idempotency),
        cmocka_unit_test(test_get_etag),
        cmocka_unit_test(test_delete),
        cmocka_unit_test(test_packing),
    };
    int rc = cmocka_run_group_tests_name("routes_datasets", tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
