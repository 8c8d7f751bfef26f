/* cell.h — the geometry of a periodic cell, in one place for the parsers
 * (is the cell usable?), the neighbour search (fractional coordinates, plane
 * spacings) and batches (volume).
 *
 * A cell is double[9]: the lattice vectors a, b, c as rows (ASE's atoms.cell),
 * in Å.  pbc is a set of PT_PBC_* bits (dataset.h).  Only the periodic
 * vectors matter for a structure: the others may be zero or anything. */
#ifndef PT_CELL_H
#define PT_CELL_H

#include "engine/data/dataset.h"

/* Relative size below which the periodic vectors count as linearly
 * dependent: length, area or volume <= PT_CELL_SINGULAR times the product of
 * their lengths. */
#define PT_CELL_SINGULAR 1e-9

/* pbc bits as ASE writes them, "T T F" (out: 6 bytes). */
const char *pt_pbc_text(unsigned pbc, char out[6]);

/* det(cell) (signed; |det| is the volume in Å³). */
double pt_cell_det(const double cell[9]);

/* The length (one periodic axis), area (two) or volume (three) spanned by
 * the periodic vectors, in Å, Å² or Å³; 0 when pbc is 0.  Sets *singular to
 * 1 when the periodic vectors are linearly dependent (a zero vector
 * included), else 0.  Returns the number of periodic axes. */
int pt_cell_periodic_measure(const double cell[9], unsigned pbc, double *measure, int *singular);

/* The frame of a periodic structure: M has the periodic lattice vectors as
 * its rows and, on the other axes, unit vectors orthogonal to them (and to
 * each other), so M is invertible and the fractional coordinates f = r M^-1
 * of a position along the periodic axes are its lattice coordinates.
 * inv = M^-1 (f_a = sum_c r_c inv[3c + a]); spacing[a] = 1 / |column a of
 * inv|, the distance between neighbouring lattice planes along axis a.
 * Returns 0, or -1 when the periodic vectors are singular. */
int pt_cell_frame(const double cell[9], unsigned pbc, double M[9], double inv[9],
                  double spacing[3]);

#endif
