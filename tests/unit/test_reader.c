/* test_reader.c — the shared streaming reader: number parsing (bit-equal to
 * strtod/strtof), line handling (CRLF, blank lines, no final newline, gzip)
 * and every structure-framing error. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/data/reader.h"
#include "engine/data/linereader.h"
#include "engine/data/numparse.h"
#include "engine/core/rng.h"
#include "tests/unit/ingest_test_util.h"

/* ---- numbers ------------------------------------------------------------ */

static void check_number(const char *s)
{
    double d, want_d = strtod(s, NULL);
    float f, want_f = strtof(s, NULL);
    assert_int_equal(pt_parse_double(s, strlen(s), 0, &d), PT_NUM_OK);
    if (isinf(want_f)) {   /* beyond float range: reported, not returned */
        assert_int_equal(pt_parse_float(s, strlen(s), 0, &f), PT_NUM_NONFINITE);
        f = want_f;
    } else {
        assert_int_equal(pt_parse_float(s, strlen(s), 0, &f), PT_NUM_OK);
    }
    if (memcmp(&d, &want_d, sizeof d) || memcmp(&f, &want_f, sizeof f))
        fail_msg("'%s': double %.17g vs %.17g, float %.9g vs %.9g", s, d, want_d, f, want_f);
}

static void test_numbers_match_libc(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "0", "-0", "0.0", "-0.000", "1", "-1", "+1", "1.", ".5", "-.5", "0.1", "0.066522",
        "-0.066522", "1.0858041578", "-2170.493149", "157.70699", "1e3", "1E-3", "2.5e+10",
        "123456789", "16777217", "16777216.5", "9007199254740993", "1.7976931348623157e308",
        "4.9e-324", "1e-310", "1e-45", "3.4028235e38", "0.30000000000000004",
        "12345678901234567890123", "0.000000000000000000000000001", "-1101.487799054311",
        "7.038531e-26", "2.2250738585072011e-308",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_number(cases[i]);
}

static void test_numbers_random_match_libc(void **state)
{
    (void)state;
    pt_rng rng;
    pt_rng_init(&rng, 7, 0);
    char buf[64];
    for (int i = 0; i < 200000; i++) {
        int n = 0;
        if (pt_rng_below(&rng, 2)) buf[n++] = '-';
        int digits = 1 + (int)pt_rng_below(&rng, 20);
        int point = (int)pt_rng_below(&rng, (uint64_t)digits + 1);
        for (int k = 0; k < digits; k++) {
            if (k == point && k > 0) buf[n++] = '.';
            buf[n++] = (char)('0' + pt_rng_below(&rng, 10));
        }
        if (pt_rng_below(&rng, 3) == 0)
            n += snprintf(buf + n, sizeof buf - (size_t)n, "e%d", (int)pt_rng_below(&rng, 80) - 40);
        buf[n] = '\0';
        check_number(buf);
    }
}

static void test_numbers_mathematica_exponent(void **state)
{
    (void)state;
    double d;
    float f;
    assert_int_equal(pt_parse_double("1.97612*^-3", 11, PT_NUM_MATHEMATICA, &d), PT_NUM_OK);
    assert_true(d == strtod("1.97612e-3", NULL));
    assert_int_equal(pt_parse_float("-4.5*^6", 7, PT_NUM_MATHEMATICA, &f), PT_NUM_OK);
    assert_true(f == -4.5e6f);
    /* without the flag "*^" is not a number */
    assert_int_equal(pt_parse_double("1.97612*^-3", 11, 0, &d), PT_NUM_INVALID);
}

static void test_numbers_invalid_and_nonfinite(void **state)
{
    (void)state;
    static const char *const invalid[] = {"", "-", "+", ".", "e5", "1e", "1e+", "1.2.3", "0x10",
                                          "1e5x", "abc", "1,5", "--1", "T", "1 2"};
    static const char *const nonfinite[] = {"nan", "NaN", "-nan", "inf", "-Inf", "Infinity", "1e999", "-1e400"};
    double d;
    float f;
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        assert_int_equal(pt_parse_double(invalid[i], strlen(invalid[i]), 0, &d), PT_NUM_INVALID);
        assert_int_equal(pt_parse_float(invalid[i], strlen(invalid[i]), 0, &f), PT_NUM_INVALID);
    }
    for (size_t i = 0; i < sizeof nonfinite / sizeof nonfinite[0]; i++)
        assert_int_equal(pt_parse_double(nonfinite[i], strlen(nonfinite[i]), 0, &d), PT_NUM_NONFINITE);
    assert_int_equal(pt_parse_float("1e39", 4, 0, &f), PT_NUM_NONFINITE);   /* overflows float only */
    assert_int_equal(pt_parse_double("1e39", 4, 0, &d), PT_NUM_OK);
}

/* The atom-line path fuses tokenizing and parsing; it must agree with
 * strtof on every shape of coordinate too. */
static void test_atom_line_numbers_match_strtof(void **state)
{
    (void)state;
    enum { N = ITU_MAX_ATOMS };
    static const char *const fmts[] = {"%.6f", "%.10f", "%.3e", "%.1f", "%.0f", "%.17g", "%.8f"};
    static char coords[N * 3][40];
    char *text = malloc(N * 3 * 48 + 64);
    size_t n = (size_t)sprintf(text, "%d\ncoordinates\n", N);
    pt_rng rng;
    pt_rng_init(&rng, 11, 0);
    for (int a = 0; a < N; a++) {
        n += (size_t)sprintf(text + n, "C");
        for (int k = 0; k < 3; k++) {
            double v = (pt_rng_uniform(&rng) - 0.5) * pow(10.0, (double)pt_rng_below(&rng, 9) - 4.0);
            snprintf(coords[3 * a + k], sizeof coords[0], fmts[pt_rng_below(&rng, 7)], v);
            n += (size_t)sprintf(text + n, "\t %s", coords[3 * a + k]);
        }
        n += (size_t)sprintf(text + n, "\n");
    }
    pt_errors errs;
    pt_errors_init(&errs, 0);
    itu_collect *c;
    assert_int_equal(itu_read(text, PT_FORMAT_XYZ, &c, &errs), 0);
    assert_int_equal(c->n_valid, 1);
    for (int i = 0; i < 3 * N; i++) {
        float want = strtof(coords[i], NULL);
        if (memcmp(&want, &c->items[0].pos[i], sizeof want)) fail_msg("'%s' parsed as %.9g", coords[i], c->items[0].pos[i]);
    }
    free(c);
    free(text);
    pt_errors_close(&errs);
}

/* ---- lines ---------------------------------------------------------------- */

static void test_crlf_blank_lines_and_no_final_newline(void **state)
{
    (void)state;
    const char *text = "\r\n2\r\nfree text\r\nO 0 0 0.5\r\nH 1 0 0\r\n\n\n1\nx\nH 0 0 -1.25";
    pt_errors errs;
    pt_errors_init(&errs, 0);
    itu_collect *c;
    assert_int_equal(itu_read(text, PT_FORMAT_AUTO, &c, &errs), 0);
    itu_print_errors(&errs);
    assert_int_equal(errs.total, 0);
    assert_int_equal(c->n, 2);
    assert_int_equal(c->n_valid, 2);
    assert_int_equal(c->items[0].line, 2);
    assert_int_equal(c->items[0].z[0], 8);
    assert_true(c->items[0].pos[2] == 0.5f);
    assert_int_equal(c->items[1].line, 8);
    assert_true(c->items[1].pos[2] == -1.25f);
    free(c);
    pt_errors_close(&errs);
}

static void test_gzip_is_transparent(void **state)
{
    (void)state;
    const char *text = "1\nplain\nC 1.5 2.5 3.5\n";
    pt_errors errs;
    pt_errors_init(&errs, 0);
    itu_collect *c;
    assert_int_equal(itu_read_ex(text, 1, PT_FORMAT_XYZ, 1000, &c, &errs), 0);
    assert_int_equal(c->n_valid, 1);
    assert_int_equal(c->items[0].z[0], 6);
    assert_true(c->items[0].pos[1] == 2.5f);
    free(c);
    pt_errors_close(&errs);
}

/* A UTF-8 byte-order mark opens the file, not its first line (issue 13):
 * skipped in plain and gzip files, line numbers unchanged; anywhere else it
 * is an ordinary (bad) byte sequence. */
static void test_byte_order_mark(void **state)
{
    (void)state;
    const char *text = "\xEF\xBB\xBF" "2\nLattice=\"5 0 0 0 5 0 0 0 5\" pbc=\"F F F\" energy=-1.5\n"
                       "O 0 0 0.5\nH 1 0 0\n1\nc\nH 0 0 -1.25\n";
    for (int gz = 0; gz < 2; gz++) {
        pt_errors errs;
        pt_errors_init(&errs, 0);
        itu_collect *c;
        assert_int_equal(itu_read_ex(text, gz, PT_FORMAT_AUTO, 1000, &c, &errs), 0);
        itu_print_errors(&errs);
        assert_int_equal(errs.total, 0);
        assert_int_equal(c->n_valid, 2);
        assert_int_equal(c->items[0].line, 1);
        assert_int_equal(c->items[0].format, PT_FORMAT_EXTXYZ);
        assert_true(itu_key(&c->items[0], "energy")->value == -1.5);
        assert_int_equal(c->items[1].line, 5);
        free(c);
        pt_errors_close(&errs);
    }
    /* a file that is only a BOM has no structures, and no error */
    pt_errors errs;
    pt_errors_init(&errs, 0);
    itu_collect *c;
    assert_int_equal(itu_read("\xEF\xBB\xBF", PT_FORMAT_AUTO, &c, &errs), 0);
    assert_int_equal(c->n, 0);
    assert_int_equal(errs.total, 0);
    free(c);
    /* the mark in the middle of a file is not skipped */
    assert_int_equal(itu_read("1\nc\nH 0 0 0\n\xEF\xBB\xBF" "1\nc\nH 0 0 0\n", PT_FORMAT_AUTO, &c, &errs), -1);
    assert_true(itu_has_error(&errs, 4, "atom count",
                              "expected an atom count (a non-negative integer), got '\xEF\xBB\xBF" "1'"));
    free(c);
    pt_errors_close(&errs);
}

static void test_error_line_too_long(void **state)
{
    (void)state;
    size_t n = PT_READER_MAX_LINE + 100;
    char *text = malloc(n + 64);
    strcpy(text, "1\n");
    memset(text + 2, 'a', n);
    strcpy(text + 2 + n, "\nH 0 0 0\n");
    pt_errors errs;
    pt_errors_init(&errs, 0);
    itu_collect *c;
    assert_int_equal(itu_read(text, PT_FORMAT_AUTO, &c, &errs), -1);
    assert_true(itu_has_error(&errs, 2, "", "line longer than 1048576 bytes"));
    free(c);
    free(text);
    pt_errors_close(&errs);
}

static void test_error_truncated_gzip(void **state)
{
    (void)state;
    char text[4096];
    size_t len = 0;
    for (int i = 0; i < 100; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "1\nc\nH %d 0 0\n", i);
    char *path = itu_write(text, len, 1);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size / 2), 0);
    /* on either thread: the structures before the damage, then the error */
    for (int thread = -1; thread <= 1; thread += 2) {
        pt_errors errs;
        pt_errors_init(&errs, 0);
        itu_collect *c = calloc(1, sizeof(*c));
        pt_read_options o = {.format = PT_FORMAT_AUTO, .max_atoms = 10, .display_name = ITU_NAME,
                             .read_thread = thread};
        assert_int_equal(pt_read_structures(path, &o, itu_on_structure, c, &errs), -1);
        assert_true(itu_has_error(&errs, 0, "", "compressed stream is truncated"));
        assert_int_equal(errs.total, 1);
        assert_true(c->n > 0 && c->n < 100);
        assert_int_equal(c->n_valid, c->n);
        free(c);
        pt_errors_close(&errs);
    }
    unlink(path);
    free(path);
}

static void test_error_cannot_open(void **state)
{
    (void)state;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_read_options o = {.format = PT_FORMAT_AUTO, .max_atoms = 10};
    itu_collect *c = calloc(1, sizeof(*c));
    assert_int_equal(pt_read_structures("/nonexistent/x.xyz", &o, itu_on_structure, c, &errs), -1);
    assert_string_equal(errs.items[0].file, "/nonexistent/x.xyz");
    assert_string_equal(errs.items[0].message, "cannot open: No such file or directory");
    free(c);
    pt_errors_close(&errs);
}

static void test_error_read_error(void **state)
{
    (void)state;
    for (int thread = -1; thread <= 1; thread += 2) {
        pt_errors errs;
        pt_errors_init(&errs, 0);
        pt_read_options o = {.format = PT_FORMAT_AUTO, .max_atoms = 10, .read_thread = thread};
        itu_collect *c = calloc(1, sizeof(*c));
        assert_int_equal(pt_read_structures("tests/data", &o, itu_on_structure, c, &errs), -1);
        assert_true(itu_has_error(&errs, 1, "", "read error: Is a directory"));
        free(c);
        pt_errors_close(&errs);
    }
}

static void test_format_names(void **state)
{
    (void)state;
    pt_format f;
    assert_int_equal(pt_format_parse("qm9", &f), 0);
    assert_int_equal(f, PT_FORMAT_QM9);
    assert_int_equal(pt_format_parse("xyz", &f), 0);
    assert_int_equal(f, PT_FORMAT_XYZ);
    assert_int_equal(pt_format_parse("pdb", &f), -1);
    assert_string_equal(pt_format_name(PT_FORMAT_EXTXYZ), "extxyz");
}

/* ---- framing errors, one per message -------------------------------------- */

static const itu_err_case case_count = {
    "abc\nc\nH 0 0 0\n", PT_FORMAT_AUTO, 0, 1, "atom count",
    "expected an atom count (a non-negative integer), got 'abc'", -1, 0, 0};
static const itu_err_case case_zero = {
    "0\nempty\n1\nc\nH 0 0 0\n", PT_FORMAT_AUTO, 0, 1, "atom count", "structure has zero atoms", 0, 1, 0};
static const itu_err_case case_max_atoms = {
    "3\nc\nH 0 0 0\nH 0 0 0\nH 0 0 0\n1\nc\nH 0 0 0\n", PT_FORMAT_AUTO, 2, 1, "atom count",
    "structure has 3 atoms, more than max_atoms 2", 0, 1, 0};
static const itu_err_case case_max_atoms_truncated = {
    "3\nc\nH 0 0 0\n", PT_FORMAT_AUTO, 2, 3, "atom count",
    "file is truncated: structure on line 1 ends early", 0, 0, 0};
static const itu_err_case case_truncated = {
    "1\nc\nH 0 0 0\n3\nc\nH 0 0 0\nH 0 0 0\n", PT_FORMAT_AUTO, 0, 7, "atom count",
    "file is truncated: structure on line 4 declares 3 atoms, file ends after 2", 0, 1, 0};
static const itu_err_case case_truncated_gz = {
    "1\nc\nH 0 0 0\n3\nc\nH 0 0 0\nH 0 0 0\n", PT_FORMAT_AUTO, 0, 7, "atom count",
    "file is truncated: structure on line 4 declares 3 atoms, file ends after 2", 0, 1, 1};
static const itu_err_case case_no_comment = {
    "1\nc\nH 0 0 0\n2\n", PT_FORMAT_AUTO, 0, 4, "atom count",
    "file is truncated: structure on line 4 has no comment line", 0, 1, 0};
static const itu_err_case case_fewer_lines = {
    "3\nc\nH 0 0 0\nH 0 0 0\n1\nc\nH 0 0 0\n", PT_FORMAT_AUTO, 0, 5, "atom count",
    "structure on line 1 declares 3 atoms but has only 2 atom lines", 0, 1, 0};
static const itu_err_case case_more_lines = {
    "1\nc\nH 0 0 0\nH 1 0 0\nO 1 0 0\n1\nc\nH 0 0 0\n", PT_FORMAT_AUTO, 0, 4, "atom count",
    "structure on line 1 declares 1 atoms but has 2 more atom lines", 0, 1, 0};

#define CASE(c) {#c, itu_run_case, NULL, NULL, (void *)&c}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers_match_libc),
        cmocka_unit_test(test_numbers_random_match_libc),
        cmocka_unit_test(test_numbers_mathematica_exponent),
        cmocka_unit_test(test_numbers_invalid_and_nonfinite),
        cmocka_unit_test(test_atom_line_numbers_match_strtof),
        cmocka_unit_test(test_crlf_blank_lines_and_no_final_newline),
        cmocka_unit_test(test_gzip_is_transparent),
        cmocka_unit_test(test_byte_order_mark),
        cmocka_unit_test(test_error_line_too_long),
        cmocka_unit_test(test_error_truncated_gzip),
        cmocka_unit_test(test_error_cannot_open),
        cmocka_unit_test(test_error_read_error),
        cmocka_unit_test(test_format_names),
        CASE(case_count),
        CASE(case_zero),
        CASE(case_max_atoms),
        CASE(case_max_atoms_truncated),
        CASE(case_truncated),
        CASE(case_truncated_gz),
        CASE(case_no_comment),
        CASE(case_fewer_lines),
        CASE(case_more_lines),
    };
    return cmocka_run_group_tests_name("reader", tests, NULL, NULL);
}
