/* xyz_comment.c — the extended XYZ comment line (see xyz_comment.h).
 *
 * The line is split the way ASE's key_val_str_to_dict splits it (quotes
 * ' " { [ group, backslash escapes, whitespace around '=' allowed, a bare key
 * means True), so any file ASE reads parses the same here.  A key is a
 * training target when its value is one finite number; strings, booleans and
 * arrays are recognised but not kept as targets. */
#include "engine/data/xyz_comment.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/cell.h"
#include "engine/data/numparse.h"

static void print_trimmed(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%.60s%s", src, strlen(src) > 60 ? "..." : "");
}

/* Parses "species:S:1:pos:R:3[:...]"; 0 ok, -1 malformed (reported). */
static int parse_properties(pt_reader *r, long line, char *spec, pt_xyz_columns *ps)
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
        if (ps->n_cols == PT_XYZ_MAX_COLUMNS) {
            pt_reader_error(r, line, "Properties", "malformed Properties '%s': more than %d columns",
                            shown, PT_XYZ_MAX_COLUMNS);
            return -1;
        }
        pt_xyz_role role = PT_COL_SKIP;
        const char *need = NULL;
        if (!strcmp(name, "species")) role = PT_COL_SPECIES, need = "S:1";
        else if (!strcmp(name, "Z")) role = PT_COL_Z, need = "I:1";
        else if (!strcmp(name, "pos") || !strcmp(name, "positions")) role = PT_COL_POS, need = "R:3";
        else if (!strcmp(name, "forces") || !strcmp(name, "force")) role = PT_COL_FORCES, need = "R:3";
        if (!need && type[0] == 'R' && width == 1) {
            if (ps->n_values == PT_ATOM_COLS_MAX || strlen(name) >= PT_KEY_MAX) {
                pt_reader_error(r, line, "Properties", "malformed Properties '%s': column '%s' is "
                                "one real per atom too many (at most %d are kept, names up to %d "
                                "bytes)", shown, name, PT_ATOM_COLS_MAX, PT_KEY_MAX - 1);
                return -1;
            }
            for (int v = 0; v < ps->n_values; v++)
                if (!strcmp(ps->value_names[v], name)) {
                    pt_reader_error(r, line, "Properties", "malformed Properties '%s': column '%s' "
                                    "appears twice", shown, name);
                    return -1;
                }
            role = PT_COL_VALUE;
            ps->cols[ps->n_cols].value = ps->n_values;
            snprintf(ps->value_names[ps->n_values++], PT_KEY_MAX, "%s", name);
        }
        if (need && (type[0] != need[0] || width != need[2] - '0')) {
            pt_reader_error(r, line, "Properties", "malformed Properties '%s': column '%s' must be %s",
                            shown, name, need);
            return -1;
        }
        int *seen = role == PT_COL_SPECIES ? &species : role == PT_COL_Z ? &zcol : role == PT_COL_POS ? &pos
                  : role == PT_COL_FORCES ? &ps->has_forces : NULL;
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
            if (ps->cols[c].role == PT_COL_Z) ps->cols[c].role = PT_COL_SKIP;
    ps->has_forces = ps->has_forces > 0;
    return 0;
}

/* Every structure of a file usually has the same Properties: the last one
 * parsed is kept (in pt_structure.xyz_cache) and reused when the text
 * matches. */
typedef struct props_cache {
    char text[512];
    pt_xyz_columns spec;
} props_cache;

static int cached_properties(pt_reader *r, pt_structure *s, long line, char *value, pt_xyz_columns *ps)
{
    props_cache *pc = s->xyz_cache;
    if (pc && !strcmp(pc->text, value)) {   /* the names in use only: 64 of them are 4 KiB */
        memcpy(ps, &pc->spec, offsetof(pt_xyz_columns, value_names) +
                                  (size_t)pc->spec.n_values * PT_KEY_MAX);
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
    pt_xyz_columns *spec;
    int have_spec;
    int has_lattice, has_pbc, has_stress;
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

/* Up to `cap` numbers of an array value (split on whitespace and commas);
 * returns how many items there were, or -1 after reporting a bad item. */
static int parse_numbers(comment_ctx *c, const char *field, const char *value, double *out, int cap)
{
    const char *p = value, *item;
    size_t n;
    int count = 0;
    while ((n = next_item(&p, &item)) > 0) {
        double v;
        int rc = pt_parse_double(item, n, 0, &v);
        if (rc != PT_NUM_OK) {
            pt_reader_error(c->r, c->line, field, rc == PT_NUM_NONFINITE ? "NaN or Inf value '%.*s' in '%.60s'"
                                                                          : "not a number: '%.*s' in '%.60s'",
                            (int)(n > 30 ? 30 : n), item, value);
            c->bad = 1;
            return -1;
        }
        if (count < cap) out[count] = v;
        count++;
    }
    return count;
}

static void parse_lattice(comment_ctx *c, const char *value)
{
    double v[9];
    int n = parse_numbers(c, "Lattice", value, v, 9);
    if (n < 0) return;
    if (n != 9) {
        pt_reader_error(c->r, c->line, "Lattice", "expected 9 numbers (a, b, c), got %d in '%.60s'", n, value);
        c->bad = 1;
        return;
    }
    memcpy(c->s->cell, v, sizeof v);   /* ASE's cell: row i is lattice vector i */
    c->s->has_cell = 1;
}

static void parse_pbc(comment_ctx *c, const char *value)
{
    const char *p = value, *item;
    size_t n;
    int count = 0, ok = 1;
    unsigned bits = 0;
    while ((n = next_item(&p, &item)) > 0) {
        int t = (n == 1 && item[0] == 'T') || (n == 4 && !strncmp(item, "True", 4));
        int f = (n == 1 && item[0] == 'F') || (n == 5 && !strncmp(item, "False", 5));
        if (!t && !f) ok = 0;
        if (t && count < 3) bits |= 1u << count;
        count++;
    }
    if (!ok || (count != 1 && count != 3)) {
        pt_reader_error(c->r, c->line, "pbc", "expected T or F, once or for each of a, b, c, got '%.60s'",
                        value);
        c->bad = 1;
        return;
    }
    c->s->pbc = (uint8_t)(count == 1 && bits ? PT_PBC_ALL : bits);
}

/* stress: the 3x3 in Fortran order (as ASE writes it) or Voigt xx yy zz yz xz xy. */
static void parse_stress(comment_ctx *c, const char *value)
{
    double v[9];
    int n = parse_numbers(c, "stress", value, v, 9);
    if (n < 0) return;
    double *s = c->s->stress;
    if (n == 9) {
        for (int r = 0; r < 3; r++)
            for (int k = 0; k < 3; k++) s[3 * r + k] = v[3 * k + r];
    } else if (n == 6) {
        static const int voigt[9] = {0, 5, 4, 5, 1, 3, 4, 3, 2};
        for (int i = 0; i < 9; i++) s[i] = v[voigt[i]];
    } else {
        pt_reader_error(c->r, c->line, "stress",
                        "expected 9 numbers (3x3) or 6 (Voigt xx yy zz yz xz xy), got %d in '%.60s'", n, value);
        c->bad = 1;
        return;
    }
    c->s->has_stress = 1;
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

/* Lattice, pbc and stress are not keys, but may appear only once too. */
static int special_once(comment_ctx *c, int *seen, const char *key)
{
    if (*seen) {
        pt_reader_error(c->r, c->line, key, "key appears twice in the comment line");
        c->bad = 1;
        return 0;
    }
    *seen = 1;
    return 1;
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
        if (special_once(c, &c->has_lattice, key)) parse_lattice(c, value ? value : "");
    } else if (key[0] == 'p' && !strcmp(key, "pbc")) {
        if (special_once(c, &c->has_pbc, key)) parse_pbc(c, value ? value : "T");
    } else if (key[0] == 's' && !strcmp(key, "stress")) {
        if (special_once(c, &c->has_stress, key)) parse_stress(c, value ? value : "");
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

/* What needs the whole line: ASE's default pbc, and the checks on the cell
 * and the stress that ASE leaves to whoever uses the structure. */
static void check_periodic(comment_ctx *c)
{
    pt_structure *s = c->s;
    char shown[6];
    if (c->has_lattice && !c->has_pbc && s->has_cell) s->pbc = PT_PBC_ALL;   /* ASE's default */
    if (s->pbc && !c->has_lattice) {
        pt_reader_error(c->r, c->line, "pbc",
                        "pbc=\"%s\" is periodic but there is no Lattice: a periodic structure needs its cell",
                        pt_pbc_text(s->pbc, shown));
        c->bad = 1;
    } else if (s->pbc && s->has_cell) {
        double measure;
        int singular;
        int n = pt_cell_periodic_measure(s->cell, s->pbc, &measure, &singular);
        static const char *const what[4] = {"", "length", "area", "volume"};
        static const char *const unit[4] = {"", "Å", "Å²", "Å³"};
        if (singular) {
            pt_reader_error(c->r, c->line, "Lattice",
                            "cell is singular along its periodic axes (pbc=\"%s\"): %s %g %s; the "
                            "periodic lattice vectors must be non-zero and linearly independent",
                            pt_pbc_text(s->pbc, shown), what[n], measure, unit[n]);
            c->bad = 1;
        }
    }
    if (s->has_stress && s->pbc != PT_PBC_ALL) {
        pt_reader_error(c->r, c->line, "stress",
                        "stress needs a structure periodic along a, b and c (a cell volume), "
                        "this one has pbc=\"%s\"", pt_pbc_text(s->pbc, shown));
        c->bad = 1;
    }
}

int pt_xyz_comment_parse(pt_reader *r, pt_structure *s, char *comment, pt_xyz_columns *cols)
{
    comment_ctx c = {.r = r, .s = s, .line = pt_reader_lineno(r), .spec = cols};
    parse_comment(&c, comment);
    check_periodic(&c);
    if (c.have_spec < 0) return -1;
    if (c.have_spec == 0) {
        char def[] = "species:S:1:pos:R:3";
        parse_properties(r, c.line, def, cols);
    }
    return c.bad ? 1 : 0;
}
