/* errors.h — a bounded list of located errors (file, line or row, field, message).
 *
 * Room engine/core, the bottom of the engine: located errors (this file),
 * the seeded rng, phase clocks, safetensors files — what every room may use.
 * It includes no other packtrain header.
 *
 * Every validator in packtrain (parsers, config, packing limits) reports into a
 * pt_errors list instead of stopping at the first problem, so a user sees all
 * of what is wrong with an upload at once.  The list keeps the first `max_kept`
 * errors verbatim and counts the rest, so a 10 GB file full of bad lines cannot
 * exhaust memory. */
#ifndef PT_ERRORS_H
#define PT_ERRORS_H

#include <stddef.h>
#include <stdarg.h>

#define PT_ERR_FILE_MAX 256
#define PT_ERR_FIELD_MAX 64
#define PT_ERR_MSG_MAX 256

typedef struct pt_error {
    char file[PT_ERR_FILE_MAX];   /* source file name, "" if not file-bound */
    long line;                    /* 1-based line number, 0 if none */
    long row;                     /* row id in a database file (ASE .db), 0 if none */
    char field[PT_ERR_FIELD_MAX]; /* key / column / config path, "" if none */
    char message[PT_ERR_MSG_MAX];
} pt_error;

typedef struct pt_errors {
    pt_error *items;   /* first `kept` errors */
    size_t kept;
    size_t capacity;
    size_t max_kept;   /* 0 means the default (100) */
    size_t total;      /* all errors seen, kept or not */
    /* While set, prepended to every non-empty field added: a caller that
     * hands a lower layer its values names them in its own terms (the plan
     * sets "batching." around the packer, whose fields are "max_nodes"...). */
    const char *scope;
} pt_errors;

void pt_errors_init(pt_errors *errs, size_t max_kept);
void pt_errors_close(pt_errors *errs);
void pt_errors_clear(pt_errors *errs);

/* Adds one error; printf-style message.  Never fails: on allocation failure
 * the error is counted in `total` but not kept. */
void pt_errors_add(pt_errors *errs, const char *file, long line,
                   const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void pt_errors_addv(pt_errors *errs, const char *file, long line,
                    const char *field, const char *fmt, va_list ap);

/* An error located by a database row instead of a line. */
void pt_errors_add_row(pt_errors *errs, const char *file, long row,
                       const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Formats one error as "file:line: field: message", or "file: row N: field:
 * message" for a database row (parts omitted when empty). */
void pt_error_format(const pt_error *e, char *buf, size_t len);

/* Formats into buf (when buf is not NULL and len > 0) and returns -1: the
 * one-line failure of an API with a char *err instead of a pt_errors. */
int pt_err_printf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Copies the first error formatted into buf (for APIs with a char *err). */
void pt_errors_first(const pt_errors *errs, char *buf, size_t len);

#endif
