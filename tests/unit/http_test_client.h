/* http_test_client.h — a small libcurl client and server fixture for the HTTP
 * tests: one call per request, the status, headers and body collected.
 *
 * Header-only (static inline) so each test binary that talks HTTP includes it
 * and the others do not link libcurl's symbols. */
#ifndef PT_HTTP_TEST_CLIENT_H
#define PT_HTTP_TEST_CLIENT_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/http/http.h"

/* cmocka group setup and teardown of every test binary that talks HTTP:
 * libcurl's global state, once per process. */
static inline int tc_global_setup(void **state)
{
    (void)state;
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static inline int tc_global_teardown(void **state)
{
    (void)state;
    curl_global_cleanup();
    return 0;
}

typedef struct tc_resp {
    CURLcode rc;
    long status;
    char *body;
    size_t len;
    char *headers;   /* the last header block, "Name: value\r\n" lines */
    size_t hlen;
} tc_resp;

static inline int tc_append(char **buf, size_t *len, const char *p, size_t n)
{
    char *b = realloc(*buf, *len + n + 1);
    if (!b) return -1;
    memcpy(b + *len, p, n);
    *len += n;
    b[*len] = '\0';
    *buf = b;
    return 0;
}

static inline size_t tc_on_body(char *p, size_t size, size_t n, void *ud)
{
    tc_resp *r = ud;
    return tc_append(&r->body, &r->len, p, size * n) == 0 ? size * n : 0;
}

static inline size_t tc_on_header(char *p, size_t size, size_t n, void *ud)
{
    tc_resp *r = ud;
    if (size * n >= 5 && !strncmp(p, "HTTP/", 5)) r->hlen = 0;   /* a new block (after 100 Continue) */
    return tc_append(&r->headers, &r->hlen, p, size * n) == 0 ? size * n : 0;
}

/* Sets the common options and performs; `headers` is NULL-terminated. */
static inline CURLcode tc_perform(CURL *c, const char *method, const char *url, const char *const *headers,
                                  tc_resp *out)
{
    memset(out, 0, sizeof(*out));
    struct curl_slist *list = NULL;
    for (size_t i = 0; headers && headers[i]; i++) list = curl_slist_append(list, headers[i]);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, tc_on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, tc_on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, out);
    if (!strcmp(method, "HEAD")) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    /* Explicit for everything but GET/HEAD, so a POST without a body is a
     * POST, and reset otherwise, since handles are reused. */
    int plain = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, plain ? NULL : method);
    out->rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(list);
    return out->rc;
}

/* One request on a fresh handle.  `body` NULL sends none.  A body sent
 * without a Content-Type in `headers` gets the one a client of the API
 * sends: application/json for a JSON text ('{' or '[' first),
 * application/octet-stream for a file (libcurl would say it is a form,
 * which JSON routes refuse: issue 17 F9). */
static inline CURLcode tc_request(const char *method, const char *url, const char *const *headers,
                                  const char *body, size_t len, tc_resp *out)
{
    CURL *c = curl_easy_init();
    const char *with_type[40];
    if (body) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        size_t n = 0;
        int typed = 0;
        for (; headers && headers[n] && n < 38; n++) {
            with_type[n] = headers[n];
            typed |= !strncasecmp(headers[n], "Content-Type:", 13);
        }
        if (!typed) {
            size_t i = 0;
            while (i < len && (body[i] == ' ' || body[i] == '\n')) i++;
            int json = i == len || body[i] == '{' || body[i] == '[';   /* empty: a JSON route's test */
            with_type[n++] = json ? "Content-Type: application/json" : "Content-Type: application/octet-stream";
            with_type[n] = NULL;
            headers = with_type;
        }
    }
    CURLcode rc = tc_perform(c, method, url, headers, out);
    curl_easy_cleanup(c);
    return rc;
}

static inline CURLcode tc_get(const char *url, tc_resp *out)
{
    return tc_request("GET", url, NULL, NULL, 0, out);
}

/* Copies the value of header `name` (case-insensitive) into out; 0 if found. */
static inline int tc_header(const tc_resp *r, const char *name, char *out, size_t cap)
{
    size_t nlen = strlen(name);
    for (const char *p = r->headers; p && *p;) {
        const char *eol = strstr(p, "\r\n");
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len > nlen && p[nlen] == ':' && !strncasecmp(p, name, nlen)) {
            const char *v = p + nlen + 1;
            while (*v == ' ') v++;
            snprintf(out, cap, "%.*s", (int)(len - (size_t)(v - p)), v);
            return 0;
        }
        p += len + (eol ? 2 : 0);
    }
    return -1;
}

static inline json_t *tc_json(const tc_resp *r)
{
    return r->body ? json_loadb(r->body, r->len, 0, NULL) : NULL;
}

static inline void tc_free(tc_resp *r)
{
    free(r->body);
    free(r->headers);
    memset(r, 0, sizeof(*r));
}

/* A running server on 127.0.0.1 with an ephemeral port. */
typedef struct tc_server {
    pt_http http;
    pt_router router;
    char base[64];   /* "http://127.0.0.1:PORT" */
} tc_server;

static inline int tc_server_start(tc_server *s, pt_http_config *cfg)
{
    pt_http_config defaults;
    if (!cfg) {
        pt_http_config_defaults(&defaults);
        cfg = &defaults;
    }
    cfg->bind_address = "127.0.0.1";
    cfg->port = 0;
    char err[256];
    if (pt_http_init(&s->http, cfg, &s->router, err, sizeof err) != 0) {
        fprintf(stderr, "server: %s\n", err);
        return -1;
    }
    snprintf(s->base, sizeof s->base, "http://127.0.0.1:%u", pt_http_port(&s->http));
    return 0;
}

static inline void tc_url(const tc_server *s, const char *path, char *out, size_t cap)
{
    snprintf(out, cap, "%s%s", s->base, path);
}

#endif
