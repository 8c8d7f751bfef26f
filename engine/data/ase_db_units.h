/* ase_db_units.h — the unit strings of SchNetPack's ASE databases.
 *
 * SchNetPack (schnetpack/data/atoms.py, ASEAtomsData) keeps in the database's
 * metadata a "_distance_unit" for positions and cell and a
 * "_property_unit_dict" with one unit per property of the row's data
 * dictionary, e.g. {"energy": "kcal/mol", "forces": "kcal/mol/Ang"}.  A unit
 * string is names of ase.units separated by spaces (multiply) or "/" (divide
 * by the next name only), read left to right as schnetpack/units.py does, so
 * "kcal/mol/Ang" is kcal / mol / Ang.  The factors below are ase.units of ASE
 * 3.22 (CODATA 2014), so a conversion here is bitwise the one SchNetPack makes.
 *
 * packtrain works in ASE's units: Å, eV, eV/Å, eV/Å³.  A parsed unit knows
 * its factor to those units and its dimension (powers of length and energy;
 * anything else, such as a charge or a time, makes it "other"). */
#ifndef PT_ASE_DB_UNITS_H
#define PT_ASE_DB_UNITS_H

#include <stddef.h>

typedef struct pt_ase_unit {
    double factor;       /* one of this unit in Å^length eV^energy */
    int length, energy;  /* powers of Å and eV */
    int other;           /* 1: has another dimension (charge, time, ...) */
    int unitless;        /* 1: null, "" or "arb. unit": nothing to convert */
} pt_ase_unit;

/* Parses a unit string (NULL means no unit).  Returns 0, or -1 with a
 * message in err naming the word packtrain does not know. */
int pt_ase_unit_parse(const char *s, pt_ase_unit *u, char *err, size_t errlen);

/* 1 when u has exactly the given powers of length and energy. */
int pt_ase_unit_is(const pt_ase_unit *u, int length, int energy);

#endif
