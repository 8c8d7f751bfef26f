/* static.c — files from the web root with ETags; see static.h.
 *
 * Two checks guard the root: the relative path is refused outright if any
 * segment could climb (empty, ".", ".."), and the resolved real path must
 * still lie inside the root's real path, which also stops symlinks that point
 * elsewhere. */
#include "server/http/static.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

int pt_static_init(pt_static *s, const char *dir, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    char resolved[PATH_MAX];
    if (!realpath(dir, resolved)) {
        snprintf(err, errlen, "static directory %s: %s", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat(resolved, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "static directory %s is not a directory", dir);
        return -1;
    }
    snprintf(s->root, sizeof s->root, "%s", resolved);
    return 0;
}

void pt_static_close(pt_static *s)
{
    memset(s, 0, sizeof(*s));
}

const char *pt_static_content_type(const char *name)
{
    static const struct { const char *ext, *type; } types[] = {
        {"html", "text/html; charset=utf-8"},        {"htm", "text/html; charset=utf-8"},
        {"js", "text/javascript; charset=utf-8"},    {"mjs", "text/javascript; charset=utf-8"},
        {"css", "text/css; charset=utf-8"},          {"json", "application/json"},
        {"map", "application/json"},                 {"svg", "image/svg+xml"},
        {"png", "image/png"},                        {"jpg", "image/jpeg"},
        {"jpeg", "image/jpeg"},                      {"gif", "image/gif"},
        {"webp", "image/webp"},                      {"ico", "image/x-icon"},
        {"woff", "font/woff"},                       {"woff2", "font/woff2"},
        {"txt", "text/plain; charset=utf-8"},        {"wasm", "application/wasm"},
        {"yaml", "application/yaml"},                {"webmanifest", "application/manifest+json"},
    };
    const char *dot = strrchr(name, '.');
    const char *slash = strrchr(name, '/');
    if (dot && (!slash || dot > slash)) {
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            if (!strcasecmp(dot + 1, types[i].ext)) return types[i].type;
    }
    return "application/octet-stream";
}

/* Refuses paths that could name something outside the root. */
static int rel_path_safe(const char *rel)
{
    if (rel[0] == '/' || strchr(rel, '\\')) return 0;
    for (const char *p = rel; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 0 && p[n] == '/') return 0;   /* "a//b" */
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) return 0;
        p += n;
        if (*p == '/') p++;
    }
    return 1;
}

static int inside_root(const pt_static *s, const char *resolved)
{
    size_t n = strlen(s->root);
    return !strncmp(resolved, s->root, n) && (resolved[n] == '/' || resolved[n] == '\0');
}

static pt_response not_found(const char *rel)
{
    return pt_problem(404, "there is no file '%.200s'", rel);
}

pt_response pt_static_serve(const pt_static *s, const char *rel, const char *if_none_match)
{
    if (!rel_path_safe(rel)) return not_found(rel);
    char path[PATH_MAX + 16], resolved[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s", s->root, rel);
    if (n < 0 || (size_t)n >= sizeof path - 12) return not_found(rel);
    if (!realpath(path, resolved) || !inside_root(s, resolved)) return not_found(rel);
    struct stat st;
    if (stat(resolved, &st) != 0) return not_found(rel);
    if (S_ISDIR(st.st_mode)) {
        size_t len = strlen(resolved);
        if (len + sizeof "/index.html" > sizeof resolved) return not_found(rel);
        memcpy(resolved + len, "/index.html", sizeof "/index.html");
    }
    int fd = open(resolved, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return not_found(rel);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return not_found(rel);
    }
    char etag[96];
    snprintf(etag, sizeof etag, "\"%llx-%llx.%lx-%llx\"", (unsigned long long)st.st_size,
             (unsigned long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec, (unsigned long long)st.st_ino);
    pt_response r;
    if (pt_etag_matches(if_none_match, etag)) {
        close(fd);
        r = pt_response_not_modified(etag);
    } else {
        struct MHD_Response *m = MHD_create_response_from_fd((size_t)st.st_size, fd);
        if (!m) {
            close(fd);
            return pt_problem(500, "cannot send '%.200s'", rel);
        }
        r = (pt_response){200, m};
        pt_response_header(&r, "Content-Type", pt_static_content_type(resolved));
        pt_response_header(&r, "ETag", etag);
    }
    pt_response_header(&r, "Cache-Control", "no-cache");
    return r;
}

pt_response pt_static_handler(pt_request *req, void *ctx)
{
    const char *rel = pt_request_param(req, "path");
    return pt_static_serve(ctx, rel ? rel : "", pt_request_header(req, "If-None-Match"));
}
