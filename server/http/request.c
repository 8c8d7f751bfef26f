/* request.c — request parsing and accessors; see request.h.
 *
 * The server keeps the raw request-target (libmicrohttpd decodes the path in
 * place before routing, which would turn an encoded "/" inside an id into a
 * path separator), so the path is split first and each segment decoded alone,
 * and the query is decoded here with the same strict rules. */
#include "server/http/request.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

pt_request *pt_request_new(const char *target)
{
    pt_request *req = calloc(1, sizeof(*req));
    if (!req) return NULL;
    req->target = strdup(target ? target : "");
    if (!req->target) {
        free(req);
        return NULL;
    }
    req->route = "";
    req->upload.fd = -1;
    pt_errors_init(&req->errors, 20);
    return req;
}

char *pt_url_decode(const char *s, size_t len, int plus_is_space)
{
    /* RFC 3986 wants two hex digits after every '%'; libmicrohttpd's decoder
     * passes a broken escape through as text, so that is refused here */
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\0') return NULL;
        if (s[i] == '%' && !(i + 2 < len && isxdigit((unsigned char)s[i + 1]) &&
                             isxdigit((unsigned char)s[i + 2])))
            return NULL;
    }
    char *out = strndup(s, len);
    if (!out) return NULL;
    /* a query is form-encoded: '+' is a space (an encoded '+' is %2B) */
    if (plus_is_space)
        for (char *p = out; (p = strchr(p, '+')); p++) *p = ' ';
    size_t n = MHD_http_unescape(out);
    if (strlen(out) != n) {   /* an encoded NUL byte (%00) */
        free(out);
        return NULL;
    }
    return out;
}

static int query_add(pt_request *req, const char *piece, size_t len, char *err, size_t errlen)
{
    const char *eq = memchr(piece, '=', len);
    size_t klen = eq ? (size_t)(eq - piece) : len;
    char *key = pt_url_decode(piece, klen, 1);
    char *val = eq ? pt_url_decode(eq + 1, len - klen - 1, 1) : strdup("");
    if (!key || !val) {
        snprintf(err, errlen, "malformed percent-encoding in query parameter '%.*s'", (int)klen, piece);
        free(key);
        free(val);
        return -1;
    }
    pt_kv *q = realloc(req->query, (req->n_query + 1) * sizeof(*q));
    if (!q) {
        snprintf(err, errlen, "out of memory");
        free(key);
        free(val);
        return -1;
    }
    req->query = q;
    q[req->n_query].name = key;
    q[req->n_query].value = val;
    req->n_query++;
    return 0;
}

int pt_request_parse(pt_request *req, char *err, size_t errlen)
{
    const char *t = req->target;
    if (t[0] != '/') {
        snprintf(err, errlen, "request target must be an absolute path starting with '/'");
        return -1;
    }
    size_t plen = strcspn(t, "?#");
    req->path = strndup(t, plen);
    if (!req->path) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (t[plen] != '?') return 0;
    const char *q = t + plen + 1;
    const char *end = q + strcspn(q, "#");
    while (q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *stop = amp ? amp : end;
        if (stop > q && query_add(req, q, (size_t)(stop - q), err, errlen) != 0) return -1;
        q = stop + (amp ? 1 : 0);
    }
    return 0;
}

void pt_request_free(pt_request *req)
{
    if (!req) return;
    for (size_t i = 0; i < req->n_params; i++) free(req->params[i].value);
    for (size_t i = 0; i < req->n_query; i++) {
        free((char *)req->query[i].name);
        free(req->query[i].value);
    }
    free(req->query);
    pt_upload_close(&req->upload);
    pt_body_close(&req->body);
    json_decref(req->json);
    pt_errors_close(&req->errors);
    free(req->path);
    free(req->target);
    free(req->method_copy);
    free(req);
}

const char *pt_request_param(const pt_request *req, const char *name)
{
    for (size_t i = 0; i < req->n_params; i++)
        if (strcmp(req->params[i].name, name) == 0) return req->params[i].value;
    return NULL;
}

const char *pt_request_query(const pt_request *req, const char *name)
{
    for (size_t i = 0; i < req->n_query; i++)
        if (strcmp(req->query[i].name, name) == 0) return req->query[i].value;
    return NULL;
}

const char *pt_request_header(const pt_request *req, const char *name)
{
    if (!req->conn) return NULL;
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

long pt_request_query_long(pt_request *req, const char *name, long def, long min, long max)
{
    const char *s = pt_request_query(req, name);
    if (!s) return def;
    char field[PT_ERR_FIELD_MAX];
    snprintf(field, sizeof field, "query.%s", name);
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (s[0] == '\0' || *end != '\0' || errno == ERANGE) {
        pt_errors_add(&req->errors, "", 0, field, "'%s' is not an integer", s);
        return def;
    }
    if (v < min || v > max) {
        pt_errors_add(&req->errors, "", 0, field, "%ld is out of range [%ld, %ld]", v, min, max);
        return def;
    }
    return v;
}

pt_response pt_request_problem(pt_request *req)
{
    return pt_problem_errors(400, &req->errors, "%zu invalid request parameter%s", req->errors.total,
                             req->errors.total == 1 ? "" : "s");
}

int pt_request_keep_body(pt_request *req, const char *dest, char *err, size_t errlen)
{
    if (!req->body_path) {
        snprintf(err, errlen, "this request has no body on disk");
        return -1;
    }
    if (pt_upload_keep(&req->upload, dest, err, errlen) != 0) return -1;
    req->body_path = NULL;
    return 0;
}
