/* upload.c — bounded request bodies on disk and in memory; see upload.h. */
#include "server/http/upload.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nettle/base16.h>

int pt_upload_open(pt_upload *u, const char *dir, uint64_t limit, char *err, size_t errlen)
{
    memset(u, 0, sizeof(*u));
    u->fd = -1;
    u->limit = limit;
    sha256_init(&u->sha);
    int n = snprintf(u->path, sizeof u->path, "%s/upload-XXXXXX", dir);
    if (n < 0 || (size_t)n >= sizeof u->path) {
        snprintf(err, errlen, "upload directory path too long: %s", dir);
        u->path[0] = '\0';
        return -1;
    }
    u->fd = mkostemp(u->path, O_CLOEXEC);
    if (u->fd < 0) {
        snprintf(err, errlen, "cannot create a temp file in %s: %s", dir, strerror(errno));
        u->path[0] = '\0';
        return -1;
    }
    return 0;
}

static void upload_discard(pt_upload *u)
{
    if (u->fd >= 0) close(u->fd);
    u->fd = -1;
    if (u->path[0]) unlink(u->path);
    u->path[0] = '\0';
}

int pt_upload_write(pt_upload *u, const void *data, size_t len, char *err, size_t errlen)
{
    if (u->fd < 0) {
        snprintf(err, errlen, "upload is not open");
        return -1;
    }
    if (len > u->limit - u->size) {
        upload_discard(u);
        snprintf(err, errlen, "body is larger than the limit of %llu bytes",
                 (unsigned long long)u->limit);
        return 1;
    }
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(u->fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            snprintf(err, errlen, "cannot write %s: %s", u->path, strerror(errno));
            upload_discard(u);
            return -1;
        }
        p += w;
        left -= (size_t)w;
    }
    u->size += len;
    sha256_update(&u->sha, len, data);
    return 0;
}

int pt_upload_finish(pt_upload *u, char *err, size_t errlen)
{
    if (u->fd < 0) return 0;
    uint8_t digest[SHA256_DIGEST_SIZE];
    sha256_digest(&u->sha, sizeof digest, digest);
    base16_encode_update(u->sha256, sizeof digest, digest);
    u->sha256[2 * SHA256_DIGEST_SIZE] = '\0';
    int rc = close(u->fd);
    u->fd = -1;
    if (rc != 0) {
        snprintf(err, errlen, "cannot close %s: %s", u->path, strerror(errno));
        return -1;
    }
    return 0;
}

int pt_upload_keep(pt_upload *u, const char *dest, char *err, size_t errlen)
{
    if (!u->path[0]) {
        snprintf(err, errlen, "no uploaded body to keep");
        return -1;
    }
    int fd = open(u->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        snprintf(err, errlen, "cannot sync %s: %s", u->path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    if (rename(u->path, dest) != 0) {
        snprintf(err, errlen, "cannot move the upload to %s: %s", dest, strerror(errno));
        return -1;
    }
    u->path[0] = '\0';
    /* The rename is durable only once the directory entry is on disk. */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", dest);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

void pt_upload_close(pt_upload *u)
{
    upload_discard(u);
}

void pt_body_init(pt_body *b, size_t limit)
{
    memset(b, 0, sizeof(*b));
    b->limit = limit;
}

int pt_body_append(pt_body *b, const void *data, size_t len)
{
    /* nothing to add: no copy, which on a body without a buffer yet would be
     * memcpy to NULL + 0, undefined (found by tests/fuzz/fuzz_config.c) */
    if (len == 0) return 0;
    if (len > b->limit - b->len) return 1;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + len) cap *= 2;
        if (cap > b->limit) cap = b->limit;
        char *d = realloc(b->data, cap);
        if (!d) return -1;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
    return 0;
}

void pt_body_close(pt_body *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

json_t *pt_body_parse_json(const pt_body *b, pt_errors *errs)
{
    if (b->len == 0) {
        pt_errors_add(errs, "", 0, "body", "the request body is empty; expected a JSON document");
        return NULL;
    }
    json_error_t jerr;
    json_t *j = json_loadb(b->data, b->len, JSON_REJECT_DUPLICATES, &jerr);
    if (!j) pt_errors_add(errs, "", jerr.line, "body", "invalid JSON at column %d: %s", jerr.column, jerr.text);
    return j;
}
