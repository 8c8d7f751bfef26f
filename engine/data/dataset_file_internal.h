/* dataset_file_internal.h — the .ptd layout shared by its writer
 * (dataset_write.c) and its reader (dataset_file.c): section ids, header
 * offsets, chunk geometry.  The format itself is described in
 * dataset_file.h.  Not for use outside engine/data. */
#ifndef PT_DATASET_FILE_INTERNAL_H
#define PT_DATASET_FILE_INTERNAL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "engine/data/dataset.h"

enum {
    SEC_NAMES, SEC_OFFSET, SEC_Z, SEC_POS, SEC_FORCES, SEC_LINE, SEC_TARGETS,
    N_SECTIONS_V1,   /* version 1 ends here */
    SEC_CELL = N_SECTIONS_V1, SEC_PBC, SEC_STRESS,
    N_SECTIONS_V2,   /* version 2 ends here */
    SEC_ATOMS_CRC = N_SECTIONS_V2, SEC_FORCES_CRC, SEC_CHUNKS,
    N_SECTIONS_V3,   /* version 3 ends here */
    SEC_ATOM_NAMES = N_SECTIONS_V3, SEC_ATOM_COLS,
    N_SECTIONS
};

#define PTD_BYTE_ORDER 0x01020304u
#define PTD_FLAG_FORCES 1u
#define PTD_FLAG_CELL 2u       /* cell and pbc sections present */
#define PTD_FLAG_STRESS 4u
#define PTD_ENTRY_BYTES 32
#define PTD_FIXED_BYTES 56
#define PTD_HEADER_FOR(n_sections) (PTD_FIXED_BYTES + (n_sections) * PTD_ENTRY_BYTES)
#define PTD_HEADER_BYTES PTD_HEADER_FOR(N_SECTIONS)
#define PTD_OFF_CRC 48
#define PTD_OFF_ATOM_COLS 52   /* version 4: u32 count of further per-atom columns */

/* Version 3 stores the per-atom columns (z, pos, forces) as chunks written
 * where they fell while structures arrived: every chunk of a column but its
 * last holds exactly PTD_CHUNK bytes, and every chunk starts at a multiple
 * of PTD_CHUNK_ALIGN in the file, so the reader can map them back to back
 * into one array (any page size up to 64 KiB). */
#define PTD_CHUNK (4u << 20)
#define PTD_CHUNK_ALIGN (64u << 10)
#define PTD_CHUNK_ENTRY_BYTES 24   /* u32 section, u32 0, u64 offset, u64 length */

static inline int ptd_chunked(int sec)
{
    return sec == SEC_Z || sec == SEC_POS || sec == SEC_FORCES;
}

extern const char *const pt_ptd_section_names[N_SECTIONS];

/* The writer's further per-atom columns (dataset_atomcols.c): one unlinked
 * temporary file of f32 per column, filled as structures arrive (NaN for the
 * atoms of structures without the column), copied after each other at the
 * end as the atom_cols section. */
typedef struct ptd_atomcols {
    uint32_t n;
    char names[PT_ATOM_COLS_MAX][PT_KEY_MAX];
    FILE *col[PT_ATOM_COLS_MAX];
} ptd_atomcols;

/* Appends one structure's n_atoms atoms: column names[i] takes
 * vals[i * n_atoms ..], a column it does not name NaN; a new name starts a
 * column back-filled with NaN for the atoms_before atoms already written.
 * 0, or -1 with why in err (too many columns, I/O). */
int ptd_atomcols_append(ptd_atomcols *ac, const char *tmp_base, uint64_t atoms_before,
                        uint32_t n_atoms, uint32_t n_cols, const char (*names)[PT_KEY_MAX],
                        const float *vals, char *err, size_t errlen);
void ptd_atomcols_close(ptd_atomcols *ac);

/* An unlinked temporary file next to out_path (dataset_write.c), or NULL. */
FILE *ptd_temp_column(const char *out_path);
extern const char pt_ptd_magic[8];

static inline void ptd_put_u32(unsigned char *h, size_t off, uint32_t v) { memcpy(h + off, &v, 4); }
static inline void ptd_put_u64(unsigned char *h, size_t off, uint64_t v) { memcpy(h + off, &v, 8); }
static inline uint32_t ptd_get_u32(const unsigned char *h, size_t off)
{
    uint32_t v;
    memcpy(&v, h + off, 4);
    return v;
}
static inline uint64_t ptd_get_u64(const unsigned char *h, size_t off)
{
    uint64_t v;
    memcpy(&v, h + off, 8);
    return v;
}

#endif
