/* xyz_read.c — the atom lines of plain XYZ and extended XYZ (as ASE writes
 * it); the extended XYZ comment line is xyz_comment.c's.
 *
 * Extended XYZ declares its per-atom columns in Properties=name:type:width:...
 * (species or Z, pos, optional forces, real scalars per atom kept by name
 * (partial charges, per-atom energies), anything else skipped).  Plain XYZ
 * treats the comment line as free text (nothing is taken from it; in
 * particular a lone number there is not guessed to be an energy) and reads
 * "symbol x y z" from each atom line, ignoring further columns as ASE does. */
#include "engine/data/xyz_read.h"

#include <stdio.h>
#include <string.h>

#include "engine/data/elements.h"
#include "engine/data/numparse.h"
#include "engine/data/xyz_comment.h"

/* ---- atom lines -------------------------------------------------------- */

static int count_tokens(const char *line)
{
    const char *p = line, *tok;
    int n = 0;
    while (pt_next_token(&p, &tok)) n++;
    return n;
}

/* Consumes the atom lines of a structure that cannot be parsed. */
static pt_parse_status skip_atoms(pt_reader *r, pt_structure *s)
{
    char *line;
    size_t len;
    for (uint32_t i = 0; i < s->n_atoms; i++) {
        int rc = pt_reader_atom_line(r, i, s->n_atoms, &line, &len);
        if (rc <= 0) return rc < 0 ? PT_PARSE_FATAL : PT_PARSE_BAD;
    }
    return PT_PARSE_BAD;
}

static int species_field(pt_reader *r, const char *tok, size_t n, uint8_t *z)
{
    int v = pt_element_from_symbol(tok, n);
    if (!v) {
        pt_reader_error(r, pt_reader_lineno(r), "species", "unknown element symbol '%.*s'",
                        (int)(n > 20 ? 20 : n), tok);
        return -1;
    }
    *z = (uint8_t)v;
    return 0;
}

static int columns_error(pt_reader *r, const char *line, const pt_xyz_columns *ps)
{
    pt_reader_error(r, pt_reader_lineno(r), "columns", "atom line has %d columns, Properties declares %d",
                    count_tokens(line), ps->total_width);
    return -1;
}

static int parse_atom_line(pt_reader *r, pt_structure *s, const pt_xyz_columns *ps, uint32_t a, const char *line)
{
    const char *p = line, *tok;
    int bad = 0;
    for (int c = 0; c < ps->n_cols; c++) {
        const pt_xyz_column *col = &ps->cols[c];
        if (col->role == PT_COL_POS || col->role == PT_COL_FORCES) {
            float *dst = col->role == PT_COL_POS ? &s->pos[3 * (size_t)a] : &s->forces[3 * (size_t)a];
            const char *field = col->role == PT_COL_POS ? "pos" : "forces";
            for (int k = 0; k < 3; k++) {
                int rc = pt_reader_next_float(r, &p, 0, field, &dst[k]);
                if (rc == 0) return columns_error(r, line, ps);
                bad |= rc < 0;
            }
            continue;
        }
        if (col->role == PT_COL_VALUE) {
            float *dst = &s->atom_vals[(size_t)col->value * s->n_atoms + a];
            int rc = pt_reader_next_float(r, &p, 0, ps->value_names[col->value], dst);
            if (rc == 0) return columns_error(r, line, ps);
            bad |= rc < 0;
            continue;
        }
        for (int k = 0; k < col->width; k++) {
            size_t n = pt_next_token(&p, &tok);
            if (n == 0) return columns_error(r, line, ps);
            if (col->role != PT_COL_SKIP) bad |= species_field(r, tok, n, &s->z[a]);
        }
    }
    if (pt_next_token(&p, &tok)) return columns_error(r, line, ps);
    return bad ? -1 : 0;
}

pt_parse_status pt_extxyz_parse(pt_reader *r, pt_structure *s, char *comment)
{
    pt_xyz_columns spec;
    int bad = pt_xyz_comment_parse(r, s, comment, &spec);
    if (bad < 0) return skip_atoms(r, s);
    if (spec.has_forces) {
        if (pt_structure_reserve(s, s->n_atoms, 1) < 0) {
            pt_reader_error(r, s->line, "", "out of memory for %u atoms", s->n_atoms);
            return PT_PARSE_FATAL;
        }
        s->forces = s->forces_buf;
    }
    if (spec.n_values) {
        if (pt_structure_reserve_values(s, (uint32_t)spec.n_values) < 0) {
            pt_reader_error(r, s->line, "", "out of memory for %u atoms", s->n_atoms);
            return PT_PARSE_FATAL;
        }
        s->n_atom_cols = (uint32_t)spec.n_values;
        memcpy(s->atom_col_names, spec.value_names, (size_t)spec.n_values * PT_KEY_MAX);
    }
    for (uint32_t a = 0; a < s->n_atoms; a++) {
        char *line;
        size_t len;
        int rc = pt_reader_atom_line(r, a, s->n_atoms, &line, &len);
        if (rc <= 0) return rc < 0 ? PT_PARSE_FATAL : PT_PARSE_BAD;
        if (parse_atom_line(r, s, &spec, a, line) < 0) bad = 1;
    }
    return bad ? PT_PARSE_BAD : PT_PARSE_OK;
}

pt_parse_status pt_xyz_parse(pt_reader *r, pt_structure *s, char *comment)
{
    (void)comment;  /* free text by definition of plain XYZ */
    int bad = 0;
    for (uint32_t a = 0; a < s->n_atoms; a++) {
        char *line;
        size_t len;
        int rc = pt_reader_atom_line(r, a, s->n_atoms, &line, &len);
        if (rc <= 0) return rc < 0 ? PT_PARSE_FATAL : PT_PARSE_BAD;
        const char *p = line, *tok;
        size_t n = pt_next_token(&p, &tok);
        if (n > 0 && species_field(r, tok, n, &s->z[a]) < 0) bad = 1;
        for (int k = 0; k < 3 && n > 0; k++) {
            int got = pt_reader_next_float(r, &p, 0, "pos", &s->pos[3 * (size_t)a + k]);
            if (got == 0) n = 0;
            bad |= got < 0;
        }
        if (n == 0) {
            pt_reader_error(r, pt_reader_lineno(r), "columns",
                            "atom line has %d columns, expected at least 4 (symbol x y z)", count_tokens(line));
            bad = 1;
        }
    }
    return bad ? PT_PARSE_BAD : PT_PARSE_OK;
}
