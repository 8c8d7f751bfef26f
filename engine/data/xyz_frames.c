/* xyz_frames.c — the read loop of the atom-count-first text formats (see
 * xyz_frames.h). */
#include "engine/data/xyz_frames.h"

#include "engine/data/elements.h"
#include "engine/data/linereader.h"
#include "engine/data/numparse.h"
#include "engine/data/qm9_read.h"
#include "engine/data/xyz_read.h"

#include <stdlib.h>
#include <string.h>

/* The block parsers, by the format a structure is read as. */
static const struct {
    pt_format format;
    uint32_t trailer_lines;   /* lines after the atom lines, skipped with them */
    pt_parse_status (*parse)(pt_reader *r, pt_structure *s, char *comment);
} block_parsers[] = {
    {PT_FORMAT_EXTXYZ, 0, pt_extxyz_parse},
    {PT_FORMAT_XYZ, 0, pt_xyz_parse},
    {PT_FORMAT_QM9, PT_QM9_TRAILER_LINES, pt_qm9_parse},
};

static int block_parser(pt_format f)
{
    for (size_t i = 0; i < sizeof block_parsers / sizeof block_parsers[0]; i++)
        if (block_parsers[i].format == f) return (int)i;
    return 0;
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
            pt_reader_error(r, pt_reader_lineno(r), "atom count",
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
    long first = pt_reader_lineno(r);
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
    const int bp = block_parser(s->format);
    const uint64_t trailer = block_parsers[bp].trailer_lines;
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
    return block_parsers[bp].parse(r, s, comment);
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
        if (pt_parse_count(line, &count) < 0) {
            pt_reader_error(r, pt_reader_lineno(r), "atom count",
                            "expected an atom count (a non-negative integer), got '%.40s'", line);
            return -1;
        }
        pt_structure_reset(s, pt_reader_lineno(r), opt->format);
        pt_parse_status st = read_one(r, opt, s, count);
        if (st == PT_PARSE_FATAL) return -1;
        int fatal = 0;
        if (check_extra_atom_lines(r, s, &fatal)) st = PT_PARSE_BAD;
        if (fatal) return -1;
        s->valid = st == PT_PARSE_OK;
        s->input_bytes = pt_reader_input_offset(r);
        int stop = fn(ctx, s);
        if (stop) return stop;
    }
}

int pt_xyz_frames_read(const char *path, const pt_read_options *opt, pt_structure_fn fn,
                       void *ctx, pt_errors *errs)
{
    pt_reader *r = pt_reader_open_ex(path, opt->display_name, opt->read_thread, errs);
    if (!r) return -1;
    pt_reader_limit(r, opt->bytes_read, opt->max_bytes);
    pt_structure *s = calloc(1, sizeof(*s));
    int rc = -1;
    if (!s) {
        pt_errors_add(errs, pt_reader_file(r), 0, "", "out of memory");
    } else {
        s->file = pt_reader_file(r);
        rc = read_all(r, opt, s, fn, ctx);
        pt_structure_free(s);
        free(s);
    }
    pt_reader_close(r);
    return rc;
}
