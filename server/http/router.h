/* router.h — method + path pattern routing, and the authentication hook.
 *
 * Patterns are literal segments and parameters: "/v1/jobs/{id}" binds one
 * decoded segment to "id"; a last segment "{path...}" binds the rest of the
 * path (possibly empty).  The first route matching method and path wins; HEAD
 * runs GET routes.  When the path matches only under other methods the answer
 * is 405 with an Allow header; routes ending in "{name...}" are catch-alls and
 * never turn a 404 into a 405.  Dot segments ("." and "..", encoded or not)
 * are refused before matching.
 *
 * Authentication: with an authenticator set, every route not flagged
 * PT_ROUTE_PUBLIC needs a bearer token (the Authorization header, or the
 * access_token query parameter on GET/HEAD since browsers' EventSource cannot
 * set headers).  Failures get 401 problem+json with WWW-Authenticate. */
#ifndef PT_ROUTER_H
#define PT_ROUTER_H

#include <stddef.h>

#include "server/http/request.h"

typedef enum pt_body_kind {
    PT_BODY_NONE = 0,   /* a body is read and dropped (bounded by the JSON limit) */
    PT_BODY_JSON,       /* required JSON body, parsed into req->json */
    PT_BODY_FILE        /* raw body streamed to req->body_path */
} pt_body_kind;

/* PT_ROUTE_HEAVY: the handler runs on the offload pool, not on an HTTP
 * thread (offload.h); it should ask pt_request_cancelled() as it works. */
enum { PT_ROUTE_PUBLIC = 1u << 0, PT_ROUTE_HEAVY = 1u << 1 };

typedef struct pt_route {
    const char *method;     /* "GET", "POST", "DELETE", ... */
    const char *pattern;
    pt_handler_fn handler;
    void *ctx;
    pt_body_kind body;
    unsigned flags;
} pt_route;

typedef enum pt_auth_result {
    PT_AUTH_ERROR = -1,     /* the verifier failed (e.g. database down): 500 */
    PT_AUTH_OK = 0,
    PT_AUTH_DENIED = 1      /* unknown, revoked or expired token: 401 */
} pt_auth_result;

/* Verifies `token`; on PT_AUTH_OK fills `out`, otherwise writes a reason
 * (sent to the client) into `why`. */
typedef pt_auth_result (*pt_auth_fn)(void *ctx, const char *token, pt_auth_info *out,
                                     char *why, size_t whylen);

typedef struct pt_router {
    struct pt_route_entry *routes;
    size_t n_routes, cap;
    pt_auth_fn auth;
    void *auth_ctx;
} pt_router;

typedef enum pt_match_result {
    PT_MATCH_FOUND = 0,
    PT_MATCH_NO_PATH,       /* 404 */
    PT_MATCH_NO_METHOD,     /* 405, `allow` lists the methods */
    PT_MATCH_BAD_PATH       /* 400, `error` says why */
} pt_match_result;

typedef struct pt_match {
    const pt_route *route;
    const void *entry;
    pt_kv params[PT_REQ_MAX_PARAMS];   /* values are malloc'ed; see pt_match_clear */
    size_t n_params;
    char allow[128];
    char error[160];
} pt_match;

void pt_router_init(pt_router *r);
void pt_router_close(pt_router *r);
/* Copies the route (its strings too).  -1 with a message on a bad pattern,
 * method or a duplicate. */
int pt_router_add(pt_router *r, const pt_route *route, char *err, size_t errlen);
void pt_router_set_auth(pt_router *r, pt_auth_fn fn, void *ctx);

/* Matches a raw (percent-encoded) path.  `m` must be cleared afterwards
 * unless its params were moved elsewhere. */
pt_match_result pt_router_match(const pt_router *r, const char *method, const char *raw_path,
                                pt_match *m);
void pt_match_clear(pt_match *m);

/* Copies the bearer token from an Authorization header value into `token`.
 * -1 when the header is not a well-formed bearer credential or too long. */
int pt_bearer_parse(const char *authorization, char *token, size_t len);
/* Runs the authenticator for `route`: 0 with req->auth filled, or -1 with
 * *resp set to a 401 (or 500) problem. */
int pt_router_authenticate(const pt_router *r, const pt_route *route, pt_request *req,
                           pt_response *resp);

#endif
