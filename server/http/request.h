/* request.h — what a route handler sees: method, path, decoded path and query
 * parameters, headers, the caller's identity, and the body (a temp file or
 * parsed JSON), plus helpers that turn bad parameters into located errors.
 *
 * A handler is `pt_response fn(pt_request *req, void *ctx)`.  The request and
 * everything it points to live until the response has been sent. */
#ifndef PT_REQUEST_H
#define PT_REQUEST_H

#include <jansson.h>
#include <stdint.h>

#include "engine/core/errors.h"
#include "server/http/response.h"
#include "server/http/upload.h"
#include "server/http/watch.h"

#define PT_REQ_MAX_PARAMS 8
#define PT_OWNER_MAX 128

typedef struct pt_kv {
    const char *name;
    char *value;
} pt_kv;

typedef struct pt_auth_info {
    char owner[PT_OWNER_MAX];   /* who the request acts for; "" when auth is off */
    long long token_id;         /* the verifier's id for the token, 0 if none */
} pt_auth_info;

typedef struct pt_request pt_request;
typedef pt_response (*pt_handler_fn)(pt_request *req, void *ctx);

typedef enum pt_request_phase {
    PT_PHASE_NEW = 0,   /* headers received, not routed yet */
    PT_PHASE_BODY,      /* receiving the body */
    PT_PHASE_WAITING,   /* parked by pt_request_wait */
    PT_PHASE_OFFLOADED, /* a heavy route's handler runs on the offload pool (offload.h) */
    PT_PHASE_DONE       /* a response is queued */
} pt_request_phase;

struct pt_request {
    /* --- for handlers ----------------------------------------------------- */
    struct MHD_Connection *conn;
    const char *method;        /* as sent; HEAD requests run GET routes */
    char *target;              /* request-target as received (raw path + query) */
    char *path;                /* raw path, still percent-encoded */
    const char *route;         /* matched pattern, e.g. "/v1/jobs/{id}"; "" if none */
    pt_kv params[PT_REQ_MAX_PARAMS];
    size_t n_params;
    pt_kv *query;              /* decoded query parameters, in order */
    size_t n_query;
    pt_auth_info auth;
    const char *body_path;     /* PT_BODY_FILE: the body on disk, removed after the
                                * response unless pt_request_keep_body() moved it */
    uint64_t body_size;
    const char *body_sha256;   /* PT_BODY_FILE: SHA-256 of the body, lowercase hex */
    json_t *json;              /* PT_BODY_JSON: the parsed body, owned by the request */
    pt_errors errors;          /* problems found by pt_request_query_long() */
    void *user;                /* free for the application */

    /* --- the server's bookkeeping ------------------------------------------ */
    pt_request_phase phase;
    char *method_copy;         /* `method` points here: it must outlive libmicrohttpd's buffer */
    const void *matched;       /* the router's route entry */
    int64_t start_ns, queued_ns;   /* CLOCK_MONOTONIC */
    int status;                /* status sent, 0 before */
    pt_upload upload;
    pt_body body;
    uint64_t discarded;        /* body bytes dropped after the limit was passed */
    int over_limit;
    char body_error[200];      /* a server-side failure while storing the body */
    pt_waitset *waitset;       /* the server's, for pt_request_wait and SSE */
    pt_waiter waiter;
    pt_watch *wait_watch;
    uint64_t wait_seen;
    int64_t wait_deadline_ms;  /* 0 until the first pt_request_wait */
    int wait_expired;
    void *server;
    /* heavy routes (offload.c) */
    struct pt_request *offload_next;   /* the pool's queue */
    pt_response offload_result;        /* the handler's response, sent once resumed */
    void *offload;                     /* the pool that runs it; NULL for other requests */
    int64_t work_start_ms, gone_checked_ms;
    int cancelled;                     /* pt_cancel_reason, once decided */
};

/* Allocates a request for `target` (the raw request-target).  Returns NULL
 * when out of memory.  A malformed query is reported by pt_request_parse. */
pt_request *pt_request_new(const char *target);
/* Splits the target into path and decoded query; -1 with a message in err
 * when the target is malformed. */
int pt_request_parse(pt_request *req, char *err, size_t errlen);
void pt_request_free(pt_request *req);

/* Decodes %XX escapes (libmicrohttpd's MHD_http_unescape; '+' as space
 * when plus_is_space) into a new string.  Returns NULL on a malformed
 * escape or an encoded NUL byte. */
char *pt_url_decode(const char *s, size_t len, int plus_is_space);

/* Decoded path parameter, query parameter (first occurrence) or header;
 * NULL when absent. */
const char *pt_request_param(const pt_request *req, const char *name);
const char *pt_request_query(const pt_request *req, const char *name);
const char *pt_request_header(const pt_request *req, const char *name);

/* An integer query parameter in [min, max]; `def` when absent.  A bad value
 * adds a located error to req->errors (field "query.NAME") and returns def. */
long pt_request_query_long(pt_request *req, const char *name, long def, long min, long max);
/* 400 problem listing req->errors. */
pt_response pt_request_problem(pt_request *req);

/* Moves the uploaded body to `dest` (fsync + rename), so it outlives the
 * request.  Only for PT_BODY_FILE routes. */
int pt_request_keep_body(pt_request *req, const char *dest, char *err, size_t errlen);

#endif
