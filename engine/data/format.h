/* format.h — what every structure-file reader produces: one pt_structure at
 * a time, handed to a callback, with every problem located in a pt_errors
 * list (file, line, field).
 *
 * Readers (xyz_frames.c for the line formats, and any other format behind
 * reader.c's dispatch table) fill a pt_structure, set valid = 0 when they
 * reported a problem with it, and call the pt_structure_fn.  The caller
 * (ingest) decides what to keep.  This header has no dependencies beyond the
 * dataset's limits, so readers of any kind can sit on it. */
#ifndef PT_FORMAT_H
#define PT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/core/errors.h"
#include "engine/data/dataset.h"

#define PT_READER_MAX_KEYS 128         /* key=value pairs kept per structure */

/* Formats by id; reader.c's table gives each its name and reader.
 * PT_FORMAT_COUNT stays last (arrays indexed by format are that long). */
typedef enum pt_format {
    PT_FORMAT_AUTO,
    PT_FORMAT_EXTXYZ,
    PT_FORMAT_XYZ,
    PT_FORMAT_QM9,
    PT_FORMAT_ASE_DB,      /* ASE's SQLite database (ase_db.h) */
    PT_FORMAT_COUNT
} pt_format;

/* One per-structure key of the comment line.  Numeric keys (a single finite
 * number) become training targets; the others (strings, booleans, arrays) are
 * listed with numeric = 0 so callers can tell a key whose kind changes between
 * structures. */
typedef struct pt_key_value {
    char name[PT_KEY_MAX];
    int numeric;
    double value;          /* NaN when !numeric */
} pt_key_value;

typedef struct pt_structure {
    const char *file;      /* display name used in errors */
    long line;             /* line of the atom-count line, 1-based; for a
                            * database, the row id (and row is set) */
    long row;              /* row id in a database file (ASE .db), 0 for text */
    pt_format format;      /* the format this structure was parsed as */
    int valid;             /* 0: errors were reported; arrays are unusable */
    uint32_t n_atoms;
    uint8_t *z;            /* [n_atoms] */
    float *pos;            /* [3 n_atoms], Å */
    float *forces;         /* [3 n_atoms] eV/Å, or NULL when the structure has none */
    int has_cell;          /* 1 when a cell was given (extxyz Lattice) */
    double cell[9];        /* lattice vectors a, b, c as rows, Å (0 without a cell) */
    uint8_t pbc;           /* PT_PBC_* bits of the periodic axes */
    int has_stress;        /* 1 when a stress label was given */
    double stress[9];      /* row-major 3x3, eV/Å³, ASE's sign convention */
    uint32_t n_keys;
    pt_key_value keys[PT_READER_MAX_KEYS];
    /* Further real per-atom columns (dataset.h: atom_cols), by name: column
     * c of atom a at atom_vals[c * n_atoms + a] */
    uint32_t n_atom_cols;
    char atom_col_names[PT_ATOM_COLS_MAX][PT_KEY_MAX];
    float *atom_vals;
    uint64_t input_bytes;  /* bytes of the file read up to here (compressed for
                            * gzip), for progress reports; 0 when unknown */

    /* private: capacity of the arrays above, in atoms */
    uint32_t cap_atoms;
    float *forces_buf;
    uint32_t cap_vals;     /* atoms atom_vals has room for, per column */
    void *xyz_cache;       /* xyz_read.c's last parsed Properties (malloc'ed, flat) */
} pt_structure;

/* Returns 0 to continue, anything else stops reading and is returned. */
typedef int (*pt_structure_fn)(void *ctx, const pt_structure *s);

struct json_t;   /* jansson's, for readers that describe a file */

typedef struct pt_read_options {
    pt_format format;          /* PT_FORMAT_AUTO detects it */
    uint32_t max_atoms;        /* larger structures are invalid */
    const char *display_name;  /* replaces the path in errors; NULL = path */
    /* Which per-atom 3-vectors are the forces and which 3x3 the stress, by
     * name (ase_db.h's rule); NULL: "forces" / "stress".  The text formats
     * have one forces column ("forces" or "force") and refuse other names. */
    const char *forces_key;
    const char *stress_key;
    /* A JSON array, or NULL: readers that find more than structures in a
     * file (an ASE database's schema, units and label candidates) append
     * one object per file to it. */
    struct json_t *info;
    /* Where a text file is decompressed: 0 by its size, 1 on a thread of
     * its own, -1 on the reading thread (linereader.h); the same results. */
    int read_thread;
    /* Text read, once decompressed, over every file read with these options
     * (may be NULL), and the most allowed (0: no limit): past it reading
     * stops with a located error, so a small gzip of a huge text is refused
     * while it streams, not after. */
    uint64_t *bytes_read;
    uint64_t max_bytes;
} pt_read_options;

/* How a parser left a structure. */
typedef enum pt_parse_status {
    PT_PARSE_OK = 0,      /* structure complete and valid */
    PT_PARSE_BAD = 1,     /* structure invalid, reading can go on */
    PT_PARSE_FATAL = -1   /* reading cannot go on */
} pt_parse_status;

/* Resets the per-structure fields of s (not its buffers) before a parse. */
void pt_structure_reset(pt_structure *s, long line, pt_format format);
/* Makes room for n atoms in s (forces too when want_forces). -1 on OOM. */
int pt_structure_reserve(pt_structure *s, uint32_t n, int want_forces);
/* Makes room in atom_vals for n_cols columns of s->n_atoms values. -1 on OOM. */
int pt_structure_reserve_values(pt_structure *s, uint32_t n_cols);
/* Frees the buffers of s (not s itself). */
void pt_structure_free(pt_structure *s);

#endif
