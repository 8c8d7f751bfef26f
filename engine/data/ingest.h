/* ingest.h — turn uploaded structure files into a checked .ptd dataset.
 *
 * pt_ingest_files streams every input (XYZ, extended XYZ or raw QM9, plain
 * or gzip) through the parsers of reader.h, validates each structure, and
 * writes the accepted ones to a .ptd file (dataset_file.h) while collecting a
 * report: counts, atoms-per-structure histogram, element counts and per-key
 * statistics.  Every numeric per-structure key becomes a target column.
 *
 * By default any error rejects the whole input (no output file is created)
 * and errs lists what is wrong; with skip_invalid the invalid structures are
 * left out, counted in the report, and their errors are still listed.  Errors
 * that lose track of where structures start (a non-numeric atom-count line,
 * gzip damage) reject the input in both modes, since the rest of that file
 * could not be counted.
 *
 * Decisions worth knowing (details in xyz_read.c and qm9_read.c):
 *   - format auto-detection is per structure: QM9 when the second line starts
 *     with "gdb ", extended XYZ when it has a '=', plain XYZ otherwise;
 *   - a plain XYZ comment line is free text: nothing is taken from it, not
 *     even a lone number (water_minima's kcal/mol energies stay out);
 *   - raw QM9 Hartree properties are converted to eV (x 27.211386) and named
 *     like ../shared/data (energy_U0, homo, ...); see qm9_read.c for units;
 *   - periodic structures (extended XYZ Lattice + pbc, any combination of
 *     periodic axes, triclinic cells) keep their cell and pbc; stress is a
 *     label of structures periodic along a, b and c (xyz_comment.h);
 *   - when some structures have forces (or stress) and others not, the
 *     missing ones are NaN in the .ptd, like missing targets;
 *   - extended XYZ per-atom columns of type R and width 1 besides the
 *     forces (charges, per-atom energies) are kept by name as per-atom
 *     columns (dataset.h atom_cols), NaN on structures without them;
 *   - an ASE database (.db, recognised by its SQLite header) is read by
 *     ase_db.c: its targets come from calculator columns, key-value pairs and
 *     the data dictionary ("data.KEY"), forces_key/stress_key choose its
 *     forces and stress, and the report gets an "ase_db" entry per database
 *     (schema, units, every candidate label and where it came from). */
#ifndef PT_INGEST_H
#define PT_INGEST_H

#include <jansson.h>
#include <stdint.h>

#include "engine/data/dataset.h"
#include "engine/core/errors.h"
#include "engine/core/progress.h"
#include "engine/data/reader.h"   /* pt_format */

typedef struct pt_ingest_options {
    pt_format format;                  /* PT_FORMAT_AUTO */
    int skip_invalid;                  /* 0: any error rejects the input */
    uint32_t max_atoms;                /* 1000 */
    const char *const *required_keys;  /* numeric keys every structure must have (dataset.h naming rule) */
    int n_required_keys;
    const char *display_name;          /* replaces input paths in errors; NULL = paths */
    const char *forces_key;            /* which per-atom vectors are forces (ase_db.h); NULL: "forces" */
    const char *stress_key;            /* which 3x3 is the stress (ase_db.h); NULL: "stress" */
    /* Progress of phase "ingest" in bytes of the input files read (their
     * sizes the total; compressed bytes for gzip) with the structures seen;
     * called on the ingesting thread.  NULL = none. */
    const pt_progress *progress;
    int read_thread;                   /* pt_read_options.read_thread: 0 by file size */
    /* Limits on what one input may hold (0: none), checked as it streams:
     * text once decompressed, structures seen, atoms of those structures.
     * Passing one stops the ingest with a located error and rep->over_limit
     * naming it; nothing is written. */
    uint64_t max_bytes;
    uint64_t max_structures;
    uint64_t max_total_atoms;
    /* Asked every PT_INGEST_CHECK_EVERY structures (may be NULL): nonzero
     * stops the ingest (rep->stopped), as for a request that is given up. */
    int (*should_stop)(void *user);
    void *user;
} pt_ingest_options;

#define PT_INGEST_CHECK_EVERY 256

void pt_ingest_options_init(pt_ingest_options *o);

typedef struct pt_ingest_key_stats {
    char name[PT_KEY_MAX];
    uint64_t count;        /* accepted structures that have the key */
    double mean, std;      /* std is the population standard deviation */
    double min, max;
    double m2;             /* private: Welford sum of squared deviations */
} pt_ingest_key_stats;

typedef struct pt_ingest_report {
    uint64_t n_seen;                 /* structures found in the inputs */
    uint64_t n_structs;              /* accepted (written when not rejected) */
    uint64_t n_skipped;              /* invalid structures */
    uint64_t n_atoms;                /* atoms of accepted structures */
    uint64_t n_with_forces;          /* accepted structures with a forces column */
    uint64_t n_with_stress;          /* accepted structures with a stress label */
    uint64_t n_by_pbc[PT_PBC_ALL + 1]; /* accepted, by PT_PBC_* bits (0: molecules) */
    uint64_t n_by_format[PT_FORMAT_COUNT];  /* accepted, by parsed format */
    uint32_t min_atoms, max_atoms;   /* over accepted structures */
    uint64_t *atoms_hist;            /* [hist_len]: structures with n atoms */
    uint32_t hist_len;
    uint64_t element_counts[PT_Z_MAX + 1];  /* atoms by Z */
    uint32_t n_keys;
    pt_ingest_key_stats *keys;       /* [n_keys], in .ptd target order */
    uint32_t n_atom_cols;            /* further per-atom columns, in .ptd order (dataset.h) */
    char atom_col_names[PT_ATOM_COLS_MAX][PT_KEY_MAX];
    uint64_t atom_col_structs[PT_ATOM_COLS_MAX];  /* accepted structures that have each */
    int rejected;                    /* 1 when no output was written */
    const char *over_limit;          /* "bytes", "structures" or "atoms" when a limit stopped it */
    int stopped;                     /* should_stop said so */
    int write_failed;                /* writing the output failed (the input may be fine: a full
                                        disk); errs says how */
    uint64_t bytes_read;             /* text read, decompressed (line formats) */
    double parse_seconds;            /* reading + validating + column streaming */
    double write_seconds;            /* assembling the .ptd */
    json_t *ase_db;                  /* one description per ASE database read (ase_db.h) */
    uint32_t keys_cap;               /* private */
} pt_ingest_report;

/* Returns 0 when out_ptd was written, -1 when the input was rejected or an
 * I/O error occurred (errs says why; rep->rejected is 1).  rep is always
 * filled and must be closed. */
int pt_ingest_files(const char *const *inputs, int n_inputs, const char *out_ptd,
                    const pt_ingest_options *opt, pt_ingest_report *rep, pt_errors *errs);
void pt_ingest_report_close(pt_ingest_report *rep);

/* Accepted structures periodic along at least one axis. */
uint64_t pt_ingest_report_periodic(const pt_ingest_report *rep);

/* {"structures","seen","skipped","atoms","structures_with_forces",
 *  "structures_with_stress","periodic":bool,"structures_periodic",
 *  "pbc":{"T T F":n,...},"labels":["energy","forces","stress"] (those present;
 *  energy = a numeric key named "energy"),"formats":{...},"atoms_per_structure":{"min","max","mean","histogram":[[n,count],...]},
 *  "elements":{"H":n,...},"targets":{"key":{"count","mean","std","min","max"},...},
 *  "atom_columns":{"name":{"structures":n},...} (further real per-atom
 *  columns, e.g. partial charges; {} when none),
 *  "parse_seconds","write_seconds", and "ase_db":[...] when databases were
 *  read}; NULL on allocation failure. */
json_t *pt_ingest_report_json(const pt_ingest_report *rep);

#endif
