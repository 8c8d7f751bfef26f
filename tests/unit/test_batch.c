/* test_batch.c — fixed-shape batches on real data (a QM9 + water slice,
 * ingested and given neighbour graphs): every invariant of batch.h's layout
 * for every packing method over whole epochs, the all-padding packs at an
 * epoch's end, and every error code. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/pack/batch.h"
#include "engine/pack/edge_rows.h"
#include "engine/graph/graph.h"
#include "engine/data/ingest.h"
#include "engine/pack/packing.h"

typedef struct fixture {
    char path[64];
    pt_dataset ds;
    pt_graphs g;
    uint32_t *natoms, *nedges, *ids;
    int key;    /* energy_U0: QM9 has it, the water clusters do not (NaN) */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    snprintf(f->path, sizeof f->path, "/tmp/pt-test-batch-%ld.ptd", (long)getpid());
    const char *src = "tests/data/pack_mixed_slice.extxyz.gz";
    pt_ingest_options opt;
    pt_ingest_options_init(&opt);
    pt_ingest_report rep;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    int rc = pt_ingest_files(&src, 1, f->path, &opt, &rep, &errs);
    pt_ingest_report_close(&rep);
    char err[256];
    if (rc || pt_dataset_open(&f->ds, f->path, err, sizeof err)) return -1;
    pt_graph_params gp = {6.0f, 32, PT_GRAPH_RADIUS};
    if (pt_graphs_build(&f->g, &f->ds, &gp, &errs)) return -1;
    pt_errors_close(&errs);
    uint32_t n = f->ds.n_structs;
    f->natoms = malloc(n * sizeof(uint32_t));
    f->nedges = malloc(n * sizeof(uint32_t));
    f->ids = malloc(n * sizeof(uint32_t));
    for (uint32_t s = 0; s < n; s++) {
        f->natoms[s] = pt_dataset_natoms(&f->ds, s);
        f->nedges[s] = pt_graphs_nedges(&f->g, s);
        f->ids[s] = s;
    }
    f->key = pt_dataset_find_target(&f->ds, "energy_U0");
    *state = f;
    return f->key < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    pt_graphs_close(&f->g);
    pt_dataset_close(&f->ds);
    unlink(f->path);
    free(f->natoms);
    free(f->nedges);
    free(f->ids);
    free(f);
    return 0;
}

static int same_target(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

/* Every statement of batch.h's layout comment, for one fill. */
/* The fill's filter-row table (batch.h) is edge_rows.h's table of the
 * batch's own edges at its cutoff, bit for bit (rows, first edges, row
 * distances, last receivers): what the model would build from them
 * (test_edge_rows checks that table against a scan of every edge pair).
 * Also, independently of that function: an edge has a row exactly when
 * its distance is below the cutoff (so padding edges have none), takes
 * its row's distance, and each row is a bond: one or two edges. */
static void check_rows(const pt_batch *b)
{
    const size_t E = (size_t)b->cap_edges;
    int32_t *row = malloc(E * sizeof(int32_t)), *last = malloc(E * sizeof(int32_t));
    int32_t *cursor = malloc((size_t)b->cap_nodes * sizeof(int32_t));
    int32_t *uses = calloc(E, sizeof(int32_t));
    uint8_t *first = malloc(E);
    float *dist = malloc(E * sizeof(float));
    assert_non_null(row);
    assert_non_null(last);
    assert_non_null(cursor);
    assert_non_null(uses);
    assert_non_null(first);
    assert_non_null(dist);
    const int32_t n = pt_edge_rows_build(row, first, dist, cursor, b->edge_src, b->dst_offset,
                                         b->edge_dist, b->edge_vec, b->cap_nodes, b->cutoff);
    pt_edge_rows_last(last, row, b->dst_offset, b->cap_nodes);
    assert_int_equal(b->n_rows, n);
    assert_memory_equal(b->edge_row, row, E * sizeof(int32_t));
    assert_memory_equal(b->edge_first, first, E);
    if (n > 0) {
        assert_memory_equal(b->row_dist, dist, (size_t)n * sizeof(float));
        assert_memory_equal(b->row_last, last, (size_t)n * sizeof(int32_t));
    }
    for (size_t k = 0; k < E; k++) {
        const int32_t u = b->edge_row[k];
        assert_int_equal(u >= 0, b->edge_dist[k] < b->cutoff);
        if (u < 0) continue;
        assert_true(u < n);
        assert_memory_equal(&b->row_dist[u], &b->edge_dist[k], sizeof(float));
        uses[u]++;
    }
    for (int32_t u = 0; u < n; u++) assert_true(uses[u] == 1 || uses[u] == 2);
    free(row);
    free(last);
    free(cursor);
    free(uses);
    free(first);
    free(dist);
}

static void check_batch(const pt_batch *b, const fixture *f, const pt_packs *packs,
                        uint32_t first, int32_t avail, int key)
{
    const pt_pack_limits L = b->limits;
    int32_t real_nodes = 0, real_edges = 0, real_graphs = 0;
    for (int32_t p = 0; p < b->n_packs; p++) {
        int32_t node0 = p * L.max_nodes, edge0 = p * L.max_edges, graph0 = p * L.max_graphs;
        int32_t nn = 0, ne = 0, ng = 0;
        if (p < avail) {
            uint32_t k = first + (uint32_t)p;
            for (uint32_t q = packs->graph_offset[k]; q < packs->graph_offset[k + 1]; q++, ng++) {
                uint32_t s = packs->graphs[q];
                int32_t na = (int32_t)f->natoms[s];
                assert_int_equal(b->graph_id[graph0 + ng], s);
                assert_int_equal(b->graph_natoms[graph0 + ng], na);
                double want = key < 0 ? 0.0 : f->ds.targets[(size_t)key * f->ds.n_structs + s];
                assert_true(same_target(b->target[graph0 + ng], want));
                /* forces: the water clusters have them, QM9 not (NaN in the .ptd) */
                const float *fr = f->ds.forces + 3 * f->ds.atom_offset[s];
                int has_f = !isnan(fr[0]);
                assert_int_equal(b->graph_has_forces[graph0 + ng], has_f);
                assert_int_equal(b->graph_has_stress[graph0 + ng], 0);
                assert_true(b->graph_volume[graph0 + ng] == 0.0);
                for (int c = 0; c < 9; c++) assert_true(b->graph_stress[9 * (graph0 + ng) + c] == 0.0);
                for (int32_t a = 0; a < na; a++) {
                    assert_int_equal(b->z[node0 + nn + a], f->ds.z[f->ds.atom_offset[s] + a]);
                    assert_int_equal(b->node_graph[node0 + nn + a], graph0 + ng);
                    for (int c = 0; c < 3; c++)
                        assert_true(b->node_force[3 * (node0 + nn + a) + c] ==
                                    (has_f ? fr[3 * a + c] : 0.0f));
                }
                const float *pos = f->ds.pos + 3 * f->ds.atom_offset[s];
                for (uint64_t e = f->g.edge_offset[s]; e < f->g.edge_offset[s + 1]; e++, ne++) {
                    assert_int_equal(b->edge_src[edge0 + ne], node0 + nn + (int32_t)f->g.src[e]);
                    assert_int_equal(b->edge_dst[edge0 + ne], node0 + nn + (int32_t)f->g.dst[e]);
                    assert_true(b->edge_dist[edge0 + ne] == f->g.dist[e]);
                    assert_true(b->edge_dist[edge0 + ne] < b->cutoff);
                    /* molecules: r_src - r_dst in float, |v| the distance bit for bit */
                    const float *v = b->edge_vec + 3 * (edge0 + ne);
                    for (int c = 0; c < 3; c++)
                        assert_true(v[c] == pos[3 * f->g.src[e] + c] - pos[3 * f->g.dst[e] + c]);
                    assert_true(sqrtf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) == f->g.dist[e]);
                }
                nn += na;
            }
        }
        /* padding: nodes z 0 / graph -1, edges on the pack's last slot at the
         * cutoff, graph slots -1 */
        for (int32_t a = nn; a < L.max_nodes; a++) {
            assert_int_equal(b->z[node0 + a], 0);
            assert_int_equal(b->node_graph[node0 + a], -1);
            for (int c = 0; c < 3; c++) assert_true(b->node_force[3 * (node0 + a) + c] == 0.0f);
        }
        for (int32_t e = ne; e < L.max_edges; e++) {
            assert_int_equal(b->edge_src[edge0 + e], node0 + L.max_nodes - 1);
            assert_int_equal(b->edge_dst[edge0 + e], node0 + L.max_nodes - 1);
            assert_true(b->edge_dist[edge0 + e] == b->cutoff);
            const float *v = b->edge_vec + 3 * (edge0 + e);
            assert_true(v[0] == b->cutoff && v[1] == 0.0f && v[2] == 0.0f);
        }
        for (int32_t s = ng; s < L.max_graphs; s++) {
            assert_int_equal(b->graph_id[graph0 + s], -1);
            assert_int_equal(b->graph_natoms[graph0 + s], 0);
            assert_true(b->target[graph0 + s] == 0.0);
            assert_int_equal(b->graph_has_forces[graph0 + s], 0);
            assert_int_equal(b->graph_has_stress[graph0 + s], 0);
            assert_true(b->graph_volume[graph0 + s] == 0.0);
            for (int c = 0; c < 9; c++) assert_true(b->graph_stress[9 * (graph0 + s) + c] == 0.0);
        }
        /* real edges sorted by receiver, then sender, inside one graph */
        for (int32_t e = edge0; e < edge0 + ne; e++) {
            assert_int_equal(b->node_graph[b->edge_src[e]], b->node_graph[b->edge_dst[e]]);
            assert_true(b->node_graph[b->edge_dst[e]] >= 0);
            if (e > edge0)
                assert_true(b->edge_dst[e - 1] < b->edge_dst[e] ||
                            (b->edge_dst[e - 1] == b->edge_dst[e] &&
                             b->edge_src[e - 1] < b->edge_src[e]));
        }
        real_nodes += nn;
        real_edges += ne;
        real_graphs += ng;
    }
    assert_int_equal(b->n_real_nodes, real_nodes);
    assert_int_equal(b->n_real_edges, real_edges);
    assert_int_equal(b->n_real_graphs, real_graphs);
    /* edge_dst non-decreasing over the batch; dst_offset its CSR row pointer */
    for (int32_t e = 1; e < b->cap_edges; e++) assert_true(b->edge_dst[e - 1] <= b->edge_dst[e]);
    assert_int_equal(b->dst_offset[0], 0);
    assert_int_equal(b->dst_offset[b->cap_nodes], b->cap_edges);
    for (int32_t i = 0; i < b->cap_nodes; i++) assert_true(b->dst_offset[i] <= b->dst_offset[i + 1]);
    for (int32_t e = 0; e < b->cap_edges; e++) {
        int32_t d = b->edge_dst[e];
        assert_true(b->dst_offset[d] <= e && e < b->dst_offset[d + 1]);
    }
    check_rows(b);
}

static void run_epochs(const fixture *f, pt_pack_method m, int32_t packs_per_batch, int key)
{
    pt_pack_request req = {.method = m, .batch_size = 8};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_packer pk;
    assert_int_equal(pt_packer_init(&pk, &req, f->natoms, f->nedges, f->ds.n_structs, f->ids,
                                    f->ds.n_structs, &errs), 0);
    pt_batch b;
    assert_int_equal(pt_batch_init(&b, pk.limits, packs_per_batch, 6.0f), PT_BATCH_OK);
    uint8_t *z0 = b.z;
    int32_t *src0 = b.edge_src;
    pt_packs packs = {0};
    unsigned char *seen = calloc(f->ds.n_structs, 1);
    for (uint32_t epoch = 0; epoch < 2; epoch++) {
        assert_int_equal(pt_packer_epoch(&pk, 11, epoch, &packs), 0);
        memset(seen, 0, f->ds.n_structs);
        for (uint32_t first = 0; first < packs.n_packs; first += (uint32_t)packs_per_batch) {
            uint32_t left = packs.n_packs - first;
            int32_t avail = left < (uint32_t)packs_per_batch ? (int32_t)left : packs_per_batch;
            assert_int_equal(pt_batch_fill(&b, &f->ds, &f->g, &packs, first, avail, key),
                             PT_BATCH_OK);
            check_batch(&b, f, &packs, first, avail, key);
            for (int32_t s = 0; s < b.cap_graphs; s++)
                if (b.graph_id[s] >= 0) {
                    assert_false(seen[b.graph_id[s]]);
                    seen[b.graph_id[s]] = 1;
                }
        }
        for (uint32_t s = 0; s < f->ds.n_structs; s++) assert_true(seen[s]);
    }
    /* the fills reused the buffers allocated once */
    assert_ptr_equal(b.z, z0);
    assert_ptr_equal(b.edge_src, src0);
    free(seen);
    pt_packs_close(&packs);
    pt_batch_close(&b);
    assert_null(b.z);
    pt_packer_close(&pk);
    pt_errors_close(&errs);
}

static void test_lpfhp_batches_whole_epochs(void **state)
{
    fixture *f = *state;
    run_epochs(f, PT_PACK_LPFHP, 4, f->key);
}

static void test_tuple_batches_whole_epochs(void **state)
{
    fixture *f = *state;
    run_epochs(f, PT_PACK_TUPLE, 3, f->key);
}

static void test_baseline_batches_whole_epochs(void **state)
{
    fixture *f = *state;
    run_epochs(f, PT_PACK_PAD, 5, f->key);
    run_epochs(f, PT_PACK_DYNAMIC, 2, -1);
    run_epochs(f, PT_PACK_STATIC64, 1, f->key);
}

/* Packs missing at an epoch's end are all padding, whatever was there before. */
static void test_missing_packs_are_padding(void **state)
{
    fixture *f = *state;
    pt_pack_request req = {.method = PT_PACK_LPFHP};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_packer pk;
    assert_int_equal(pt_packer_init(&pk, &req, f->natoms, f->nedges, f->ds.n_structs, f->ids,
                                    f->ds.n_structs, &errs), 0);
    pt_packs packs = {0};
    assert_int_equal(pt_packer_epoch(&pk, 1, 0, &packs), 0);
    pt_batch b;
    assert_int_equal(pt_batch_init(&b, pk.limits, 3, 6.0f), PT_BATCH_OK);
    assert_int_equal(pt_batch_fill(&b, &f->ds, &f->g, &packs, 0, 3, f->key), PT_BATCH_OK);
    assert_int_equal(pt_batch_fill(&b, &f->ds, &f->g, &packs, packs.n_packs - 1, 1, f->key),
                     PT_BATCH_OK);
    check_batch(&b, f, &packs, packs.n_packs - 1, 1, f->key);
    assert_int_equal(pt_batch_fill(&b, &f->ds, &f->g, &packs, packs.n_packs, 0, f->key),
                     PT_BATCH_OK);
    check_batch(&b, f, &packs, packs.n_packs, 0, f->key);
    assert_int_equal(b.n_real_graphs, 0);
    pt_batch_close(&b);
    pt_packs_close(&packs);
    pt_packer_close(&pk);
    pt_errors_close(&errs);
}

/* The id-list fill places pack ids[p] in slot p: a batch of packs {k, 0}
 * must hold, slot by slot, what two contiguous one-pack fills hold. */
static void test_fill_ids_matches_contiguous(void **state)
{
    fixture *f = *state;
    pt_pack_request req = {.method = PT_PACK_LPFHP};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_packer pk;
    assert_int_equal(pt_packer_init(&pk, &req, f->natoms, f->nedges, f->ds.n_structs, f->ids,
                                    f->ds.n_structs, &errs), 0);
    pt_packs packs = {0};
    assert_int_equal(pt_packer_epoch(&pk, 1, 0, &packs), 0);
    pt_batch two, one;
    assert_int_equal(pt_batch_init(&two, pk.limits, 2, 6.0f), PT_BATCH_OK);
    assert_int_equal(pt_batch_init(&one, pk.limits, 1, 6.0f), PT_BATCH_OK);
    const uint32_t k = packs.n_packs - 1;
    const uint32_t ids[2] = {k, 0};
    assert_int_equal(pt_batch_fill_ids(&two, &f->ds, &f->g, &packs, ids, 2, f->key), PT_BATCH_OK);
    const int32_t mn = pk.limits.max_nodes, me = pk.limits.max_edges, mg = pk.limits.max_graphs;
    for (int slot = 0; slot < 2; slot++) {
        assert_int_equal(pt_batch_fill(&one, &f->ds, &f->g, &packs, ids[slot], 1, f->key),
                         PT_BATCH_OK);
        assert_memory_equal(one.z, two.z + slot * mn, (size_t)mn);
        assert_memory_equal(one.edge_dist, two.edge_dist + slot * me, (size_t)me * sizeof(float));
        for (int32_t e = 0; e < me; e++)
            assert_int_equal(one.edge_src[e] + slot * mn, two.edge_src[slot * me + e]);
        assert_memory_equal(one.graph_id, two.graph_id + slot * mg, (size_t)mg * sizeof(int32_t));
    }
    const uint32_t bad[1] = {packs.n_packs};
    assert_int_equal(pt_batch_fill_ids(&two, &f->ds, &f->g, &packs, bad, 1, f->key),
                     PT_BATCH_ERANGE);
    assert_int_equal(pt_batch_fill_ids(&two, &f->ds, &f->g, &packs, ids, 3, f->key),
                     PT_BATCH_ERANGE);
    pt_batch_close(&one);
    pt_batch_close(&two);
    pt_packs_close(&packs);
    pt_packer_close(&pk);
    pt_errors_close(&errs);
}

/* Consecutive packs (eval, predict): dataset order, per_pack graphs each,
 * limits the largest pack plus one spare slot, every pack fills a batch. */
static void test_consecutive_packs(void **state)
{
    fixture *f = *state;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_packs packs;
    const uint32_t n = f->ds.n_structs, per = 7;
    assert_int_equal(pt_packs_consecutive(&packs, &f->ds, &f->g, n, per, &errs), 0);
    assert_int_equal(packs.n_packs, (n + per - 1) / per);
    int64_t max_nodes = 0, max_edges = 0;
    for (uint32_t k = 0; k < packs.n_packs; k++) {
        assert_int_equal(packs.graph_offset[k], k * per);
        int64_t g, nodes, edges;
        pt_batch_pack_sizes(&f->ds, &f->g, &packs, k, &g, &nodes, &edges);
        if (nodes > max_nodes) max_nodes = nodes;
        if (edges > max_edges) max_edges = edges;
    }
    for (uint32_t s = 0; s < n; s++) assert_int_equal(packs.graphs[s], s);
    assert_int_equal(packs.limits.max_nodes, max_nodes + 1);
    assert_int_equal(packs.limits.max_edges, max_edges + 1);
    assert_int_equal(packs.limits.max_graphs, per);
    pt_batch b;
    assert_int_equal(pt_batch_init(&b, packs.limits, 1, 6.0f), PT_BATCH_OK);
    for (uint32_t k = 0; k < packs.n_packs; k++)
        assert_int_equal(pt_batch_fill(&b, &f->ds, &f->g, &packs, k, 1, f->key), PT_BATCH_OK);
    pt_batch_close(&b);
    pt_packs_close(&packs);
    assert_int_equal(pt_packs_consecutive(&packs, &f->ds, &f->g, n, 0, &errs), -1);
    assert_int_equal(pt_packs_consecutive(&packs, &f->ds, &f->g, n + 1, per, &errs), -1);
    assert_int_equal(errs.total, 2);
    char msg[256];
    snprintf(msg, sizeof msg, "consecutive packs: %u structures of %u, 0 per pack", n, n);
    assert_string_equal(errs.items[0].message, msg);
    pt_errors_close(&errs);
}

static void test_init_errors(void **state)
{
    (void)state;
    pt_batch b;
    pt_pack_limits ok = {36, 800, 4};
    assert_int_equal(pt_batch_init(&b, ok, 0, 6.0f), PT_BATCH_ELIMITS);
    assert_null(b.z);
    pt_pack_limits no_nodes = {0, 800, 4}, no_graphs = {36, 800, 0}, neg_edges = {36, -1, 4};
    assert_int_equal(pt_batch_init(&b, no_nodes, 2, 6.0f), PT_BATCH_ELIMITS);
    assert_int_equal(pt_batch_init(&b, no_graphs, 2, 6.0f), PT_BATCH_ELIMITS);
    assert_int_equal(pt_batch_init(&b, neg_edges, 2, 6.0f), PT_BATCH_ELIMITS);
    pt_pack_limits huge = {1 << 20, 1 << 20, 4};
    assert_int_equal(pt_batch_init(&b, huge, 4096, 6.0f), PT_BATCH_ELIMITS);
    /* a pack with no edge slots is a valid shape */
    pt_pack_limits edgeless = {4, 0, 1};
    assert_int_equal(pt_batch_init(&b, edgeless, 2, 6.0f), PT_BATCH_OK);
    assert_int_equal(b.cap_edges, 0);
    pt_batch_close(&b);
}

static void test_fill_errors(void **state)
{
    fixture *f = *state;
    /* hand-made packs: graph 0 and 1 of the slice (QM9 molecules) */
    uint32_t n0 = f->natoms[0], n1 = f->natoms[1], e0 = f->nedges[0], e1 = f->nedges[1];
    uint32_t off[3] = {0, 2, 3}, graphs[3] = {0, 1, 1};
    pt_packs packs = {{0}, 2, off, graphs};
    pt_batch b;
    pt_pack_limits L = {(int32_t)(n0 + n1), (int32_t)(e0 + e1), 2};
    assert_int_equal(pt_batch_init(&b, L, 2, 6.0f), PT_BATCH_OK);
    assert_int_equal(pt_batch_fill(&b, &f->ds, &f->g, &packs, 0, 2, f->key), PT_BATCH_OK);
    int32_t before = b.n_real_graphs;
    assert_int_equal(before, 3);

    assert_int_equal(pt_batch_fill(&b, &f->ds, &f->g, &packs, 0, 3, f->key), PT_BATCH_ERANGE);
    assert_int_equal(pt_batch_fill(&b, &f->ds, &f->g, &packs, 1, 2, f->key), PT_BATCH_ERANGE);
    assert_int_equal(pt_batch_fill(&b, &f->ds, &f->g, &packs, 0, -1, f->key), PT_BATCH_ERANGE);
    assert_int_equal(pt_batch_fill(&b, &f->ds, &f->g, &packs, 0, 2, (int)f->ds.n_targets),
                     PT_BATCH_ETARGET);
    graphs[2] = f->ds.n_structs;
    assert_int_equal(pt_batch_fill(&b, &f->ds, &f->g, &packs, 0, 2, f->key), PT_BATCH_EGRAPH);
    graphs[2] = 1;
    /* over each limit in turn; nothing is written on failure */
    pt_batch small;
    pt_pack_limits tight_nodes = {(int32_t)(n0 + n1 - 1), (int32_t)(e0 + e1), 2};
    assert_int_equal(pt_batch_init(&small, tight_nodes, 2, 6.0f), PT_BATCH_OK);
    assert_int_equal(pt_batch_fill(&small, &f->ds, &f->g, &packs, 0, 2, f->key), PT_BATCH_ENODES);
    assert_int_equal(small.n_real_graphs, 0);
    pt_batch_close(&small);
    pt_pack_limits tight_edges = {(int32_t)(n0 + n1), (int32_t)(e0 + e1 - 1), 2};
    assert_int_equal(pt_batch_init(&small, tight_edges, 2, 6.0f), PT_BATCH_OK);
    assert_int_equal(pt_batch_fill(&small, &f->ds, &f->g, &packs, 0, 2, f->key), PT_BATCH_EEDGES);
    pt_batch_close(&small);
    pt_pack_limits one_graph = {(int32_t)(n0 + n1), (int32_t)(e0 + e1), 1};
    assert_int_equal(pt_batch_init(&small, one_graph, 2, 6.0f), PT_BATCH_OK);
    assert_int_equal(pt_batch_fill(&small, &f->ds, &f->g, &packs, 0, 2, f->key), PT_BATCH_EGRAPHS);
    /* the second pack alone fits */
    assert_int_equal(pt_batch_fill(&small, &f->ds, &f->g, &packs, 1, 1, f->key), PT_BATCH_OK);
    assert_int_equal(small.n_real_graphs, 1);
    pt_batch_close(&small);
    assert_int_equal(b.n_real_graphs, before);
    pt_batch_close(&b);
}

/* A hand-made periodic dataset: a 2-atom triclinic bulk cell (forces and
 * stress), a 1-atom wire (pbc "T F F", forces absent) and a molecule, with
 * hand-written edges and shifts.  Edge vectors follow r_src + S·cell - r_dst,
 * reverse edges get exactly the negated vector, volume only for the bulk. */
static void test_periodic_labels_and_vectors(void **state)
{
    (void)state;
    const uint64_t off[4] = {0, 2, 3, 5};
    const uint8_t z[5] = {29, 8, 13, 1, 1};
    const float pos[15] = {0.1f, 0.2f, 0.3f, 1.9f, 1.7f, 1.6f,   /* bulk */
                           0.5f, -0.25f, 0.0f,                    /* wire */
                           0, 0, 0, 0.74f, 0, 0};                 /* H2 */
    const float nanf_ = NAN;
    const float forces[15] = {1, 2, 3, -1, -2, -3, nanf_, nanf_, nanf_,
                              0.5f, 0, 0, -0.5f, 0, 0};
    const double cell[27] = {3.6, 0, 0, 1.8, 3.1, 0, 0.4, -0.3, 3.3,
                             2.5, 0, 0, 0, 0, 0, 0, 0, 0,
                             0, 0, 0, 0, 0, 0, 0, 0, 0};
    const uint8_t pbc[3] = {PT_PBC_ALL, PT_PBC_A, 0};
    const double nan_ = NAN;
    double stress[27];
    for (int c = 0; c < 9; c++) {
        stress[c] = 0.01 * (c + 1);
        stress[9 + c] = stress[18 + c] = nan_;
    }
    const char names[1][PT_KEY_MAX] = {"energy"};
    const double targets[3] = {-7.5, -2.0, -31.0};
    pt_dataset ds = {.n_structs = 3, .n_atoms = 5, .atom_offset = off, .z = z, .pos = pos,
                     .forces = forces, .n_targets = 1, .target_names = names, .targets = targets,
                     .cell = cell, .pbc = pbc, .stress = stress};
    /* in CSR order (receiver, then sender): bulk 0<-0 (+a), 0<-0 (-a),
     * 0<-1 (S = (-1, 1, 0)), 1<-0 (-S); wire 0<-0 (+a), 0<-0 (-a); H2 0<-1, 1<-0 */
    uint64_t eoff[4] = {0, 4, 6, 8};
    uint32_t src[8] = {0, 0, 1, 0, 0, 0, 1, 0}, dst[8] = {0, 0, 0, 1, 0, 0, 0, 1};
    int16_t shift[24] = {1, 0, 0, -1, 0, 0, -1, 1, 0, 1, -1, 0,
                         1, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    float dist[8];
    for (uint32_t s = 0; s < 3; s++)
        for (uint64_t e = eoff[s]; e < eoff[s + 1]; e++) {
            const float *p = pos + 3 * off[s];
            double v[3];
            pt_edge_vector(p + 3 * src[e], p + 3 * dst[e], cell + 9 * s, shift + 3 * e, v);
            dist[e] = (float)sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        }
    pt_graphs g = {.params = {6.0f, 32, PT_GRAPH_RADIUS}, .n_structs = 3, .n_edges = 8,
                   .edge_offset = eoff, .src = src, .dst = dst, .dist = dist, .shift = shift};
    uint32_t poff[2] = {0, 3}, pgraphs[3] = {0, 1, 2};
    pt_packs packs = {{0}, 1, poff, pgraphs};
    pt_batch b;
    pt_pack_limits L = {6, 10, 4};
    assert_int_equal(pt_batch_init(&b, L, 1, 6.0f), PT_BATCH_OK);
    assert_int_equal(pt_batch_fill(&b, &ds, &g, &packs, 0, 1, 0), PT_BATCH_OK);
    /* bulk 0<-1 with S = (-1, 1, 0): r1 - a + b - r0 */
    double want[3];
    for (int c = 0; c < 3; c++)
        want[c] = ((double)pos[3 + c] - (double)pos[c]) + (-cell[c] + cell[3 + c]);
    for (int c = 0; c < 3; c++) assert_true(b.edge_vec[3 * 2 + c] == (float)want[c]);
    /* the reverse edge 1<-0 with -S: exactly the negated vector */
    for (int c = 0; c < 3; c++) assert_true(b.edge_vec[3 * 3 + c] == -b.edge_vec[3 * 2 + c]);
    /* self images 0<-0 (+a, -a) */
    assert_true(b.edge_vec[0] == 3.6f && b.edge_vec[1] == 0.0f && b.edge_vec[2] == 0.0f);
    assert_true(b.edge_vec[3] == -3.6f);
    /* wire: +-a = (2.5, 0, 0) */
    assert_true(b.edge_vec[12] == 2.5f && b.edge_vec[15] == -2.5f);
    /* molecule: float differences */
    assert_true(b.edge_vec[18] == 0.74f && b.edge_vec[21] == -0.74f);
    for (int k = 0; k < 8; k++) {
        const float *v = b.edge_vec + 3 * k;
        double n = sqrt((double)v[0] * v[0] + (double)v[1] * v[1] + (double)v[2] * v[2]);
        assert_true(fabs(n - b.edge_dist[k]) <= 2e-7 * b.edge_dist[k]);
    }
    /* labels */
    assert_int_equal(b.graph_has_forces[0], 1);
    assert_int_equal(b.graph_has_forces[1], 0);
    assert_int_equal(b.graph_has_forces[2], 1);
    assert_true(b.node_force[0] == 1.0f && b.node_force[5] == -3.0f);
    assert_true(b.node_force[6] == 0.0f && b.node_force[7] == 0.0f && b.node_force[8] == 0.0f);
    assert_true(b.node_force[9] == 0.5f && b.node_force[12] == -0.5f);
    assert_int_equal(b.graph_has_stress[0], 1);
    assert_int_equal(b.graph_has_stress[1], 0);
    for (int c = 0; c < 9; c++) {
        assert_true(b.graph_stress[c] == 0.01 * (c + 1));
        assert_true(b.graph_stress[9 + c] == 0.0 && b.graph_stress[18 + c] == 0.0);
    }
    /* |det| of the triclinic cell: 3.6 * 3.1 * 3.3 (lower triangular) */
    assert_true(fabs(b.graph_volume[0] - 3.6 * 3.1 * 3.3) < 1e-12);
    assert_true(b.graph_volume[1] == 0.0 && b.graph_volume[2] == 0.0);
    assert_int_equal(b.graph_has_forces[3], 0);
    assert_true(b.graph_volume[3] == 0.0);
    /* graphs without shifts cannot serve a periodic dataset */
    g.shift = NULL;
    assert_int_equal(pt_batch_fill(&b, &ds, &g, &packs, 0, 1, 0), PT_BATCH_EGRAPH);
    pt_batch_close(&b);
}

static void test_strerror(void **state)
{
    (void)state;
    assert_string_equal(pt_batch_strerror(PT_BATCH_OK), "ok");
    assert_string_equal(pt_batch_strerror(PT_BATCH_ELIMITS),
                        "pack limits or pack count invalid, or batch too large for int32 slots");
    assert_string_equal(pt_batch_strerror(PT_BATCH_ENOMEM), "out of memory allocating the batch");
    assert_string_equal(pt_batch_strerror(PT_BATCH_ERANGE),
                        "more packs offered than the batch holds, or past the epoch's packs");
    assert_string_equal(pt_batch_strerror(PT_BATCH_EGRAPH),
                        "a pack names a graph that is not in the dataset or its neighbour graphs, "
                        "or a periodic structure whose graphs carry no image shifts");
    assert_string_equal(pt_batch_strerror(PT_BATCH_ENODES), "a pack holds more atoms than max_nodes");
    assert_string_equal(pt_batch_strerror(PT_BATCH_EEDGES), "a pack holds more edges than max_edges");
    assert_string_equal(pt_batch_strerror(PT_BATCH_EGRAPHS),
                        "a pack holds more graphs than max_graphs");
    assert_string_equal(pt_batch_strerror(PT_BATCH_ETARGET),
                        "target index is not a key of the dataset");
    assert_string_equal(pt_batch_strerror(-99), "unknown batch error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lpfhp_batches_whole_epochs),
        cmocka_unit_test(test_tuple_batches_whole_epochs),
        cmocka_unit_test(test_baseline_batches_whole_epochs),
        cmocka_unit_test(test_missing_packs_are_padding),
        cmocka_unit_test(test_fill_ids_matches_contiguous),
        cmocka_unit_test(test_consecutive_packs),
        cmocka_unit_test(test_init_errors),
        cmocka_unit_test(test_fill_errors),
        cmocka_unit_test(test_periodic_labels_and_vectors),
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests_name("batch", tests, setup, teardown);
}
