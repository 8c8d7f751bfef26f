/* linereader.h — lines of a text file (plain or gzip, through zlib), for the
 * line-based structure formats.
 *
 * One line buffer of PT_READER_MAX_LINE bytes, one line of push-back, line
 * numbers, errors located at a line and field, a UTF-8 byte-order mark at the
 * start of the file skipped (Windows tools write one), and the count-line
 * helpers every atom-count-first format (XYZ, extended XYZ, QM9) frames its
 * blocks with.  Sits below the format parsers and knows none of them. */
#ifndef PT_LINEREADER_H
#define PT_LINEREADER_H

#include <stddef.h>
#include <stdint.h>

#include "engine/core/errors.h"

#define PT_READER_MAX_LINE (1u << 20)  /* longest accepted line, bytes */

typedef struct pt_reader pt_reader;

/* Opens path (display: the name used in errors).  NULL with the reason in
 * errs when it cannot be opened or memory runs out.  Files of at least
 * PT_READER_THREAD_MIN_BYTES are decompressed on a thread of their own. */
pt_reader *pt_reader_open(const char *path, const char *display, pt_errors *errs);

#define PT_READER_THREAD_MIN_BYTES (8u << 20)

/* The same, `threaded` choosing where decompression runs: 1 on a thread of
 * its own, -1 on the caller's, 0 by the file's size (as pt_reader_open).
 * Lines, errors and their order are the same either way (tests hold the two
 * to that); a thread that cannot be started means the caller's thread. */
pt_reader *pt_reader_open_ex(const char *path, const char *display, int threaded,
                             pt_errors *errs);

/* Bytes of the file read so far (compressed bytes for gzip; decompression
 * may be ahead of parsing by a few MB) and the file's size (0 when it is not
 * a regular file): what progress reports count. */
uint64_t pt_reader_input_offset(const pt_reader *r);
uint64_t pt_reader_input_size(const pt_reader *r);
void pt_reader_close(pt_reader *r);
/* Counts the bytes read (decompressed) into *total (shared by several
 * readers; NULL: no count) and stops with an error once *total passes
 * max_bytes (0: no limit). */
void pt_reader_limit(pt_reader *r, uint64_t *total, uint64_t max_bytes);

/* Next line, NUL-terminated, without its "\n" or "\r\n".  Returns 1 with a
 * line, 0 at end of file, -1 on a read error (already reported).  The line
 * stays valid until the next call. */
int pt_reader_next_line(pt_reader *r, char **line, size_t *len);
/* Makes the next pt_reader_next_line return the same line again. */
void pt_reader_unread_line(pt_reader *r);
/* 1-based number of the line last returned. */
long pt_reader_lineno(const pt_reader *r);
const char *pt_reader_file(const pt_reader *r);
void pt_reader_error(pt_reader *r, long line, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Parses a float field and reports "not a number" / "NaN or Inf" errors at
 * the reader's current line; returns 0 on success. */
int pt_reader_float_field(pt_reader *r, const char *tok, size_t len, int flags,
                          const char *field, float *out);
/* Parses the next whitespace-separated token of *p as a float field:
 * 1 parsed, 0 no token left, -1 invalid (reported).  *p moves past it. */
int pt_reader_next_float(pt_reader *r, const char **p, int flags, const char *field, float *out);

/* ---- count-line framing ------------------------------------------------- */

/* A lone non-negative integer (an atom-count line).  Returns 0 and the value
 * (saturated at UINT64_MAX / 10), or -1. */
int pt_parse_count(const char *line, uint64_t *out);

/* Reads the next atom line of a structure declaring `declared` atoms, of
 * which `index` were read.  Returns 1 with a line; otherwise reports why
 * there is none (end of file, or a lone integer that starts the next
 * structure, which is pushed back) and returns 0, or -1 on a read error. */
int pt_reader_atom_line(pt_reader *r, uint32_t index, uint32_t declared,
                        char **line, size_t *len);

#endif
