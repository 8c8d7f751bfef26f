/* upload.h — request bodies with a size limit.
 *
 * Large bodies (dataset files) are streamed to a temp file as they arrive and
 * never held whole in memory; small JSON bodies are collected in a bounded
 * buffer and parsed with located errors.  Passing the limit is reported at the
 * first byte too many, and the partial temp file is removed at once. */
#ifndef PT_UPLOAD_H
#define PT_UPLOAD_H

#include <jansson.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/errors.h"

typedef struct pt_upload {
    int fd;                 /* -1 when no file is open */
    char path[PATH_MAX];    /* "" once removed or moved away */
    uint64_t size;          /* bytes written */
    uint64_t limit;
    struct sha256_ctx sha;  /* of the bytes written, as they arrive */
    char sha256[2 * SHA256_DIGEST_SIZE + 1];   /* lowercase hex, set by pt_upload_finish */
} pt_upload;

/* Creates `dir`/upload-XXXXXX (mode 0600). */
int pt_upload_open(pt_upload *u, const char *dir, uint64_t limit, char *err, size_t errlen);
/* 0 written; 1 the body passed the limit (the file is removed, later writes
 * are refused); -1 write error (message in err, file removed). */
int pt_upload_write(pt_upload *u, const void *data, size_t len, char *err, size_t errlen);
/* Closes the file descriptor (the file stays until pt_upload_close) and
 * sets u->sha256, the SHA-256 of the body. */
int pt_upload_finish(pt_upload *u, char *err, size_t errlen);
/* fsync, rename to `dest`, fsync the directory; the upload no longer owns it. */
int pt_upload_keep(pt_upload *u, const char *dest, char *err, size_t errlen);
/* Removes the temp file unless it was kept. */
void pt_upload_close(pt_upload *u);

typedef struct pt_body {
    char *data;
    size_t len, cap, limit;
} pt_body;

void pt_body_init(pt_body *b, size_t limit);
/* 0 appended; 1 would pass the limit (nothing appended); -1 out of memory. */
int pt_body_append(pt_body *b, const void *data, size_t len);
void pt_body_close(pt_body *b);
/* Parses the body as JSON (duplicate keys rejected).  On failure returns NULL
 * and adds an error with the line, the column and the parser's message. */
json_t *pt_body_parse_json(const pt_body *b, pt_errors *errs);

#endif
