/* test_neighbors.c — neighbour graphs: brute force and cell list against a
 * direct O(N^2) reference written independently here, on random clouds, ties,
 * duplicates, atoms exactly at the cutoff, single atoms and 1000-atom clouds;
 * whole-dataset builds and their parameter errors. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/graph/graph.h"
#include "engine/graph/neighbors.h"
#include "engine/core/rng.h"

/* --- reference: for each receiver, repeatedly take the nearest unused
 * sender (smaller index first on ties) until k are taken, then list them by
 * index.  Deliberately no sorting library and no shared code. */
typedef struct ref_edges {
    uint32_t n;
    uint32_t *src, *dst;
    float *dist;
} ref_edges;

static float ref_d2(const float *pos, uint32_t i, uint32_t j)
{
    float dx = pos[3 * j] - pos[3 * i];
    float dy = pos[3 * j + 1] - pos[3 * i + 1];
    float dz = pos[3 * j + 2] - pos[3 * i + 2];
    float sx = dx * dx, sy = dy * dy, sz = dz * dz;
    return (sx + sy) + sz;
}

static void ref_build(ref_edges *r, const float *pos, uint32_t n, float cutoff, uint32_t k)
{
    r->src = malloc(((size_t)n * n + 1) * sizeof(uint32_t));
    r->dst = malloc(((size_t)n * n + 1) * sizeof(uint32_t));
    r->dist = malloc(((size_t)n * n + 1) * sizeof(float));
    r->n = 0;
    unsigned char *taken = calloc(n + 1, 1);
    float r2 = cutoff * cutoff;
    for (uint32_t i = 0; i < n; i++) {
        memset(taken, 0, n);
        for (uint32_t t = 0; t < k; t++) {
            uint32_t best = UINT32_MAX;
            float bd = 0;
            for (uint32_t j = 0; j < n; j++) {
                if (j == i || taken[j]) continue;
                float d2 = ref_d2(pos, i, j);
                if (!(d2 < r2)) continue;
                if (best == UINT32_MAX || d2 < bd) {
                    best = j;
                    bd = d2;
                }
            }
            if (best == UINT32_MAX) break;
            taken[best] = 1;
        }
        for (uint32_t j = 0; j < n; j++)
            if (taken[j]) {
                r->src[r->n] = j;
                r->dst[r->n] = i;
                r->dist[r->n] = sqrtf(ref_d2(pos, i, j));
                r->n++;
            }
    }
    free(taken);
}

static void ref_free(ref_edges *r)
{
    free(r->src);
    free(r->dst);
    free(r->dist);
}

static void assert_same_as_ref(const pt_neighbor_list *nl, const ref_edges *r)
{
    assert_int_equal(nl->n_edges, r->n);
    for (uint32_t e = 0; e < r->n; e++) {
        assert_int_equal(nl->src[e], r->src[e]);
        assert_int_equal(nl->dst[e], r->dst[e]);
        assert_memory_equal(&nl->dist[e], &r->dist[e], sizeof(float));
    }
}

/* Runs brute force, cells and auto on one cloud and compares each with the
 * reference; returns the edge count. */
static uint32_t check_cloud(const float *pos, uint32_t n, float cutoff, int32_t k)
{
    pt_graph_params p = {cutoff, k, PT_GRAPH_RADIUS};
    ref_edges r;
    ref_build(&r, pos, n, cutoff, (uint32_t)k);
    pt_neighbor_list nl;
    pt_neighbor_list_init(&nl);
    const pt_neighbor_algo algos[] = {PT_NEIGHBOR_BRUTE, PT_NEIGHBOR_CELLS, PT_NEIGHBOR_AUTO};
    for (int a = 0; a < 3; a++) {
        assert_int_equal(pt_neighbor_list_build(&nl, pos, n, &p, algos[a]), 0);
        assert_same_as_ref(&nl, &r);
    }
    /* counting alone gives the same number on every path */
    for (int a = 0; a < 3; a++) {
        uint64_t counted = UINT64_MAX;
        assert_int_equal(pt_neighbor_list_count(&nl, pos, n, &p, algos[a], &counted), 0);
        assert_int_equal(counted, r.n);
    }
    p.mode = PT_GRAPH_KNN;
    assert_int_equal(pt_neighbor_list_build(&nl, pos, n, &p, PT_NEIGHBOR_AUTO), 0);
    assert_same_as_ref(&nl, &r);
    pt_neighbor_list_close(&nl);
    uint32_t ne = r.n;
    ref_free(&r);
    return ne;
}

static float *random_cloud(pt_rng *rng, uint32_t n, float box)
{
    float *pos = malloc((size_t)n * 3 * sizeof(float) + 1);
    for (uint32_t i = 0; i < 3 * n; i++) pos[i] = (float)(pt_rng_uniform(rng) * box);
    return pos;
}

static void test_random_clouds_all_paths_agree(void **state)
{
    (void)state;
    pt_rng rng;
    pt_rng_init(&rng, 11, 0);
    const uint32_t sizes[] = {2, 3, 7, 29, 64, 65, 150, 400};
    const int32_t caps[] = {1, 5, 32, 100000};
    uint64_t total = 0;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        /* density like liquid water (~0.1 atoms / Å^3) */
        float box = cbrtf((float)sizes[s] / 0.1f);
        float *pos = random_cloud(&rng, sizes[s], box);
        for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++)
            total += check_cloud(pos, sizes[s], 6.0f, caps[c]);
        free(pos);
    }
    assert_true(total > 10000); /* the clouds are not trivially empty */
}

static void test_thousand_atom_cloud(void **state)
{
    (void)state;
    pt_rng rng;
    pt_rng_init(&rng, 12, 0);
    float *pos = random_cloud(&rng, 1000, 22.0f);
    uint32_t ne = check_cloud(pos, 1000, 5.0f, 32);
    assert_true(ne > 1000 * 20);
    assert_true(ne <= 1000 * 32);
    free(pos);
}

/* Integer lattice: many exactly equal distances, and pairs exactly at the
 * cutoff (2.0), which must be excluded. */
static void test_lattice_ties_and_cutoff_boundary(void **state)
{
    (void)state;
    uint32_t n = 0;
    float pos[4 * 4 * 5 * 3];
    for (int x = 0; x < 4; x++)
        for (int y = 0; y < 4; y++)
            for (int z = 0; z < 5; z++) {
                pos[3 * n] = (float)x;
                pos[3 * n + 1] = (float)y;
                pos[3 * n + 2] = (float)z;
                n++;
            }
    for (int32_t k = 1; k <= 20; k += 3) check_cloud(pos, n, 2.0f, k);
    /* interior atom (1,1,1): within d < 2 are 6 at 1, 12 at sqrt2, 8 at sqrt3 */
    pt_graph_params p = {2.0f, 1000, PT_GRAPH_RADIUS};
    pt_neighbor_list nl;
    pt_neighbor_list_init(&nl);
    assert_int_equal(pt_neighbor_list_build(&nl, pos, n, &p, PT_NEIGHBOR_CELLS), 0);
    uint32_t recv = (1 * 4 + 1) * 5 + 1, count = 0;
    for (uint32_t e = 0; e < nl.n_edges; e++) count += nl.dst[e] == recv;
    assert_int_equal(count, 26);
    /* cap 6 keeps exactly the six unit-distance neighbours */
    p.max_neighbors = 6;
    assert_int_equal(pt_neighbor_list_build(&nl, pos, n, &p, PT_NEIGHBOR_BRUTE), 0);
    count = 0;
    for (uint32_t e = 0; e < nl.n_edges; e++)
        if (nl.dst[e] == recv) {
            assert_true(nl.dist[e] == 1.0f);
            count++;
        }
    assert_int_equal(count, 6);
    pt_neighbor_list_close(&nl);
}

static void test_exact_cutoff_pair_is_not_an_edge(void **state)
{
    (void)state;
    float at[6] = {0, 0, 0, 6, 0, 0};
    float inside[6] = {0, 0, 0, nextafterf(6.0f, 0.0f), 0, 0};
    assert_int_equal(check_cloud(at, 2, 6.0f, 32), 0);
    assert_int_equal(check_cloud(inside, 2, 6.0f, 32), 2);
}

static void test_single_atom_and_duplicates(void **state)
{
    (void)state;
    float one[3] = {1, 2, 3};
    assert_int_equal(check_cloud(one, 1, 6.0f, 32), 0);
    /* three atoms on the same spot plus one 1 Å away: duplicates are
     * distinct atoms at distance 0, never self-edges */
    float dup[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0};
    assert_int_equal(check_cloud(dup, 4, 6.0f, 32), 12);
    pt_graph_params p = {6.0f, 32, PT_GRAPH_RADIUS};
    pt_neighbor_list nl;
    pt_neighbor_list_init(&nl);
    assert_int_equal(pt_neighbor_list_build(&nl, dup, 4, &p, PT_NEIGHBOR_AUTO), 0);
    for (uint32_t e = 0; e < nl.n_edges; e++) assert_true(nl.src[e] != nl.dst[e]);
    assert_true(nl.dist[0] == 0.0f);
    pt_neighbor_list_close(&nl);
    /* 80 atoms on 4 spots: the cell path with heavy duplication */
    float many[80 * 3];
    for (int i = 0; i < 80; i++) {
        many[3 * i] = (float)(i % 4) * 3.0f;
        many[3 * i + 1] = 0;
        many[3 * i + 2] = 0;
    }
    check_cloud(many, 80, 6.0f, 32);
}

/* Two clusters a million Å apart: the cell grid must not explode and must
 * still find every pair. */
static void test_sparse_cloud_cells_stay_bounded(void **state)
{
    (void)state;
    pt_rng rng;
    pt_rng_init(&rng, 13, 0);
    float *pos = random_cloud(&rng, 200, 10.0f);
    for (uint32_t i = 100; i < 200; i++) pos[3 * i] += 1.0e6f;
    check_cloud(pos, 200, 4.0f, 16);
    pt_neighbor_list nl;
    pt_neighbor_list_init(&nl);
    pt_graph_params p = {4.0f, 16, PT_GRAPH_RADIUS};
    assert_int_equal(pt_neighbor_list_build(&nl, pos, 200, &p, PT_NEIGHBOR_CELLS), 0);
    assert_true(nl.cell_cap <= 4 * 1024);
    pt_neighbor_list_close(&nl);
    free(pos);
}

/* With a cap the relation is not symmetric: a hub with many close
 * neighbours keeps only its nearest, while each neighbour keeps the hub. */
static void test_cap_is_per_receiver(void **state)
{
    (void)state;
    float pos[6 * 3] = {0, 0, 0, 1, 0, 0, -1.1f, 0, 0, 0, 1.2f, 0, 0, -1.3f, 0, 0, 0, 1.4f};
    pt_graph_params p = {6.0f, 2, PT_GRAPH_RADIUS};
    pt_neighbor_list nl;
    pt_neighbor_list_init(&nl);
    assert_int_equal(pt_neighbor_list_build(&nl, pos, 6, &p, PT_NEIGHBOR_AUTO), 0);
    int hub_has_5 = 0, five_has_hub = 0;
    for (uint32_t e = 0; e < nl.n_edges; e++) {
        if (nl.dst[e] == 0 && nl.src[e] == 5) hub_has_5 = 1;
        if (nl.dst[e] == 5 && nl.src[e] == 0) five_has_hub = 1;
    }
    assert_false(hub_has_5);
    assert_true(five_has_hub);
    pt_neighbor_list_close(&nl);
}

/* --- whole datasets --------------------------------------------------------- */

typedef struct synth {
    pt_dataset ds;
    uint64_t *offset;
    uint8_t *z;
    float *pos;
} synth;

static void synth_make(synth *s, pt_rng *rng, const uint32_t *sizes, uint32_t n_structs)
{
    memset(s, 0, sizeof(*s));
    s->offset = calloc(n_structs + 1, sizeof(uint64_t));
    for (uint32_t i = 0; i < n_structs; i++) s->offset[i + 1] = s->offset[i] + sizes[i];
    uint64_t na = s->offset[n_structs];
    s->z = malloc(na + 1);
    s->pos = malloc((na * 3 + 1) * sizeof(float));
    for (uint64_t a = 0; a < na; a++) {
        s->z[a] = (uint8_t)(1 + a % 8);
        for (int c = 0; c < 3; c++) s->pos[3 * a + c] = (float)(pt_rng_uniform(rng) * 9.0);
    }
    s->ds.n_structs = n_structs;
    s->ds.n_atoms = na;
    s->ds.atom_offset = s->offset;
    s->ds.z = s->z;
    s->ds.pos = s->pos;
}

static void synth_free(synth *s)
{
    free(s->offset);
    free(s->z);
    free(s->pos);
}

static void test_dataset_build_matches_per_structure(void **state)
{
    (void)state;
    pt_rng rng;
    pt_rng_init(&rng, 14, 0);
    const uint32_t sizes[] = {1, 5, 18, 29, 70, 2, 90, 12};
    const uint32_t ns = sizeof(sizes) / sizeof(sizes[0]);
    synth s;
    synth_make(&s, &rng, sizes, ns);
    pt_graph_params p = {5.0f, 12, PT_GRAPH_RADIUS};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_graphs g;
    assert_int_equal(pt_graphs_build(&g, &s.ds, &p, &errs), 0);
    assert_int_equal(g.n_structs, ns);
    uint32_t counts[8];
    assert_int_equal(pt_graphs_count(counts, &s.ds, &p, &errs), 0);
    assert_int_equal(errs.total, 0);
    uint64_t total = 0;
    for (uint32_t t = 0; t < ns; t++) {
        const float *pos = s.pos + 3 * s.offset[t];
        ref_edges r;
        ref_build(&r, pos, sizes[t], p.cutoff, (uint32_t)p.max_neighbors);
        assert_int_equal(pt_graphs_nedges(&g, t), r.n);
        assert_int_equal(counts[t], r.n);
        uint64_t base = g.edge_offset[t];
        for (uint32_t e = 0; e < r.n; e++) {
            assert_int_equal(g.src[base + e], r.src[e]);
            assert_int_equal(g.dst[base + e], r.dst[e]);
            assert_true(g.dist[base + e] == r.dist[e]);
            if (e > 0) /* sorted by receiver, then sender */
                assert_true(g.dst[base + e - 1] < g.dst[base + e] ||
                            (g.dst[base + e - 1] == g.dst[base + e] &&
                             g.src[base + e - 1] < g.src[base + e]));
        }
        total += r.n;
        ref_free(&r);
    }
    assert_int_equal(g.n_edges, total);
    assert_int_equal(g.edge_offset[ns], total);
    pt_graphs_close(&g);
    assert_null(g.src);
    pt_errors_close(&errs);
    synth_free(&s);
}

/* Counting on several threads: the counts of one thread, whatever the
 * number of threads and blocks (more structures than one block), and the
 * progress callback sees the phase end with every structure counted. */
typedef struct progress_log {
    int calls, finals;
    uint64_t last_done, total;
} progress_log;

static void on_progress(void *user, const pt_progress_info *info)
{
    progress_log *l = user;
    l->calls++;
    l->finals += info->final;
    assert_string_equal(info->phase, "count_edges");
    assert_true(info->done >= l->last_done);
    l->last_done = info->done;
    l->total = info->total;
}

static void test_threaded_count_matches_one_thread(void **state)
{
    (void)state;
    pt_rng rng;
    pt_rng_init(&rng, 17, 0);
    const uint32_t ns = 5000;
    uint32_t *sizes = malloc(ns * sizeof(uint32_t));
    for (uint32_t t = 0; t < ns; t++) sizes[t] = 1 + (uint32_t)(pt_rng_uniform(&rng) * 90);
    synth s;
    synth_make(&s, &rng, sizes, ns);
    pt_graph_params p = {5.0f, 12, PT_GRAPH_RADIUS};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    uint32_t *one = malloc(ns * sizeof(uint32_t)), *many = malloc(ns * sizeof(uint32_t));
    assert_int_equal(pt_graphs_count(one, &s.ds, &p, &errs), 0);
    pt_graphs g;
    assert_int_equal(pt_graphs_build(&g, &s.ds, &p, &errs), 0);
    for (uint32_t t = 0; t < ns; t++) assert_int_equal(one[t], pt_graphs_nedges(&g, t));
    pt_graphs_close(&g);
    for (int threads = 2; threads <= 5; threads += 3) {
        progress_log log = {0};
        pt_progress sink = {.fn = on_progress, .user = &log, .every = 1e-9};
        pt_graphs_count_opts o = {.threads = threads, .progress = &sink};
        memset(many, 0xff, ns * sizeof(uint32_t));
        assert_int_equal(pt_graphs_count_ex(many, &s.ds, &p, &o, &errs), 0);
        assert_memory_equal(one, many, ns * sizeof(uint32_t));
        assert_int_equal(log.finals, 1);
        assert_int_equal(log.last_done, ns);
        assert_int_equal(log.total, ns);
    }
    assert_int_equal(errs.total, 0);
    pt_errors_close(&errs);
    free(one);
    free(many);
    free(sizes);
    synth_free(&s);
}

static void test_without_cap_both_directions_present(void **state)
{
    (void)state;
    pt_rng rng;
    pt_rng_init(&rng, 15, 0);
    const uint32_t sizes[] = {40, 100};
    synth s;
    synth_make(&s, &rng, sizes, 2);
    pt_graph_params p = {4.0f, 1000, PT_GRAPH_RADIUS};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_graphs g;
    assert_int_equal(pt_graphs_build(&g, &s.ds, &p, &errs), 0);
    for (uint32_t t = 0; t < 2; t++) {
        uint32_t n = sizes[t];
        unsigned char *adj = calloc((size_t)n * n, 1);
        for (uint64_t e = g.edge_offset[t]; e < g.edge_offset[t + 1]; e++)
            adj[(size_t)g.dst[e] * n + g.src[e]] = 1;
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = 0; j < n; j++) assert_int_equal(adj[i * n + j], adj[j * n + i]);
        free(adj);
    }
    pt_graphs_close(&g);
    pt_errors_close(&errs);
    synth_free(&s);
}

/* max_neighbors unlimited keeps every neighbour: the same lists as a cap of
 * n - 1, on both paths, for a dense cloud where the default cap would cut. */
static void test_unlimited_keeps_every_neighbour(void **state)
{
    (void)state;
    pt_rng rng;
    pt_rng_init(&rng, 23, 0);
    const uint32_t n = 300;
    float *pos = malloc(3 * n * sizeof(float));
    for (uint32_t i = 0; i < 3 * n; i++) pos[i] = (float)(pt_rng_uniform(&rng) * 9.0);
    pt_graph_params all = {6.0f, PT_GRAPH_UNLIMITED, PT_GRAPH_RADIUS};
    pt_graph_params cap = {6.0f, (int32_t)n - 1, PT_GRAPH_RADIUS};
    pt_graph_params def = {6.0f, 32, PT_GRAPH_RADIUS};
    pt_neighbor_list a, b;
    pt_neighbor_list_init(&a);
    pt_neighbor_list_init(&b);
    for (int algo = PT_NEIGHBOR_BRUTE; algo <= PT_NEIGHBOR_CELLS; algo++) {
        assert_int_equal(pt_neighbor_list_build(&a, pos, n, &all, (pt_neighbor_algo)algo), 0);
        assert_int_equal(pt_neighbor_list_build(&b, pos, n, &cap, (pt_neighbor_algo)algo), 0);
        assert_int_equal(a.n_edges, b.n_edges);
        assert_memory_equal(a.src, b.src, a.n_edges * sizeof(uint32_t));
        assert_memory_equal(a.dist, b.dist, a.n_edges * sizeof(float));
        uint32_t unlimited = a.n_edges;
        assert_int_equal(pt_neighbor_list_build(&b, pos, n, &def, (pt_neighbor_algo)algo), 0);
        assert_true(b.n_edges < unlimited);   /* the cap of 32 does cut here */
    }
    pt_neighbor_list_close(&a);
    pt_neighbor_list_close(&b);
    free(pos);
}

static void assert_first_error(pt_errors *errs, const char *expect)
{
    char buf[512];
    pt_errors_first(errs, buf, sizeof(buf));
    assert_string_equal(buf, expect);
}

static void test_invalid_parameters_are_reported(void **state)
{
    (void)state;
    pt_rng rng;
    pt_rng_init(&rng, 16, 0);
    const uint32_t sizes[] = {4};
    synth s;
    synth_make(&s, &rng, sizes, 1);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_graphs g;
    uint32_t counts[1];

    pt_graph_params bad_cut = {0.0f, 32, PT_GRAPH_RADIUS};
    assert_int_equal(pt_graphs_build(&g, &s.ds, &bad_cut, &errs), -1);
    assert_first_error(&errs, "cutoff: must be a finite distance > 0 Å, got 0");
    assert_null(g.edge_offset);
    pt_errors_clear(&errs);

    pt_graph_params nan_cut = {NAN, 32, PT_GRAPH_RADIUS};
    assert_int_equal(pt_graphs_count(counts, &s.ds, &nan_cut, &errs), -1);
    assert_first_error(&errs, "cutoff: must be a finite distance > 0 Å, got nan");
    pt_errors_clear(&errs);

    pt_graph_params bad_k = {6.0f, -1, PT_GRAPH_RADIUS};
    assert_int_equal(pt_graphs_build(&g, &s.ds, &bad_k, &errs), -1);
    assert_first_error(&errs, "max_neighbors: must be >= 1, or unlimited (null), got -1");
    pt_errors_clear(&errs);

    pt_graph_params knn_all = {6.0f, PT_GRAPH_UNLIMITED, PT_GRAPH_KNN};
    assert_int_equal(pt_graphs_build(&g, &s.ds, &knn_all, &errs), -1);
    assert_first_error(&errs, "max_neighbors: the knn mode needs a number of neighbours k >= 1, "
                              "got 0 (unlimited)");
    pt_errors_clear(&errs);

    pt_graph_params bad_mode = {6.0f, 32, (pt_graph_mode)7};
    assert_int_equal(pt_graphs_build(&g, &s.ds, &bad_mode, &errs), -1);
    assert_first_error(&errs, "mode: unknown neighbour mode 7 (radius or knn)");
    pt_errors_clear(&errs);

    pt_graph_params all_bad = {-1.0f, -3, (pt_graph_mode)2};
    assert_int_equal(pt_graph_params_check(&all_bad, &errs), -1);
    assert_int_equal(errs.total, 3);
    pt_errors_close(&errs);
    synth_free(&s);
}

/* A structure whose possible edge count does not fit a uint32 index is
 * rejected up front, by id, before any search runs. */
static void test_structure_too_large_for_edge_index(void **state)
{
    (void)state;
    const uint32_t n = 65537;
    uint64_t offset[3] = {0, 3, 3 + n};
    uint8_t *z = calloc(n + 3, 1);
    float *pos = calloc((size_t)(n + 3) * 3, sizeof(float));
    pt_dataset ds = {0};
    ds.n_structs = 2;
    ds.n_atoms = n + 3;
    ds.atom_offset = offset;
    ds.z = z;
    ds.pos = pos;
    pt_graph_params p = {1.0f, 65536, PT_GRAPH_RADIUS};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_graphs g;
    assert_int_equal(pt_graphs_build(&g, &ds, &p, &errs), -1);
    assert_first_error(&errs, "structure: structure 1 has 65537 atoms: up to 4295032832 "
                              "edges, more than one graph may hold (4294967295)");
    uint32_t counts[2];
    pt_errors_clear(&errs);
    assert_int_equal(pt_graphs_count(counts, &ds, &p, &errs), -1);
    assert_int_equal(errs.total, 1);
    pt_errors_clear(&errs);
    pt_graphs_count_opts o = {.threads = 2};
    assert_int_equal(pt_graphs_count_ex(counts, &ds, &p, &o, &errs), -1);
    assert_first_error(&errs, "structure: structure 1 has 65537 atoms: up to 4295032832 "
                              "edges, more than one graph may hold (4294967295)");
    assert_int_equal(errs.total, 1);
    pt_errors_close(&errs);
    free(z);
    free(pos);
}

/* Two failing structures in different blocks: on any number of threads the
 * error is the first one's, as on one thread. */
static void test_threaded_count_reports_first_failure(void **state)
{
    (void)state;
    const uint32_t ns = 3000, big = 65537, bad[2] = {1500, 2600};
    uint64_t *offset = calloc(ns + 1, sizeof(uint64_t));
    for (uint32_t t = 0; t < ns; t++)
        offset[t + 1] = offset[t] + (t == bad[0] || t == bad[1] ? big : 2);
    uint8_t *z = calloc(offset[ns], 1);
    float *pos = calloc(offset[ns] * 3, sizeof(float));
    pt_dataset ds = {.n_structs = ns, .n_atoms = offset[ns], .atom_offset = offset, .z = z,
                     .pos = pos};
    pt_graph_params p = {1.0f, 65536, PT_GRAPH_RADIUS};
    uint32_t *counts = malloc(ns * sizeof(uint32_t));
    pt_errors errs;
    pt_errors_init(&errs, 0);
    for (int threads = 1; threads <= 3; threads++) {
        pt_graphs_count_opts o = {.threads = threads};
        assert_int_equal(pt_graphs_count_ex(counts, &ds, &p, &o, &errs), -1);
        assert_int_equal(errs.total, 1);
        assert_first_error(&errs, "structure: structure 1500 has 65537 atoms: up to 4295032832 "
                                  "edges, more than one graph may hold (4294967295)");
        pt_errors_clear(&errs);
    }
    pt_errors_close(&errs);
    free(counts);
    free(offset);
    free(z);
    free(pos);
}

static int stop_on_second_ask(void *user)
{
    return ++*(int *)user >= 2;
}

/* A caller that gives up (a request whose client left, server/http/offload.h)
 * stops the count between blocks: -1, "stopped", *stopped set, and the
 * blocks after are not counted. */
static void test_count_stops_when_asked(void **state)
{
    (void)state;
    const uint32_t ns = 5000;
    uint64_t *offset = calloc(ns + 1, sizeof(uint64_t));
    for (uint32_t t = 0; t < ns; t++) offset[t + 1] = offset[t] + 2;
    uint8_t *z = calloc(offset[ns], 1);
    float *pos = calloc(offset[ns] * 3, sizeof(float));
    pt_dataset ds = {.n_structs = ns, .n_atoms = offset[ns], .atom_offset = offset, .z = z, .pos = pos};
    pt_graph_params p = {1.0f, 32, PT_GRAPH_RADIUS};
    uint32_t *counts = malloc(ns * sizeof(uint32_t));
    pt_errors errs;
    pt_errors_init(&errs, 0);
    for (int threads = 1; threads <= 2; threads++) {
        /* on one thread: stop at the second ask (one block counted); on two:
         * at the first, since the other thread may have claimed every block
         * before the caller's first ask */
        int asked = threads == 1 ? 0 : 1, stopped = 0;
        for (uint32_t s = 0; s < ns; s++) counts[s] = 7;
        pt_graphs_count_opts o = {.threads = threads, .should_stop = stop_on_second_ask, .user = &asked,
                                  .stopped = &stopped};
        assert_int_equal(pt_graphs_count_ex(counts, &ds, &p, &o, &errs), -1);
        assert_int_equal(stopped, 1);
        assert_first_error(&errs, "stopped");
        if (threads == 1) assert_int_equal(counts[ns - 1], 7);   /* the last block was never counted */
        pt_errors_clear(&errs);
        /* asked and never stopping: the same counts as without */
        o = (pt_graphs_count_opts){.threads = threads, .should_stop = stop_on_second_ask, .user = &(int){-1000},
                                   .stopped = &stopped};
        assert_int_equal(pt_graphs_count_ex(counts, &ds, &p, &o, &errs), 0);
        assert_int_equal(stopped, 0);
        assert_int_equal(counts[ns - 1], 2);
    }
    pt_errors_close(&errs);
    free(counts);
    free(offset);
    free(z);
    free(pos);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_clouds_all_paths_agree),
        cmocka_unit_test(test_thousand_atom_cloud),
        cmocka_unit_test(test_lattice_ties_and_cutoff_boundary),
        cmocka_unit_test(test_exact_cutoff_pair_is_not_an_edge),
        cmocka_unit_test(test_single_atom_and_duplicates),
        cmocka_unit_test(test_sparse_cloud_cells_stay_bounded),
        cmocka_unit_test(test_cap_is_per_receiver),
        cmocka_unit_test(test_dataset_build_matches_per_structure),
        cmocka_unit_test(test_threaded_count_matches_one_thread),
        cmocka_unit_test(test_without_cap_both_directions_present),
        cmocka_unit_test(test_unlimited_keeps_every_neighbour),
        cmocka_unit_test(test_invalid_parameters_are_reported),
        cmocka_unit_test(test_structure_too_large_for_edge_index),
        cmocka_unit_test(test_threaded_count_reports_first_failure),
        cmocka_unit_test(test_count_stops_when_asked),
    };
    return cmocka_run_group_tests_name("neighbors", tests, NULL, NULL);
}
