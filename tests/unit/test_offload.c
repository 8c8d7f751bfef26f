/* test_offload.c — heavy routes off the HTTP threads (server/http/offload.h),
 * against a real server: a full pool and queue answer 503 + Retry-After at
 * once while cheap routes keep answering on the only HTTP thread; work is
 * given up when its client leaves, past its deadline, and when the server
 * stops (queued work at once, running work at the stop's deadline), each
 * answered 503 rather than dropped.
 *
 * Issue 17 F2 (packing calls held the HTTP threads, /healthz froze, no
 * 503 anywhere), F7 (predict went on after its client left) and F11 (a
 * stop waited 25.8 s for a predict, then dropped its answer). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "http_test_client.h"

/* The heavy handler: works (sleeps) until released or given up. */
static atomic_int g_release, g_reason, g_started;

static pt_response h_heavy(pt_request *req, void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&g_started, 1);
    for (;;) {
        pt_cancel_reason why = pt_request_cancelled(req);
        if (why != PT_CANCEL_NONE) {
            atomic_store(&g_reason, (int)why);
            return pt_request_cancelled_response(req);
        }
        if (atomic_load(&g_release)) return pt_response_json(200, json_pack("{s:s}", "done", "yes"));
        usleep(5000);
    }
}

static pt_response h_ping(pt_request *req, void *ctx)
{
    (void)req;
    (void)ctx;
    return pt_response_json(200, json_pack("{s:b}", "pong", 1));
}

static int start(void **state, unsigned heavy_threads, unsigned queue, unsigned deadline_s, unsigned grace_ms)
{
    atomic_store(&g_release, 0);
    atomic_store(&g_reason, 0);
    atomic_store(&g_started, 0);
    tc_server *s = calloc(1, sizeof(*s));
    pt_router_init(&s->router);
    char err[256];
    pt_route routes[] = {
        {"GET", "/heavy", h_heavy, NULL, PT_BODY_NONE, PT_ROUTE_HEAVY},
        {"GET", "/ping", h_ping, NULL, PT_BODY_NONE, 0},
    };
    for (size_t i = 0; i < 2; i++)
        if (pt_router_add(&s->router, &routes[i], err, sizeof err) != 0) return -1;
    pt_http_config cfg;
    pt_http_config_defaults(&cfg);
    cfg.threads = 1;   /* one HTTP thread: a heavy handler on it would hold every request */
    cfg.heavy_threads = heavy_threads;
    cfg.heavy_queue = queue;
    cfg.heavy_deadline_s = deadline_s;
    cfg.stop_grace_ms = grace_ms;
    *state = s;
    return tc_server_start(s, &cfg);
}

static int setup_pool(void **state) { return start(state, 1, 1, 0, 5000); }
static int setup_deadline(void **state) { return start(state, 1, 0, 1, 5000); }
static int setup_stop(void **state) { return start(state, 1, 1, 0, 300); }

static int teardown(void **state)
{
    tc_server *s = *state;
    atomic_store(&g_release, 1);
    if (s->http.daemon) pt_http_close(&s->http);
    pt_router_close(&s->router);
    free(s);
    return 0;
}

typedef struct client {
    pthread_t thread;
    char url[256];
    long timeout_ms;
    tc_resp r;
} client;

static void *client_main(void *arg)
{
    client *c = arg;
    CURL *h = curl_easy_init();
    if (c->timeout_ms) {   /* a client that gives up: tc_perform would set its own timeout */
        memset(&c->r, 0, sizeof c->r);
        curl_easy_setopt(h, CURLOPT_URL, c->url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, tc_on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &c->r);
        c->r.rc = curl_easy_perform(h);
    } else {
        tc_perform(h, "GET", c->url, NULL, &c->r);
    }
    curl_easy_cleanup(h);
    return NULL;
}

static void client_start(client *c, tc_server *s, const char *path, long timeout_ms)
{
    memset(c, 0, sizeof(*c));
    tc_url(s, path, c->url, sizeof c->url);
    c->timeout_ms = timeout_ms;
    assert_int_equal(pthread_create(&c->thread, NULL, client_main, c), 0);
}

/* Until the heavy handler has started n times (a request counted by
 * wait_busy may still sit in the queue: the worker thread picks it up when
 * it is scheduled, which under load can take a while); fails after 5 s. */
static void wait_started(int n)
{
    for (int i = 0; i < 1000 && atomic_load(&g_started) != n; i++) usleep(5000);
    assert_int_equal(atomic_load(&g_started), n);
}

/* Until the pool holds n requests (running or queued); fails after 5 s. */
static void wait_busy(tc_server *s, unsigned n)
{
    for (int i = 0; i < 1000 && pt_offload_busy(&s->http.offload) != n; i++) usleep(5000);
    assert_int_equal(pt_offload_busy(&s->http.offload), n);
}

static void expect_503(tc_resp *r, const char *detail_prefix)
{
    assert_int_equal(r->status, 503);
    char retry[16];
    assert_int_equal(tc_header(r, "Retry-After", retry, sizeof retry), 0);
    assert_string_equal(retry, "5");
    json_t *j = tc_json(r);
    const char *detail = json_string_value(json_object_get(j, "detail"));
    if (!detail || strncmp(detail, detail_prefix, strlen(detail_prefix)) != 0)
        fail_msg("detail '%s' does not start with '%s'", detail ? detail : "(none)", detail_prefix);
    json_decref(j);
}

static void test_full_pool_refuses_and_cheap_routes_answer(void **state)
{
    tc_server *s = *state;
    client a, b;
    client_start(&a, s, "/heavy", 0);
    wait_busy(s, 1);
    wait_started(1);
    client_start(&b, s, "/heavy", 0);
    wait_busy(s, 2);   /* one running, one queued: the pool (1) and its queue (1) are full */
    char url[256];
    tc_url(s, "/heavy", url, sizeof url);
    tc_resp r;
    tc_get(url, &r);
    expect_503(&r, "the server is busy with as many uploads, packing reports and predictions");
    tc_free(&r);
    /* the only HTTP thread is free: a cheap route answers meanwhile */
    tc_url(s, "/ping", url, sizeof url);
    for (int i = 0; i < 3; i++) {
        tc_get(url, &r);
        assert_int_equal(r.status, 200);
        tc_free(&r);
    }
    assert_int_equal(atomic_load(&g_started), 1);   /* the second still waits its turn */
    atomic_store(&g_release, 1);
    pthread_join(a.thread, NULL);
    pthread_join(b.thread, NULL);
    assert_int_equal(a.r.status, 200);
    assert_int_equal(b.r.status, 200);
    assert_int_equal(atomic_load(&g_started), 2);
    tc_free(&a.r);
    tc_free(&b.r);
    wait_busy(s, 0);
}

static void test_client_gone_cancels(void **state)
{
    tc_server *s = *state;
    client a;
    client_start(&a, s, "/heavy", 300);   /* the client gives up after 0.3 s */
    pthread_join(a.thread, NULL);
    assert_int_equal(a.r.rc, CURLE_OPERATION_TIMEDOUT);
    tc_free(&a.r);
    wait_busy(s, 0);   /* never released: only the cancellation ends it */
    assert_int_equal(atomic_load(&g_reason), PT_CANCEL_CLIENT_GONE);
}

static void test_deadline(void **state)
{
    tc_server *s = *state;
    char url[256];
    tc_url(s, "/heavy", url, sizeof url);
    tc_resp r;
    tc_get(url, &r);
    expect_503(&r, "the request was given up after 1 s, this server's limit on the work of one request");
    tc_free(&r);
    assert_int_equal(atomic_load(&g_reason), PT_CANCEL_DEADLINE);
}

static void test_stop_answers_running_and_queued(void **state)
{
    tc_server *s = *state;
    client a, b;
    client_start(&a, s, "/heavy", 0);
    wait_busy(s, 1);
    wait_started(1);   /* a runs (not merely queued), so the stop must cancel it */
    client_start(&b, s, "/heavy", 0);
    wait_busy(s, 2);
    pt_http_close(&s->http);   /* grace 0.3 s; the running work never ends by itself */
    pthread_join(a.thread, NULL);
    pthread_join(b.thread, NULL);
    expect_503(&a.r, "the server is stopping");
    expect_503(&b.r, "the server is stopping");
    assert_int_equal(atomic_load(&g_reason), PT_CANCEL_STOPPING);
    assert_int_equal(atomic_load(&g_started), 1);   /* the queued one never ran */
    tc_free(&a.r);
    tc_free(&b.r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_full_pool_refuses_and_cheap_routes_answer, setup_pool, teardown),
        cmocka_unit_test_setup_teardown(test_client_gone_cancels, setup_pool, teardown),
        cmocka_unit_test_setup_teardown(test_deadline, setup_deadline, teardown),
        cmocka_unit_test_setup_teardown(test_stop_answers_running_and_queued, setup_stop, teardown),
    };
    return cmocka_run_group_tests_name("offload", tests, tc_global_setup, tc_global_teardown);
}
