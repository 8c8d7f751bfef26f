/* fuzz_ptd.c — the .ptd reader (dataset_file.c) on arbitrary bytes, as
 * `packtrain train/eval/pack` take a DATA.ptd from the user.  A .ptd
 * carries CRC-32s of its header and of every section, and versions 3 and 4
 * one per structure for its atoms and forces, so nearly every mutation stops
 * at the first checksum.  The first input byte is a mode:
 *   bit 0  the harness rewrites every checksum of the rest to match (the
 *          layout of dataset_file_internal.h; the per-structure ones of
 *          versions 3 and 4 from a lazy open, which checks all but the
 *          per-atom data), so mutations reach the checks behind them: section
 *          bounds and sizes, the chunk table, atom offsets, atomic numbers,
 *          target names, cells, version 4's per-atom column names and
 *          columns (seed v4_atom_columns_lazy);
 *   bit 1  the file is opened lazily (PT_DATASET_OPEN_LAZY, as training
 *          does) and its structures checked with pt_dataset_verify.
 * A dataset that opens (and verifies) is read whole, as neighbour search,
 * packing and training would, with the invariants the reader promises
 * (dataset.h) checked on the way. */
#include <zlib.h>

#include "engine/data/dataset.h"
#include "engine/data/dataset_file_internal.h"
#include "tests/fuzz/fuzz.h"

static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* Section CRCs (entries id/offset/size/CRC), then the header's. */
static void fix_checksums(uint8_t *f, size_t size)
{
    if (size < PTD_FIXED_BYTES) return;
    uint32_t n_sec = get32(f + 20);
    if (n_sec > 16 || size < PTD_HEADER_FOR((size_t)n_sec)) return;
    for (uint32_t s = 0; s < n_sec; s++) {
        uint8_t *e = f + PTD_FIXED_BYTES + s * PTD_ENTRY_BYTES;
        uint64_t off = get64(e + 8), len = get64(e + 16);
        if (off <= size && len <= size - off) put32(e + 24, (uint32_t)crc32_z(0L, f + off, (z_size_t)len));
    }
    size_t hdr = PTD_HEADER_FOR((size_t)n_sec);
    put32(f + PTD_OFF_CRC, 0);
    put32(f + PTD_OFF_CRC, (uint32_t)crc32_z(0L, f, hdr));
}

/* The per-structure CRCs (versions 3 and 4), computed as the writer does from the
 * atoms a lazy open maps, written into the sections that hold them. */
static void fix_structure_crcs(uint8_t *f, size_t size)
{
    if (size < PTD_HEADER_FOR(N_SECTIONS) || get32(f + 8) < 3) return;
    pt_dataset ds;
    char err[512];
    if (pt_dataset_open_ex(&ds, pt_fuzz_file(f, size), PT_DATASET_OPEN_LAZY, err, sizeof err) != 0) return;
    /* the open checked both sections: 4 bytes a structure, inside the file */
    uint8_t *atoms = f + get64(f + PTD_FIXED_BYTES + SEC_ATOMS_CRC * PTD_ENTRY_BYTES + 8);
    uint8_t *forces = ds.forces_crc ? f + get64(f + PTD_FIXED_BYTES + SEC_FORCES_CRC * PTD_ENTRY_BYTES + 8) : NULL;
    for (uint32_t s = 0; s < ds.n_structs; s++) {
        const uint64_t a0 = ds.atom_offset[s], n = ds.atom_offset[s + 1] - a0;
        uLong crc = crc32_z(0L, ds.z + a0, (z_size_t)n);
        put32(atoms + 4 * (size_t)s,
              (uint32_t)crc32_z(crc, (const unsigned char *)(ds.pos + 3 * a0), (z_size_t)(12 * n)));
        if (forces)
            put32(forces + 4 * (size_t)s,
                  (uint32_t)crc32_z(0L, (const unsigned char *)(ds.forces + 3 * a0), (z_size_t)(12 * n)));
    }
    pt_dataset_close(&ds);
}

static void read_all(const pt_dataset *ds)
{
    volatile double sink = 0;
    FUZZ_CHECK(ds->atom_offset[0] == 0 && ds->atom_offset[ds->n_structs] == ds->n_atoms);
    for (uint32_t s = 0; s < ds->n_structs; s++) {
        FUZZ_CHECK(pt_dataset_natoms(ds, s) >= 1);
        sink += (double)ds->source_line[s];
        unsigned pbc = pt_dataset_pbc(ds, s);
        FUZZ_CHECK(pbc <= PT_PBC_ALL);
        if (ds->cell)
            for (int k = 0; k < 9; k++) {
                if (pbc) FUZZ_CHECK(isfinite(ds->cell[9 * (size_t)s + k]));
                sink += ds->cell[9 * (size_t)s + k];
            }
        if (ds->stress)
            for (int k = 0; k < 9; k++) sink += ds->stress[9 * (size_t)s + k];
        for (uint32_t t = 0; t < ds->n_targets; t++) sink += ds->targets[(size_t)t * ds->n_structs + s];
    }
    for (uint64_t a = 0; a < ds->n_atoms; a++) {
        FUZZ_CHECK(ds->z[a] >= 1 && ds->z[a] <= PT_Z_MAX);
        for (int c = 0; c < 3; c++) {
            sink += ds->pos[3 * a + c];
            if (ds->forces) sink += ds->forces[3 * a + c];
        }
    }
    for (uint32_t t = 0; t < ds->n_targets; t++) {
        FUZZ_CHECK(memchr(ds->target_names[t], '\0', PT_KEY_MAX) != NULL);
        FUZZ_CHECK(pt_dataset_find_target(ds, ds->target_names[t]) >= 0);
    }
    /* per-atom columns (version 4): named, one value per atom (NaN = absent) */
    FUZZ_CHECK(ds->n_atom_cols <= PT_ATOM_COLS_MAX);
    FUZZ_CHECK(ds->version >= 4 || ds->n_atom_cols == 0);
    for (uint32_t c = 0; c < ds->n_atom_cols; c++) {
        FUZZ_CHECK(memchr(ds->atom_col_names[c], '\0', PT_KEY_MAX) != NULL);
        FUZZ_CHECK(pt_dataset_find_atom_col(ds, ds->atom_col_names[c]) >= 0);
        for (uint64_t a = 0; a < ds->n_atoms; a++) sink += ds->atom_cols[c * ds->n_atoms + a];
    }
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const size_t n = size - 1;
    uint8_t *file = malloc(n ? n : 1);
    FUZZ_CHECK(file != NULL);
    memcpy(file, data + 1, n);
    if (data[0] & 1) {
        fix_checksums(file, n);
        fix_structure_crcs(file, n);
        fix_checksums(file, n);
    }
    const unsigned lazy = data[0] & 2 ? PT_DATASET_OPEN_LAZY : 0;
    pt_dataset ds;
    char err[512] = "";
    if (pt_dataset_open_ex(&ds, pt_fuzz_file(file, n), lazy, err, sizeof err) == 0) {
        if (!lazy || pt_dataset_verify(&ds, 0, ds.n_structs, err, sizeof err) == 0) read_all(&ds);
        else FUZZ_CHECK(err[0] != '\0');
        pt_dataset_close(&ds);
    } else {
        FUZZ_CHECK(err[0] != '\0');
    }
    free(file);
    return 0;
}
