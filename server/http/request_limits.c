/* request_limits.c — size and type checks once the headers are in; see
 * request_limits.h. */
#include "server/http/request_limits.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static enum MHD_Result add_header_size(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    *(size_t *)cls += strlen(key) + (value ? strlen(value) : 0) + 4;
    return MHD_YES;
}

/* libmicrohttpd answers a request line or headers past its memory with a
 * page of HTML; below that, ours say so as problem+json. */
int pt_request_too_long(pt_request *req, unsigned max_target_bytes, unsigned max_header_bytes,
                        pt_response *resp)
{
    if (strlen(req->target) > max_target_bytes) {
        *resp = pt_problem(414, "the request target is longer than %u bytes", max_target_bytes);
        return -1;
    }
    size_t bytes = 0;
    MHD_get_connection_values(req->conn, MHD_HEADER_KIND, add_header_size, &bytes);
    if (bytes > max_header_bytes) {
        *resp = pt_problem(431, "the request's headers take more than %u bytes", max_header_bytes);
        return -1;
    }
    return 0;
}

/* A JSON route takes only Content-Type application/json: a form or plain
 * text (what another site's page can send without asking) is refused. */
int pt_request_json_type_ok(pt_request *req, pt_response *resp)
{
    const char *ct = pt_request_header(req, MHD_HTTP_HEADER_CONTENT_TYPE);
    size_t n = strlen("application/json");
    if (ct && !strncasecmp(ct, "application/json", n) && (!ct[n] || ct[n] == ';' || ct[n] == ' ')) return 0;
    *resp = pt_problem(415, "the body must be JSON sent as Content-Type: application/json (got %s%.100s%s)",
                       ct ? "'" : "", ct ? ct : "none", ct ? "'" : "");
    return -1;
}

uint64_t pt_request_content_length(struct MHD_Connection *conn, int *known)
{
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    *known = 0;
    if (!cl) return 0;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(cl, &end, 10);
    if (errno || end == cl) return 0;
    *known = 1;
    return v;
}

pt_response pt_request_too_large(uint64_t limit)
{
    return pt_problem(413, "the request body is larger than the limit of %llu bytes",
                      (unsigned long long)limit);
}
