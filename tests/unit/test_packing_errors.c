/* test_packing_errors.c — one test per error message of packing: request
 * checks, graph ids and sizes against explicit limits, impossible automatic
 * limits, capacities beyond int32 slots; and the method / heuristic names. */
#include "tests/unit/pack_test_util.h"

/* --- errors ----------------------------------------------------------------------- */

typedef struct err_case {
    pt_pack_request req;
    const char *expect;
} err_case;

static void expect_error(const pt_pack_request *req, const sizes *s, const uint32_t *ids,
                         uint32_t n_ids, const char *expect)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_packer pk;
    assert_int_equal(pt_packer_init(&pk, req, s->natoms, s->nedges, s->n, ids, n_ids, &errs), -1);
    assert_first_error(&errs, expect);
    assert_null(pk.ids);
    pt_errors_close(&errs);
}

static void test_request_errors(void **state)
{
    (void)state;
    const uint32_t n[] = {3, 5, 0, 7}, e[] = {6, 20, 0, 42};
    sizes s;
    sizes_set(&s, n, e, 4);
    const uint32_t ok[] = {0, 1, 3};
    const err_case cases[] = {
        {{.method = (pt_pack_method)9},
         "method: unknown packing method 9 (lpfhp, tuple, pad, static64, static2n, dynamic)"},
        {{.method = PT_PACK_TUPLE, .heuristic = (pt_pack_heuristic)8},
         "heuristic: unknown tuple heuristic 8 (product, sum, max, min, nodes, edges)"},
        {{.max_nodes = -1}, "max_nodes: must be >= 0 (0 = auto), got -1"},
        {{.max_edges = -2}, "max_edges: must be >= 0 (0 = auto), got -2"},
        {{.max_graphs = -3}, "max_graphs: must be >= 0 (0 = no limit), got -3"},
        {{.target_efficiency = 1.5}, "target_efficiency: must be in (0, 1], got 1.5"},
        {{.target_efficiency = -0.5}, "target_efficiency: must be in (0, 1], got -0.5"},
        {{.method = PT_PACK_PAD, .max_graphs = 2},
         "max_graphs: pad puts one graph in each pack; max_graphs must be 0 or 1, got 2"},
        {{.method = PT_PACK_STATIC64, .batch_size = 1},
         "batch_size: must be >= 2 for static64 batching (one graph slot is the padding graph), "
         "got 1"},
        {{.method = PT_PACK_DYNAMIC, .max_graphs = 4},
         "max_graphs: dynamic batching has batch_size graph slots; set batch_size, not max_graphs"},
        {{.method = PT_PACK_STATIC2N, .max_nodes = 64},
         "max_nodes: static2n pads every batch to its own size; max_nodes and max_edges must be "
         "auto"},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
        expect_error(&cases[c].req, &s, ok, 3, cases[c].expect);
    sizes_free(&s);
}

static void test_id_and_size_errors(void **state)
{
    (void)state;
    const uint32_t n[] = {3, 5, 0, 7}, e[] = {6, 20, 0, 42};
    sizes s;
    sizes_set(&s, n, e, 4);
    pt_pack_request lp = {.method = PT_PACK_LPFHP};
    const uint32_t none[1] = {0};
    expect_error(&lp, &s, none, 0, "ids: nothing to pack: the list of graph ids is empty");
    const uint32_t out[] = {0, 9};
    expect_error(&lp, &s, out, 2, "ids: graph id 9 is not in the dataset (4 structures)");
    const uint32_t dup[] = {1, 0, 1, 1};
    expect_error(&lp, &s, dup, 4, "ids: graph 1 is listed more than once");
    const uint32_t empty[] = {0, 2};
    expect_error(&lp, &s, empty, 2, "ids: graph 2 has no atoms");
    const uint32_t ok[] = {0, 1, 3};
    pt_pack_request small = {.method = PT_PACK_LPFHP, .max_nodes = 6};
    expect_error(&small, &s, ok, 3, "max_nodes: graph 3 has 7 atoms, more than max_nodes 6");
    pt_pack_request tup = {.method = PT_PACK_TUPLE, .max_nodes = 10, .max_edges = 30};
    expect_error(&tup, &s, ok, 3, "max_edges: graph 3 has 42 edges, more than max_edges 30");
    pt_pack_request dyn = {.method = PT_PACK_DYNAMIC, .max_nodes = 7, .max_edges = 64};
    expect_error(&dyn, &s, ok, 3,
                 "max_nodes: graph 3 has 7 atoms; a dynamic batch of max_nodes 7 holds 6 (one "
                 "node is the padding graph's)");
    /* every offending graph is listed, not just the first */
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_packer pk;
    pt_pack_request tiny = {.method = PT_PACK_PAD, .max_nodes = 2};
    assert_int_equal(pt_packer_init(&pk, &tiny, s.natoms, s.nedges, s.n, ok, 3, &errs), -1);
    assert_int_equal(errs.total, 3);
    pt_errors_close(&errs);
    sizes_free(&s);
}

static void test_planning_errors(void **state)
{
    (void)state;
    sizes s;
    const uint32_t n[] = {2, 3}, e[] = {1, 3};
    sizes_set(&s, n, e, 2);
    /* one graph per pack can never reach 95%: 5 nodes in 2 packs of >= 3 */
    pt_pack_request lp = {.method = PT_PACK_LPFHP, .max_graphs = 1};
    expect_error(&lp, &s, s.ids, 2,
                 "max_nodes: no max_nodes from 3 to 67 reaches 95.0% node efficiency with LPFHP "
                 "(best 83.3% at 3): lower target_efficiency or give max_nodes");
    pt_pack_request tu = {.method = PT_PACK_TUPLE, .max_graphs = 1};
    expect_error(&tu, &s, s.ids, 2,
                 "max_nodes: no (max_nodes, max_edges) with max_nodes from 3 to 67 reaches 95.0% "
                 "efficiency on nodes and edges: lower target_efficiency or give limits");
    pt_pack_request tn = {.method = PT_PACK_TUPLE, .max_graphs = 1, .max_nodes = 4};
    expect_error(&tn, &s, s.ids, 2,
                 "max_edges: no max_edges reaches 95.0% efficiency on nodes and edges with "
                 "max_nodes 4: lower target_efficiency or leave max_nodes auto");
    pt_pack_request te = {.method = PT_PACK_TUPLE, .max_graphs = 1, .max_edges = 4};
    expect_error(&te, &s, s.ids, 2,
                 "max_nodes: no max_nodes from 3 to 67 reaches 95.0% efficiency on nodes and "
                 "edges with max_edges 4: lower target_efficiency or leave max_edges auto");
    pt_pack_request big = {.method = PT_PACK_TUPLE, .max_nodes = 70000, .max_edges = 10};
    expect_error(&big, &s, s.ids, 2,
                 "max_nodes: tuple packing's table for max_nodes 70000 and max_graphs 0 exceeds "
                 "16777216 entries: lower max_nodes or max_graphs");
    sizes_free(&s);

    const uint32_t flat[] = {4, 4}, zero[] = {0, 0};
    sizes_set(&s, flat, zero, 2);
    pt_pack_request edgeless = {.method = PT_PACK_TUPLE};
    expect_error(&edgeless, &s, s.ids, 2,
                 "max_edges: none of the graphs has an edge, so no edge limit can reach a target "
                 "efficiency: give max_edges or use lpfhp");
    sizes_free(&s);

    const uint32_t huge[] = {1u << 30, 1u << 30, 5}, few[] = {1, 1, 1};
    sizes_set(&s, huge, few, 3);
    pt_pack_request st = {.method = PT_PACK_STATIC64, .batch_size = 3};
    expect_error(&st, &s, s.ids, 3,
                 "batch_size: static64 capacity of 2147483712 nodes, 64 edges does not fit "
                 "2^31-1 slots: lower batch_size");
    sizes_free(&s);

    const uint32_t one[] = {1, 1}, dense[] = {3000000000u, 3000000000u};
    sizes_set(&s, one, dense, 2);
    pt_pack_request lpe = {.method = PT_PACK_LPFHP, .max_nodes = 2};
    expect_error(&lpe, &s, s.ids, 2,
                 "max_edges: an LPFHP pack of 2 nodes can draw more than 2^31-1 edges");
    sizes_free(&s);
}

static void test_names_parse(void **state)
{
    (void)state;
    pt_pack_method m;
    pt_pack_heuristic h;
    for (int i = PT_PACK_LPFHP; i <= PT_PACK_DYNAMIC; i++) {
        assert_int_equal(pt_pack_method_parse(pt_pack_method_name((pt_pack_method)i), &m), 0);
        assert_int_equal(m, i);
    }
    for (int i = PT_HEUR_PRODUCT; i <= PT_HEUR_EDGES; i++) {
        assert_int_equal(pt_pack_heuristic_parse(pt_pack_heuristic_name((pt_pack_heuristic)i), &h), 0);
        assert_int_equal(h, i);
    }
    assert_int_equal(pt_pack_method_parse("lpfhp2", &m), -1);
    assert_int_equal(pt_pack_heuristic_parse("", &h), -1);
    assert_string_equal(pt_pack_method_name((pt_pack_method)42), "unknown");
    assert_string_equal(pt_pack_heuristic_name((pt_pack_heuristic)42), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_errors),
        cmocka_unit_test(test_id_and_size_errors),
        cmocka_unit_test(test_planning_errors),
        cmocka_unit_test(test_names_parse),
    };
    return cmocka_run_group_tests_name("packing_errors", tests, NULL, NULL);
}
