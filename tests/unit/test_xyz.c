/* test_xyz.c — plain XYZ and extended XYZ: every comment-line and column
 * path, the real shared files, and one test per error message. */
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

static itu_collect *read_ok(const char *text, pt_format format)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    itu_collect *c;
    int rc = itu_read(text, format, &c, &errs);
    itu_print_errors(&errs);
    assert_int_equal(rc, 0);
    assert_int_equal(errs.total, 0);
    pt_errors_close(&errs);
    return c;
}

static double num_key(const itu_item *it, const char *name)
{
    const pt_key_value *kv = itu_key(it, name);
    if (!kv) fail_msg("key %s missing", name);
    assert_true(kv->numeric);
    return kv->value;
}

static void assert_not_numeric(const itu_item *it, const char *name)
{
    const pt_key_value *kv = itu_key(it, name);
    if (!kv) fail_msg("key %s missing", name);
    assert_false(kv->numeric);
}

static void test_extxyz_ase_comment_line(void **state)
{
    (void)state;
    itu_collect *c = read_ok(
        "2\nProperties=species:S:1:pos:R:3 qm9_id=7 smiles=\"CC\" energy_U0=-2170.493149 mu=0.0000 "
        "pbc=\"F F F\"\nC 0.752737 -0.066522 0.023292\nH -1.226860 -0.723434 0.566789\n",
        PT_FORMAT_AUTO);
    const itu_item *it = &c->items[0];
    assert_int_equal(c->n_valid, 1);
    assert_int_equal(it->format, PT_FORMAT_EXTXYZ);
    assert_int_equal(it->n_keys, 4);   /* Properties and pbc are not keys */
    assert_true(num_key(it, "qm9_id") == 7.0);
    assert_true(num_key(it, "energy_U0") == -2170.493149);
    assert_true(num_key(it, "mu") == 0.0);
    assert_not_numeric(it, "smiles");
    assert_null(itu_key(it, "pbc"));
    assert_int_equal(it->z[0], 6);
    assert_int_equal(it->z[1], 1);
    assert_true(it->pos[1] == strtof("-0.066522", NULL));
    assert_true(it->pos[5] == strtof("0.566789", NULL));
    assert_false(it->has_forces);
    free(c);
}

static void test_extxyz_forces_and_columns_in_any_order(void **state)
{
    (void)state;
    itu_collect *c = read_ok(
        "2\nProperties=Z:I:1:forces:R:3:charges:R:1:species:S:1:pos:R:3:fixed:L:1 energy=-3.5\n"
        "8 0.1 0.2 0.3 -0.8 O 1.0 2.0 3.0 T\n"
        "1 -0.1 -0.2 -0.3 0.4 H 1.5 2.5 3.5 F\n",
        PT_FORMAT_AUTO);
    const itu_item *it = &c->items[0];
    assert_int_equal(c->n_valid, 1);
    assert_true(it->has_forces);
    assert_int_equal(it->z[0], 8);
    assert_int_equal(it->z[1], 1);
    assert_true(it->pos[3] == 1.5f && it->pos[5] == 3.5f);
    assert_true(it->forces[0] == 0.1f && it->forces[5] == -0.3f);
    assert_true(num_key(it, "energy") == -3.5);
    free(c);
}

static void test_extxyz_properties_change_between_structures(void **state)
{
    (void)state;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    itu_collect *c;
    const char *text =
        "1\nProperties=species:S:1:pos:R:3:forces:R:3\nH 0 0 0 1 2 3\n"
        "1\nProperties=species:S:1:pos:R:3\nH 0 0 0\n"
        "1\nProperties=species:S:1:pos:R:3:forces:R:3\nH 0 0 0 4 5 6\n"
        "1\nProperties=species:S:1:pos:Q:3\nH 0 0 0\n"
        "1\nProperties=species:S:1:pos:R:3:forces:R:3\nH 0 0 0 7 8 9\n";
    assert_int_equal(itu_read(text, PT_FORMAT_AUTO, &c, &errs), 0);
    assert_int_equal(c->n, 5);
    assert_int_equal(c->n_valid, 4);
    assert_true(c->items[0].has_forces && c->items[0].forces[2] == 3.0f);
    assert_false(c->items[1].has_forces);
    assert_true(c->items[2].has_forces && c->items[2].forces[0] == 4.0f);
    assert_false(c->items[3].valid);
    assert_true(c->items[4].has_forces && c->items[4].forces[1] == 8.0f);
    assert_int_equal(errs.total, 1);
    free(c);
    pt_errors_close(&errs);
}

static void test_extxyz_z_column_without_species(void **state)
{
    (void)state;
    itu_collect *c = read_ok("1\nProperties=Z:I:1:pos:R:3\n17 0 0 1\n", PT_FORMAT_EXTXYZ);
    assert_int_equal(c->items[0].z[0], 17);
    free(c);
}

static void test_extxyz_value_syntax(void **state)
{
    (void)state;
    itu_collect *c = read_ok(
        "1\nq=\"1.5\" s='single word' arr={1 2 3} br=[4,5] esc=\"a\\\"b\" E = -5.25 flag t1=T f1=False "
        "b2=true n=42 neg=-1e-3 chain=b=c uid=123 Properties=species:S:1:pos:R:3\nH 0 0 0\n",
        PT_FORMAT_AUTO);
    const itu_item *it = &c->items[0];
    assert_true(num_key(it, "q") == 1.5);
    assert_true(num_key(it, "E") == -5.25);
    assert_true(num_key(it, "n") == 42.0);
    assert_true(num_key(it, "neg") == -1e-3);
    static const char *const other[] = {"s", "arr", "br", "esc", "flag", "t1", "f1", "b2", "chain", "uid"};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) assert_not_numeric(it, other[i]);
    assert_int_equal(it->n_keys, 14);
    free(c);
}

static void test_extxyz_lattice_with_pbc_false(void **state)
{
    (void)state;
    itu_collect *c = read_ok(
        "1\nLattice=\"10.0 0.0 0.0 0.0 10.0 0.0 0.0 0.0 10.0\" Properties=species:S:1:pos:R:3 "
        "energy=1 pbc=\"F F F\"\nH 1 2 3\n",
        PT_FORMAT_AUTO);
    assert_int_equal(c->n_valid, 1);
    assert_int_equal(c->items[0].n_keys, 1);
    assert_true(c->items[0].has_cell && c->items[0].cell[0] == 10.0 && c->items[0].cell[8] == 10.0);
    assert_int_equal(c->items[0].pbc, 0);   /* a box, not a periodic structure */
    free(c);
}

static void test_plain_xyz_comment_is_free_text(void **state)
{
    (void)state;
    itu_collect *c = read_ok("2\n-15.9416428\nO 0 0 0 extra columns\nH 0 0 0.96\n", PT_FORMAT_AUTO);
    assert_int_equal(c->items[0].format, PT_FORMAT_XYZ);
    assert_int_equal(c->items[0].n_keys, 0);
    assert_true(c->items[0].pos[5] == 0.96f);
    free(c);
    /* forced plain XYZ ignores even key=value comments */
    c = read_ok("1\nenergy=5\nH 0 0 0\n", PT_FORMAT_XYZ);
    assert_int_equal(c->items[0].n_keys, 0);
    free(c);
}

static void test_auto_detects_per_structure(void **state)
{
    (void)state;
    itu_collect *c = read_ok("1\nhello world\nH 0 0 0\n1\na=1\nH 0 0 0\n", PT_FORMAT_AUTO);
    assert_int_equal(c->items[0].format, PT_FORMAT_XYZ);
    assert_int_equal(c->items[1].format, PT_FORMAT_EXTXYZ);
    free(c);
}

static void test_gzip_plain_xyz(void **state)
{
    (void)state;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    itu_collect *c;
    assert_int_equal(itu_read_ex("1\nfree\nN 1 2 3\n", 1, PT_FORMAT_AUTO, 1000, &c, &errs), 0);
    assert_int_equal(c->n_valid, 1);
    assert_int_equal(c->items[0].z[0], 7);
    free(c);
    pt_errors_close(&errs);
}

static itu_collect *read_path(const char *path, pt_format format)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    itu_collect *c = calloc(1, sizeof(*c));
    pt_read_options o = {.format = format, .max_atoms = 1000};
    assert_int_equal(pt_read_structures(path, &o, itu_on_structure, c, &errs), 0);
    itu_print_errors(&errs);
    assert_int_equal(errs.total, 0);
    pt_errors_close(&errs);
    return c;
}

static void test_real_qm9_dft20(void **state)
{
    (void)state;
    itu_collect *c = read_path("../shared/data/qm9_dft20.extxyz.gz", PT_FORMAT_AUTO);
    assert_int_equal(c->n, 20);
    assert_int_equal(c->n_valid, 20);
    assert_int_equal(c->items[0].n_atoms, 5);
    assert_true(num_key(&c->items[0], "energy_U0") == -1101.487799054311);
    assert_true(num_key(&c->items[1], "mu") == 1.6256);
    assert_true(c->items[1].pos[0] == strtof("-0.04042605", NULL));
    free(c);
}

static void test_real_slices(void **state)
{
    (void)state;
    itu_collect *c = read_path("tests/data/ingest_qm9_13k_slice.extxyz", PT_FORMAT_AUTO);
    assert_int_equal(c->n_valid, 50);
    assert_true(num_key(&c->items[0], "qm9_id") == 7);
    assert_true(num_key(&c->items[0], "cv") == 10.098);
    assert_not_numeric(&c->items[0], "smiles");
    free(c);
    c = read_path("tests/data/ingest_water_slice.extxyz.gz", PT_FORMAT_AUTO);
    assert_int_equal(c->n_valid, 50);
    assert_int_equal(c->items[0].n_atoms, 39);
    assert_true(num_key(&c->items[0], "energy") == -3.917694);
    assert_true(c->items[0].has_forces);
    assert_true(c->items[0].forces[0] == strtof("-0.3241", NULL));
    assert_true(c->items[0].pos[3] == strtof("-3.76807", NULL));
    free(c);
}

static void test_real_w30_plain_xyz(void **state)
{
    (void)state;
    itu_collect *c = read_path("../shared/data/water_minima/w30.xyz", PT_FORMAT_AUTO);
    const itu_item *it = &c->items[0];
    assert_int_equal(c->n_valid, 1);
    assert_int_equal(it->format, PT_FORMAT_XYZ);
    assert_int_equal(it->n_atoms, 90);
    assert_int_equal(it->n_keys, 0);   /* the comment-line energy is not guessed */
    int n_o = 0;
    for (int a = 0; a < 90; a++) n_o += it->z[a] == 8;
    assert_int_equal(n_o, 30);
    assert_true(it->pos[0] == strtof("4.17389823", NULL));
    assert_true(it->pos[8] == strtof("-0.60143954", NULL));
    free(c);
}

/* A valid structure after each bad one shows reading recovers. */
#define GOOD "1\nok\nH 0 0 0\n"
#define PROPS(spec) "1\nProperties=" spec "\nH 0 0 0\n" GOOD

#define ERR(name, text, fmt, line, field, msg) \
    static const itu_err_case name = {text, fmt, 0, line, field, msg, 0, 1, 0};

ERR(err_species, "1\nc\nXx 0 0 0\n" GOOD, PT_FORMAT_AUTO, 3, "species", "unknown element symbol 'Xx'")
ERR(err_pos_nan_text, "1\nc\nH 0 abc 0\n" GOOD, PT_FORMAT_AUTO, 3, "pos", "not a number: 'abc'")
ERR(err_pos_nonfinite, "1\na=1\nH 0 nan 0\n" GOOD, PT_FORMAT_AUTO, 3, "pos", "NaN or Inf value 'nan'")
ERR(err_forces_inf, "1\nProperties=species:S:1:pos:R:3:forces:R:3\nH 0 0 0 1 -inf 0\n" GOOD, PT_FORMAT_AUTO, 3,
    "forces", "NaN or Inf value '-inf'")
ERR(err_xyz_columns, "1\nc\nH 0 0\n" GOOD, PT_FORMAT_XYZ, 3, "columns",
    "atom line has 3 columns, expected at least 4 (symbol x y z)")
ERR(err_ext_few_columns, "1\na=1\nH 0 0\n" GOOD, PT_FORMAT_AUTO, 3, "columns", "atom line has 3 columns, Properties declares 4")
ERR(err_ext_many_columns, "1\na=1\nH 0 0 0 5\n" GOOD, PT_FORMAT_AUTO, 3, "columns", "atom line has 5 columns, Properties declares 4")
ERR(err_props_triples, PROPS("species:S:1:pos:R"), PT_FORMAT_AUTO, 2, "Properties", "expected name:type:width triples")
ERR(err_props_width, PROPS("species:S:x:pos:R:3"), PT_FORMAT_AUTO, 2, "Properties", "bad width 'x' for column 'species'")
ERR(err_props_type, PROPS("species:S:1:pos:Q:3"), PT_FORMAT_AUTO, 2, "Properties", "unknown type 'Q' for column 'pos'")
ERR(err_props_must_be, PROPS("species:S:1:pos:R:2"), PT_FORMAT_AUTO, 2, "Properties", "column 'pos' must be R:3")
ERR(err_props_twice, PROPS("species:S:1:pos:R:3:pos:R:3"), PT_FORMAT_AUTO, 2, "Properties", "column 'pos' appears twice")
ERR(err_props_no_species, PROPS("pos:R:3:name:S:1"), PT_FORMAT_AUTO, 2, "Properties", "no species column")
ERR(err_props_no_pos, PROPS("species:S:1:xyz:R:3"), PT_FORMAT_AUTO, 2, "Properties", "no pos column")
ERR(err_props_no_value, "1\nenergy=1 Properties\nH 0 0 0\n" GOOD, PT_FORMAT_AUTO, 2, "Properties",
    "malformed Properties: no value")
ERR(err_key_nonfinite, "1\nenergy=nan\nH 0 0 0\n" GOOD, PT_FORMAT_AUTO, 2, "energy", "NaN or Inf value 'nan'")
ERR(err_key_long, "1\nk234567890123456789012345678901234567890123456789012345678901234567890=1\nH 0 0 0\n" GOOD,
    PT_FORMAT_AUTO, 2, "", "longer than 63 characters")
ERR(err_key_twice, "1\na=1 b=2 a=3\nH 0 0 0\n" GOOD, PT_FORMAT_AUTO, 2, "a", "key appears twice in the comment line")
ERR(err_no_key, "1\n=5 a=1\nH 0 0 0\n" GOOD, PT_FORMAT_AUTO, 2, "comment", "value '5' has no key")
ERR(err_quote, "1\na=1 s=\"open\nH 0 0 0\n" GOOD, PT_FORMAT_AUTO, 2, "comment", "unterminated quote (missing \")")

/* Errors whose input is built at run time. */
static void run_dynamic(const char *text, long line, const char *field, const char *msg)
{
    itu_err_case k = {text, PT_FORMAT_AUTO, 0, line, field, msg, 0, 1, 0};
    void *state = &k;
    itu_run_case(&state);
}

static void test_err_too_many_columns(void **state)
{
    (void)state;
    char text[2048] = "1\nProperties=species:S:1:pos:R:3";
    for (int i = 0; i < 63; i++) snprintf(text + strlen(text), sizeof text - strlen(text), ":c%d:R:1", i);
    strcat(text, "\nH 0 0 0\n" GOOD);
    run_dynamic(text, 2, "Properties", "more than 64 columns");
}

static void test_err_too_many_keys(void **state)
{
    (void)state;
    char text[4096] = "1\n";
    for (int i = 0; i <= PT_READER_MAX_KEYS; i++) snprintf(text + strlen(text), sizeof text - strlen(text), "k%d=1 ", i);
    strcat(text, "\nH 0 0 0\n" GOOD);
    run_dynamic(text, 2, "k128", "more than 128 keys in the comment line");
}

#define CASE(c) {#c, itu_run_case, NULL, NULL, (void *)&c}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extxyz_ase_comment_line),
        cmocka_unit_test(test_extxyz_forces_and_columns_in_any_order),
        cmocka_unit_test(test_extxyz_properties_change_between_structures),
        cmocka_unit_test(test_extxyz_z_column_without_species),
        cmocka_unit_test(test_extxyz_value_syntax),
        cmocka_unit_test(test_extxyz_lattice_with_pbc_false),
        cmocka_unit_test(test_plain_xyz_comment_is_free_text),
        cmocka_unit_test(test_auto_detects_per_structure),
        cmocka_unit_test(test_gzip_plain_xyz),
        cmocka_unit_test(test_real_qm9_dft20),
        cmocka_unit_test(test_real_slices),
        cmocka_unit_test(test_real_w30_plain_xyz),
        CASE(err_species), CASE(err_pos_nan_text), CASE(err_pos_nonfinite), CASE(err_forces_inf),
        CASE(err_xyz_columns), CASE(err_ext_few_columns), CASE(err_ext_many_columns),
        CASE(err_props_triples), CASE(err_props_width), CASE(err_props_type), CASE(err_props_must_be),
        CASE(err_props_twice), CASE(err_props_no_species), CASE(err_props_no_pos), CASE(err_props_no_value),
        CASE(err_key_nonfinite), CASE(err_key_long), CASE(err_key_twice), CASE(err_no_key), CASE(err_quote),
        cmocka_unit_test(test_err_too_many_columns),
        cmocka_unit_test(test_err_too_many_keys),
    };
    return cmocka_run_group_tests_name("xyz", tests, NULL, NULL);
}
