/* request_limits.h — the size and type checks a request passes once its
 * headers are in, before any body is taken: the request target and header
 * block (414/431 as problem+json, where libmicrohttpd would answer with a
 * page of HTML), the declared body length against the route's limit (413),
 * and JSON routes' Content-Type (415: a form or plain text is what another
 * site's page can send without asking, issue 17 F9). */
#ifndef PT_REQUEST_LIMITS_H
#define PT_REQUEST_LIMITS_H

#include <microhttpd.h>
#include <stdint.h>

#include "server/http/request.h"
#include "server/http/router.h"

/* 0, or -1 with *resp a 414 (target) or 431 (headers) problem. */
int pt_request_too_long(pt_request *req, unsigned max_target_bytes, unsigned max_header_bytes,
                        pt_response *resp);
/* 0, or -1 with *resp a 415 problem. */
int pt_request_json_type_ok(pt_request *req, pt_response *resp);
/* The Content-Length header's value; *known = 0 when absent or unreadable. */
uint64_t pt_request_content_length(struct MHD_Connection *conn, int *known);
pt_response pt_request_too_large(uint64_t limit);

#endif
