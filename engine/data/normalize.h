/* normalize.h — target normalisation statistics, fitted on the training split.
 *
 * The model predicts  y = std * r + Σ_i (mean + atomref[z_i])  for readout
 * "sum" with per-atom statistics (SchNetPack's divide_by_atoms convention),
 * and  y = std * r + mean  for readout "mean", where r is the network's
 * readout.  So the network learns a quantity of order 1 while loss and
 * metrics stay in target units.
 *
 *   none      mean 0, std 1, no atomref.
 *   mean_std  mean / std of the target per atom (sum readout) or per
 *             structure (mean readout).
 *   atomref   per-element reference values fitted by linear least squares
 *             of the target on the element counts (LAPACK dgelsd from
 *             OpenBLAS, minimum-norm solution when the counts are collinear,
 *             e.g. water clusters where n_H = 2 n_O), then mean / std of the
 *             per-atom residual.  Fitting works for every dataset and every
 *             target key; QM9's published atomrefs exist only for its four
 *             energies and absorb no binding energy, so a fit leaves the
 *             network a smaller, better-conditioned residual.
 * Sample standard deviation (n - 1); a spread below 1e-9 of the targets'
 * magnitude (an exact fit, or one structure) gives std 1 so that the scale
 * never silences the network. */
#ifndef PT_NORMALIZE_H
#define PT_NORMALIZE_H

#include <stdint.h>

#include "engine/data/dataset.h"
#include "engine/core/errors.h"

/* training.normalize of a job (engine/train/config.h names them). */
typedef enum pt_norm_kind {
    PT_NORM_NONE = 0,
    PT_NORM_MEAN_STD,
    PT_NORM_ATOMREF
} pt_norm_kind;

typedef struct pt_norm {
    pt_norm_kind kind;
    int per_atom;                    /* statistics per atom (sum readout) */
    double mean;
    double std;
    double atomref[PT_Z_MAX + 1];    /* per element, 0 where not fitted */
} pt_norm;

/* Identity normalisation (kind none). */
void pt_norm_identity(pt_norm *nm, int per_atom);

/* Fits the statistics of target key `key` over structures ids[0..n).
 * Returns 0, or -1 with errs filled (a structure without the target, no
 * structures, LAPACK failure, out of memory). */
int pt_norm_fit(pt_norm *nm, pt_norm_kind kind, int per_atom, const pt_dataset *ds,
                uint32_t key, const uint32_t *ids, uint32_t n, pt_errors *errs);

/* An atom-level target's statistics: mean / std (sample) of per-atom column
 * `col` (dataset.h atom_cols) over every atom of structures ids[0..n); the
 * model predicts y_i = std * o_i + mean per atom.  Kinds none and mean_std
 * (atomref has no per-element sum to fit).  Returns 0, or -1 with errs
 * filled (an atom without a value, no atoms). */
int pt_norm_fit_atoms(pt_norm *nm, pt_norm_kind kind, const pt_dataset *ds, uint32_t col,
                      const uint32_t *ids, uint32_t n, pt_errors *errs);

/* The part of structure s's prediction that does not come from the network:
 * Σ_i (mean + atomref[z_i]) per atom, or mean per structure. */
double pt_norm_baseline(const pt_norm *nm, const pt_dataset *ds, uint32_t s);

#endif
