/* fuzz_http.c — what packtrain's own HTTP code parses of a request
 * (libmicrohttpd parses the request line and headers; these take it from
 * there): the request-target split into path and decoded query
 * (request.c: pt_request_parse, pt_url_decode, pt_request_query_long), the
 * route match with its decoded path parameters against the API's real route
 * table (router.c: pt_router_match, registered by pt_api_register), the
 * bearer token of the Authorization header and the access_token query
 * parameter (pt_bearer_parse, pt_router_authenticate), If-None-Match lists
 * (pt_etag_matches), Last-Event-ID (pt_sse_last_event_id), the page_token
 * of the list routes (store.c: pt_store_page_token_decode) and the
 * dashboard's file paths (pt_static_serve, on a small web root made at
 * start).
 *
 * Input: [method index u8] target '\n' header value.  Promises checked: a
 * decoded string is never longer than its source; a match binds at most
 * PT_REQ_MAX_PARAMS values; a token accepted is non-empty and of token68
 * characters; a page token accepted encodes back to the same text; a static
 * path that resolves outside the web root is 404. */
#include <limits.h>
#include <microhttpd.h>
#include <sys/stat.h>

#include "server/api/routes.h"
#include "server/app.h"
#include "server/http/router.h"
#include "server/http/sse.h"
#include "server/http/static.h"
#include "store/store_internal.h"
#include "tests/fuzz/fuzz.h"

static pt_app *app;
static pt_static web;
static char web_dir[64];

static pt_auth_result fake_auth(void *ctx, const char *token, pt_auth_info *out, char *why, size_t whylen)
{
    (void)ctx;
    FUZZ_CHECK(token[0] != '\0');
    if (!strcmp(token, "good")) {
        snprintf(out->owner, sizeof out->owner, "alice");
        return PT_AUTH_OK;
    }
    snprintf(why, whylen, "unknown token '%.20s'", token);
    return token[0] == 'x' ? PT_AUTH_ERROR : PT_AUTH_DENIED;
}

static void remove_web_root(void)
{
    char path[PATH_MAX];
    static const char *const files[] = {"index.html", "app.js", "sub/index.html", "out", "sub", ""};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", web_dir, files[i]);
        remove(path);
    }
    snprintf(path, sizeof path, "%s.secret", web_dir);
    remove(path);
}

/* web root: index.html, app.js, sub/index.html, and "out", a symlink to a
 * file next to the root (which must never be served). */
static void setup(void)
{
    app = calloc(1, sizeof *app);
    FUZZ_CHECK(app != NULL);
    pt_router_init(&app->router);
    app->has_web = 1;
    char err[256];
    if (pt_api_register(app, err, sizeof err) != 0) {
        fprintf(stderr, "pt_api_register: %s\n", err);
        abort();
    }
    pt_router_set_auth(&app->router, fake_auth, NULL);
    snprintf(web_dir, sizeof web_dir, "/tmp/pt-fuzz-web-XXXXXX");
    FUZZ_CHECK(mkdtemp(web_dir) != NULL);
    char path[PATH_MAX], secret[PATH_MAX];
    static const char *const files[] = {"index.html", "app.js", "sub/index.html"};
    snprintf(path, sizeof path, "%s/sub", web_dir);
    FUZZ_CHECK(mkdir(path, 0700) == 0);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", web_dir, files[i]);
        FILE *f = fopen(path, "w");
        FUZZ_CHECK(f != NULL);
        fputs("<!doctype html>", f);
        fclose(f);
    }
    snprintf(secret, sizeof secret, "%s.secret", web_dir);
    FILE *f = fopen(secret, "w");
    FUZZ_CHECK(f != NULL);
    fclose(f);
    snprintf(path, sizeof path, "%s/out", web_dir);
    FUZZ_CHECK(symlink(secret, path) == 0);
    FUZZ_CHECK(pt_static_init(&web, web_dir, err, sizeof err) == 0);
    atexit(remove_web_root);
}

static void response_free(pt_response *r)
{
    if (r->mhd) MHD_destroy_response(r->mhd);
    r->mhd = NULL;
}

static void static_path(const char *rel, const char *inm)
{
    pt_response r = pt_static_serve(&web, rel, inm);
    char joined[PATH_MAX + 16], resolved[PATH_MAX];
    if (r.status == 200 || r.status == 304) {   /* served: it must lie inside the root */
        snprintf(joined, sizeof joined, "%s/%s", web.root, rel);
        FUZZ_CHECK(realpath(joined, resolved) != NULL);
        size_t n = strlen(web.root);
        FUZZ_CHECK(!strncmp(resolved, web.root, n) && (resolved[n] == '/' || resolved[n] == '\0'));
    }
    response_free(&r);
}

/* A page token that decodes is the encoding of what it decodes to. */
static void page_token(const char *tok)
{
    static pt_store st;   /* decoding only records its message in it */
    int64_t at;
    char id[PT_STORE_ID_MAX], again[PT_STORE_PAGE_TOKEN_MAX];
    st.errmsg[0] = '\0';
    if (pt_store_page_token_decode(&st, tok, &at, id) != PT_STORE_OK) {
        FUZZ_CHECK(st.errmsg[0] != '\0');
        return;
    }
    pt_store_page_token_encode(at, id, again);
    FUZZ_CHECK(!strcmp(again, tok));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const methods[] = {"GET", "HEAD", "POST", "DELETE", "PUT", "PATCH", "OPTIONS"};
    if (!app) setup();
    if (size < 1) return 0;
    const char *method = methods[data[0] % (sizeof methods / sizeof methods[0])];
    char *in = pt_fuzz_cstr(data + 1, size - 1);   /* C strings, as libmicrohttpd hands them out */
    char *header = strchr(in, '\n');
    if (header) *header++ = '\0';
    else header = in + strlen(in);

    size_t tlen = strlen(in);
    for (int plus = 0; plus < 2; plus++) {
        char *dec = pt_url_decode(in, tlen, plus);
        if (dec) FUZZ_CHECK(strlen(dec) <= tlen);
        free(dec);
    }

    pt_request *req = pt_request_new(in);
    FUZZ_CHECK(req != NULL);
    req->method = method;
    char err[256] = "";
    if (pt_request_parse(req, err, sizeof err) == 0) {
        FUZZ_CHECK(!strncmp(req->path, in, strlen(req->path)));
        for (size_t i = 0; i < req->n_query; i++) FUZZ_CHECK(req->query[i].name && req->query[i].value);
        pt_request_query_long(req, "limit", 50, 1, 1000);
        pt_request_query_long(req, "since", 0, 0, LONG_MAX);
        uint64_t last;
        (void)pt_sse_last_event_id(req, &last);
        const char *tok = pt_request_query(req, "page_token");
        if (tok) page_token(tok);
        pt_match m;
        pt_match_result mr = pt_router_match(&app->router, method, req->path, &m);
        if (mr == PT_MATCH_FOUND) {
            FUZZ_CHECK(m.route != NULL && m.n_params <= PT_REQ_MAX_PARAMS);
            for (size_t i = 0; i < m.n_params; i++) FUZZ_CHECK(m.params[i].name && m.params[i].value);
            pt_response r = {0};
            if (pt_router_authenticate(&app->router, m.route, req, &r) != 0)
                FUZZ_CHECK(r.status == 401 || r.status == 500);
            response_free(&r);
            const char *rel = NULL;
            for (size_t i = 0; i < m.n_params; i++)
                if (!strcmp(m.params[i].name, "path")) rel = m.params[i].value;
            if (rel) static_path(rel, header);
        } else if (mr == PT_MATCH_BAD_PATH) {
            FUZZ_CHECK(m.error[0] != '\0');
        }
        pt_match_clear(&m);
        if (req->errors.total) {
            pt_response r = pt_request_problem(req);
            response_free(&r);
        }
    } else {
        FUZZ_CHECK(err[0] != '\0');
    }
    pt_request_free(req);

    char token[512];
    if (pt_bearer_parse(header, token, sizeof token) == 0) {
        FUZZ_CHECK(token[0] != '\0' && strlen(token) < sizeof token);
        for (const char *p = token; *p; p++) FUZZ_CHECK(*p > ' ' && *p < 127 && *p != '"');
    }
    (void)pt_etag_matches(header, "\"5-abc\"");
    /* a problem's detail quotes the request (404 "there is no file '%.200s'"):
     * it must survive into the JSON whatever the bytes */
    char detail[256];
    snprintf(detail, sizeof detail, "there is no file '%.200s'", in);
    json_t *problem = pt_problem_new(404, NULL, detail);
    FUZZ_CHECK(problem != NULL && json_is_string(json_object_get(problem, "detail")));
    json_decref(problem);
    static_path(in[0] == '/' ? in + 1 : in, header);
    free(in);
    return 0;
}
