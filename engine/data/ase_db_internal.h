/* ase_db_internal.h — what ase_db.c (the file: opening, schema, metadata,
 * key choice, report) and ase_db_rows.c (the rows: survey and structures)
 * share.  Not for use outside engine/data/ase_db*.c. */
#ifndef PT_ASE_DB_INTERNAL_H
#define PT_ASE_DB_INTERNAL_H

#include <sqlite3.h>
#include <stdint.h>

#include "engine/data/ase_db.h"
#include "engine/data/ase_db_codec.h"

/* The systems columns this reader asks for, when the table has them. */
enum ase_col {
    COL_ID, COL_NUMBERS, COL_POSITIONS, COL_CELL, COL_PBC, COL_NATOMS,
    COL_ENERGY, COL_FREE_ENERGY, COL_MAGMOM, COL_FORCES, COL_STRESS, COL_DIPOLE,
    COL_CHARGES, COL_MAGMOMS, COL_KEY_VALUE_PAIRS, COL_DATA, COL_CALCULATOR, COL_CONSTRAINTS,
    N_COLS
};
extern const char *const pt_ase_col_names[N_COLS];

/* Where a value lives in a row. */
enum ase_source { SRC_CALC, SRC_KV, SRC_DATA };

/* What one value can be read as (a value may fit several: with 3 atoms a
 * 3x3 array is both per-atom 3-vectors and a stress). */
enum ase_fit { FIT_SCALAR, FIT_VEC3, FIT_STRESS, FIT_ATOM_SCALAR, N_FIT };

/* What a name is over all rows, decided after the survey. */
enum ase_kind { K_SCALAR, K_VEC3, K_STRESS, K_ATOM_SCALAR, K_MIXED, K_TEXT, K_OTHER };
/* ROLE_ATOM: a per-atom column of the dataset (dataset.h atom_cols). */
enum ase_role { ROLE_NONE, ROLE_TARGET, ROLE_FORCES, ROLE_STRESS, ROLE_ATOM };

typedef struct ase_cand {
    char name[PT_ASE_PATH_MAX];    /* "energy", "my_key", "data.forces" */
    int source;
    uint64_t rows;                 /* rows that have it */
    uint64_t fits[N_FIT];          /* rows where it fits each reading */
    uint64_t text;                 /* rows where it is a string, boolean or null */
    uint64_t int_atom_rows;        /* rows where it fits per atom but holds integers */
    uint64_t first_count;          /* elements of its first array, 0 before one */
    int count_varies;              /* its arrays do not all hold as many elements */
    char example[160];             /* what it was in a row where it fit no reading */
    long example_row;
    int kind, role;
    double factor;                 /* unit conversion applied to its values */
    char unit[48];                 /* unit from SchNetPack metadata, "" if none */
    char note[160];                /* why it is not used, or how it was chosen */
} ase_cand;

typedef struct ase_db {
    sqlite3 *db;
    const char *file;              /* display name */
    const pt_read_options *opt;
    pt_errors *errs;
    int version;
    int has_col[N_COLS];
    uint64_t n_rows;
    ase_cand *cands;
    uint32_t n_cands, cap_cands;
    uint32_t *slots;               /* open addressing over cands, n_slots a power of 2 */
    uint32_t n_slots;
    int forces, stress;            /* candidate index, -1 for none */
    double distance_factor;        /* positions and cell to Å */
    json_t *calculators;           /* {"name": rows} */
    json_t *external_tables;       /* names of ASE's external tables (not read) */
    uint64_t n_constraints;
    int fatal;                     /* the file cannot be read on */
} ase_db;

/* Errors located at a row of the database. */
void pt_ase_row_error(ase_db *a, long row, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Index of `name`, -1 if absent; pt_ase_cand_add returns the index of the
 * existing or new entry (-1 when out of memory). */
int pt_ase_cand_find(const ase_db *a, const char *name);
int pt_ase_cand_add(ase_db *a, const char *name, int source);

/* First pass: which names exist, in how many rows, and what they fit.
 * Sets a->n_rows and every candidate's kind.  0, or -1 (reported). */
int pt_ase_survey(ase_db *a);

/* Second pass: one structure per row, handed to fn.  Returns 0, -1 when
 * reading had to stop (reported), or fn's nonzero value. */
int pt_ase_rows(ase_db *a, pt_structure_fn fn, void *ctx);

/* The fits of a value in a row of n_atoms atoms (bit i = enum ase_fit i). */
unsigned pt_ase_fits(const pt_ase_value *v, uint64_t n_atoms);

#endif
