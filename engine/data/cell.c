/* cell.c — cell geometry (see cell.h). */
#include "engine/data/cell.h"

#include <math.h>
#include <string.h>

const char *pt_pbc_text(unsigned pbc, char out[6])
{
    for (int a = 0; a < 3; a++) {
        out[2 * a] = (pbc >> a) & 1 ? 'T' : 'F';
        out[2 * a + 1] = a < 2 ? ' ' : '\0';
    }
    return out;
}

double pt_cell_det(const double m[9])
{
    return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
           m[2] * (m[3] * m[7] - m[4] * m[6]);
}

static void cross(const double *u, const double *v, double *w)
{
    w[0] = u[1] * v[2] - u[2] * v[1];
    w[1] = u[2] * v[0] - u[0] * v[2];
    w[2] = u[0] * v[1] - u[1] * v[0];
}

static double norm(const double *u) { return sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]); }

int pt_cell_periodic_measure(const double cell[9], unsigned pbc, double *measure, int *singular)
{
    int axes[3], n = 0;
    for (int a = 0; a < 3; a++)
        if (pbc & (1u << a)) axes[n++] = a;
    double scale = 1.0, m = 0.0;
    for (int k = 0; k < n; k++) scale *= norm(cell + 3 * axes[k]);
    if (n == 1) {
        m = norm(cell + 3 * axes[0]);
    } else if (n == 2) {
        double w[3];
        cross(cell + 3 * axes[0], cell + 3 * axes[1], w);
        m = norm(w);
    } else if (n == 3) {
        m = fabs(pt_cell_det(cell));
    }
    *measure = m;
    *singular = n > 0 && !(m > PT_CELL_SINGULAR * scale);
    return n;
}

static void unit(double *u)
{
    double l = norm(u);
    for (int c = 0; c < 3; c++) u[c] /= l;
}

/* A unit vector orthogonal to u (any of them, chosen stably). */
static void orthogonal_to(const double *u, double *w)
{
    double e[3] = {0, 0, 0};
    int k = fabs(u[0]) <= fabs(u[1]) ? (fabs(u[0]) <= fabs(u[2]) ? 0 : 2)
                                     : (fabs(u[1]) <= fabs(u[2]) ? 1 : 2);
    e[k] = 1.0;
    cross(u, e, w);
    unit(w);
}

int pt_cell_frame(const double cell[9], unsigned pbc, double M[9], double inv[9],
                  double spacing[3])
{
    double measure;
    int singular, per[3], non[3], np = 0, nn = 0;
    pt_cell_periodic_measure(cell, pbc, &measure, &singular);
    if (singular || !pbc) return -1;
    for (int a = 0; a < 3; a++) {
        if (pbc & (1u << a)) per[np++] = a;
        else non[nn++] = a;
    }
    memcpy(M, cell, 9 * sizeof(double));
    if (np == 2) {          /* the normal of the periodic plane */
        cross(cell + 3 * per[0], cell + 3 * per[1], M + 3 * non[0]);
        unit(M + 3 * non[0]);
    } else if (np == 1) {   /* two unit vectors orthogonal to the wire and each other */
        double u[3];
        memcpy(u, cell + 3 * per[0], sizeof u);
        unit(u);
        orthogonal_to(u, M + 3 * non[0]);
        cross(u, M + 3 * non[0], M + 3 * non[1]);
        unit(M + 3 * non[1]);
    }
    double det = pt_cell_det(M);
    /* inv = M^-1 via the adjugate */
    inv[0] = (M[4] * M[8] - M[5] * M[7]) / det;
    inv[1] = (M[2] * M[7] - M[1] * M[8]) / det;
    inv[2] = (M[1] * M[5] - M[2] * M[4]) / det;
    inv[3] = (M[5] * M[6] - M[3] * M[8]) / det;
    inv[4] = (M[0] * M[8] - M[2] * M[6]) / det;
    inv[5] = (M[2] * M[3] - M[0] * M[5]) / det;
    inv[6] = (M[3] * M[7] - M[4] * M[6]) / det;
    inv[7] = (M[1] * M[6] - M[0] * M[7]) / det;
    inv[8] = (M[0] * M[4] - M[1] * M[3]) / det;
    for (int a = 0; a < 3; a++) {
        double l = sqrt(inv[a] * inv[a] + inv[3 + a] * inv[3 + a] + inv[6 + a] * inv[6 + a]);
        spacing[a] = 1.0 / l;
    }
    return 0;
}
