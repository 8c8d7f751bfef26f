/* test_xyz_periodic.c — periodic extended XYZ as ASE writes and reads it:
 * Lattice and pbc in every combination (bulk, slabs, wires, one T for all,
 * Lattice alone), triclinic cells, stress in 3x3 (Fortran order) and Voigt
 * form, and one test per error message of xyz_comment.c's periodic checks.
 * The orderings were checked against ase.io.read (ASE 3.22). */
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

static itu_collect *read_ok(const char *text)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    itu_collect *c;
    int rc = itu_read(text, PT_FORMAT_AUTO, &c, &errs);
    itu_print_errors(&errs);
    assert_int_equal(rc, 0);
    assert_int_equal(errs.total, 0);
    pt_errors_close(&errs);
    return c;
}

static void assert_cell(const itu_item *it, const double want[9])
{
    assert_true(it->has_cell);
    for (int k = 0; k < 9; k++)
        if (it->cell[k] != want[k]) fail_msg("cell[%d] = %.17g, want %.17g", k, it->cell[k], want[k]);
}

/* ase.io.read gives cell rows (1 2 3) (4 5 6) (7 8 10), pbc T T T and the
 * Voigt stress (1 5 9 8 7 4) for this frame: the 9 stress numbers are the
 * 3x3 in Fortran order. */
static void test_triclinic_bulk_with_stress(void **state)
{
    (void)state;
    itu_collect *c = read_ok(
        "2\nLattice=\"1 2 3 4 5 6 7 8 10\" Properties=species:S:1:pos:R:3:forces:R:3 energy=-3.5 "
        "stress=\"1 2 3 4 5 6 7 8 9\" pbc=\"T T T\"\n"
        "Cu 0 0 0 0.1 0.2 0.3\nCu 1 1 1 -0.1 -0.2 -0.3\n");
    const itu_item *it = &c->items[0];
    const double cell[9] = {1, 2, 3, 4, 5, 6, 7, 8, 10};
    assert_cell(it, cell);
    assert_int_equal(it->pbc, PT_PBC_ALL);
    assert_true(it->has_stress);
    const double stress[9] = {1, 4, 7, 2, 5, 8, 3, 6, 9};
    for (int k = 0; k < 9; k++) assert_true(it->stress[k] == stress[k]);
    /* the Voigt components ASE derives: xx yy zz yz xz xy = 1 5 9 8 7 4 */
    assert_true(it->stress[0] == 1 && it->stress[4] == 5 && it->stress[8] == 9);
    assert_true(it->stress[5] == 8 && it->stress[2] == 7 && it->stress[1] == 4);
    assert_true(it->has_forces);
    assert_int_equal(it->n_keys, 1);   /* energy; Lattice, pbc, stress, Properties are not keys */
    free(c);
}

static void test_pbc_combinations(void **state)
{
    (void)state;
    itu_collect *c = read_ok(
        /* slab, as emt_20k writes it */
        "1\nLattice=\"5.76 0.0 0.0 2.88 4.99 0.0 0.0 0.0 21.06\" Properties=species:S:1:pos:R:3 "
        "energy=2.6 pbc=\"T T F\"\nPt 0 0 10\n"
        /* wire along b, with a zero vector on a non-periodic axis */
        "1\nLattice=\"0 0 0 0 2.5 0 0 0 0\" pbc=\"F T F\"\nAu 0 0 0\n"
        /* one T for every axis, commas as ASE allows */
        "1\nLattice=\"3,0,0,0,3,0,0,0,3\" pbc=T\nAl 0 0 0\n"
        /* Lattice alone means periodic (ASE's default) */
        "1\nLattice=\"3 0 0 0 3 0 0 0 3\"\nAl 0 0 0\n"
        /* a cell that is only a box: kept, not periodic */
        "1\nLattice=\"10 0 0 0 10 0 0 0 10\" pbc=\"F F F\"\nH 1 2 3\n"
        /* True/False words and a molecule without a cell */
        "1\nLattice=\"3 0 0 0 3 0 0 0 3\" pbc=\"True False True\"\nH 0 0 0\n"
        "1\nenergy=1\nH 0 0 0\n");
    assert_int_equal(c->n_valid, 7);
    assert_int_equal(c->items[0].pbc, PT_PBC_A | PT_PBC_B);
    assert_true(c->items[0].cell[3] == 2.88 && c->items[0].cell[8] == 21.06);
    assert_int_equal(c->items[1].pbc, PT_PBC_B);
    assert_int_equal(c->items[2].pbc, PT_PBC_ALL);
    const double cube[9] = {3, 0, 0, 0, 3, 0, 0, 0, 3};
    assert_cell(&c->items[2], cube);
    assert_int_equal(c->items[3].pbc, PT_PBC_ALL);
    assert_int_equal(c->items[4].pbc, 0);
    assert_true(c->items[4].has_cell && c->items[4].cell[0] == 10);
    assert_int_equal(c->items[5].pbc, PT_PBC_A | PT_PBC_C);
    assert_false(c->items[6].has_cell);
    assert_int_equal(c->items[6].pbc, 0);
    for (int i = 0; i < 7; i++) assert_false(c->items[i].has_stress);
    free(c);
}

static void test_voigt_stress(void **state)
{
    (void)state;
    itu_collect *c = read_ok("1\nLattice=\"3 0 0 0 3 0 0 0 3\" stress=\"1 2 3 4 5 6\"\nAl 0 0 0\n");
    const double want[9] = {1, 6, 5, 6, 2, 4, 5, 4, 3};   /* xx yy zz yz xz xy */
    for (int k = 0; k < 9; k++) assert_true(c->items[0].stress[k] == want[k]);
    free(c);
}

/* A valid structure after each bad one shows reading recovers. */
#define GOOD "1\nok\nH 0 0 0\n"
#define CUBE "Lattice=\"4 0 0 0 4 0 0 0 4\" "
#define ERR(name, text, line, field, msg) \
    static const itu_err_case name = {text, PT_FORMAT_AUTO, 0, line, field, msg, 0, 1, 0};

ERR(err_lattice_count, "1\nLattice=\"1 0 0 0 1 0 0 0\" pbc=\"F F F\"\nH 0 0 0\n" GOOD, 2, "Lattice",
    "expected 9 numbers (a, b, c), got 8 in '1 0 0 0 1 0 0 0'")
ERR(err_lattice_text, "1\nLattice=\"1 0 0 0 x 0 0 0 1\"\nH 0 0 0\n" GOOD, 2, "Lattice",
    "not a number: 'x' in '1 0 0 0 x 0 0 0 1'")
ERR(err_lattice_nonfinite, "1\nLattice=\"1 0 0 0 inf 0 0 0 1\"\nH 0 0 0\n" GOOD, 2, "Lattice",
    "NaN or Inf value 'inf' in '1 0 0 0 inf 0 0 0 1'")
ERR(err_lattice_twice, "1\n" CUBE CUBE "\nH 0 0 0\n" GOOD, 2, "Lattice", "key appears twice in the comment line")
ERR(err_singular_bulk, "1\nLattice=\"1 0 0 0 1 0 1 1 0\"\nH 0 0 0\n" GOOD, 2, "Lattice",
    "cell is singular along its periodic axes (pbc=\"T T T\"): volume 0 Å³; the periodic lattice "
    "vectors must be non-zero and linearly independent")
ERR(err_singular_slab, "1\nLattice=\"2 0 0 4 0 0 0 0 9\" pbc=\"T T F\"\nH 0 0 0\n" GOOD, 2, "Lattice",
    "cell is singular along its periodic axes (pbc=\"T T F\"): area 0 Å²")
ERR(err_singular_wire, "1\nLattice=\"0 0 0 0 3 0 0 0 3\" pbc=\"T F F\"\nH 0 0 0\n" GOOD, 2, "Lattice",
    "cell is singular along its periodic axes (pbc=\"T F F\"): length 0 Å")
ERR(err_pbc_without_lattice, "1\npbc=\"T T F\" energy=1\nH 0 0 0\n" GOOD, 2, "pbc",
    "pbc=\"T T F\" is periodic but there is no Lattice: a periodic structure needs its cell")
ERR(err_pbc_values, "1\npbc=\"F X F\"\nH 0 0 0\n" GOOD, 2, "pbc",
    "expected T or F, once or for each of a, b, c, got 'F X F'")
ERR(err_pbc_count, "1\n" CUBE "pbc=\"T T\"\nH 0 0 0\n" GOOD, 2, "pbc",
    "expected T or F, once or for each of a, b, c, got 'T T'")
ERR(err_stress_count, "1\n" CUBE "stress=\"1 2 3 4\"\nH 0 0 0\n" GOOD, 2, "stress",
    "expected 9 numbers (3x3) or 6 (Voigt xx yy zz yz xz xy), got 4 in '1 2 3 4'")
ERR(err_stress_nonfinite, "1\n" CUBE "stress=\"1 2 3 4 5 nan\"\nH 0 0 0\n" GOOD, 2, "stress",
    "NaN or Inf value 'nan' in '1 2 3 4 5 nan'")
ERR(err_stress_slab, "1\nLattice=\"4 0 0 0 4 0 0 0 20\" pbc=\"T T F\" stress=\"1 2 3 4 5 6\"\nH 0 0 0\n" GOOD,
    2, "stress", "stress needs a structure periodic along a, b and c (a cell volume), this one has pbc=\"T T F\"")
ERR(err_stress_molecule, "1\nstress=\"1 2 3 4 5 6\"\nH 0 0 0\n" GOOD, 2, "stress",
    "this one has pbc=\"F F F\"")
ERR(err_forces_columns, "1\n" CUBE "Properties=species:S:1:pos:R:3:forces:R:2\nH 0 0 0 1 2\n" GOOD, 2,
    "Properties", "column 'forces' must be R:3")
ERR(err_forces_short_line, "1\n" CUBE "Properties=species:S:1:pos:R:3:forces:R:3\nH 0 0 0 1 2\n" GOOD, 3,
    "columns", "atom line has 6 columns, Properties declares 7")
ERR(err_forces_nonfinite, "1\n" CUBE "Properties=species:S:1:pos:R:3:forces:R:3\nH 0 0 0 1 nan 2\n" GOOD, 3,
    "forces", "NaN or Inf value 'nan'")

#define CASE(c) {#c, itu_run_case, NULL, NULL, (void *)&c}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_triclinic_bulk_with_stress),
        cmocka_unit_test(test_pbc_combinations),
        cmocka_unit_test(test_voigt_stress),
        CASE(err_lattice_count), CASE(err_lattice_text), CASE(err_lattice_nonfinite), CASE(err_lattice_twice),
        CASE(err_singular_bulk), CASE(err_singular_slab), CASE(err_singular_wire),
        CASE(err_pbc_without_lattice), CASE(err_pbc_values), CASE(err_pbc_count),
        CASE(err_stress_count), CASE(err_stress_nonfinite), CASE(err_stress_slab), CASE(err_stress_molecule),
        CASE(err_forces_columns), CASE(err_forces_short_line), CASE(err_forces_nonfinite),
    };
    return cmocka_run_group_tests_name("xyz_periodic", tests, NULL, NULL);
}
