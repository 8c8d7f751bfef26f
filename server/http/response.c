/* response.c — JSON, problem+json and ETag responses; see response.h. */
#include "server/http/response.h"

#include "server/http/json_text.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static const pt_response fallback_500 = {500, NULL};

pt_response pt_response_bytes(int status, const char *content_type, const void *data, size_t len)
{
    struct MHD_Response *m =
        MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (!m) return fallback_500;
    if (content_type && MHD_add_response_header(m, "Content-Type", content_type) != MHD_YES) {
        MHD_destroy_response(m);
        return fallback_500;
    }
    return (pt_response){status, m};
}

/* Takes ownership of `text` (malloc'ed by jansson). */
static pt_response response_from_text(int status, const char *content_type, char *text, size_t len)
{
    struct MHD_Response *m = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!m) {
        free(text);
        return fallback_500;
    }
    if (MHD_add_response_header(m, "Content-Type", content_type) != MHD_YES) {
        MHD_destroy_response(m);
        return fallback_500;
    }
    return (pt_response){status, m};
}

/* Serializes compactly (reals in their shortest round-trip form,
 * json_text.h) and appends a newline so `curl` output ends cleanly. */
static char *json_text(const json_t *body, size_t *len)
{
    size_t n = 0;
    char *s = pt_json_text(body, &n);
    if (!s) return NULL;
    char *t = realloc(s, n + 2);
    if (!t) {
        free(s);
        return NULL;
    }
    t[n] = '\n';
    t[n + 1] = '\0';
    *len = n + 1;
    return t;
}

static pt_response json_with_type(int status, json_t *body, const char *content_type)
{
    if (!body) return fallback_500;
    size_t len = 0;
    char *text = json_text(body, &len);
    json_decref(body);
    if (!text) return fallback_500;
    return response_from_text(status, content_type, text, len);
}

pt_response pt_response_json(int status, json_t *body)
{
    return json_with_type(status, body, PT_CT_JSON);
}

pt_response pt_response_empty(int status)
{
    struct MHD_Response *m = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!m) return fallback_500;
    return (pt_response){status, m};
}

void pt_response_destroy(pt_response *r)
{
    if (r->mhd) MHD_destroy_response(r->mhd);
    r->mhd = NULL;
    r->status = 0;
}

int pt_response_header(pt_response *r, const char *name, const char *value)
{
    if (!r->mhd) return -1;
    return MHD_add_response_header(r->mhd, name, value) == MHD_YES ? 0 : -1;
}

const char *pt_status_title(int status)
{
    /* RFC 9110 renamed 413; libmicrohttpd 0.9.75 still says "Payload Too Large". */
    if (status == 413) return "Content Too Large";
    if (status == 422) return "Unprocessable Content";
    const char *s = MHD_get_reason_phrase_for((unsigned)status);
    return (s && s[0]) ? s : "Unknown";
}

/* A JSON string of s even when s is not UTF-8, which jansson refuses
 * (json_string gives NULL): details and error messages quote the bytes of
 * uploads and request paths, or cut a character in two with "%.40s".  Such
 * a message used to vanish from its problem document (found with
 * tests/fuzz/fuzz_xyz.c); now each byte that jansson does not take as (the
 * start of) a character becomes U+FFFD. */
json_t *pt_json_string_lossy(const char *s)
{
    json_t *j = json_string(s);
    if (j || !s) return j;
    size_t n = strlen(s), k = 0;
    char *out = malloc(3 * n + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                   : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        json_t *one = len && i + len <= n ? json_stringn(s + i, len) : NULL;   /* jansson decides */
        if (one) {
            memcpy(out + k, s + i, len);
            k += len;
            i += len;
            json_decref(one);
        } else {
            memcpy(out + k, "\xef\xbf\xbd", 3);
            k += 3;
            i++;
        }
    }
    j = json_stringn(out, k);
    free(out);
    return j;
}

json_t *pt_problem_new(int status, const char *type, const char *detail)
{
    json_t *p = json_object();
    if (!p) return NULL;
    json_object_set_new(p, "type", json_string(type ? type : "about:blank"));
    json_object_set_new(p, "title", json_string(pt_status_title(status)));
    json_object_set_new(p, "status", json_integer(status));
    if (detail) json_object_set_new(p, "detail", pt_json_string_lossy(detail));
    return p;
}

json_t *pt_errors_to_json(const pt_errors *errs)
{
    json_t *arr = json_array();
    if (!arr) return NULL;
    for (size_t i = 0; i < errs->kept; i++) {
        const pt_error *e = &errs->items[i];
        json_t *o = json_object();
        if (!o) break;
        if (e->file[0]) json_object_set_new(o, "file", pt_json_string_lossy(e->file));
        if (e->line > 0) json_object_set_new(o, "line", json_integer(e->line));
        if (e->row > 0) json_object_set_new(o, "row", json_integer(e->row));
        if (e->field[0]) json_object_set_new(o, "field", pt_json_string_lossy(e->field));
        json_object_set_new(o, "message", pt_json_string_lossy(e->message));
        json_array_append_new(arr, o);
    }
    return arr;
}

pt_response pt_problem_response(json_t *problem)
{
    if (!problem) return fallback_500;
    int status = (int)json_integer_value(json_object_get(problem, "status"));
    if (status < 400 || status > 599) status = 500;
    return json_with_type(status, problem, PT_CT_PROBLEM);
}

/* A path word ends at white space, quotes, brackets and separators, and at
 * a ':' that ends a clause ("PATH: reason"). */
static int path_char(const char *p)
{
    unsigned char c = (unsigned char)*p;
    if (!c || c <= ' ' || strchr("'\"()[]{}<>,;`", c)) return 0;
    return c != ':' || (p[1] && p[1] != ' ');
}

void pt_text_hide_paths(char *text)
{
    char *out = text;
    for (const char *p = text; *p;) {
        int starts = *p == '/' && (p == text || strchr(" \t'\"(=[", p[-1]));
        size_t n = 0, slashes = 0;
        if (starts)
            while (path_char(p + n)) slashes += p[n++] == '/';
        if (starts && slashes >= 2) {
            size_t last = n;   /* the last segment that is not empty */
            while (last > 0 && p[last - 1] == '/') last--;
            size_t begin = last;
            while (begin > 0 && p[begin - 1] != '/') begin--;
            memmove(out, p + begin, last - begin);
            out += last - begin;
            p += n;
            continue;
        }
        *out++ = *p++;
    }
    *out = '\0';
}

pt_response pt_problem(int status, const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    /* a server-side failure speaks of the server's files: by name only */
    if (status >= 500) pt_text_hide_paths(detail);
    return pt_problem_response(pt_problem_new(status, NULL, detail));
}

pt_response pt_problem_errors(int status, const pt_errors *errs, const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    json_t *p = pt_problem_new(status, NULL, detail);
    if (!p) return fallback_500;
    json_object_set_new(p, "errors", pt_errors_to_json(errs));
    if (errs->total > errs->kept)
        json_object_set_new(p, "errors_omitted", json_integer((json_int_t)(errs->total - errs->kept)));
    return pt_problem_response(p);
}

/* --- ETags ----------------------------------------------------------------- */

void pt_etag_of(const void *data, size_t len, char *buf, size_t buflen)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    const unsigned char *p = data;
    size_t left = len;
    while (left > 0) {   /* crc32 takes a uInt length */
        uInt n = left > (1u << 30) ? (1u << 30) : (uInt)left;
        crc = crc32(crc, p, n);
        p += n;
        left -= n;
    }
    snprintf(buf, buflen, "\"%zx-%08lx\"", len, (unsigned long)crc);
}

void pt_etag_version(uint64_t version, char *buf, size_t buflen)
{
    snprintf(buf, buflen, "W/\"v%" PRIu64 "\"", version);
}

static const char *etag_opaque(const char *tag)
{
    return strncmp(tag, "W/", 2) == 0 ? tag + 2 : tag;
}

int pt_etag_matches(const char *if_none_match, const char *etag)
{
    if (!if_none_match || !etag) return 0;
    const char *want = etag_opaque(etag);
    size_t want_len = strlen(want);
    const char *p = if_none_match;
    p += strspn(p, " \t");
    if (*p == '*') return p[1 + strspn(p + 1, " \t")] == '\0';
    for (;;) {
        p += strspn(p, " \t,");
        if (!*p) return 0;
        if (strncmp(p, "W/", 2) == 0) p += 2;
        if (*p != '"') return 0;   /* malformed list: treat as no match */
        const char *close = strchr(p + 1, '"');
        if (!close) return 0;
        size_t n = (size_t)(close - p) + 1;
        if (n == want_len && memcmp(p, want, n) == 0) return 1;
        p = close + 1;
    }
}

int pt_etag_strong_equal(const char *a, const char *b)
{
    if (!a || !b || a[0] != '"' || b[0] != '"') return 0;
    return strcmp(a, b) == 0;
}

pt_response pt_response_not_modified(const char *etag)
{
    pt_response r = pt_response_empty(304);
    if (etag) pt_response_header(&r, "ETag", etag);
    return r;
}

pt_response pt_response_json_etag(int status, json_t *body, const char *if_none_match)
{
    if (!body) return fallback_500;
    size_t len = 0;
    char *text = json_text(body, &len);
    json_decref(body);
    if (!text) return fallback_500;
    char etag[64];
    pt_etag_of(text, len, etag, sizeof etag);
    if (pt_etag_matches(if_none_match, etag)) {
        free(text);
        return pt_response_not_modified(etag);
    }
    pt_response r = response_from_text(status, PT_CT_JSON, text, len);
    if (pt_response_header(&r, "ETag", etag) != 0 && r.mhd) {
        MHD_destroy_response(r.mhd);
        return fallback_500;
    }
    return r;
}
