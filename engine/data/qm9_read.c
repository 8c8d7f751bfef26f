/* qm9_read.c — the original QM9 per-molecule format (dsgdb9nsd_NNNNNN.xyz).
 *
 *   line 1      atom count N
 *   line 2      "gdb ID  A B C mu alpha homo lumo gap r2 zpve U0 U H G Cv"
 *   N lines     "El  x y z  q" (Å, Mulliken charge in e), numbers possibly
 *               in Mathematica notation: "1.5*^-6" means 1.5e-6
 *   3 lines     harmonic frequencies; GDB17 and relaxed SMILES; InChIs
 *
 * Keys and units kept (names match ../shared/data; Hartree values are turned
 * into eV with 27.211386 eV/Ha exactly as the shared datasets were made):
 *   qm9_id; rot_A rot_B rot_C (GHz); mu (D); alpha (a0^3); homo lumo gap zpve
 *   energy_U0 energy_U enthalpy_H free_energy (eV); r2 (a0^2); cv (cal/mol K).
 * Partial charges, frequencies and SMILES/InChI are checked but not kept. A
 * file may hold several molecules one after the other. */
#include "engine/data/qm9_read.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/data/elements.h"
#include "engine/data/numparse.h"

#define QM9_HARTREE_EV 27.211386
#define QM9_N_PROPS 15

static const struct {
    const char *name;
    int hartree;
} qm9_props[QM9_N_PROPS] = {
    {"rot_A", 0},  {"rot_B", 0},       {"rot_C", 0},     {"mu", 0},         {"alpha", 0},
    {"homo", 1},   {"lumo", 1},        {"gap", 1},       {"r2", 0},         {"zpve", 1},
    {"energy_U0", 1}, {"energy_U", 1}, {"enthalpy_H", 1}, {"free_energy", 1}, {"cv", 0},
};

static void add_key(pt_structure *s, const char *name, double v)
{
    pt_key_value *kv = &s->keys[s->n_keys++];
    snprintf(kv->name, sizeof kv->name, "%s", name);
    kv->numeric = 1;
    kv->value = v;
}

static int number_field(pt_reader *r, long line, const char *tok, size_t n, const char *field, double *v)
{
    int rc = pt_parse_double(tok, n, PT_NUM_MATHEMATICA, v);
    if (rc == PT_NUM_OK) return 0;
    pt_reader_error(r, line, field, rc == PT_NUM_INVALID ? "not a number: '%.*s'" : "NaN or Inf value '%.*s'",
                    (int)(n > 40 ? 40 : n), tok);
    return -1;
}

/* The "gdb ..." property line; 0 ok, -1 reported. */
static int parse_gdb_line(pt_reader *r, pt_structure *s, const char *comment)
{
    long line = pt_reader_lineno(r);
    const char *p = comment, *tok;
    size_t n = pt_next_token(&p, &tok);
    if (n != 3 || strncmp(tok, "gdb", 3)) {
        pt_reader_error(r, line, "gdb", "expected a 'gdb ID A B C mu ...' property line, got '%.40s'", comment);
        return -1;
    }
    const char *toks[QM9_N_PROPS + 2];
    size_t lens[QM9_N_PROPS + 2];
    int count = 0;
    while ((n = pt_next_token(&p, &tok)) > 0) {
        if (count < QM9_N_PROPS + 2) {
            toks[count] = tok;
            lens[count] = n;
        }
        count++;
    }
    if (count != QM9_N_PROPS + 1) {
        pt_reader_error(r, line, "gdb", "property line has %d values, expected 16 "
                        "(id A B C mu alpha homo lumo gap r2 zpve U0 U H G Cv)", count);
        return -1;
    }
    int bad = 0;
    double id = NAN;
    if (number_field(r, line, toks[0], lens[0], "qm9_id", &id) < 0) bad = 1;
    else if (id < 1 || id != floor(id)) {
        pt_reader_error(r, line, "qm9_id", "molecule id must be a positive integer, got '%.*s'",
                        (int)(lens[0] > 40 ? 40 : lens[0]), toks[0]);
        bad = 1;
    }
    add_key(s, "qm9_id", id);
    for (int i = 0; i < QM9_N_PROPS; i++) {
        double v;
        if (number_field(r, line, toks[i + 1], lens[i + 1], qm9_props[i].name, &v) < 0) bad = 1;
        add_key(s, qm9_props[i].name, qm9_props[i].hartree ? v * QM9_HARTREE_EV : v);
    }
    return bad ? -1 : 0;
}

static int parse_atom_line(pt_reader *r, pt_structure *s, uint32_t a, const char *line)
{
    const char *p = line, *tok;
    int bad = 0, cols = 0;
    size_t n;
    float charge;
    while ((n = pt_next_token(&p, &tok)) > 0) {
        if (cols == 0) {
            int z = pt_element_from_symbol(tok, n);
            if (!z) {
                pt_reader_error(r, pt_reader_lineno(r), "species", "unknown element symbol '%.*s'",
                                (int)(n > 20 ? 20 : n), tok);
                bad = 1;
            }
            s->z[a] = (uint8_t)z;
        } else if (cols <= 3) {
            bad |= pt_reader_float_field(r, tok, n, PT_NUM_MATHEMATICA, "pos", &s->pos[3 * (size_t)a + cols - 1]);
        } else if (cols == 4) {
            bad |= pt_reader_float_field(r, tok, n, PT_NUM_MATHEMATICA, "charge", &charge);
        }
        cols++;
    }
    if (cols != 5) {
        pt_reader_error(r, pt_reader_lineno(r), "columns",
                        "atom line has %d columns, expected 5 (symbol x y z charge)", cols);
        return -1;
    }
    return bad ? -1 : 0;
}

/* Frequencies, SMILES and InChI lines; 0 ok, 1 invalid, -1 fatal. */
static int parse_trailer(pt_reader *r, const pt_structure *s)
{
    static const char *const what[3] = {"frequencies", "SMILES", "InChI"};
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        char *line;
        size_t len;
        int rc = pt_reader_next_line(r, &line, &len);
        if (rc < 0) return -1;
        if (rc == 0) {
            pt_reader_error(r, pt_reader_lineno(r), what[i],
                            "file is truncated: QM9 molecule on line %ld ends before its %s line", s->line, what[i]);
            return 1;
        }
        const char *p = line, *tok;
        size_t n;
        if (i == 0) {
            double v;
            while ((n = pt_next_token(&p, &tok)) > 0)
                if (number_field(r, pt_reader_lineno(r), tok, n, "frequencies", &v) < 0) {
                    bad = 1;
                    break;
                }
        } else if (i == 2) {
            n = pt_next_token(&p, &tok);
            if (n < 6 || strncmp(tok, "InChI=", 6)) {
                pt_reader_error(r, pt_reader_lineno(r), "InChI",
                                "expected the InChI line of the QM9 molecule on line %ld, got '%.40s'",
                                s->line, line);
                return 1;
            }
        }
    }
    return bad;
}

pt_parse_status pt_qm9_parse(pt_reader *r, pt_structure *s, char *comment)
{
    int bad = parse_gdb_line(r, s, comment) < 0;
    for (uint32_t a = 0; a < s->n_atoms; a++) {
        char *line;
        size_t len;
        int rc = pt_reader_atom_line(r, a, s->n_atoms, &line, &len);
        if (rc <= 0) return rc < 0 ? PT_PARSE_FATAL : PT_PARSE_BAD;
        if (parse_atom_line(r, s, a, line) < 0) bad = 1;
    }
    int rc = parse_trailer(r, s);
    if (rc < 0) return PT_PARSE_FATAL;
    return (bad || rc) ? PT_PARSE_BAD : PT_PARSE_OK;
}
