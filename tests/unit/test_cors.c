/* test_cors.c — optional CORS (server/http/cors.h): which origins a list
 * names, and on a real server without tokens (the browser checks of issue
 * 17 on): off by default changes nothing (a foreign Origin is refused, no
 * CORS header); on, a listed Origin passes the Origin check and gets its
 * headers, a preflight gets the path's methods, another Origin and a foreign
 * Host are still refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "http_test_client.h"
#include "server/http/cors.h"

static void test_origin_list(void **state)
{
    (void)state;
    assert_false(pt_cors_enabled(NULL));
    assert_false(pt_cors_enabled(""));
    assert_false(pt_cors_enabled(" , "));
    assert_true(pt_cors_enabled("https://a.example"));
    const char *list = "https://a.example, https://b.example:8443,http://c.example";
    assert_true(pt_cors_origin_allowed(list, "https://a.example"));
    assert_true(pt_cors_origin_allowed(list, "https://b.example:8443"));
    assert_true(pt_cors_origin_allowed(list, "http://c.example"));
    assert_false(pt_cors_origin_allowed(list, "https://b.example"));      /* the port is part of it */
    assert_false(pt_cors_origin_allowed(list, "http://a.example"));       /* so is the scheme */
    assert_false(pt_cors_origin_allowed(list, "https://a.example.evil"));
    assert_false(pt_cors_origin_allowed(list, "https://a"));
    assert_false(pt_cors_origin_allowed(list, ""));
    assert_false(pt_cors_origin_allowed(list, NULL));
    assert_false(pt_cors_origin_allowed(NULL, "https://a.example"));
    assert_true(pt_cors_origin_allowed("*", "https://anything.example"));
    assert_false(pt_cors_origin_allowed("*", "null"));                   /* sandboxed frames, files */
    assert_true(pt_cors_origin_allowed("*, null", "null"));
}

static pt_response h_thing(pt_request *req, void *ctx)
{
    (void)req, (void)ctx;
    return pt_response_json(200, json_pack("{s:b}", "ok", 1));
}

static int start(tc_server *s, const char *cors)
{
    memset(s, 0, sizeof(*s));
    pt_router_init(&s->router);
    char err[256];
    pt_route routes[] = {
        {"GET", "/thing", h_thing, NULL, PT_BODY_NONE, 0},
        {"POST", "/thing", h_thing, NULL, PT_BODY_JSON, 0},
    };
    for (size_t i = 0; i < 2; i++)
        if (pt_router_add(&s->router, &routes[i], err, sizeof err) != 0) return -1;
    pt_http_config cfg;
    pt_http_config_defaults(&cfg);
    cfg.threads = 1;
    cfg.same_origin_only = 1;   /* a server without tokens */
    cfg.cors_origins = cors;
    return tc_server_start(s, &cfg);
}

static void stop(tc_server *s)
{
    pt_http_close(&s->http);
    pt_router_close(&s->router);
}

/* The status, and header `name` ("" when absent) in value. */
static long call(const tc_server *s, const char *method, const char *const *headers, const char *name, char *value,
                 size_t cap)
{
    char url[128];
    tc_url(s, "/thing", url, sizeof url);
    tc_resp r;
    tc_request(method, url, headers, !strcmp(method, "POST") ? "{}" : NULL, 2, &r);
    if (tc_header(&r, name, value, cap) != 0) value[0] = '\0';
    long status = r.status;
    tc_free(&r);
    return status;
}

static void test_off_changes_nothing(void **state)
{
    (void)state;
    tc_server s;
    assert_int_equal(start(&s, NULL), 0);
    char v[256];
    const char *mine[] = {"Origin: http://127.0.0.1", NULL};
    assert_int_equal(call(&s, "GET", mine, "Vary", v, sizeof v), 200);
    assert_string_equal(v, "");
    const char *other[] = {"Origin: https://a.example", NULL};
    assert_int_equal(call(&s, "POST", other, "Access-Control-Allow-Origin", v, sizeof v), 403);
    assert_string_equal(v, "");
    const char *pre[] = {"Origin: https://a.example", "Access-Control-Request-Method: POST", NULL};
    assert_int_equal(call(&s, "OPTIONS", pre, "Access-Control-Allow-Methods", v, sizeof v), 403);
    assert_string_equal(v, "");
    stop(&s);
}

static void test_on(void **state)
{
    (void)state;
    tc_server s;
    assert_int_equal(start(&s, "https://a.example"), 0);
    char v[256];
    const char *listed[] = {"Origin: https://a.example", NULL};
    assert_int_equal(call(&s, "POST", listed, "Access-Control-Allow-Origin", v, sizeof v), 200);
    assert_string_equal(v, "https://a.example");
    assert_int_equal(call(&s, "GET", listed, "Access-Control-Expose-Headers", v, sizeof v), 200);
    assert_string_equal(v, "ETag, Location, Retry-After, Content-Disposition, Packtrain-Model");
    assert_int_equal(call(&s, "GET", listed, "Access-Control-Allow-Methods", v, sizeof v), 200);
    assert_string_equal(v, "");   /* not a preflight */
    const char *pre[] = {"Origin: https://a.example", "Access-Control-Request-Method: POST",
                         "Access-Control-Request-Headers: content-type", NULL};
    assert_int_equal(call(&s, "OPTIONS", pre, "Access-Control-Allow-Methods", v, sizeof v), 204);
    assert_non_null(strstr(v, "POST"));
    assert_non_null(strstr(v, "GET"));
    assert_int_equal(call(&s, "OPTIONS", pre, "Access-Control-Allow-Headers", v, sizeof v), 204);
    assert_string_equal(v, "Authorization, Content-Type, Idempotency-Key, If-None-Match, Last-Event-ID");
    assert_int_equal(call(&s, "OPTIONS", pre, "Access-Control-Max-Age", v, sizeof v), 204);
    assert_string_equal(v, "600");
    /* another origin: refused as before, told nothing more than Vary */
    const char *other[] = {"Origin: https://b.example", NULL};
    assert_int_equal(call(&s, "GET", other, "Access-Control-Allow-Origin", v, sizeof v), 403);
    assert_string_equal(v, "");
    assert_int_equal(call(&s, "GET", other, "Vary", v, sizeof v), 403);
    assert_string_equal(v, "Origin");
    /* a foreign Host is refused whatever the Origin (DNS rebinding) */
    const char *rebound[] = {"Host: evil.example", "Origin: https://a.example", NULL};
    assert_int_equal(call(&s, "GET", rebound, "Access-Control-Allow-Origin", v, sizeof v), 403);
    /* JSON routes still take only JSON */
    const char *form[] = {"Origin: https://a.example", "Content-Type: text/plain", NULL};
    assert_int_equal(call(&s, "POST", form, "Access-Control-Allow-Origin", v, sizeof v), 415);
    stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_origin_list),
        cmocka_unit_test(test_off_changes_nothing),
        cmocka_unit_test(test_on),
    };
    return cmocka_run_group_tests_name("cors", tests, tc_global_setup, tc_global_teardown);
}
