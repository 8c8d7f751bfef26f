/* test_dataset_file.c — the .ptd writer and mmap reader: bit-exact round
 * trip, NaN for absent keys and forces, 64-byte alignment, no leftovers, and
 * one test per corruption the reader must name. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/data/dataset.h"
#include "engine/data/dataset_file.h"

/* header layout from dataset_file.h */
#define H_VERSION 8
#define H_SIZE 12
#define H_ORDER 16
#define H_NSTRUCTS 24
#define H_NATOMS 32
#define H_NTARGETS 40
#define H_CRC 48
#define H_ENTRIES 56
#define N_SECTIONS 7
#define HEADER_BYTES (H_ENTRIES + N_SECTIONS * 32)
enum { S_NAMES, S_OFFSET, S_Z, S_POS, S_FORCES, S_LINE, S_TARGETS };

typedef struct fixture {
    char dir[64];
    char path[128];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    strcpy(f->dir, "/tmp/pt_ptd_test_" "XX" "XX" "XX");
    if (!mkdtemp(f->dir)) return -1;
    snprintf(f->path, sizeof f->path, "%s/data.ptd", f->dir);
    *state = f;
    return 0;
}

static int count_dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static int teardown(void **state)
{
    fixture *f = *state;
    unlink(f->path);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* Three structures: 2, 3 and 1 atoms; forces only on the second; target
 * "energy" on 0 and 2, "gap" on 1. */
static const uint8_t Z[6] = {8, 1, 6, 1, 1, 9};
static const float POS[18] = {0.1f, 0.2f, 0.3f, 1e-7f, -2.5f, 3.25f, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -2, -3};
static const float FORCES[9] = {0.5f, -0.5f, 0.25f, 1, 1, 1, -1e-3f, 2, 3};

static void write_sample(const char *path)
{
    pt_ptd_writer *w;
    char err[256];
    assert_int_equal(pt_ptd_writer_open(&w, path, err, sizeof err), 0);
    uint32_t e = (uint32_t)pt_ptd_writer_target(w, "energy");
    uint32_t g = (uint32_t)pt_ptd_writer_target(w, "gap");
    assert_int_equal(pt_ptd_writer_target(w, "energy"), 0);
    double v0 = -1101.487799054311, v1 = 13.736307776974742, v2 = 1e-300;
    assert_int_equal(pt_ptd_writer_add(w, 2, Z, POS, NULL, 10, 1, &e, &v0), 0);
    assert_int_equal(pt_ptd_writer_add(w, 3, Z + 2, POS + 6, FORCES, 20, 1, &g, &v1), 0);
    assert_int_equal(pt_ptd_writer_add(w, 1, Z + 5, POS + 15, NULL, 30, 1, &e, &v2), 0);
    assert_int_equal(pt_ptd_writer_finish(w, err, sizeof err), 0);
    pt_ptd_writer_close(w);
}

static void test_round_trip_bit_exact(void **state)
{
    fixture *f = *state;
    write_sample(f->path);
    assert_int_equal(count_dir_entries(f->dir), 1);   /* temporaries are gone */
    pt_dataset ds;
    char err[256];
    assert_int_equal(pt_dataset_open(&ds, f->path, err, sizeof err), 0);
    assert_int_equal(ds.n_structs, 3);
    assert_int_equal(ds.n_atoms, 6);
    assert_int_equal(pt_dataset_natoms(&ds, 1), 3);
    assert_memory_equal(ds.z, Z, 6);
    assert_memory_equal(ds.pos, POS, sizeof POS);
    assert_non_null(ds.forces);
    for (int i = 0; i < 6; i++) assert_true(isnan(ds.forces[i]));
    assert_memory_equal(ds.forces + 6, FORCES, sizeof FORCES);
    for (int i = 15; i < 18; i++) assert_true(isnan(ds.forces[i]));
    assert_int_equal(ds.source_line[2], 30);
    assert_int_equal(ds.n_targets, 2);
    int e = pt_dataset_find_target(&ds, "energy"), g = pt_dataset_find_target(&ds, "gap");
    assert_int_equal(e, 0);
    assert_int_equal(g, 1);
    assert_int_equal(pt_dataset_find_target(&ds, "homo"), -1);
    assert_true(ds.targets[e * 3 + 0] == -1101.487799054311);
    assert_true(isnan(ds.targets[e * 3 + 1]));
    assert_true(ds.targets[e * 3 + 2] == 1e-300);
    assert_true(isnan(ds.targets[g * 3 + 0]));
    assert_true(ds.targets[g * 3 + 1] == 13.736307776974742);
    const char *base = ds.map_base;
    assert_int_equal(((const char *)ds.pos - base) % PT_PTD_ALIGN, 0);
    assert_int_equal(((const char *)ds.targets - base) % PT_PTD_ALIGN, 0);
    pt_dataset_close(&ds);
    assert_null(ds.map_base);
}

static void test_no_forces_means_null(void **state)
{
    fixture *f = *state;
    pt_ptd_writer *w;
    char err[256];
    assert_int_equal(pt_ptd_writer_open(&w, f->path, err, sizeof err), 0);
    assert_int_equal(pt_ptd_writer_add(w, 2, Z, POS, NULL, 1, 0, NULL, NULL), 0);
    assert_int_equal(pt_ptd_writer_finish(w, err, sizeof err), 0);
    pt_ptd_writer_close(w);
    pt_dataset ds;
    assert_int_equal(pt_dataset_open(&ds, f->path, err, sizeof err), 0);
    assert_null(ds.forces);
    assert_int_equal(ds.n_targets, 0);
    pt_dataset_close(&ds);
}

static void test_close_without_finish_leaves_nothing(void **state)
{
    fixture *f = *state;
    pt_ptd_writer *w;
    char err[256];
    assert_int_equal(pt_ptd_writer_open(&w, f->path, err, sizeof err), 0);
    assert_int_equal(pt_ptd_writer_add(w, 2, Z, POS, FORCES, 1, 0, NULL, NULL), 0);
    pt_ptd_writer_close(w);
    assert_int_equal(count_dir_entries(f->dir), 0);
}

static void test_writer_error_no_directory(void **state)
{
    (void)state;
    pt_ptd_writer *w;
    char err[256];
    assert_int_equal(pt_ptd_writer_open(&w, "/nonexistent/dir/x.ptd", err, sizeof err), -1);
    assert_string_equal(err, "cannot create a temporary file next to /nonexistent/dir/x.ptd: No such file or directory");
}

static void test_target_limit(void **state)
{
    fixture *f = *state;
    pt_ptd_writer *w;
    char err[256], name[32];
    assert_int_equal(pt_ptd_writer_open(&w, f->path, err, sizeof err), 0);
    for (int i = 0; i < PT_PTD_MAX_TARGETS; i++) {
        snprintf(name, sizeof name, "k%d", i);
        assert_int_equal(pt_ptd_writer_target(w, name), i);
    }
    assert_int_equal(pt_ptd_writer_target(w, "one_more"), -1);
    assert_int_equal(pt_ptd_writer_n_targets(w), PT_PTD_MAX_TARGETS);
    pt_ptd_writer_close(w);
}

/* ---- corruption --------------------------------------------------------- */

static unsigned char *load(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    fseek(fp, 0, SEEK_END);
    *n = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(*n);
    assert_int_equal(fread(b, 1, *n, fp), *n);
    fclose(fp);
    return b;
}

static void save(const char *path, const unsigned char *b, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_int_equal(fwrite(b, 1, n, fp), n);
    fclose(fp);
}

static uint64_t sec_offset(const unsigned char *b, int s)
{
    uint64_t v;
    memcpy(&v, b + H_ENTRIES + 32 * s + 8, 8);
    return v;
}

/* Recomputes every CRC, so a test can reach the checks behind them. */
static void fix_crcs(unsigned char *b)
{
    for (int s = 0; s < N_SECTIONS; s++) {
        uint64_t off = sec_offset(b, s), len;
        memcpy(&len, b + H_ENTRIES + 32 * s + 16, 8);
        uint32_t crc = (uint32_t)crc32_z(0, b + off, len);
        memcpy(b + H_ENTRIES + 32 * s + 24, &crc, 4);
    }
    memset(b + H_CRC, 0, 4);
    uint32_t crc = (uint32_t)crc32_z(0, b, HEADER_BYTES);
    memcpy(b + H_CRC, &crc, 4);
}

typedef enum corruption {
    C_TRUNCATE_HEADER, C_MAGIC, C_BYTE_ORDER, C_VERSION, C_LAYOUT, C_HEADER_CRC, C_COUNTS, C_ENTRY,
    C_TRUNCATE_SECTION, C_SECTION_SIZE, C_SECTION_CRC, C_OFFSETS_SPAN, C_OFFSETS_ORDER, C_Z_RANGE, C_NAME,
} corruption;

typedef struct corrupt_case {
    corruption what;
    const char *msg;
} corrupt_case;

static void run_corrupt(void **state, const corrupt_case *k)
{
    fixture *f = *state;
    write_sample(f->path);
    size_t n;
    unsigned char *b = load(f->path, &n);
    uint32_t u32;
    uint64_t u64;
    switch (k->what) {
    case C_TRUNCATE_HEADER: n = 100; break;
    case C_MAGIC: b[0] = 'X'; break;
    case C_BYTE_ORDER: u32 = 0x04030201u; memcpy(b + H_ORDER, &u32, 4); break;
    case C_VERSION: u32 = 2; memcpy(b + H_VERSION, &u32, 4); break;
    case C_LAYOUT: u32 = 999; memcpy(b + H_SIZE, &u32, 4); break;
    case C_HEADER_CRC: b[H_NATOMS] ^= 1; break;
    case C_COUNTS: u32 = 100000; memcpy(b + H_NTARGETS, &u32, 4); fix_crcs(b); break;
    case C_ENTRY: u64 = sec_offset(b, S_Z) + 1; memcpy(b + H_ENTRIES + 32 * S_Z + 8, &u64, 8); fix_crcs(b); break;
    case C_TRUNCATE_SECTION: n = (size_t)sec_offset(b, S_TARGETS) + 8; break;
    case C_SECTION_SIZE: u64 = 7; memcpy(b + H_NATOMS, &u64, 8); fix_crcs(b); break;
    case C_SECTION_CRC: b[sec_offset(b, S_POS) + 5] ^= 0x10; break;
    case C_OFFSETS_SPAN: u64 = 5; memcpy(b + sec_offset(b, S_OFFSET) + 3 * 8, &u64, 8); fix_crcs(b); break;
    case C_OFFSETS_ORDER: u64 = 1; memcpy(b + sec_offset(b, S_OFFSET) + 2 * 8, &u64, 8); fix_crcs(b); break;
    case C_Z_RANGE: b[sec_offset(b, S_Z) + 4] = 0; fix_crcs(b); break;
    case C_NAME: b[sec_offset(b, S_NAMES) + 64] = '\0'; fix_crcs(b); break;
    }
    save(f->path, b, n);
    free(b);
    pt_dataset ds;
    char err[512], want[512];
    assert_int_equal(pt_dataset_open(&ds, f->path, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: %s", f->path, k->msg);
    assert_string_equal(err, want);
    assert_null(ds.map_base);
}

#define CORRUPT(name, what, msg) \
    static void name(void **state) { static const corrupt_case k = {what, msg}; run_corrupt(state, &k); }

CORRUPT(test_corrupt_truncated_header, C_TRUNCATE_HEADER, "file too short for a .ptd header (100 bytes; truncated?)")
CORRUPT(test_corrupt_magic, C_MAGIC, "not a packtrain dataset (bad magic)")
CORRUPT(test_corrupt_byte_order, C_BYTE_ORDER, "written with a different byte order")
CORRUPT(test_corrupt_version, C_VERSION, "unsupported .ptd version 2 (this build reads version 1)")
CORRUPT(test_corrupt_layout, C_LAYOUT, "unexpected header layout")
CORRUPT(test_corrupt_header_crc, C_HEADER_CRC, "header checksum mismatch (corrupt file)")
CORRUPT(test_corrupt_counts, C_COUNTS, "header counts out of range")
CORRUPT(test_corrupt_entry, C_ENTRY, "bad section table entry for 'z'")
CORRUPT(test_corrupt_truncated_section, C_TRUNCATE_SECTION,
        "section 'targets' extends past the end of the file (truncated?)")
CORRUPT(test_corrupt_section_size, C_SECTION_SIZE, "section 'z' has 6 bytes, expected 7")
CORRUPT(test_corrupt_section_crc, C_SECTION_CRC, "section 'pos' checksum mismatch (corrupt file)")
CORRUPT(test_corrupt_offsets_span, C_OFFSETS_SPAN, "atom offsets do not span the 6 atoms")
CORRUPT(test_corrupt_offsets_order, C_OFFSETS_ORDER, "atom offsets not increasing at structure 1")
CORRUPT(test_corrupt_z_range, C_Z_RANGE, "atomic number 0 out of range at atom 4")
CORRUPT(test_corrupt_name, C_NAME, "target name 1 is empty or not terminated")

static void test_open_missing_file(void **state)
{
    (void)state;
    pt_dataset ds;
    char err[256];
    assert_int_equal(pt_dataset_open(&ds, "/nonexistent.ptd", err, sizeof err), -1);
    assert_string_equal(err, "/nonexistent.ptd: cannot open: No such file or directory");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_round_trip_bit_exact), T(test_no_forces_means_null), T(test_close_without_finish_leaves_nothing),
        T(test_writer_error_no_directory), T(test_target_limit), T(test_open_missing_file),
        T(test_corrupt_truncated_header), T(test_corrupt_magic), T(test_corrupt_byte_order),
        T(test_corrupt_version), T(test_corrupt_layout), T(test_corrupt_header_crc), T(test_corrupt_counts),
        T(test_corrupt_entry), T(test_corrupt_truncated_section), T(test_corrupt_section_size),
        T(test_corrupt_section_crc), T(test_corrupt_offsets_span), T(test_corrupt_offsets_order),
        T(test_corrupt_z_range), T(test_corrupt_name),
    };
    return cmocka_run_group_tests_name("dataset_file", tests, NULL, NULL);
}
