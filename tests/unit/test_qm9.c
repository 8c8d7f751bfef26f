/* test_qm9.c — the raw QM9 per-molecule format: Hartree->eV conversion
 * checked against the DFT values of ../shared/data/qm9_dft20, Mathematica
 * exponents, several molecules in one (gzip) stream, and every error. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/reader.h"
#include "tests/unit/ingest_test_util.h"

static itu_collect *read_path(const char *path, pt_format format, int expect_n)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    itu_collect *c = calloc(1, sizeof(*c));
    pt_read_options o = {.format = format, .max_atoms = 1000};
    assert_int_equal(pt_read_structures(path, &o, itu_on_structure, c, &errs), 0);
    itu_print_errors(&errs);
    assert_int_equal(errs.total, 0);
    assert_int_equal(c->n_valid, expect_n);
    pt_errors_close(&errs);
    return c;
}

static double key(const itu_item *it, const char *name)
{
    const pt_key_value *kv = itu_key(it, name);
    if (!kv) fail_msg("key %s missing", name);
    assert_true(kv->numeric);
    return kv->value;
}

static void test_raw_methane_keys_and_units(void **state)
{
    (void)state;
    itu_collect *c = read_path("tests/data/ingest_qm9_raw_000001.xyz", PT_FORMAT_AUTO, 1);
    const itu_item *it = &c->items[0];
    assert_int_equal(it->format, PT_FORMAT_QM9);
    assert_int_equal(it->n_atoms, 5);
    assert_int_equal(it->n_keys, 16);
    assert_true(key(it, "qm9_id") == 1.0);
    assert_true(key(it, "rot_A") == 157.7118);
    assert_true(key(it, "mu") == 0.0);
    assert_true(key(it, "alpha") == 13.21);
    assert_true(key(it, "r2") == 35.3641);
    assert_true(key(it, "cv") == 6.469);
    /* Hartree properties: value * 27.211386, computed the same way */
    assert_true(key(it, "energy_U0") == -40.478930 * 27.211386);
    assert_true(key(it, "homo") == -0.3877 * 27.211386);
    assert_true(key(it, "zpve") == 0.044749 * 27.211386);
    assert_true(key(it, "free_energy") == -40.498597 * 27.211386);
    assert_int_equal(it->z[0], 6);
    assert_true(it->pos[0] == strtof("-0.01269814", NULL));
    assert_true(it->pos[5] == strtof("1.97612e-3", NULL));   /* written as 1.97612*^-3 */
    free(c);
}

/* The raw files were written from the DFT values of qm9_dft20 (eV, made with
 * CODATA 2018 Hartree = 27.211386246 eV; QM9 keeps 6 decimals of Hartree), so
 * the conversion must agree to ~1e-7 relative and positions exactly. */
static void test_raw_matches_shared_dft20(void **state)
{
    (void)state;
    itu_collect *ref = read_path("../shared/data/qm9_dft20.extxyz.gz", PT_FORMAT_AUTO, 20);
    static const char *const keys[] = {"energy_U0", "energy_U", "enthalpy_H", "free_energy", "homo",
                                       "lumo", "gap", "zpve", "mu", "alpha", "cv"};
    for (int m = 1; m <= 3; m++) {
        char path[64];
        snprintf(path, sizeof path, "tests/data/ingest_qm9_raw_%06d.xyz", m);
        itu_collect *c = read_path(path, PT_FORMAT_QM9, 1);
        const itu_item *a = &c->items[0], *b = &ref->items[m - 1];
        assert_int_equal(a->n_atoms, b->n_atoms);
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            double x = key(a, keys[k]), y = key(b, keys[k]);
            if (fabs(x - y) > 1e-7 * fabs(y) + 1e-6) fail_msg("molecule %d %s: %.10g vs %.10g", m, keys[k], x, y);
        }
        assert_memory_equal(a->z, b->z, a->n_atoms);
        assert_memory_equal(a->pos, b->pos, 3 * sizeof(float) * a->n_atoms);
        free(c);
    }
    free(ref);
}

static void test_raw_concatenated_gzip_stream(void **state)
{
    (void)state;
    itu_collect *c = read_path("tests/data/ingest_qm9_raw_concat.xyz.gz", PT_FORMAT_AUTO, 3);
    for (int m = 0; m < 3; m++) {
        assert_int_equal(c->items[m].format, PT_FORMAT_QM9);
        assert_true(key(&c->items[m], "qm9_id") == m + 1);
    }
    assert_int_equal(c->items[1].line, 2 + 5 + 3 + 1);   /* after CH4: 2 + 5 atoms + 3 trailer lines */
    assert_int_equal(c->items[2].z[0], 8);
    assert_true(c->items[2].pos[8] == strtof("6.9313e-4", NULL));
    free(c);
}

#define GDB "gdb 9\t157.7\t157.7\t157.7\t0.\t13.21\t-0.3877\t0.1171\t0.5048\t35.36\t0.044749\t-40.47893\t-40.476\t-40.475\t-40.498\t6.469\t\n"
#define TRAILER "1341.3\t1562.6\nC\tC\t\nInChI=1S/CH4/h1H4\tInChI=1S/CH4/h1H4\n"
#define ATOM "C\t0.0\t1.0\t2.0\t-0.5\n"
#define GOOD "1\n" GDB ATOM TRAILER

static void test_minimal_molecule_and_forced_format(void **state)
{
    (void)state;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    itu_collect *c;
    assert_int_equal(itu_read(GOOD GOOD, PT_FORMAT_QM9, &c, &errs), 0);
    itu_print_errors(&errs);
    assert_int_equal(c->n_valid, 2);
    assert_int_equal(c->items[1].line, 7);
    assert_true(key(&c->items[0], "qm9_id") == 9);
    free(c);
    pt_errors_close(&errs);
}

#define ERR(name, text, line, field, msg) \
    static const itu_err_case name = {text, PT_FORMAT_QM9, 0, line, field, msg, 0, 1, 0};
#define GDB_WITH(mid) "gdb 9\t157.7\t157.7\t157.7\t" mid "\t-40.47893\t-40.476\t-40.475\t-40.498\t6.469\n"
#define MID_OK "0.\t13.21\t-0.3877\t0.1171\t0.5048\t35.36\t0.044749"

ERR(err_no_gdb, "1\nhello\n" ATOM TRAILER GOOD, 2, "gdb", "expected a 'gdb ID A B C mu ...' property line, got 'hello'")
ERR(err_gdb_count, "1\ngdb 1 2 3 4\n" ATOM TRAILER GOOD, 2, "gdb", "property line has 4 values, expected 16")
ERR(err_gdb_text, "1\n" GDB_WITH("abc\t13.21\t-0.3877\t0.1171\t0.5048\t35.36\t0.044749") ATOM TRAILER GOOD, 2, "mu",
    "not a number: 'abc'")
ERR(err_gdb_nan, "1\n" GDB_WITH("0.\t13.21\t-0.3877\t0.1171\t0.5048\tNaN\t0.044749") ATOM TRAILER GOOD, 2, "r2",
    "NaN or Inf value 'NaN'")
ERR(err_gdb_id, "1\ngdb 1.5\t157.7\t157.7\t157.7\t" MID_OK "\t-40.47893\t-40.476\t-40.475\t-40.498\t6.469\n" ATOM TRAILER GOOD,
    2, "qm9_id", "molecule id must be a positive integer, got '1.5'")
ERR(err_atom_columns, "1\n" GDB "C\t0.0\t1.0\t2.0\n" TRAILER GOOD, 3, "columns",
    "atom line has 4 columns, expected 5 (symbol x y z charge)")
ERR(err_atom_charge, "1\n" GDB "C\t0.0\t1.0\t2.0\tq\n" TRAILER GOOD, 3, "charge", "not a number: 'q'")
ERR(err_atom_exponent, "1\n" GDB "C\t0.0\t1.0*^x\t2.0\t0.1\n" TRAILER GOOD, 3, "pos", "not a number: '1.0*^x'")
ERR(err_atom_species, "1\n" GDB "Qq\t0.0\t1.0\t2.0\t0.1\n" TRAILER GOOD, 3, "species", "unknown element symbol 'Qq'")
ERR(err_freq, "1\n" GDB ATOM "1341.3\tx1\nC\tC\nInChI=1S/CH4/h1H4\n" GOOD, 4, "frequencies", "not a number: 'x1'")
ERR(err_inchi, "1\n" GDB ATOM "1341.3\nC\tC\nnot-inchi\n" GOOD, 6, "InChI",
    "expected the InChI line of the QM9 molecule on line 1, got 'not-inchi'")

static const itu_err_case err_trunc_freq = {GOOD "1\n" GDB ATOM, PT_FORMAT_QM9, 0, 9, "frequencies",
    "file is truncated: QM9 molecule on line 7 ends before its frequencies line", 0, 1, 0};
static const itu_err_case err_trunc_smiles = {GOOD "1\n" GDB ATOM "1.0\n", PT_FORMAT_QM9, 0, 10, "SMILES",
    "file is truncated: QM9 molecule on line 7 ends before its SMILES line", 0, 1, 0};

#define CASE(c) {#c, itu_run_case, NULL, NULL, (void *)&c}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw_methane_keys_and_units),
        cmocka_unit_test(test_raw_matches_shared_dft20),
        cmocka_unit_test(test_raw_concatenated_gzip_stream),
        cmocka_unit_test(test_minimal_molecule_and_forced_format),
        CASE(err_no_gdb), CASE(err_gdb_count), CASE(err_gdb_text), CASE(err_gdb_nan), CASE(err_gdb_id),
        CASE(err_atom_columns), CASE(err_atom_charge), CASE(err_atom_exponent), CASE(err_atom_species),
        CASE(err_freq), CASE(err_inchi), CASE(err_trunc_freq), CASE(err_trunc_smiles),
    };
    return cmocka_run_group_tests_name("qm9", tests, NULL, NULL);
}
