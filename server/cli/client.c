/* client.c — the REST client on one reused libcurl easy handle; see
 * client.h.  Headers are collected per response (the last block counts, so
 * a 100 Continue before the real answer is skipped). */
#include "server/cli/client.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_S 120

int pt_client_init(pt_client *c, const char *base_url, const char *token)
{
    memset(c, 0, sizeof(*c));
    c->timeout_s = DEFAULT_TIMEOUT_S;
    if (!base_url || (strncmp(base_url, "http://", 7) && strncmp(base_url, "https://", 8))) {
        snprintf(c->err, sizeof c->err, "the server URL must start with http:// or https://, got '%s'",
                 base_url ? base_url : "");
        return -1;
    }
    size_t n = strlen(base_url);
    while (n > 0 && base_url[n - 1] == '/') n--;
    if (n >= sizeof c->base) {
        snprintf(c->err, sizeof c->err, "the server URL is too long");
        return -1;
    }
    memcpy(c->base, base_url, n);
    c->base[n] = '\0';
    if (token && token[0]) {
        if (strlen(token) > 512 || strpbrk(token, "\r\n")) {
            snprintf(c->err, sizeof c->err, "the token is malformed");
            return -1;
        }
        snprintf(c->auth, sizeof c->auth, "Authorization: Bearer %s", token);
    }
    const char *trace = getenv("PACKTRAIN_HTTP_TRACE");
    if (trace && trace[0]) snprintf(c->trace, sizeof c->trace, "%s", trace);
    c->curl = curl_easy_init();
    if (!c->curl) {
        snprintf(c->err, sizeof c->err, "libcurl cannot start");
        return -1;
    }
    return 0;
}

void pt_client_close(pt_client *c)
{
    if (c->curl) curl_easy_cleanup(c->curl);
    c->curl = NULL;
}

void pt_client_resp_clear(pt_client_resp *r)
{
    free(r->body);
    free(r->headers);
    json_decref(r->json);
    memset(r, 0, sizeof(*r));
}

/* Appends n bytes to a NUL-terminated growing buffer; 0 when out of memory
 * (curl then aborts the transfer with a write error). */
static int buf_append(char **buf, size_t *len, const char *p, size_t n)
{
    char *b = realloc(*buf, *len + n + 1);
    if (!b) return 0;
    memcpy(b + *len, p, n);
    *len += n;
    b[*len] = '\0';
    *buf = b;
    return 1;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    pt_client_resp *r = ud;
    /* an event stream's events go to the parser as they come; anything else
     * (a problem document) is kept whole */
    if (r->sse && strstr(r->content_type, "text/event-stream")) {
        if (r->keep_body && !buf_append(&r->body, &r->len, p, size * n)) return 0;
        if (pt_sse_parser_feed(r->sse, p, size * n) != 0) {
            r->sse_failed = 1;
            return 0;
        }
        return size * n;
    }
    return buf_append(&r->body, &r->len, p, size * n) ? size * n : 0;
}

static void header_value(const char *line, size_t len, size_t name_len, char *out, size_t cap)
{
    const char *v = line + name_len + 1;
    const char *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
    snprintf(out, cap, "%.*s", (int)(end - v), v);
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    pt_client_resp *r = ud;
    size_t len = size * n;
    if (!buf_append(&r->headers, &r->headers_len, p, len)) return 0;
    if (len >= 5 && !strncmp(p, "HTTP/", 5)) {
        r->etag[0] = r->location[0] = r->content_type[0] = '\0';
    } else if (len > 5 && !strncasecmp(p, "ETag:", 5)) {
        header_value(p, len, 4, r->etag, sizeof r->etag);
    } else if (len > 9 && !strncasecmp(p, "Location:", 9)) {
        header_value(p, len, 8, r->location, sizeof r->location);
    } else if (len > 13 && !strncasecmp(p, "Content-Type:", 13)) {
        header_value(p, len, 12, r->content_type, sizeof r->content_type);
    }
    return len;
}

static void trace_file(const pt_client *c, const char *ext, const char *data, size_t len)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%ld-%u.%s", c->trace, (long)getpid(), c->n_traced, ext);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    if (len) fwrite(data, 1, len, f);
    fclose(f);
}

/* Keeps the response in $PACKTRAIN_HTTP_TRACE (see client.h); `cut`: the
 * body ended early (a dropped or given-up stream). */
static void trace_response(pt_client *c, const char *method, const char *path, const pt_client_resp *r, int cut)
{
    if (!c->trace[0] || !r->headers_len) return;
    c->n_traced++;
    char line[2200];
    int n = snprintf(line, sizeof line, "%s %s\n", method, path);
    trace_file(c, "req", line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    trace_file(c, "headers", r->headers, r->headers_len);
    trace_file(c, "body", r->body, r->len);
    if (cut) trace_file(c, "cut", "", 0);
}

double pt_client_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* libcurl calls this at least once a second, waiting or not: the place to
 * give up on a long-poll when asked to stop or out of time. */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    pt_client *c = ud;
    if (c->stop && *c->stop) c->aborted = 1;
    else if (c->deadline > 0 && pt_client_now() >= c->deadline) c->aborted = 2;
    return c->aborted != 0;
}

static int perform(pt_client *c, const char *method, const char *path, struct curl_slist *list, pt_client_resp *out)
{
    CURL *h = c->curl;
    char url[2048];
    if (snprintf(url, sizeof url, "%s%s", c->base, path) >= (int)sizeof url) {
        snprintf(c->err, sizeof c->err, "the request URL is too long");
        return -1;
    }
    if (c->auth[0]) list = curl_slist_append(list, c->auth);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, c->timeout_s);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    /* a stream sets an idle limit instead of a whole-request one */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, out->sse ? 1L : 0L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, out->sse ? c->idle_s : 0L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
    c->aborted = 0;
    if (c->stop && *c->stop) c->aborted = 1;
    else if (c->deadline > 0 && pt_client_now() >= c->deadline) c->aborted = 2;
    if (c->aborted) {
        curl_slist_free_all(list);
        snprintf(c->err, sizeof c->err, "%s", c->aborted == 1 ? "interrupted" : "out of time");
        return -1;
    }
    int plain = !strcmp(method, "GET");
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, plain ? NULL : method);
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(list);
    if (rc != CURLE_OK && out->sse) {   /* what a stream delivered before it broke is kept */
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
        trace_response(c, method, path, out, 1);
    }
    if (rc == CURLE_ABORTED_BY_CALLBACK && c->aborted) {
        snprintf(c->err, sizeof c->err, "%s", c->aborted == 1 ? "interrupted" : "out of time");
        return -1;
    }
    if (rc != CURLE_OK) {
        snprintf(c->err, sizeof c->err, "%s %.300s: %s", method, url,
                 out->sse_failed ? "the event stream's reader stopped" : curl_easy_strerror(rc));
        return -1;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    trace_response(c, method, path, out, 0);
    if (out->body && (strstr(out->content_type, "json") != NULL))
        out->json = json_loadb(out->body, out->len, 0, NULL);
    return 0;
}

/* Clears options a previous request on the reused handle may have set. */
static void reset_body(CURL *h)
{
    curl_easy_setopt(h, CURLOPT_UPLOAD, 0L);
    curl_easy_setopt(h, CURLOPT_POST, 0L);
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
}

int pt_client_request(pt_client *c, const char *method, const char *path, const char *const *headers,
                      const char *body, size_t len, pt_client_resp *out)
{
    memset(out, 0, sizeof(*out));
    reset_body(c->curl);
    struct curl_slist *list = NULL;
    for (size_t i = 0; headers && headers[i]; i++) list = curl_slist_append(list, headers[i]);
    if (body || strcmp(method, "GET")) {
        curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? len : 0));
    }
    return perform(c, method, path, list, out);
}

int pt_client_stream(pt_client *c, const char *path, pt_sse_parser *p, long idle_s, pt_client_resp *out)
{
    memset(out, 0, sizeof(*out));
    reset_body(c->curl);
    out->sse = p;
    out->keep_body = c->trace[0] != '\0';
    c->idle_s = idle_s > 0 ? idle_s : 60;
    pt_sse_parser_restart(p);
    char last[128];
    struct curl_slist *list = curl_slist_append(NULL, "Accept: text/event-stream");
    if (p->last_id[0]) {
        snprintf(last, sizeof last, "Last-Event-ID: %s", p->last_id);
        list = curl_slist_append(list, last);
    }
    long saved = c->timeout_s;
    c->timeout_s = 0;
    int rc = perform(c, "GET", path, list, out);
    c->timeout_s = saved;
    return rc;
}

int pt_client_post_json(pt_client *c, const char *path, const json_t *body, const char *const *headers,
                        pt_client_resp *out)
{
    char *text = json_dumps(body, JSON_COMPACT);
    if (!text) {
        memset(out, 0, sizeof(*out));
        snprintf(c->err, sizeof c->err, "out of memory");
        return -1;
    }
    const char *all[16];
    size_t n = 0;
    all[n++] = "Content-Type: application/json";
    for (size_t i = 0; headers && headers[i] && n < 15; i++) all[n++] = headers[i];
    all[n] = NULL;
    int rc = pt_client_request(c, "POST", path, all, text, strlen(text), out);
    free(text);
    return rc;
}

int pt_client_upload(pt_client *c, const char *path, const char *file, pt_client_resp *out)
{
    memset(out, 0, sizeof(*out));
    FILE *f = fopen(file, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        snprintf(c->err, sizeof c->err, "cannot read %s: %s", file, strerror(errno));
        if (f) fclose(f);
        return -1;
    }
    reset_body(c->curl);
    /* UPLOAD streams from the FILE (libcurl's default read callback is
     * fread); the custom method turns its PUT into a POST. */
    curl_easy_setopt(c->curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c->curl, CURLOPT_READDATA, f);
    curl_easy_setopt(c->curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)st.st_size);
    struct curl_slist *list = curl_slist_append(NULL, "Content-Type: application/octet-stream");
    list = curl_slist_append(list, "Expect:");
    int rc = perform(c, "POST", path, list, out);
    curl_easy_setopt(c->curl, CURLOPT_READDATA, NULL);
    reset_body(c->curl);
    fclose(f);
    return rc;
}

void pt_client_describe_error(const pt_client_resp *r, char *buf, size_t cap)
{
    const char *detail = r->json ? json_string_value(json_object_get(r->json, "detail")) : NULL;
    if (!detail) {
        snprintf(buf, cap, "HTTP %ld: %.300s", r->status, r->body ? r->body : "");
        return;
    }
    size_t n = (size_t)snprintf(buf, cap, "HTTP %ld: %s", r->status, detail);
    const json_t *errs = json_object_get(r->json, "errors");
    size_t i;
    const json_t *e;
    json_array_foreach(errs, i, e) {
        if (n >= cap) break;
        json_int_t line = json_integer_value(json_object_get(e, "line"));
        json_int_t row = json_integer_value(json_object_get(e, "row"));
        const char *field = json_string_value(json_object_get(e, "field"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        n += (size_t)snprintf(buf + n, cap - n, "\n  ");
        if (n < cap && line > 0) n += (size_t)snprintf(buf + n, cap - n, "line %lld: ", (long long)line);
        if (n < cap && row > 0) n += (size_t)snprintf(buf + n, cap - n, "row %lld: ", (long long)row);
        if (n < cap && field && field[0]) n += (size_t)snprintf(buf + n, cap - n, "%s: ", field);
        if (n < cap) n += (size_t)snprintf(buf + n, cap - n, "%s", msg ? msg : "");
    }
}

int pt_client_escape(const char *s, char *out, size_t cap)
{
    char *e = curl_easy_escape(NULL, s, 0);
    int fits = e && strlen(e) < cap;
    snprintf(out, cap, "%s", fits ? e : "");
    curl_free(e);
    return fits ? 0 : -1;
}
