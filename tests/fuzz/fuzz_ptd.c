/* fuzz_ptd.c — the .ptd reader (pt_dataset_open, dataset_file.c) on
 * arbitrary bytes.  A .ptd carries CRC-32s of its header and of every
 * section, so nearly every mutation stops at the first checksum; when the
 * first input byte is odd, the harness rewrites the checksums of the rest to
 * match (layout of dataset_file.h: header CRC at byte 48 of a 56-byte fixed
 * part, then 32-byte section entries id/offset/size/CRC) so mutations reach
 * the checks behind them: section bounds and sizes, atom offsets, atomic
 * numbers, target names, cells.  A dataset that opens is read whole, as
 * neighbour search, packing and training would, with the invariants the
 * reader promises (dataset.h) checked on the way. */
#include <zlib.h>

#include "engine/data/dataset.h"
#include "tests/fuzz/fuzz.h"

#define FIXED 56
#define ENTRY 32
#define OFF_CRC 48

static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

static void fix_checksums(uint8_t *f, size_t size)
{
    if (size < FIXED) return;
    uint32_t n_sec = get32(f + 20);
    if (n_sec > 16 || size < FIXED + (size_t)n_sec * ENTRY) return;
    for (uint32_t s = 0; s < n_sec; s++) {
        uint8_t *e = f + FIXED + s * ENTRY;
        uint64_t off = get64(e + 8), len = get64(e + 16);
        if (off <= size && len <= size - off) put32(e + 24, (uint32_t)crc32_z(0L, f + off, (z_size_t)len));
    }
    size_t hdr = FIXED + (size_t)n_sec * ENTRY;
    put32(f + OFF_CRC, 0);
    put32(f + OFF_CRC, (uint32_t)crc32_z(0L, f, hdr));
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
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    uint8_t *file = malloc(size);
    FUZZ_CHECK(file != NULL);
    memcpy(file, data + 1, size - 1);
    if (data[0] & 1) fix_checksums(file, size - 1);
    pt_dataset ds;
    char err[512] = "";
    if (pt_dataset_open(&ds, pt_fuzz_file(file, size - 1), err, sizeof err) == 0) {
        read_all(&ds);
        pt_dataset_close(&ds);
    } else {
        FUZZ_CHECK(err[0] != '\0');
    }
    free(file);
    return 0;
}
