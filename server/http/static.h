/* static.h — serving the dashboard's files from a directory (web/).
 *
 * Only regular files below the root are served: a path with an empty, "." or
 * ".." segment, a backslash, or one that resolves (through symlinks) outside
 * the root gets 404.  A directory serves its index.html.  Responses carry a
 * content type from the extension, a strong ETag (size, mtime, inode) and
 * "Cache-Control: no-cache", so browsers revalidate and get 304. */
#ifndef PT_STATIC_H
#define PT_STATIC_H

#include <limits.h>

#include "server/http/request.h"

typedef struct pt_static {
    char root[PATH_MAX];   /* resolved absolute path, no trailing '/' */
} pt_static;

/* -1 with a message when `dir` does not exist or is not a directory. */
int pt_static_init(pt_static *s, const char *dir, char *err, size_t errlen);
void pt_static_close(pt_static *s);

/* Serves `rel` (decoded, relative to the root, "" for the root itself). */
pt_response pt_static_serve(const pt_static *s, const char *rel, const char *if_none_match);
/* Route handler for a pattern ending in "{path...}"; ctx is the pt_static. */
pt_response pt_static_handler(pt_request *req, void *ctx);

/* Content type for a file name ("application/octet-stream" if unknown). */
const char *pt_static_content_type(const char *name);

#endif
