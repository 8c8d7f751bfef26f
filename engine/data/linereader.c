/* linereader.c — gzip-transparent line reading with push-back and located
 * errors (see linereader.h). */
#include "engine/data/linereader.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "engine/data/numparse.h"

#define GZ_BUFFER_BYTES (256u * 1024u)

struct pt_reader {
    gzFile gz;
    char *buf;          /* PT_READER_MAX_LINE + 1 bytes */
    size_t start, end;  /* unread bytes are buf[start, end) */
    int eof;
    long lineno;
    char *line;
    size_t len;
    int pushed;         /* the current line is to be returned again */
    const char *file;
    pt_errors *errs;
    int bom_checked;    /* the first bytes were looked at */
};

pt_reader *pt_reader_open(const char *path, const char *display, pt_errors *errs)
{
    const char *file = display ? display : path;
    pt_reader *r = calloc(1, sizeof(*r));
    if (r) r->buf = malloc(PT_READER_MAX_LINE + 1);
    if (!r || !r->buf) {
        pt_errors_add(errs, file, 0, "", "out of memory");
        if (r) free(r);
        return NULL;
    }
    r->errs = errs;
    r->file = file;
    errno = 0;
    r->gz = gzopen(path, "rb");
    if (!r->gz) {
        pt_errors_add(errs, file, 0, "", "cannot open: %s", errno ? strerror(errno) : "out of memory");
        free(r->buf);
        free(r);
        return NULL;
    }
    gzbuffer(r->gz, GZ_BUFFER_BYTES);
    return r;
}

void pt_reader_close(pt_reader *r)
{
    if (!r) return;
    gzclose(r->gz);
    free(r->buf);
    free(r);
}

void pt_reader_error(pt_reader *r, long line, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pt_errors_addv(r->errs, r->file, line, field, fmt, ap);
    va_end(ap);
}

long pt_reader_lineno(const pt_reader *r) { return r->lineno; }
const char *pt_reader_file(const pt_reader *r) { return r->file; }

void pt_reader_unread_line(pt_reader *r)
{
    r->pushed = 1;
    r->lineno--;
}

/* Reads more bytes after compacting the buffer; 0 ok, -1 error (reported). */
static int fill_buffer(pt_reader *r)
{
    if (r->start > 0) {
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->end -= r->start;
        r->start = 0;
    }
    if (r->end >= PT_READER_MAX_LINE) {
        pt_reader_error(r, r->lineno + 1, "", "line longer than %u bytes", PT_READER_MAX_LINE);
        return -1;
    }
    int n = gzread(r->gz, r->buf + r->end, (unsigned)(PT_READER_MAX_LINE - r->end));
    int zerr = Z_OK;
    const char *msg = gzerror(r->gz, &zerr);
    if (n < 0 || (zerr != Z_OK && zerr != Z_BUF_ERROR)) {
        pt_reader_error(r, r->lineno + 1, "", "read error: %s",
                        zerr == Z_ERRNO ? strerror(errno) : msg);
        return -1;
    }
    if (zerr == Z_BUF_ERROR) {
        pt_reader_error(r, r->lineno + 1, "", "compressed stream is truncated (gzip data ends early)");
        return -1;
    }
    if (n == 0) r->eof = 1;
    r->end += (size_t)n;
    if (!r->bom_checked && (r->end >= 3 || r->eof)) {
        /* a UTF-8 byte-order mark opens the file, not its first line */
        static const unsigned char bom[3] = {0xEF, 0xBB, 0xBF};
        if (r->end >= 3 && !memcmp(r->buf, bom, 3)) r->start = 3;
        r->bom_checked = 1;
    }
    return 0;
}

static void set_line(pt_reader *r, char *line, size_t len)
{
    line[len] = '\0';
    if (len > 0 && line[len - 1] == '\r') line[--len] = '\0';
    r->line = line;
    r->len = len;
    r->lineno++;
}

int pt_reader_next_line(pt_reader *r, char **line, size_t *len)
{
    if (r->pushed) {
        r->pushed = 0;
        r->lineno++;
        *line = r->line;
        *len = r->len;
        return 1;
    }
    for (;;) {
        char *head = r->buf + r->start;
        char *nl = memchr(head, '\n', r->end - r->start);
        if (nl) {
            r->start = (size_t)(nl - r->buf) + 1;
            set_line(r, head, (size_t)(nl - head));
            break;
        }
        if (r->eof) {
            if (r->start == r->end) return 0;
            size_t n = r->end - r->start;
            r->start = r->end;
            set_line(r, head, n);
            break;
        }
        if (fill_buffer(r) < 0) return -1;
    }
    *line = r->line;
    *len = r->len;
    return 1;
}

int pt_reader_float_field(pt_reader *r, const char *tok, size_t len, int flags,
                          const char *field, float *out)
{
    int rc = pt_parse_float(tok, len, flags, out);
    if (rc == PT_NUM_OK) return 0;
    if (rc == PT_NUM_INVALID)
        pt_reader_error(r, r->lineno, field, "not a number: '%.*s'", (int)(len > 40 ? 40 : len), tok);
    else
        pt_reader_error(r, r->lineno, field, "NaN or Inf value '%.*s'", (int)(len > 40 ? 40 : len), tok);
    return -1;
}

/* The fused fast path first; anything it declines goes through the
 * general parser, which reports errors. */
int pt_reader_next_float(pt_reader *r, const char **p, int flags, const char *field, float *out)
{
    if (pt_next_float_fast(p, out)) return 1;
    const char *tok;
    size_t n = pt_next_token(p, &tok);
    if (n == 0) return 0;
    return pt_reader_float_field(r, tok, n, flags, field, out) == 0 ? 1 : -1;
}

/* ---- count-line framing ---------------------------------------------------- */

/* A lone non-negative integer (the atom-count line).  Returns 0 and the value
 * (saturated at UINT64_MAX / 10), or -1. */
int pt_parse_count(const char *line, uint64_t *out)
{
    const char *p = line, *tok;
    size_t n = pt_next_token(&p, &tok);
    if (n == 0) return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (tok[i] < '0' || tok[i] > '9') return -1;
        if (v < UINT64_MAX / 10) v = v * 10 + (uint64_t)(tok[i] - '0');
    }
    const char *rest;
    if (pt_next_token(&p, &rest) != 0) return -1;
    *out = v;
    return 0;
}

int pt_reader_atom_line(pt_reader *r, uint32_t index, uint32_t declared,
                        char **line, size_t *len)
{
    long count_line = r->lineno - 1 - (long)index;
    int rc = pt_reader_next_line(r, line, len);
    if (rc < 0) return -1;
    if (rc == 0) {
        pt_reader_error(r, r->lineno, "atom count",
                        "file is truncated: structure on line %ld declares %u atoms, file ends after %u",
                        count_line, declared, index);
        return 0;
    }
    uint64_t next_count;
    const char *first = *line;
    while (pt_is_space(*first)) first++;
    if (*first >= '0' && *first <= '9' && pt_parse_count(*line, &next_count) == 0) {
        pt_reader_error(r, r->lineno, "atom count",
                        "structure on line %ld declares %u atoms but has only %u atom lines",
                        count_line, declared, index);
        pt_reader_unread_line(r);
        return 0;
    }
    return 1;
}
