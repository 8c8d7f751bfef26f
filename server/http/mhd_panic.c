/* mhd_panic.c — libmicrohttpd's panic handler; see mhd_panic.h.
 *
 * libmicrohttpd calls its panic function on states it cannot recover from
 * (a failed epoll_ctl, a thread that cannot be joined).  Its default prints
 * to stderr only when built with messages, and a bare abort in a server says
 * nothing about where it came from.  The handler must not return: the library
 * continues as if it did not (BUILTIN_NOT_REACHED).
 *
 * An operator who runs the server with --access-log FILE (often with stderr
 * going nowhere, under a service manager) reads that file; the message goes
 * there too, through the log's file descriptor with write(2): the panicking
 * thread may be the one holding the log's stdio lock, and a FILE's buffer is
 * flushed after every line anyway (access_log.c). */
#include "server/http/mhd_panic.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_log_fd = -1;   /* the access log's descriptor, or -1 */

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

static void on_panic(void *cls, const char *file, unsigned int line, const char *reason)
{
    (void)cls;
    char msg[512];
    int n = snprintf(msg, sizeof msg, "packtrain: libmicrohttpd panic at %s:%u: %s", file ? file : "?", line,
                     reason && reason[0] ? reason : "(no reason given)\n");
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof msg) n = (int)sizeof msg - 1;
    if (n > 0 && msg[n - 1] != '\n' && (size_t)n < sizeof msg - 1) msg[n++] = '\n';
    /* write(2), not stdio: another thread may hold stderr's lock forever */
    write_all(STDERR_FILENO, msg, (size_t)n);
    const int fd = __atomic_load_n(&g_log_fd, __ATOMIC_SEQ_CST);
    if (fd >= 0 && fd != STDERR_FILENO) {
        /* the access log's line form: a UTC timestamp first */
        char when[48] = "-";
        struct timespec ts;
        struct tm tm;
        if (clock_gettime(CLOCK_REALTIME, &ts) == 0 && gmtime_r(&ts.tv_sec, &tm)) {
            size_t k = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
            snprintf(when + k, sizeof when - k, ".%03ldZ ", ts.tv_nsec / 1000000);
        }
        write_all(fd, when, strlen(when));
        write_all(fd, msg, (size_t)n);
    }
    abort();
}

void pt_mhd_panic_install(void)
{
    MHD_set_panic_func(on_panic, NULL);
}

void pt_mhd_panic_log(int fd)
{
    __atomic_store_n(&g_log_fd, fd, __ATOMIC_SEQ_CST);
}

void pt_mhd_panic_log_release(int fd)
{
    int expected = fd;
    __atomic_compare_exchange_n(&g_log_fd, &expected, -1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
