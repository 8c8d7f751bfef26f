/* router.c — pattern routing and bearer authentication; see router.h. */
#include "server/http/router.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum seg_kind { SEG_LITERAL, SEG_PARAM, SEG_TAIL };

typedef struct seg {
    enum seg_kind kind;
    char *text;             /* literal text or parameter name */
} seg;

struct pt_route_entry {
    pt_route route;         /* method and pattern point at the copies below */
    char *method;
    char *pattern;
    seg *segs;
    size_t n_segs;
};

#define MAX_PATH_SEGMENTS 64
#define AUTH_REALM "packtrain"

void pt_router_init(pt_router *r)
{
    memset(r, 0, sizeof(*r));
}

static void entry_free(struct pt_route_entry *e)
{
    for (size_t i = 0; i < e->n_segs; i++) free(e->segs[i].text);
    free(e->segs);
    free(e->method);
    free(e->pattern);
}

void pt_router_close(pt_router *r)
{
    for (size_t i = 0; i < r->n_routes; i++) entry_free(&r->routes[i]);
    free(r->routes);
    memset(r, 0, sizeof(*r));
}

void pt_router_set_auth(pt_router *r, pt_auth_fn fn, void *ctx)
{
    r->auth = fn;
    r->auth_ctx = ctx;
}

static int valid_param_name(const char *s, size_t n)
{
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_') return 0;
    return 1;
}

/* Splits a pattern into segments; -1 with a message when malformed. */
static int pattern_parse(struct pt_route_entry *e, const char *pattern, char *err, size_t errlen)
{
    if (pattern[0] != '/') {
        snprintf(err, errlen, "route pattern '%s' must start with '/'", pattern);
        return -1;
    }
    size_t n_params = 0;
    const char *p = pattern + 1;
    for (;;) {
        size_t len = strcspn(p, "/");
        if (e->n_segs > 0 && e->segs[e->n_segs - 1].kind == SEG_TAIL) {
            snprintf(err, errlen, "route pattern '%s': '{name...}' must be the last segment", pattern);
            return -1;
        }
        seg s = {SEG_LITERAL, NULL};
        if (len >= 2 && p[0] == '{' && p[len - 1] == '}') {
            size_t nlen = len - 2;
            if (nlen > 3 && strncmp(p + 1 + nlen - 3, "...", 3) == 0) {
                s.kind = SEG_TAIL;
                nlen -= 3;
            } else {
                s.kind = SEG_PARAM;
            }
            if (!valid_param_name(p + 1, nlen)) {
                snprintf(err, errlen, "route pattern '%s': bad parameter name in '%.*s'", pattern,
                         (int)len, p);
                return -1;
            }
            if (++n_params > PT_REQ_MAX_PARAMS) {
                snprintf(err, errlen, "route pattern '%s': more than %d parameters", pattern,
                         PT_REQ_MAX_PARAMS);
                return -1;
            }
            s.text = strndup(p + 1, nlen);
        } else {
            if (memchr(p, '{', len) || memchr(p, '}', len) || memchr(p, '%', len)) {
                snprintf(err, errlen, "route pattern '%s': bad segment '%.*s'", pattern, (int)len, p);
                return -1;
            }
            s.text = strndup(p, len);
        }
        seg *segs = s.text ? realloc(e->segs, (e->n_segs + 1) * sizeof(*segs)) : NULL;
        if (!segs) {
            free(s.text);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        e->segs = segs;
        e->segs[e->n_segs++] = s;
        if (p[len] != '/') break;
        p += len + 1;
    }
    for (size_t i = 0; i < e->n_segs; i++)
        for (size_t j = 0; j < i; j++)
            if (e->segs[i].kind != SEG_LITERAL && e->segs[j].kind != SEG_LITERAL &&
                strcmp(e->segs[i].text, e->segs[j].text) == 0) {
                snprintf(err, errlen, "route pattern '%s': parameter '%s' appears twice", pattern,
                         e->segs[i].text);
                return -1;
            }
    return 0;
}

static int valid_method(const char *m)
{
    if (!m || !m[0]) return 0;
    for (const char *p = m; *p; p++)
        if (*p < 'A' || *p > 'Z') return 0;
    return 1;
}

int pt_router_add(pt_router *r, const pt_route *route, char *err, size_t errlen)
{
    if (!valid_method(route->method)) {
        snprintf(err, errlen, "route method '%s' must be upper-case letters",
                 route->method ? route->method : "(null)");
        return -1;
    }
    if (!route->pattern || !route->handler) {
        snprintf(err, errlen, "route %s needs a pattern and a handler", route->method);
        return -1;
    }
    for (size_t i = 0; i < r->n_routes; i++)
        if (!strcmp(r->routes[i].method, route->method) && !strcmp(r->routes[i].pattern, route->pattern)) {
            snprintf(err, errlen, "route %s %s is already defined", route->method, route->pattern);
            return -1;
        }
    struct pt_route_entry e = {.route = *route};
    if (pattern_parse(&e, route->pattern, err, errlen) != 0) {
        entry_free(&e);
        return -1;
    }
    e.method = strdup(route->method);
    e.pattern = strdup(route->pattern);
    if (r->n_routes == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        struct pt_route_entry *routes = realloc(r->routes, cap * sizeof(*routes));
        if (routes) {
            r->routes = routes;
            r->cap = cap;
        }
    }
    if (!e.method || !e.pattern || r->n_routes == r->cap) {
        entry_free(&e);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    e.route.method = e.method;
    e.route.pattern = e.pattern;
    r->routes[r->n_routes++] = e;
    return 0;
}

static int entry_is_tail(const struct pt_route_entry *e)
{
    return e->n_segs > 0 && e->segs[e->n_segs - 1].kind == SEG_TAIL;
}

/* Does the entry's pattern accept these decoded segments? */
static int segments_match(const struct pt_route_entry *e, char **segs, size_t n)
{
    size_t i = 0;
    for (; i < e->n_segs; i++) {
        const seg *s = &e->segs[i];
        if (s->kind == SEG_TAIL) {
            /* The rest becomes one value joined by '/', so a segment holding
             * an encoded '/' or an empty inner segment ("a//b") would change
             * its meaning; such paths do not match. */
            for (size_t k = i; k < n; k++)
                if (strchr(segs[k], '/') || (segs[k][0] == '\0' && k + 1 < n)) return 0;
            return 1;
        }
        if (i >= n) return 0;
        if (s->kind == SEG_LITERAL && strcmp(s->text, segs[i]) != 0) return 0;
        if (s->kind == SEG_PARAM && segs[i][0] == '\0') return 0;
    }
    return i == n;
}

static char *join_segments(char **segs, size_t n)
{
    size_t len = 1;
    for (size_t k = 0; k < n; k++) len += strlen(segs[k]) + 1;
    char *out = malloc(len);
    if (!out) return NULL;
    out[0] = '\0';
    for (size_t k = 0; k < n; k++) {
        if (k) strcat(out, "/");
        strcat(out, segs[k]);
    }
    return out;
}

static int bind_params(const struct pt_route_entry *e, char **segs, size_t n, pt_match *m)
{
    for (size_t i = 0; i < e->n_segs; i++) {
        const seg *s = &e->segs[i];
        if (s->kind == SEG_LITERAL) continue;
        char *v = s->kind == SEG_TAIL ? join_segments(segs + i, n - i) : strdup(segs[i]);
        if (!v) return -1;
        m->params[m->n_params].name = s->text;
        m->params[m->n_params].value = v;
        m->n_params++;
    }
    return 0;
}

static void allow_add(char *allow, size_t cap, const char *method)
{
    size_t mlen = strlen(method);
    for (const char *p = allow; *p;) {   /* already listed? */
        size_t len = strcspn(p, ",");
        if (len == mlen && !strncmp(p, method, len)) return;
        p += len;
        p += strspn(p, ", ");
    }
    size_t used = strlen(allow);
    snprintf(allow + used, cap - used, "%s%s", used ? ", " : "", method);
}

static void segments_free(char **segs, size_t n)
{
    for (size_t k = 0; k < n; k++) free(segs[k]);
}

static pt_match_result bad_path(pt_match *m, char **segs, size_t n, const char *fmt, const char *arg)
{
    snprintf(m->error, sizeof m->error, fmt, arg);
    segments_free(segs, n);
    return PT_MATCH_BAD_PATH;
}

pt_match_result pt_router_match(const pt_router *r, const char *method, const char *raw_path,
                                pt_match *m)
{
    memset(m, 0, sizeof(*m));
    char *segs[MAX_PATH_SEGMENTS];
    size_t n = 0;
    if (raw_path[0] != '/') return bad_path(m, segs, n, "path '%s' must start with '/'", raw_path);
    for (const char *p = raw_path + 1;; ) {
        size_t len = strcspn(p, "/");
        if (n == MAX_PATH_SEGMENTS) return bad_path(m, segs, n, "path has more than %s segments", "64");
        segs[n] = pt_url_decode(p, len, 0);
        if (!segs[n]) return bad_path(m, segs, n, "malformed percent-encoding in path '%s'", raw_path);
        n++;
        if (!strcmp(segs[n - 1], ".") || !strcmp(segs[n - 1], ".."))
            return bad_path(m, segs, n, "path '%s' contains a '.' or '..' segment", raw_path);
        if (p[len] != '/') break;
        p += len + 1;
    }
    const char *want = strcmp(method, "HEAD") == 0 ? "GET" : method;
    pt_match_result res = PT_MATCH_NO_PATH;
    for (size_t i = 0; i < r->n_routes; i++) {
        const struct pt_route_entry *e = &r->routes[i];
        if (!segments_match(e, segs, n)) continue;
        if (!strcmp(e->method, want)) {
            if (bind_params(e, segs, n, m) != 0) {
                pt_match_clear(m);
                return bad_path(m, segs, n, "%s", "out of memory");
            }
            m->route = &e->route;
            m->entry = e;
            res = PT_MATCH_FOUND;
            break;
        }
        if (!entry_is_tail(e)) {
            allow_add(m->allow, sizeof m->allow, e->method);
            if (!strcmp(e->method, "GET")) allow_add(m->allow, sizeof m->allow, "HEAD");
            res = PT_MATCH_NO_METHOD;
        }
    }
    segments_free(segs, n);
    return res;
}

void pt_match_clear(pt_match *m)
{
    for (size_t i = 0; i < m->n_params; i++) free(m->params[i].value);
    m->n_params = 0;
}

/* --- authentication ---------------------------------------------------------- */

static int is_token68_char(char c)
{
    return c && (isalnum((unsigned char)c) || strchr("-._~+/", c) != NULL);
}

int pt_bearer_parse(const char *authorization, char *token, size_t len)
{
    const char *p = authorization;
    if (strncasecmp(p, "Bearer", 6) != 0 || (p[6] != ' ' && p[6] != '\t')) return -1;
    p += 6;
    p += strspn(p, " \t");
    size_t n = 0;
    while (is_token68_char(p[n])) n++;
    while (p[n] == '=') n++;
    if (n == 0 || p[n + strspn(p + n, " \t")] != '\0' || n >= len) return -1;
    memcpy(token, p, n);
    token[n] = '\0';
    return 0;
}

/* WWW-Authenticate values are quoted strings: keep the reason printable and
 * free of quotes and backslashes. */
static void quoted_safe(char *dst, size_t cap, const char *src)
{
    size_t n = 0;
    for (; *src && n + 1 < cap; src++)
        dst[n++] = (*src == '"' || *src == '\\' || (unsigned char)*src < 0x20) ? '\'' : *src;
    dst[n] = '\0';
}

static pt_response unauthorized(const char *error, const char *why, const char *detail)
{
    pt_response resp = pt_problem(401, "%s", detail);
    char value[400];
    if (error) {
        char safe[256];
        quoted_safe(safe, sizeof safe, why);
        snprintf(value, sizeof value, "Bearer realm=\"%s\", error=\"%s\", error_description=\"%s\"",
                 AUTH_REALM, error, safe);
    } else {
        snprintf(value, sizeof value, "Bearer realm=\"%s\"", AUTH_REALM);
    }
    pt_response_header(&resp, "WWW-Authenticate", value);
    return resp;
}

int pt_router_authenticate(const pt_router *r, const pt_route *route, pt_request *req,
                           pt_response *resp)
{
    memset(&req->auth, 0, sizeof(req->auth));
    if (!r->auth || (route->flags & PT_ROUTE_PUBLIC)) return 0;
    char token[512];
    const char *header = pt_request_header(req, "Authorization");
    const char *query = pt_request_query(req, "access_token");
    int readonly = !strcmp(req->method, "GET") || !strcmp(req->method, "HEAD");
    if (header) {
        if (pt_bearer_parse(header, token, sizeof token) != 0) {
            *resp = unauthorized("invalid_request", "malformed bearer credential",
                                 "the Authorization header is not a bearer token; "
                                 "send 'Authorization: Bearer <token>'");
            return -1;
        }
    } else if (query && readonly && query[0] && strlen(query) < sizeof token) {
        snprintf(token, sizeof token, "%s", query);
    } else {
        *resp = unauthorized(NULL, NULL,
                             "authentication required: send 'Authorization: Bearer <token>'");
        return -1;
    }
    pt_auth_info info;
    memset(&info, 0, sizeof(info));
    char why[200] = "";
    pt_auth_result rc = r->auth(r->auth_ctx, token, &info, why, sizeof why);
    if (rc == PT_AUTH_OK) {
        req->auth = info;
        return 0;
    }
    if (rc == PT_AUTH_ERROR) {
        *resp = pt_problem(500, "cannot verify the token: %s", why[0] ? why : "verifier failed");
        return -1;
    }
    if (!why[0]) snprintf(why, sizeof why, "the token is not valid");
    *resp = unauthorized("invalid_token", why, why);
    return -1;
}
