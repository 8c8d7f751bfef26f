/* test_conn_guard.c — per-connection deadlines (conn_guard.h): the body
 * budget's arithmetic, a guarded socket cut at its header deadline and not
 * before, a busy one never, a body of unknown length owed at the floor rate,
 * and a real daemon closing a client that trickles its headers while
 * another is answered. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_test_client.h"
#include "server/http/conn_guard.h"

static void test_body_deadline_arithmetic(void **state)
{
    (void)state;
    /* 3 s for headers' worth plus 2,000 B at 1,000 B/s */
    assert_int_equal(pt_conn_body_deadline(100, 3000, 1000, 2000), 100 + 3000 + 2000);
    assert_int_equal(pt_conn_body_deadline(0, 3000, 1000, 1500), 3000 + 1500);
    assert_int_equal(pt_conn_body_deadline(0, 0, 3, 1), 333);
    /* no floor rate: no deadline */
    assert_int_equal(pt_conn_body_deadline(100, 3000, 0, 2000), 0);
    /* a declared length of 2^64-1 saturates instead of wrapping to the past */
    assert_true(pt_conn_body_deadline(100, 3000, 1, UINT64_MAX) == INT64_MAX);
}

/* Milliseconds until the peer of `fd` sees the end of the stream, or -1 if
 * it does not within `limit_ms`. */
static int64_t ms_until_closed(int fd, int limit_ms)
{
    int64_t t0 = pt_clock_ms();
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (pt_clock_ms() - t0 < limit_ms) {
        int n = poll(&p, 1, 50);
        if (n > 0) {
            char c;
            if (recv(fd, &c, 1, MSG_DONTWAIT) <= 0) return pt_clock_ms() - t0;
        }
    }
    return -1;
}

static void test_header_deadline_cuts(void **state)
{
    (void)state;
    pt_conn_guard g;
    char err[200];
    assert_int_equal(pt_conn_guard_init(&g, 300, 1000, NULL, err, sizeof err), 0);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pt_conn_entry *e = pt_conn_guard_open(&g, sv[0], "test");
    assert_non_null(e);
    int64_t ms = ms_until_closed(sv[1], 10000);
    assert_true(ms >= 250);   /* not before its deadline (clock granularity aside) */
    assert_true(ms >= 0);     /* and cut, not left open */
    pthread_mutex_lock(&g.mu);   /* the guard thread writes these under its lock */
    int cut = e->cut;
    uint64_t cut_headers = g.cut_headers;
    pthread_mutex_unlock(&g.mu);
    assert_int_equal(cut, 1);
    assert_int_equal(cut_headers, 1);
    pt_conn_guard_end(&g, e);
    pt_conn_guard_close(&g);
    close(sv[0]);
    close(sv[1]);
}

static void test_busy_is_never_cut(void **state)
{
    (void)state;
    pt_conn_guard g;
    char err[200];
    assert_int_equal(pt_conn_guard_init(&g, 100, 1000, NULL, err, sizeof err), 0);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pt_conn_entry *e = pt_conn_guard_open(&g, sv[0], "test");
    pt_conn_guard_body(&g, e, 10, 1);
    pt_conn_guard_busy(&g, e);
    assert_int_equal(ms_until_closed(sv[1], 700), -1);
    /* once the request ends, the next one's headers are due again */
    pt_conn_guard_idle(&g, e);
    assert_true(ms_until_closed(sv[1], 10000) >= 0);
    pt_conn_guard_end(&g, e);
    pt_conn_guard_close(&g);
    close(sv[0]);
    close(sv[1]);
}

static void test_unknown_length_owes_the_floor_rate(void **state)
{
    (void)state;
    pt_conn_guard g;
    char err[200];
    assert_int_equal(pt_conn_guard_init(&g, 200, 1000, NULL, err, sizeof err), 0);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pt_conn_entry *e = pt_conn_guard_open(&g, sv[0], "test");
    pt_conn_guard_body(&g, e, 0, 0);
    int64_t since = e->since_ms;
    assert_int_equal(e->deadline_ms, since + 200);
    pt_conn_guard_received(&g, e, 500);   /* 500 B buy 0.5 s */
    assert_int_equal(e->deadline_ms, since + 700);
    assert_true(ms_until_closed(sv[1], 10000) >= 0);
    pthread_mutex_lock(&g.mu);
    uint64_t cut_body = g.cut_body;
    pthread_mutex_unlock(&g.mu);
    assert_int_equal(cut_body, 1);
    pt_conn_guard_end(&g, e);
    pt_conn_guard_close(&g);
    close(sv[0]);
    close(sv[1]);
}

static void test_guard_off(void **state)
{
    (void)state;
    pt_conn_guard g;
    char err[200];
    assert_int_equal(pt_conn_guard_init(&g, 0, 1000, NULL, err, sizeof err), 0);
    assert_null(pt_conn_guard_open(&g, 0, "test"));
    pt_conn_guard_body(&g, NULL, 1, 1);
    pt_conn_guard_end(&g, NULL);
    pt_conn_guard_close(&g);
}

static pt_response h_ok(pt_request *req, void *ctx)
{
    (void)req;
    (void)ctx;
    return pt_response_json(200, json_pack("{s:b}", "ok", 1));
}

/* A real daemon: a client trickling header bytes is closed at the header
 * deadline (libmicrohttpd's idle timeout, 60 s, would never fire), while
 * another client is answered meanwhile. */
static void test_daemon_cuts_trickled_headers(void **state)
{
    (void)state;
    tc_server s;
    pt_router_init(&s.router);
    pt_route r = {.method = "GET", .pattern = "/ok", .handler = h_ok};
    char err[200];
    assert_int_equal(pt_router_add(&s.router, &r, err, sizeof err), 0);
    pt_http_config cfg;
    pt_http_config_defaults(&cfg);
    cfg.header_timeout_ms = 800;
    assert_int_equal(tc_server_start(&s, &cfg), 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)pt_http_port(&s.http))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    const char *start = "GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    assert_int_equal(send(fd, start, strlen(start), 0), (ssize_t)strlen(start));
    int64_t t0 = pt_clock_ms(), closed_ms = -1;
    int answered = 0;
    while (pt_clock_ms() - t0 < 15000 && closed_ms < 0) {
        if (send(fd, "a", 1, MSG_NOSIGNAL) != 1) closed_ms = pt_clock_ms() - t0;
        else if (ms_until_closed(fd, 200) >= 0) closed_ms = pt_clock_ms() - t0;
        if (closed_ms < 0 && !answered) {
            char url[128];
            tc_url(&s, "/ok", url, sizeof url);
            tc_resp resp;
            answered = tc_get(url, &resp) == CURLE_OK && resp.status == 200;
            tc_free(&resp);
        }
    }
    assert_true(answered);
    assert_true(closed_ms >= 400);   /* not long before its deadline */
    assert_true(closed_ms < 15000);
    close(fd);
    pt_http_close(&s.http);
    pt_router_close(&s.router);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_body_deadline_arithmetic),
        cmocka_unit_test(test_header_deadline_cuts),
        cmocka_unit_test(test_busy_is_never_cut),
        cmocka_unit_test(test_unknown_length_owes_the_floor_rate),
        cmocka_unit_test(test_guard_off),
        cmocka_unit_test(test_daemon_cuts_trickled_headers),
    };
    return cmocka_run_group_tests(tests, tc_global_setup, tc_global_teardown);
}
