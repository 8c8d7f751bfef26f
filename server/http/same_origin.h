/* same_origin.h — the browser-safety check of a server without tokens
 * (issue 17 F9): without authentication, any page a user's browser opens
 * could call a server on localhost.  Two requests are refused with a 403:
 *   - a Host that is not a loopback name, the bound address or the
 *     operator's --host-name (a DNS-rebinding page reaches us under a name
 *     of its own, and could then read and cancel);
 *   - an Origin of another site (its page would upload and submit: such
 *     "simple" requests need no CORS preflight), unless the operator's CORS
 *     list (cors.h) names it.  "null" (sandboxed frames, local files) is
 *     foreign unless listed.
 * http.c runs it on every request before routing when same_origin_only is
 * set (auth off). */
#ifndef PT_SAME_ORIGIN_H
#define PT_SAME_ORIGIN_H

#include <stddef.h>

/* The names a request may reach us under besides loopback ones. */
typedef struct pt_same_origin {
    const char *bind_address;   /* the address the daemon is bound to ("" none) */
    const char *host_name;      /* --host-name, or NULL */
    const char *cors_origins;   /* --cors-origins list, or NULL (cors.h) */
} pt_same_origin;

/* 0 when a request with these Host and Origin headers (NULL: absent) may
 * proceed; -1 with `why` (the detail of the caller's 403) saying which
 * header and why. */
int pt_same_origin_check(const pt_same_origin *names, const char *host, const char *origin,
                         char *why, size_t cap);

#endif
