/* dataset_file_internal.h — the .ptd layout shared by its writer
 * (dataset_write.c) and its reader (dataset_file.c): section ids, header
 * offsets, chunk geometry.  The format itself is described in
 * dataset_file.h.  Not for use outside engine/data. */
#ifndef PT_DATASET_FILE_INTERNAL_H
#define PT_DATASET_FILE_INTERNAL_H

#include <stdint.h>
#include <string.h>

enum {
    SEC_NAMES, SEC_OFFSET, SEC_Z, SEC_POS, SEC_FORCES, SEC_LINE, SEC_TARGETS,
    N_SECTIONS_V1,   /* version 1 ends here */
    SEC_CELL = N_SECTIONS_V1, SEC_PBC, SEC_STRESS,
    N_SECTIONS_V2,   /* version 2 ends here */
    SEC_ATOMS_CRC = N_SECTIONS_V2, SEC_FORCES_CRC, SEC_CHUNKS,
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
