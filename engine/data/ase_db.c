/* ase_db.c — an ASE database as a whole: recognising the file, opening it
 * read-only, checking the schema version ASE wrote, reading SchNetPack's
 * unit metadata, choosing the forces and stress by name after the survey of
 * every row (ase_db_rows.c), and describing all of it in the info JSON.
 * See ase_db.h for the rules; the decoding of values is in ase_db_codec.c. */
#include "engine/data/ase_db_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "engine/data/ase_db_units.h"

const char *const pt_ase_col_names[N_COLS] = {
    "id", "numbers", "positions", "cell", "pbc", "natoms",
    "energy", "free_energy", "magmom", "forces", "stress", "dipole",
    "charges", "magmoms", "key_value_pairs", "data", "calculator", "constraints",
};

static const char sqlite_magic[16] = "SQLite format 3";   /* with its NUL: 16 bytes */

void pt_ase_row_error(ase_db *a, long row, const char *field, const char *fmt, ...)
{
    char msg[PT_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pt_errors_add_row(a->errs, a->file, row, field, "%s", msg);
}

static void file_error(ase_db *a, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void file_error(ase_db *a, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pt_errors_addv(a->errs, a->file, 0, field, fmt, ap);
    va_end(ap);
    a->fatal = 1;
}

/* ---- candidates ---------------------------------------------------------- */

static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u;   /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

int pt_ase_cand_find(const ase_db *a, const char *name)
{
    if (!a->n_slots) return -1;
    for (uint32_t i = hash_name(name) & (a->n_slots - 1);; i = (i + 1) & (a->n_slots - 1)) {
        uint32_t c = a->slots[i];
        if (c == UINT32_MAX) return -1;
        if (!strcmp(a->cands[c].name, name)) return (int)c;
    }
}

static int rehash(ase_db *a, uint32_t n_slots)
{
    uint32_t *slots = malloc(n_slots * sizeof(*slots));
    if (!slots) return -1;
    memset(slots, 0xff, n_slots * sizeof(*slots));
    for (uint32_t c = 0; c < a->n_cands; c++) {
        uint32_t i = hash_name(a->cands[c].name) & (n_slots - 1);
        while (slots[i] != UINT32_MAX) i = (i + 1) & (n_slots - 1);
        slots[i] = c;
    }
    free(a->slots);
    a->slots = slots;
    a->n_slots = n_slots;
    return 0;
}

int pt_ase_cand_add(ase_db *a, const char *name, int source)
{
    int c = pt_ase_cand_find(a, name);
    if (c >= 0) return c;
    if (a->n_cands == a->cap_cands) {
        uint32_t cap = a->cap_cands ? 2 * a->cap_cands : 32;
        ase_cand *grown = realloc(a->cands, cap * sizeof(*grown));
        if (!grown) return -1;
        a->cands = grown;
        a->cap_cands = cap;
    }
    ase_cand *e = &a->cands[a->n_cands];
    memset(e, 0, sizeof(*e));
    snprintf(e->name, sizeof e->name, "%s", name);
    e->source = source;
    e->factor = 1.0;
    a->n_cands++;
    if (2 * a->n_cands > a->n_slots && rehash(a, a->n_slots ? 2 * a->n_slots : 64) < 0) {
        a->n_cands--;
        return -1;
    }
    uint32_t i = hash_name(name) & (a->n_slots - 1);
    while (a->slots[i] != UINT32_MAX && a->slots[i] != a->n_cands - 1) i = (i + 1) & (a->n_slots - 1);
    a->slots[i] = a->n_cands - 1;
    return (int)(a->n_cands - 1);
}

/* ---- the file ------------------------------------------------------------ */

int pt_ase_db_sniff_head(const unsigned char *head, size_t n)
{
    return n >= sizeof sqlite_magic && !memcmp(head, sqlite_magic, sizeof sqlite_magic);
}

pt_ase_sniff pt_ase_db_sniff(const char *path)
{
    unsigned char head[16];
    FILE *f = fopen(path, "rb");
    if (!f) return PT_ASE_SNIFF_ERROR;
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    if (n == sizeof head && !memcmp(head, sqlite_magic, sizeof head)) return PT_ASE_SNIFF_SQLITE;
    if (n < 2 || head[0] != 0x1f || head[1] != 0x8b) return PT_ASE_SNIFF_OTHER;
    gzFile gz = gzopen(path, "rb");
    if (!gz) return PT_ASE_SNIFF_ERROR;
    int got = gzread(gz, head, sizeof head);
    gzclose(gz);
    return got == (int)sizeof head && !memcmp(head, sqlite_magic, sizeof head) ? PT_ASE_SNIFF_GZIP_SQLITE
                                                                             : PT_ASE_SNIFF_OTHER;
}

/* file:PATH?immutable=1 with PATH percent-encoded but for URI-safe bytes. */
static int make_uri(const char *path, char *uri, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = (size_t)snprintf(uri, cap, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (n + 4 >= cap) return -1;
        int safe = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                   strchr("/._-~", *p);
        if (!safe) {
            uri[n++] = '%';
            uri[n++] = hex[*p >> 4];
            uri[n++] = hex[*p & 15];
        } else {
            uri[n++] = (char)*p;
        }
    }
    return snprintf(uri + n, cap - n, "?immutable=1") < (int)(cap - n) ? 0 : -1;
}

/* A write-ahead log next to the file holds changes an immutable read would
 * not see: refuse rather than read an old state. */
static int check_wal(ase_db *a, const char *path)
{
    unsigned char hdr[20];
    FILE *f = fopen(path, "rb");
    if (!f) {
        file_error(a, "", "cannot open: %s", strerror(errno));
        return -1;
    }
    size_t n = fread(hdr, 1, sizeof hdr, f);
    fclose(f);
    if (n < sizeof hdr || hdr[18] != 2) return 0;   /* byte 18: 2 = WAL mode */
    char wal[4096];
    struct stat st;
    if (snprintf(wal, sizeof wal, "%s-wal", path) < (int)sizeof wal && stat(wal, &st) == 0 && st.st_size > 0) {
        file_error(a, "", "the database has a write-ahead log (%s-wal) whose changes are not in the file yet; "
                   "close the program writing it, or run: sqlite3 FILE 'PRAGMA wal_checkpoint(TRUNCATE)'", a->file);
        return -1;
    }
    return 0;
}

static int open_db(ase_db *a, const char *path)
{
    pt_ase_sniff kind = pt_ase_db_sniff(path);
    if (kind == PT_ASE_SNIFF_ERROR) {
        file_error(a, "", "cannot open: %s", errno ? strerror(errno) : "read error");
        return -1;
    }
    if (kind == PT_ASE_SNIFF_GZIP_SQLITE) {
        file_error(a, "", "a gzip-compressed SQLite database: ASE databases are read uncompressed; "
                   "gunzip it and give the .db file");
        return -1;
    }
    if (kind == PT_ASE_SNIFF_OTHER) {
        file_error(a, "", "not an SQLite database (an ASE .db file starts with \"SQLite format 3\")");
        return -1;
    }
    if (check_wal(a, path) < 0) return -1;
    char uri[8192];
    if (make_uri(path, uri, sizeof uri) < 0) {
        file_error(a, "", "path too long");
        return -1;
    }
    int rc = sqlite3_open_v2(uri, &a->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
    if (rc != SQLITE_OK) {
        file_error(a, "", "cannot open as SQLite: %s", a->db ? sqlite3_errmsg(a->db) : sqlite3_errstr(rc));
        return -1;
    }
    return 0;
}

/* Runs sql, calling fn on each row; 0, or -1 with the SQLite error reported. */
static int query(ase_db *a, const char *sql, int (*fn)(ase_db *, sqlite3_stmt *, void *), void *ctx)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(a->db, sql, -1, &st, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) rc = fn(a, st, ctx) ? SQLITE_ABORT : SQLITE_OK;
    if (rc != SQLITE_DONE && rc != SQLITE_ABORT) file_error(a, "", "SQLite: %s", sqlite3_errmsg(a->db));
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

typedef struct schema_scan {
    int systems, information, user_index;
    char tables[200];
} schema_scan;

static int on_master(ase_db *a, sqlite3_stmt *st, void *ctx)
{
    (void)a;
    schema_scan *s = ctx;
    const char *type = (const char *)sqlite3_column_text(st, 0), *name = (const char *)sqlite3_column_text(st, 1);
    if (!type || !name) return 0;
    if (!strcmp(type, "table")) {
        s->systems |= !strcmp(name, "systems");
        s->information |= !strcmp(name, "information");
        size_t n = strlen(s->tables);
        if (strncmp(name, "sqlite_", 7) && n + strlen(name) + 3 < sizeof s->tables)
            snprintf(s->tables + n, sizeof s->tables - n, "%s%s", n ? ", " : "", name);
    }
    s->user_index |= !strcmp(type, "index") && !strcmp(name, "user_index");
    return 0;
}

static int on_column(ase_db *a, sqlite3_stmt *st, void *ctx)
{
    (void)ctx;
    const char *name = (const char *)sqlite3_column_text(st, 1);
    for (int c = 0; name && c < N_COLS; c++)
        if (!strcmp(name, pt_ase_col_names[c])) a->has_col[c] = 1;
    return 0;
}

static int on_version(ase_db *a, sqlite3_stmt *st, void *ctx)
{
    const char *v = (const char *)sqlite3_column_text(st, 0);
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end) n = -1;
    *(long *)ctx = n;
    (void)a;
    return 0;
}

/* ase/db/sqlite.py _initialize(): version 1 had a "user_index", version 2
 * had no information table, later ones keep their number in it. */
static int check_schema(ase_db *a)
{
    schema_scan s = {0};
    if (query(a, "SELECT type, name FROM sqlite_master", on_master, &s) < 0) return -1;
    if (!s.systems) {
        file_error(a, "", "an SQLite database, but not an ASE database: it has no 'systems' table (tables: %s)",
                   s.tables[0] ? s.tables : "none");
        return -1;
    }
    long version = -2;
    if (s.user_index) version = 1;
    else if (!s.information) version = 2;
    else if (query(a, "SELECT value FROM information WHERE name = 'version'", on_version, &version) < 0) return -1;
    if (version == -2 || version == -1) {
        file_error(a, "information", "the ASE schema version is %s", version == -2 ? "missing" : "not a number");
        return -1;
    }
    a->version = (int)version;
    if (version < PT_ASE_DB_VERSION_MIN) {
        file_error(a, "information", "ASE schema version %ld is too old to read (ASE itself needs version %d or "
                   "newer); convert it with ASE: python3 -m ase.db.convert FILE", version, PT_ASE_DB_VERSION_MIN);
        return -1;
    }
    if (version > PT_ASE_DB_VERSION_MAX) {
        file_error(a, "information", "ASE schema version %ld is newer than this reader knows (%d to %d); "
                   "its encoding may differ, so it is not read", version, PT_ASE_DB_VERSION_MIN,
                   PT_ASE_DB_VERSION_MAX);
        return -1;
    }
    if (query(a, "PRAGMA table_info(systems)", on_column, NULL) < 0) return -1;
    static const int required[] = {COL_ID, COL_NUMBERS, COL_POSITIONS, COL_CELL, COL_PBC};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!a->has_col[required[i]]) {
            file_error(a, "systems", "not an ASE database: the systems table has no '%s' column",
                       pt_ase_col_names[required[i]]);
            return -1;
        }
    return 0;
}

static int on_metadata(ase_db *a, sqlite3_stmt *st, void *ctx)
{
    /* ASE reads the first metadata row (ase/db/sqlite.py: results[0][0]);
     * a later one is ignored too, not parsed over the first (which leaked
     * it: found by tests/fuzz/fuzz_ase_rows.c). */
    if (*(json_t **)ctx) return 0;
    const char *text = (const char *)sqlite3_column_text(st, 0);
    char err[200];
    json_t *md = text ? pt_ase_json_loads(text, (size_t)sqlite3_column_bytes(st, 0), err, sizeof err) : NULL;
    if (!md || !json_is_object(md)) {
        file_error(a, "information.metadata", "%s", md ? "is not a JSON object" : text ? err : "is null");
        json_decref(md);
        return 1;
    }
    *(json_t **)ctx = md;
    return 0;
}

static int on_external_table(ase_db *a, sqlite3_stmt *st, void *ctx)
{
    (void)ctx;
    const char *name = (const char *)sqlite3_column_text(st, 0);
    if (name) json_array_append_new(a->external_tables, json_string(name));
    return 0;
}

/* ---- units (SchNetPack metadata) ----------------------------------------- */

static int apply_distance_unit(ase_db *a, const json_t *md, json_t *units)
{
    const json_t *du = json_object_get(md, "_distance_unit");
    if (!du) return 0;
    pt_ase_unit u;
    char err[240];
    if (!json_is_string(du) || pt_ase_unit_parse(json_string_value(du), &u, err, sizeof err) < 0) {
        file_error(a, "metadata._distance_unit", "%s", json_is_string(du) ? err : "is not a string");
        return -1;
    }
    if (!u.unitless && !pt_ase_unit_is(&u, 1, 0)) {
        file_error(a, "metadata._distance_unit", "'%s' is not a length", json_string_value(du));
        return -1;
    }
    a->distance_factor = u.factor;
    json_object_set_new(units, "positions", json_pack("{s:s,s:s,s:f}", "unit", json_string_value(du), "to", "Ang",
                                                      "factor", u.factor));
    return 0;
}

/* The unit a role needs, as powers of (length, energy). */
static int role_dims(int role, int *length, int *energy)
{
    *length = role == ROLE_FORCES ? -1 : role == ROLE_STRESS ? -3 : 0;   /* targets, atom columns: 0 */
    *energy = 1;
    return role != ROLE_NONE;
}

static int apply_property_units(ase_db *a, const json_t *md, json_t *units)
{
    const json_t *pud = json_object_get(md, "_property_unit_dict");
    if (!pud) return 0;
    if (!json_is_object(pud)) {
        file_error(a, "metadata._property_unit_dict", "is not a dictionary");
        return -1;
    }
    const char *prop;
    const json_t *uv;
    json_object_foreach((json_t *)pud, prop, uv) {
        char name[PT_ASE_PATH_MAX], field[PT_ERR_FIELD_MAX], err[240];
        snprintf(name, sizeof name, "data.%s", prop);
        snprintf(field, sizeof field, "metadata._property_unit_dict.%s", prop);
        int c = pt_ase_cand_find(a, name);
        ase_cand *e = c >= 0 ? &a->cands[c] : NULL;
        const char *us = json_is_string(uv) ? json_string_value(uv) : NULL;
        pt_ase_unit u;
        int ok = (json_is_null(uv) || us) && pt_ase_unit_parse(us, &u, err, sizeof err) == 0;
        if (!ok && !us && !json_is_null(uv)) snprintf(err, sizeof err, "is not a string");
        json_t *entry = json_pack("{s:o}", "unit", us ? json_string(us) : json_null());
        json_object_set_new(units, name, entry);
        if (!e) {
            json_object_set_new(entry, "note", json_string("no such data entry"));
            continue;
        }
        snprintf(e->unit, sizeof e->unit, "%s", us ? us : "");
        if (!ok) {
            if (e->role != ROLE_NONE) {
                file_error(a, field, "%s; cannot store %s in packtrain's units", err, name);
                return -1;
            }
            json_object_set_new(entry, "note", json_string("unit not understood; the entry is not stored"));
            continue;
        }
        int want_l, want_e;
        if (!role_dims(e->role, &want_l, &want_e) || u.unitless) {
            if (u.unitless) json_object_set_new(entry, "note", json_string("no unit: values kept as stored"));
            continue;
        }
        if ((e->role == ROLE_TARGET || e->role == ROLE_ATOM) && !pt_ase_unit_is(&u, 0, 1)) {   /* not an energy: kept as is */
            json_object_set_new(entry, "note", json_string("not an energy: values kept as stored"));
            continue;
        }
        if (!pt_ase_unit_is(&u, want_l, want_e)) {
            file_error(a, field, "'%s' is not %s, yet %s is used as the %s", us,
                       e->role == ROLE_FORCES ? "an energy per length" : "an energy per volume", name,
                       e->role == ROLE_FORCES ? "forces" : "stress");
            return -1;
        }
        e->factor = u.factor;
        json_object_set_new(entry, "to", json_string(want_l == 0 ? "eV" : want_l == -1 ? "eV/Ang" : "eV/Ang^3"));
        json_object_set_new(entry, "factor", json_real(u.factor));
    }
    return 0;
}

/* ---- choosing forces, stress and targets --------------------------------- */

static const char *const source_names[] = {"calculator column", "key-value pair", "data"};
static const char *const kind_names[] = {"per-structure scalar", "per-atom 3-vector", "stress (3x3 or Voigt 6)",
                                         "per-atom scalar", "mixed", "text", "other"};

/* "a, b (source), ..." of the candidates that fit `fit`. */
static void list_fitting(const ase_db *a, int fit, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (uint32_t c = 0; c < a->n_cands && n < cap; c++)
        if (a->cands[c].fits[fit])
            n += (size_t)snprintf(buf + n, cap - n, "%s%s (%s)", n ? ", " : "", a->cands[c].name,
                                  source_names[a->cands[c].source]);
    if (!buf[0]) snprintf(buf, cap, "none");
}

/* The lookup rule of ase_db.h: as written, else as a data entry. */
static int resolve(const ase_db *a, const char *key)
{
    int c = pt_ase_cand_find(a, key);
    if (c >= 0 || !strncmp(key, "data.", 5)) return c;
    char name[PT_ASE_PATH_MAX];
    if (snprintf(name, sizeof name, "data.%s", key) >= (int)sizeof name) return -1;
    return pt_ase_cand_find(a, name);
}

static int choose(ase_db *a, const char *asked, const char *dflt, int fit, int role, const char *option, int *out)
{
    *out = -1;
    const char *key = asked ? asked : dflt;
    int c = resolve(a, key);
    const char *what = role == ROLE_FORCES ? "per-atom 3-vectors" : "a stress (3x3 or Voigt 6)";
    if (c >= 0 && a->cands[c].fits[fit]) {
        *out = c;
        a->cands[c].role = role;
        snprintf(a->cands[c].note, sizeof a->cands[c].note, "%s '%s'%s", option, key, asked ? "" : " (the default)");
        return 0;
    }
    if (!asked) {   /* nothing fitting by the default name: no forces/stress stored */
        if (c >= 0)
            snprintf(a->cands[c].note, sizeof a->cands[c].note, "not the %s: not %s in any row",
                     role == ROLE_FORCES ? "forces" : "stress", what);
        return 0;
    }
    char list[PT_ERR_MSG_MAX];
    list_fitting(a, fit, list, sizeof list);
    if (c < 0)
        file_error(a, option, "'%s' names nothing in this database; candidates holding %s: %s", key, what, list);
    else
        file_error(a, option, "'%s' is %s (%s), not %s in any row; candidates: %s", a->cands[c].name,
                   a->cands[c].kind == K_TEXT ? "text" : a->cands[c].example[0] ? a->cands[c].example : "something else",
                   source_names[a->cands[c].source], what, list);
    return -1;
}

static void choose_targets(ase_db *a)
{
    for (uint32_t c = 0; c < a->n_cands; c++) {
        ase_cand *e = &a->cands[c];
        if (e->role != ROLE_NONE || !e->fits[FIT_SCALAR]) continue;
        /* per-atom scalars fit as scalars in 1-atom rows: the survey's kind decides */
        if (e->kind != K_SCALAR && e->kind != K_MIXED) continue;
        if (strlen(e->name) >= PT_KEY_MAX) {
            snprintf(e->note, sizeof e->note, "not stored: target names are at most %d characters", PT_KEY_MAX - 1);
            continue;
        }
        e->role = ROLE_TARGET;
    }
}

/* Real arrays of one value per atom, (n,) or (n, 1), become per-atom columns
 * by name, as extended XYZ keeps R:1 columns (calculator charges, magmoms,
 * data entries such as per-atom energies).  So does a name per atom in most
 * of its rows whose array size changes from row to row; a row where it does
 * not fit is then an error there (a bad shape).  One size everywhere that
 * matches the atom count only in some rows (a dipole in the 3-atom rows) is
 * not per atom, nor is the calculator's dipole, nor an integer array (tags).
 * Before choose_targets: (1,) in a 1-atom row also fits as a number. */
static void choose_atom_columns(ase_db *a)
{
    for (uint32_t c = 0; c < a->n_cands; c++) {
        ase_cand *e = &a->cands[c];
        if (e->role != ROLE_NONE || !e->fits[FIT_ATOM_SCALAR]) continue;
        if (e->source == SRC_CALC && !strcmp(e->name, "dipole")) continue;
        int mostly = e->kind == K_MIXED && 2 * e->fits[FIT_ATOM_SCALAR] > e->rows && e->count_varies;
        if (e->kind != K_ATOM_SCALAR && !mostly) continue;
        if (e->int_atom_rows == e->fits[FIT_ATOM_SCALAR]) {
            snprintf(e->note, sizeof e->note, "not stored: integers per atom are not a label (extended XYZ "
                     "keeps real columns only)");
            continue;
        }
        if (strlen(e->name) >= PT_KEY_MAX) {
            snprintf(e->note, sizeof e->note, "not stored: per-atom column names are at most %d characters",
                     PT_KEY_MAX - 1);
            continue;
        }
        e->role = ROLE_ATOM;
    }
}

/* ---- the description ----------------------------------------------------- */

static void describe(const ase_db *a, json_t *info, json_t *metadata, json_t *units)
{
    static const char *const role_names[] = {NULL, "target", "forces", "stress", "atom column"};
    json_t *cands = json_array();
    for (uint32_t c = 0; c < a->n_cands; c++) {
        const ase_cand *e = &a->cands[c];
        json_t *o = json_pack("{s:s,s:s,s:s,s:I,s:o}", "name", e->name, "source", source_names[e->source], "kind",
                              kind_names[e->kind], "rows", (json_int_t)e->rows, "used_as",
                              e->role ? json_string(role_names[e->role]) : json_null());
        if (!o) continue;
        if (e->unit[0]) json_object_set_new(o, "unit", json_string(e->unit));
        if (e->factor != 1.0) json_object_set_new(o, "factor", json_real(e->factor));
        if (e->note[0]) json_object_set_new(o, "note", json_string(e->note));
        if (e->kind == K_MIXED || e->kind == K_OTHER)
            json_object_set_new(o, "example", json_pack("{s:I,s:s}", "row", (json_int_t)e->example_row, "is",
                                                        e->example));
        json_array_append_new(cands, o);
    }
    json_object_set_new(info, "file", json_string(a->file));
    json_object_set_new(info, "format", json_string("ase-db"));
    json_object_set_new(info, "schema_version", json_integer(a->version));
    json_object_set_new(info, "rows", json_integer((json_int_t)a->n_rows));
    json_object_set_new(info, "calculators", json_incref(a->calculators));
    json_object_set_new(info, "rows_with_constraints", json_integer((json_int_t)a->n_constraints));
    json_object_set_new(info, "external_tables_not_read", json_incref(a->external_tables));
    json_object_set_new(info, "metadata", metadata ? json_incref(metadata) : json_null());
    json_object_set_new(info, "units", json_incref(units));
    json_object_set_new(info, "forces", a->forces >= 0 ? json_string(a->cands[a->forces].name) : json_null());
    json_object_set_new(info, "stress", a->stress >= 0 ? json_string(a->cands[a->stress].name) : json_null());
    json_object_set_new(info, "candidates", cands);
}

/* ---- entry --------------------------------------------------------------- */

static int prepare(ase_db *a, const char *path, json_t **metadata, json_t *units)
{
    if (open_db(a, path) < 0 || check_schema(a) < 0) return -1;
    if (a->version >= 8 && query(a, "SELECT value FROM information WHERE name = 'metadata'", on_metadata,
                                 metadata) < 0)
        return -1;
    /* extra key-value tables of ASE's external_tables: listed, their values not read */
    if (query(a, "SELECT value FROM information WHERE name = 'external_table_name'", on_external_table, NULL) < 0)
        return -1;
    if (pt_ase_survey(a) < 0) return -1;
    if (a->n_rows == 0) {
        file_error(a, "", "the ASE database has no rows");
        return -1;
    }
    if (choose(a, a->opt->forces_key, "forces", FIT_VEC3, ROLE_FORCES, "forces_key", &a->forces) < 0 ||
        choose(a, a->opt->stress_key, "stress", FIT_STRESS, ROLE_STRESS, "stress_key", &a->stress) < 0)
        return -1;
    choose_atom_columns(a);
    choose_targets(a);
    if (*metadata && (apply_distance_unit(a, *metadata, units) < 0 || apply_property_units(a, *metadata, units) < 0))
        return -1;
    return 0;
}

int pt_ase_db_read(const char *path, const pt_read_options *opt, pt_structure_fn fn, void *ctx,
                   pt_errors *errs)
{
    ase_db a = {.file = opt->display_name ? opt->display_name : path, .opt = opt, .errs = errs,
                .forces = -1, .stress = -1, .distance_factor = 1.0, .calculators = json_object(),
                .external_tables = json_array()};
    json_t *metadata = NULL, *units = json_object();
    int rc = -1;
    if (!a.calculators || !a.external_tables || !units) pt_errors_add(errs, a.file, 0, "", "out of memory");
    else if (prepare(&a, path, &metadata, units) == 0) rc = pt_ase_rows(&a, fn, ctx);
    json_t *info = json_is_array(opt->info) && a.version ? json_object() : NULL;
    if (info) {
        describe(&a, info, metadata, units);
        json_array_append_new(opt->info, info);
    }
    json_decref(metadata);
    json_decref(units);
    json_decref(a.calculators);
    json_decref(a.external_tables);
    sqlite3_close(a.db);
    free(a.cands);
    free(a.slots);
    return rc;
}
