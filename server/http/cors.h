/* cors.h — optional CORS (Cross-Origin Resource Sharing), off by default:
 * `packtrain serve --cors-origins LIST` ($PACKTRAIN_CORS_ORIGINS) names the
 * origins whose pages' scripts may call the API.
 *
 * LIST is comma-separated origins as browsers send them
 * ("https://app.example:8443"), or "*" for any (except "null", the origin
 * of sandboxed frames and local files, which must be listed to be allowed).
 * For a listed Origin:
 *   - the browser-safety check of a server without tokens (http.c: foreign
 *     Origins are refused) lets the request through; the Host check stays;
 *   - every answer carries Access-Control-Allow-Origin (that origin) and
 *     Access-Control-Expose-Headers (what a script may read);
 *   - a preflight (OPTIONS with Access-Control-Request-Method) is answered
 *     by the router's 204 with Allow, plus Access-Control-Allow-Methods (the
 *     path's methods), -Allow-Headers and -Max-Age.
 * With CORS on, every answer carries Vary: Origin (it depends on it).  With
 * CORS off (LIST NULL or empty) nothing here runs: answers are unchanged. */
#ifndef PT_CORS_H
#define PT_CORS_H

#include "server/http/request.h"

/* Whether CORS is on: LIST names at least one origin. */
int pt_cors_enabled(const char *list);

/* Whether `origin` (a request's Origin header) is one of LIST's. */
int pt_cors_origin_allowed(const char *list, const char *origin);

/* Adds the CORS headers of the answer `resp` to `req` (nothing when CORS
 * is off).  Call once, before the answer is queued. */
void pt_cors_headers(const char *list, const pt_request *req, pt_response *resp);

#endif
