/* dataset_file.h — the .ptd columnar dataset file: streaming writer.
 *
 * (The reader, pt_dataset_open, is declared in dataset.h; the writer is
 * dataset_write.c, the reader dataset_file.c.)
 *
 * Layout, all little-endian:
 *   header   magic "PKTRDATA", version, header size, byte-order tag,
 *            section count, n_structs, n_atoms, n_targets, flags, header
 *            CRC-32, then one 32-byte entry per section: id, offset, size,
 *            CRC-32 of the section bytes
 *   sections each starting on a 64-byte boundary, in this order:
 *            target names  char[n_targets][PT_KEY_MAX]
 *            atom_offset   u64[n_structs + 1]
 *            z             u8[n_atoms]
 *            pos           f32[3 n_atoms]
 *            forces        f32[3 n_atoms], NaN = absent; or empty (flag bit 0 clear)
 *            source_line   u64[n_structs]
 *            targets       f64[n_targets * n_structs], key-major, NaN = absent
 *          version 2 adds:
 *            cell          f64[9 n_structs] rows a, b, c (0 without a cell);
 *                          or empty (flag bit 1 clear: no structure has a cell)
 *            pbc           u8[n_structs] PT_PBC_* bits; empty with the cell
 *            stress        f64[9 n_structs] row-major, NaN = absent; or empty
 *                          (flag bit 2 clear)
 *          version 3 adds:
 *            atoms_crc     u32[n_structs] CRC-32 of a structure's z bytes then
 *                          its pos bytes
 *            forces_crc    u32[n_structs] CRC-32 of its forces bytes (NaN ones
 *                          too); empty without forces
 *            chunks        {u32 section, u32 0, u64 offset, u64 length}[]
 *          version 4 (written now) adds:
 *            atom_names    char[n_atom_cols][PT_KEY_MAX] (n_atom_cols is the
 *                          header's u32 at byte 52, 0 before version 4)
 *            atom_cols     f32[n_atom_cols * n_atoms] column-major, NaN =
 *                          absent (contiguous, with its section CRC: checked
 *                          whole at open, even a lazy one)
 *          version 3 stores z, pos and forces not as one range each but in chunks
 *          listed by the chunk table, in order per column: every chunk but a
 *          column's last holds exactly 4 MiB, each starts at a multiple of
 *          64 KiB (the reader maps them back to back into one array); their
 *          section entries have offset 0, the column's size and CRC 0 — the
 *          per-structure CRCs stand for them, so a reader may check only the
 *          structures it reads (pt_dataset_open_ex, pt_dataset_verify).
 *   Versions 1 (the first seven sections: no cell, pbc, stress), 2 (ten
 *   sections, each contiguous, with its CRC) and 3 (no further per-atom
 *   columns) are still read.
 *
 * The writer puts the per-atom columns' chunks straight into the output
 * ("<out>.tmp" plus six random characters) as structures arrive, and
 * streams the per-structure columns to unlinked temporary files, so memory
 * stays constant in the dataset size and the big columns are written once;
 * finishing appends the per-structure sections and the chunk table, writes
 * the header, fsyncs and renames the file over the output, so a reader never
 * sees a half file. */
#ifndef PT_DATASET_FILE_H
#define PT_DATASET_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/data/dataset.h"

#define PT_PTD_VERSION 4      /* written; versions 1 to 4 are read */
#define PT_PTD_MAX_TARGETS 256
#define PT_PTD_ALIGN 64

typedef struct pt_ptd_writer pt_ptd_writer;

/* Starts a dataset that finish will write to out_path.  0 ok, -1 with err. */
int pt_ptd_writer_open(pt_ptd_writer **w, const char *out_path, char *err, size_t errlen);

/* Index of target `name`, registering it on first use; -1 when the file
 * already has PT_PTD_MAX_TARGETS targets. */
int pt_ptd_writer_target(pt_ptd_writer *w, const char *name);
uint32_t pt_ptd_writer_n_targets(const pt_ptd_writer *w);

/* One structure as the writer takes it. */
typedef struct pt_ptd_record {
    uint32_t n_atoms;
    const uint8_t *z;            /* [n_atoms] */
    const float *pos;            /* [3 n_atoms] */
    const float *forces;         /* [3 n_atoms], or NULL (NaN if others have forces) */
    const double *cell;          /* [9], or NULL: no cell (zeros if others have one) */
    uint8_t pbc;                 /* PT_PBC_* bits; non-zero needs a cell */
    const double *stress;        /* [9], or NULL (NaN if others have stress) */
    uint64_t source_line;
    uint32_t n_values;           /* numeric keys: target_idx[i] / values[i] */
    const uint32_t *target_idx;
    const double *values;
    uint32_t n_atom_cols;        /* further per-atom columns, by name (dataset.h) */
    const char (*atom_col_names)[PT_KEY_MAX];
    const float *atom_vals;      /* [n_atom_cols * n_atoms], column-major */
} pt_ptd_record;

/* Appends one structure.  0 ok, -1 on an I/O error (see pt_ptd_writer_error). */
int pt_ptd_writer_add(pt_ptd_writer *w, const pt_ptd_record *rec);

/* Writes the file (temp + fsync + rename).  0 ok, -1 with err. */
int pt_ptd_writer_finish(pt_ptd_writer *w, char *err, size_t errlen);

/* The first I/O error of add, "" if none. */
const char *pt_ptd_writer_error(const pt_ptd_writer *w);

/* Frees the writer and its temporary files; without a successful finish
 * nothing is left at out_path. */
void pt_ptd_writer_close(pt_ptd_writer *w);

#endif
