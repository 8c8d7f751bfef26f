/* dataset.h — an ingested molecular dataset as the rest of the engine sees it.
 *
 * Room engine/data: datasets and everything about them before graphs exist —
 * the .ptd file, ingest and its readers, elements, the seeded split, target
 * normalisation.  Uses engine/core only; knows no graph, pack, model, job
 * configuration or backend (normalize.h takes its own pt_norm_kind).
 *
 * A pt_dataset is a read-only columnar view: one array per quantity, indexed by
 * structure or by atom.  It is either backed by the mmap of a .ptd file written
 * by ingest (pt_dataset_open / pt_dataset_close), or by arrays a caller owns
 * (tests build synthetic datasets that way and never call close).
 *
 * Layout contract used by neighbours, packing and training:
 *   atoms of structure s are [atom_offset[s], atom_offset[s+1])
 *   z[a] in 1..PT_Z_MAX, pos[3a..3a+2] in Å
 *   targets[k * n_structs + s] is numeric key k of structure s; NaN means
 *   "this structure has no such key" (parsers reject NaN/Inf values, so NaN is
 *   only ever absence);
 *   atom_cols[c * n_atoms + a] is per-atom column c (an extended XYZ
 *   Properties column of type R and width 1 other than the forces, e.g.
 *   partial charges or per-atom energies) of atom a, NaN on the atoms of
 *   structures without that column. */
#ifndef PT_DATASET_H
#define PT_DATASET_H

#include <stddef.h>
#include <stdint.h>

#define PT_Z_MAX 99          /* embedding has 100 rows, row 0 = padding */
#define PT_KEY_MAX 64        /* longest per-structure key name, with NUL */
#define PT_ATOM_COLS_MAX 64  /* real per-atom columns kept besides z, pos, forces */

enum { PT_PBC_A = 1, PT_PBC_B = 2, PT_PBC_C = 4, PT_PBC_ALL = 7 };

typedef struct pt_dataset {
    uint32_t n_structs;
    uint64_t n_atoms;
    const uint64_t *atom_offset;   /* [n_structs + 1] */
    const uint8_t *z;              /* [n_atoms] */
    const float *pos;              /* [n_atoms * 3] */
    const float *forces;           /* [n_atoms * 3] or NULL when absent */
    const uint64_t *source_line;   /* [n_structs] first line in the source file, or NULL */
    uint32_t n_targets;
    const char (*target_names)[PT_KEY_MAX]; /* [n_targets] */
    const double *targets;         /* [n_targets * n_structs], key-major */
    const double *cell;            /* [n_structs * 9] rows a, b, c in Å, or NULL: no cells */
    const uint8_t *pbc;            /* [n_structs] PT_PBC_* bits, or NULL: nothing periodic */
    const double *stress;          /* [n_structs * 9] row-major 3x3, eV/Å³, ASE's sign
                                    * (positive = tensile); NaN = absent; or NULL */
    uint32_t n_atom_cols;          /* further per-atom columns (0 before .ptd version 4) */
    const char (*atom_col_names)[PT_KEY_MAX]; /* [n_atom_cols] */
    const float *atom_cols;        /* [n_atom_cols * n_atoms], column-major, NaN = absent */

    /* private: set by pt_dataset_open */
    void *map_base;
    size_t map_size;
    void *view_base[3];            /* version 3: z, pos, forces mapped chunk by chunk */
    size_t view_size[3];
    const uint32_t *atoms_crc;     /* [n_structs] CRC-32 of z then pos, or NULL */
    const uint32_t *forces_crc;    /* [n_structs] CRC-32 of forces, or NULL */
    uint32_t version;              /* of the file, 0 for a caller's arrays */
    int verified;                  /* every structure's atoms were checked */
    char *path;
} pt_dataset;

static inline uint32_t pt_dataset_natoms(const pt_dataset *ds, uint32_t s)
{
    return (uint32_t)(ds->atom_offset[s + 1] - ds->atom_offset[s]);
}

/* Periodic axes of structure s (PT_PBC_* bits; 0 for a molecule). */
static inline unsigned pt_dataset_pbc(const pt_dataset *ds, uint32_t s)
{
    return ds->pbc ? ds->pbc[s] : 0u;
}

/* Maps a .ptd file written by ingest (dataset_file.c) and checks it whole:
 * magic, version, byte order, header, section and per-structure CRC-32s,
 * section and chunk bounds, atom offsets and atomic numbers.  0 ok; -1 with
 * "PATH: reason" in err.  Checking reads every byte, but gives the pages
 * back as it goes: the process's RSS stays small however big the file. */
int pt_dataset_open(pt_dataset *ds, const char *path, char *err, size_t errlen);

/* PT_DATASET_OPEN_LAZY: check everything but the per-atom data (atomic
 * numbers, positions, forces) of each structure, which the user of the
 * dataset checks with pt_dataset_verify for the structures it reads — a
 * training rank touches only its own structures' pages that way.  Files of
 * versions 1 and 2 have no per-structure checksums and are checked whole
 * at open anyway. */
#define PT_DATASET_OPEN_LAZY 1u
int pt_dataset_open_ex(pt_dataset *ds, const char *path, unsigned flags, char *err,
                       size_t errlen);

/* Checks structures [first, first + count) of a lazily opened dataset:
 * atomic numbers in 1..PT_Z_MAX and the CRC-32s of their atoms and forces.
 * 0 when they are sound (or the dataset was checked whole at open, or is a
 * caller's arrays); -1 with "PATH: structure S: ..." in err. */
int pt_dataset_verify(const pt_dataset *ds, uint32_t first, uint32_t count, char *err,
                      size_t errlen);

/* Gives back this process's mapping of the per-atom data of structures
 * [first, first + count) (whole pages inside that range; the page cache
 * keeps them, a later read maps them again).  For passes over a dataset
 * bigger than memory that should not grow the RSS.  No-op on a caller's
 * arrays. */
void pt_dataset_release(const pt_dataset *ds, uint32_t first, uint32_t count);
/* Unmaps a dataset from pt_dataset_open; harmless on a zeroed struct. */
void pt_dataset_close(pt_dataset *ds);
/* The rule for naming a target (ase_db.h): a key is looked up as written,
 * and when no target has that name, as "data.KEY", the name of an ASE
 * database's data entry, so "energy" finds SchNetPack's data.energy and a
 * target named exactly "energy" wins.  pt_target_alias writes the second
 * name; 0 when there is none (the key starts with "data." or is too long). */
int pt_target_alias(const char *key, char alias[PT_KEY_MAX]);
/* Index of target `key` in ds->target_names by that rule, -1 if absent. */
int pt_dataset_find_target(const pt_dataset *ds, const char *key);
/* Index of per-atom column `key` in ds->atom_col_names by the same rule
 * (as written, else "data.KEY": an ASE database's data entry), -1 if absent. */
int pt_dataset_find_atom_col(const pt_dataset *ds, const char *key);

#endif
