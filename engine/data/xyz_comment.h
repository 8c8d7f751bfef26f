/* xyz_comment.h — the comment line of extended XYZ, as ASE writes and reads
 * it (xyz_comment.c).
 *
 * One call splits the line the way ASE's key_val_str_to_dict does and takes
 * from it: the per-structure keys (numeric ones become targets), the
 * Properties column layout, the cell (Lattice), the periodic axes (pbc) and
 * the stress label, with ASE's conventions:
 *   Lattice="ax ay az bx by bz cx cy cz"   rows a, b, c of the cell;
 *   pbc="T T F" (or one T/F for all axes); Lattice without pbc means
 *     periodic along all three axes, as in ASE;
 *   stress="9 numbers" in Fortran order (ASE writes the 3x3 that way) or
 *     "xx yy zz yz xz xy" (Voigt), eV/Å³, ASE's sign.
 * and the checks ASE leaves to the user: a periodic axis needs a Lattice, the
 * periodic lattice vectors must be linearly independent, a stress label needs
 * a structure periodic along all three axes (it is per cell volume). */
#ifndef PT_XYZ_COMMENT_H
#define PT_XYZ_COMMENT_H

#include "engine/data/format.h"
#include "engine/data/linereader.h"

#define PT_XYZ_MAX_COLUMNS 64

/* PT_COL_VALUE: a real scalar per atom (type R, width 1) other than the
 * known roles, kept by name (dataset.h: atom_cols); other columns are
 * skipped as ASE's own arrays (tags, masses, ...) are not labels here. */
typedef enum pt_xyz_role {
    PT_COL_SKIP, PT_COL_SPECIES, PT_COL_Z, PT_COL_POS, PT_COL_FORCES, PT_COL_VALUE
} pt_xyz_role;

typedef struct pt_xyz_column {
    pt_xyz_role role;
    int width;
    int value;             /* PT_COL_VALUE: index into value_names */
} pt_xyz_column;

/* The atom-line layout declared by Properties=name:type:width:... */
typedef struct pt_xyz_columns {
    pt_xyz_column cols[PT_XYZ_MAX_COLUMNS];
    int n_cols;
    int total_width;
    int has_forces;
    int n_values;          /* PT_COL_VALUE columns, in order */
    char value_names[PT_ATOM_COLS_MAX][PT_KEY_MAX];
} pt_xyz_columns;

/* Parses the comment line (modified in place) of structure s into s's keys,
 * cell, pbc and stress, and cols (ASE's default "species:S:1:pos:R:3" when
 * there is no Properties).  Returns 0, 1 when the structure is invalid but
 * its atom lines can be read (reported), or -1 when the column layout is
 * unknown, so the atom lines can only be skipped. */
int pt_xyz_comment_parse(pt_reader *r, pt_structure *s, char *comment, pt_xyz_columns *cols);

#endif
