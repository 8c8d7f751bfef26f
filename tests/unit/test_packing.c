/* test_packing.c — packing plans and epoch draws: invariants for every
 * method (each id once per epoch, no pack over its limits, determinism),
 * hand-checked LPFHP / tuple / baseline examples, and the efficiency targets
 * on the shared QM9 and water datasets (snapshot of their graph sizes in
 * tests/data, checked against ../shared/data when present).  The error
 * messages are tested in test_packing_errors.c. */
#include "tests/unit/pack_test_util.h"

#include <math.h>
#include <unistd.h>

#include "engine/graph/graph.h"
#include "engine/data/ingest.h"

/* --- invariants ----------------------------------------------------------------- */

static void test_every_method_every_id_once_within_limits(void **state)
{
    (void)state;
    sizes s;
    random_sizes(&s, 700, 1);
    /* a subset, as a training split is: every other id, shuffled */
    uint32_t n_ids = 0, ids[350];
    for (uint32_t i = 0; i < 700; i += 2) ids[n_ids++] = i;
    pt_rng rng;
    pt_rng_init(&rng, 5, 0);
    pt_rng_shuffle_u32(&rng, ids, n_ids);
    for (int m = PT_PACK_LPFHP; m <= PT_PACK_DYNAMIC; m++)
        for (int graphs_cap = 0; graphs_cap < 2; graphs_cap++) {
            pt_pack_request req = {.method = (pt_pack_method)m, .batch_size = 8};
            if (graphs_cap && (m == PT_PACK_LPFHP || m == PT_PACK_TUPLE)) {
                req.max_graphs = 2;
                req.target_efficiency = 0.5; /* two graphs per pack cannot do 95% here */
            }
            pt_errors errs;
            pt_errors_init(&errs, 0);
            pt_packer pk;
            int rc = pt_packer_init(&pk, &req, s.natoms, s.nedges, s.n, ids, n_ids, &errs);
            if (rc) {
                char buf[600];
                pt_errors_first(&errs, buf, sizeof buf);
                print_message("%s: %s\n", pt_pack_method_name((pt_pack_method)m), buf);
            }
            assert_int_equal(rc, 0);
            if (graphs_cap && req.max_graphs) assert_int_equal(pk.limits.max_graphs, 2);
            pt_packs packs = {0};
            for (uint32_t epoch = 0; epoch < 3; epoch++) {
                assert_int_equal(pt_packer_epoch(&pk, 9, epoch, &packs), 0);
                assert_memory_equal(&packs.limits, &pk.limits, sizeof(pk.limits));
                check_epoch(&pk, &packs, &s, ids, n_ids);
            }
            pt_packs_close(&packs);
            pt_packer_close(&pk);
            pt_errors_close(&errs);
        }
    sizes_free(&s);
}

static void test_epochs_deterministic_and_reshuffled(void **state)
{
    (void)state;
    sizes s;
    random_sizes(&s, 300, 2);
    for (int m = PT_PACK_LPFHP; m <= PT_PACK_DYNAMIC; m++) {
        pt_pack_request req = {.method = (pt_pack_method)m};
        pt_errors errs;
        pt_errors_init(&errs, 0);
        pt_packer pk;
        assert_int_equal(plan(&pk, &req, &s, &errs), 0);
        pt_packs a = {0}, b = {0}, c = {0}, d = {0};
        assert_int_equal(pt_packer_epoch(&pk, 42, 3, &a), 0);
        assert_int_equal(pt_packer_epoch(&pk, 42, 3, &b), 0);
        assert_int_equal(pt_packer_epoch(&pk, 42, 4, &c), 0);
        assert_int_equal(pt_packer_epoch(&pk, 43, 3, &d), 0);
        assert_int_equal(a.n_packs, b.n_packs);
        assert_memory_equal(a.graph_offset, b.graph_offset, (a.n_packs + 1) * sizeof(uint32_t));
        assert_memory_equal(a.graphs, b.graphs, s.n * sizeof(uint32_t));
        assert_true(memcmp(a.graphs, c.graphs, s.n * sizeof(uint32_t)) != 0);
        assert_true(memcmp(a.graphs, d.graphs, s.n * sizeof(uint32_t)) != 0);
        /* a buffer reused from another epoch gives the same packs */
        assert_int_equal(pt_packer_epoch(&pk, 42, 3, &c), 0);
        assert_memory_equal(a.graphs, c.graphs, s.n * sizeof(uint32_t));
        pt_packs_close(&a);
        pt_packs_close(&b);
        pt_packs_close(&c);
        pt_packs_close(&d);
        assert_null(a.graphs);
        pt_packer_close(&pk);
        pt_errors_close(&errs);
    }
    sizes_free(&s);
}

static void test_report_matches_measured_epoch(void **state)
{
    (void)state;
    sizes s;
    random_sizes(&s, 200, 3);
    for (int m = PT_PACK_LPFHP; m <= PT_PACK_DYNAMIC; m++) {
        pt_pack_request req = {.method = (pt_pack_method)m};
        pt_errors errs;
        pt_errors_init(&errs, 0);
        pt_packer pk;
        assert_int_equal(plan(&pk, &req, &s, &errs), 0);
        pt_pack_report r, q;
        assert_int_equal(pt_packer_report(&pk, 7, &r), 0);
        pt_packs packs = {0};
        assert_int_equal(pt_packer_epoch(&pk, 7, 0, &packs), 0);
        pt_packs_measure(&pk, &packs, &q);
        assert_memory_equal(&r, &q, sizeof(r));
        assert_int_equal(r.n_graphs, 200);
        assert_int_equal(r.real_nodes, pk.total_nodes);
        assert_true(fabs(r.node_efficiency + r.node_padding - 1.0) < 1e-12);
        assert_true(fabs(r.graphs_per_pack - 200.0 / r.n_packs) < 1e-12);
        assert_true(r.node_efficiency > 0 && r.node_efficiency <= 1.0);
        assert_true(r.edge_efficiency > 0 && r.edge_efficiency <= 1.0);
        pt_packs_close(&packs);
        pt_packer_close(&pk);
        pt_errors_close(&errs);
    }
    sizes_free(&s);
}

/* --- hand-checked plans ----------------------------------------------------------- */

static void lpfhp_case(const uint32_t *n, uint32_t count, int32_t max_nodes, int32_t max_graphs,
                       uint32_t expect_packs, double expect_eff)
{
    sizes s;
    sizes_set(&s, n, NULL, count);
    pt_pack_request req = {.method = PT_PACK_LPFHP, .max_nodes = max_nodes, .max_graphs = max_graphs};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_packer pk;
    assert_int_equal(plan(&pk, &req, &s, &errs), 0);
    pt_pack_report r;
    assert_int_equal(pt_packer_report(&pk, 1, &r), 0);
    assert_int_equal(r.n_packs, expect_packs);
    assert_true(fabs(r.node_efficiency - expect_eff) < 1e-12);
    pt_packer_close(&pk);
    pt_errors_close(&errs);
    sizes_free(&s);
}

static void test_lpfhp_hand_examples(void **state)
{
    (void)state;
    const uint32_t fives[] = {5, 5, 5, 5};
    lpfhp_case(fives, 4, 10, 0, 2, 1.0);       /* the same size repeated into a pack */
    lpfhp_case(fives, 4, 10, 1, 4, 0.5);       /* one graph per pack */
    const uint32_t pairs[] = {7, 3, 7, 3, 6, 4};
    lpfhp_case(pairs, 6, 10, 0, 3, 1.0);       /* longest first, best fit completes */
    const uint32_t eights[] = {8, 8, 8};
    lpfhp_case(eights, 3, 10, 0, 3, 0.8);
    /* max_graphs 2: (4,4) closes full of graphs; (4) then takes a 3; (3) alone */
    const uint32_t mixed[] = {4, 4, 4, 3, 3};
    lpfhp_case(mixed, 5, 12, 2, 3, 18.0 / 36.0);

    sizes s;
    sizes_set(&s, fives, NULL, 4);
    pt_pack_request req = {.method = PT_PACK_LPFHP, .max_nodes = 10};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_packer pk;
    assert_int_equal(plan(&pk, &req, &s, &errs), 0);
    assert_int_equal(pk.n_comps, 1);
    assert_int_equal(pk.comp_count[0], 2);
    assert_int_equal(pk.comp_offset[1], 2);
    assert_int_equal(pk.limits.max_graphs, 2);
    pt_packer_close(&pk);
    pt_errors_close(&errs);
    sizes_free(&s);
}

/* The edge capacity holds any draw: per-size maxima summed over a composition. */
static void test_lpfhp_edge_bound(void **state)
{
    (void)state;
    const uint32_t n[] = {5, 5, 5, 5}, e[] = {10, 30, 20, 40};
    sizes s;
    sizes_set(&s, n, e, 4);
    pt_pack_request req = {.method = PT_PACK_LPFHP, .max_nodes = 10};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_packer pk;
    assert_int_equal(plan(&pk, &req, &s, &errs), 0);
    assert_int_equal(pk.limits.max_edges, 80);
    pt_packer_close(&pk);
    req.max_edges = 80;
    assert_int_equal(plan(&pk, &req, &s, &errs), 0);
    pt_packer_close(&pk);
    req.max_edges = 79;
    assert_int_equal(plan(&pk, &req, &s, &errs), -1);
    assert_first_error(&errs, "max_edges: max_edges 79 is below 80, the most edges an LPFHP pack of "
                              "this strategy can draw; LPFHP does not pack edges (use tuple packing "
                              "to bound them)");
    pt_errors_close(&errs);
    sizes_free(&s);
}

static void test_tuple_hand_examples(void **state)
{
    (void)state;
    /* (5,50) x2 and (5,10) x2 in packs of 10 nodes, 100 edges: the first
     * (5,50) takes the sparse (5,10) to fill its nodes, which is then
     * swapped for the other (5,50) since the edges allow it */
    const uint32_t n[] = {5, 5, 5, 5}, e[] = {50, 10, 50, 10};
    sizes s;
    sizes_set(&s, n, e, 4);
    pt_pack_request req = {.method = PT_PACK_TUPLE, .max_nodes = 10, .max_edges = 100};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_packer pk;
    assert_int_equal(plan(&pk, &req, &s, &errs), 0);
    assert_int_equal(pk.n_packs, 2);
    assert_int_equal(pk.n_comps, 2);
    pt_packs packs = {0};
    assert_int_equal(pt_packer_epoch(&pk, 0, 0, &packs), 0);
    for (uint32_t p = 0; p < 2; p++) {
        uint32_t a = packs.graphs[packs.graph_offset[p]], b = packs.graphs[packs.graph_offset[p] + 1];
        assert_int_equal(s.nedges[a], s.nedges[b]);
    }
    pt_packs_close(&packs);
    pt_packer_close(&pk);
    sizes_free(&s);

    /* max_graphs binds: ten 1-node graphs, 3 per pack */
    const uint32_t ones[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    sizes_set(&s, ones, ones, 10);
    pt_pack_request small = {.method = PT_PACK_TUPLE, .max_nodes = 10, .max_edges = 10,
                             .max_graphs = 3};
    assert_int_equal(plan(&pk, &small, &s, &errs), 0);
    assert_int_equal(pk.n_packs, 4);
    assert_int_equal(pk.limits.max_graphs, 3);
    assert_int_equal(pt_packer_epoch(&pk, 0, 0, &packs), 0);
    check_epoch(&pk, &packs, &s, s.ids, s.n);
    pt_packs_close(&packs);
    pt_packer_close(&pk);
    pt_errors_close(&errs);
    sizes_free(&s);
}

static void test_tuple_every_heuristic_valid(void **state)
{
    (void)state;
    sizes s;
    random_sizes(&s, 400, 4);
    for (int h = PT_HEUR_PRODUCT; h <= PT_HEUR_EDGES; h++) {
        pt_pack_request req = {.method = PT_PACK_TUPLE, .heuristic = (pt_pack_heuristic)h,
                               .max_nodes = 60, .max_edges = 700};
        pt_errors errs;
        pt_errors_init(&errs, 0);
        pt_packer pk;
        assert_int_equal(plan(&pk, &req, &s, &errs), 0);
        pt_packs packs = {0};
        assert_int_equal(pt_packer_epoch(&pk, 3, 1, &packs), 0);
        check_epoch(&pk, &packs, &s, s.ids, s.n);
        pt_pack_report r;
        pt_packs_measure(&pk, &packs, &r);
        assert_true(r.node_efficiency > 0.8);
        pt_packs_close(&packs);
        pt_packer_close(&pk);
        pt_errors_close(&errs);
    }
    sizes_free(&s);
}

/* Auto picks the smallest limit reaching the target: one node less misses it. */
static void test_auto_limits_are_smallest(void **state)
{
    (void)state;
    /* mostly 14-20 atoms and a few of 29, so packs of the largest graph's
     * size fit few pairs, like QM9 */
    sizes s;
    random_sizes(&s, 500, 6);
    pt_rng rng;
    pt_rng_init(&rng, 6, 1);
    for (uint32_t i = 0; i < s.n; i++) {
        s.natoms[i] = i % 50 ? 14 + (uint32_t)pt_rng_below(&rng, 7) : 29;
        s.nedges[i] = s.natoms[i] * (10 + (uint32_t)pt_rng_below(&rng, 8));
    }
    pt_pack_request req = {.method = PT_PACK_LPFHP};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_packer pk;
    assert_int_equal(plan(&pk, &req, &s, &errs), 0);
    pt_pack_report r;
    assert_int_equal(pt_packer_report(&pk, 0, &r), 0);
    int32_t N = pk.limits.max_nodes, largest = (int32_t)pk.max_nodes_seen;
    assert_true(r.node_efficiency >= 0.95);
    assert_true(N > largest); /* else the loop below checks nothing */
    pt_packer_close(&pk);
    for (int32_t below = largest; below < N; below++) {
        pt_pack_request fixed = {.method = PT_PACK_LPFHP, .max_nodes = below};
        assert_int_equal(plan(&pk, &fixed, &s, &errs), 0);
        assert_int_equal(pt_packer_report(&pk, 0, &r), 0);
        assert_true(r.node_efficiency < 0.95);
        pt_packer_close(&pk);
    }
    pt_pack_request tup = {.method = PT_PACK_TUPLE};
    assert_int_equal(plan(&pk, &tup, &s, &errs), 0);
    assert_int_equal(pt_packer_report(&pk, 0, &r), 0);
    assert_true(r.node_efficiency >= 0.95 && r.edge_efficiency >= 0.95);
    pt_packer_close(&pk);
    pt_errors_close(&errs);
    sizes_free(&s);
}

static void test_baseline_shapes_and_budgets(void **state)
{
    (void)state;
    uint64_t pn, pe;
    pt_static_shape(PT_PACK_STATIC2N, 7, 5, &pn, &pe); /* jraph's own example */
    assert_int_equal(pn, 8);
    assert_int_equal(pe, 8);
    pt_static_shape(PT_PACK_STATIC2N, 8, 0, &pn, &pe);
    assert_int_equal(pn, 16);
    assert_int_equal(pe, 2);
    pt_static_shape(PT_PACK_STATIC64, 63, 64, &pn, &pe);
    assert_int_equal(pn, 64);
    assert_int_equal(pe, 64);
    pt_static_shape(PT_PACK_STATIC64, 64, 65, &pn, &pe);
    assert_int_equal(pn, 128);
    assert_int_equal(pe, 128);

    /* pad: one graph per pack at the largest size */
    const uint32_t pn2[] = {2, 4}, pe2[] = {1, 3};
    sizes s;
    sizes_set(&s, pn2, pe2, 2);
    pt_pack_request pad = {.method = PT_PACK_PAD};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_packer pk;
    assert_int_equal(plan(&pk, &pad, &s, &errs), 0);
    pt_pack_report r;
    assert_int_equal(pt_packer_report(&pk, 0, &r), 0);
    assert_int_equal(r.n_packs, 2);
    assert_true(fabs(r.node_efficiency - 0.75) < 1e-12);
    assert_true(fabs(r.edge_efficiency - 4.0 / 6.0) < 1e-12);
    pt_packer_close(&pk);
    sizes_free(&s);

    /* dynamic: 40 graphs of 10 nodes, 20 edges, batch 4: budget 64 nodes
     * (next multiple above 40) and 128 edges; 3 real graphs per batch */
    uint32_t ten[40], twenty[40];
    for (int i = 0; i < 40; i++) ten[i] = 10, twenty[i] = 20;
    sizes_set(&s, ten, twenty, 40);
    pt_pack_request dyn = {.method = PT_PACK_DYNAMIC, .batch_size = 4};
    assert_int_equal(plan(&pk, &dyn, &s, &errs), 0);
    assert_int_equal(pk.limits.max_nodes, 64);
    assert_int_equal(pk.limits.max_edges, 128);
    assert_int_equal(pk.limits.max_graphs, 4);
    assert_int_equal(pt_packer_report(&pk, 0, &r), 0);
    assert_int_equal(r.n_packs, 14);
    assert_true(fabs(r.node_efficiency - 400.0 / (14 * 64)) < 1e-12);
    pt_packer_close(&pk);
    /* static64 with batch 5: 4 graphs per batch, shape 64 nodes (41 -> 64),
     * 128 edges (80 -> 128) */
    pt_pack_request st = {.method = PT_PACK_STATIC64, .batch_size = 5};
    assert_int_equal(plan(&pk, &st, &s, &errs), 0);
    assert_int_equal(pk.n_packs, 10);
    assert_int_equal(pt_packer_report(&pk, 0, &r), 0);
    assert_true(fabs(r.node_efficiency - 40.0 / 64) < 1e-12);
    assert_true(fabs(r.edge_efficiency - 80.0 / 128) < 1e-12);
    pt_packer_close(&pk);
    sizes_free(&s);
    /* a mean x batch exactly on a multiple of 64 still gets the next one */
    uint32_t sixteen[8];
    for (int i = 0; i < 8; i++) sixteen[i] = 16;
    sizes_set(&s, sixteen, sixteen, 8);
    assert_int_equal(plan(&pk, &dyn, &s, &errs), 0);
    assert_int_equal(pk.limits.max_nodes, 128);
    pt_packer_close(&pk);
    pt_errors_close(&errs);
    sizes_free(&s);
}

/* --- the shared datasets ------------------------------------------------------------ */

static void shared_targets(const char *path, const char *name)
{
    sizes s;
    sizes_read(&s, path);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_packer pk;
    pt_pack_report r;
    pt_pack_request lp = {.method = PT_PACK_LPFHP};
    assert_int_equal(plan(&pk, &lp, &s, &errs), 0);
    assert_int_equal(pt_packer_report(&pk, 0, &r), 0);
    print_message("%s lpfhp: %d nodes/pack, node efficiency %.4f\n", name, r.limits.max_nodes,
                  r.node_efficiency);
    if (!strcmp(name, "qm9")) assert_true(r.node_efficiency >= 0.98);
    assert_true(r.node_efficiency >= 0.95);
    pt_packs packs = {0};
    assert_int_equal(pt_packer_epoch(&pk, 1, 5, &packs), 0);
    check_epoch(&pk, &packs, &s, s.ids, s.n);
    pt_packer_close(&pk);
    pt_pack_request tu = {.method = PT_PACK_TUPLE};
    assert_int_equal(plan(&pk, &tu, &s, &errs), 0);
    assert_int_equal(pt_packer_report(&pk, 0, &r), 0);
    print_message("%s tuple: %d nodes, %d edges/pack, efficiency nodes %.4f edges %.4f\n", name,
                  r.limits.max_nodes, r.limits.max_edges, r.node_efficiency, r.edge_efficiency);
    assert_true(r.node_efficiency >= 0.95);
    assert_true(r.edge_efficiency >= 0.95);
    assert_int_equal(pt_packer_epoch(&pk, 1, 5, &packs), 0);
    check_epoch(&pk, &packs, &s, s.ids, s.n);
    pt_packs_close(&packs);
    pt_packer_close(&pk);
    pt_errors_close(&errs);
    sizes_free(&s);
}

static void test_qm9_efficiency_targets(void **state)
{
    (void)state;
    shared_targets("tests/data/pack_qm9_sizes.txt.gz", "qm9");
}

static void test_water_efficiency_targets(void **state)
{
    (void)state;
    shared_targets("tests/data/pack_water_sizes.txt.gz", "water");
}

/* The snapshots are what ingest + neighbour counting make of ../shared/data. */
static void snapshot_matches(const char *src, const char *snapshot)
{
    if (access(src, R_OK) != 0) {
        print_message("%s absent: snapshot not rechecked\n", src);
        skip();
    }
    char ptd[96];
    snprintf(ptd, sizeof ptd, "/tmp/pt-test-packing-%ld.ptd", (long)getpid());
    pt_ingest_options opt;
    pt_ingest_options_init(&opt);
    pt_ingest_report rep;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_ingest_files(&src, 1, ptd, &opt, &rep, &errs), 0);
    pt_ingest_report_close(&rep);
    pt_dataset ds = {0};
    char err[256];
    assert_int_equal(pt_dataset_open(&ds, ptd, err, sizeof err), 0);
    sizes s;
    sizes_read(&s, snapshot);
    assert_int_equal(ds.n_structs, s.n);
    uint32_t *ne = malloc((size_t)s.n * sizeof(uint32_t));
    pt_graph_params gp = {6.0f, 32, PT_GRAPH_RADIUS};
    assert_int_equal(pt_graphs_count(ne, &ds, &gp, &errs), 0);
    for (uint32_t i = 0; i < s.n; i++) {
        assert_int_equal(pt_dataset_natoms(&ds, i), s.natoms[i]);
        assert_int_equal(ne[i], s.nedges[i]);
    }
    free(ne);
    sizes_free(&s);
    pt_dataset_close(&ds);
    pt_errors_close(&errs);
    unlink(ptd);
}

static void test_qm9_snapshot_matches_shared_data(void **state)
{
    (void)state;
    snapshot_matches("../shared/data/qm9_13k.extxyz.gz", "tests/data/pack_qm9_sizes.txt.gz");
}

static void test_water_snapshot_matches_shared_data(void **state)
{
    (void)state;
    snapshot_matches("../shared/data/water_20k.extxyz.gz", "tests/data/pack_water_sizes.txt.gz");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_method_every_id_once_within_limits),
        cmocka_unit_test(test_epochs_deterministic_and_reshuffled),
        cmocka_unit_test(test_report_matches_measured_epoch),
        cmocka_unit_test(test_lpfhp_hand_examples),
        cmocka_unit_test(test_lpfhp_edge_bound),
        cmocka_unit_test(test_tuple_hand_examples),
        cmocka_unit_test(test_tuple_every_heuristic_valid),
        cmocka_unit_test(test_auto_limits_are_smallest),
        cmocka_unit_test(test_baseline_shapes_and_budgets),
        cmocka_unit_test(test_qm9_efficiency_targets),
        cmocka_unit_test(test_water_efficiency_targets),
        cmocka_unit_test(test_qm9_snapshot_matches_shared_data),
        cmocka_unit_test(test_water_snapshot_matches_shared_data),
    };
    return cmocka_run_group_tests_name("packing", tests, NULL, NULL);
}
