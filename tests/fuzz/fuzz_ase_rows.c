/* fuzz_ase_rows.c — ASE databases built from the input, so that mutations
 * land in the values ase_db.c and ase_db_rows.c decode (blobs of numbers,
 * positions, cell, forces, stress; key-value JSON; data blobs and text;
 * metadata) instead of in SQLite's page structure.
 *
 * The input is a list of records [tag u8][length u16 LE][bytes].  tag % 32:
 *    0 starts the next row (at most 8);
 *    1 numbers  2 positions  3 cell  9 forces  10 stress  11 dipole
 *   12 charges  13 magmoms  15 data                        (blobs)
 *   14 key_value_pairs  16 data  17 calculator  18 constraints  (text)
 *    4 pbc  5 natoms  6 energy  7 free_energy  8 magmom  19 id
 *      (numbers: 8 bytes a double, 1 to 7 a little-endian integer)
 *   20 an information 'version' row (text; without one: '9')
 *   21 an information 'metadata' row  22 an 'external_table_name' row
 *   23 forces_key  24 stress_key  (read options, NUL-free text)
 *   25 schema variant: bit 0 no information table, bit 1 a systems table
 *      with only the columns ASE requires
 * tag bit 7 stores the value with the other type (text for a blob or a
 * number, a blob for text); an empty value is NULL.  The database goes
 * through pt_read_structures as an upload would (fuzz_structure.h checks). */
#include <jansson.h>
#include <sqlite3.h>

#include "tests/fuzz/fuzz_structure.h"

#define MAX_ROWS 8
#define N_TAGS 26

enum { V_BLOB, V_TEXT, V_NUM };

static const struct {
    const char *column;   /* systems column, NULL for the others */
    int kind;
} tags[N_TAGS] = {
    {NULL, 0},
    {"numbers", V_BLOB}, {"positions", V_BLOB}, {"cell", V_BLOB}, {"pbc", V_NUM}, {"natoms", V_NUM},
    {"energy", V_NUM}, {"free_energy", V_NUM}, {"magmom", V_NUM}, {"forces", V_BLOB}, {"stress", V_BLOB},
    {"dipole", V_BLOB}, {"charges", V_BLOB}, {"magmoms", V_BLOB}, {"key_value_pairs", V_TEXT},
    {"data", V_BLOB}, {"data", V_TEXT}, {"calculator", V_TEXT}, {"constraints", V_TEXT}, {"id", V_NUM},
};

static const char schema_full[] =
    "CREATE TABLE systems (id INTEGER PRIMARY KEY AUTOINCREMENT, unique_id TEXT UNIQUE, ctime REAL, "
    "mtime REAL, username TEXT, numbers BLOB, positions BLOB, cell BLOB, pbc INTEGER, initial_magmoms BLOB, "
    "initial_charges BLOB, masses BLOB, tags BLOB, momenta BLOB, constraints TEXT, calculator TEXT, "
    "calculator_parameters TEXT, energy REAL, free_energy REAL, forces BLOB, stress BLOB, dipole BLOB, "
    "magmoms BLOB, magmom REAL, charges BLOB, key_value_pairs TEXT, data BLOB, natoms INTEGER, fmax REAL, "
    "smax REAL, volume REAL, mass REAL, charge REAL)";
static const char schema_min[] =
    "CREATE TABLE systems (id INTEGER PRIMARY KEY AUTOINCREMENT, numbers BLOB, positions BLOB, cell BLOB, "
    "pbc INTEGER, key_value_pairs TEXT, data BLOB)";

typedef struct field {
    const uint8_t *bytes;
    size_t len;
    int tag, other_type;
} field;

static void bind_value(sqlite3_stmt *st, int i, const field *f, int kind)
{
    if (f->len == 0) {
        sqlite3_bind_null(st, i);
        return;
    }
    if (f->other_type) kind = kind == V_TEXT ? V_BLOB : V_TEXT;
    if (kind == V_BLOB) {
        sqlite3_bind_blob(st, i, f->bytes, (int)f->len, SQLITE_STATIC);
    } else if (kind == V_TEXT) {
        sqlite3_bind_text(st, i, (const char *)f->bytes, (int)f->len, SQLITE_STATIC);
    } else if (f->len == 8) {
        double d;
        memcpy(&d, f->bytes, 8);
        sqlite3_bind_double(st, i, d);
    } else if (f->len < 8) {
        uint64_t u = 0;
        memcpy(&u, f->bytes, f->len);
        int shift = 64 - 8 * (int)f->len;
        sqlite3_bind_int64(st, i, (int64_t)(u << shift) >> shift);
    } else {
        sqlite3_bind_text(st, i, (const char *)f->bytes, (int)f->len, SQLITE_STATIC);
    }
}

static int has_column(int minimal, const char *col)
{
    static const char *const min_cols[] = {"id", "numbers", "positions", "cell", "pbc", "key_value_pairs", "data"};
    if (!minimal) return 1;
    for (size_t i = 0; i < sizeof min_cols / sizeof min_cols[0]; i++)
        if (!strcmp(col, min_cols[i])) return 1;
    return 0;
}

static void insert_row(sqlite3 *db, const field *fs, size_t n, int minimal)
{
    char sql[1024] = "INSERT INTO systems (", vals[128] = "";
    int k = 0;
    const field *use[N_TAGS] = {0};
    for (size_t i = 0; i < n; i++) {   /* the last value of a column wins */
        const char *col = tags[fs[i].tag].column;
        if (!col || !has_column(minimal, col)) continue;
        for (int t = 1; t < N_TAGS; t++)
            if (tags[t].column && !strcmp(tags[t].column, col)) use[t] = NULL;
        use[fs[i].tag] = &fs[i];
    }
    for (int t = 1; t < N_TAGS; t++) {
        if (!use[t]) continue;
        snprintf(sql + strlen(sql), sizeof sql - strlen(sql), "%s%s", k ? ", " : "", tags[t].column);
        snprintf(vals + strlen(vals), sizeof vals - strlen(vals), "%s?", k ? ", " : "");
        k++;
    }
    if (!k) snprintf(sql, sizeof sql, "INSERT INTO systems DEFAULT VALUES");
    else snprintf(sql + strlen(sql), sizeof sql - strlen(sql), ") VALUES (%s)", vals);
    sqlite3_stmt *st = NULL;
    FUZZ_CHECK(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK);
    int i = 1;
    for (int t = 1; t < N_TAGS; t++)
        if (use[t]) bind_value(st, i++, use[t], tags[t].kind);
    sqlite3_step(st);   /* a duplicate id fails: that row is left out */
    sqlite3_finalize(st);
}

static void info_row(sqlite3 *db, const char *name, const field *f)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "INSERT INTO information VALUES (?, ?)", -1, &st, NULL) != SQLITE_OK)
        return;   /* the variant without an information table */
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    bind_value(st, 2, f, V_TEXT);
    sqlite3_step(st);
    sqlite3_finalize(st);
}

static char *option_text(const field *f)
{
    if (f->len == 0 || memchr(f->bytes, '\0', f->len)) return NULL;
    return pt_fuzz_cstr(f->bytes, f->len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    field fs[256];
    size_t n = 0;
    int variant = 0;
    for (size_t p = 0; p + 3 <= size && n < sizeof fs / sizeof fs[0];) {
        size_t len = (size_t)data[p + 1] | (size_t)data[p + 2] << 8;
        if (len > size - p - 3) len = size - p - 3;
        fs[n] = (field){data + p + 3, len, (data[p] & 0x7f) % 32, data[p] >> 7};
        if (fs[n].tag == 25 && len) variant = fs[n].bytes[0];
        if (fs[n].tag < N_TAGS) n++;
        p += 3 + len;
    }
    sqlite3 *db = NULL;
    FUZZ_CHECK(sqlite3_open(":memory:", &db) == SQLITE_OK);
    const int minimal = variant & 2;
    FUZZ_CHECK(sqlite3_exec(db, minimal ? schema_min : schema_full, NULL, NULL, NULL) == SQLITE_OK);
    if (!(variant & 1))
        FUZZ_CHECK(sqlite3_exec(db, "CREATE TABLE information (name TEXT, value TEXT)", NULL, NULL, NULL) == SQLITE_OK);
    char *forces_key = NULL, *stress_key = NULL;
    int have_version = 0, rows = 0;
    size_t row_start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || fs[i].tag == 0) {
            if (rows < MAX_ROWS && i > row_start) insert_row(db, fs + row_start, i - row_start, minimal);
            rows++;
            row_start = i + 1;
            continue;
        }
        if (fs[i].tag == 20) info_row(db, "version", &fs[i]), have_version = 1;
        else if (fs[i].tag == 21) info_row(db, "metadata", &fs[i]);
        else if (fs[i].tag == 22) info_row(db, "external_table_name", &fs[i]);
        else if (fs[i].tag == 23 && !forces_key) forces_key = option_text(&fs[i]);
        else if (fs[i].tag == 24 && !stress_key) stress_key = option_text(&fs[i]);
    }
    if (!have_version && !(variant & 1)) {
        field nine = {(const uint8_t *)"9", 1, 20, 0};
        info_row(db, "version", &nine);
    }
    sqlite3_int64 bytes = 0;
    unsigned char *file = sqlite3_serialize(db, "main", &bytes, 0);
    FUZZ_CHECK(file != NULL);
    sqlite3_close(db);

    json_t *info = json_array();
    pt_read_options opt = {.format = PT_FORMAT_AUTO, .max_atoms = 1000, .display_name = "upload.db",
                           .forces_key = forces_key, .stress_key = stress_key, .info = info};
    pt_fuzz_read_file(pt_fuzz_file(file, (size_t)bytes), &opt);
    char *text = json_dumps(info, JSON_COMPACT);
    free(text);
    json_decref(info);
    sqlite3_free(file);
    free(forces_key);
    free(stress_key);
    return 0;
}
