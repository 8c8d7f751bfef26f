/* errors.c — bounded list of located errors; see errors.h. */
#include "engine/core/errors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PT_ERRORS_DEFAULT_KEPT 100

void pt_errors_init(pt_errors *errs, size_t max_kept)
{
    memset(errs, 0, sizeof(*errs));
    errs->max_kept = max_kept ? max_kept : PT_ERRORS_DEFAULT_KEPT;
}

void pt_errors_close(pt_errors *errs)
{
    free(errs->items);
    memset(errs, 0, sizeof(*errs));
}

void pt_errors_clear(pt_errors *errs)
{
    errs->kept = 0;
    errs->total = 0;
}

static void copy_bounded(char *dst, size_t cap, const char *src)
{
    if (!src) src = "";
    snprintf(dst, cap, "%s", src);
}

void pt_errors_addv(pt_errors *errs, const char *file, long line,
                    const char *field, const char *fmt, va_list ap)
{
    errs->total++;
    size_t limit = errs->max_kept ? errs->max_kept : PT_ERRORS_DEFAULT_KEPT;
    if (errs->kept >= limit) return;
    if (errs->kept == errs->capacity) {
        size_t cap = errs->capacity ? errs->capacity * 2 : 8;
        if (cap > limit) cap = limit;
        pt_error *items = realloc(errs->items, cap * sizeof(*items));
        if (!items) return;
        errs->items = items;
        errs->capacity = cap;
    }
    pt_error *e = &errs->items[errs->kept++];
    copy_bounded(e->file, sizeof(e->file), file);
    if (errs->scope && field && field[0])
        snprintf(e->field, sizeof(e->field), "%s%s", errs->scope, field);
    else
        copy_bounded(e->field, sizeof(e->field), field);
    e->line = line;
    e->row = 0;
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
}

void pt_errors_add(pt_errors *errs, const char *file, long line,
                   const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pt_errors_addv(errs, file, line, field, fmt, ap);
    va_end(ap);
}

int pt_err_printf(char *buf, size_t len, const char *fmt, ...)
{
    if (buf && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void pt_errors_add_row(pt_errors *errs, const char *file, long row,
                       const char *field, const char *fmt, ...)
{
    size_t kept = errs->kept;
    va_list ap;
    va_start(ap, fmt);
    pt_errors_addv(errs, file, 0, field, fmt, ap);
    va_end(ap);
    if (errs->kept > kept) errs->items[kept].row = row;
}

void pt_error_format(const pt_error *e, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    if (e->row > 0) {
        n += (size_t)snprintf(buf + n, len - n, "%s%srow %ld: ", e->file, e->file[0] ? ": " : "", e->row);
    } else if (e->file[0]) {
        if (e->line > 0)
            n += (size_t)snprintf(buf + n, len - n, "%s:%ld: ", e->file, e->line);
        else
            n += (size_t)snprintf(buf + n, len - n, "%s: ", e->file);
    } else if (e->line > 0) {
        n += (size_t)snprintf(buf + n, len - n, "line %ld: ", e->line);
    }
    if (n >= len) return;
    if (e->field[0]) n += (size_t)snprintf(buf + n, len - n, "%s: ", e->field);
    if (n >= len) return;
    snprintf(buf + n, len - n, "%s", e->message);
}

void pt_errors_first(const pt_errors *errs, char *buf, size_t len)
{
    if (!len) return;
    if (errs->kept == 0) {
        snprintf(buf, len, "%s", errs->total ? "errors were reported" : "no error");
        return;
    }
    pt_error_format(&errs->items[0], buf, len);
}
