/* access_log.h — the server's access log: one line per request, and the
 * client address of a libmicrohttpd connection (also named by the
 * connection guard's lines, conn_guard.h).
 *
 *   2026-11-25T21:30:00.123Z 127.0.0.1 "GET /v1/jobs?access_token=-" 200 1.234ms route=/v1/jobs owner=alice
 *
 * access_token values are hidden and unprintable bytes escaped, so a line
 * never carries a credential nor breaks the one-line format; a request that
 * did not end normally says how (end=timeout, end=client-abort, ...). */
#ifndef PT_ACCESS_LOG_H
#define PT_ACCESS_LOG_H

#include <microhttpd.h>
#include <stdio.h>

#include "server/http/request.h"

/* The peer's numeric address into out ("-" when unknown). */
void pt_http_client_address(struct MHD_Connection *conn, char *out, size_t cap);
void pt_access_log_write(FILE *log, const pt_request *req, struct MHD_Connection *conn,
                         enum MHD_RequestTerminationCode toe, double total_ms);

#endif
