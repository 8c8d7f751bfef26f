/* test_http_stop.c — stopping the HTTP server while clients connect, and
 * libmicrohttpd's panic handler.
 *
 * The bug this guards: pt_http_close used MHD_quiesce_daemon, which (with a
 * worker pool and epoll, libmicrohttpd 0.9.75 and later) removes the listen
 * socket from each worker's epoll set from the caller's thread while a worker
 * woken by a new connection removes it too; the second EPOLL_CTL_DEL fails
 * with ENOENT and MHD_PANIC aborts the process.  Under load the caller is
 * preempted between libmicrohttpd's check and its epoll_ctl, which opens the
 * window; this test opens it on purpose: the epoll_ctl below (it interposes
 * on libc's for libmicrohttpd) sleeps before the closing thread's removal of
 * the listen socket.  It can also fail one removal, to make a real panic.
 *
 * Whatever might abort runs in a forked child, so a panic is a failed test
 * with the panic's message, not a dead test binary.  The panic's message
 * goes to stderr and to the access log (--access-log FILE). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http_test_client.h"

/* --- the epoll_ctl libmicrohttpd calls ----------------------------------------- */

static int g_delay_fd = -1;        /* EPOLL_CTL_DEL of this fd by g_closer sleeps first */
static pthread_t g_closer;
static int g_fail_fd = -1;         /* EPOLL_CTL_DEL of this fd fails with EBADF */
static long g_calls;               /* proof that the interposition is live */

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    __atomic_add_fetch(&g_calls, 1, __ATOMIC_SEQ_CST);
    if (op == EPOLL_CTL_DEL && fd == __atomic_load_n(&g_fail_fd, __ATOMIC_SEQ_CST)) {
        errno = EBADF;
        return -1;
    }
    if (op == EPOLL_CTL_DEL && fd == __atomic_load_n(&g_delay_fd, __ATOMIC_SEQ_CST) &&
        pthread_equal(pthread_self(), g_closer))
        usleep(3000);
    return (int)syscall(SYS_epoll_ctl, epfd, op, fd, ev);
}

/* --- helpers ------------------------------------------------------------------------ */

static pt_response h_ping(pt_request *req, void *ctx)
{
    (void)req;
    (void)ctx;
    return pt_response_empty(204);
}

static pt_response h_slow(pt_request *req, void *ctx)
{
    (void)req;
    (void)ctx;
    usleep(300 * 1000);
    return pt_response_empty(204);
}

static FILE *g_access_log;   /* the next start()'s --access-log, or NULL */

static int start(tc_server *s, unsigned threads, unsigned max_connections)
{
    pt_router_init(&s->router);
    char err[256];
    pt_route routes[] = {
        {"GET", "/ping", h_ping, NULL, PT_BODY_NONE, PT_ROUTE_PUBLIC},
        {"GET", "/slow", h_slow, NULL, PT_BODY_NONE, PT_ROUTE_PUBLIC},
    };
    for (size_t i = 0; i < 2; i++)
        if (pt_router_add(&s->router, &routes[i], err, sizeof err) != 0) return -1;
    pt_http_config cfg;
    pt_http_config_defaults(&cfg);
    cfg.threads = threads;
    if (max_connections) cfg.max_connections = max_connections;
    cfg.access_log = g_access_log;
    return tc_server_start(s, &cfg);
}

static void stop(tc_server *s)
{
    pt_http_close(&s->http);
    pt_router_close(&s->router);
}

static int listen_fd(const tc_server *s)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->http.daemon, MHD_DAEMON_INFO_LISTEN_FD);
    return i ? (int)i->listen_fd : -1;
}

static int connect_to(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One GET on a new connection: 1 answered with `status`, 0 closed or
 * refused without an answer (the server is stopping), -1 anything else. */
static int one_get(unsigned port, const char *path, int status)
{
    int fd = connect_to(port);
    if (fd < 0) return 0;
    char req[128];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    ssize_t w = send(fd, req, (size_t)n, MSG_NOSIGNAL);
    char buf[512];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof buf - 1 && (r = recv(fd, buf + got, sizeof buf - 1 - got, 0)) > 0) got += (size_t)r;
    int timed_out = got == 0 && r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    close(fd);
    buf[got] = '\0';
    char want[32];
    snprintf(want, sizeof want, "HTTP/1.1 %d ", status);
    if (got && !strncmp(buf, want, strlen(want))) return 1;
    if (got == 0 && !timed_out) return 0;
    (void)w;
    fprintf(stderr, "unexpected answer (%zu bytes%s): %.80s\n", got, timed_out ? ", timed out" : "", buf);
    return -1;
}

typedef struct client {
    pthread_t thread;
    unsigned port;
    int stop;
    long answered, closed, bad;
} client;

static void *client_main(void *arg)
{
    client *c = arg;
    while (!__atomic_load_n(&c->stop, __ATOMIC_SEQ_CST)) {
        int r = one_get(c->port, "/ping", 204);
        if (r > 0) c->answered++;
        else if (r == 0) c->closed++;
        else c->bad++;
    }
    return NULL;
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Runs fn in a child; returns its wait status.  The child's stderr goes to
 * `out` (NULL: inherited). */
static int in_child(int (*fn)(void), char *out, size_t cap)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit nocore = {0, 0};
        setrlimit(RLIMIT_CORE, &nocore);
        close(p[0]);
        if (out) dup2(p[1], STDERR_FILENO);
        _exit(fn());
    }
    close(p[1]);
    size_t got = 0;
    ssize_t r;
    char sink[256];
    while ((r = read(p[0], out && got < cap - 1 ? out + got : sink,
                     out && got < cap - 1 ? cap - 1 - got : sizeof sink)) > 0)
        if (out && got < cap - 1) got += (size_t)r;
    if (out) out[got] = '\0';
    close(p[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

/* --- stop while clients connect ---------------------------------------------------------- */

enum { CYCLES = 40, CLIENTS = 3 };

static int stop_cycles(void)
{
    int fds_before = open_fds();
    long answered = 0, closed = 0, bad = 0;
    for (int cycle = 0; cycle < CYCLES; cycle++) {
        tc_server s;
        if (start(&s, 4, 0) != 0) return 10;
        client c[CLIENTS];
        for (int i = 0; i < CLIENTS; i++) {
            memset(&c[i], 0, sizeof c[i]);
            c[i].port = pt_http_port(&s.http);
            if (pthread_create(&c[i].thread, NULL, client_main, &c[i]) != 0) return 11;
        }
        /* until every client had an answer: connections are in flight */
        for (int i = 0; i < CLIENTS; i++)
            while (!__atomic_load_n(&c[i].answered, __ATOMIC_SEQ_CST)) usleep(500);
        g_closer = pthread_self();
        __atomic_store_n(&g_delay_fd, listen_fd(&s), __ATOMIC_SEQ_CST);
        stop(&s);
        __atomic_store_n(&g_delay_fd, -1, __ATOMIC_SEQ_CST);
        for (int i = 0; i < CLIENTS; i++) {
            __atomic_store_n(&c[i].stop, 1, __ATOMIC_SEQ_CST);
            pthread_join(c[i].thread, NULL);
            answered += c[i].answered;
            closed += c[i].closed;
            bad += c[i].bad;
        }
    }
    fprintf(stderr, "%d stop cycles: %ld answered, %ld closed or refused (stopping), %ld bad\n", CYCLES, answered, closed,
            bad);
    if (bad) return 12;
    /* the listen socket is closed by MHD_stop_daemon: nothing left open */
    int fds_after = open_fds();
    if (fds_after != fds_before) {
        fprintf(stderr, "open fds %d before, %d after\n", fds_before, fds_after);
        return 13;
    }
    return 0;
}

static void test_stop_with_clients_connecting(void **state)
{
    (void)state;
    /* the interposed epoll_ctl is the one libmicrohttpd calls */
    tc_server s;
    assert_int_equal(start(&s, 4, 0), 0);
    stop(&s);
    assert_true(__atomic_load_n(&g_calls, __ATOMIC_SEQ_CST) > 0);

    int status = in_child(stop_cycles, NULL, 0);
    if (WIFSIGNALED(status)) fail_msg("the stop cycles died by signal %d (a libmicrohttpd panic?)", WTERMSIG(status));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* --- new connections while stopping ---------------------------------------------------------- */

typedef struct slow_call {
    unsigned port;
    int result;
} slow_call;

static void *slow_main(void *arg)
{
    slow_call *c = arg;
    c->result = one_get(c->port, "/slow", 204);
    return NULL;
}

static void *close_main(void *arg)
{
    pt_http_close(arg);
    return NULL;
}

static void test_new_connections_closed_while_stopping(void **state)
{
    (void)state;
    tc_server s;
    assert_int_equal(start(&s, 4, 0), 0);
    unsigned port = pt_http_port(&s.http);
    slow_call slow = {port, -2};
    pthread_t st, ct;
    assert_int_equal(pthread_create(&st, NULL, slow_main, &slow), 0);
    while (!__atomic_load_n(&s.http.active, __ATOMIC_SEQ_CST)) usleep(1000);
    assert_int_equal(pthread_create(&ct, NULL, close_main, &s.http), 0);
    while (!__atomic_load_n(&s.http.stopping, __ATOMIC_SEQ_CST)) usleep(1000);
    /* the slow request is still running (stop_grace_ms is 5 s): a new
     * connection is accepted and closed at once, without an answer */
    assert_int_equal(one_get(port, "/ping", 204), 0);
    pthread_join(ct, NULL);
    pthread_join(st, NULL);
    assert_int_equal(slow.result, 1);   /* the request in flight was answered */
    pt_router_close(&s.router);
    /* and the port is closed once the server stopped */
    assert_int_equal(connect_to(port), -1);
}

/* --- the panic handler --------------------------------------------------------------------- */

static int panic_child(void)
{
    /* one thread, one connection: at the limit libmicrohttpd takes the
     * listen socket out of its epoll set, and that removal fails here */
    tc_server s;
    if (start(&s, 1, 1) != 0) return 10;
    __atomic_store_n(&g_fail_fd, listen_fd(&s), __ATOMIC_SEQ_CST);
    int fd = connect_to(pt_http_port(&s.http));
    if (fd < 0) return 11;
    sleep(5);
    return 12;   /* no panic */
}

static void test_panic_says_where(void **state)
{
    (void)state;
    char out[1024];
    int status = in_child(panic_child, out, sizeof out);
    if (!WIFSIGNALED(status)) fail_msg("no panic: child exited %d, stderr: %s", WEXITSTATUS(status), out);
    assert_int_equal(WTERMSIG(status), SIGABRT);
    const char *m = strstr(out, "packtrain: libmicrohttpd panic at ");
    if (!m) fail_msg("panic message missing; stderr: %s", out);
    assert_non_null(strstr(m, "daemon.c:"));
    assert_non_null(strstr(m, "Failed to remove listen FD from epoll set"));
}

/* With --access-log FILE the message reaches that file too (the operator's
 * log; stderr may go nowhere), after the lines logged before it, in the
 * log's form (a timestamp first). */
static char g_log_path[] = "/tmp/pt_test_panic_log_" "XX" "XX" "XX";
static int g_log_made;

static int panic_logged_child(void)
{
    g_access_log = fopen(g_log_path, "a");
    if (!g_access_log) return 13;
    tc_server s;
    if (start(&s, 1, 1) != 0) return 10;
    if (one_get(pt_http_port(&s.http), "/ping", 204) != 1) return 14;
    /* the request's line is written when it completes: wait for it */
    for (int i = 0; i < 5000; i++) {
        FILE *f = fopen(g_log_path, "r");
        char line[512] = "";
        int seen = f && fgets(line, sizeof line, f) && strstr(line, "\"GET /ping\" 204");
        if (f) fclose(f);
        if (seen) break;
        usleep(1000);
    }
    __atomic_store_n(&g_fail_fd, listen_fd(&s), __ATOMIC_SEQ_CST);
    int fd = connect_to(pt_http_port(&s.http));
    if (fd < 0) return 11;
    sleep(5);
    return 12;   /* no panic */
}

/* A server that had a log and stopped leaves no stale descriptor behind:
 * the next one's panic (without a log) is not written to the old file. */
static int panic_after_logged_server_child(void)
{
    g_access_log = fopen(g_log_path, "a");
    if (!g_access_log) return 13;
    tc_server s;
    if (start(&s, 1, 0) != 0) return 10;
    stop(&s);
    g_access_log = NULL;
    if (start(&s, 1, 1) != 0) return 10;
    __atomic_store_n(&g_fail_fd, listen_fd(&s), __ATOMIC_SEQ_CST);
    int fd = connect_to(pt_http_port(&s.http));
    if (fd < 0) return 11;
    sleep(5);
    return 12;
}

static void read_file(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, cap - 1, f) : 0;
    out[n] = '\0';
    if (f) fclose(f);
}

static void test_panic_reaches_the_access_log(void **state)
{
    (void)state;
    int tmp = mkstemp(g_log_path);
    assert_true(tmp >= 0);
    g_log_made = 1;
    close(tmp);
    char err[1024], log[4096];
    int status = in_child(panic_logged_child, err, sizeof err);
    read_file(g_log_path, log, sizeof log);
    if (!WIFSIGNALED(status))
        fail_msg("no panic: child exited %d, stderr: %s, log: %s", WEXITSTATUS(status), err, log);
    assert_int_equal(WTERMSIG(status), SIGABRT);
    assert_non_null(strstr(err, "packtrain: libmicrohttpd panic at "));   /* stderr still */
    const char *get = strstr(log, "\"GET /ping\" 204"), *m = strstr(log, "Z packtrain: libmicrohttpd panic at ");
    if (!get || !m) fail_msg("the log lacks the request or the panic: %s", log);
    assert_true(get < m);
    assert_non_null(strstr(m, "daemon.c:"));
    assert_non_null(strstr(m, "Failed to remove listen FD from epoll set"));
    assert_true(m >= log + 24 && m[-24] == '\n' && m[-19] == '-' && m[-13] == 'T');  /* 2026-11-26T03:10:00.123Z */
    assert_int_equal(log[strlen(log) - 1], '\n');

    assert_int_equal(truncate(g_log_path, 0), 0);
    status = in_child(panic_after_logged_server_child, err, sizeof err);
    read_file(g_log_path, log, sizeof log);
    if (!WIFSIGNALED(status)) fail_msg("no panic: child exited %d, stderr: %s", WEXITSTATUS(status), err);
    assert_non_null(strstr(err, "packtrain: libmicrohttpd panic at "));
    if (strstr(log, "panic")) fail_msg("a stopped server's log got the next one's panic: %s", log);
}

/* A failed assertion leaves the test early: the teardown removes the log
 * file either way. */
static int remove_panic_log(void **state)
{
    (void)state;
    if (g_log_made) unlink(g_log_path);
    g_log_made = 0;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_with_clients_connecting),
        cmocka_unit_test(test_new_connections_closed_while_stopping),
        cmocka_unit_test(test_panic_says_where),
        cmocka_unit_test_teardown(test_panic_reaches_the_access_log, remove_panic_log),
    };
    return cmocka_run_group_tests(tests, tc_global_setup, tc_global_teardown);
}
