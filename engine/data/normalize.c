/* normalize.c — atomref least squares and mean/std of the training targets;
 * see normalize.h. */
#include "engine/data/normalize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* LAPACK's minimum-norm least squares by divide-and-conquer SVD, exported by
 * libopenblas (Debian ships no lapacke.h with OpenBLAS; the Fortran ABI passes
 * every argument by reference, LP64 integers). */
extern void dgelsd_(const int *m, const int *n, const int *nrhs, double *a, const int *lda,
                    double *b, const int *ldb, double *s, const double *rcond, int *rank,
                    double *work, const int *lwork, int *iwork, int *info);

void pt_norm_identity(pt_norm *nm, int per_atom)
{
    memset(nm, 0, sizeof(*nm));
    nm->kind = PT_NORM_NONE;
    nm->per_atom = per_atom;
    nm->std = 1.0;
}

double pt_norm_baseline(const pt_norm *nm, const pt_dataset *ds, uint32_t s)
{
    if (!nm->per_atom) return nm->mean;
    double b = 0.0;
    for (uint64_t a = ds->atom_offset[s]; a < ds->atom_offset[s + 1]; a++)
        b += nm->mean + nm->atomref[ds->z[a]];
    return b;
}

/* Solves min ||A x - y|| for the element-count matrix A (n structures x k
 * elements present) and writes x into atomref[]. */
static int fit_atomref(pt_norm *nm, const pt_dataset *ds, const double *y, const uint32_t *ids,
                       uint32_t n, pt_errors *errs)
{
    int col_of[PT_Z_MAX + 1];
    int k = 0;
    for (int z = 0; z <= PT_Z_MAX; z++) col_of[z] = -1;
    for (uint32_t i = 0; i < n; i++)
        for (uint64_t a = ds->atom_offset[ids[i]]; a < ds->atom_offset[ids[i] + 1]; a++)
            if (col_of[ds->z[a]] < 0) col_of[ds->z[a]] = k++;

    int m = (int)n, nrhs = 1, ldb = m > k ? m : k, rank = 0, info = 0, lwork = -1;
    double rcond = 1e-10, wq = 0.0;
    int iwq = 0;
    double *A = calloc((size_t)m * (size_t)k, sizeof(double));
    double *b = calloc((size_t)ldb, sizeof(double));
    double *sv = calloc((size_t)k, sizeof(double));
    double *work = NULL;
    int *iwork = NULL;
    int rc = -1;
    if (!A || !b || !sv) goto oom;
    for (uint32_t i = 0; i < n; i++) {
        b[i] = y[i];
        for (uint64_t a = ds->atom_offset[ids[i]]; a < ds->atom_offset[ids[i] + 1]; a++)
            A[(size_t)col_of[ds->z[a]] * (size_t)m + i] += 1.0;   /* column-major */
    }
    dgelsd_(&m, &k, &nrhs, A, &m, b, &ldb, sv, &rcond, &rank, &wq, &lwork, &iwq, &info);
    lwork = (int)wq;
    work = malloc((size_t)lwork * sizeof(double));
    iwork = malloc((size_t)(iwq > 1 ? iwq : 1) * sizeof(int));
    if (!work || !iwork) goto oom;
    dgelsd_(&m, &k, &nrhs, A, &m, b, &ldb, sv, &rcond, &rank, work, &lwork, iwork, &info);
    if (info != 0) {
        pt_errors_add(errs, NULL, 0, "training.normalize",
                      "atomref least squares failed (LAPACK dgelsd info %d)", info);
        goto done;
    }
    for (int z = 0; z <= PT_Z_MAX; z++) nm->atomref[z] = col_of[z] >= 0 ? b[col_of[z]] : 0.0;
    rc = 0;
    goto done;
oom:
    pt_errors_add(errs, NULL, 0, "training.normalize", "out of memory fitting atomrefs");
done:
    free(A);
    free(b);
    free(sv);
    free(work);
    free(iwork);
    return rc;
}

int pt_norm_fit(pt_norm *nm, pt_norm_kind kind, int per_atom, const pt_dataset *ds,
                uint32_t key, const uint32_t *ids, uint32_t n, pt_errors *errs)
{
    pt_norm_identity(nm, per_atom);
    nm->kind = kind;
    if (kind == PT_NORM_NONE) return 0;
    if (n == 0) {
        pt_errors_add(errs, NULL, 0, "training.normalize", "no training structures to fit on");
        return -1;
    }
    double *y = malloc((size_t)n * sizeof(double));
    if (!y) {
        pt_errors_add(errs, NULL, 0, "training.normalize", "out of memory");
        return -1;
    }
    const double *col = ds->targets + (size_t)key * ds->n_structs;
    for (uint32_t i = 0; i < n; i++) {
        y[i] = col[ids[i]];
        if (isnan(y[i])) {
            pt_errors_add(errs, NULL, ds->source_line ? (long)ds->source_line[ids[i]] : 0,
                          ds->target_names[key], "structure %u has no value for the target",
                          ids[i]);
            free(y);
            return -1;
        }
    }
    if (kind == PT_NORM_ATOMREF && fit_atomref(nm, ds, y, ids, n, errs) != 0) {
        free(y);
        return -1;
    }
    /* Welford's running mean / variance of the (per-atom) residual */
    double mean = 0.0, m2 = 0.0, scale = 0.0;
    for (uint32_t i = 0; i < n; i++) {
        double r = y[i], div = per_atom ? (double)pt_dataset_natoms(ds, ids[i]) : 1.0;
        scale += fabs(y[i]) / div / (double)n;
        for (uint64_t a = ds->atom_offset[ids[i]]; a < ds->atom_offset[ids[i] + 1]; a++)
            r -= nm->atomref[ds->z[a]];
        r /= div;
        double d = r - mean;
        mean += d / (double)(i + 1);
        m2 += d * (r - mean);
    }
    nm->mean = mean;
    /* a spread at rounding level of the targets (an exact atomref fit) is no
     * spread: dividing by it would only amplify rounding noise */
    double sd = n > 1 ? sqrt(m2 / (double)(n - 1)) : 0.0;
    nm->std = sd > 1e-9 * scale && isfinite(sd) ? sd : 1.0;
    free(y);
    return 0;
}

int pt_norm_fit_atoms(pt_norm *nm, pt_norm_kind kind, const pt_dataset *ds, uint32_t col,
                      const uint32_t *ids, uint32_t n, pt_errors *errs)
{
    pt_norm_identity(nm, 0);
    nm->kind = kind;
    if (kind == PT_NORM_NONE) return 0;
    if (kind == PT_NORM_ATOMREF) {   /* the job validator refuses it; a caller's bug else */
        pt_errors_add(errs, NULL, 0, "training.normalize", "a per-atom column has no per-element "
                      "sum to fit atomrefs on: use mean_std or none");
        return -1;
    }
    const float *v = ds->atom_cols + (size_t)col * ds->n_atoms;
    double mean = 0.0, m2 = 0.0, scale = 0.0;
    uint64_t count = 0;
    for (uint32_t i = 0; i < n; i++)   /* Welford over every atom of the structures */
        for (uint64_t a = ds->atom_offset[ids[i]]; a < ds->atom_offset[ids[i] + 1]; a++) {
            const double x = v[a];
            if (isnan(x)) {
                pt_errors_add(errs, NULL, ds->source_line ? (long)ds->source_line[ids[i]] : 0,
                              ds->atom_col_names[col], "structure %u has no value for the per-atom "
                              "target", ids[i]);
                return -1;
            }
            const double d = x - mean;
            mean += d / (double)++count;
            m2 += d * (x - mean);
            scale += fabs(x);
        }
    if (count == 0) {
        pt_errors_add(errs, NULL, 0, "training.normalize", "no training atoms to fit on");
        return -1;
    }
    scale /= (double)count;
    nm->mean = mean;
    const double sd = count > 1 ? sqrt(m2 / (double)(count - 1)) : 0.0;
    nm->std = sd > 1e-9 * scale && isfinite(sd) ? sd : 1.0;   /* as pt_norm_fit */
    return 0;
}
