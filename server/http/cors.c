/* cors.c — optional CORS; see cors.h.  The rules are the Fetch standard's
 * (https://fetch.spec.whatwg.org/#http-cors-protocol): the allowed origin is
 * echoed, never "*", so an answer for one origin is not reused for another
 * (Vary: Origin); no Access-Control-Allow-Credentials, since the API's
 * credential is a bearer token a script sends itself, not a cookie. */
#include "server/http/cors.h"

#include <string.h>

/* What a script of an allowed origin may read beyond the safelisted
 * headers, and send beyond the safelisted ones (JSON bodies, tokens,
 * idempotent retries, long-polls and resumed event streams). */
#define CORS_EXPOSE "ETag, Location, Retry-After, Content-Disposition, Packtrain-Model"
#define CORS_ALLOW_HEADERS "Authorization, Content-Type, Idempotency-Key, If-None-Match, Last-Event-ID"
#define CORS_MAX_AGE "600"

int pt_cors_enabled(const char *list)
{
    return list && list[strspn(list, " ,")] != '\0';
}

int pt_cors_origin_allowed(const char *list, const char *origin)
{
    if (!list || !origin || !origin[0]) return 0;
    size_t n = strlen(origin);
    for (const char *p = list; *p;) {
        p += strspn(p, " ,");
        size_t len = strcspn(p, ", ");
        if (len == 1 && *p == '*' && strcmp(origin, "null") != 0) return 1;
        if (len == n && !strncmp(p, origin, n)) return 1;
        p += len;
    }
    return 0;
}

void pt_cors_headers(const char *list, const pt_request *req, pt_response *resp)
{
    if (!pt_cors_enabled(list) || !resp->mhd) return;
    MHD_add_response_header(resp->mhd, "Vary", "Origin");
    const char *origin = pt_request_header(req, "Origin");
    if (!pt_cors_origin_allowed(list, origin)) return;
    MHD_add_response_header(resp->mhd, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(resp->mhd, "Access-Control-Expose-Headers", CORS_EXPOSE);
    if (strcmp(req->method, "OPTIONS") != 0 || !pt_request_header(req, "Access-Control-Request-Method")) return;
    const char *allow = MHD_get_response_header(resp->mhd, "Allow");
    if (allow) MHD_add_response_header(resp->mhd, "Access-Control-Allow-Methods", allow);
    MHD_add_response_header(resp->mhd, "Access-Control-Allow-Headers", CORS_ALLOW_HEADERS);
    MHD_add_response_header(resp->mhd, "Access-Control-Max-Age", CORS_MAX_AGE);
}
