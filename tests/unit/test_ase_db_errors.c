/* test_ase_db_errors.c — bad ASE databases: every problem located by row id
 * and field (wrong forces shape, wrong dtype, NaN/Inf, atomic number 0, cut
 * blobs, a NaN cell, damaged data, a key changing kind), nothing stored by
 * ingest unless skip_invalid; the file-level refusals (not SQLite, gzip'ed,
 * SQLite but not ASE, schema versions, damaged file, no rows, pending WAL);
 * and the cases ASE does not write itself, made with SQLite at run time. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/data/ingest.h"
#include "tests/unit/ase_db_fixture.h"
#include "tests/unit/tmp_fixture.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    return tfx_mkdtemp(dir, sizeof dir, "asedb_err");
}

static int teardown(void **state)
{
    (void)state;
    tfx_rmtree(dir);
    return 0;
}

static void tmp_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

static void copy_file(const char *from, const char *to, long limit)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[4096];
    size_t n;
    long done = 0;
    while ((limit < 0 || done < limit) && (n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (limit >= 0 && done + (long)n > limit) n = (size_t)(limit - done);
        assert_int_equal(fwrite(buf, 1, n, out), n);
        done += (long)n;
    }
    fclose(in);
    fclose(out);
}

/* ---- tests/data/ase_db_bad.db: one problem per row ----------------------- */

static const struct {
    long row;
    const char *field, *msg;
} bad_rows[] = {
    {2, "data.forces", "shape (23, 3) but the row has 24 atoms"},
    {3, "data.forces", "an array of str32 (24, 3), not of real numbers"},
    {4, "data.energy", "NaN or Inf value"},
    {5, "data.forces", "atom 1: NaN or Inf value"},
    {6, "numbers", "atom 1 has atomic number 0; packtrain knows 1 to 99"},
    {7, "positions", "blob of 20 bytes; 24 atoms need 576 bytes (float64, 3 per atom)"},
    {8, "cell", "NaN or Inf value"},
    {10, "data", "binary data of 683 bytes says its JSON starts at byte 1048576"},
    {11, "ref", "a string here, but a number in 10 other rows"},
};

static void test_bad_rows(void **state)
{
    (void)state;
    adb_read r;
    adb_read_file(&r, ADB_DIR "ase_db_bad.db", NULL, NULL);
    assert_int_equal(r.rc, 0);   /* read to the end: the rows are invalid, not the file */
    assert_int_equal(r.c->n, 11);
    assert_int_equal(r.c->n_valid, 2);
    assert_true(r.c->items[0].valid && r.c->items[8].valid);
    for (size_t i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++) {
        assert_true(adb_has_error(&r.errs, bad_rows[i].row, bad_rows[i].field, bad_rows[i].msg));
        assert_false(r.c->items[bad_rows[i].row - 1].valid);
    }
    assert_int_equal(r.errs.total, sizeof bad_rows / sizeof bad_rows[0]);
    char text[512];
    pt_error_format(&r.errs.items[0], text, sizeof text);
    assert_string_equal(text, "tests/data/ase_db_bad.db: row 2: data.forces: shape (23, 3) but the row has 24 atoms");
    adb_read_close(&r);
}

/* ingest stores nothing from a bad database, or only its good rows with
 * skip_invalid (the bad ones still listed). */
static void test_ingest_bad_db(void **state)
{
    (void)state;
    char out[128];
    tmp_path(out, sizeof out, "bad.ptd");
    pt_ingest_options o;
    pt_ingest_options_init(&o);
    o.display_name = "bad.db";
    pt_ingest_report rep;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    const char *in = ADB_DIR "ase_db_bad.db";
    assert_int_equal(pt_ingest_files(&in, 1, out, &o, &rep, &errs), -1);
    assert_true(rep.rejected);
    assert_int_equal(access(out, F_OK), -1);
    assert_true(adb_has_error(&errs, 2, "data.forces", "shape (23, 3)"));
    assert_string_equal(errs.items[0].file, "bad.db");
    pt_ingest_report_close(&rep);
    pt_errors_clear(&errs);
    o.skip_invalid = 1;
    assert_int_equal(pt_ingest_files(&in, 1, out, &o, &rep, &errs), 0);
    assert_int_equal(rep.n_structs, 2);
    assert_int_equal(rep.n_skipped, 9);
    assert_int_equal(errs.total, 9);
    pt_ingest_report_close(&rep);
    pt_errors_close(&errs);
}

/* ---- the file as a whole ------------------------------------------------- */

static void expect_file_error(const char *path, const char *field, const char *msg)
{
    adb_read r;
    adb_read_file(&r, path, NULL, NULL);
    assert_int_equal(r.rc, -1);
    assert_int_equal(r.c->n, 0);
    assert_true(adb_has_error(&r.errs, 0, field, msg));
    adb_read_close(&r);
}

static void test_not_a_database(void **state)
{
    (void)state;
    char p[128];
    tmp_path(p, sizeof p, "text.db");
    assert_int_equal(tfx_write(p, "3\n\nH 0 0 0\n"), 0);
    expect_file_error(p, "", "not an SQLite database");
    tmp_path(p, sizeof p, "missing.db");
    expect_file_error(p, "", "cannot open");
    /* a gzip'ed database is recognised and refused, not decompressed */
    tmp_path(p, sizeof p, "calc.db.gz");
    gzFile g = gzopen(p, "wb");
    FILE *in = fopen(ADB_DIR "ase_db_calc.db", "rb");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) assert_int_equal(gzwrite(g, buf, (unsigned)n), (int)n);
    fclose(in);
    gzclose(g);
    assert_int_equal(pt_ase_db_sniff(p), PT_ASE_SNIFF_GZIP_SQLITE);
    expect_file_error(p, "", "a gzip-compressed SQLite database: ASE databases are read uncompressed; gunzip it");
    /* the dispatch sends it to the ASE reader for that message */
    itu_collect *c = calloc(1, sizeof(*c));
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_read_options o = {.format = PT_FORMAT_AUTO, .max_atoms = 1000};
    assert_int_equal(pt_read_structures(p, &o, itu_on_structure, c, &errs), -1);
    assert_true(adb_has_error(&errs, 0, "", "gunzip it"));
    pt_errors_close(&errs);
    free(c);
}

static void test_sqlite_not_ase(void **state)
{
    (void)state;
    char p[128];
    tmp_path(p, sizeof p, "other.db");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    adb_exec(db, "CREATE TABLE molecules (id INTEGER, xyz TEXT)");
    sqlite3_close(db);
    expect_file_error(p, "", "an SQLite database, but not an ASE database: it has no 'systems' table (tables: molecules)");
    tmp_path(p, sizeof p, "partial.db");
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    adb_exec(db, "CREATE TABLE systems (id INTEGER PRIMARY KEY, numbers BLOB); CREATE TABLE information (name TEXT, "
                 "value TEXT); INSERT INTO information VALUES ('version', '9')");
    sqlite3_close(db);
    expect_file_error(p, "systems", "the systems table has no 'positions' column");
}

static void set_version(const char *path, const char *sql)
{
    copy_file(ADB_DIR "ase_db_calc.db", path, -1);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    adb_exec(db, sql);
    sqlite3_close(db);
}

static void test_schema_versions(void **state)
{
    (void)state;
    char p[128];
    tmp_path(p, sizeof p, "v10.db");
    set_version(p, "UPDATE information SET value = '10' WHERE name = 'version'");
    expect_file_error(p, "information", "ASE schema version 10 is newer than this reader knows (5 to 9)");
    tmp_path(p, sizeof p, "v4.db");
    set_version(p, "UPDATE information SET value = '4' WHERE name = 'version'");
    expect_file_error(p, "information", "ASE schema version 4 is too old to read");
    tmp_path(p, sizeof p, "vx.db");
    set_version(p, "UPDATE information SET value = 'nine' WHERE name = 'version'");
    expect_file_error(p, "information", "the ASE schema version is not a number");
    tmp_path(p, sizeof p, "v2.db");
    set_version(p, "DROP TABLE information");   /* ASE's schema 2 had no information table */
    expect_file_error(p, "information", "ASE schema version 2 is too old");
    tmp_path(p, sizeof p, "v1.db");
    set_version(p, "CREATE INDEX user_index ON systems(username)");   /* schema 1 */
    expect_file_error(p, "information", "ASE schema version 1 is too old");
    tmp_path(p, sizeof p, "badmeta.db");
    set_version(p, "INSERT INTO information VALUES ('metadata', '[1, 2]')");
    expect_file_error(p, "information.metadata", "is not a JSON object");
}

/* Two metadata rows: ASE reads the first and so does this reader; the
 * second is not parsed (it once replaced the first, which leaked: found by
 * tests/fuzz/fuzz_ase_rows.c, input in tests/fuzz/regressions/ase_rows). */
static void test_second_metadata_row(void **state)
{
    (void)state;
    char p[128];
    tmp_path(p, sizeof p, "twometa.db");
    set_version(p, "INSERT INTO information VALUES ('metadata', '{\"_distance_unit\": \"Bohr\"}');"
                   "INSERT INTO information VALUES ('metadata', '[1, 2]')");
    adb_read r;
    adb_read_file(&r, p, NULL, NULL);
    if (r.rc != 0) itu_print_errors(&r.errs);
    assert_int_equal(r.rc, 0);
    assert_string_equal(adb_str(json_object_get(r.info, "metadata"), "_distance_unit"), "Bohr");
    adb_read_close(&r);
}

static void test_damaged_and_empty(void **state)
{
    (void)state;
    char p[128];
    tmp_path(p, sizeof p, "cut.db");
    copy_file(ADB_DIR "ase_db_calc.db", p, 16384);   /* the header promises more pages */
    adb_read r;
    adb_read_file(&r, p, NULL, NULL);
    assert_int_equal(r.rc, -1);
    assert_true(r.errs.total >= 1);
    assert_non_null(strstr(r.errs.items[0].message, "SQLite"));
    adb_read_close(&r);
    expect_file_error(ADB_DIR "ase_db_empty.db", "", "the ASE database has no rows");
    /* through ingest: rejected, nothing written */
    char out[128];
    tmp_path(out, sizeof out, "empty.ptd");
    pt_ingest_options o;
    pt_ingest_options_init(&o);
    pt_ingest_report rep;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    const char *in = ADB_DIR "ase_db_empty.db";
    assert_int_equal(pt_ingest_files(&in, 1, out, &o, &rep, &errs), -1);
    assert_int_equal(access(out, F_OK), -1);
    pt_ingest_report_close(&rep);
    pt_errors_close(&errs);
}

/* A database in WAL mode with changes still in its -wal file. */
static void test_pending_wal(void **state)
{
    (void)state;
    char p[128];
    tmp_path(p, sizeof p, "wal.db");
    copy_file(ADB_DIR "ase_db_calc.db", p, -1);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    adb_exec(db, "PRAGMA journal_mode=WAL; UPDATE systems SET energy = 1.0 WHERE id = 1");
    expect_file_error(p, "", "the database has a write-ahead log");
    sqlite3_close(db);   /* checkpoints: the log is gone, the file reads */
    adb_read r;
    adb_read_file(&r, p, NULL, NULL);
    assert_int_equal(r.rc, 0);
    assert_true(itu_key(&r.c->items[0], "energy")->value == 1.0);
    adb_read_close(&r);
}

/* ---- rows ASE would not write -------------------------------------------- */

static const int32_t z1[1] = {29}, z3[3] = {8, 1, 1};
static const double pos1[3] = {0, 0, 0}, pos3[9] = {0, 0, 0, 0.96, 0, 0, -0.24, 0.93, 0};
static const double cubic[9] = {3.6, 0, 0, 0, 3.6, 0, 0, 0, 3.6};

/* data {"energy": float64 (1,), "charges": float64 (n,)} */
static size_t energy_charges(unsigned char *buf, double e, int n)
{
    double arrays[4] = {e, 0.1, 0.2, 0.3};
    char json[256];
    snprintf(json, sizeof json, "{\"energy\": {\"__ndarray__\": [[1], \"float64\", 8]}, "
             "\"charges\": {\"__ndarray__\": [[%d], \"float64\", 16]}}", n);
    return adb_data_blob(buf, arrays, 8 * (size_t)(1 + n), json);
}

static void test_kinds_over_rows(void **state)
{
    (void)state;
    char p[128];
    tmp_path(p, sizeof p, "kinds.db");
    sqlite3 *db = adb_make(p);
    unsigned char d1[512], d2[512];
    size_t n1 = energy_charges(d1, -1.5, 1), n2 = energy_charges(d2, -2.5, 3);
    double magmom = 0.75;   /* schema 5 kept magmom as a float64 blob */
    const char *text = "{\"energy\": {\"__ndarray__\": [[1], \"float64\", [-3.5]]}, "
                       "\"charges\": {\"__ndarray__\": [[3], \"float64\", [0, 0, 0]]}}";
    adb_row rows[] = {
        {.id = 5, .n = 1, .z = z1, .pos = pos1, .cell = cubic, .pbc = 7, .natoms = -1, .data = d1, .data_len = n1,
         .magmom_blob = &magmom},
        {.id = 9, .n = 3, .z = z3, .pos = pos3, .natoms = -1, .data = d2, .data_len = n2, .kv = "{\"tag\": 2}"},
        {.id = 12, .n = 3, .z = z3, .pos = pos3, .natoms = -1, .data = text, .data_len = strlen(text),
         .data_text = 1},
    };
    for (size_t i = 0; i < 3; i++) adb_insert(db, &rows[i]);
    adb_exec(db, "CREATE TABLE extra (key TEXT, value REAL, id INTEGER); "
                 "INSERT INTO information VALUES ('external_table_name', 'extra')");
    sqlite3_close(db);
    adb_read r;
    adb_read_file(&r, p, NULL, NULL);
    if (r.errs.total) itu_print_errors(&r.errs);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.c->n_valid, 3);
    /* row ids as they are, gaps included */
    assert_int_equal(r.c->items[0].line, 5);
    assert_int_equal(r.c->items[2].line, 12);
    /* charges of shape (1,) in the 1-atom row are per-atom, not a target */
    assert_string_equal(adb_str(adb_candidate(r.info, "data.charges"), "kind"), "per-atom scalar");
    assert_null(itu_key(&r.c->items[0], "data.charges"));
    assert_true(itu_key(&r.c->items[0], "data.energy")->value == -1.5);
    assert_true(itu_key(&r.c->items[2], "data.energy")->value == -3.5);   /* JSON text in a schema-9 file */
    assert_true(itu_key(&r.c->items[0], "magmom")->value == 0.75);
    assert_null(itu_key(&r.c->items[0], "tag"));   /* absent in this row: NaN in the .ptd */
    assert_true(itu_key(&r.c->items[1], "tag")->value == 2.0);
    assert_true(r.c->items[0].has_cell && r.c->items[0].pbc == 7);
    assert_false(r.c->items[1].has_cell);
    /* ASE's external tables are named in the report, their values not read */
    assert_string_equal(json_string_value(json_array_get(json_object_get(r.info, "external_tables_not_read"), 0)),
                        "extra");
    adb_read_close(&r);
}

static void test_row_problems(void **state)
{
    (void)state;
    char p[128];
    tmp_path(p, sizeof p, "rows.db");
    sqlite3 *db = adb_make(p);
    static const double slab[9] = {3.6, 0, 0, 0, 3.6, 0, 0, 0, 0};
    static const double line_cell[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    static const double stress[6] = {0.01, 0.01, 0.01, 0, 0, 0};
    static const double energy = -1.0;
    adb_row rows[] = {
        {.id = 1, .n = 1, .z = z1, .pos = pos1, .cell = cubic, .pbc = 7, .natoms = -1, .energy = &energy},
        {.id = 2, .n = 3, .z = z3, .pos = pos3, .natoms = -1, .kv = "{\"e\": NaN}"},
        {.id = 3, .n = 3, .z = z3, .pos = pos3, .natoms = 4},
        {.id = 4, .n = 3, .z = z3, .pos = pos3, .natoms = -1, .numbers_bytes = 7},
        {.id = 5, .n = 3, .z = z3, .pos = pos3, .natoms = -1, .pbc = 9},
        {.id = 6, .n = 1, .z = z1, .pos = pos1, .cell = slab, .pbc = 3, .natoms = -1, .stress = stress},
        {.id = 7, .n = 1, .z = z1, .pos = pos1, .cell = line_cell, .pbc = 1, .natoms = -1},
        {.id = 8, .n = 3, .z = z3, .pos = pos3, .natoms = -1, .kv = "{\"e\": 1.0"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) adb_insert(db, &rows[i]);
    sqlite3_close(db);
    adb_read r;
    adb_read_file(&r, p, NULL, NULL);
    assert_int_equal(r.rc, 0);
    assert_true(adb_has_error(&r.errs, 2, "e", "NaN or Inf value"));
    assert_true(adb_has_error(&r.errs, 3, "natoms", "says 4 atoms, but numbers holds 3"));
    assert_true(adb_has_error(&r.errs, 4, "numbers", "blob of 7 bytes does not hold a multiple of"));
    assert_true(adb_has_error(&r.errs, 5, "pbc", "is not a 3-bit integer"));
    assert_true(adb_has_error(&r.errs, 6, "stress", "stress needs a structure periodic along a, b and c"));
    assert_true(adb_has_error(&r.errs, 7, "cell", "cell is singular along its periodic axes (pbc=\"T F F\")"));
    assert_true(adb_has_error(&r.errs, 8, "key_value_pairs", "not valid JSON"));
    assert_int_equal(r.c->n_valid, 1);
    adb_read_close(&r);
    /* more atoms than max_atoms */
    itu_collect *c = calloc(1, sizeof(*c));
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_read_options o = {.format = PT_FORMAT_ASE_DB, .max_atoms = 2};
    assert_int_equal(pt_ase_db_read(p, &o, itu_on_structure, c, &errs), 0);
    assert_true(adb_has_error(&errs, 2, "numbers", "the row has 3 atoms, more than max_atoms 2"));
    pt_errors_close(&errs);
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_rows),
        cmocka_unit_test(test_ingest_bad_db),
        cmocka_unit_test(test_not_a_database),
        cmocka_unit_test(test_sqlite_not_ase),
        cmocka_unit_test(test_schema_versions),
        cmocka_unit_test(test_second_metadata_row),
        cmocka_unit_test(test_damaged_and_empty),
        cmocka_unit_test(test_pending_wal),
        cmocka_unit_test(test_kinds_over_rows),
        cmocka_unit_test(test_row_problems),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
