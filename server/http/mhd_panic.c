/* mhd_panic.c — libmicrohttpd's panic handler; see mhd_panic.h.
 *
 * libmicrohttpd calls its panic function on states it cannot recover from
 * (a failed epoll_ctl, a thread that cannot be joined).  Its default prints
 * to stderr only when built with messages, and a bare abort in a server says
 * nothing about where it came from.  The handler must not return: the library
 * continues as if it did not (BUILTIN_NOT_REACHED). */
#include "server/http/mhd_panic.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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
    ssize_t w = write(STDERR_FILENO, msg, (size_t)n);
    (void)w;
    abort();
}

void pt_mhd_panic_install(void)
{
    MHD_set_panic_func(on_panic, NULL);
}
