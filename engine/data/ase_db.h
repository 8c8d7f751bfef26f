/* ase_db.h — reading ASE's SQLite databases (.db) as structures.
 *
 * An ASE database (ase.db.connect(path).write(atoms, key=value, data={...}))
 * is read with the SQLite C API, read-only, as an immutable snapshot, and
 * decoded by ase_db_codec.c: no Python.  Each row of the systems table
 * becomes one pt_structure, in id order, with s->row (and s->line) set to
 * the row id.
 *
 * Labels live in three places in real databases, and all of them are read:
 *   - calculator columns (a SinglePointCalculator's results): energy,
 *     free_energy, magmom, forces, stress;
 *   - key-value pairs: numbers become per-structure targets by their key;
 *   - the row's data dictionary (SchNetPack keeps energy and forces there),
 *     named "data.KEY" ("data.a.b" when nested).
 * Every per-structure scalar (a number, or an array of one element such as
 * SchNetPack's energy of shape (1,)) becomes a target column under its name,
 * and every real array of one value per atom ((n,) or (n, 1): calculator
 * charges and magmoms, data.energies) a per-atom column (format.h
 * atom_vals), as extended XYZ keeps its R:1 columns; which names qualify is
 * ase_db.c's choose_atom_columns.  The systems table's own per-atom inputs
 * (initial_charges, initial_magmoms, masses, momenta, tags) are not read.
 * One per-atom 3-vector becomes the forces and one 3x3 / Voigt-6 array the
 * stress; which, is chosen by name (forces_key, stress_key) with this rule:
 *
 *   a name is looked up as written ("forces", "atomic_forces", "data.forces");
 *   if nothing has that name, as a data entry ("atomic_forces" finds
 *   "data.atomic_forces").  A calculator column or key-value pair therefore
 *   wins over a data entry of the same name; write "data.NAME" for the data
 *   entry.  (ASE forbids key-value pairs named like calculator columns, so
 *   the two never clash.)
 *
 * Without forces_key, "forces" is used when it resolves to per-atom
 * 3-vectors, else no forces are stored; likewise "stress".  Naming a key that
 * does not exist or does not hold what it should is an error listing the
 * candidates with their sources.  The same rule resolves a training target
 * against the stored names (pt_dataset_find_target).
 *
 * Units: SchNetPack's metadata ("_distance_unit", "_property_unit_dict") is
 * honoured: positions and cell are converted to Å, data entries with an
 * energy unit to eV, forces to eV/Å and stress to eV/Å³ (factors of
 * ase_db_units.h); a unit that cannot be converted is an error when its
 * values are stored.  Without metadata, values are taken as ASE's units.
 * "atomrefs" are reported, not subtracted.
 *
 * Everything found is described in a JSON object (pt_ase_db_read's info):
 * schema version, rows, calculators, metadata, units and conversions, the
 * chosen forces/stress, and every candidate with its source, kind, row count
 * and use. */
#ifndef PT_ASE_DB_H
#define PT_ASE_DB_H

#include <jansson.h>
#include <stdint.h>

#include "engine/core/errors.h"
#include "engine/data/format.h"

/* Schema versions of ase/db/sqlite.py this reader knows.  Older ones need
 * ASE's own converter; newer ones did not exist when it was written. */
#define PT_ASE_DB_VERSION_MIN 5
#define PT_ASE_DB_VERSION_MAX 9

/* What a file's first bytes say. */
typedef enum pt_ase_sniff {
    PT_ASE_SNIFF_ERROR = -1,   /* cannot be read */
    PT_ASE_SNIFF_OTHER = 0,    /* not an SQLite file */
    PT_ASE_SNIFF_SQLITE = 1,   /* starts with "SQLite format 3\0" */
    PT_ASE_SNIFF_GZIP_SQLITE = 2  /* a gzip stream holding an SQLite file */
} pt_ase_sniff;

pt_ase_sniff pt_ase_db_sniff(const char *path);
/* The dispatch table's sniff (reader.c): 1 when a file's first (decompressed)
 * bytes are SQLite's; a gzip'ed database is claimed too, to be refused with
 * a clear message. */
int pt_ase_db_sniff_head(const unsigned char *head, size_t n);

/* Reads every row of `path` (opt: max_atoms, display_name, forces_key,
 * stress_key, info).  Returns 0 when the whole database was read (some rows
 * may have been invalid: valid = 0, errors located by row id), -1 when it
 * could not be read at all (not SQLite, not ASE, unknown schema, damaged
 * file, no rows, a bad forces_key; reported in errs), or fn's nonzero value.
 * When opt->info is a JSON array, the description above is appended to it
 * (also when reading stops, as far as it got). */
int pt_ase_db_read(const char *path, const pt_read_options *opt, pt_structure_fn fn, void *ctx,
                   pt_errors *errs);

#endif
