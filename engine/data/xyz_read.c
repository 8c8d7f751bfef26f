/* xyz_read.c — plain XYZ and extended XYZ (as ASE writes it) atom blocks.
 *
 * Extended XYZ puts per-structure key=value pairs on the comment line and
 * declares the per-atom columns in Properties=name:type:width:...  The
 * comment line is split the way ASE's key_val_str_to_dict splits it (quotes
 * ' " { [ group, backslash escapes, whitespace around '=' allowed, a bare key
 * means True), so any file ASE reads parses the same here.  A key is a
 * training target when its value is one finite number; strings, booleans and
 * arrays (Lattice, pbc) are recognised but not kept as targets.
 *
 * Plain XYZ treats the comment line as free text (nothing is taken from it;
 * in particular a lone number there is not guessed to be an energy) and reads
 * "symbol x y z" from each atom line, ignoring further columns as ASE does. */
#include "engine/data/xyz_read.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/elements.h"
#include "engine/data/numparse.h"

#define MAX_COLUMNS 64

typedef enum col_role { COL_SKIP, COL_SPECIES, COL_Z, COL_POS, COL_FORCES } col_role;

typedef struct column {
    col_role role;
    int width;
} column;

typedef struct prop_spec {
    column cols[MAX_COLUMNS];
    int n_cols;
    int total_width;
    int has_forces;
} prop_spec;

static void print_trimmed(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%.60s%s", src, strlen(src) > 60 ? "..." : "");
}

/* Parses "species:S:1:pos:R:3[:...]"; 0 ok, -1 malformed (reported). */
static int parse_properties(pt_reader *r, long line, char *spec, prop_spec *ps)
{
    char shown[80];
    print_trimmed(shown, sizeof shown, spec);
    memset(ps, 0, sizeof(*ps));
    int species = -1, zcol = -1, pos = -1;
    char *rest = spec;
    while (rest) {
        char *fields[3];
        fields[0] = strsep(&rest, ":");
        fields[1] = rest ? strsep(&rest, ":") : NULL;
        fields[2] = rest ? strsep(&rest, ":") : NULL;
        if (!fields[2] || !fields[0][0]) {
            pt_reader_error(r, line, "Properties",
                            "malformed Properties '%s': expected name:type:width triples", shown);
            return -1;
        }
        const char *name = fields[0], *type = fields[1];
        char *end;
        long width = strtol(fields[2], &end, 10);
        if (*end || width < 1 || width > 1000) {
            pt_reader_error(r, line, "Properties", "malformed Properties '%s': bad width '%s' for column '%s'",
                            shown, fields[2], name);
            return -1;
        }
        if (strlen(type) != 1 || !strchr("SRIL", type[0])) {
            pt_reader_error(r, line, "Properties", "malformed Properties '%s': unknown type '%s' for column '%s'",
                            shown, type, name);
            return -1;
        }
        if (ps->n_cols == MAX_COLUMNS) {
            pt_reader_error(r, line, "Properties", "malformed Properties '%s': more than %d columns",
                            shown, MAX_COLUMNS);
            return -1;
        }
        col_role role = COL_SKIP;
        const char *need = NULL;
        if (!strcmp(name, "species")) role = COL_SPECIES, need = "S:1";
        else if (!strcmp(name, "Z")) role = COL_Z, need = "I:1";
        else if (!strcmp(name, "pos") || !strcmp(name, "positions")) role = COL_POS, need = "R:3";
        else if (!strcmp(name, "forces") || !strcmp(name, "force")) role = COL_FORCES, need = "R:3";
        if (need && (type[0] != need[0] || width != need[2] - '0')) {
            pt_reader_error(r, line, "Properties", "malformed Properties '%s': column '%s' must be %s",
                            shown, name, need);
            return -1;
        }
        int *seen = role == COL_SPECIES ? &species : role == COL_Z ? &zcol : role == COL_POS ? &pos
                  : role == COL_FORCES ? &ps->has_forces : NULL;
        if (seen && *seen > 0) {
            pt_reader_error(r, line, "Properties", "malformed Properties '%s': column '%s' appears twice",
                            shown, name);
            return -1;
        }
        if (seen) *seen = 1;
        ps->cols[ps->n_cols].role = role;
        ps->cols[ps->n_cols].width = (int)width;
        ps->n_cols++;
        ps->total_width += (int)width;
    }
    if (species < 0 && zcol < 0) {
        pt_reader_error(r, line, "Properties", "malformed Properties '%s': no species column", shown);
        return -1;
    }
    if (pos < 0) {
        pt_reader_error(r, line, "Properties", "malformed Properties '%s': no pos column", shown);
        return -1;
    }
    if (species > 0)   /* species wins; a Z column next to it is only skipped */
        for (int c = 0; c < ps->n_cols; c++)
            if (ps->cols[c].role == COL_Z) ps->cols[c].role = COL_SKIP;
    ps->has_forces = ps->has_forces > 0;
    return 0;
}

/* Every structure of a file usually has the same Properties: the last one
 * parsed is kept (in pt_structure.xyz_cache) and reused when the text
 * matches. */
typedef struct props_cache {
    char text[512];
    prop_spec spec;
} props_cache;

static int cached_properties(pt_reader *r, pt_structure *s, long line, char *value, prop_spec *ps)
{
    props_cache *pc = s->xyz_cache;
    if (pc && !strcmp(pc->text, value)) {
        *ps = pc->spec;
        return 0;
    }
    size_t n = strlen(value);
    if (!pc && n < sizeof pc->text) s->xyz_cache = pc = calloc(1, sizeof(*pc));
    if (pc && n < sizeof pc->text) memcpy(pc->text, value, n + 1);
    if (parse_properties(r, line, value, ps) < 0) {
        if (pc) pc->text[0] = '\0';
        return -1;
    }
    if (pc && n < sizeof pc->text) pc->spec = *ps;
    else if (pc) pc->text[0] = '\0';
    return 0;
}

/* ---- comment line ------------------------------------------------------ */

typedef struct comment_ctx {
    pt_reader *r;
    pt_structure *s;
    long line;
    prop_spec *spec;
    int have_spec;
    int has_lattice, has_pbc;
    int bad;
    uint32_t hash[PT_READER_MAX_KEYS];   /* of s->keys[i].name, for the duplicate check */
} comment_ctx;

static uint32_t key_hash(const char *k)   /* FNV-1a */
{
    uint32_t h = 2166136261u;
    for (; *k; k++) h = (h ^ (unsigned char)*k) * 16777619u;
    return h;
}

/* Splits a value on whitespace and commas, as ASE does for arrays. */
static size_t next_item(const char **p, const char **item)
{
    const char *s = *p;
    while (pt_is_space(*s) || *s == ',') s++;
    const char *e = s;
    while (*e && !pt_is_space(*e) && *e != ',') e++;
    *item = s;
    *p = e;
    return (size_t)(e - s);
}

static void check_lattice(comment_ctx *c, const char *value)
{
    const char *p = value, *item;
    size_t n;
    int count = 0, ok = 1;
    double v;
    while ((n = next_item(&p, &item)) > 0) {
        count++;
        if (pt_parse_double(item, n, 0, &v) != PT_NUM_OK) ok = 0;
    }
    if (count != 9 || !ok) {
        pt_reader_error(c->r, c->line, "Lattice", "expected 9 finite numbers, got '%.60s'", value);
        c->bad = 1;
    }
}

static void check_pbc(comment_ctx *c, const char *value)
{
    const char *p = value, *item;
    size_t n;
    int count = 0, periodic = 0, ok = 1;
    while ((n = next_item(&p, &item)) > 0) {
        count++;
        if (n == 1 && (item[0] == 'T' || item[0] == 'F')) periodic |= item[0] == 'T';
        else if (n == 4 && !strncmp(item, "True", 4)) periodic = 1;
        else if (!(n == 5 && !strncmp(item, "False", 5))) ok = 0;
    }
    if (!ok || (count != 1 && count != 3)) {
        pt_reader_error(c->r, c->line, "pbc", "expected T/F values, got '%.60s'", value);
        c->bad = 1;
    } else if (periodic) {
        pt_reader_error(c->r, c->line, "pbc",
                        "periodic structures are not supported (neighbour graphs ignore periodic images)");
        c->bad = 1;
    }
}

static void add_key(comment_ctx *c, const char *key, const char *value)
{
    pt_structure *s = c->s;
    int numeric = 0;
    double v = NAN;
    if (value && !(key[0] == 'u' && !strcmp(key, "uid"))) {   /* ASE keeps uid a string */
        const char *p = value, *item, *more;
        size_t n = next_item(&p, &item);
        /* booleans (T, F, True, ...) and strings are simply not numbers */
        if (n > 0 && next_item(&p, &more) == 0) {
            int rc = pt_parse_double(item, n, 0, &v);
            if (rc == PT_NUM_NONFINITE) {
                pt_reader_error(c->r, c->line, key, "NaN or Inf value '%.40s'", value);
                c->bad = 1;
                return;
            }
            numeric = rc == PT_NUM_OK;
            if (!numeric) v = NAN;
        }
    }
    if (strlen(key) >= PT_KEY_MAX) {
        if (numeric) {
            pt_reader_error(c->r, c->line, "", "key name '%.40s...' longer than %d characters",
                            key, PT_KEY_MAX - 1);
            c->bad = 1;
        }
        return;
    }
    uint32_t h = key_hash(key);
    for (uint32_t i = 0; i < s->n_keys; i++)
        if (c->hash[i] == h && !strcmp(s->keys[i].name, key)) {
            pt_reader_error(c->r, c->line, key, "key appears twice in the comment line");
            c->bad = 1;
            return;
        }
    if (s->n_keys == PT_READER_MAX_KEYS) {
        pt_reader_error(c->r, c->line, key, "more than %d keys in the comment line", PT_READER_MAX_KEYS);
        c->bad = 1;
        return;
    }
    c->hash[s->n_keys] = h;
    pt_key_value *kv = &s->keys[s->n_keys++];
    memcpy(kv->name, key, strlen(key) + 1);
    kv->numeric = numeric;
    kv->value = v;
}

static void handle_pair(comment_ctx *c, const char *key, char *value)
{
    if (!key[0]) {
        pt_reader_error(c->r, c->line, "comment", "value '%.40s' has no key", value ? value : "");
        c->bad = 1;
    } else if (key[0] == 'P' && !strcmp(key, "Properties")) {
        if (!value || cached_properties(c->r, c->s, c->line, value, c->spec) < 0) {
            if (!value) pt_reader_error(c->r, c->line, "Properties", "malformed Properties: no value");
            c->bad = 1;
            c->have_spec = -1;
        } else {
            c->have_spec = 1;
        }
    } else if (key[0] == 'L' && !strcmp(key, "Lattice")) {
        c->has_lattice = 1;
        check_lattice(c, value ? value : "");
    } else if (key[0] == 'p' && !strcmp(key, "pbc")) {
        c->has_pbc = 1;
        check_pbc(c, value ? value : "T");
    } else {
        add_key(c, key, value);
    }
}

/* Characters that end a run of ordinary comment-line characters. */
static const unsigned char comment_special[256] = {
    [0] = 1, [' '] = 1, ['\t'] = 1, ['\r'] = 1, ['\v'] = 1, ['\f'] = 1,
    ['='] = 1, ['"'] = 1, ['\''] = 1, ['{'] = 1, ['['] = 1, ['\\'] = 1,
};

/* Splits the comment line in place into words (quotes removed, escapes
 * applied, each word NUL-terminated) and groups them into key[=value] pairs.
 * In place is safe: the output never grows past the input and its NUL. */
static void parse_comment(comment_ctx *c, char *buf)
{
    size_t i = 0, w = 0;
    long word = -1, key = -1, val = -1;
    int eq_pending = 0;
    char close = 0;
    for (;; i++) {
        /* copy runs of ordinary characters without the state machine */
        if (close) {
            while (buf[i] && buf[i] != close && buf[i] != '\\') buf[w++] = buf[i++];
        } else if (!comment_special[(unsigned char)buf[i]]) {
            if (word < 0) word = (long)w;
            while (!comment_special[(unsigned char)buf[i]]) buf[w++] = buf[i++];
        }
        char ch = buf[i];
        if (ch == '\0' && close) {
            pt_reader_error(c->r, c->line, "comment", "unterminated quote (missing %c)", close);
            c->bad = 1;
            return;
        }
        if (close) {
            if (ch == '\\' && buf[i + 1]) ch = buf[++i];
            else if (ch == close) {
                close = 0;
                continue;
            }
            buf[w++] = ch;
            continue;
        }
        int sep = ch == '\0' || pt_is_space(ch) || ch == '=';
        if (!sep) {
            if (word < 0) word = (long)w;
            if (ch == '"' || ch == '\'') close = ch;
            else if (ch == '{') close = '}';
            else if (ch == '[') close = ']';
            else {
                if (ch == '\\' && buf[i + 1]) ch = buf[++i];
                buf[w++] = ch;
            }
            continue;
        }
        if (word >= 0) {   /* a word just ended */
            buf[w++] = '\0';
            if (key < 0) {
                key = word;
            } else if (eq_pending) {
                if (val >= 0) buf[word - 1] = '=';  /* ASE joins a=b=c into "b=c" */
                else val = word;
                eq_pending = ch == '=';
                word = -1;
                if (ch == '\0') break;
                continue;
            } else {
                handle_pair(c, buf + key, val >= 0 ? buf + val : NULL);
                key = word;
                val = -1;
            }
            word = -1;
        }
        if (ch == '=') {
            if (key < 0) {
                buf[w++] = '\0';
                key = (long)w - 1;
            }
            eq_pending = 1;
        }
        if (ch == '\0') break;
    }
    if (key >= 0) {
        if (eq_pending && val < 0) {
            buf[w] = '\0';
            val = (long)w;
        }
        handle_pair(c, buf + key, val >= 0 ? buf + val : NULL);
    }
}

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

static int columns_error(pt_reader *r, const char *line, const prop_spec *ps)
{
    pt_reader_error(r, pt_reader_lineno(r), "columns", "atom line has %d columns, Properties declares %d",
                    count_tokens(line), ps->total_width);
    return -1;
}

static int parse_atom_line(pt_reader *r, pt_structure *s, const prop_spec *ps, uint32_t a, const char *line)
{
    const char *p = line, *tok;
    int bad = 0;
    for (int c = 0; c < ps->n_cols; c++) {
        const column *col = &ps->cols[c];
        if (col->role == COL_POS || col->role == COL_FORCES) {
            float *dst = col->role == COL_POS ? &s->pos[3 * (size_t)a] : &s->forces[3 * (size_t)a];
            const char *field = col->role == COL_POS ? "pos" : "forces";
            for (int k = 0; k < 3; k++) {
                int rc = pt_reader_next_float(r, &p, 0, field, &dst[k]);
                if (rc == 0) return columns_error(r, line, ps);
                bad |= rc < 0;
            }
            continue;
        }
        for (int k = 0; k < col->width; k++) {
            size_t n = pt_next_token(&p, &tok);
            if (n == 0) return columns_error(r, line, ps);
            if (col->role != COL_SKIP) bad |= species_field(r, tok, n, &s->z[a]);
        }
    }
    if (pt_next_token(&p, &tok)) return columns_error(r, line, ps);
    return bad ? -1 : 0;
}

pt_parse_status pt_extxyz_parse(pt_reader *r, pt_structure *s, char *comment)
{
    prop_spec spec;
    comment_ctx c = {.r = r, .s = s, .line = pt_reader_lineno(r), .spec = &spec};
    parse_comment(&c, comment);
    if (c.has_lattice && !c.has_pbc) {   /* ASE reads Lattice without pbc as pbc="T T T" */
        pt_reader_error(r, c.line, "Lattice",
                        "Lattice without pbc means periodic; periodic structures are not supported "
                        "(add pbc=\"F F F\" if the cell is irrelevant)");
        c.bad = 1;
    }
    if (c.have_spec < 0) return skip_atoms(r, s);
    if (c.have_spec == 0) {
        char def[] = "species:S:1:pos:R:3";
        parse_properties(r, c.line, def, &spec);
    }
    if (spec.has_forces) {
        if (pt_structure_reserve(s, s->n_atoms, 1) < 0) {
            pt_reader_error(r, s->line, "", "out of memory for %u atoms", s->n_atoms);
            return PT_PARSE_FATAL;
        }
        s->forces = s->forces_buf;
    }
    int bad = c.bad;
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
