/* test_http.c — the HTTP server end to end: a real daemon on 127.0.0.1 with an
 * ephemeral port, driven by libcurl.  Routing (404/405/OPTIONS/HEAD), path and
 * query decoding, JSON bodies, authentication, the access log, start-up errors,
 * idle timeouts and many concurrent clients. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "http_test_client.h"

/* --- routes -------------------------------------------------------------------------- */

static pt_response h_hello(pt_request *req, void *ctx)
{
    (void)req;
    (void)ctx;
    return pt_response_json(200, json_pack("{s:s}", "hello", "world"));
}

static pt_response h_item_get(pt_request *req, void *ctx)
{
    (void)ctx;
    return pt_response_json(200, json_pack("{s:s}", "id", pt_request_param(req, "id")));
}

static pt_response h_item_post(pt_request *req, void *ctx)
{
    (void)ctx;
    return pt_response_json(201, json_pack("{s:s,s:O}", "id", pt_request_param(req, "id"), "body", req->json));
}

static pt_response h_item_delete(pt_request *req, void *ctx)
{
    (void)req;
    (void)ctx;
    return pt_response_empty(204);
}

static pt_response h_files(pt_request *req, void *ctx)
{
    (void)ctx;
    return pt_response_json(200, json_pack("{s:s}", "rest", pt_request_param(req, "rest")));
}

static pt_response h_query(pt_request *req, void *ctx)
{
    (void)ctx;
    long n = pt_request_query_long(req, "n", 5, 0, 10);
    if (req->errors.total) return pt_request_problem(req);
    json_t *o = json_object();
    for (size_t i = 0; i < req->n_query; i++)
        if (!json_object_get(o, req->query[i].name))
            json_object_set_new(o, req->query[i].name, json_string(req->query[i].value));
    json_object_set_new(o, "_n", json_integer(n));
    return pt_response_json(200, o);
}

static pt_response h_whoami(pt_request *req, void *ctx)
{
    (void)ctx;
    return pt_response_json(200, json_pack("{s:s,s:I}", "owner", req->auth.owner, "token", req->auth.token_id));
}

static pt_response h_nothing(pt_request *req, void *ctx)
{
    (void)req;
    (void)ctx;
    return (pt_response){0, NULL};
}

static pt_auth_result fake_verify(void *ctx, const char *token, pt_auth_info *out, char *why, size_t len)
{
    (void)ctx;
    if (!strncmp(token, "good-", 5)) {
        snprintf(out->owner, sizeof out->owner, "%s", token + 5);
        out->token_id = 42;
        return PT_AUTH_OK;
    }
    if (!strcmp(token, "boom")) {
        snprintf(why, len, "db down");
        return PT_AUTH_ERROR;
    }
    if (!strcmp(token, "revoked")) {
        snprintf(why, len, "token \"revoked\" on 2024-01-01");
        return PT_AUTH_DENIED;
    }
    return PT_AUTH_DENIED;
}

static void add(pt_router *r, const char *method, const char *pattern, pt_handler_fn fn, pt_body_kind body,
                unsigned flags)
{
    char err[256] = "";
    pt_route route = {method, pattern, fn, NULL, body, flags};
    if (pt_router_add(r, &route, err, sizeof err) != 0) fail_msg("%s", err);
}

typedef struct fixture {
    tc_server srv;
    FILE *log;
} fixture;

static int start(void **state, int auth, size_t json_max, FILE *log)
{
    fixture *f = calloc(1, sizeof(*f));
    pt_router_init(&f->srv.router);
    add(&f->srv.router, "GET", "/hello", h_hello, PT_BODY_NONE, 0);
    add(&f->srv.router, "GET", "/items/{id}", h_item_get, PT_BODY_NONE, 0);
    add(&f->srv.router, "POST", "/items/{id}", h_item_post, PT_BODY_JSON, 0);
    add(&f->srv.router, "DELETE", "/items/{id}", h_item_delete, PT_BODY_NONE, 0);
    add(&f->srv.router, "GET", "/files/{rest...}", h_files, PT_BODY_NONE, 0);
    add(&f->srv.router, "GET", "/query", h_query, PT_BODY_NONE, 0);
    add(&f->srv.router, "GET", "/whoami", h_whoami, PT_BODY_NONE, 0);
    add(&f->srv.router, "POST", "/whoami", h_whoami, PT_BODY_NONE, 0);
    add(&f->srv.router, "GET", "/healthz", h_hello, PT_BODY_NONE, PT_ROUTE_PUBLIC);
    add(&f->srv.router, "GET", "/nothing", h_nothing, PT_BODY_NONE, 0);
    if (auth) pt_router_set_auth(&f->srv.router, fake_verify, NULL);
    pt_http_config cfg;
    pt_http_config_defaults(&cfg);
    cfg.json_max = json_max;
    cfg.threads = 4;
    cfg.access_log = log;
    f->log = log;
    if (tc_server_start(&f->srv, &cfg) != 0) return -1;
    *state = f;
    return 0;
}

static int setup_plain(void **state) { return start(state, 0, 1 << 20, NULL); }
static int setup_auth(void **state) { return start(state, 1, 1 << 20, NULL); }
static int setup_small_json(void **state) { return start(state, 0, 1024, NULL); }
static int setup_logged(void **state) { return start(state, 0, 1 << 20, tmpfile()); }

static int teardown(void **state)
{
    fixture *f = *state;
    pt_http_close(&f->srv.http);
    pt_router_close(&f->srv.router);
    if (f->log) fclose(f->log);
    free(f);
    return 0;
}

static tc_resp call(fixture *f, const char *method, const char *path, const char *const *headers,
                    const char *body)
{
    char url[512];
    tc_url(&f->srv, path, url, sizeof url);
    tc_resp r;
    tc_request(method, url, headers, body, body ? strlen(body) : 0, &r);
    assert_int_equal(r.rc, CURLE_OK);
    return r;
}

/* Asserts an RFC 9457 document with this status and a detail containing `needle`. */
static json_t *expect_problem(const tc_resp *r, int status, const char *needle)
{
    char ct[128] = "";
    assert_int_equal(r->status, status);
    assert_int_equal(tc_header(r, "Content-Type", ct, sizeof ct), 0);
    assert_string_equal(ct, "application/problem+json");
    json_t *p = tc_json(r);
    assert_non_null(p);
    assert_string_equal(json_string_value(json_object_get(p, "type")), "about:blank");
    assert_string_equal(json_string_value(json_object_get(p, "title")), pt_status_title(status));
    assert_int_equal(json_integer_value(json_object_get(p, "status")), status);
    const char *detail = json_string_value(json_object_get(p, "detail"));
    assert_non_null(detail);
    if (!strstr(detail, needle)) fail_msg("detail '%s' lacks '%s'", detail, needle);
    return p;
}

/* --- routing --------------------------------------------------------------------------- */

static void test_routes_found(void **state)
{
    fixture *f = *state;
    tc_resp r = call(f, "GET", "/hello", NULL, NULL);
    assert_int_equal(r.status, 200);
    char ct[64];
    tc_header(&r, "Content-Type", ct, sizeof ct);
    assert_string_equal(ct, "application/json");
    assert_string_equal(r.body, "{\"hello\":\"world\"}\n");
    tc_free(&r);

    r = call(f, "HEAD", "/hello", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.len, 0);
    tc_free(&r);

    r = call(f, "DELETE", "/items/7", NULL, NULL);
    assert_int_equal(r.status, 204);
    tc_free(&r);
}

static void test_not_found_and_method_not_allowed(void **state)
{
    fixture *f = *state;
    tc_resp r = call(f, "GET", "/nope", NULL, NULL);
    json_decref(expect_problem(&r, 404, "there is no resource at '/nope'"));
    tc_free(&r);

    r = call(f, "PUT", "/items/1", NULL, NULL);
    json_decref(expect_problem(&r, 405, "PUT is not allowed on '/items/1'; allowed: GET, HEAD, POST, DELETE"));
    char allow[128];
    assert_int_equal(tc_header(&r, "Allow", allow, sizeof allow), 0);
    assert_string_equal(allow, "GET, HEAD, POST, DELETE");
    tc_free(&r);

    r = call(f, "OPTIONS", "/items/1", NULL, NULL);
    assert_int_equal(r.status, 204);
    assert_int_equal(tc_header(&r, "Allow", allow, sizeof allow), 0);
    assert_string_equal(allow, "GET, HEAD, POST, DELETE");
    tc_free(&r);

    /* A trailing slash is a different resource. */
    r = call(f, "GET", "/hello/", NULL, NULL);
    assert_int_equal(r.status, 404);
    tc_free(&r);
}

static void test_path_params_decoded(void **state)
{
    fixture *f = *state;
    tc_resp r = call(f, "GET", "/items/abc%2Fdef", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"id\":\"abc/def\"}\n");
    tc_free(&r);

    r = call(f, "GET", "/items/%E2%9C%93%20x", NULL, NULL);
    json_t *j = tc_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "id")), "\xE2\x9C\x93 x");
    json_decref(j);
    tc_free(&r);

    r = call(f, "GET", "/files/a/b%20c/d.txt", NULL, NULL);
    assert_string_equal(r.body, "{\"rest\":\"a/b c/d.txt\"}\n");
    tc_free(&r);

    r = call(f, "GET", "/items/%zz", NULL, NULL);
    json_decref(expect_problem(&r, 400, "malformed percent-encoding in path '/items/%zz'"));
    tc_free(&r);

    r = call(f, "GET", "/items/%00", NULL, NULL);
    json_decref(expect_problem(&r, 400, "malformed percent-encoding"));
    tc_free(&r);

    r = call(f, "GET", "/items/..", NULL, NULL);
    json_decref(expect_problem(&r, 400, "contains a '.' or '..' segment"));
    tc_free(&r);

    r = call(f, "GET", "/files/%2e%2e/etc", NULL, NULL);
    json_decref(expect_problem(&r, 400, "contains a '.' or '..' segment"));
    tc_free(&r);
}

static void test_query_decoded(void **state)
{
    fixture *f = *state;
    tc_resp r = call(f, "GET", "/query?a=1&b=hello+world&c=%26%3D%2B&d&&a=2&n=7", NULL, NULL);
    assert_int_equal(r.status, 200);
    json_t *j = tc_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "a")), "1");
    assert_string_equal(json_string_value(json_object_get(j, "b")), "hello world");
    assert_string_equal(json_string_value(json_object_get(j, "c")), "&=+");
    assert_string_equal(json_string_value(json_object_get(j, "d")), "");
    assert_int_equal(json_integer_value(json_object_get(j, "_n")), 7);
    json_decref(j);
    tc_free(&r);

    r = call(f, "GET", "/query?x=%G1", NULL, NULL);
    json_decref(expect_problem(&r, 400, "malformed percent-encoding in query parameter 'x'"));
    tc_free(&r);

    r = call(f, "GET", "/query?n=abc", NULL, NULL);
    json_t *p = expect_problem(&r, 400, "1 invalid request parameter");
    json_t *e = json_array_get(json_object_get(p, "errors"), 0);
    assert_string_equal(json_string_value(json_object_get(e, "field")), "query.n");
    assert_string_equal(json_string_value(json_object_get(e, "message")), "'abc' is not an integer");
    json_decref(p);
    tc_free(&r);

    r = call(f, "GET", "/query?n=99", NULL, NULL);
    p = expect_problem(&r, 400, "invalid request parameter");
    e = json_array_get(json_object_get(p, "errors"), 0);
    assert_string_equal(json_string_value(json_object_get(e, "message")), "99 is out of range [0, 10]");
    json_decref(p);
    tc_free(&r);
}

/* --- JSON bodies -------------------------------------------------------------------------- */

static void test_json_body(void **state)
{
    fixture *f = *state;
    tc_resp r = call(f, "POST", "/items/9", NULL, "{\"a\": [1, 2]}");
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, "{\"id\":\"9\",\"body\":{\"a\":[1,2]}}\n");
    tc_free(&r);

    r = call(f, "POST", "/items/9", NULL, "{\n  \"a\": 1,\n  \"b\": ]\n}");
    json_t *p = expect_problem(&r, 400, "the request body is not valid JSON");
    json_t *e = json_array_get(json_object_get(p, "errors"), 0);
    assert_int_equal(json_integer_value(json_object_get(e, "line")), 3);
    assert_string_equal(json_string_value(json_object_get(e, "field")), "body");
    assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "invalid JSON at column"));
    json_decref(p);
    tc_free(&r);

    r = call(f, "POST", "/items/9", NULL, "{\"a\":1,\"a\":2}");
    p = expect_problem(&r, 400, "not valid JSON");
    e = json_array_get(json_object_get(p, "errors"), 0);
    assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "duplicate object key"));
    json_decref(p);
    tc_free(&r);

    r = call(f, "POST", "/items/9", NULL, "");
    p = expect_problem(&r, 400, "not valid JSON");
    e = json_array_get(json_object_get(p, "errors"), 0);
    assert_string_equal(json_string_value(json_object_get(e, "message")),
                        "the request body is empty; expected a JSON document");
    json_decref(p);
    tc_free(&r);
}

static void test_json_body_too_large(void **state)
{
    fixture *f = *state;
    char *big = malloc(5001);
    memset(big, ' ', 5000);
    big[0] = '[';
    big[4999] = ']';
    big[5000] = '\0';
    /* Declared length over the limit: refused before the body is read. */
    const char *expect[] = {"Expect: 100-continue", NULL};
    tc_resp r = call(f, "POST", "/items/1", expect, big);
    json_decref(expect_problem(&r, 413, "the request body is larger than the limit of 1024 bytes"));
    assert_string_equal(pt_status_title(413), "Content Too Large");
    tc_free(&r);
    /* A stray body on a route that takes none is bounded by the same limit. */
    r = call(f, "POST", "/whoami", expect, big);
    json_decref(expect_problem(&r, 413, "larger than the limit of 1024 bytes"));
    tc_free(&r);
    free(big);
    /* Within the limit still works on the same server. */
    r = call(f, "POST", "/items/1", NULL, "[1]");
    assert_int_equal(r.status, 201);
    tc_free(&r);
}

static void test_handler_without_response(void **state)
{
    fixture *f = *state;
    tc_resp r = call(f, "GET", "/nothing", NULL, NULL);
    json_decref(expect_problem(&r, 500, "the handler returned no response"));
    tc_free(&r);
}

/* --- authentication ------------------------------------------------------------------------- */

static void test_auth_missing_token(void **state)
{
    fixture *f = *state;
    tc_resp r = call(f, "GET", "/whoami", NULL, NULL);
    json_decref(expect_problem(&r, 401, "authentication required: send 'Authorization: Bearer <token>'"));
    char wa[256];
    assert_int_equal(tc_header(&r, "WWW-Authenticate", wa, sizeof wa), 0);
    assert_string_equal(wa, "Bearer realm=\"packtrain\"");
    tc_free(&r);

    /* Public routes need no token. */
    r = call(f, "GET", "/healthz", NULL, NULL);
    assert_int_equal(r.status, 200);
    tc_free(&r);
}

static void test_auth_bad_tokens(void **state)
{
    fixture *f = *state;
    const char *basic[] = {"Authorization: Basic dXNlcjpwdw==", NULL};
    tc_resp r = call(f, "GET", "/whoami", basic, NULL);
    json_decref(expect_problem(&r, 401, "the Authorization header is not a bearer token"));
    char wa[256];
    tc_header(&r, "WWW-Authenticate", wa, sizeof wa);
    assert_non_null(strstr(wa, "error=\"invalid_request\""));
    tc_free(&r);

    const char *revoked[] = {"Authorization: Bearer revoked", NULL};
    r = call(f, "GET", "/whoami", revoked, NULL);
    json_decref(expect_problem(&r, 401, "token \"revoked\" on 2024-01-01"));
    tc_header(&r, "WWW-Authenticate", wa, sizeof wa);
    assert_string_equal(wa, "Bearer realm=\"packtrain\", error=\"invalid_token\", "
                            "error_description=\"token 'revoked' on 2024-01-01\"");
    tc_free(&r);

    const char *unknown[] = {"Authorization: Bearer nobody", NULL};
    r = call(f, "GET", "/whoami", unknown, NULL);
    json_decref(expect_problem(&r, 401, "the token is not valid"));
    tc_free(&r);

    const char *boom[] = {"Authorization: Bearer boom", NULL};
    r = call(f, "GET", "/whoami", boom, NULL);
    json_decref(expect_problem(&r, 500, "cannot verify the token: db down"));
    tc_free(&r);

    /* The query token is for GET only (EventSource); POST must use the header. */
    r = call(f, "POST", "/whoami?access_token=good-alice", NULL, "");
    json_decref(expect_problem(&r, 401, "authentication required"));
    tc_free(&r);
}

static void test_auth_good_token(void **state)
{
    fixture *f = *state;
    const char *good[] = {"Authorization: bearer   good-alice ", NULL};
    tc_resp r = call(f, "GET", "/whoami", good, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"owner\":\"alice\",\"token\":42}\n");
    tc_free(&r);

    r = call(f, "GET", "/whoami?access_token=good-bob", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"owner\":\"bob\",\"token\":42}\n");
    tc_free(&r);
}

/* --- access log --------------------------------------------------------------------------------- */

static void test_access_log(void **state)
{
    fixture *f = *state;
    tc_resp r = call(f, "GET", "/items/5?access_token=sekrit&x=1", NULL, NULL);
    tc_free(&r);
    r = call(f, "GET", "/nope", NULL, NULL);
    tc_free(&r);
    /* A line is written by the completion callback, which may run just after
     * the client has the response; the two requests may run on different
     * worker threads, so under load the second one's line can come first.
     * Wait for both (up to 30 s), then check them and that there is nothing
     * else. */
    char text[4096] = "";
    for (int tries = 0; tries < 3000; tries++) {
        fflush(f->log);
        rewind(f->log);
        size_t n = fread(text, 1, sizeof text - 1, f->log);
        text[n] = '\0';
        if (strstr(text, "/nope") && strstr(text, "/items/5")) break;
        usleep(10000);
    }
    assert_non_null(strstr(text, " 127.0.0.1 \"GET /items/5?access_token=-&x=1\" 200 "));
    assert_non_null(strstr(text, "route=/items/{id} owner=-\n"));
    assert_non_null(strstr(text, "\"GET /nope\" 404 "));
    assert_null(strstr(text, "sekrit"));
    int lines = 0;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    if (lines != 2) fail_msg("log:\n%s", text);
}

/* --- concurrency ---------------------------------------------------------------------------------- */

typedef struct worker {
    const fixture *f;
    int id, ok, failed;
} worker;

static void *client_thread(void *arg)
{
    worker *w = arg;
    CURL *c = curl_easy_init();   /* one handle per thread: keep-alive reuse */
    for (int i = 0; i < 20; i++) {
        char url[256], want[128];
        tc_resp r;
        if (i % 2 == 0) {
            snprintf(url, sizeof url, "%s/items/t%d-%d", w->f->srv.base, w->id, i);
            snprintf(want, sizeof want, "{\"id\":\"t%d-%d\"}\n", w->id, i);
            curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
            tc_perform(c, "GET", url, NULL, &r);
        } else {
            char body[64];
            snprintf(url, sizeof url, "%s/items/p%d", w->f->srv.base, w->id);
            snprintf(body, sizeof body, "{\"i\":%d}", i);
            snprintf(want, sizeof want, "{\"id\":\"p%d\",\"body\":{\"i\":%d}}\n", w->id, i);
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
            static const char *const json[] = {"Content-Type: application/json", NULL};
            tc_perform(c, "POST", url, json, &r);
        }
        if (r.rc == CURLE_OK && (r.status == 200 || r.status == 201) && r.body && !strcmp(r.body, want)) w->ok++;
        else w->failed++;
        tc_free(&r);
    }
    curl_easy_cleanup(c);
    return NULL;
}

static void test_concurrent_clients(void **state)
{
    fixture *f = *state;
    enum { N = 50 };
    pthread_t threads[N];
    worker workers[N];
    for (int i = 0; i < N; i++) {
        workers[i] = (worker){f, i, 0, 0};
        assert_int_equal(pthread_create(&threads[i], NULL, client_thread, &workers[i]), 0);
    }
    int ok = 0, failed = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(threads[i], NULL);
        ok += workers[i].ok;
        failed += workers[i].failed;
    }
    assert_int_equal(failed, 0);
    assert_int_equal(ok, N * 20);
}

/* --- the daemon itself ------------------------------------------------------------------------------ */

static void test_idle_connection_closed(void **state)
{
    (void)state;
    tc_server s;
    pt_router_init(&s.router);
    pt_http_config cfg;
    pt_http_config_defaults(&cfg);
    cfg.idle_timeout_s = 1;
    assert_int_equal(tc_server_start(&s, &cfg), 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)pt_http_port(&s.http))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[16];
    /* 0 means the server closed the silent connection; -1 would be our own timeout. */
    assert_int_equal(recv(fd, buf, sizeof buf, 0), 0);
    close(fd);
    pt_http_close(&s.http);
    pt_router_close(&s.router);
}

static void test_start_errors(void **state)
{
    fixture *f = *state;
    pt_router r;
    pt_router_init(&r);
    pt_http h;
    pt_http_config cfg;
    char err[256], want[128];
    pt_http_config_defaults(&cfg);
    /* a busy port is said in those words, with the way out */
    cfg.port = pt_http_port(&f->srv.http);
    assert_int_equal(pt_http_init(&h, &cfg, &r, err, sizeof err), -1);
    snprintf(want, sizeof want, "port %u on 127.0.0.1 is already in use ", cfg.port);
    if (strncmp(err, want, strlen(want)) != 0) fail_msg("got '%s'", err);
    assert_non_null(strstr(err, "choose another port with --port N or PACKTRAIN_PORT=N"));

    /* any other refusal carries libmicrohttpd's reason: an address that is
     * not this machine's (TEST-NET-1, RFC 5737) */
    cfg.port = 1;
    cfg.bind_address = "192.0.2.1";
    assert_int_equal(pt_http_init(&h, &cfg, &r, err, sizeof err), -1);
    snprintf(want, sizeof want, "cannot start the HTTP server on 192.0.2.1 port 1: ");
    if (strncmp(err, want, strlen(want)) != 0) fail_msg("got '%s'", err);
    assert_true(strlen(err) > strlen(want));   /* libmicrohttpd's reason follows */
    cfg.bind_address = "127.0.0.1";

    cfg.port = 70000;
    assert_int_equal(pt_http_init(&h, &cfg, &r, err, sizeof err), -1);
    assert_string_equal(err, "port 70000 is out of range (0-65535)");

    cfg.port = 0;
    cfg.bind_address = "no-such-host.invalid";
    assert_int_equal(pt_http_init(&h, &cfg, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot resolve bind address 'no-such-host.invalid': "));
    pt_http_close(&h);   /* harmless after a failed init */
    pt_router_close(&r);
}

static void test_oversized_headers(void **state)
{
    fixture *f = *state;
    char *h = malloc(70000);
    strcpy(h, "X-Big: ");
    memset(h + 7, 'a', 69990);
    h[69997] = '\0';
    const char *headers[] = {h, NULL};
    char url[256];
    tc_url(&f->srv, "/hello", url, sizeof url);
    tc_resp r;
    tc_request("GET", url, headers, NULL, 0, &r);
    /* libmicrohttpd answers this itself; the point is a clean refusal (and,
     * under ASan, no leaked request state). */
    assert_true(r.rc != CURLE_OK || r.status == 431 || r.status == 413);
    tc_free(&r);
    free(h);
    r = call(f, "GET", "/hello", NULL, NULL);
    assert_int_equal(r.status, 200);
    tc_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_routes_found, setup_plain, teardown),
        cmocka_unit_test_setup_teardown(test_not_found_and_method_not_allowed, setup_plain, teardown),
        cmocka_unit_test_setup_teardown(test_path_params_decoded, setup_plain, teardown),
        cmocka_unit_test_setup_teardown(test_query_decoded, setup_plain, teardown),
        cmocka_unit_test_setup_teardown(test_json_body, setup_plain, teardown),
        cmocka_unit_test_setup_teardown(test_json_body_too_large, setup_small_json, teardown),
        cmocka_unit_test_setup_teardown(test_handler_without_response, setup_plain, teardown),
        cmocka_unit_test_setup_teardown(test_auth_missing_token, setup_auth, teardown),
        cmocka_unit_test_setup_teardown(test_auth_bad_tokens, setup_auth, teardown),
        cmocka_unit_test_setup_teardown(test_auth_good_token, setup_auth, teardown),
        cmocka_unit_test_setup_teardown(test_access_log, setup_logged, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_clients, setup_plain, teardown),
        cmocka_unit_test(test_idle_connection_closed),
        cmocka_unit_test_setup_teardown(test_start_errors, setup_plain, teardown),
        cmocka_unit_test_setup_teardown(test_oversized_headers, setup_plain, teardown),
    };
    return cmocka_run_group_tests_name("http", tests, tc_global_setup, tc_global_teardown);
}
