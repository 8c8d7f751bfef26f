/* reader.c — the streaming read loop shared by every structure format.
 *
 * It owns the gzip line reader, finds where each structure starts (atom-count
 * line, comment line), picks the format, lets the format parser read the atom
 * lines, and checks that no atom lines are left over before handing the
 * structure to the caller.  Framing errors that leave no way to find the next
 * structure stop the file; everything else invalidates one structure only. */
#include "engine/data/reader.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "engine/data/elements.h"

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
};

/* space, tab, CR, VT, FF separate tokens; NUL ends the line */
const unsigned char pt_char_class[256] = {
    [0] = PT_CH_END, [' '] = PT_CH_SPACE, ['\t'] = PT_CH_SPACE, ['\r'] = PT_CH_SPACE,
    ['\v'] = PT_CH_SPACE, ['\f'] = PT_CH_SPACE,
};

static const char *const format_names[] = {"auto", "extxyz", "xyz", "qm9"};

const char *pt_format_name(pt_format f)
{
    return (f >= PT_FORMAT_AUTO && f <= PT_FORMAT_QM9) ? format_names[f] : "?";
}

int pt_format_parse(const char *name, pt_format *out)
{
    for (int i = 0; i <= PT_FORMAT_QM9; i++)
        if (!strcmp(name, format_names[i])) {
            *out = (pt_format)i;
            return 0;
        }
    return -1;
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

static int is_blank(const char *s)
{
    while (pt_is_space(*s)) s++;
    return *s == '\0';
}

static int next_nonblank_line(pt_reader *r, char **line, size_t *len)
{
    int rc;
    while ((rc = pt_reader_next_line(r, line, len)) == 1)
        if (!is_blank(*line)) break;
    return rc;
}

/* A lone non-negative integer (the atom-count line).  Returns 0 and the value
 * (saturated at UINT64_MAX / 10), or -1. */
static int parse_count(const char *line, uint64_t *out)
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

/* Four or more tokens, the first an element: what an atom line looks like. */
static int looks_like_atom_line(const char *line)
{
    const char *p = line, *tok;
    size_t n = pt_next_token(&p, &tok);
    if (!pt_element_from_symbol(tok, n)) return 0;
    int more = 0;
    while (pt_next_token(&p, &tok)) more++;
    return more >= 3;
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
    if (*first >= '0' && *first <= '9' && parse_count(*line, &next_count) == 0) {
        pt_reader_error(r, r->lineno, "atom count",
                        "structure on line %ld declares %u atoms but has only %u atom lines",
                        count_line, declared, index);
        pt_reader_unread_line(r);
        return 0;
    }
    return 1;
}

int pt_structure_reserve(pt_structure *s, uint32_t n, int want_forces)
{
    if (n > s->cap_atoms) {
        uint32_t cap = s->cap_atoms ? s->cap_atoms : 64;
        while (cap < n) cap = cap > UINT32_MAX / 2 ? n : cap * 2;
        uint8_t *z = realloc(s->z, cap);
        if (!z) return -1;
        s->z = z;
        float *pos = realloc(s->pos, (size_t)cap * 3 * sizeof(float));
        if (!pos) return -1;
        s->pos = pos;
        if (s->forces_buf) {
            float *f = realloc(s->forces_buf, (size_t)cap * 3 * sizeof(float));
            if (!f) return -1;
            s->forces_buf = f;
        }
        s->cap_atoms = cap;
    }
    if (want_forces && !s->forces_buf) {
        s->forces_buf = malloc((size_t)s->cap_atoms * 3 * sizeof(float));
        if (!s->forces_buf) return -1;
    }
    return 0;
}

static pt_format detect_format(const char *comment)
{
    while (pt_is_space(*comment)) comment++;
    if (!strncmp(comment, "gdb", 3) && pt_is_space(comment[3])) return PT_FORMAT_QM9;
    if (strchr(comment, '=')) return PT_FORMAT_EXTXYZ;
    return PT_FORMAT_XYZ;
}

/* Skips the lines of a structure that will not be parsed (too many atoms). */
static pt_parse_status skip_structure(pt_reader *r, uint64_t n_lines, long count_line)
{
    char *line;
    size_t len;
    for (uint64_t i = 0; i < n_lines; i++) {
        int rc = pt_reader_next_line(r, &line, &len);
        if (rc < 0) return PT_PARSE_FATAL;
        if (rc == 0) {
            pt_reader_error(r, r->lineno, "atom count",
                            "file is truncated: structure on line %ld ends early", count_line);
            return PT_PARSE_BAD;
        }
    }
    return PT_PARSE_OK;
}

/* After a structure: atom lines before the next atom-count line mean the
 * count was too small.  Returns 1 if such lines were found (and skipped). */
static int check_extra_atom_lines(pt_reader *r, const pt_structure *s, int *fatal)
{
    char *line;
    size_t len;
    int rc = next_nonblank_line(r, &line, &len);
    if (rc <= 0) {
        *fatal = rc < 0;
        return 0;
    }
    if (!looks_like_atom_line(line)) {
        pt_reader_unread_line(r);
        return 0;
    }
    long first = r->lineno;
    uint32_t extra = 0;
    do {
        extra++;
        rc = pt_reader_next_line(r, &line, &len);
    } while (rc == 1 && looks_like_atom_line(line));
    if (rc < 0) *fatal = 1;
    if (rc == 1) pt_reader_unread_line(r);
    pt_reader_error(r, first, "atom count",
                    "structure on line %ld declares %u atoms but has %u more atom lines",
                    s->line, s->n_atoms, extra);
    return 1;
}

static pt_parse_status read_one(pt_reader *r, const pt_read_options *opt,
                                pt_structure *s, uint64_t count)
{
    char *comment;
    size_t len;
    int rc = pt_reader_next_line(r, &comment, &len);
    if (rc < 0) return PT_PARSE_FATAL;
    if (rc == 0) {
        pt_reader_error(r, s->line, "atom count",
                        "file is truncated: structure on line %ld has no comment line", s->line);
        return PT_PARSE_BAD;
    }
    s->format = opt->format == PT_FORMAT_AUTO ? detect_format(comment) : opt->format;
    uint64_t trailer = s->format == PT_FORMAT_QM9 ? 3 : 0;
    if (count == 0) {
        pt_reader_error(r, s->line, "atom count", "structure has zero atoms");
        return PT_PARSE_BAD;
    }
    if (count > opt->max_atoms) {
        pt_reader_error(r, s->line, "atom count", "structure has %llu atoms, more than max_atoms %u",
                        (unsigned long long)count, opt->max_atoms);
        pt_parse_status st = skip_structure(r, count + trailer, s->line);
        return st == PT_PARSE_FATAL ? st : PT_PARSE_BAD;
    }
    s->n_atoms = (uint32_t)count;
    if (pt_structure_reserve(s, s->n_atoms, 0) < 0) {
        pt_reader_error(r, s->line, "", "out of memory for %u atoms", s->n_atoms);
        return PT_PARSE_FATAL;
    }
    switch (s->format) {
    case PT_FORMAT_QM9: return pt_qm9_parse(r, s, comment);
    case PT_FORMAT_XYZ: return pt_xyz_parse(r, s, comment);
    default: return pt_extxyz_parse(r, s, comment);
    }
}

static int read_all(pt_reader *r, const pt_read_options *opt, pt_structure *s,
                    pt_structure_fn fn, void *ctx)
{
    char *line;
    size_t len;
    for (;;) {
        int rc = next_nonblank_line(r, &line, &len);
        if (rc < 0) return -1;
        if (rc == 0) return 0;
        uint64_t count;
        if (parse_count(line, &count) < 0) {
            pt_reader_error(r, r->lineno, "atom count",
                            "expected an atom count (a non-negative integer), got '%.40s'", line);
            return -1;
        }
        s->line = r->lineno;
        s->valid = 1;
        s->n_atoms = 0;
        s->n_keys = 0;
        s->forces = NULL;
        s->format = opt->format;
        pt_parse_status st = read_one(r, opt, s, count);
        if (st == PT_PARSE_FATAL) return -1;
        int fatal = 0;
        if (check_extra_atom_lines(r, s, &fatal)) st = PT_PARSE_BAD;
        if (fatal) return -1;
        s->valid = st == PT_PARSE_OK;
        int stop = fn(ctx, s);
        if (stop) return stop;
    }
}

int pt_read_structures(const char *path, const pt_read_options *opt,
                       pt_structure_fn fn, void *ctx, pt_errors *errs)
{
    pt_reader r = {.errs = errs, .file = opt->display_name ? opt->display_name : path};
    r.gz = gzopen(path, "rb");
    if (!r.gz) {
        pt_errors_add(errs, r.file, 0, "", "cannot open: %s", errno ? strerror(errno) : "out of memory");
        return -1;
    }
    gzbuffer(r.gz, GZ_BUFFER_BYTES);
    r.buf = malloc(PT_READER_MAX_LINE + 1);
    pt_structure *s = calloc(1, sizeof(*s));
    int rc = -1;
    if (!r.buf || !s) {
        pt_errors_add(errs, r.file, 0, "", "out of memory");
    } else {
        s->file = r.file;
        rc = read_all(&r, opt, s, fn, ctx);
    }
    if (s) {
        free(s->z);
        free(s->pos);
        free(s->forces_buf);
        free(s->xyz_cache);
        free(s);
    }
    free(r.buf);
    gzclose(r.gz);
    return rc;
}

/* ---- numbers ------------------------------------------------------------
 * Most numbers in these files have few digits ("-0.066522"), so they are
 * exact as an integer mantissa and a small power of ten; one IEEE division or
 * multiplication of two exact values is then correctly rounded, which is what
 * strtod/strtof return too (Clinger's fast path).  Everything else goes to
 * strtod/strtof, so results never differ from the C library's. */

static const double pow10_double[23] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};
static const float pow10_float[11] = {
    1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f, 1e6f, 1e7f, 1e8f, 1e9f, 1e10f,
};

typedef struct num_scan {
    int neg;
    uint64_t mant;   /* significant digits, valid when digits <= 19 */
    int digits;      /* significant digits seen */
    long exp10;      /* value = mant * 10^exp10 */
} num_scan;

static int ascii_ieq(const char *s, size_t len, const char *word)
{
    size_t n = strlen(word);
    if (len != n) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != word[i]) return 0;
    }
    return 1;
}

static int is_digit(char c) { return (unsigned)(c - '0') < 10u; }

/* Hot path of ingest: one pass over the characters, no library calls. */
static int scan_number(const char *s, size_t len, int flags, num_scan *ns)
{
    const char *p = s, *end = s + len;
    ns->neg = 0;
    if (p < end && (*p == '+' || *p == '-')) ns->neg = *p++ == '-';
    if (p < end && (*p == 'n' || *p == 'N' || *p == 'i' || *p == 'I')) {
        size_t n = (size_t)(end - p);
        if (ascii_ieq(p, n, "nan") || ascii_ieq(p, n, "inf") || ascii_ieq(p, n, "infinity"))
            return PT_NUM_NONFINITE;
        return PT_NUM_INVALID;
    }
    uint64_t m = 0;       /* wraps past 19 digits; then strtod decides */
    long e10 = 0;
    const char *first = p;
    while (p < end && *p == '0') p++;
    const char *sig = p;
    while (p < end && is_digit(*p)) m = m * 10 + (uint64_t)(*p++ - '0');
    long digits = (long)(p - sig);
    int any = p > first;
    if (p < end && *p == '.') {
        const char *frac = ++p;
        if (digits == 0)
            while (p < end && *p == '0') p++;
        const char *fsig = p;
        while (p < end && is_digit(*p)) m = m * 10 + (uint64_t)(*p++ - '0');
        digits += (long)(p - fsig);
        e10 -= (long)(p - frac);
        any |= p > frac;
    }
    if (!any) return PT_NUM_INVALID;
    int has_exp = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        has_exp = 1;
    } else if ((flags & PT_NUM_MATHEMATICA) && p + 1 < end && p[0] == '*' && p[1] == '^') {
        p += 2;
        has_exp = 1;
    }
    if (has_exp) {
        int eneg = 0;
        long e = 0;
        if (p < end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        if (p >= end || !is_digit(*p)) return PT_NUM_INVALID;
        for (; p < end && is_digit(*p); p++)
            if (e < 100000) e = e * 10 + (*p - '0');
        e10 += eneg ? -e : e;
    }
    ns->mant = m;
    ns->digits = digits > 100 ? 100 : (int)digits;
    ns->exp10 = e10;
    return p == end ? PT_NUM_OK : PT_NUM_INVALID;
}

/* Copies s into buf as C syntax ("*^" -> "e"); -1 if it does not fit. */
static int c_syntax(const char *s, size_t len, char *buf, size_t cap)
{
    size_t j = 0;
    for (size_t i = 0; i < len; i++) {
        if (j + 1 >= cap) return -1;
        if (s[i] == '*' && i + 1 < len && s[i + 1] == '^') {
            buf[j++] = 'e';
            i++;
        } else {
            buf[j++] = s[i];
        }
    }
    buf[j] = '\0';
    return 0;
}

int pt_parse_double(const char *s, size_t len, int flags, double *out)
{
    num_scan ns;
    int rc = scan_number(s, len, flags, &ns);
    if (rc != PT_NUM_OK) {
        *out = rc == PT_NUM_NONFINITE ? NAN : 0.0;
        return rc;
    }
    if (ns.digits == 0) {   /* only zeros */
        *out = ns.neg ? -0.0 : 0.0;
        return PT_NUM_OK;
    }
    if (ns.digits <= 19 && ns.mant <= (1ull << 53) && ns.exp10 >= -22 && ns.exp10 <= 22) {
        double v = (double)ns.mant;
        v = ns.exp10 < 0 ? v / pow10_double[-ns.exp10] : v * pow10_double[ns.exp10];
        *out = ns.neg ? -v : v;
        return PT_NUM_OK;
    }
    char buf[128];
    if (c_syntax(s, len, buf, sizeof buf) < 0) return PT_NUM_INVALID;
    *out = strtod(buf, NULL);
    return isfinite(*out) ? PT_NUM_OK : PT_NUM_NONFINITE;
}

int pt_parse_float(const char *s, size_t len, int flags, float *out)
{
    num_scan ns;
    int rc = scan_number(s, len, flags, &ns);
    if (rc != PT_NUM_OK) {
        *out = rc == PT_NUM_NONFINITE ? NAN : 0.0f;
        return rc;
    }
    if (ns.digits == 0) {   /* only zeros */
        *out = ns.neg ? -0.0f : 0.0f;
        return PT_NUM_OK;
    }
    if (ns.digits <= 19 && ns.mant <= (1ull << 24) && ns.exp10 >= -10 && ns.exp10 <= 10) {
        float v = (float)ns.mant;
        v = ns.exp10 < 0 ? v / pow10_float[-ns.exp10] : v * pow10_float[ns.exp10];
        *out = ns.neg ? -v : v;
        return PT_NUM_OK;
    }
    char buf[128];
    if (c_syntax(s, len, buf, sizeof buf) < 0) return PT_NUM_INVALID;
    *out = strtof(buf, NULL);
    return isfinite(*out) ? PT_NUM_OK : PT_NUM_NONFINITE;
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

/* Fast path for the common "-0.066522" shape, fused with tokenizing: digits
 * with an optional point, at most 19 digits, mantissa exact in a float.
 * Anything else (exponents, long mantissas, errors) takes the general path. */
int pt_reader_next_float(pt_reader *r, const char **p, int flags, const char *field, float *out)
{
    const unsigned char *c = (const unsigned char *)*p;
    while (pt_char_class[*c] & PT_CH_SPACE) c++;
    const unsigned char *start = c;
    int neg = *c == '-';
    c += neg || *c == '+';
    uint64_t m = 0;       /* wraps past 19 digits, which then take the general path */
    const unsigned char *d0 = c;
    while (is_digit((char)*c)) m = m * 10 + (uint64_t)(*c++ - '0');
    long digits = c - d0, frac = 0;
    if (*c == '.') {
        const unsigned char *f0 = ++c;
        while (is_digit((char)*c)) m = m * 10 + (uint64_t)(*c++ - '0');
        frac = c - f0;
        digits += frac;
    }
    if (digits > 0 && digits < 20 && pt_char_class[*c] && m <= (1u << 24) && frac <= 10) {
        float v = (float)m / pow10_float[frac];
        *out = neg ? -v : v;
        *p = (const char *)c;
        return 1;
    }
    const char *tok;
    *p = (const char *)start;
    size_t n = pt_next_token(p, &tok);
    if (n == 0) return 0;
    return pt_reader_float_field(r, tok, n, flags, field, out) == 0 ? 1 : -1;
}
