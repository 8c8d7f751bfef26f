/* test_longpoll.c — the wait-for-change primitive (pt_watch, pt_waitset) and
 * long-poll requests on a real server: woken by a change, timed out otherwise,
 * parked without holding worker threads, bounded by the connection limit, and
 * answered when the server shuts down. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <unistd.h>

#include "http_test_client.h"

static pt_watch watch;
static int resource;         /* what /poll-resource reports; changes only sometimes */
static int handler_calls;    /* calls of /poll-resource, for the re-wait test */

/* GET /poll?since=V&wait=MS: returns once the version differs from V. */
static pt_response h_poll(pt_request *req, void *ctx)
{
    (void)ctx;
    uint64_t v = pt_watch_version(&watch);
    long since = pt_request_query_long(req, "since", 0, 0, 1000000);
    long wait = pt_request_query_long(req, "wait", 0, 0, 60000);
    if (req->errors.total) return pt_request_problem(req);
    if (wait > 0 && v == (uint64_t)since && !pt_request_wait_expired(req))
        return pt_request_wait(req, &watch, v, (int)wait);
    return pt_response_json(200, json_pack("{s:I,s:b}", "version", (json_int_t)v, "expired",
                                           pt_request_wait_expired(req)));
}

/* Waits on the shared watch but answers only when `resource` moved: a bump
 * for something else sends it back to wait with the same deadline. */
static pt_response h_poll_resource(pt_request *req, void *ctx)
{
    (void)ctx;
    __atomic_add_fetch(&handler_calls, 1, __ATOMIC_SEQ_CST);
    uint64_t v = pt_watch_version(&watch);
    int now = __atomic_load_n(&resource, __ATOMIC_SEQ_CST);
    if (now == 0 && !pt_request_wait_expired(req)) return pt_request_wait(req, &watch, v, 20000);
    return pt_response_json(200, json_pack("{s:i,s:b}", "resource", now, "expired", pt_request_wait_expired(req)));
}

/* A broken handler that waits forever. */
static pt_response h_always_wait(pt_request *req, void *ctx)
{
    (void)ctx;
    return pt_request_wait(req, &watch, pt_watch_version(&watch), 50);
}

static pt_response h_hello(pt_request *req, void *ctx)
{
    (void)req;
    (void)ctx;
    return pt_response_json(200, json_pack("{s:s}", "hello", "world"));
}

static int start_server(tc_server *s, unsigned threads, unsigned max_connections)
{
    pt_watch_init(&watch);
    resource = 0;
    handler_calls = 0;
    pt_router_init(&s->router);
    char err[256];
    pt_route routes[] = {
        {"GET", "/poll", h_poll, NULL, PT_BODY_NONE, 0},
        {"GET", "/poll-resource", h_poll_resource, NULL, PT_BODY_NONE, 0},
        {"GET", "/hello", h_hello, NULL, PT_BODY_NONE, 0},
        {"GET", "/always-wait", h_always_wait, NULL, PT_BODY_NONE, 0},
    };
    for (size_t i = 0; i < 4; i++)
        if (pt_router_add(&s->router, &routes[i], err, sizeof err) != 0) return -1;
    pt_http_config cfg;
    pt_http_config_defaults(&cfg);
    cfg.threads = threads;
    cfg.max_connections = max_connections;
    return tc_server_start(s, &cfg);
}

static int setup(void **state)
{
    tc_server *s = calloc(1, sizeof(*s));
    *state = s;
    return start_server(s, 2, 64);
}

static int teardown(void **state)
{
    tc_server *s = *state;
    pt_http_close(&s->http);
    pt_router_close(&s->router);
    pt_watch_close(&watch);
    free(s);
    return 0;
}

typedef struct poller {
    char url[256];
    tc_resp r;
    pthread_t thread;
} poller;

static void *poll_thread(void *arg)
{
    poller *p = arg;
    tc_get(p->url, &p->r);
    return NULL;
}

static void poll_start(poller *p, const tc_server *s, const char *path)
{
    tc_url(s, path, p->url, sizeof p->url);
    assert_int_equal(pthread_create(&p->thread, NULL, poll_thread, p), 0);
}

/* Waits (bounded) until `n` requests are parked on the server. */
static void wait_parked(tc_server *s, size_t n)
{
    for (int i = 0; i < 2000 && pt_waitset_count(&s->http.waitset) != n; i++) usleep(5000);
    assert_int_equal(pt_waitset_count(&s->http.waitset), n);
}

static json_t *poll_finish(poller *p)
{
    pthread_join(p->thread, NULL);
    assert_int_equal(p->r.rc, CURLE_OK);
    assert_int_equal(p->r.status, 200);
    json_t *j = tc_json(&p->r);
    tc_free(&p->r);
    return j;
}

/* --- long-poll over HTTP ---------------------------------------------------------------- */

static void test_wakes_on_change(void **state)
{
    tc_server *s = *state;
    poller p;
    poll_start(&p, s, "/poll?since=0&wait=20000");
    wait_parked(s, 1);
    pt_watch_bump(&watch);
    json_t *j = poll_finish(&p);
    assert_int_equal(json_integer_value(json_object_get(j, "version")), 1);
    assert_false(json_is_true(json_object_get(j, "expired")));   /* woken, not timed out */
    json_decref(j);
    assert_int_equal(pt_waitset_count(&s->http.waitset), 0);
}

static void test_times_out_without_change(void **state)
{
    tc_server *s = *state;
    poller p;
    poll_start(&p, s, "/poll?since=0&wait=200");
    json_t *j = poll_finish(&p);
    assert_int_equal(json_integer_value(json_object_get(j, "version")), 0);
    assert_true(json_is_true(json_object_get(j, "expired")));
    json_decref(j);
}

static void test_no_wait_when_already_changed(void **state)
{
    tc_server *s = *state;
    pt_watch_bump(&watch);
    pt_watch_bump(&watch);
    poller p;
    poll_start(&p, s, "/poll?since=1&wait=20000");
    json_t *j = poll_finish(&p);
    assert_int_equal(json_integer_value(json_object_get(j, "version")), 2);
    assert_false(json_is_true(json_object_get(j, "expired")));
    json_decref(j);
}

static void test_rewait_keeps_deadline(void **state)
{
    tc_server *s = *state;
    poller p;
    poll_start(&p, s, "/poll-resource");
    wait_parked(s, 1);
    pt_watch_bump(&watch);   /* something else changed: the handler waits again */
    for (int i = 0; i < 2000 && __atomic_load_n(&handler_calls, __ATOMIC_SEQ_CST) < 2; i++) usleep(5000);
    wait_parked(s, 1);
    __atomic_store_n(&resource, 7, __ATOMIC_SEQ_CST);
    pt_watch_bump(&watch);
    json_t *j = poll_finish(&p);
    assert_int_equal(json_integer_value(json_object_get(j, "resource")), 7);
    assert_false(json_is_true(json_object_get(j, "expired")));
    assert_int_equal(__atomic_load_n(&handler_calls, __ATOMIC_SEQ_CST), 3);
    json_decref(j);
}

static void test_parked_requests_hold_no_thread(void **state)
{
    tc_server *s = *state;   /* two worker threads */
    enum { N = 8 };
    poller p[N];
    for (int i = 0; i < N; i++) poll_start(&p[i], s, "/poll?since=0&wait=20000");
    wait_parked(s, N);
    char url[256];
    tc_url(s, "/hello", url, sizeof url);
    tc_resp r;
    tc_get(url, &r);
    assert_int_equal(r.status, 200);
    tc_free(&r);
    pt_watch_bump(&watch);
    for (int i = 0; i < N; i++) {
        json_t *j = poll_finish(&p[i]);
        assert_false(json_is_true(json_object_get(j, "expired")));
        json_decref(j);
    }
}

static void test_handler_that_never_stops_waiting(void **state)
{
    tc_server *s = *state;
    char url[256];
    tc_url(s, "/always-wait", url, sizeof url);
    tc_resp r;
    tc_get(url, &r);
    assert_int_equal(r.status, 500);
    json_t *p = tc_json(&r);
    assert_string_equal(json_string_value(json_object_get(p, "detail")),
                        "the handler asked to wait after its wait had expired");
    json_decref(p);
    tc_free(&r);
}

static void test_bad_wait_parameter(void **state)
{
    tc_server *s = *state;
    char url[256];
    tc_url(s, "/poll?wait=-5", url, sizeof url);
    tc_resp r;
    tc_get(url, &r);
    assert_int_equal(r.status, 400);
    json_t *p = tc_json(&r);
    json_t *e = json_array_get(json_object_get(p, "errors"), 0);
    assert_string_equal(json_string_value(json_object_get(e, "field")), "query.wait");
    assert_string_equal(json_string_value(json_object_get(e, "message")), "-5 is out of range [0, 60000]");
    json_decref(p);
    tc_free(&r);
}

/* With the limit reached, libmicrohttpd stops accepting: a further client
 * waits in the listen backlog and is served once a slot frees. */
static void test_connection_limit(void **state)
{
    (void)state;
    tc_server s;
    assert_int_equal(start_server(&s, 2, 2), 0);
    poller p[2], third;
    for (int i = 0; i < 2; i++) poll_start(&p[i], &s, "/poll?since=0&wait=20000");
    wait_parked(&s, 2);
    poll_start(&third, &s, "/hello");
    for (int i = 0; i < 30; i++) {
        usleep(10000);
        assert_int_equal(__atomic_load_n(&s.http.active, __ATOMIC_SEQ_CST), 2);   /* not accepted */
    }
    pt_watch_bump(&watch);
    for (int i = 0; i < 2; i++) json_decref(poll_finish(&p[i]));
    json_t *j = poll_finish(&third);
    assert_string_equal(json_string_value(json_object_get(j, "hello")), "world");
    json_decref(j);
    pt_http_close(&s.http);
    pt_router_close(&s.router);
    pt_watch_close(&watch);
}

static void test_close_answers_parked(void **state)
{
    tc_server *s = *state;
    poller p;
    poll_start(&p, s, "/poll?since=0&wait=20000");
    wait_parked(s, 1);
    pt_http_close(&s->http);   /* must not wait 20 s */
    json_t *j = poll_finish(&p);
    assert_true(json_is_true(json_object_get(j, "expired")));
    assert_int_equal(json_integer_value(json_object_get(j, "version")), 0);
    json_decref(j);
}

/* --- the primitive alone ------------------------------------------------------------------ */

static void *bump_later(void *arg)
{
    usleep(50000);
    pt_watch_bump(arg);
    return NULL;
}

static void test_watch_wait_blocking(void **state)
{
    (void)state;
    pt_watch w;
    pt_watch_init(&w);
    assert_int_equal(pt_watch_wait(&w, 0, 30), 0);   /* timed out: still the seen version */
    assert_int_equal(pt_watch_wait(&w, 5, 1000), 0); /* differs already: returns at once */
    pthread_t t;
    pthread_create(&t, NULL, bump_later, &w);
    assert_int_equal(pt_watch_wait(&w, 0, -1), 1);   /* no timeout: woken by the bump */
    pthread_join(t, NULL);
    pt_watch_close(&w);
}

typedef struct fired {
    int count;
    pt_wake_reason reason;
    int parked;
} fired;

static void on_park(void *data) { ((fired *)data)->parked++; }

static void on_wake(void *data, pt_wake_reason reason)
{
    fired *f = data;
    f->reason = reason;   /* published by the atomic increment below */
    __atomic_add_fetch(&f->count, 1, __ATOMIC_SEQ_CST);
}

static void test_waitset_fires_once(void **state)
{
    (void)state;
    pt_watch w;
    pt_watch_init(&w);
    pt_waitset set;
    char err[128];
    assert_int_equal(pt_waitset_init(&set, err, sizeof err), 0);
    pt_waiter a, b, c;
    fired fa = {0}, fb = {0}, fc = {0};

    /* Timeout: fired by the timer thread, once, and a later bump does nothing. */
    assert_int_equal(pt_waitset_add(&set, &a, &w, 0, pt_clock_ms() + 30, on_park, on_wake, &fa), PT_WAKE_NONE);
    assert_int_equal(fa.parked, 1);
    for (int i = 0; i < 1000 && !__atomic_load_n(&fa.count, __ATOMIC_SEQ_CST); i++) usleep(2000);
    assert_int_equal(fa.count, 1);
    assert_int_equal(fa.reason, PT_WAKE_TIMEOUT);

    /* Change: fired by the bump. */
    assert_int_equal(pt_waitset_add(&set, &b, &w, 0, pt_clock_ms() + 60000, on_park, on_wake, &fb), PT_WAKE_NONE);
    assert_int_equal(pt_waitset_count(&set), 1);
    pt_watch_bump(&w);
    assert_int_equal(fb.count, 1);
    assert_int_equal(fb.reason, PT_WAKE_CHANGED);
    assert_int_equal(fa.count, 1);

    /* Nothing is registered when there is no need to wait. */
    assert_int_equal(pt_waitset_add(&set, &c, &w, 0, pt_clock_ms() + 60000, on_park, on_wake, &fc), PT_WAKE_CHANGED);
    assert_int_equal(pt_waitset_add(&set, &c, &w, 1, pt_clock_ms() - 1, on_park, on_wake, &fc), PT_WAKE_TIMEOUT);
    assert_int_equal(fc.parked, 0);

    /* Drain fires the rest with CLOSED and refuses newcomers. */
    assert_int_equal(pt_waitset_add(&set, &c, &w, 1, pt_clock_ms() + 60000, on_park, on_wake, &fc), PT_WAKE_NONE);
    pt_waitset_close(&set);
    assert_int_equal(fc.count, 1);
    assert_int_equal(fc.reason, PT_WAKE_CLOSED);
    assert_int_equal(pt_waitset_add(&set, &a, &w, 1, pt_clock_ms() + 60000, on_park, on_wake, &fa), PT_WAKE_CLOSED);
    pt_watch_close(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_wakes_on_change, setup, teardown),
        cmocka_unit_test_setup_teardown(test_times_out_without_change, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_wait_when_already_changed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rewait_keeps_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parked_requests_hold_no_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_wait_parameter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handler_that_never_stops_waiting, setup, teardown),
        cmocka_unit_test(test_connection_limit),
        cmocka_unit_test_setup_teardown(test_close_answers_parked, setup, teardown),
        cmocka_unit_test(test_watch_wait_blocking),
        cmocka_unit_test(test_waitset_fires_once),
    };
    return cmocka_run_group_tests_name("longpoll", tests, tc_global_setup, tc_global_teardown);
}
