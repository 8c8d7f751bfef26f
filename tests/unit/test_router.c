/* test_router.c — route patterns, matching (params, catch-alls, 404/405, HEAD),
 * path and query decoding, bearer parsing and the authentication hook, without
 * a server (the HTTP side is in test_http.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "server/http/router.h"

static pt_response h_dummy(pt_request *req, void *ctx)
{
    (void)req;
    (void)ctx;
    return pt_response_empty(204);
}

static int add(pt_router *r, const char *method, const char *pattern, unsigned flags, char *err)
{
    pt_route route = {method, pattern, h_dummy, NULL, PT_BODY_NONE, flags};
    return pt_router_add(r, &route, err, 256);
}

static void expect_add_error(const char *method, const char *pattern, const char *want)
{
    pt_router r;
    pt_router_init(&r);
    char err[256] = "";
    assert_int_equal(add(&r, "GET", "/a", 0, err), 0);
    assert_int_equal(add(&r, method, pattern, 0, err), -1);
    assert_string_equal(err, want);
    pt_router_close(&r);
}

static void test_pattern_errors(void **state)
{
    (void)state;
    expect_add_error("GET", "no-slash", "route pattern 'no-slash' must start with '/'");
    expect_add_error("GET", "/a/{}", "route pattern '/a/{}': bad parameter name in '{}'");
    expect_add_error("GET", "/a/{b-c}", "route pattern '/a/{b-c}': bad parameter name in '{b-c}'");
    expect_add_error("GET", "/a/{x...}/b", "route pattern '/a/{x...}/b': '{name...}' must be the last segment");
    expect_add_error("GET", "/a/{x}/{x}", "route pattern '/a/{x}/{x}': parameter 'x' appears twice");
    expect_add_error("GET", "/a{b", "route pattern '/a{b': bad segment 'a{b'");
    expect_add_error("GET", "/a%20b", "route pattern '/a%20b': bad segment 'a%20b'");
    expect_add_error("get", "/b", "route method 'get' must be upper-case letters");
    expect_add_error("GET", "/a", "route GET /a is already defined");
    expect_add_error("GET", "/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}",
                     "route pattern '/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}': more than 8 parameters");
    pt_router r;
    pt_router_init(&r);
    char err[256];
    pt_route no_handler = {"GET", "/x", NULL, NULL, PT_BODY_NONE, 0};
    assert_int_equal(pt_router_add(&r, &no_handler, err, sizeof err), -1);
    assert_string_equal(err, "route GET needs a pattern and a handler");
    pt_router_close(&r);
}

static pt_router *build(void)
{
    static pt_router r;
    pt_router_init(&r);
    char err[256];
    assert_int_equal(add(&r, "GET", "/v1/jobs", 0, err), 0);
    assert_int_equal(add(&r, "POST", "/v1/jobs", 0, err), 0);
    assert_int_equal(add(&r, "GET", "/v1/jobs/{id}", 0, err), 0);
    assert_int_equal(add(&r, "DELETE", "/v1/jobs/{id}", 0, err), 0);
    assert_int_equal(add(&r, "POST", "/v1/jobs/{id}/cancel", 0, err), 0);
    assert_int_equal(add(&r, "GET", "/v1/jobs/{id}/files/{name...}", 0, err), 0);
    assert_int_equal(add(&r, "GET", "/", 0, err), 0);
    assert_int_equal(add(&r, "GET", "/{path...}", 0, err), 0);
    return &r;
}

static void test_match(void **state)
{
    (void)state;
    pt_router *r = build();
    pt_match m;
    assert_int_equal(pt_router_match(r, "GET", "/v1/jobs/j%2F1", &m), PT_MATCH_FOUND);
    assert_string_equal(m.route->pattern, "/v1/jobs/{id}");
    assert_int_equal(m.n_params, 1);
    assert_string_equal(m.params[0].name, "id");
    assert_string_equal(m.params[0].value, "j/1");
    pt_match_clear(&m);

    assert_int_equal(pt_router_match(r, "HEAD", "/v1/jobs", &m), PT_MATCH_FOUND);
    assert_string_equal(m.route->method, "GET");

    assert_int_equal(pt_router_match(r, "POST", "/v1/jobs/7/cancel", &m), PT_MATCH_FOUND);
    assert_string_equal(m.params[0].value, "7");
    pt_match_clear(&m);

    assert_int_equal(pt_router_match(r, "GET", "/v1/jobs/7/files/a/b%20c", &m), PT_MATCH_FOUND);
    assert_int_equal(m.n_params, 2);
    assert_string_equal(m.params[1].name, "name");
    assert_string_equal(m.params[1].value, "a/b c");
    pt_match_clear(&m);

    /* "/" goes to its own route, registered before the catch-all. */
    assert_int_equal(pt_router_match(r, "GET", "/", &m), PT_MATCH_FOUND);
    assert_string_equal(m.route->pattern, "/");
    assert_int_equal(pt_router_match(r, "GET", "/app.js", &m), PT_MATCH_FOUND);
    assert_string_equal(m.params[0].value, "app.js");
    pt_match_clear(&m);

    assert_int_equal(pt_router_match(r, "PUT", "/v1/jobs/7", &m), PT_MATCH_NO_METHOD);
    assert_string_equal(m.allow, "GET, HEAD, DELETE");
    assert_int_equal(pt_router_match(r, "DELETE", "/v1/jobs", &m), PT_MATCH_NO_METHOD);
    assert_string_equal(m.allow, "GET, HEAD, POST");
    /* Only the catch-all matches: 404, not 405. */
    assert_int_equal(pt_router_match(r, "POST", "/v1/nothing", &m), PT_MATCH_NO_PATH);
    /* An empty parameter does not match; neither does an empty inner segment of a tail. */
    assert_int_equal(pt_router_match(r, "DELETE", "/v1/jobs/", &m), PT_MATCH_NO_PATH);
    assert_int_equal(pt_router_match(r, "GET", "//etc/passwd", &m), PT_MATCH_NO_PATH);
    assert_int_equal(pt_router_match(r, "GET", "/a%2Fb", &m), PT_MATCH_NO_PATH);
    pt_router_close(r);
}

static void test_bad_paths(void **state)
{
    (void)state;
    pt_router *r = build();
    pt_match m;
    assert_int_equal(pt_router_match(r, "GET", "/v1/jobs/%zz", &m), PT_MATCH_BAD_PATH);
    assert_string_equal(m.error, "malformed percent-encoding in path '/v1/jobs/%zz'");
    assert_int_equal(pt_router_match(r, "GET", "/v1/%2e%2E/x", &m), PT_MATCH_BAD_PATH);
    assert_string_equal(m.error, "path '/v1/%2e%2E/x' contains a '.' or '..' segment");
    assert_int_equal(pt_router_match(r, "GET", "/./x", &m), PT_MATCH_BAD_PATH);
    assert_int_equal(pt_router_match(r, "GET", "x", &m), PT_MATCH_BAD_PATH);
    assert_string_equal(m.error, "path 'x' must start with '/'");
    char deep[300] = "";
    for (int i = 0; i < 70; i++) strcat(deep, "/a");
    assert_int_equal(pt_router_match(r, "GET", deep, &m), PT_MATCH_BAD_PATH);
    assert_string_equal(m.error, "path has more than 64 segments");
    pt_router_close(r);
}

static void test_url_decode(void **state)
{
    (void)state;
    struct { const char *in; int plus; const char *out; } cases[] = {
        {"a%20b", 0, "a b"}, {"a+b", 1, "a b"}, {"a+b", 0, "a+b"}, {"%e2%9C%93", 0, "\xe2\x9c\x93"},
        {"%4", 0, NULL},     {"%", 0, NULL},    {"%00", 0, NULL}, {"%g0", 0, NULL}, {"", 0, ""},
        {"a%2Bb+c", 1, "a+b c"}, {"%2F%2f", 0, "//"}, {"x%0", 0, NULL}, {"ab%", 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = pt_url_decode(cases[i].in, strlen(cases[i].in), cases[i].plus);
        if (!cases[i].out) assert_null(got);
        else assert_string_equal(got, cases[i].out);
        free(got);
    }
}

static void test_request_parse(void **state)
{
    (void)state;
    char err[256];
    pt_request *req = pt_request_new("/x/y?a=1&b=two+words&&c&a=3#frag");
    assert_int_equal(pt_request_parse(req, err, sizeof err), 0);
    assert_string_equal(req->path, "/x/y");
    assert_int_equal(req->n_query, 4);
    assert_string_equal(pt_request_query(req, "a"), "1");
    assert_string_equal(pt_request_query(req, "b"), "two words");
    assert_string_equal(pt_request_query(req, "c"), "");
    assert_null(pt_request_query(req, "zz"));
    assert_null(pt_request_header(req, "Host"));   /* no connection in a unit test */
    assert_int_equal(pt_request_query_long(req, "a", 0, 0, 10), 1);
    assert_int_equal(pt_request_query_long(req, "zz", 9, 0, 10), 9);
    assert_int_equal(pt_request_query_long(req, "b", 9, 0, 10), 9);
    assert_int_equal(req->errors.total, 1);
    assert_string_equal(req->errors.items[0].field, "query.b");
    assert_string_equal(req->errors.items[0].message, "'two words' is not an integer");
    char keep_err[128];
    assert_int_equal(pt_request_keep_body(req, "/tmp/x", keep_err, sizeof keep_err), -1);
    assert_string_equal(keep_err, "this request has no body on disk");
    pt_request_free(req);

    req = pt_request_new("relative");
    assert_int_equal(pt_request_parse(req, err, sizeof err), -1);
    assert_string_equal(err, "request target must be an absolute path starting with '/'");
    pt_request_free(req);

    req = pt_request_new("/x?k%ZZ=1");
    assert_int_equal(pt_request_parse(req, err, sizeof err), -1);
    assert_string_equal(err, "malformed percent-encoding in query parameter 'k%ZZ'");
    pt_request_free(req);
}

static void test_bearer_parse(void **state)
{
    (void)state;
    char tok[16];
    assert_int_equal(pt_bearer_parse("Bearer abc.DEF-_~+/==", tok, sizeof tok), 0);
    assert_string_equal(tok, "abc.DEF-_~+/==");
    assert_int_equal(pt_bearer_parse("bEaReR \t xyz \t", tok, sizeof tok), 0);
    assert_string_equal(tok, "xyz");
    assert_int_equal(pt_bearer_parse("Bearer", tok, sizeof tok), -1);
    assert_int_equal(pt_bearer_parse("Bearer ", tok, sizeof tok), -1);
    assert_int_equal(pt_bearer_parse("Bearerabc", tok, sizeof tok), -1);
    assert_int_equal(pt_bearer_parse("Basic abc", tok, sizeof tok), -1);
    assert_int_equal(pt_bearer_parse("Bearer a b", tok, sizeof tok), -1);
    assert_int_equal(pt_bearer_parse("Bearer a=b", tok, sizeof tok), -1);
    assert_int_equal(pt_bearer_parse("Bearer 0123456789abcdef", tok, sizeof tok), -1);   /* too long */
}

static int verifier_calls;

static pt_auth_result verify(void *ctx, const char *token, pt_auth_info *out, char *why, size_t len)
{
    (void)ctx;
    verifier_calls++;
    if (!strcmp(token, "t-alice")) {
        snprintf(out->owner, sizeof out->owner, "alice");
        return PT_AUTH_OK;
    }
    snprintf(why, len, "unknown token");
    return PT_AUTH_DENIED;
}

static void test_authenticate_hook(void **state)
{
    (void)state;
    pt_router r;
    pt_router_init(&r);
    pt_route priv = {"GET", "/p", h_dummy, NULL, PT_BODY_NONE, 0};
    pt_route pub = {"GET", "/h", h_dummy, NULL, PT_BODY_NONE, PT_ROUTE_PUBLIC};
    pt_response resp = {0, NULL};
    pt_request *req = pt_request_new("/p?access_token=t-alice");
    char err[128];
    pt_request_parse(req, err, sizeof err);
    req->method = "GET";

    /* Auth off: everyone passes as the anonymous owner. */
    assert_int_equal(pt_router_authenticate(&r, &priv, req, &resp), 0);
    assert_string_equal(req->auth.owner, "");

    pt_router_set_auth(&r, verify, NULL);
    verifier_calls = 0;
    assert_int_equal(pt_router_authenticate(&r, &pub, req, &resp), 0);
    assert_int_equal(verifier_calls, 0);
    assert_int_equal(pt_router_authenticate(&r, &priv, req, &resp), 0);
    assert_string_equal(req->auth.owner, "alice");

    req->method = "POST";   /* query tokens only count for GET/HEAD */
    assert_int_equal(pt_router_authenticate(&r, &priv, req, &resp), -1);
    assert_int_equal(resp.status, 401);
    assert_string_equal(MHD_get_response_header(resp.mhd, "WWW-Authenticate"), "Bearer realm=\"packtrain\"");
    MHD_destroy_response(resp.mhd);
    pt_request_free(req);

    req = pt_request_new("/p?access_token=nope");
    pt_request_parse(req, err, sizeof err);
    req->method = "GET";
    assert_int_equal(pt_router_authenticate(&r, &priv, req, &resp), -1);
    assert_string_equal(MHD_get_response_header(resp.mhd, "WWW-Authenticate"),
                        "Bearer realm=\"packtrain\", error=\"invalid_token\", error_description=\"unknown token\"");
    assert_string_equal(MHD_get_response_header(resp.mhd, "Content-Type"), "application/problem+json");
    MHD_destroy_response(resp.mhd);
    pt_request_free(req);
    pt_router_close(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pattern_errors),
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_bad_paths),
        cmocka_unit_test(test_url_decode),
        cmocka_unit_test(test_request_parse),
        cmocka_unit_test(test_bearer_parse),
        cmocka_unit_test(test_authenticate_hook),
    };
    return cmocka_run_group_tests_name("router", tests, NULL, NULL);
}
