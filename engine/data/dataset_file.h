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
 *            forces        f32[3 n_atoms], or empty (flag bit 0 clear)
 *            source_line   u64[n_structs]
 *            targets       f64[n_targets * n_structs], key-major, NaN = absent
 *
 * The writer streams every column to an unlinked temporary file next to the
 * output while structures arrive, so memory stays constant in the dataset
 * size; finishing assembles the sections into "<out>.tmp" plus six random characters, fsyncs it
 * and renames it over the output, so a reader never sees a half file. */
#ifndef PT_DATASET_FILE_H
#define PT_DATASET_FILE_H

#include <stddef.h>
#include <stdint.h>

#define PT_PTD_VERSION 1
#define PT_PTD_MAX_TARGETS 256
#define PT_PTD_ALIGN 64

typedef struct pt_ptd_writer pt_ptd_writer;

/* Starts a dataset that finish will write to out_path.  0 ok, -1 with err. */
int pt_ptd_writer_open(pt_ptd_writer **w, const char *out_path, char *err, size_t errlen);

/* Index of target `name`, registering it on first use; -1 when the file
 * already has PT_PTD_MAX_TARGETS targets. */
int pt_ptd_writer_target(pt_ptd_writer *w, const char *name);
uint32_t pt_ptd_writer_n_targets(const pt_ptd_writer *w);

/* Appends one structure.  forces may be NULL (stored as NaN if other
 * structures have forces); target_idx[i] / values[i] are its numeric keys.
 * 0 ok, -1 on an I/O error (see pt_ptd_writer_error). */
int pt_ptd_writer_add(pt_ptd_writer *w, uint32_t n_atoms, const uint8_t *z,
                      const float *pos, const float *forces, uint64_t source_line,
                      uint32_t n_values, const uint32_t *target_idx, const double *values);

/* Writes the file (temp + fsync + rename).  0 ok, -1 with err. */
int pt_ptd_writer_finish(pt_ptd_writer *w, char *err, size_t errlen);

/* The first I/O error of add, "" if none. */
const char *pt_ptd_writer_error(const pt_ptd_writer *w);

/* Frees the writer and its temporary files; without a successful finish
 * nothing is left at out_path. */
void pt_ptd_writer_close(pt_ptd_writer *w);

#endif
