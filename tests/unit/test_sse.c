/* test_sse.c — Server-Sent Events over a real server: several events in order,
 * resuming after Last-Event-ID, live events woken by the watch, heartbeats, a
 * client that goes away, shutdown ending the stream, and the wire format. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <unistd.h>

#include "http_test_client.h"
#include "server/http/sse.h"

/* The event log the streams read from. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int n_events;
static int finished;
static pt_watch watch;
static int streams_freed;
static int heartbeat_ms;

static void publish(int n, int finish)
{
    pthread_mutex_lock(&log_lock);
    n_events += n;
    finished |= finish;
    pthread_mutex_unlock(&log_lock);
    pt_watch_bump(&watch);
}

/* Event k (1-based id) is {"i": k-1}; at most two per call to exercise batching. */
static int log_source(void *ctx, uint64_t after_id, pt_sse_writer *w)
{
    (void)ctx;
    pthread_mutex_lock(&log_lock);
    int n = n_events, done = finished;
    pthread_mutex_unlock(&log_lock);
    int sent = 0;
    for (uint64_t id = after_id + 1; id <= (uint64_t)n && sent < 2; id++, sent++) {
        json_t *data = json_pack("{s:I}", "i", (json_int_t)(id - 1));
        pt_sse_send_json(w, id, "step", data);
        json_decref(data);
    }
    return done && after_id + (uint64_t)sent >= (uint64_t)n ? PT_SSE_DONE : PT_SSE_OPEN;
}

static void count_free(void *ctx)
{
    (void)ctx;
    __atomic_add_fetch(&streams_freed, 1, __ATOMIC_SEQ_CST);
}

static pt_response h_events(pt_request *req, void *ctx)
{
    (void)ctx;
    pt_sse_config cfg = {&watch, log_source, NULL, count_free, heartbeat_ms, 1000};
    return pt_sse_response(req, &cfg);
}

static int format_results[8];

static int format_source(void *ctx, uint64_t after_id, pt_sse_writer *w)
{
    (void)ctx;
    (void)after_id;
    format_results[0] = pt_sse_send(w, 1, NULL, "a\nb\r\nc\rd");
    format_results[1] = pt_sse_send(w, 1, "again", "x");         /* id must increase */
    format_results[2] = pt_sse_send(w, 2, "bad\nname", "x");     /* no line breaks in names */
    json_t *j = json_pack("{s:s}", "k", "v");
    format_results[3] = pt_sse_send_json(w, 5, "obj", j);
    json_decref(j);
    /* id 0: an event without an id, which does not move the last id */
    format_results[6] = pt_sse_send(w, 0, "snapshot", "s");
    format_results[7] = pt_sse_send(w, 5, "again", "x");         /* still must pass 5 */
    format_results[4] = pt_sse_send(w, PT_SSE_ID_MAX + 1, "big", "x");   /* not exact in JavaScript */
    format_results[5] = pt_sse_send(w, PT_SSE_ID_MAX, "biggest", "x");
    return PT_SSE_DONE;
}

static pt_response h_format(pt_request *req, void *ctx)
{
    (void)ctx;
    pt_sse_config cfg = {&watch, format_source, NULL, NULL, 0, 0};
    return pt_sse_response(req, &cfg);
}

static int setup(void **state)
{
    tc_server *s = calloc(1, sizeof(*s));
    pt_watch_init(&watch);
    n_events = finished = streams_freed = 0;
    heartbeat_ms = 60000;
    pt_router_init(&s->router);
    char err[256];
    pt_route routes[] = {
        {"GET", "/events", h_events, NULL, PT_BODY_NONE, 0},
        {"GET", "/format", h_format, NULL, PT_BODY_NONE, 0},
    };
    for (size_t i = 0; i < 2; i++)
        if (pt_router_add(&s->router, &routes[i], err, sizeof err) != 0) return -1;
    pt_http_config cfg;
    pt_http_config_defaults(&cfg);
    cfg.threads = 2;
    *state = s;
    return tc_server_start(s, &cfg);
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

static char *expected_events(int from, int to)
{
    static char buf[8192];
    size_t n = (size_t)snprintf(buf, sizeof buf, "retry: 1000\n\n");
    for (int k = from; k <= to; k++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "id: %d\nevent: step\ndata: {\"i\":%d}\n\n", k, k - 1);
    return buf;
}

static tc_resp get(const tc_server *s, const char *path, const char *const *headers)
{
    char url[256];
    tc_url(s, path, url, sizeof url);
    tc_resp r;
    tc_request("GET", url, headers, NULL, 0, &r);
    return r;
}

static void test_several_events_then_end(void **state)
{
    tc_server *s = *state;
    publish(5, 1);
    tc_resp r = get(s, "/events", NULL);
    assert_int_equal(r.rc, CURLE_OK);
    assert_int_equal(r.status, 200);
    char ct[128], cc[64];
    tc_header(&r, "Content-Type", ct, sizeof ct);
    assert_string_equal(ct, "text/event-stream; charset=utf-8");
    tc_header(&r, "Cache-Control", cc, sizeof cc);
    assert_string_equal(cc, "no-cache");
    assert_string_equal(r.body, expected_events(1, 5));
    tc_free(&r);
    for (int i = 0; i < 500 && __atomic_load_n(&streams_freed, __ATOMIC_SEQ_CST) < 1; i++) usleep(2000);
    assert_int_equal(streams_freed, 1);
}

static void test_resume_after_last_event_id(void **state)
{
    tc_server *s = *state;
    publish(5, 1);
    const char *h[] = {"Last-Event-ID: 2", NULL};
    tc_resp r = get(s, "/events", h);
    assert_string_equal(r.body, expected_events(3, 5));
    tc_free(&r);

    r = get(s, "/events?last_event_id=4", NULL);
    assert_string_equal(r.body, expected_events(5, 5));
    tc_free(&r);

    const char *bad[] = {"Last-Event-ID: 12abc", NULL};
    r = get(s, "/events", bad);
    assert_int_equal(r.status, 400);
    json_t *p = tc_json(&r);
    assert_string_equal(json_string_value(json_object_get(p, "detail")), "Last-Event-ID must be a decimal event id");
    json_decref(p);
    tc_free(&r);
    const char *huge[] = {"Last-Event-ID: 99999999999999999999999", NULL};
    r = get(s, "/events", huge);
    assert_int_equal(r.status, 400);
    tc_free(&r);
    /* the refused ones released their context too (after their answer was
     * sent: wait for the server's thread, as the test above does) */
    for (int i = 0; i < 1000 && __atomic_load_n(&streams_freed, __ATOMIC_SEQ_CST) < 4; i++) usleep(2000);
    assert_int_equal(streams_freed, 4);
}

typedef struct reader {
    const tc_server *s;
    tc_resp r;
    pthread_t thread;
} reader;

static void *read_thread(void *arg)
{
    reader *rd = arg;
    rd->r = get(rd->s, "/events", NULL);
    return NULL;
}

static void test_live_events(void **state)
{
    tc_server *s = *state;
    reader rd = {.s = s};
    pthread_create(&rd.thread, NULL, read_thread, &rd);
    /* Publish in steps, each after the stream has parked again. */
    for (int step = 0; step < 4; step++) {
        for (int i = 0; i < 2000 && pt_waitset_count(&s->http.waitset) != 1; i++) usleep(2000);
        assert_int_equal(pt_waitset_count(&s->http.waitset), 1);
        publish(step + 1, step == 3);
    }
    pthread_join(rd.thread, NULL);
    assert_int_equal(rd.r.rc, CURLE_OK);
    assert_string_equal(rd.r.body, expected_events(1, 10));
    tc_free(&rd.r);
}

/* Stops reading after two heartbeats. */
static size_t until_heartbeats(char *p, size_t size, size_t n, void *ud)
{
    tc_resp *r = ud;
    tc_append(&r->body, &r->len, p, size * n);
    int beats = 0;
    for (const char *q = r->body; (q = strstr(q, ": keep-alive\n\n")); q++) beats++;
    return beats >= 2 ? 0 : size * n;
}

static void test_heartbeat_and_client_gone(void **state)
{
    tc_server *s = *state;
    heartbeat_ms = 50;
    char url[256];
    tc_url(s, "/events", url, sizeof url);
    CURL *c = curl_easy_init();
    tc_resp r;
    memset(&r, 0, sizeof r);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, until_heartbeats);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    assert_int_equal(curl_easy_perform(c), CURLE_WRITE_ERROR);   /* we hung up */
    curl_easy_cleanup(c);
    assert_string_equal(r.body, "retry: 1000\n\n: keep-alive\n\n: keep-alive\n\n");
    tc_free(&r);
    /* The next heartbeat finds the socket closed and the stream is freed,
     * without waiting for any event. */
    for (int i = 0; i < 2000 && __atomic_load_n(&streams_freed, __ATOMIC_SEQ_CST) < 1; i++) usleep(2000);
    assert_int_equal(streams_freed, 1);
    assert_int_equal(pt_waitset_count(&s->http.waitset), 0);
}

static void test_shutdown_ends_stream(void **state)
{
    tc_server *s = *state;
    publish(1, 0);
    reader rd = {.s = s};
    pthread_create(&rd.thread, NULL, read_thread, &rd);
    for (int i = 0; i < 2000 && pt_waitset_count(&s->http.waitset) != 1; i++) usleep(2000);
    assert_int_equal(pt_waitset_count(&s->http.waitset), 1);
    pt_http_close(&s->http);
    pthread_join(rd.thread, NULL);
    assert_int_equal(rd.r.rc, CURLE_OK);   /* a clean end of stream, not a reset */
    assert_string_equal(rd.r.body, expected_events(1, 1));
    tc_free(&rd.r);
    assert_int_equal(streams_freed, 1);
}

static void test_wire_format(void **state)
{
    tc_server *s = *state;
    tc_resp r = get(s, "/format", NULL);
    assert_string_equal(r.body, ": stream open\n\n"
                                "id: 1\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
                                "id: 5\nevent: obj\ndata: {\"k\":\"v\"}\n\n"
                                "event: snapshot\ndata: s\n\n"
                                "id: 9007199254740991\nevent: biggest\ndata: x\n\n");
    tc_free(&r);
    assert_int_equal(format_results[0], 0);
    assert_int_equal(format_results[1], -1);
    assert_int_equal(format_results[2], -1);
    assert_int_equal(format_results[3], 0);
    assert_int_equal(format_results[4], -1);
    assert_int_equal(format_results[5], 0);
    assert_int_equal(format_results[6], 0);
    assert_int_equal(format_results[7], -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_several_events_then_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_after_last_event_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_live_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heartbeat_and_client_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_ends_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wire_format, setup, teardown),
    };
    return cmocka_run_group_tests_name("sse", tests, tc_global_setup, tc_global_teardown);
}
