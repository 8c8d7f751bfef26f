/* response.h — what a route handler returns: JSON bodies, RFC 9457 problem
 * details (application/problem+json) and ETag handling.
 *
 * A pt_response is a status plus a libmicrohttpd response.  Constructors never
 * return a response the server cannot send: when memory runs out they return
 * {500, NULL} and the server answers with its preallocated 500. */
#ifndef PT_RESPONSE_H
#define PT_RESPONSE_H

#include <jansson.h>
#include <microhttpd.h>
#include <stddef.h>

#include "engine/core/errors.h"

#define PT_CT_JSON "application/json"
#define PT_CT_PROBLEM "application/problem+json"

typedef struct pt_response {
    int status;                /* HTTP status; 0 (with mhd NULL) means "wait", see http.h */
    struct MHD_Response *mhd;
} pt_response;

/* The body is serialized compactly with a trailing newline; steals `body`. */
pt_response pt_response_json(int status, json_t *body);
/* Copies `len` bytes. */
pt_response pt_response_bytes(int status, const char *content_type, const void *data, size_t len);
pt_response pt_response_empty(int status);
/* Frees a response that will not be sent (a handler changed its mind). */
void pt_response_destroy(pt_response *r);
/* Adds a header; returns -1 when the response is the fallback 500 or the
 * header is rejected by libmicrohttpd. */
int pt_response_header(pt_response *r, const char *name, const char *value);

/* The reason phrase for a status ("Not Found"); "Unknown" if there is none. */
const char *pt_status_title(int status);

/* Problem details.  `type` NULL means "about:blank", whose title is the
 * status's reason phrase (RFC 9457 section 4.2.1). */
json_t *pt_problem_new(int status, const char *type, const char *detail);
/* {"message", and "file", "line" or "row", "field" when present} per kept error. */
json_t *pt_errors_to_json(const pt_errors *errs);
/* Sends a problem document; steals it.  Status comes from its "status". */
pt_response pt_problem_response(json_t *problem);
/* A problem with detail from fmt; for a 5xx, server paths in it are
 * hidden (pt_text_hide_paths). */
pt_response pt_problem(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string of s even when s is not valid UTF-8: each byte that does not
 * start a character becomes U+FFFD (jansson's json_string would give NULL).
 * NULL only when out of memory or s is NULL. */
json_t *pt_json_string_lossy(const char *s);
/* Replaces every absolute file path in text (a word starting with '/' and
 * holding at least two '/') by its last segment, in place, so what a client
 * reads names no server directory: "cannot open /srv/pt/jobs/j/x.st: short
 * read" becomes "cannot open x.st: short read". */
void pt_text_hide_paths(char *text);
/* A problem with errors[] built from `errs`, plus "errors_omitted" when the
 * list kept fewer errors than it saw. */
pt_response pt_problem_errors(int status, const pt_errors *errs, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ETags (RFC 9110 section 8.8.3).  Tags are kept with their quotes and
 * optional W/ prefix, e.g. "\"12-ab34\"" or "W/\"v7\"". */
/* A strong tag derived from the bytes (length and CRC-32). */
void pt_etag_of(const void *data, size_t len, char *buf, size_t buflen);
/* A weak tag for a version number. */
void pt_etag_version(uint64_t version, char *buf, size_t buflen);
/* If-None-Match: weak comparison against every tag of the list; "*" matches
 * anything.  A NULL or malformed header matches nothing. */
int pt_etag_matches(const char *if_none_match, const char *etag);
/* Strong comparison (for If-Match): both strong and identical. */
int pt_etag_strong_equal(const char *a, const char *b);
pt_response pt_response_not_modified(const char *etag);
/* JSON with a content ETag; 304 instead when `if_none_match` matches it. */
pt_response pt_response_json_etag(int status, json_t *body, const char *if_none_match);

#endif
