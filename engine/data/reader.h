/* reader.h — streaming structure readers for XYZ, extended XYZ and raw QM9.
 *
 * pt_read_structures() reads one file (plain or gzip, through zlib) line by
 * line and hands one structure at a time to a callback, so memory stays
 * constant in the file size: a line buffer of PT_READER_MAX_LINE bytes and
 * one structure's arrays.  Every problem is reported into a pt_errors list
 * with file, line and field; a structure with problems is still handed to the
 * callback with valid = 0, so the caller can count what it skips.
 *
 * The second half of this header is the interface between the dispatch loop
 * (reader.c) and the format parsers (xyz_read.c, qm9_read.c): a line reader
 * with one line of push-back, and number parsers that match strtod/strtof
 * bit for bit. */
#ifndef PT_READER_H
#define PT_READER_H

#include <stddef.h>
#include <stdint.h>

#include "engine/data/dataset.h"
#include "engine/core/errors.h"

#define PT_READER_MAX_LINE (1u << 20)  /* longest accepted line, bytes */
#define PT_READER_MAX_KEYS 128         /* key=value pairs kept per structure */

typedef enum pt_format {
    PT_FORMAT_AUTO,
    PT_FORMAT_EXTXYZ,
    PT_FORMAT_XYZ,
    PT_FORMAT_QM9
} pt_format;

/* "auto", "extxyz", "xyz", "qm9"; pt_format_parse returns -1 if unknown. */
const char *pt_format_name(pt_format f);
int pt_format_parse(const char *name, pt_format *out);

/* One per-structure key of the comment line.  Numeric keys (a single finite
 * number) become training targets; the others (strings, booleans, arrays) are
 * listed with numeric = 0 so callers can tell a key whose kind changes between
 * structures. */
typedef struct pt_key_value {
    char name[PT_KEY_MAX];
    int numeric;
    double value;          /* NaN when !numeric */
} pt_key_value;

typedef struct pt_structure {
    const char *file;      /* display name used in errors */
    long line;             /* line of the atom-count line, 1-based */
    pt_format format;      /* the format this structure was parsed as */
    int valid;             /* 0: errors were reported; arrays are unusable */
    uint32_t n_atoms;
    uint8_t *z;            /* [n_atoms] */
    float *pos;            /* [3 n_atoms], Å */
    float *forces;         /* [3 n_atoms] or NULL when the structure has none */
    uint32_t n_keys;
    pt_key_value keys[PT_READER_MAX_KEYS];

    /* private: capacity of the arrays above, in atoms */
    uint32_t cap_atoms;
    float *forces_buf;
    void *xyz_cache;       /* xyz_read.c's last parsed Properties (malloc'ed, flat) */
} pt_structure;

/* Returns 0 to continue, anything else stops reading and is returned. */
typedef int (*pt_structure_fn)(void *ctx, const pt_structure *s);

typedef struct pt_read_options {
    pt_format format;          /* PT_FORMAT_AUTO detects per structure */
    uint32_t max_atoms;        /* larger structures are invalid */
    const char *display_name;  /* replaces the path in errors; NULL = path */
} pt_read_options;

/* Reads every structure of `path`.  Returns 0 when the whole file was read
 * (some structures may have been invalid), -1 when reading had to stop
 * (cannot open, gzip damage, lost structure framing; reported in errs), or
 * the nonzero value returned by fn. */
int pt_read_structures(const char *path, const pt_read_options *opt,
                       pt_structure_fn fn, void *ctx, pt_errors *errs);

/* ---- parser side ------------------------------------------------------- */

typedef enum pt_parse_status {
    PT_PARSE_OK = 0,      /* structure complete and valid */
    PT_PARSE_BAD = 1,     /* structure invalid, reading can go on */
    PT_PARSE_FATAL = -1   /* reading cannot go on */
} pt_parse_status;

typedef struct pt_reader pt_reader;

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

/* Makes room for n atoms in s (forces too when want_forces). -1 on OOM. */
int pt_structure_reserve(pt_structure *s, uint32_t n, int want_forces);

/* Reads the atom lines of a structure whose atom-count line and comment line
 * were consumed; fills s.  The comment is the NUL-terminated comment line
 * (it is invalidated by the first read, so parse it before reading on). */
pt_parse_status pt_xyz_parse(pt_reader *r, pt_structure *s, char *comment);
pt_parse_status pt_extxyz_parse(pt_reader *r, pt_structure *s, char *comment);
pt_parse_status pt_qm9_parse(pt_reader *r, pt_structure *s, char *comment);

/* Reads the next atom line of a structure declaring `declared` atoms, of
 * which `index` were read.  Returns 1 with a line; otherwise reports why
 * there is none (end of file, or a lone integer that starts the next
 * structure, which is pushed back) and returns 0, or -1 on a read error. */
int pt_reader_atom_line(pt_reader *r, uint32_t index, uint32_t declared,
                        char **line, size_t *len);

/* Whitespace tokenizer over a NUL-terminated line: *p advances past the
 * token.  A class table makes each character one load and one test. */
enum { PT_CH_SPACE = 1, PT_CH_END = 2 };
extern const unsigned char pt_char_class[256];
static inline int pt_is_space(char c) { return pt_char_class[(unsigned char)c] & PT_CH_SPACE; }
static inline size_t pt_next_token(const char **p, const char **tok)
{
    const unsigned char *s = (const unsigned char *)*p;
    while (pt_char_class[*s] & PT_CH_SPACE) s++;
    const unsigned char *e = s;
    while (!pt_char_class[*e]) e++;
    *tok = (const char *)s;
    *p = (const char *)e;
    return (size_t)(e - s);
}

/* Number parsing.  Accepts [+-]digits[.digits][(e|E)[+-]digits], "nan",
 * "inf", "infinity" (any case) and, with PT_NUM_MATHEMATICA, the "*^"
 * exponent marker of QM9's Mathematica output.  Returns PT_NUM_OK,
 * PT_NUM_INVALID (not a number) or PT_NUM_NONFINITE (NaN/Inf/overflow). The
 * result equals strtod / strtof of the same text, bit for bit. */
enum { PT_NUM_OK = 0, PT_NUM_INVALID = 1, PT_NUM_NONFINITE = 2 };
enum { PT_NUM_MATHEMATICA = 1 };
int pt_parse_double(const char *s, size_t len, int flags, double *out);
int pt_parse_float(const char *s, size_t len, int flags, float *out);

/* Parses a float field and reports "not a number" / "NaN or Inf" errors at
 * the reader's current line; returns 0 on success. */
int pt_reader_float_field(pt_reader *r, const char *tok, size_t len, int flags,
                          const char *field, float *out);

/* Parses the next whitespace-separated token of *p as a float field:
 * 1 parsed, 0 no token left, -1 invalid (reported).  *p moves past it. */
int pt_reader_next_float(pt_reader *r, const char **p, int flags, const char *field, float *out);

#endif
