/* test_atom_columns.c — further per-atom columns (issue 20: atom heads):
 * extended XYZ keeps real scalars per atom (R:1 besides forces) by name,
 * the .ptd (version 4) stores them column-major through ingest, structures
 * without a column get NaN, version-3 files still load (none), and bad
 * input is located (file, line, field): a value that is not a number, an
 * atom line missing the column, a column twice, too many columns over a
 * file (at most 64 per structure follows from extended XYZ's own limit of
 * 64 columns, test_xyz.c). */
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
#include <zlib.h>

#include "engine/data/dataset.h"
#include "engine/data/ingest.h"
#include "server/cli/commands.h"
#include "tests/unit/cmd_fixture.h"
#include "tests/unit/ingest_test_util.h"
#include "tests/unit/tmp_fixture.h"

#define EMT_ATOM "tests/data/emt_atom_energies_120.extxyz.gz"

/* ---- the reader ---------------------------------------------------------- */

typedef struct kept {
    int n, n_valid;
    uint32_t n_cols[4];
    char names[4][PT_ATOM_COLS_MAX][PT_KEY_MAX];
    float vals[4][PT_ATOM_COLS_MAX * 8];
    uint32_t n_atoms[4];
} kept;

static int keep(void *ctx, const pt_structure *s)
{
    kept *k = ctx;
    if (k->n == 4) return 0;
    int i = k->n++;
    k->n_valid += s->valid;
    k->n_cols[i] = s->n_atom_cols;
    k->n_atoms[i] = s->n_atoms;
    memcpy(k->names[i], s->atom_col_names, sizeof k->names[i]);
    if (s->valid && s->n_atoms <= 8) memcpy(k->vals[i], s->atom_vals, s->n_atom_cols * s->n_atoms * sizeof(float));
    return 0;
}

static int read_text(const char *text, kept *k, pt_errors *errs)
{
    char *path = itu_write(text, strlen(text), 0);
    memset(k, 0, sizeof(*k));
    pt_read_options o = {.format = PT_FORMAT_AUTO, .max_atoms = 1000, .display_name = ITU_NAME,
                         .read_thread = -1};
    int rc = pt_read_structures(path, &o, keep, k, errs);
    unlink(path);
    free(path);
    return rc;
}

#define TWO \
    "2\nProperties=species:S:1:pos:R:3:charges:R:1:tags:I:1:energies:R:1 energy=1.5\n" \
    "O 0 0 0 -0.8 1 -3.25\nH 0 0 1 0.4 0 -1.125\n" \
    "1\nProperties=species:S:1:pos:R:3:energies:R:1 energy=2\n" \
    "H 1 1 1 0.5\n"

/* R:1 columns are kept by name in Properties order, I:1 skipped; values
 * are the text's floats (dataset.h: column c of atom a at c * n + a). */
static void test_reader_keeps_real_columns(void **state)
{
    (void)state;
    kept k;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(read_text(TWO, &k, &errs), 0);
    assert_int_equal(errs.total, 0);
    assert_int_equal(k.n_valid, 2);
    assert_int_equal(k.n_cols[0], 2);
    assert_string_equal(k.names[0][0], "charges");
    assert_string_equal(k.names[0][1], "energies");
    const float want0[4] = {-0.8f, 0.4f, -3.25f, -1.125f};
    assert_memory_equal(k.vals[0], want0, sizeof want0);
    assert_int_equal(k.n_cols[1], 1);
    assert_string_equal(k.names[1][0], "energies");
    assert_true(k.vals[1][0] == 0.5f);
    pt_errors_close(&errs);
}

#define GOOD "1\nProperties=species:S:1:pos:R:3:q:R:1\nH 0 0 0 0.1\n"
#define ERRCASE(name, text, line, field, msg) \
    static const itu_err_case name = {text, PT_FORMAT_AUTO, 0, line, field, msg, 0, 1, 0};

/* wrong type: a value that is not a number, located at the column's name */
ERRCASE(err_value_not_number, "2\nProperties=species:S:1:pos:R:3:q:R:1\nH 0 0 0 0.1\nH 0 0 1 abc\n" GOOD, 4,
        "q", "not a number: 'abc'")
ERRCASE(err_value_nonfinite, "1\nProperties=species:S:1:pos:R:3:q:R:1\nH 0 0 0 inf\n" GOOD, 3, "q",
        "NaN or Inf value 'inf'")
/* wrong count / missing column: an atom line without the declared column */
ERRCASE(err_value_missing, "2\nProperties=species:S:1:pos:R:3:q:R:1\nH 0 0 0 0.1\nH 0 0 1\n" GOOD, 4,
        "columns", "atom line has 4 columns, Properties declares 5")
ERRCASE(err_value_extra, "1\nProperties=species:S:1:pos:R:3:q:R:1\nH 0 0 0 0.1 7\n" GOOD, 3, "columns",
        "atom line has 6 columns, Properties declares 5")
ERRCASE(err_value_twice, "1\nProperties=species:S:1:pos:R:3:q:R:1:q:R:1\nH 0 0 0 0.1 0.2\n" GOOD, 2,
        "Properties", "column 'q' appears twice")
/* ---- ingest and the .ptd ----------------------------------------------- */

static int ingest_text(const char *text, const char *out, pt_ingest_report *rep, pt_errors *errs)
{
    char *path = itu_write(text, strlen(text), 0);
    pt_ingest_options o;
    pt_ingest_options_init(&o);
    o.display_name = ITU_NAME;
    const char *in[1] = {path};
    int rc = pt_ingest_files(in, 1, out, &o, rep, errs);
    unlink(path);
    free(path);
    return rc;
}

static void temp_out(char *out, size_t n)
{
    snprintf(out, n, "/tmp/pt-atomcols-%ld-" "XX" "XX" "XX", (long)getpid());
    int fd = mkstemp(out);
    assert_true(fd >= 0);
    close(fd);
}

/* Ingests `text` (or the file `path` when text is NULL) into a fresh
 * temporary .ptd and opens it (flags of pt_dataset_open_ex); the file is
 * unlinked once mapped. */
static void ingest_open(const char *text, const char *path, unsigned flags, pt_dataset *ds)
{
    char out[64], err[512];
    temp_out(out, sizeof out);
    pt_ingest_report rep;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    if (text) {
        assert_int_equal(ingest_text(text, out, &rep, &errs), 0);
    } else {
        pt_ingest_options o;
        pt_ingest_options_init(&o);
        assert_int_equal(pt_ingest_files(&path, 1, out, &o, &rep, &errs), 0);
    }
    pt_ingest_report_close(&rep);
    pt_errors_close(&errs);
    assert_int_equal(pt_dataset_open_ex(ds, out, flags, err, sizeof err), 0);
    unlink(out);
}

/* Bad input rejects the whole ingest with the error located at the file's
 * display name, line and field; nothing is written. */
static void expect_ingest_refused(const char *text, long line, const char *field, const char *msg)
{
    char out[64];
    temp_out(out, sizeof out);
    unlink(out);
    pt_ingest_report rep;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(ingest_text(text, out, &rep, &errs), -1);
    assert_true(itu_has_error(&errs, line, field, msg));
    assert_string_equal(errs.items[0].file, ITU_NAME);
    assert_int_equal(access(out, F_OK), -1);
    pt_ingest_report_close(&rep);
    pt_errors_close(&errs);
}

/* Round trip: both columns stored column-major; the second structure has
 * no "charges", so its atom is NaN there; the report counts structures per
 * column; find_atom_col finds exact names only. */
static void test_ingest_round_trip(void **state)
{
    (void)state;
    char out[64];
    temp_out(out, sizeof out);
    pt_ingest_report rep;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(ingest_text(TWO, out, &rep, &errs), 0);
    assert_int_equal(rep.n_atom_cols, 2);
    json_t *j = pt_ingest_report_json(&rep);
    json_t *cols = json_object_get(j, "atom_columns");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(cols, "charges"), "structures")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(cols, "energies"), "structures")), 2);
    json_decref(j);
    pt_ingest_report_close(&rep);
    pt_dataset ds;
    char err[512];
    assert_int_equal(pt_dataset_open(&ds, out, err, sizeof err), 0);
    unlink(out);
    assert_int_equal(ds.version, 4);
    assert_int_equal(ds.n_atom_cols, 2);
    int q = pt_dataset_find_atom_col(&ds, "charges"), e = pt_dataset_find_atom_col(&ds, "energies");
    assert_int_equal(q, 0);
    assert_int_equal(e, 1);
    assert_int_equal(pt_dataset_find_atom_col(&ds, "charge"), -1);
    assert_int_equal(pt_dataset_find_atom_col(&ds, "energy"), -1);
    const float *cq = ds.atom_cols + (size_t)q * ds.n_atoms, *ce = ds.atom_cols + (size_t)e * ds.n_atoms;
    assert_true(cq[0] == -0.8f && cq[1] == 0.4f && isnan(cq[2]));
    assert_true(ce[0] == -3.25f && ce[1] == -1.125f && ce[2] == 0.5f);
    pt_dataset_close(&ds);
    pt_errors_close(&errs);
}

/* A column first seen on a later structure is back-filled with NaN. */
static void test_late_column_backfilled(void **state)
{
    (void)state;
    static const char text[] = "1\nenergy=1\nH 0 0 0\n"
                               "2\nProperties=species:S:1:pos:R:3:q:R:1 energy=2\nH 0 0 0 1.5\nH 0 0 1 -2\n";
    pt_dataset ds;
    ingest_open(text, NULL, PT_DATASET_OPEN_LAZY, &ds);
    assert_int_equal(ds.n_atom_cols, 1);
    assert_true(isnan(ds.atom_cols[0]) && ds.atom_cols[1] == 1.5f && ds.atom_cols[2] == -2.0f);
    pt_dataset_release(&ds, 0, ds.n_structs);   /* gives pages back; the values stay readable */
    assert_true(ds.atom_cols[1] == 1.5f);
    pt_dataset_close(&ds);
}

/* A value that is not a number on a later structure */
static void test_ingest_rejects_bad_value(void **state)
{
    (void)state;
    expect_ingest_refused(TWO "1\nProperties=species:S:1:pos:R:3:energies:R:1\nH 1 1 1 x\n", 10, "energies",
                          "not a number: 'x'");
}

/* More distinct columns over the file than a dataset keeps: located at the
 * structure that brings one too many. */
static void test_ingest_too_many_columns_overall(void **state)
{
    (void)state;
    char text[8192] = "";
    size_t n = 0;
    for (int c = 0; c < 65; c++)   /* each structure a column of its own */
        n += (size_t)snprintf(text + n, sizeof text - n,
                              "1\nProperties=species:S:1:pos:R:3:c%d:R:1 energy=1\nH 0 0 0 1\n", c);
    expect_ingest_refused(text, 193, "Properties", "more than 64 distinct real per-atom columns");
}

/* The EMT test file (tests/data/README): per-atom energies sum to each
 * structure's total energy (ASE's EMT gives them so), through the .ptd. */
static void test_emt_per_atom_energies(void **state)
{
    (void)state;
    pt_dataset ds;
    ingest_open(NULL, EMT_ATOM, 0, &ds);
    assert_int_equal(ds.n_structs, 120);
    int c = pt_dataset_find_atom_col(&ds, "energies"), t = pt_dataset_find_target(&ds, "energy");
    assert_true(c >= 0 && t >= 0);
    assert_int_equal(ds.n_atom_cols, 1);   /* tags (I:1) are not kept */
    for (uint32_t s = 0; s < ds.n_structs; s++) {
        double sum = 0;
        for (uint64_t a = ds.atom_offset[s]; a < ds.atom_offset[s + 1]; a++)
            sum += ds.atom_cols[(size_t)c * ds.n_atoms + a];
        assert_true(fabs(sum - ds.targets[(size_t)t * ds.n_structs + s]) < 1e-4 * (1 + fabs(sum)));
    }
    pt_dataset_close(&ds);
}

/* A version-3 file (the layout before per-atom columns: thirteen sections)
 * still opens, with no per-atom columns.  It is made from a version-4 file
 * of the same data by rewriting the header as version 3 wrote it (the
 * sections themselves are the same bytes). */
static void test_reads_version_3(void **state)
{
    (void)state;
    char out[64];
    temp_out(out, sizeof out);
    pt_ingest_options o;
    pt_ingest_options_init(&o);
    pt_ingest_report rep;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    const char *in[1] = {"tests/data/ptd_v2_mixed.extxyz"};
    assert_int_equal(pt_ingest_files(in, 1, out, &o, &rep, &errs), 0);
    pt_ingest_report_close(&rep);
    FILE *f = fopen(out, "r+b");
    unsigned char h[56 + 15 * 32];
    assert_int_equal(fread(h, 1, sizeof h, f), sizeof h);
    uint32_t v = 3, size = 56 + 13 * 32, n_sec = 13, zero = 0;
    memcpy(h + 8, &v, 4);
    memcpy(h + 12, &size, 4);
    memcpy(h + 20, &n_sec, 4);
    memcpy(h + 48, &zero, 4);
    memcpy(h + 52, &zero, 4);
    memset(h + size, 0, sizeof h - size);
    uint32_t crc = (uint32_t)crc32_z(0, h, size);
    memcpy(h + 48, &crc, 4);
    fseek(f, 0, SEEK_SET);
    assert_int_equal(fwrite(h, 1, sizeof h, f), sizeof h);
    fclose(f);
    pt_dataset ds;
    char err[512];
    assert_int_equal(pt_dataset_open(&ds, out, err, sizeof err), 0);
    unlink(out);
    assert_int_equal(ds.version, 3);
    assert_int_equal(ds.n_structs, 10);
    assert_int_equal(ds.n_atom_cols, 0);
    assert_null(ds.atom_cols);
    assert_int_equal(pt_dataset_find_atom_col(&ds, "energies"), -1);
    pt_dataset_close(&ds);
    pt_errors_close(&errs);
}

/* `packtrain ingest` names the per-atom columns it kept (and says nothing
 * of them for a file without). */
static void test_cli_summary(void **state)
{
    (void)state;
    char dir[64], out_ptd[128], *out, *err;
    assert_int_equal(tfx_mkdtemp(dir, sizeof dir, "test_atom_columns_cli"), 0);
    snprintf(out_ptd, sizeof out_ptd, "%s/o.ptd", dir);
    assert_int_equal(cfx_run(pt_cmd_ingest, "ingest", dir, &out, &err, EMT_ATOM, "--out", out_ptd, NULL), 0);
    assert_non_null(strstr(out, "\nper-atom    energies (120 structures)\n"));
    free(out);
    free(err);
    assert_int_equal(cfx_run(pt_cmd_ingest, "ingest", dir, &out, &err, "tests/data/ptd_v2_mixed.extxyz",
                             "--out", out_ptd, NULL), 0);
    assert_null(strstr(out, "per-atom"));
    free(out);
    free(err);
    tfx_rmtree(dir);
}

#define E(c) cmocka_unit_test_prestate(itu_run_case, (void *)&c)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_keeps_real_columns),
        E(err_value_not_number), E(err_value_nonfinite), E(err_value_missing), E(err_value_extra),
        E(err_value_twice),
        cmocka_unit_test(test_ingest_round_trip),
        cmocka_unit_test(test_late_column_backfilled),
        cmocka_unit_test(test_ingest_rejects_bad_value),
        cmocka_unit_test(test_ingest_too_many_columns_overall),
        cmocka_unit_test(test_emt_per_atom_energies),
        cmocka_unit_test(test_reads_version_3),
        cmocka_unit_test(test_cli_summary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
