/* test_dataset_file.c — the .ptd writer and mmap reader: bit-exact round
 * trip (cells, pbc, stress included), NaN for absent keys, forces and stress,
 * 64-byte alignment, no leftovers, columns over several chunks with forces
 * starting late, lazy opening with per-structure checks, pages given back,
 * version-1 and version-2 files still read, and one test per corruption the
 * reader must name. */
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
#include "engine/data/ingest.h"

static int pt_test_ingest(const char *src, const char *out)
{
    pt_ingest_options opt;
    pt_ingest_options_init(&opt);
    pt_ingest_report rep;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    int rc = pt_ingest_files(&src, 1, out, &opt, &rep, &errs);
    pt_ingest_report_close(&rep);
    pt_errors_close(&errs);
    return rc;
}

/* header layout from dataset_file.h */
#define H_VERSION 8
#define H_SIZE 12
#define H_ORDER 16
#define H_NSTRUCTS 24
#define H_NATOMS 32
#define H_NTARGETS 40
#define H_CRC 48
#define H_ENTRIES 56
#define H_FLAGS 44
#define H_ATOM_COLS 52
#define N_SECTIONS 15
#define HEADER_BYTES (H_ENTRIES + N_SECTIONS * 32)
enum { S_NAMES, S_OFFSET, S_Z, S_POS, S_FORCES, S_LINE, S_TARGETS, S_CELL, S_PBC, S_STRESS,
       S_ATOMS_CRC, S_FORCES_CRC, S_CHUNKS, S_ATOM_NAMES, S_ATOM_COLS };

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
 * "energy" on 0 and 2, "gap" on 1.  The first is a molecule, the second a
 * triclinic bulk cell with a stress label, the third a slab (pbc T T F). */
static const uint8_t Z[6] = {8, 1, 6, 1, 1, 9};
static const float POS[18] = {0.1f, 0.2f, 0.3f, 1e-7f, -2.5f, 3.25f, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -2, -3};
static const float FORCES[9] = {0.5f, -0.5f, 0.25f, 1, 1, 1, -1e-3f, 2, 3};
static const double CELL1[9] = {3.6, 0, 0, 1.8, 3.1, 0, 0.4, -0.3, 3.3000000000000003};
static const double CELL2[9] = {5.76, 0, 0, 2.88, 4.99, 0, 0, 0, 0};
static const double STRESS1[9] = {1e-3, 2e-4, 3e-5, 2e-4, -5e-3, 6e-6, 3e-5, 6e-6, 9.5e-3};

static int add(pt_ptd_writer *w, uint32_t n, const uint8_t *z, const float *pos, const float *forces,
               uint64_t line, uint32_t n_values, const uint32_t *idx, const double *values)
{
    pt_ptd_record r = {.n_atoms = n, .z = z, .pos = pos, .forces = forces, .source_line = line,
                       .n_values = n_values, .target_idx = idx, .values = values};
    return pt_ptd_writer_add(w, &r);
}

static void write_sample(const char *path)
{
    pt_ptd_writer *w;
    char err[256];
    assert_int_equal(pt_ptd_writer_open(&w, path, err, sizeof err), 0);
    uint32_t e = (uint32_t)pt_ptd_writer_target(w, "energy");
    uint32_t g = (uint32_t)pt_ptd_writer_target(w, "gap");
    assert_int_equal(pt_ptd_writer_target(w, "energy"), 0);
    double v0 = -1101.487799054311, v1 = 13.736307776974742, v2 = 1e-300;
    assert_int_equal(add(w, 2, Z, POS, NULL, 10, 1, &e, &v0), 0);
    pt_ptd_record bulk = {.n_atoms = 3, .z = Z + 2, .pos = POS + 6, .forces = FORCES, .cell = CELL1,
                          .pbc = PT_PBC_ALL, .stress = STRESS1, .source_line = 20, .n_values = 1,
                          .target_idx = &g, .values = &v1};
    assert_int_equal(pt_ptd_writer_add(w, &bulk), 0);
    pt_ptd_record slab = {.n_atoms = 1, .z = Z + 5, .pos = POS + 15, .cell = CELL2,
                          .pbc = PT_PBC_A | PT_PBC_B, .source_line = 30, .n_values = 1,
                          .target_idx = &e, .values = &v2};
    assert_int_equal(pt_ptd_writer_add(w, &slab), 0);
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
    /* cells: zeros for the molecule; pbc; stress NaN where absent */
    assert_non_null(ds.cell);
    assert_non_null(ds.pbc);
    assert_non_null(ds.stress);
    for (int k = 0; k < 9; k++) assert_true(ds.cell[k] == 0.0);
    assert_memory_equal(ds.cell + 9, CELL1, sizeof CELL1);
    assert_memory_equal(ds.cell + 18, CELL2, sizeof CELL2);
    assert_int_equal(pt_dataset_pbc(&ds, 0), 0);
    assert_int_equal(pt_dataset_pbc(&ds, 1), PT_PBC_ALL);
    assert_int_equal(pt_dataset_pbc(&ds, 2), PT_PBC_A | PT_PBC_B);
    assert_memory_equal(ds.stress + 9, STRESS1, sizeof STRESS1);
    for (int k = 0; k < 9; k++) assert_true(isnan(ds.stress[k]) && isnan(ds.stress[18 + k]));
    const char *base = ds.map_base;
    assert_int_equal(((const char *)ds.cell - base) % PT_PTD_ALIGN, 0);
    assert_int_equal(((const char *)ds.stress - base) % PT_PTD_ALIGN, 0);
    assert_int_equal((uintptr_t)ds.pos % PT_PTD_ALIGN, 0);
    assert_int_equal((uintptr_t)ds.forces % PT_PTD_ALIGN, 0);
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
    assert_int_equal(add(w, 2, Z, POS, NULL, 1, 0, NULL, NULL), 0);
    assert_int_equal(pt_ptd_writer_finish(w, err, sizeof err), 0);
    pt_ptd_writer_close(w);
    pt_dataset ds;
    assert_int_equal(pt_dataset_open(&ds, f->path, err, sizeof err), 0);
    assert_null(ds.forces);
    assert_null(ds.cell);    /* molecules only: no cell, pbc or stress sections */
    assert_null(ds.pbc);
    assert_null(ds.stress);
    assert_int_equal(pt_dataset_pbc(&ds, 0), 0);
    assert_int_equal(ds.n_targets, 0);
    pt_dataset_close(&ds);
}

static void test_close_without_finish_leaves_nothing(void **state)
{
    fixture *f = *state;
    pt_ptd_writer *w;
    char err[256];
    assert_int_equal(pt_ptd_writer_open(&w, f->path, err, sizeof err), 0);
    assert_int_equal(add(w, 2, Z, POS, FORCES, 1, 0, NULL, NULL), 0);
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

/* Where chunk entry i of the chunk table sits, and the file offset of the
 * first chunk of per-atom section s. */
static unsigned char *chunk_entry(unsigned char *b, int i)
{
    return b + sec_offset(b, S_CHUNKS) + 24 * (size_t)i;
}

static uint64_t chunk_offset(unsigned char *b, int s)
{
    for (int i = 0;; i++) {
        uint32_t sec;
        memcpy(&sec, chunk_entry(b, i), 4);
        if ((int)sec != s) continue;
        uint64_t off;
        memcpy(&off, chunk_entry(b, i) + 8, 8);
        return off;
    }
}

/* Recomputes every CRC, so a test can reach the checks behind them. */
static void fix_crcs(unsigned char *b)
{
    for (int s = 0; s < N_SECTIONS; s++) {
        uint64_t off = sec_offset(b, s), len;
        if (off == 0) continue;   /* z, pos, forces: placed by the chunk table */
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
    C_TRUNCATE_SECTION, C_SECTION_SIZE, C_SECTION_CRC, C_ATOMS_CRC, C_FORCES_CRC, C_OFFSETS_SPAN,
    C_OFFSETS_ORDER, C_Z_RANGE, C_NAME, C_FLAGS, C_PBC_BITS, C_SINGULAR_CELL, C_NONFINITE_CELL,
    C_CHUNK_ENTRY, C_CHUNK_PAST_END, C_CHUNK_SHORT, C_CHUNK_TABLE_SIZE, C_ATOM_COLS_COUNT,
    C_ATOM_COLS_SIZE,
} corruption;

typedef struct corrupt_case {
    corruption what;
    const char *msg;
} corrupt_case;

/* Applies one corruption to the sample file; returns its new size. */
static size_t corrupt(unsigned char *b, size_t n, corruption what)
{
    uint32_t u32;
    uint64_t u64;
    switch (what) {
    case C_TRUNCATE_HEADER: n = 100; break;
    case C_MAGIC: b[0] = 'X'; break;
    case C_BYTE_ORDER: u32 = 0x04030201u; memcpy(b + H_ORDER, &u32, 4); break;
    case C_VERSION: u32 = 5; memcpy(b + H_VERSION, &u32, 4); break;
    case C_LAYOUT: u32 = 999; memcpy(b + H_SIZE, &u32, 4); break;
    case C_HEADER_CRC: b[H_NATOMS] ^= 1; break;
    case C_COUNTS: u32 = 100000; memcpy(b + H_NTARGETS, &u32, 4); fix_crcs(b); break;
    case C_ENTRY: u64 = 64; memcpy(b + H_ENTRIES + 32 * S_Z + 8, &u64, 8); fix_crcs(b); break;
    case C_TRUNCATE_SECTION: n = (size_t)sec_offset(b, S_TARGETS) + 8; break;
    case C_SECTION_SIZE: u64 = 7; memcpy(b + H_NATOMS, &u64, 8); fix_crcs(b); break;
    case C_SECTION_CRC: b[sec_offset(b, S_LINE) + 9] ^= 0x10; break;
    case C_ATOMS_CRC: b[chunk_offset(b, S_POS) + 12 * 2 + 5] ^= 0x10; break;   /* atom 2: structure 1 */
    case C_FORCES_CRC: b[chunk_offset(b, S_FORCES) + 12 * 5 + 1] ^= 0x10; break; /* atom 5: structure 2 */
    case C_OFFSETS_SPAN: u64 = 5; memcpy(b + sec_offset(b, S_OFFSET) + 3 * 8, &u64, 8); fix_crcs(b); break;
    case C_OFFSETS_ORDER: u64 = 1; memcpy(b + sec_offset(b, S_OFFSET) + 2 * 8, &u64, 8); fix_crcs(b); break;
    case C_Z_RANGE: b[chunk_offset(b, S_Z) + 4] = 0; break;
    case C_NAME: b[sec_offset(b, S_NAMES) + 64] = '\0'; fix_crcs(b); break;
    case C_FLAGS: u32 = 8 | 7; memcpy(b + H_FLAGS, &u32, 4); fix_crcs(b); break;
    case C_PBC_BITS: b[sec_offset(b, S_PBC) + 2] = 9; fix_crcs(b); break;
    case C_SINGULAR_CELL: memset(b + sec_offset(b, S_CELL) + 72 + 24, 0, 24); fix_crcs(b); break;   /* c = 0 */
    case C_NONFINITE_CELL: u64 = 0x7ff0000000000000ull; memcpy(b + sec_offset(b, S_CELL) + 72, &u64, 8); fix_crcs(b); break;
    case C_CHUNK_ENTRY: u32 = S_LINE; memcpy(chunk_entry(b, 1), &u32, 4); fix_crcs(b); break;
    case C_CHUNK_PAST_END: u64 = (uint64_t)1 << 40; memcpy(chunk_entry(b, 0) + 8, &u64, 8); fix_crcs(b); break;
    case C_CHUNK_SHORT: u64 = 5; memcpy(chunk_entry(b, 0) + 16, &u64, 8); fix_crcs(b); break;   /* z: 6 bytes */
    case C_CHUNK_TABLE_SIZE: u64 = 25; memcpy(b + H_ENTRIES + 32 * S_CHUNKS + 16, &u64, 8); fix_crcs(b); break;
    case C_ATOM_COLS_COUNT: u32 = 65; memcpy(b + H_ATOM_COLS, &u32, 4); fix_crcs(b); break;
    case C_ATOM_COLS_SIZE: u32 = 1; memcpy(b + H_ATOM_COLS, &u32, 4); fix_crcs(b); break;   /* sections empty */
    }
    return n;
}

static void run_corrupt(void **state, const corrupt_case *k)
{
    fixture *f = *state;
    write_sample(f->path);
    size_t n;
    unsigned char *b = load(f->path, &n);
    n = corrupt(b, n, k->what);
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
CORRUPT(test_corrupt_version, C_VERSION, "unsupported .ptd version 5 (this build reads versions 1 to 4)")
CORRUPT(test_corrupt_atom_cols_count, C_ATOM_COLS_COUNT, "header counts out of range")
CORRUPT(test_corrupt_atom_cols_size, C_ATOM_COLS_SIZE, "section 'atom_names' has 0 bytes, expected 64")
CORRUPT(test_corrupt_layout, C_LAYOUT, "unexpected header layout")
CORRUPT(test_corrupt_header_crc, C_HEADER_CRC, "header checksum mismatch (corrupt file)")
CORRUPT(test_corrupt_counts, C_COUNTS, "header counts out of range")
CORRUPT(test_corrupt_entry, C_ENTRY, "bad section table entry for 'z'")
CORRUPT(test_corrupt_truncated_section, C_TRUNCATE_SECTION,
        "section 'targets' extends past the end of the file (truncated?)")
CORRUPT(test_corrupt_section_size, C_SECTION_SIZE, "section 'z' has 6 bytes, expected 7")
CORRUPT(test_corrupt_section_crc, C_SECTION_CRC, "section 'source_line' checksum mismatch (corrupt file)")
CORRUPT(test_corrupt_atoms_crc, C_ATOMS_CRC, "structure 1: atoms checksum mismatch (corrupt file)")
CORRUPT(test_corrupt_forces_crc, C_FORCES_CRC, "structure 2: forces checksum mismatch (corrupt file)")
CORRUPT(test_corrupt_offsets_span, C_OFFSETS_SPAN, "atom offsets do not span the 6 atoms")
CORRUPT(test_corrupt_offsets_order, C_OFFSETS_ORDER, "atom offsets not increasing at structure 1")
CORRUPT(test_corrupt_z_range, C_Z_RANGE, "atomic number 0 out of range at atom 4")
CORRUPT(test_corrupt_name, C_NAME, "target name 1 is empty or not terminated")
CORRUPT(test_corrupt_flags, C_FLAGS, "header counts out of range")
CORRUPT(test_corrupt_pbc_bits, C_PBC_BITS, "structure 2 has a bad pbc or a singular cell")
CORRUPT(test_corrupt_singular_cell, C_SINGULAR_CELL, "structure 1 has a bad pbc or a singular cell")
CORRUPT(test_corrupt_nonfinite_cell, C_NONFINITE_CELL, "structure 1 has a bad pbc or a singular cell")
CORRUPT(test_corrupt_chunk_entry, C_CHUNK_ENTRY, "bad chunk table entry 1")
CORRUPT(test_corrupt_chunk_past_end, C_CHUNK_PAST_END,
        "chunk 0 of section 'z' extends past the end of the file (truncated?)")
CORRUPT(test_corrupt_chunk_short, C_CHUNK_SHORT, "section 'z' has 5 bytes in chunks, expected 6")
CORRUPT(test_corrupt_chunk_table_size, C_CHUNK_TABLE_SIZE, "section 'chunks' has 25 bytes, not a multiple of 24")

/* A lazy open checks no structure's atoms: a damaged structure is found by
 * pt_dataset_verify when it is read, and the others still verify. */
static void test_lazy_open_and_verify(void **state)
{
    fixture *f = *state;
    write_sample(f->path);
    size_t n;
    unsigned char *b = load(f->path, &n);
    corrupt(b, n, C_ATOMS_CRC);
    save(f->path, b, n);
    free(b);
    pt_dataset ds;
    char err[512], want[512];
    assert_int_equal(pt_dataset_open_ex(&ds, f->path, PT_DATASET_OPEN_LAZY, err, sizeof err), 0);
    assert_int_equal(pt_dataset_verify(&ds, 0, 1, err, sizeof err), 0);
    assert_int_equal(pt_dataset_verify(&ds, 2, 1, err, sizeof err), 0);
    assert_int_equal(pt_dataset_verify(&ds, 0, 3, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: structure 1: atoms checksum mismatch (corrupt file)", f->path);
    assert_string_equal(err, want);
    assert_int_equal(pt_dataset_verify(&ds, 2, 2, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: structures 2..3 asked for, the dataset has 3", f->path);
    assert_string_equal(err, want);
    pt_dataset_close(&ds);
    /* an intact file verifies whole; a dataset checked at open always does */
    write_sample(f->path);
    assert_int_equal(pt_dataset_open_ex(&ds, f->path, PT_DATASET_OPEN_LAZY, err, sizeof err), 0);
    assert_int_equal(pt_dataset_verify(&ds, 0, 3, err, sizeof err), 0);
    pt_dataset_close(&ds);
    assert_int_equal(pt_dataset_open(&ds, f->path, err, sizeof err), 0);
    assert_int_equal(pt_dataset_verify(&ds, 0, 3, err, sizeof err), 0);
    pt_dataset_close(&ds);
}

/* Columns over several 4 MiB chunks (pos: 12 bytes an atom), forces that
 * start with structure 5000 (the atoms before get NaN and their CRCs), read
 * back exactly; giving pages back keeps the values. */
static void test_many_chunks_and_late_forces(void **state)
{
    fixture *f = *state;
    const uint32_t ns = 8000, per = 100;
    uint8_t *z = malloc(per);
    float *pos = malloc(3 * per * sizeof(float)), *frc = malloc(3 * per * sizeof(float));
    pt_ptd_writer *w;
    char err[256];
    assert_int_equal(pt_ptd_writer_open(&w, f->path, err, sizeof err), 0);
    for (uint32_t s = 0; s < ns; s++) {
        for (uint32_t a = 0; a < per; a++) {
            z[a] = (uint8_t)(1 + (s + a) % 99);
            for (int c = 0; c < 3; c++) {
                pos[3 * a + c] = (float)s + 0.001f * (float)(3 * a + c);
                frc[3 * a + c] = -(float)s - 0.5f * (float)c;
            }
        }
        assert_int_equal(add(w, per, z, pos, s >= 5000 ? frc : NULL, s + 1, 0, NULL, NULL), 0);
    }
    assert_int_equal(pt_ptd_writer_finish(w, err, sizeof err), 0);
    pt_ptd_writer_close(w);
    pt_dataset ds;
    assert_int_equal(pt_dataset_open(&ds, f->path, err, sizeof err), 0);
    assert_int_equal(ds.n_atoms, (uint64_t)ns * per);
    assert_true(3 * ds.n_atoms * sizeof(float) > 2 * (4u << 20));   /* pos spans 3 chunks */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t s = 0; s < ns; s += 37) {
            uint64_t a0 = ds.atom_offset[s];
            assert_int_equal(ds.z[a0 + 7], 1 + (s + 7) % 99);
            assert_true(ds.pos[3 * a0 + 5] == (float)s + 0.001f * 5.0f);
            if (s >= 5000) assert_true(ds.forces[3 * a0 + 2] == -(float)s - 1.0f);
            else assert_true(isnan(ds.forces[3 * a0 + 2]));
        }
        pt_dataset_release(&ds, 0, ns);   /* the second pass maps the pages again */
    }
    assert_int_equal(ds.source_line[ns - 1], ns);
    pt_dataset_close(&ds);
    free(z);
    free(pos);
    free(frc);
}

/* A version-1 file (written by the build before cells existed, from
 * tests/data/ptd_v1_mixed.extxyz: two water clusters with forces, two QM9
 * molecules) reads as before: the same columns as a fresh ingest of the same
 * text, and no cell, pbc or stress. */
static void test_reads_version_1(void **state)
{
    (void)state;
    pt_dataset v1, v2;
    char err[512];
    assert_int_equal(pt_dataset_open(&v1, "tests/data/ptd_v1_mixed.ptd", err, sizeof err), 0);
    uint32_t version;
    memcpy(&version, (const unsigned char *)v1.map_base + H_VERSION, 4);
    assert_int_equal(version, 1);
    const char *src = "tests/data/ptd_v1_mixed.extxyz";
    char out[64];
    snprintf(out, sizeof out, "/tmp/pt-test-v1-%ld.ptd", (long)getpid());
    assert_int_equal(pt_test_ingest(src, out), 0);
    assert_int_equal(pt_dataset_open(&v2, out, err, sizeof err), 0);
    unlink(out);
    assert_int_equal(v1.n_structs, 4);
    assert_int_equal(v1.n_structs, v2.n_structs);
    assert_int_equal(v1.n_atoms, v2.n_atoms);
    assert_memory_equal(v1.atom_offset, v2.atom_offset, (v1.n_structs + 1) * sizeof(uint64_t));
    assert_memory_equal(v1.z, v2.z, v1.n_atoms);
    assert_memory_equal(v1.pos, v2.pos, 3 * v1.n_atoms * sizeof(float));
    assert_non_null(v1.forces);
    assert_memory_equal(v1.forces, v2.forces, 3 * v1.n_atoms * sizeof(float));   /* NaN bits too */
    assert_memory_equal(v1.source_line, v2.source_line, v1.n_structs * sizeof(uint64_t));
    assert_int_equal(v1.n_targets, v2.n_targets);
    assert_memory_equal(v1.target_names, v2.target_names, v1.n_targets * PT_KEY_MAX);
    assert_memory_equal(v1.targets, v2.targets, v1.n_targets * v1.n_structs * sizeof(double));
    assert_null(v1.cell);
    assert_null(v1.pbc);
    assert_null(v1.stress);
    /* pbc="F F F" without a Lattice is a molecule: no cell section in v2 either */
    assert_null(v2.cell);
    for (uint32_t s = 0; s < v2.n_structs; s++) assert_int_equal(pt_dataset_pbc(&v2, s), 0);
    pt_dataset_close(&v1);
    pt_dataset_close(&v2);
}

/* A version-2 file (written before chunks and per-structure checksums, from
 * tests/data/ptd_v2_mixed.extxyz: the v1 sample's molecules and water
 * clusters, then EMT slabs and bulk cells with stress) reads exactly as a
 * fresh ingest of the same text; a lazy open checks it whole all the same. */
static void test_reads_version_2(void **state)
{
    (void)state;
    pt_dataset v2, v3;
    char err[512];
    assert_int_equal(pt_dataset_open_ex(&v2, "tests/data/ptd_v2_mixed.ptd", PT_DATASET_OPEN_LAZY, err,
                                        sizeof err), 0);
    uint32_t version;
    memcpy(&version, (const unsigned char *)v2.map_base + H_VERSION, 4);
    assert_int_equal(version, 2);
    assert_int_equal(v2.verified, 1);
    char out[64];
    snprintf(out, sizeof out, "/tmp/pt-test-v2-%ld.ptd", (long)getpid());
    assert_int_equal(pt_test_ingest("tests/data/ptd_v2_mixed.extxyz", out), 0);
    assert_int_equal(pt_dataset_open(&v3, out, err, sizeof err), 0);
    unlink(out);
    assert_int_equal(v2.n_structs, 10);
    assert_int_equal(v2.n_atoms, v3.n_atoms);
    assert_memory_equal(v2.atom_offset, v3.atom_offset, (v2.n_structs + 1) * sizeof(uint64_t));
    assert_memory_equal(v2.z, v3.z, v2.n_atoms);
    assert_memory_equal(v2.pos, v3.pos, 3 * v2.n_atoms * sizeof(float));
    assert_memory_equal(v2.forces, v3.forces, 3 * v2.n_atoms * sizeof(float));
    assert_memory_equal(v2.source_line, v3.source_line, v2.n_structs * sizeof(uint64_t));
    assert_int_equal(v2.n_targets, v3.n_targets);
    assert_memory_equal(v2.targets, v3.targets, v2.n_targets * v2.n_structs * sizeof(double));
    assert_memory_equal(v2.cell, v3.cell, 9 * v2.n_structs * sizeof(double));
    assert_memory_equal(v2.pbc, v3.pbc, v2.n_structs);
    assert_memory_equal(v2.stress, v3.stress, 9 * v2.n_structs * sizeof(double));
    pt_dataset_close(&v2);
    pt_dataset_close(&v3);
}

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
        T(test_corrupt_version), T(test_corrupt_atom_cols_count), T(test_corrupt_atom_cols_size), T(test_corrupt_layout), T(test_corrupt_header_crc), T(test_corrupt_counts),
        T(test_corrupt_entry), T(test_corrupt_truncated_section), T(test_corrupt_section_size),
        T(test_corrupt_section_crc), T(test_corrupt_offsets_span), T(test_corrupt_offsets_order),
        T(test_corrupt_z_range), T(test_corrupt_name), T(test_corrupt_flags), T(test_corrupt_pbc_bits),
        T(test_corrupt_singular_cell), T(test_corrupt_nonfinite_cell), T(test_reads_version_1),
        T(test_corrupt_atoms_crc), T(test_corrupt_forces_crc), T(test_corrupt_chunk_entry),
        T(test_corrupt_chunk_past_end), T(test_corrupt_chunk_short), T(test_corrupt_chunk_table_size),
        T(test_lazy_open_and_verify), T(test_many_chunks_and_late_forces), T(test_reads_version_2),
    };
    return cmocka_run_group_tests_name("dataset_file", tests, NULL, NULL);
}
