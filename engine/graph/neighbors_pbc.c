/* neighbors_pbc.c — neighbour lists of periodic structures: every image of
 * every atom within the cutoff, with its integer shift (definition in
 * neighbors.h).
 *
 * Positions are first wrapped into the cell along the periodic axes
 * (fractional coordinates f' in [0, 1), the atom moved by w whole cells); an
 * image of atom j shifted by T cells is then the point r'_j + T·cell, and as
 * an edge of r_i it has shift S = T - w_j + w_i.  Distances are never taken
 * from the wrapped points: every candidate is measured with pt_edge_vector on
 * the original positions, so both paths below give bit-identical results and
 * the reverse edge (j <- i, -S) gets exactly the same distance.
 *
 * A receiver in the cell sees senders within the cutoff rc only at
 * fractional coordinates within delta_a = rc / h_a of [0, 1) along periodic
 * axis a (h_a: the spacing of the lattice planes), however skewed the cell:
 * that bounds the images, and covers cells thinner than the cutoff (many
 * shells) with no special case.
 *
 * Two paths: all pairs (for each pair, the shifts T the window allows) for
 * small structures, and a cell list over the images for large ones, O(N). */
#include "engine/graph/neighbors.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/cell.h"
#include "engine/graph/neighbors_internal.h"

/* A candidate sender as two sortable words: hi = float bits of the stored
 * distance (>= +0, so unsigned order is numeric order) above the sender
 * index, lo = the shift, each component biased by 2^15 so unsigned order is
 * signed lexicographic order.  "Nearest, then sender, then shift" is plain
 * (hi, lo) order. */
typedef struct pbc_cand {
    uint64_t hi, lo;
} pbc_cand;

typedef struct pbc_image {
    uint32_t atom;
    int16_t t[3];
} pbc_image;

struct pt_nl_pbc {
    double *wpos;        /* [3n] wrapped Cartesian positions */
    double *frac;        /* [3n] wrapped fractional coordinates */
    int32_t *wrap;       /* [3n] whole cells each atom was moved by */
    size_t atom_cap;
    pbc_cand *cand;      /* candidates of one receiver */
    size_t cand_cap;
    pbc_image *img;      /* sender images (cell path) */
    uint32_t *img_bin;   /* bin of each image */
    uint32_t *bin_img;   /* images sorted by bin */
    size_t img_cap;
    uint32_t *bin_start; /* [n_bins + 1] */
    size_t bin_cap;
};

/* The geometry of one structure's search. */
typedef struct pbc_geom {
    double M[9], inv[9], spacing[3];
    double delta[3];     /* window half-width in fractional units (0: not periodic) */
    double rc, rc2_hi;   /* cutoff; d² above rc2_hi is certainly out */
    double reach;        /* rc with a margin for the binning's rounding */
    unsigned pbc;
    uint32_t k;          /* edges kept per receiver (UINT32_MAX: all) */
} pbc_geom;

void pt_nl_pbc_free(pt_nl_pbc *p)
{
    if (!p) return;
    free(p->wpos);
    free(p->frac);
    free(p->wrap);
    free(p->cand);
    free(p->img);
    free(p->img_bin);
    free(p->bin_img);
    free(p->bin_start);
    free(p);
}

static int grow(void **ptr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t n = pt_nl_grown(*cap, need);
    void *q = realloc(*ptr, n * elem);
    if (!q) return -1;
    *ptr = q;
    *cap = n;
    return 0;
}

static int reserve_atoms(pt_nl_pbc *p, uint32_t n)
{
    if (n <= p->atom_cap) return 0;
    size_t cap = pt_nl_grown(p->atom_cap, n);
    double *a = realloc(p->wpos, 3 * cap * sizeof(double));
    if (!a) return -1;
    p->wpos = a;
    double *f = realloc(p->frac, 3 * cap * sizeof(double));
    if (!f) return -1;
    p->frac = f;
    int32_t *w = realloc(p->wrap, 3 * cap * sizeof(int32_t));
    if (!w) return -1;
    p->wrap = w;
    p->atom_cap = cap;
    return 0;
}

static int limit(pt_neighbor_list *nl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int limit(pt_neighbor_list *nl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(nl->limit_msg, sizeof nl->limit_msg, fmt, ap);
    va_end(ap);
    return PT_NEIGHBOR_ELIMIT;
}

static const char axis_name[3] = {'a', 'b', 'c'};

/* Frame, window and wrapping; PT_NEIGHBOR_ELIMIT beyond the limits. */
static int setup(pt_neighbor_list *nl, pbc_geom *g, const float *pos, uint32_t n,
                 const double cell[9], unsigned pbc, const pt_graph_params *prm)
{
    pt_nl_pbc *p = nl->pbc;
    g->pbc = pbc;
    g->rc = (double)prm->cutoff;
    g->rc2_hi = g->rc * g->rc * (1.0 + 1e-12);
    g->reach = g->rc * (1.0 + 1e-6);
    g->k = prm->max_neighbors == PT_GRAPH_UNLIMITED ? UINT32_MAX : (uint32_t)prm->max_neighbors;
    if (pt_cell_frame(cell, pbc, g->M, g->inv, g->spacing))
        return limit(nl, "the cell is singular along its periodic axes");
    for (int a = 0; a < 3; a++) {
        g->delta[a] = (pbc >> a) & 1 ? g->reach / g->spacing[a] : 0.0;
        if (ceil(g->delta[a]) + 1 > PT_NEIGHBOR_MAX_SHELLS)
            return limit(nl, "the cell is too thin for the cutoff: lattice planes along %c are %.3g Å "
                             "apart, so the cutoff reaches %.0f image shells (at most 999 supported)",
                         axis_name[a], g->spacing[a], ceil(g->rc / g->spacing[a]));
    }
    if (reserve_atoms(p, n)) return PT_NEIGHBOR_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        double r[3] = {pos[3 * i], pos[3 * i + 1], pos[3 * i + 2]};
        for (int a = 0; a < 3; a++) {
            double f = r[0] * g->inv[a] + r[1] * g->inv[3 + a] + r[2] * g->inv[6 + a];
            double w = 0.0;
            if ((pbc >> a) & 1) {
                w = floor(f);
                if (fabs(w) > PT_NEIGHBOR_MAX_WRAP)
                    return limit(nl, "atom %u lies %.0f cells outside the cell along %c: wrap the "
                                     "positions into the cell", i, fabs(w), axis_name[a]);
                f -= w;
                if (f >= 1.0) {   /* -1e-17 wraps to 1 - 1e-17, which may round to 1 */
                    f -= 1.0;
                    w += 1.0;
                }
            }
            p->frac[3 * i + a] = f;
            p->wrap[3 * i + a] = (int32_t)w;
        }
        for (int c = 0; c < 3; c++) {
            double x = r[c];
            for (int a = 0; a < 3; a++) x -= p->wrap[3 * i + a] * g->M[3 * a + c];
            p->wpos[3 * i + c] = x;
        }
    }
    return PT_NEIGHBOR_OK;
}

/* Appends candidate (j, S) of receiver i when within the cutoff. */
static inline int try_pair(pt_nl_pbc *p, size_t *nc, const float *pos, const double cell[9],
                           const pbc_geom *g, uint32_t i, uint32_t j, const int32_t S32[3])
{
    if (j == i && !S32[0] && !S32[1] && !S32[2]) return 0;
    int16_t S[3] = {(int16_t)S32[0], (int16_t)S32[1], (int16_t)S32[2]};
    double v[3];
    pt_edge_vector(pos + 3 * j, pos + 3 * i, cell, S, v);
    double d2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
    if (d2 > g->rc2_hi) return 0;
    double d = sqrt(d2);
    if (!(d < g->rc)) return 0;   /* ASE's test */
    if (*nc == p->cand_cap && grow((void **)&p->cand, &p->cand_cap, *nc + 1, sizeof(pbc_cand)))
        return -1;
    float df = (float)d;
    uint32_t bits;
    memcpy(&bits, &df, sizeof bits);
    p->cand[*nc].hi = ((uint64_t)bits << 32) | j;
    p->cand[*nc].lo = ((uint64_t)(uint16_t)(S[0] + 32768) << 32) |
                      ((uint64_t)(uint16_t)(S[1] + 32768) << 16) | (uint16_t)(S[2] + 32768);
    (*nc)++;
    return 0;
}

static inline int nearer(const pbc_cand *a, const pbc_cand *b)
{
    return a->hi < b->hi || (a->hi == b->hi && a->lo < b->lo);
}

static inline int before_by_sender(const pbc_cand *a, const pbc_cand *b)
{
    uint32_t ja = (uint32_t)a->hi, jb = (uint32_t)b->hi;
    return ja < jb || (ja == jb && a->lo < b->lo);
}

/* Quickselect: afterwards a[0..k) hold the k nearest (keys are distinct:
 * no two candidates share sender and shift). */
static void select_nearest(pbc_cand *a, size_t n, size_t k)
{
    int64_t lo = 0, hi = (int64_t)n - 1, want = (int64_t)k - 1;
    while (lo < hi) {
        pbc_cand pivot = a[(lo + hi) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (nearer(&a[i], &pivot)) i++;
            while (nearer(&pivot, &a[j])) j--;
            if (i <= j) {
                pbc_cand t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else break;
    }
}

static int by_sender(const void *x, const void *y)
{
    const pbc_cand *a = x, *b = y;
    return before_by_sender(a, b) ? -1 : before_by_sender(b, a);
}

static void sort_by_sender(pbc_cand *c, size_t n)
{
    if (n > 48) {
        qsort(c, n, sizeof(*c), by_sender);
        return;
    }
    for (size_t t = 1; t < n; t++) {
        pbc_cand v = c[t];
        size_t u = t;
        while (u > 0 && before_by_sender(&v, &c[u - 1])) {
            c[u] = c[u - 1];
            u--;
        }
        c[u] = v;
    }
}

/* Keeps the k nearest candidates of receiver i, appends them by sender and
 * shift (the all-pairs path finds them in that order already: sorted). */
static int emit(pt_neighbor_list *nl, const pbc_geom *g, uint32_t i, size_t nc, int sorted)
{
    pbc_cand *c = nl->pbc->cand;
    if (nc == 0) return PT_NEIGHBOR_OK;   /* an isolated receiver (c may be unallocated) */
    if (nc > g->k) {
        select_nearest(c, nc, g->k);
        nc = g->k;
        sorted = 0;
    }
    if (!sorted) sort_by_sender(c, nc);
    size_t e = nl->n_edges;
    if (e + nc > UINT32_MAX) {
        snprintf(nl->limit_msg, sizeof nl->limit_msg,
                 "more than 4294967295 edges in one structure (lower max_neighbors or the cutoff)");
        return PT_NEIGHBOR_ELIMIT;
    }
    if (pt_nl_reserve_edges(nl, e + nc)) return PT_NEIGHBOR_ENOMEM;
    for (size_t t = 0; t < nc; t++) {
        uint32_t bits = (uint32_t)(c[t].hi >> 32);
        memcpy(&nl->dist[e + t], &bits, sizeof(float));
        nl->src[e + t] = (uint32_t)c[t].hi;
        nl->dst[e + t] = i;
        for (int a = 0; a < 3; a++)
            nl->shift[3 * (e + t) + a] = (int16_t)((int)((c[t].lo >> (32 - 16 * a)) & 0xffff) - 32768);
    }
    nl->n_edges = (uint32_t)(e + nc);
    return PT_NEIGHBOR_OK;
}

/* The shifts T along axis a that bring fractional coordinate x within the
 * window [lo - delta, hi + delta]: [*t0, *t1] (0, 0 on non-periodic axes). */
static void t_range(const pbc_geom *g, int a, double x, double lo, double hi, int32_t *t0,
                    int32_t *t1)
{
    if (!((g->pbc >> a) & 1)) {
        *t0 = *t1 = 0;
        return;
    }
    *t0 = (int32_t)ceil(lo - g->delta[a] - x);
    *t1 = (int32_t)floor(hi + g->delta[a] - x);
}

static int search_brute(pt_neighbor_list *nl, const pbc_geom *g, const float *pos, uint32_t n,
                        const double cell[9])
{
    pt_nl_pbc *p = nl->pbc;
    for (uint32_t i = 0; i < n; i++) {
        const double *fi = p->frac + 3 * i;
        const int32_t *wi = p->wrap + 3 * i;
        size_t nc = 0;
        for (uint32_t j = 0; j < n; j++) {
            const double *fj = p->frac + 3 * j;
            const int32_t *wj = p->wrap + 3 * j;
            int32_t lo[3], hi[3], T[3], S[3];
            for (int a = 0; a < 3; a++) t_range(g, a, fj[a], fi[a], fi[a], &lo[a], &hi[a]);
            for (T[0] = lo[0]; T[0] <= hi[0]; T[0]++)
                for (T[1] = lo[1]; T[1] <= hi[1]; T[1]++)
                    for (T[2] = lo[2]; T[2] <= hi[2]; T[2]++) {
                        for (int a = 0; a < 3; a++) S[a] = T[a] - wj[a] + wi[a];
                        if (try_pair(p, &nc, pos, cell, g, i, j, S)) return PT_NEIGHBOR_ENOMEM;
                    }
        }
        int rc = emit(nl, g, i, nc, 1);
        if (rc) return rc;
    }
    return PT_NEIGHBOR_OK;
}

static void image_point(const pt_nl_pbc *p, const pbc_geom *g, const pbc_image *im, double x[3])
{
    for (int c = 0; c < 3; c++)
        x[c] = p->wpos[3 * im->atom + c] + im->t[0] * g->M[c] + im->t[1] * g->M[3 + c] +
               im->t[2] * g->M[6 + c];
}

/* Every sender image whose fractional coordinates lie in the window
 * [-delta, 1 + delta] along the periodic axes. */
static int make_images(pt_neighbor_list *nl, const pbc_geom *g, uint32_t n, size_t *n_img)
{
    pt_nl_pbc *p = nl->pbc;
    uint64_t total = 0;
    int32_t lo[3], hi[3];
    for (uint32_t j = 0; j < n; j++) {
        uint64_t per = 1;
        for (int a = 0; a < 3; a++) {
            t_range(g, a, p->frac[3 * j + a], 0.0, 1.0, &lo[a], &hi[a]);
            per *= (uint64_t)(hi[a] - lo[a] + 1);
        }
        total += per;
    }
    if (total > PT_NEIGHBOR_MAX_IMAGES)
        return limit(nl, "the cutoff reaches %llu periodic images of the %u atoms, more than the "
                         "%u supported (the cell is thin for the cutoff)",
                     (unsigned long long)total, n, PT_NEIGHBOR_MAX_IMAGES);
    size_t cap = p->img_cap, cap2 = p->img_cap, cap3 = p->img_cap;
    if (grow((void **)&p->img, &cap, total, sizeof(pbc_image)) ||
        grow((void **)&p->img_bin, &cap2, total, sizeof(uint32_t)) ||
        grow((void **)&p->bin_img, &cap3, total, sizeof(uint32_t)))
        return PT_NEIGHBOR_ENOMEM;
    p->img_cap = cap;
    size_t m = 0;
    for (uint32_t j = 0; j < n; j++) {
        for (int a = 0; a < 3; a++) t_range(g, a, p->frac[3 * j + a], 0.0, 1.0, &lo[a], &hi[a]);
        for (int32_t t0 = lo[0]; t0 <= hi[0]; t0++)
            for (int32_t t1 = lo[1]; t1 <= hi[1]; t1++)
                for (int32_t t2 = lo[2]; t2 <= hi[2]; t2++)
                    p->img[m++] = (pbc_image){j, {(int16_t)t0, (int16_t)t1, (int16_t)t2}};
    }
    *n_img = m;
    return PT_NEIGHBOR_OK;
}

typedef struct bins {
    double lo[3], h;
    int dims[3];
} bins;

static size_t bin_of(const bins *b, const double x[3], int cell3[3])
{
    size_t c = 0;
    for (int a = 2; a >= 0; a--) {
        int ci = (int)((x[a] - b->lo[a]) / b->h);
        if (ci >= b->dims[a]) ci = b->dims[a] - 1;
        if (ci < 0) ci = 0;
        cell3[a] = ci;
        c = c * (size_t)b->dims[a] + (size_t)ci;
    }
    return c;
}

/* Cartesian bins of edge >= reach over the images, at most 4 per image. */
static int bin_images(pt_nl_pbc *p, const pbc_geom *g, size_t n_img, bins *b)
{
    double hi[3] = {0, 0, 0};
    for (int a = 0; a < 3; a++) b->lo[a] = 0.0;
    for (size_t k = 0; k < n_img; k++) {
        double x[3];
        image_point(p, g, &p->img[k], x);
        for (int a = 0; a < 3; a++) {
            if (k == 0 || x[a] < b->lo[a]) b->lo[a] = x[a];
            if (k == 0 || x[a] > hi[a]) hi[a] = x[a];
        }
    }
    b->h = g->reach;
    uint64_t max_bins = 4 * (uint64_t)n_img + 27;
    for (;;) {
        uint64_t cells = 1;
        for (int a = 0; a < 3; a++) {
            b->dims[a] = (int)floor((hi[a] - b->lo[a]) / b->h) + 1;
            cells *= (uint64_t)b->dims[a];
        }
        if (cells <= max_bins) break;
        b->h *= 1.25;
    }
    size_t n_bins = (size_t)b->dims[0] * (size_t)b->dims[1] * (size_t)b->dims[2];
    if (grow((void **)&p->bin_start, &p->bin_cap, n_bins + 1, sizeof(uint32_t))) return -1;
    memset(p->bin_start, 0, (n_bins + 1) * sizeof(uint32_t));
    for (size_t k = 0; k < n_img; k++) {
        double x[3];
        int c3[3];
        image_point(p, g, &p->img[k], x);
        p->img_bin[k] = (uint32_t)bin_of(b, x, c3);
        p->bin_start[p->img_bin[k] + 1]++;
    }
    for (size_t c = 0; c < n_bins; c++) p->bin_start[c + 1] += p->bin_start[c];
    for (size_t k = 0; k < n_img; k++) p->bin_img[p->bin_start[p->img_bin[k]]++] = (uint32_t)k;
    for (size_t c = n_bins; c > 0; c--) p->bin_start[c] = p->bin_start[c - 1];
    p->bin_start[0] = 0;
    return 0;
}

static int search_cells(pt_neighbor_list *nl, const pbc_geom *g, const float *pos, uint32_t n,
                        const double cell[9])
{
    pt_nl_pbc *p = nl->pbc;
    size_t n_img = 0;
    int rc = make_images(nl, g, n, &n_img);
    if (rc) return rc;
    bins b;
    if (bin_images(p, g, n_img, &b)) return PT_NEIGHBOR_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        const int32_t *wi = p->wrap + 3 * i;
        int c3[3];
        bin_of(&b, p->wpos + 3 * i, c3);
        size_t nc = 0;
        for (int z = c3[2] > 0 ? c3[2] - 1 : 0; z <= c3[2] + 1 && z < b.dims[2]; z++)
            for (int y = c3[1] > 0 ? c3[1] - 1 : 0; y <= c3[1] + 1 && y < b.dims[1]; y++)
                for (int x = c3[0] > 0 ? c3[0] - 1 : 0; x <= c3[0] + 1 && x < b.dims[0]; x++) {
                    size_t bin = ((size_t)z * (size_t)b.dims[1] + (size_t)y) * (size_t)b.dims[0] + (size_t)x;
                    for (uint32_t t = p->bin_start[bin]; t < p->bin_start[bin + 1]; t++) {
                        const pbc_image *im = &p->img[p->bin_img[t]];
                        const int32_t *wj = p->wrap + 3 * im->atom;
                        int32_t S[3];
                        for (int a = 0; a < 3; a++) S[a] = im->t[a] - wj[a] + wi[a];
                        if (try_pair(p, &nc, pos, cell, g, i, im->atom, S)) return PT_NEIGHBOR_ENOMEM;
                    }
                }
        rc = emit(nl, g, i, nc, 0);
        if (rc) return rc;
    }
    return PT_NEIGHBOR_OK;
}

/* Candidates per receiver of the all-pairs path (atoms x window shifts):
 * above this many the cell list is faster.  Measured on fcc bulk cells and
 * slabs of 4 to 2048 atoms and on emt_20k at 6 Å: all pairs takes 0.4-0.8x
 * the cell list's time below ~4000 candidates, the cell list 0.5-0.7x all
 * pairs' above. */
#define BRUTE_MAX_CANDIDATES 4000.0

int pt_neighbor_list_build_pbc(pt_neighbor_list *nl, const float *pos, uint32_t n_atoms,
                               const double cell[9], unsigned pbc, const pt_graph_params *prm,
                               pt_neighbor_algo algo)
{
    nl->n_edges = 0;
    nl->limit_msg[0] = '\0';
    if (!nl->pbc && !(nl->pbc = calloc(1, sizeof(*nl->pbc)))) return PT_NEIGHBOR_ENOMEM;
    pbc_geom g;
    int rc = setup(nl, &g, pos, n_atoms, cell, pbc, prm);
    if (rc) return rc;
    if (algo == PT_NEIGHBOR_AUTO) {
        double per_receiver = n_atoms;
        for (int a = 0; a < 3; a++) per_receiver *= 2.0 * g.delta[a] + 1.0;
        algo = per_receiver <= BRUTE_MAX_CANDIDATES ? PT_NEIGHBOR_BRUTE : PT_NEIGHBOR_CELLS;
    }
    return algo == PT_NEIGHBOR_BRUTE ? search_brute(nl, &g, pos, n_atoms, cell)
                                     : search_cells(nl, &g, pos, n_atoms, cell);
}
