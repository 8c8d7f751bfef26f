/* test_neighbors_pbc.c — neighbour lists of periodic structures: both search
 * paths against a direct reference written independently here (every pair,
 * every shift in a generous box), on bulk cells, slabs, wires, cells thinner
 * than the cutoff, very skewed triclinic cells and atoms outside their cell;
 * physical invariants (the 1-atom fcc cell's 78 neighbours, a skewed basis of
 * the same lattice giving the same distances); cap tie-breaks with shifts;
 * the limits; and whole-dataset builds mixing molecules and crystals. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/graph/graph.h"
#include "engine/graph/neighbors.h"

/* --- reference ------------------------------------------------------------
 * For every receiver i, sender j and shift S with |S_a| <= box on periodic
 * axes: v = (r_j - r_i) + S·cell in double, kept when sqrt(v·v) < cutoff and
 * (i, j, S) is not the atom itself; then the k nearest by (float distance,
 * j, S), listed by (j, S). */
typedef struct ref_edge {
    uint32_t i, j;
    int s[3];
    float d;
} ref_edge;

typedef struct ref_list {
    size_t n, cap;
    ref_edge *e;
} ref_list;

static int cmp_near(const void *x, const void *y)
{
    const ref_edge *a = x, *b = y;
    if (a->d != b->d) return a->d < b->d ? -1 : 1;
    if (a->j != b->j) return a->j < b->j ? -1 : 1;
    for (int k = 0; k < 3; k++)
        if (a->s[k] != b->s[k]) return a->s[k] < b->s[k] ? -1 : 1;
    return 0;
}

static int cmp_order(const void *x, const void *y)
{
    const ref_edge *a = x, *b = y;
    if (a->j != b->j) return a->j < b->j ? -1 : 1;
    for (int k = 0; k < 3; k++)
        if (a->s[k] != b->s[k]) return a->s[k] < b->s[k] ? -1 : 1;
    return 0;
}

static void ref_build(ref_list *r, const float *pos, uint32_t n, const double *cell, unsigned pbc,
                      float cutoff, uint32_t k, int box)
{
    r->n = 0;
    int lim[3];
    for (int a = 0; a < 3; a++) lim[a] = (pbc >> a) & 1 ? box : 0;
    ref_edge *tmp = NULL;
    size_t tcap = 0;
    for (uint32_t i = 0; i < n; i++) {
        size_t m = 0;
        for (uint32_t j = 0; j < n; j++)
            for (int s0 = -lim[0]; s0 <= lim[0]; s0++)
                for (int s1 = -lim[1]; s1 <= lim[1]; s1++)
                    for (int s2 = -lim[2]; s2 <= lim[2]; s2++) {
                        if (i == j && !s0 && !s1 && !s2) continue;
                        double v[3], d2 = 0;
                        for (int c = 0; c < 3; c++) {
                            v[c] = ((double)pos[3 * j + c] - (double)pos[3 * i + c]) +
                                   (s0 * cell[c] + s1 * cell[3 + c] + s2 * cell[6 + c]);
                        }
                        d2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
                        if (!(sqrt(d2) < (double)cutoff)) continue;
                        if (m == tcap) {
                            tcap = tcap ? 2 * tcap : 256;
                            tmp = realloc(tmp, tcap * sizeof(*tmp));
                        }
                        tmp[m++] = (ref_edge){i, j, {s0, s1, s2}, (float)sqrt(d2)};
                    }
        if (m == 0) continue;   /* a receiver without neighbours */
        if (k && m > k) {
            qsort(tmp, m, sizeof(*tmp), cmp_near);
            m = k;
        }
        qsort(tmp, m, sizeof(*tmp), cmp_order);
        if (r->n + m > r->cap) {
            r->cap = 2 * (r->n + m);
            r->e = realloc(r->e, r->cap * sizeof(*r->e));
        }
        memcpy(r->e + r->n, tmp, m * sizeof(*tmp));
        r->n += m;
    }
    free(tmp);
}

static void assert_same(const pt_neighbor_list *nl, const ref_list *r, const char *what)
{
    if (nl->n_edges != r->n) fail_msg("%s: %u edges, reference %zu", what, nl->n_edges, r->n);
    for (size_t e = 0; e < r->n; e++) {
        const ref_edge *x = &r->e[e];
        int same = nl->dst[e] == x->i && nl->src[e] == x->j && nl->shift[3 * e] == x->s[0] &&
                   nl->shift[3 * e + 1] == x->s[1] && nl->shift[3 * e + 2] == x->s[2] &&
                   nl->dist[e] == x->d;
        if (!same)
            fail_msg("%s: edge %zu is %u<-%u (%d %d %d) %.9g, reference %u<-%u (%d %d %d) %.9g", what, e,
                     nl->dst[e], nl->src[e], nl->shift[3 * e], nl->shift[3 * e + 1], nl->shift[3 * e + 2],
                     (double)nl->dist[e], x->i, x->j, x->s[0], x->s[1], x->s[2], (double)x->d);
    }
}

/* Both paths and the reference, with and without a cap. */
static void check_structure(const float *pos, uint32_t n, const double *cell, unsigned pbc,
                            float cutoff, int box, const char *what)
{
    static const int32_t caps[] = {PT_GRAPH_UNLIMITED, 32, 12, 1};
    ref_list r = {0};
    pt_neighbor_list a, b;
    pt_neighbor_list_init(&a);
    pt_neighbor_list_init(&b);
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        pt_graph_params p = {cutoff, caps[c], PT_GRAPH_RADIUS};
        ref_build(&r, pos, n, cell, pbc, cutoff, (uint32_t)caps[c], box);
        assert_int_equal(pt_neighbor_list_build_pbc(&a, pos, n, cell, pbc, &p, PT_NEIGHBOR_BRUTE), 0);
        assert_int_equal(pt_neighbor_list_build_pbc(&b, pos, n, cell, pbc, &p, PT_NEIGHBOR_CELLS), 0);
        char tag[128];
        snprintf(tag, sizeof tag, "%s, cap %d, all pairs", what, caps[c]);
        assert_same(&a, &r, tag);
        snprintf(tag, sizeof tag, "%s, cap %d, cell list", what, caps[c]);
        assert_same(&b, &r, tag);
        assert_int_equal(pt_neighbor_list_build_pbc(&b, pos, n, cell, pbc, &p, PT_NEIGHBOR_AUTO), 0);
        assert_same(&b, &r, what);
    }
    free(r.e);
    pt_neighbor_list_close(&a);
    pt_neighbor_list_close(&b);
}

static void random_positions(pt_rng *rng, float *pos, uint32_t n, const double *cell, double spread)
{
    for (uint32_t i = 0; i < n; i++) {
        double f[3];
        for (int a = 0; a < 3; a++) f[a] = (pt_rng_uniform(rng) - 0.5) * spread + 0.5;
        for (int c = 0; c < 3; c++)
            pos[3 * i + c] = (float)(f[0] * cell[c] + f[1] * cell[3 + c] + f[2] * cell[6 + c]);
    }
}

/* --- the paths against the reference --------------------------------------- */

static void test_bulk_slab_wire_against_reference(void **state)
{
    (void)state;
    pt_rng rng;
    pt_rng_init(&rng, 5, 0);
    float pos[3 * 40];
    /* a strained triclinic bulk cell, a slab with vacuum, a wire */
    const double bulk[9] = {7.3, 0.2, -0.1, 0.4, 7.0, 0.3, -0.5, 0.2, 7.6};
    random_positions(&rng, pos, 32, bulk, 1.0);
    check_structure(pos, 32, bulk, PT_PBC_ALL, 6.0f, 3, "32-atom triclinic bulk");
    const double slab[9] = {8.1, 0, 0, 4.05, 7.0, 0, 0, 0, 25.0};
    random_positions(&rng, pos, 30, slab, 1.0);
    check_structure(pos, 30, slab, PT_PBC_A | PT_PBC_B, 6.0f, 3, "slab T T F");
    check_structure(pos, 30, slab, PT_PBC_ALL, 6.0f, 3, "slab fully periodic with vacuum");
    const double wire[9] = {0, 0, 0, 0, 0, 0, 0.3, 0.2, 2.9};
    const double box[9] = {6, 0, 0, 0, 6, 0, 0.3, 0.2, 2.9};
    random_positions(&rng, pos, 6, box, 1.0);
    check_structure(pos, 6, wire, PT_PBC_C, 6.0f, 4, "wire F F T");
    const double wire_b[9] = {9, 0, 0, 0.5, 3.1, 0.2, 0, 0, 9};
    random_positions(&rng, pos, 5, wire_b, 1.0);
    check_structure(pos, 5, wire_b, PT_PBC_B, 5.0f, 3, "wire F T F");
}

/* Cells thinner than the cutoff need several image shells; a very skewed
 * basis has plane spacings far below its vector lengths. */
static void test_thin_and_skewed_cells_against_reference(void **state)
{
    (void)state;
    pt_rng rng;
    pt_rng_init(&rng, 9, 0);
    float pos[3 * 8];
    const double tiny[9] = {1.9, 0, 0, 0.3, 2.1, 0, 0.2, -0.4, 1.7};
    random_positions(&rng, pos, 2, tiny, 1.0);
    check_structure(pos, 2, tiny, PT_PBC_ALL, 6.0f, 6, "2-atom cell, 4 shells");
    const double skew[9] = {2.5, 0, 0, 7.5 + 0.1, 2.4, 0, 5.0 - 0.3, 9.6 + 0.2, 2.3};
    random_positions(&rng, pos, 4, skew, 1.0);
    check_structure(pos, 4, skew, PT_PBC_ALL, 5.0f, 30, "skewed triclinic (plane spacing 0.2 Å along a)");
    const double flat[9] = {4.0, 0, 0, 0, 4.0, 0, 0, 0, 0.9};
    random_positions(&rng, pos, 3, flat, 1.0);
    check_structure(pos, 3, flat, PT_PBC_ALL, 4.5f, 7, "plane spacing 0.9 Å");
}

/* Positions far outside the cell (unwrapped trajectories): shifts are
 * relative to the positions as given, as ASE reports them. */
static void test_atoms_outside_the_cell(void **state)
{
    (void)state;
    pt_rng rng;
    pt_rng_init(&rng, 13, 0);
    float pos[3 * 12];
    const double cell[9] = {5.1, 0, 0, 0.7, 4.9, 0, -0.4, 0.6, 5.3};
    random_positions(&rng, pos, 12, cell, 5.0);   /* fractional coordinates in [-2, 3) */
    check_structure(pos, 12, cell, PT_PBC_ALL, 5.0f, 6, "atoms up to 3 cells out");
    const double slab[9] = {6, 0, 0, 0, 6, 0, 0, 0, 0};
    random_positions(&rng, pos, 10, (const double[9]){6, 0, 0, 0, 6, 0, 0, 0, 12}, 4.0);
    check_structure(pos, 10, slab, PT_PBC_A | PT_PBC_B, 5.0f, 5, "slab atoms outside, zero c");
}

/* --- physics ---------------------------------------------------------------- */

/* One atom in the fcc primitive cell (a = 3.61 Å, copper): at 6 Å it sees 78
 * images of itself in five shells (12, 6, 24, 12, 24), every shift S with
 * its -S, no S = 0. */
static void test_fcc_primitive_cell_has_78_neighbours(void **state)
{
    (void)state;
    const double h = 3.61 / 2;
    const double cell[9] = {0, h, h, h, 0, h, h, h, 0};
    const float pos[3] = {0, 0, 0};
    pt_graph_params p = {6.0f, PT_GRAPH_UNLIMITED, PT_GRAPH_RADIUS};
    pt_neighbor_list nl;
    pt_neighbor_list_init(&nl);
    assert_int_equal(pt_neighbor_list_build_pbc(&nl, pos, 1, cell, PT_PBC_ALL, &p, PT_NEIGHBOR_AUTO), 0);
    assert_int_equal(nl.n_edges, 78);
    const double shell[5] = {3.61 / sqrt(2), 3.61, 3.61 * sqrt(1.5), 3.61 * sqrt(2), 3.61 * sqrt(2.5)};
    const int want[5] = {12, 6, 24, 12, 24};
    int got[5] = {0};
    for (uint32_t e = 0; e < nl.n_edges; e++) {
        const int16_t *S = nl.shift + 3 * e;
        assert_false(S[0] == 0 && S[1] == 0 && S[2] == 0);
        int partner = 0;
        for (uint32_t f = 0; f < nl.n_edges; f++)
            partner += nl.shift[3 * f] == -S[0] && nl.shift[3 * f + 1] == -S[1] && nl.shift[3 * f + 2] == -S[2];
        assert_int_equal(partner, 1);
        for (int k = 0; k < 5; k++) got[k] += fabs(nl.dist[e] - shell[k]) < 1e-5;
    }
    for (int k = 0; k < 5; k++) assert_int_equal(got[k], want[k]);
    /* the default cap of 32 cuts inside the third shell */
    p.max_neighbors = 32;
    assert_int_equal(pt_neighbor_list_build_pbc(&nl, pos, 1, cell, PT_PBC_ALL, &p, PT_NEIGHBOR_AUTO), 0);
    assert_int_equal(nl.n_edges, 32);
    pt_neighbor_list_close(&nl);
}

static int cmp_float(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

/* The same crystal in its reduced basis and in a very skewed one (c' = c +
 * 3a - 2b, b' = b + a): the same distances around every atom. */
static void test_skewed_basis_same_crystal(void **state)
{
    (void)state;
    const double red[9] = {3.6, 0, 0, 0, 3.7, 0, 0, 0, 3.8};
    double skew[9];
    for (int c = 0; c < 3; c++) {
        skew[c] = red[c];
        skew[3 + c] = red[3 + c] + red[c];
        skew[6 + c] = red[6 + c] + 3 * red[c] - 2 * red[3 + c];
    }
    const float pos[6] = {0.1f, 0.2f, 0.3f, 1.9f, 1.7f, 2.0f};
    pt_graph_params p = {7.0f, PT_GRAPH_UNLIMITED, PT_GRAPH_RADIUS};
    pt_neighbor_list a, b;
    pt_neighbor_list_init(&a);
    pt_neighbor_list_init(&b);
    assert_int_equal(pt_neighbor_list_build_pbc(&a, pos, 2, red, PT_PBC_ALL, &p, PT_NEIGHBOR_AUTO), 0);
    for (int algo = PT_NEIGHBOR_BRUTE; algo <= PT_NEIGHBOR_CELLS; algo++) {
        assert_int_equal(pt_neighbor_list_build_pbc(&b, pos, 2, skew, PT_PBC_ALL, &p, (pt_neighbor_algo)algo), 0);
        assert_int_equal(a.n_edges, b.n_edges);
        float *da = malloc(a.n_edges * sizeof(float)), *db = malloc(b.n_edges * sizeof(float));
        memcpy(da, a.dist, a.n_edges * sizeof(float));
        memcpy(db, b.dist, b.n_edges * sizeof(float));
        qsort(da, a.n_edges, sizeof(float), cmp_float);
        qsort(db, b.n_edges, sizeof(float), cmp_float);
        for (uint32_t e = 0; e < a.n_edges; e++) assert_true(fabsf(da[e] - db[e]) < 1e-5f);
        free(da);
        free(db);
    }
    pt_neighbor_list_close(&a);
    pt_neighbor_list_close(&b);
}

/* Ties at equal distance are broken by sender, then shift: a simple cubic
 * 1-atom cell capped at 3 keeps the -a, -b, -c images. */
static void test_cap_tie_break_by_shift(void **state)
{
    (void)state;
    const double cell[9] = {3, 0, 0, 0, 3, 0, 0, 0, 3};
    const float pos[3] = {0.5f, 0.5f, 0.5f};
    pt_graph_params p = {3.5f, 3, PT_GRAPH_KNN};
    pt_neighbor_list nl;
    pt_neighbor_list_init(&nl);
    for (int algo = PT_NEIGHBOR_BRUTE; algo <= PT_NEIGHBOR_CELLS; algo++) {
        assert_int_equal(pt_neighbor_list_build_pbc(&nl, pos, 1, cell, PT_PBC_ALL, &p, (pt_neighbor_algo)algo), 0);
        assert_int_equal(nl.n_edges, 3);
        const int16_t want[9] = {-1, 0, 0, 0, -1, 0, 0, 0, -1};
        assert_memory_equal(nl.shift, want, sizeof want);
        for (int e = 0; e < 3; e++) assert_true(nl.dist[e] == 3.0f);
    }
    /* two atoms at equal distance: the smaller sender index wins before shifts */
    const float two[6] = {0, 0, 0, 1.5f, 0, 0};
    p.max_neighbors = 1;
    assert_int_equal(pt_neighbor_list_build_pbc(&nl, two, 2, cell, PT_PBC_ALL, &p, PT_NEIGHBOR_AUTO), 0);
    assert_int_equal(nl.n_edges, 2);
    /* atom 0's nearest: atom 1 at +1.5 and its image at -1.5 (S = -1): S -1 first */
    assert_int_equal(nl.src[0], 1);
    assert_int_equal(nl.shift[0], -1);
    assert_int_equal(nl.src[1], 0);
    assert_int_equal(nl.shift[3], 0);
    pt_neighbor_list_close(&nl);
}

/* --- limits ------------------------------------------------------------------ */

static void test_limits_are_refused_with_a_reason(void **state)
{
    (void)state;
    pt_graph_params p = {6.0f, 32, PT_GRAPH_RADIUS};
    pt_neighbor_list nl;
    pt_neighbor_list_init(&nl);
    const float pos[3] = {0, 0, 0};
    const double thin[9] = {3, 0, 0, 0, 3, 0, 0, 0, 0.004};
    assert_int_equal(pt_neighbor_list_build_pbc(&nl, pos, 1, thin, PT_PBC_ALL, &p, PT_NEIGHBOR_AUTO),
                     PT_NEIGHBOR_ELIMIT);
    assert_string_equal(nl.limit_msg, "the cell is too thin for the cutoff: lattice planes along c are "
                                      "0.004 Å apart, so the cutoff reaches 1500 image shells (at most 999 "
                                      "supported)");
    const float far[3] = {0, 0, 3.0f * 20000};
    const double cube[9] = {3, 0, 0, 0, 3, 0, 0, 0, 3};
    assert_int_equal(pt_neighbor_list_build_pbc(&nl, far, 1, cube, PT_PBC_ALL, &p, PT_NEIGHBOR_AUTO),
                     PT_NEIGHBOR_ELIMIT);
    assert_string_equal(nl.limit_msg, "atom 0 lies 20000 cells outside the cell along c: wrap the "
                                      "positions into the cell");
    /* 0.04 Å planes: 301 shells each way, 27 million images */
    const double dense[9] = {0.04, 0, 0, 0, 0.04, 0, 0, 0, 0.04};
    assert_int_equal(pt_neighbor_list_build_pbc(&nl, pos, 1, dense, PT_PBC_ALL, &p, PT_NEIGHBOR_AUTO),
                     PT_NEIGHBOR_ELIMIT);
    assert_non_null(strstr(nl.limit_msg, "periodic images of the 1 atoms, more than the 16777216 supported"));
    pt_neighbor_list_close(&nl);
}

/* --- whole datasets ----------------------------------------------------------- */

/* Molecules and crystals in one dataset: per structure the same edges as the
 * per-structure searches, shifts zero for molecules, counts equal to
 * pt_graphs_count; a structure beyond the limits names itself and its line. */
static void test_dataset_mixing_molecules_and_crystals(void **state)
{
    (void)state;
    pt_rng rng;
    pt_rng_init(&rng, 21, 0);
    const uint64_t off[5] = {0, 3, 4, 36, 66};
    float pos[3 * 66];
    const double cells[36] = {0, 0, 0, 0, 0, 0, 0, 0, 0,
                              0, 1.8, 1.8, 1.8, 0, 1.8, 1.8, 1.8, 0,
                              7.2, 0, 0, 0.3, 7.1, 0, 0, -0.2, 7.3,
                              8.1, 0, 0, 4.05, 7.0, 0, 0, 0, 20.0};
    const uint8_t pbc[4] = {0, PT_PBC_ALL, PT_PBC_ALL, PT_PBC_A | PT_PBC_B};
    random_positions(&rng, pos, 3, (const double[9]){2, 0, 0, 0, 2, 0, 0, 0, 2}, 1.0);
    pos[9] = pos[10] = pos[11] = 0.0f;
    random_positions(&rng, pos + 12, 32, cells + 18, 1.0);
    random_positions(&rng, pos + 108, 30, cells + 27, 1.0);
    uint8_t z[66];
    memset(z, 29, sizeof z);
    const uint64_t lines[4] = {1, 6, 9, 43};
    pt_dataset ds = {.n_structs = 4, .n_atoms = 66, .atom_offset = off, .z = z, .pos = pos,
                     .source_line = lines, .cell = cells, .pbc = pbc};
    pt_graph_params p = {6.0f, PT_GRAPH_UNLIMITED, PT_GRAPH_RADIUS};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_graphs g;
    assert_int_equal(pt_graphs_build(&g, &ds, &p, &errs), 0);
    assert_non_null(g.shift);
    uint32_t counts[4];
    assert_int_equal(pt_graphs_count(counts, &ds, &p, &errs), 0);
    pt_neighbor_list nl;
    pt_neighbor_list_init(&nl);
    for (uint32_t s = 0; s < 4; s++) {
        assert_int_equal(counts[s], pt_graphs_nedges(&g, s));
        const float *ps = pos + 3 * off[s];
        uint32_t n = (uint32_t)(off[s + 1] - off[s]);
        if (pbc[s]) assert_int_equal(pt_neighbor_list_build_pbc(&nl, ps, n, cells + 9 * s, pbc[s], &p, PT_NEIGHBOR_AUTO), 0);
        else assert_int_equal(pt_neighbor_list_build(&nl, ps, n, &p, PT_NEIGHBOR_AUTO), 0);
        uint64_t e0 = g.edge_offset[s];
        assert_int_equal(nl.n_edges, counts[s]);
        assert_memory_equal(g.src + e0, nl.src, nl.n_edges * sizeof(uint32_t));
        assert_memory_equal(g.dst + e0, nl.dst, nl.n_edges * sizeof(uint32_t));
        assert_memory_equal(g.dist + e0, nl.dist, nl.n_edges * sizeof(float));
        for (uint32_t e = 0; e < nl.n_edges; e++)
            for (int a = 0; a < 3; a++)
                assert_int_equal(g.shift[3 * (e0 + e) + a], pbc[s] ? nl.shift[3 * e + a] : 0);
    }
    assert_int_equal(counts[1], 78);   /* the fcc primitive cell */
    pt_graphs_close(&g);
    pt_neighbor_list_close(&nl);
    /* a thin cell on structure 2 is refused, by index and source line */
    double thin[36];
    memcpy(thin, cells, sizeof thin);
    thin[26] = 0.001;
    ds.cell = thin;
    assert_int_equal(pt_graphs_build(&g, &ds, &p, &errs), -1);
    assert_null(g.edge_offset);
    char buf[512];
    pt_errors_first(&errs, buf, sizeof buf);
    assert_non_null(strstr(buf, "structure: structure 2 (line 9 of the source): the cell is too thin"));
    assert_int_equal(errs.items[0].line, 9);
    pt_errors_close(&errs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bulk_slab_wire_against_reference),
        cmocka_unit_test(test_thin_and_skewed_cells_against_reference),
        cmocka_unit_test(test_atoms_outside_the_cell),
        cmocka_unit_test(test_fcc_primitive_cell_has_78_neighbours),
        cmocka_unit_test(test_skewed_basis_same_crystal),
        cmocka_unit_test(test_cap_tie_break_by_shift),
        cmocka_unit_test(test_limits_are_refused_with_a_reason),
        cmocka_unit_test(test_dataset_mixing_molecules_and_crystals),
    };
    return cmocka_run_group_tests_name("neighbors_pbc", tests, NULL, NULL);
}
