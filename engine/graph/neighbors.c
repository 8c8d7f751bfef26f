/* neighbors.c — radius / k-nearest neighbour graphs of molecular structures.
 *
 * Two search paths with one definition (see neighbors.h): an all-pairs loop
 * for small structures and a cell list for large ones.  Both feed the same
 * per-receiver selection (nearest max_neighbors by (d2, sender)), and both
 * compute d2 with the same float expression, so they agree bit for bit; the
 * unit tests hold them to that.
 *
 * Choice: the all-pairs loop for up to PT_NEIGHBOR_CELL_MIN_ATOMS atoms and
 * whenever the structure spans too few cells for the 27-cell walk to skip
 * much (cells_pay_off); the cell list otherwise.  QM9 (<= 29 atoms) and the
 * water clusters (<= 90 atoms, < 3 cells across) take the all-pairs path.
 * Periodic structures are neighbors_pbc.c's. */
#include "engine/graph/neighbors.h"
#include "engine/graph/neighbors_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A candidate sender as one sortable key: the float bits of d2 (>= +0, so
 * their unsigned order is the numeric order) above the sender index, so
 * "nearest, then smaller index" is plain integer order. */
static inline uint64_t cand_key(float d2, uint32_t j)
{
    uint32_t bits;
    memcpy(&bits, &d2, sizeof(bits));
    return ((uint64_t)bits << 32) | j;
}

static inline float cand_d2(uint64_t key)
{
    uint32_t bits = (uint32_t)(key >> 32);
    float d2;
    memcpy(&d2, &bits, sizeof(d2));
    return d2;
}

void pt_neighbor_list_init(pt_neighbor_list *nl)
{
    memset(nl, 0, sizeof(*nl));
}

void pt_neighbor_list_close(pt_neighbor_list *nl)
{
    free(nl->src);
    free(nl->dst);
    free(nl->dist);
    free(nl->cand);
    free(nl->cell_start);
    free(nl->cell_atoms);
    free(nl->atom_cell);
    free(nl->shift);
    free(nl->soa);
    free(nl->within);
    pt_nl_pbc_free(nl->pbc);
    memset(nl, 0, sizeof(*nl));
}

/* Capacity doubling shared by the scratch arrays. */
size_t pt_nl_grown(size_t cap, size_t need)
{
    size_t n = cap ? cap : 64;
    while (n < need) n *= 2;
    return n;
}

static int grow_u32(uint32_t **p, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t n = pt_nl_grown(*cap, need);
    uint32_t *q = realloc(*p, n * sizeof(**p));
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* Grows the parallel edge arrays (shift included, so the periodic search can
 * share them) to hold `need` edges; edge_cap is their common capacity. */
int pt_nl_reserve_edges(pt_neighbor_list *nl, size_t need)
{
    if (need <= nl->edge_cap) return 0;
    size_t n = pt_nl_grown(nl->edge_cap, need);
    uint32_t *s = realloc(nl->src, n * sizeof(uint32_t));
    if (!s) return -1;
    nl->src = s;
    uint32_t *d = realloc(nl->dst, n * sizeof(uint32_t));
    if (!d) return -1;
    nl->dst = d;
    float *w = realloc(nl->dist, n * sizeof(float));
    if (!w) return -1;
    nl->dist = w;
    int16_t *h = realloc(nl->shift, 3 * n * sizeof(int16_t));
    if (!h) return -1;
    nl->shift = h;
    nl->edge_cap = n;
    return 0;
}

/* The one distance expression of both paths.  Subtraction is exact under
 * negation, so d2(i,j) == d2(j,i). */
static inline float pair_d2(const float *pos, uint32_t i, uint32_t j)
{
    float dx = pos[3 * j] - pos[3 * i];
    float dy = pos[3 * j + 1] - pos[3 * i + 1];
    float dz = pos[3 * j + 2] - pos[3 * i + 2];
    return dx * dx + dy * dy + dz * dz;
}

/* Quickselect: afterwards a[0..k) hold the k smallest keys (keys are
 * distinct because sender indices are). */
static void select_smallest(uint64_t *a, uint32_t n, uint32_t k)
{
    int64_t lo = 0, hi = (int64_t)n - 1, want = (int64_t)k - 1;
    while (lo < hi) {
        uint64_t x = a[lo], y = a[(lo + hi) / 2], z = a[hi];
        uint64_t pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot) i++;
            while (a[j] > pivot) j--;
            if (i <= j) {
                uint64_t t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else break;
    }
}

static int key_by_index(const void *a, const void *b)
{
    uint32_t x = (uint32_t)*(const uint64_t *)a, y = (uint32_t)*(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void sort_by_index(uint64_t *a, uint32_t n)
{
    if (n > 48) {
        qsort(a, n, sizeof(*a), key_by_index);
        return;
    }
    for (uint32_t t = 1; t < n; t++) {
        uint64_t v = a[t];
        uint32_t u = t;
        while (u > 0 && (uint32_t)a[u - 1] > (uint32_t)v) {
            a[u] = a[u - 1];
            u--;
        }
        a[u] = v;
    }
}

/* Keeps the k nearest candidates of receiver i and appends them in sender
 * order.  Capacity was reserved by the caller. */
static void emit_receiver(pt_neighbor_list *nl, uint32_t i, uint64_t *c, uint32_t nc,
                          uint32_t k, int sorted_by_index)
{
    if (nc > k) {
        select_smallest(c, nc, k);
        nc = k;
        sorted_by_index = 0;
    }
    if (!sorted_by_index) sort_by_index(c, nc);
    uint32_t e = nl->n_edges;
    for (uint32_t t = 0; t < nc; t++) {
        nl->src[e + t] = (uint32_t)c[t];
        nl->dst[e + t] = i;
        nl->dist[e + t] = sqrtf(cand_d2(c[t]));
    }
    nl->n_edges = e + nc;
}

static void search_brute(pt_neighbor_list *nl, const float *pos, uint32_t n, float r2,
                         uint32_t k)
{
    uint64_t *c = nl->cand;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t nc = 0;
        for (uint32_t j = 0; j < n; j++) {
            /* branch-free: the test is a coin flip in dense clouds */
            float d2 = pair_d2(pos, i, j);
            c[nc] = cand_key(d2, j);
            nc += (uint32_t)((d2 < r2) & (j != i));
        }
        emit_receiver(nl, i, c, nc, k, 1);
    }
}

/* Cell edge h >= cutoff so every pair the float test can accept lies in the
 * same or an adjacent cell: the 1e-5 margin covers the float rounding of
 * d2 (relative error ~1e-7), and h grows for sparse clouds so the cell count
 * stays O(n). */
static void bounding_box(const float *pos, uint32_t n, double lo[3], double hi[3])
{
    for (int a = 0; a < 3; a++) lo[a] = hi[a] = pos[a];
    for (uint32_t i = 1; i < n; i++)
        for (int a = 0; a < 3; a++) {
            double x = pos[3 * i + a];
            if (x < lo[a]) lo[a] = x;
            if (x > hi[a]) hi[a] = x;
        }
}

/* The cell walk visits about prod_a min(3, dims_a) / dims_a of all pairs; it
 * only pays for its binning when that is at most half (measured: at water
 * density and cutoff 6 Å the cell list is 0.7x the all-pairs loop at 256
 * atoms, 1.3x at 768, 2x at 2048). */
static int cells_pay_off(const float *pos, uint32_t n, float cutoff)
{
    if (n <= PT_NEIGHBOR_CELL_MIN_ATOMS) return 0;
    double lo[3], hi[3], visited = 1.0;
    bounding_box(pos, n, lo, hi);
    for (int a = 0; a < 3; a++) {
        double dims = floor((hi[a] - lo[a]) / cutoff) + 1.0;
        visited *= (dims < 3.0 ? dims : 3.0) / dims;
    }
    return visited <= 0.5;
}

static int bin_atoms(pt_neighbor_list *nl, const float *pos, uint32_t n, float cutoff,
                     int dims[3])
{
    double lo[3], hi[3];
    bounding_box(pos, n, lo, hi);
    double h = (double)cutoff * (1.0 + 1e-5);
    double max_ext = 0;
    for (int a = 0; a < 3; a++)
        if (hi[a] - lo[a] > max_ext) max_ext = hi[a] - lo[a];
    if (max_ext / 1024.0 > h) h = max_ext / 1024.0;
    uint64_t limit = 4 * (uint64_t)n + 27;
    for (;;) {
        uint64_t cells = 1;
        for (int a = 0; a < 3; a++) {
            dims[a] = (int)floor((hi[a] - lo[a]) / h) + 1;
            cells *= (uint64_t)dims[a];
        }
        if (cells <= limit) break;
        h *= 1.25;
    }
    size_t n_cells = (size_t)dims[0] * (size_t)dims[1] * (size_t)dims[2];
    if (grow_u32(&nl->cell_start, &nl->cell_cap, n_cells + 1)) return -1;
    size_t acap = nl->atom_cap;
    if (grow_u32(&nl->cell_atoms, &acap, n)) return -1;
    if (grow_u32(&nl->atom_cell, &nl->atom_cap, n)) return -1;

    memset(nl->cell_start, 0, (n_cells + 1) * sizeof(uint32_t));
    for (uint32_t i = 0; i < n; i++) {
        size_t c = 0;
        for (int a = 2; a >= 0; a--) {
            int ci = (int)(((double)pos[3 * i + a] - lo[a]) / h);
            if (ci >= dims[a]) ci = dims[a] - 1;
            if (ci < 0) ci = 0;
            c = c * (size_t)dims[a] + (size_t)ci;
        }
        nl->atom_cell[i] = (uint32_t)c;
        nl->cell_start[c + 1]++;
    }
    for (size_t c = 0; c < n_cells; c++) nl->cell_start[c + 1] += nl->cell_start[c];
    /* stable counting sort: atoms of a cell stay in index order */
    for (uint32_t i = 0; i < n; i++) nl->cell_atoms[nl->cell_start[nl->atom_cell[i]]++] = i;
    for (size_t c = n_cells; c > 0; c--) nl->cell_start[c] = nl->cell_start[c - 1];
    nl->cell_start[0] = 0;
    return 0;
}

/* The cells of the 3×3×3 window around atom i's cell, clipped to the grid:
 * lo[d] ≤ cell coordinate ≤ hi[d].  The search and the count walk the same
 * window; each keeps its own inner loop (one emits keys, one only counts). */
static void cell_window(const pt_neighbor_list *nl, uint32_t i, const int dims[3], int lo[3],
                        int hi[3])
{
    uint32_t c = nl->atom_cell[i];
    int at[3] = {(int)(c % (uint32_t)dims[0]), (int)(c / (uint32_t)dims[0] % (uint32_t)dims[1]),
                 (int)(c / ((uint32_t)dims[0] * (uint32_t)dims[1]))};
    for (int d = 0; d < 3; d++) {
        lo[d] = at[d] > 0 ? at[d] - 1 : 0;
        hi[d] = at[d] + 1 < dims[d] ? at[d] + 1 : dims[d] - 1;
    }
}

static int search_cells(pt_neighbor_list *nl, const float *pos, uint32_t n, float cutoff,
                        float r2, uint32_t k)
{
    int dims[3];
    if (bin_atoms(nl, pos, n, cutoff, dims)) return -1;
    uint64_t *cand = nl->cand;
    for (uint32_t i = 0; i < n; i++) {
        int lo[3], hi[3];
        cell_window(nl, i, dims, lo, hi);
        uint32_t nc = 0;
        for (int z = lo[2]; z <= hi[2]; z++)
            for (int y = lo[1]; y <= hi[1]; y++)
                for (int x = lo[0]; x <= hi[0]; x++) {
                    size_t cell = ((size_t)z * (size_t)dims[1] + (size_t)y) * (size_t)dims[0]
                                  + (size_t)x;
                    for (uint32_t t = nl->cell_start[cell]; t < nl->cell_start[cell + 1]; t++) {
                        uint32_t j = nl->cell_atoms[t];
                        float d2 = pair_d2(pos, i, j);
                        cand[nc] = cand_key(d2, j);
                        nc += (uint32_t)((d2 < r2) & (j != i));
                    }
                }
        emit_receiver(nl, i, cand, nc, k, 0);
    }
    return 0;
}

int pt_neighbor_list_build(pt_neighbor_list *nl, const float *pos, uint32_t n_atoms,
                           const pt_graph_params *p, pt_neighbor_algo algo)
{
    nl->n_edges = 0;
    if (n_atoms < 2) return 0;
    uint32_t k = p->max_neighbors == PT_GRAPH_UNLIMITED ? n_atoms - 1 : (uint32_t)p->max_neighbors;
    if (k > n_atoms - 1) k = n_atoms - 1;
    if (pt_nl_reserve_edges(nl, (size_t)n_atoms * k)) return -1;
    if (n_atoms > nl->cand_cap) {
        size_t n = pt_nl_grown(nl->cand_cap, n_atoms);
        uint64_t *c = realloc(nl->cand, n * sizeof(*c));
        if (!c) return -1;
        nl->cand = c;
        nl->cand_cap = n;
    }
    float r2 = p->cutoff * p->cutoff;
    if (algo == PT_NEIGHBOR_AUTO)
        algo = cells_pay_off(pos, n_atoms, p->cutoff) ? PT_NEIGHBOR_CELLS : PT_NEIGHBOR_BRUTE;
    if (algo == PT_NEIGHBOR_BRUTE) {
        search_brute(nl, pos, n_atoms, r2, k);
        return 0;
    }
    return search_cells(nl, pos, n_atoms, p->cutoff, r2, k);
}

/* ---- counting only ---------------------------------------------------------- */

static int reserve_count(pt_neighbor_list *nl, uint32_t n)
{
    if (n <= nl->count_cap) return 0;
    size_t cap = pt_nl_grown(nl->count_cap, n);
    float *soa = realloc(nl->soa, 3 * cap * sizeof(float));
    if (!soa) return -1;
    nl->soa = soa;
    uint32_t *w = realloc(nl->within, cap * sizeof(uint32_t));
    if (!w) return -1;
    nl->within = w;
    nl->count_cap = cap;
    return 0;
}

/* Every unordered pair once: a pair within the cutoff counts for both of its
 * atoms.  dx is x_j - x_i as in pair_d2; the reverse difference is its exact
 * negation, so the square, and with it the test, is the same bits. */
static void count_brute(pt_neighbor_list *nl, const float *pos, uint32_t n, float r2)
{
    float *restrict x = nl->soa, *restrict y = x + n, *restrict z = y + n;
    uint32_t *restrict within = nl->within;
    for (uint32_t i = 0; i < n; i++) {
        x[i] = pos[3 * i];
        y[i] = pos[3 * i + 1];
        z[i] = pos[3 * i + 2];
        within[i] = 0;
    }
    for (uint32_t i = 0; i + 1 < n; i++) {
        const float xi = x[i], yi = y[i], zi = z[i];
        uint32_t mine = 0;
        for (uint32_t j = i + 1; j < n; j++) {
            float dx = x[j] - xi, dy = y[j] - yi, dz = z[j] - zi;
            float d2 = dx * dx + dy * dy + dz * dz;
            uint32_t in = d2 < r2;
            within[j] += in;
            mine += in;
        }
        within[i] += mine;
    }
}

static int count_cells(pt_neighbor_list *nl, const float *pos, uint32_t n, float cutoff,
                       float r2)
{
    int dims[3];
    if (bin_atoms(nl, pos, n, cutoff, dims)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        int lo[3], hi[3];
        cell_window(nl, i, dims, lo, hi);
        uint32_t nc = 0;
        for (int z = lo[2]; z <= hi[2]; z++)
            for (int y = lo[1]; y <= hi[1]; y++)
                for (int x = lo[0]; x <= hi[0]; x++) {
                    size_t cell = ((size_t)z * (size_t)dims[1] + (size_t)y) * (size_t)dims[0]
                                  + (size_t)x;
                    for (uint32_t t = nl->cell_start[cell]; t < nl->cell_start[cell + 1]; t++) {
                        uint32_t j = nl->cell_atoms[t];
                        nc += (uint32_t)((pair_d2(pos, i, j) < r2) & (j != i));
                    }
                }
        nl->within[i] = nc;
    }
    return 0;
}

int pt_neighbor_list_count(pt_neighbor_list *nl, const float *pos, uint32_t n_atoms,
                           const pt_graph_params *p, pt_neighbor_algo algo, uint64_t *n_edges)
{
    *n_edges = 0;
    if (n_atoms < 2) return 0;
    uint32_t k = p->max_neighbors == PT_GRAPH_UNLIMITED ? n_atoms - 1 : (uint32_t)p->max_neighbors;
    if (reserve_count(nl, n_atoms)) return -1;
    float r2 = p->cutoff * p->cutoff;
    if (algo == PT_NEIGHBOR_AUTO)
        algo = cells_pay_off(pos, n_atoms, p->cutoff) ? PT_NEIGHBOR_CELLS : PT_NEIGHBOR_BRUTE;
    if (algo == PT_NEIGHBOR_BRUTE) count_brute(nl, pos, n_atoms, r2);
    else if (count_cells(nl, pos, n_atoms, p->cutoff, r2)) return -1;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n_atoms; i++) total += nl->within[i] < k ? nl->within[i] : k;
    *n_edges = total;
    return 0;
}
