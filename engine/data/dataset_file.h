/* dataset_file.h — the .ptd columnar dataset file: streaming writer.
 *
 * (The reader, pt_dataset_open, is declared in dataset.h.)
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
 *   Version 1 files (the first seven sections) are still read: no cell, no
 *   pbc, no stress.
 *
 * The writer streams every column to an unlinked temporary file next to the
 * output while structures arrive, so memory stays constant in the dataset
 * size; finishing assembles the sections into "<out>.tmp" plus six random characters, fsyncs it
 * and renames it over the output, so a reader never sees a half file. */
#ifndef PT_DATASET_FILE_H
#define PT_DATASET_FILE_H

#include <stddef.h>
#include <stdint.h>

#define PT_PTD_VERSION 2      /* written; versions 1 and 2 are read */
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
