/* test_ase_db_atomcols.c — per-atom columns from ASE databases (issue 20):
 * real arrays of one value per atom ((n,) or (n, 1): calculator charges,
 * data entries such as per-atom energies, nested ones) are kept by name as
 * extended XYZ keeps R:1 columns, so the .ptd of tests/data/
 * ase_db_atomcols.db equals the .ptd of the same structures written by ASE
 * as extended XYZ, column by column (NaN where a structure has none); a
 * training key finds "data.KEY" without the prefix; integer arrays and a
 * 3-vector that matches the atom count only by coincidence are not
 * columns; SchNetPack energy units are converted; bad shapes and values are
 * errors at their row and field (tests/data/ase_db_atomcols_bad.db, made by
 * tests/data/make_ase_db.py). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/data/dataset.h"
#include "engine/data/ingest.h"
#include "tests/unit/ase_db_fixture.h"
#include "tests/unit/tmp_fixture.h"

#define DB ADB_DIR "ase_db_atomcols.db"
#define XYZ ADB_DIR "ase_db_atomcols.extxyz"
#define BAD ADB_DIR "ase_db_atomcols_bad.db"

static int ingest_one(const char *in, const char *out, pt_ingest_report *rep)
{
    pt_ingest_options o;
    pt_ingest_options_init(&o);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    int rc = pt_ingest_files(&in, 1, out, &o, rep, &errs);
    if (rc || errs.total) itu_print_errors(&errs);
    pt_errors_close(&errs);
    return rc;
}

/* The database's columns and the extended XYZ columns holding the same
 * numbers (ASE writes an array named charges as the column "charge"). */
static const struct {
    const char *db, *xyz;
} same[] = {
    {"charges", "charge"},
    {"data.energies", "energies"},
    {"data.q", "q"},
    {"data.site.spin", "spin"},
};

static void test_columns_equal_extxyz(void **state)
{
    (void)state;
    char dir[64], ref_out[128], out[128];
    assert_int_equal(tfx_mkdtemp(dir, sizeof dir, "adbcols"), 0);
    snprintf(ref_out, sizeof ref_out, "%s/ref.ptd", dir);
    snprintf(out, sizeof out, "%s/db.ptd", dir);
    pt_ingest_report rep;
    assert_int_equal(ingest_one(XYZ, ref_out, &rep), 0);
    pt_ingest_report_close(&rep);
    assert_int_equal(ingest_one(DB, out, &rep), 0);
    /* the report says which candidates became columns, and why tags did not */
    json_t *j = pt_ingest_report_json(&rep);
    const json_t *info = json_array_get(json_object_get(j, "ase_db"), 0);
    assert_non_null(info);
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        const json_t *c = adb_candidate(info, same[i].db);
        assert_non_null(c);
        assert_string_equal(adb_str(c, "kind"), "per-atom scalar");
        assert_string_equal(adb_str(c, "used_as"), "atom column");
    }
    assert_true(json_is_null(json_object_get(adb_candidate(info, "data.tags"), "used_as")));
    assert_non_null(strstr(adb_str(adb_candidate(info, "data.tags"), "note"), "integers per atom are not a label"));
    json_decref(j);
    pt_ingest_report_close(&rep);

    pt_dataset ref = {0}, ds = {0};
    char err[256];
    assert_int_equal(pt_dataset_open(&ref, ref_out, err, sizeof err), 0);
    assert_int_equal(pt_dataset_open(&ds, out, err, sizeof err), 0);
    assert_int_equal(ds.n_structs, 10);
    assert_int_equal(ds.n_atoms, ref.n_atoms);
    assert_memory_equal(ds.pos, ref.pos, 12 * ref.n_atoms);
    assert_int_equal(ref.n_atom_cols, 4);   /* tags is I:1: not kept there either */
    assert_int_equal(ds.n_atom_cols, 4);
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        int c = pt_dataset_find_atom_col(&ds, same[i].db), r = pt_dataset_find_atom_col(&ref, same[i].xyz);
        assert_true(c >= 0 && r >= 0);
        /* bit for bit, NaN included: spin is on the periodic structures only */
        assert_memory_equal(ds.atom_cols + (size_t)c * ds.n_atoms, ref.atom_cols + (size_t)r * ref.n_atoms,
                            4 * ref.n_atoms);
    }
    int spin = pt_dataset_find_atom_col(&ds, "data.site.spin");
    assert_false(isnan(ds.atom_cols[(size_t)spin * ds.n_atoms]));              /* a bulk cell */
    assert_true(isnan(ds.atom_cols[(size_t)spin * ds.n_atoms + ds.n_atoms - 1]));   /* a water cluster */
    /* a key finds the data entry without its prefix, as targets do; an
     * exact name wins */
    assert_int_equal(pt_dataset_find_atom_col(&ds, "energies"), pt_dataset_find_atom_col(&ds, "data.energies"));
    assert_int_equal(pt_dataset_find_atom_col(&ds, "site.spin"), spin);
    assert_int_equal(pt_dataset_find_atom_col(&ds, "charges"), 0);
    assert_int_equal(pt_dataset_find_atom_col(&ds, "tags"), -1);
    assert_int_equal(pt_dataset_find_atom_col(&ds, "data.charges"), -1);
    pt_dataset_close(&ds);
    pt_dataset_close(&ref);
    tfx_rmtree(dir);
}

/* The structures' columns as the reader hands them over. */
typedef struct cols {
    int n, n_valid;
    uint32_t n_cols[8], n_atoms[8];
    char names[8][2][PT_KEY_MAX];
    float vals[8][2 * 16];
} cols;

static int keep(void *ctx, const pt_structure *s)
{
    cols *k = ctx;
    if (k->n == 8) return 0;
    int i = k->n++;
    k->n_valid += s->valid;
    k->n_cols[i] = s->n_atom_cols;
    k->n_atoms[i] = s->n_atoms;
    for (uint32_t c = 0; c < s->n_atom_cols && c < 2; c++) memcpy(k->names[i][c], s->atom_col_names[c], PT_KEY_MAX);
    if (s->valid && s->n_atom_cols <= 2 && s->n_atoms <= 16)
        memcpy(k->vals[i], s->atom_vals, (size_t)s->n_atom_cols * s->n_atoms * sizeof(float));
    return 0;
}

/* Reads a database into k, its description appended to infos. */
static void read_cols(const char *path, cols *k, json_t *infos, pt_errors *errs)
{
    memset(k, 0, sizeof *k);
    pt_errors_init(errs, 0);
    pt_read_options o = {.format = PT_FORMAT_AUTO, .max_atoms = 1000, .info = infos};
    assert_int_equal(pt_ase_db_read(path, &o, keep, k, errs), 0);
}

static void test_bad_shapes(void **state)
{
    (void)state;
    cols k;
    json_t *infos = json_array();
    pt_errors errs;
    read_cols(BAD, &k, infos, &errs);
    assert_true(adb_has_error(&errs, 2, "data.energies",
                              "an array of shape (4,) here, not one value per atom (the row has 3 atoms: shape (3,) "
                              "or (3, 1)), as in 4 other rows"));
    assert_true(adb_has_error(&errs, 3, "data.energies", "atom 2: NaN or Inf value (nan)"));
    assert_true(adb_has_error(&errs, 4, "data.energies", "an array of shape (3, 2) here, not one value per atom"));
    assert_int_equal(errs.total, 3);   /* dip and tags are no columns, so no errors of theirs */
    assert_int_equal(k.n, 6);
    assert_int_equal(k.n_valid, 3);
    /* row 5: 13 values; row 6: shape (3, 1) */
    assert_int_equal(k.n_cols[4], 1);
    assert_string_equal(k.names[4][0], "data.energies");
    assert_true(k.vals[4][0] == -1.0f && k.vals[4][12] == 1.0f);
    assert_int_equal(k.n_cols[5], 1);
    assert_true(k.vals[5][0] == -0.5f && k.vals[5][1] == -0.25f && k.vals[5][2] == -0.25f);
    const json_t *info = json_array_get(infos, 0);
    assert_string_equal(adb_str(adb_candidate(info, "data.energies"), "kind"), "mixed");
    assert_string_equal(adb_str(adb_candidate(info, "data.energies"), "used_as"), "atom column");
    /* three numbers in every row: one per atom only in the 3-atom rows */
    assert_string_equal(adb_str(adb_candidate(info, "data.dip"), "kind"), "mixed");
    assert_true(json_is_null(json_object_get(adb_candidate(info, "data.dip"), "used_as")));
    assert_true(json_is_null(json_object_get(adb_candidate(info, "data.tags"), "used_as")));
    json_decref(infos);
    pt_errors_close(&errs);
}

/* SchNetPack's unit of a per-atom energy is converted to eV; a per-atom
 * column of shape (1,) in a 1-atom row is a column there, not a target; a
 * column whose unit is not an energy is kept as stored; the calculator's
 * dipole (3 numbers) is no column even in 3-atom rows. */
static void test_units_and_kinds(void **state)
{
    (void)state;
    char dir[64], p[128];
    assert_int_equal(tfx_mkdtemp(dir, sizeof dir, "adbunits"), 0);
    snprintf(p, sizeof p, "%s/units.db", dir);
    sqlite3 *db = adb_make(p);
    adb_exec(db, "INSERT INTO information VALUES ('metadata', '{\"_property_unit_dict\": "
                 "{\"e_atom\": \"kcal/mol\", \"w\": \"arb. unit\"}}')");
    static const int32_t z1[1] = {29}, z3[3] = {8, 1, 1};
    static const double pos1[3] = {0}, pos3[9] = {0, 0, 0, 0.96, 0, 0, -0.24, 0.93, 0};
    double a1[2] = {2.0, 5.0}, a3[6] = {1.0, 2.0, 3.0, 0.5, 0.5, 0.5};
    unsigned char d1[512], d3[512];
    size_t n1 = adb_data_blob(d1, a1, sizeof a1, "{\"e_atom\": {\"__ndarray__\": [[1], \"float64\", 8]}, "
                                                 "\"w\": {\"__ndarray__\": [[1], \"float64\", 16]}}");
    size_t n3 = adb_data_blob(d3, a3, sizeof a3, "{\"e_atom\": {\"__ndarray__\": [[3], \"float64\", 8]}, "
                                                 "\"w\": {\"__ndarray__\": [[3], \"float64\", 32]}}");
    adb_row rows[] = {
        {.id = 1, .n = 1, .z = z1, .pos = pos1, .natoms = -1, .data = d1, .data_len = n1},
        {.id = 2, .n = 3, .z = z3, .pos = pos3, .natoms = -1, .data = d3, .data_len = n3},
    };
    for (size_t i = 0; i < 2; i++) adb_insert(db, &rows[i]);
    static const double dipole[3] = {0.1, 0.2, 0.3};
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "UPDATE systems SET dipole = ?1", -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_blob(st, 1, dipole, sizeof dipole, SQLITE_STATIC);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);

    cols k;
    json_t *infos = json_array();
    pt_errors errs;
    read_cols(p, &k, infos, &errs);
    if (errs.total) itu_print_errors(&errs);
    assert_int_equal(errs.total, 0);
    assert_int_equal(k.n_valid, 2);
    const double kcal_mol = 0.0433641043;   /* eV, as SchNetPack's (ase.units) factor */
    for (int s = 0; s < 2; s++) {
        assert_int_equal(k.n_cols[s], 2);
        assert_string_equal(k.names[s][0], "data.e_atom");
        assert_string_equal(k.names[s][1], "data.w");
    }
    assert_float_equal(k.vals[0][0], 2.0 * kcal_mol, 1e-6);
    assert_true(k.vals[0][1] == 5.0f);   /* arb. unit: kept as stored */
    for (int a = 0; a < 3; a++) {
        assert_float_equal(k.vals[1][a], (a + 1) * kcal_mol, 1e-6);
        assert_true(k.vals[1][3 + a] == 0.5f);
    }
    const json_t *info = json_array_get(infos, 0);
    assert_string_equal(adb_str(adb_candidate(info, "data.e_atom"), "used_as"), "atom column");
    assert_true(json_is_null(json_object_get(adb_candidate(info, "dipole"), "used_as")));
    json_decref(infos);
    pt_errors_close(&errs);
    tfx_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_columns_equal_extxyz),
        cmocka_unit_test(test_bad_shapes),
        cmocka_unit_test(test_units_and_kinds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
