/* test_response.c — problem+json documents (RFC 9457), errors[] built from a
 * pt_errors list, and ETags: the builders alone, and the bytes a client gets
 * from a real server, including If-None-Match -> 304. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "http_test_client.h"

static void test_problem_document(void **state)
{
    (void)state;
    json_t *p = pt_problem_new(404, NULL, "no job 'x'");
    assert_string_equal(json_string_value(json_object_get(p, "type")), "about:blank");
    assert_string_equal(json_string_value(json_object_get(p, "title")), "Not Found");
    assert_int_equal(json_integer_value(json_object_get(p, "status")), 404);
    assert_string_equal(json_string_value(json_object_get(p, "detail")), "no job 'x'");
    assert_int_equal(json_object_size(p), 4);
    json_decref(p);
    p = pt_problem_new(422, "https://example.org/problems/plan", NULL);
    assert_string_equal(json_string_value(json_object_get(p, "type")), "https://example.org/problems/plan");
    assert_string_equal(json_string_value(json_object_get(p, "title")), "Unprocessable Content");
    assert_null(json_object_get(p, "detail"));
    json_decref(p);
    assert_string_equal(pt_status_title(413), "Content Too Large");
    assert_string_equal(pt_status_title(405), "Method Not Allowed");
    assert_string_equal(pt_status_title(999), "Unknown");
    /* A document with a status outside 4xx/5xx is sent as 500. */
    pt_response r = pt_problem_response(json_pack("{s:i}", "status", 200));
    assert_int_equal(r.status, 500);
    assert_string_equal(MHD_get_response_header(r.mhd, "Content-Type"), "application/problem+json");
    MHD_destroy_response(r.mhd);
    r = pt_problem_response(NULL);
    assert_int_equal(r.status, 500);
    assert_null(r.mhd);
    r = pt_response_json(200, NULL);
    assert_int_equal(r.status, 500);
    assert_int_equal(pt_response_header(&r, "X", "y"), -1);
}

static void test_errors_to_json(void **state)
{
    (void)state;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_errors_add(&errs, "qm9.xyz", 12, "energy", "not a number: '%s'", "abc");
    pt_errors_add(&errs, "", 3, "", "line only");
    pt_errors_add(&errs, "", 0, "batching.max_nodes", "must be positive");
    json_t *a = pt_errors_to_json(&errs);
    assert_int_equal(json_array_size(a), 3);
    json_t *e0 = json_array_get(a, 0), *e1 = json_array_get(a, 1), *e2 = json_array_get(a, 2);
    assert_string_equal(json_string_value(json_object_get(e0, "file")), "qm9.xyz");
    assert_int_equal(json_integer_value(json_object_get(e0, "line")), 12);
    assert_string_equal(json_string_value(json_object_get(e0, "field")), "energy");
    assert_string_equal(json_string_value(json_object_get(e0, "message")), "not a number: 'abc'");
    assert_int_equal(json_object_size(e1), 2);   /* empty parts are left out */
    assert_int_equal(json_integer_value(json_object_get(e1, "line")), 3);
    assert_int_equal(json_object_size(e2), 2);
    assert_string_equal(json_string_value(json_object_get(e2, "field")), "batching.max_nodes");
    json_decref(a);
    pt_errors_close(&errs);
}

/* Issue 17 F5: failure reasons and predict's problems showed absolute
 * server paths; paths are cut to their last segment, other slashes stay. */
static void test_hide_paths(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"cannot open /srv/pt/jobs/j/model.safetensors: short read", "cannot open model.safetensors: short read"},
        {"training failed: /a/b/c.ptd: bad (and 2 more)", "training failed: c.ptd: bad (and 2 more)"},
        {"'/tmp/x/upload-1' gone; (/x/y) [/p/q]", "'upload-1' gone; (y) [q]"},
        {"dir /srv/pt/ trailing", "dir pt trailing"},
        {"a/b and 1/2 and /v1 and /healthz stay", "a/b and 1/2 and /v1 and /healthz stay"},
        {"path=/var/lib/pt/x:y: z", "path=x:y: z"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", cases[i][0]);
        pt_text_hide_paths(buf);
        assert_string_equal(buf, cases[i][1]);
    }
}

/* Messages quote the bytes of uploads, which need not be UTF-8, and "%.40s"
 * can cut a character in two; jansson refuses such strings, and the message
 * used to vanish from the document (found with tests/fuzz/fuzz_xyz.c, input
 * in tests/fuzz/regressions/xyz).  Each bad byte becomes U+FFFD; valid
 * characters stay as they are. */
static void test_errors_not_utf8(void **state)
{
    (void)state;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_errors_add(&errs, "up\xffload.xyz", 3, "stress", "not a number: '0.\xff\xfe' in '\xc3\xa9t\xc3'");
    pt_errors_add(&errs, "", 4, "k\xe2\x82", "surrogate \xed\xa0\x80, overlong \xc0\xaf, ok \xe2\x82\xac");
    json_t *a = pt_errors_to_json(&errs);
    json_t *e0 = json_array_get(a, 0), *e1 = json_array_get(a, 1);
    assert_string_equal(json_string_value(json_object_get(e0, "file")), "up\xef\xbf\xbdload.xyz");
    assert_string_equal(json_string_value(json_object_get(e0, "message")),
                        "not a number: '0.\xef\xbf\xbd\xef\xbf\xbd' in '\xc3\xa9t\xef\xbf\xbd'");
    assert_string_equal(json_string_value(json_object_get(e1, "field")), "k\xef\xbf\xbd\xef\xbf\xbd");
    assert_string_equal(json_string_value(json_object_get(e1, "message")),
                        "surrogate \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd, overlong \xef\xbf\xbd\xef\xbf\xbd, "
                        "ok \xe2\x82\xac");
    json_decref(a);
    pt_errors_close(&errs);
    json_t *p = pt_problem_new(404, NULL, "there is no file 'a\xff'");
    assert_string_equal(json_string_value(json_object_get(p, "detail")), "there is no file 'a\xef\xbf\xbd'");
    json_decref(p);
}

static void test_etag_compare(void **state)
{
    (void)state;
    assert_true(pt_etag_matches("\"a\"", "\"a\""));
    assert_true(pt_etag_matches("W/\"a\"", "\"a\""));     /* weak comparison both ways */
    assert_true(pt_etag_matches("\"a\"", "W/\"a\""));
    assert_true(pt_etag_matches(" \"x\" ,\t W/\"a\"", "\"a\""));
    assert_true(pt_etag_matches(" * ", "\"anything\""));
    assert_false(pt_etag_matches("\"a\"", "\"b\""));
    assert_false(pt_etag_matches("\"ab\"", "\"a\""));
    assert_false(pt_etag_matches("a", "\"a\""));          /* malformed: no quotes */
    assert_false(pt_etag_matches("\"a", "\"a\""));
    assert_false(pt_etag_matches("*, \"a\"", "\"a\""));   /* "*" must stand alone */
    assert_false(pt_etag_matches(NULL, "\"a\""));
    assert_true(pt_etag_strong_equal("\"a\"", "\"a\""));
    assert_false(pt_etag_strong_equal("W/\"a\"", "W/\"a\""));
    assert_false(pt_etag_strong_equal("\"a\"", "\"b\""));

    char t1[64], t2[64], t3[64];
    pt_etag_of("hello", 5, t1, sizeof t1);
    pt_etag_of("hello", 5, t2, sizeof t2);
    pt_etag_of("hellO", 5, t3, sizeof t3);
    assert_string_equal(t1, t2);
    assert_string_not_equal(t1, t3);
    assert_string_equal(t1, "\"5-3610a686\"");   /* CRC-32 of "hello" */
    pt_etag_version(17, t1, sizeof t1);
    assert_string_equal(t1, "W/\"v17\"");
}

/* --- over the wire -------------------------------------------------------------------------------- */

static pt_response h_failed(pt_request *req, void *ctx)
{
    (void)req;
    (void)ctx;
    return pt_problem(500, "cannot read %s: short read", "/srv/packtrain/datasets/ds_1/data.ptd");
}

static pt_response h_problem(pt_request *req, void *ctx)
{
    (void)req;
    (void)ctx;
    pt_errors errs;
    pt_errors_init(&errs, 2);
    for (int i = 1; i <= 5; i++) pt_errors_add(&errs, "data.xyz", i * 10, "positions", "bad row %d", i);
    pt_response r = pt_problem_errors(422, &errs, "%zu structures are invalid", errs.total);
    pt_errors_close(&errs);
    return r;
}

static pt_response h_tagged(pt_request *req, void *ctx)
{
    (void)ctx;
    return pt_response_json_etag(200, json_pack("{s:s}", "state", "running"),
                                 pt_request_header(req, "If-None-Match"));
}

static void test_problem_on_the_wire(void **state)
{
    tc_server *s = *state;
    char url[256];
    tc_url(s, "/problem", url, sizeof url);
    tc_resp r;
    tc_get(url, &r);
    assert_int_equal(r.status, 422);
    char ct[64];
    tc_header(&r, "Content-Type", ct, sizeof ct);
    assert_string_equal(ct, "application/problem+json");
    assert_string_equal(r.body,
                        "{\"type\":\"about:blank\",\"title\":\"Unprocessable Content\",\"status\":422,"
                        "\"detail\":\"5 structures are invalid\",\"errors\":["
                        "{\"file\":\"data.xyz\",\"line\":10,\"field\":\"positions\",\"message\":\"bad row 1\"},"
                        "{\"file\":\"data.xyz\",\"line\":20,\"field\":\"positions\",\"message\":\"bad row 2\"}],"
                        "\"errors_omitted\":3}\n");
    tc_free(&r);
}

/* A 5xx problem names the server's files by their last segment only. */
static void test_server_failure_hides_paths(void **state)
{
    tc_server *s = *state;
    char url[256];
    tc_url(s, "/failed", url, sizeof url);
    tc_resp r;
    tc_get(url, &r);
    assert_int_equal(r.status, 500);
    json_t *j = tc_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "detail")), "cannot read data.ptd: short read");
    json_decref(j);
    tc_free(&r);
}

static void test_etag_on_the_wire(void **state)
{
    tc_server *s = *state;
    char url[256], etag[64], inm[128];
    tc_url(s, "/tagged", url, sizeof url);
    tc_resp r;
    tc_get(url, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(tc_header(&r, "ETag", etag, sizeof etag), 0);
    char want[64];
    pt_etag_of(r.body, r.len, want, sizeof want);   /* the tag is of the exact bytes sent */
    assert_string_equal(etag, want);
    tc_free(&r);

    snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
    const char *h[] = {inm, NULL};
    tc_request("GET", url, h, NULL, 0, &r);
    assert_int_equal(r.status, 304);
    assert_int_equal(r.len, 0);
    char again[64];
    tc_header(&r, "ETag", again, sizeof again);
    assert_string_equal(again, etag);
    tc_free(&r);

    const char *other[] = {"If-None-Match: \"0-0\"", NULL};
    tc_request("GET", url, other, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"state\":\"running\"}\n");
    tc_free(&r);
}

static int setup(void **state)
{
    tc_server *s = calloc(1, sizeof(*s));
    pt_router_init(&s->router);
    char err[256];
    pt_route routes[] = {
        {"GET", "/problem", h_problem, NULL, PT_BODY_NONE, 0},
        {"GET", "/tagged", h_tagged, NULL, PT_BODY_NONE, 0},
        {"GET", "/failed", h_failed, NULL, PT_BODY_NONE, 0},
    };
    for (size_t i = 0; i < 3; i++)
        if (pt_router_add(&s->router, &routes[i], err, sizeof err) != 0) return -1;
    *state = s;
    return tc_server_start(s, NULL);
}

static int teardown(void **state)
{
    tc_server *s = *state;
    pt_http_close(&s->http);
    pt_router_close(&s->router);
    free(s);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_problem_document),
        cmocka_unit_test(test_errors_to_json),
        cmocka_unit_test(test_hide_paths),
        cmocka_unit_test(test_errors_not_utf8),
        cmocka_unit_test(test_etag_compare),
        cmocka_unit_test_setup_teardown(test_problem_on_the_wire, setup, teardown),
        cmocka_unit_test_setup_teardown(test_etag_on_the_wire, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_failure_hides_paths, setup, teardown),
    };
    return cmocka_run_group_tests_name("response", tests, tc_global_setup, tc_global_teardown);
}
