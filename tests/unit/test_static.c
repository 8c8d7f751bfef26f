/* test_static.c — the dashboard's static files over a real server: content
 * types, index files, ETag / If-None-Match -> 304, HEAD, and every path
 * traversal attempt we could think of (dot segments raw and encoded, encoded
 * slashes, absolute paths, backslashes, symlinks out of the root). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>
#include <unistd.h>

#include "http_test_client.h"
#include "server/http/static.h"
#include "tests/unit/tmp_fixture.h"

typedef struct fixture {
    tc_server srv;
    pt_static st;
    char top[64];     /* holds web/ and the secret next to it */
    char web[96];
} fixture;

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static pt_response h_api(pt_request *req, void *ctx)
{
    (void)req;
    (void)ctx;
    return pt_response_json(200, json_pack("{s:b}", "api", 1));
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    snprintf(f->top, sizeof f->top, "/tmp/pt-web-XXXXXX");
    if (!mkdtemp(f->top)) return -1;
    snprintf(f->web, sizeof f->web, "%s/web", f->top);
    char sub[128];
    snprintf(sub, sizeof sub, "%s/sub", f->web);
    mkdir(f->web, 0755);
    mkdir(sub, 0755);
    write_file(f->top, "secret.txt", "TOPSECRET\n");
    write_file(f->web, "index.html", "<!doctype html><title>packtrain</title>\n");
    write_file(f->web, "app.js", "console.log('hi');\n");
    write_file(f->web, "style.css", "body{}\n");
    write_file(f->web, "data.bin", "\x01\x02");
    write_file(sub, "index.html", "<p>sub</p>\n");
    char link[160];
    snprintf(link, sizeof link, "%s/escape", f->web);
    if (symlink("../secret.txt", link) != 0) return -1;
    snprintf(link, sizeof link, "%s/inner.js", f->web);
    if (symlink("app.js", link) != 0) return -1;

    char err[256];
    if (pt_static_init(&f->st, f->web, err, sizeof err) != 0) return -1;
    pt_router_init(&f->srv.router);
    pt_route routes[] = {
        {"GET", "/api/x", h_api, NULL, PT_BODY_NONE, 0},
        {"GET", "/{path...}", pt_static_handler, &f->st, PT_BODY_NONE, 0},
    };
    for (size_t i = 0; i < 2; i++)
        if (pt_router_add(&f->srv.router, &routes[i], err, sizeof err) != 0) return -1;
    *state = f;
    return tc_server_start(&f->srv, NULL);
}

static int teardown(void **state)
{
    fixture *f = *state;
    pt_http_close(&f->srv.http);
    pt_router_close(&f->srv.router);
    pt_static_close(&f->st);
    tfx_rmtree(f->top);
    free(f);
    return 0;
}

static tc_resp fetch(fixture *f, const char *method, const char *path, const char *const *headers)
{
    char url[512];
    tc_url(&f->srv, path, url, sizeof url);
    tc_resp r;
    tc_request(method, url, headers, NULL, 0, &r);
    assert_int_equal(r.rc, CURLE_OK);
    return r;
}

static void expect_file(fixture *f, const char *path, const char *type, const char *body)
{
    tc_resp r = fetch(f, "GET", path, NULL);
    assert_int_equal(r.status, 200);
    char ct[128], cc[64], etag[96];
    tc_header(&r, "Content-Type", ct, sizeof ct);
    assert_string_equal(ct, type);
    tc_header(&r, "Cache-Control", cc, sizeof cc);
    assert_string_equal(cc, "no-cache");
    assert_int_equal(tc_header(&r, "ETag", etag, sizeof etag), 0);
    assert_int_equal(etag[0], '"');
    assert_int_equal(r.len, strlen(body));
    assert_memory_equal(r.body, body, r.len);
    tc_free(&r);
}

static void test_files_and_types(void **state)
{
    fixture *f = *state;
    expect_file(f, "/", "text/html; charset=utf-8", "<!doctype html><title>packtrain</title>\n");
    expect_file(f, "/index.html", "text/html; charset=utf-8", "<!doctype html><title>packtrain</title>\n");
    expect_file(f, "/app.js", "text/javascript; charset=utf-8", "console.log('hi');\n");
    expect_file(f, "/inner.js", "text/javascript; charset=utf-8", "console.log('hi');\n");
    expect_file(f, "/style.css", "text/css; charset=utf-8", "body{}\n");
    expect_file(f, "/data.bin", "application/octet-stream", "\x01\x02");
    expect_file(f, "/sub", "text/html; charset=utf-8", "<p>sub</p>\n");
    expect_file(f, "/sub/", "text/html; charset=utf-8", "<p>sub</p>\n");

    tc_resp r = fetch(f, "HEAD", "/app.js", NULL);
    char cl[32];
    assert_int_equal(r.status, 200);
    tc_header(&r, "Content-Length", cl, sizeof cl);
    assert_string_equal(cl, "19");
    assert_int_equal(r.len, 0);
    tc_free(&r);

    /* Specific routes registered first still win over the catch-all. */
    r = fetch(f, "GET", "/api/x", NULL);
    assert_string_equal(r.body, "{\"api\":true}\n");
    tc_free(&r);
}

static void test_missing_and_wrong_method(void **state)
{
    fixture *f = *state;
    tc_resp r = fetch(f, "GET", "/nope.html", NULL);
    assert_int_equal(r.status, 404);
    json_t *p = tc_json(&r);
    assert_string_equal(json_string_value(json_object_get(p, "detail")), "there is no file 'nope.html'");
    json_decref(p);
    tc_free(&r);
    /* A catch-all route does not turn unknown paths into 405. */
    r = fetch(f, "POST", "/app.js", NULL);
    assert_int_equal(r.status, 404);
    tc_free(&r);
}

static void test_etag_not_modified(void **state)
{
    fixture *f = *state;
    tc_resp r = fetch(f, "GET", "/app.js", NULL);
    char etag[96], h1[160], h2[200], h3[160];
    tc_header(&r, "ETag", etag, sizeof etag);
    tc_free(&r);

    snprintf(h1, sizeof h1, "If-None-Match: %s", etag);
    const char *exact[] = {h1, NULL};
    r = fetch(f, "GET", "/app.js", exact);
    assert_int_equal(r.status, 304);
    assert_int_equal(r.len, 0);
    char again[96];
    tc_header(&r, "ETag", again, sizeof again);
    assert_string_equal(again, etag);
    tc_free(&r);

    snprintf(h2, sizeof h2, "If-None-Match: \"other\", W/%s", etag);   /* weak comparison, list */
    const char *listed[] = {h2, NULL};
    r = fetch(f, "GET", "/app.js", listed);
    assert_int_equal(r.status, 304);
    tc_free(&r);

    const char *other[] = {"If-None-Match: \"nope\"", NULL};
    r = fetch(f, "GET", "/app.js", other);
    assert_int_equal(r.status, 200);
    tc_free(&r);

    /* A changed file gets a new tag, so the old one no longer matches. */
    write_file(f->web, "app.js", "console.log('changed');\n");
    snprintf(h3, sizeof h3, "If-None-Match: %s", etag);
    const char *stale[] = {h3, NULL};
    r = fetch(f, "GET", "/app.js", stale);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "console.log('changed');\n");
    tc_free(&r);
}

static void test_traversal_refused(void **state)
{
    fixture *f = *state;
    static const char *const attempts[] = {
        "/../secret.txt",           "/%2e%2e/secret.txt",         "/%2E%2E/secret.txt",
        "/..%2fsecret.txt",         "/%2e%2e%2fsecret.txt",       "/sub/../../secret.txt",
        "/sub/%2e%2e/%2e%2e/secret.txt", "/.%2e/secret.txt",      "/%2fetc%2fpasswd",
        "//etc/passwd",             "/..%5csecret.txt",           "/escape",
        "/sub/..%2f..%2fsecret.txt", "/%252e%252e/secret.txt",    "/./../secret.txt",
    };
    for (size_t i = 0; i < sizeof attempts / sizeof attempts[0]; i++) {
        tc_resp r = fetch(f, "GET", attempts[i], NULL);
        if (r.status != 400 && r.status != 404) fail_msg("%s -> %ld", attempts[i], r.status);
        if (r.body && (strstr(r.body, "TOPSECRET") || strstr(r.body, "root:")))
            fail_msg("%s leaked a file", attempts[i]);
        tc_free(&r);
    }
    /* The module refuses unsafe relative paths by itself too. */
    static const char *const rel[] = {"../secret.txt", "/etc/passwd", "sub//index.html", "a\\b", "sub/./index.html",
                                      "escape"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        pt_response resp = pt_static_serve(&f->st, rel[i], NULL);
        assert_int_equal(resp.status, 404);
        MHD_destroy_response(resp.mhd);
    }
}

static void test_init_errors_and_types(void **state)
{
    fixture *f = *state;
    pt_static s;
    char err[256], path[160];
    assert_int_equal(pt_static_init(&s, "/nonexistent-web-dir", err, sizeof err), -1);
    assert_string_equal(err, "static directory /nonexistent-web-dir: No such file or directory");
    snprintf(path, sizeof path, "%s/secret.txt", f->top);
    assert_int_equal(pt_static_init(&s, path, err, sizeof err), -1);
    char want[256];
    snprintf(want, sizeof want, "static directory %s is not a directory", path);
    assert_string_equal(err, want);

    assert_string_equal(pt_static_content_type("A.HTML"), "text/html; charset=utf-8");
    assert_string_equal(pt_static_content_type("x/y.woff2"), "font/woff2");
    assert_string_equal(pt_static_content_type("x.svg"), "image/svg+xml");
    assert_string_equal(pt_static_content_type("noext"), "application/octet-stream");
    assert_string_equal(pt_static_content_type("dir.d/file"), "application/octet-stream");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_files_and_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_and_wrong_method, setup, teardown),
        cmocka_unit_test_setup_teardown(test_etag_not_modified, setup, teardown),
        cmocka_unit_test_setup_teardown(test_traversal_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_init_errors_and_types, setup, teardown),
    };
    return cmocka_run_group_tests_name("static", tests, tc_global_setup, tc_global_teardown);
}
