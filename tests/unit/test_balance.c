/* test_balance.c — a step's micro-batches balanced by their edges
 * (engine/train/balance.h): every full window keeps exactly its packs (each
 * pack's graphs intact, in order) and the partial last window and
 * everything outside the windows stay untouched; the heaviest micro-batch
 * of a window is never heavier than the input's and, over many random
 * windows, the spread between micro-batches shrinks by an order of
 * magnitude (3x with 2 packs per micro-batch); a micro-batch keeps its packs
 * in epoch order; the result is a function of the pack list (same input,
 * same output); windows of one micro-batch, windows already balanced, and
 * degenerate arguments change nothing.  With G/b a power of two the window
 * is halved first (the replicas' shares): the halves' spread drops ~100x
 * and every finer level's shrinks too. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/train/balance.h"

typedef struct fixture {
    pt_packs p;
    uint32_t *edges;    /* [n_structs] */
    uint32_t n_structs;
} fixture;

/* n packs of 1..3 graphs each, structures numbered in order, edges 20..400 */
static void make(fixture *f, uint32_t n, uint64_t seed)
{
    pt_rng rng;
    pt_rng_init(&rng, seed, 1);
    memset(f, 0, sizeof *f);
    f->p.n_packs = n;
    f->p.graph_offset = malloc((n + 1) * sizeof(uint32_t));
    f->p.graphs = malloc(3 * (size_t)n * sizeof(uint32_t));
    f->edges = malloc(3 * (size_t)n * sizeof(uint32_t));
    assert_non_null(f->p.graph_offset);
    assert_non_null(f->p.graphs);
    assert_non_null(f->edges);
    f->p.graph_offset[0] = 0;
    uint32_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t k = 1 + (uint32_t)pt_rng_below(&rng, 3);
        for (uint32_t q = 0; q < k; q++) {
            f->p.graphs[at] = at;
            f->edges[at] = 20 + (uint32_t)pt_rng_below(&rng, 381);
            at++;
        }
        f->p.graph_offset[i + 1] = at;
    }
    f->n_structs = at;
}

static void copy(fixture *dst, const fixture *src)
{
    const uint32_t n = src->p.n_packs, g = src->p.graph_offset[n];
    *dst = *src;
    dst->p.graph_offset = malloc((n + 1) * sizeof(uint32_t));
    dst->p.graphs = malloc(g * sizeof(uint32_t));
    assert_non_null(dst->p.graph_offset);
    assert_non_null(dst->p.graphs);
    memcpy(dst->p.graph_offset, src->p.graph_offset, (n + 1) * sizeof(uint32_t));
    memcpy(dst->p.graphs, src->p.graphs, g * sizeof(uint32_t));
}

static void drop(fixture *f)
{
    free(f->p.graph_offset);
    free(f->p.graphs);
    if (f->edges) free(f->edges);
    memset(f, 0, sizeof *f);
}

/* the pack of `p` holding structure s (each structure is in one pack) */
static uint32_t pack_of(const pt_packs *p, uint32_t s)
{
    for (uint32_t i = 0; i < p->n_packs; i++)
        for (uint32_t q = p->graph_offset[i]; q < p->graph_offset[i + 1]; q++)
            if (p->graphs[q] == s) return i;
    fail_msg("structure %u in no pack", s);
    return 0;
}

/* micro-batch loads of window w: [groups] */
static void loads(const fixture *f, uint32_t w, uint32_t G, uint32_t b, uint64_t *out)
{
    for (uint32_t g = 0; g < G / b; g++) {
        out[g] = 0;
        for (uint32_t k = 0; k < b; k++) out[g] += pt_pack_edges(&f->p, f->edges, w * G + g * b + k);
    }
}

static uint64_t max_of(const uint64_t *x, uint32_t n)
{
    uint64_t m = 0;
    for (uint32_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static uint64_t min_of(const uint64_t *x, uint32_t n)
{
    uint64_t m = UINT64_MAX;
    for (uint32_t i = 0; i < n; i++) m = x[i] < m ? x[i] : m;
    return m;
}

static void check_case(uint32_t n, uint32_t G, uint32_t b, uint64_t seed, double *spread_in,
                       double *spread_out)
{
    fixture in, out;
    make(&in, n, seed);
    copy(&out, &in);
    out.edges = NULL;   /* shared with in */
    assert_int_equal(pt_packs_balance(&out.p, in.edges, G, b), 0);
    out.edges = in.edges;
    const uint32_t full = n / G * G;
    /* each pack moved whole, within its window; the rest did not move */
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t lo = in.p.graph_offset[i], cnt = in.p.graph_offset[i + 1] - lo;
        const uint32_t j = pack_of(&out.p, in.p.graphs[lo]);
        assert_int_equal(out.p.graph_offset[j + 1] - out.p.graph_offset[j], cnt);
        assert_memory_equal(out.p.graphs + out.p.graph_offset[j], in.p.graphs + lo,
                            cnt * sizeof(uint32_t));
        if (i >= full) assert_int_equal(j, i);
        else assert_int_equal(j / G, i / G);
    }
    uint64_t li[64], lo_[64];
    for (uint32_t w = 0; w < n / G; w++) {
        loads(&in, w, G, b, li);
        loads(&out, w, G, b, lo_);
        assert_true(max_of(lo_, G / b) <= max_of(li, G / b));   /* never worse */
        *spread_in += (double)(max_of(li, G / b) - min_of(li, G / b));
        *spread_out += (double)(max_of(lo_, G / b) - min_of(lo_, G / b));
        /* packs of a micro-batch in epoch order: their first structures ascend */
        for (uint32_t g = 0; g < G / b; g++)
            for (uint32_t k = 1; k < b; k++) {
                const uint32_t a = w * G + g * b + k - 1;
                assert_true(out.p.graphs[out.p.graph_offset[a]] <
                            out.p.graphs[out.p.graph_offset[a + 1]]);
            }
    }
    /* the same input gives the same order */
    fixture again;
    copy(&again, &in);
    again.edges = NULL;
    assert_int_equal(pt_packs_balance(&again.p, in.edges, G, b), 0);
    assert_memory_equal(again.p.graph_offset, out.p.graph_offset, (n + 1) * sizeof(uint32_t));
    assert_memory_equal(again.p.graphs, out.p.graphs,
                        out.p.graph_offset[n] * sizeof(uint32_t));
    drop(&again);
    out.edges = NULL;
    drop(&out);
    drop(&in);
}

static void test_balance_windows(void **state)
{
    (void)state;
    /* (packs, G, b): bench_speed's 2 x 8, the TTA lever's 2 x 4, 4 replicas,
     * accumulation, a partial last window */
    const uint32_t cases[][3] = {{160, 16, 8}, {83, 8, 4}, {200, 16, 4}, {97, 12, 2}, {64, 64, 8}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double before = 0, after = 0;
        for (uint64_t seed = 1; seed <= 8; seed++)
            check_case(cases[c][0], cases[c][1], cases[c][2], seed * 7919 + c, &before, &after);
        print_message("G=%u b=%u: micro-batch spread %.0f -> %.0f edges (sum over windows)\n",
                      cases[c][1], cases[c][2], before, after);
        /* 2 packs per micro-batch leave little to exchange: 3x there, 14-100x else */
        assert_true(after * (cases[c][2] == 2 ? 3 : 10) < before);
    }
}

static void test_balance_leaves_alone(void **state)
{
    (void)state;
    const uint32_t args[][2] = {{8, 8}, {8, 0}, {12, 8}, {400, 8}};   /* G == b, b 0, G % b, G > n */
    for (size_t c = 0; c < sizeof args / sizeof args[0]; c++) {
        fixture in, out;
        make(&in, 100, 3 + c);
        copy(&out, &in);
        out.edges = NULL;
        assert_int_equal(pt_packs_balance(&out.p, in.edges, args[c][0], args[c][1]), 0);
        assert_memory_equal(out.p.graph_offset, in.p.graph_offset, 101 * sizeof(uint32_t));
        assert_memory_equal(out.p.graphs, in.p.graphs, in.p.graph_offset[100] * sizeof(uint32_t));
        drop(&out);
        drop(&in);
    }
}

/* Replicas take consecutive micro-batches, so with G/b a power of two the
 * window is halved by edges first, then each half: every aligned block of
 * b·2^j packs (the share of 2, 4, ... replicas) is balanced, not only the
 * micro-batches.  Spread of the blocks of L packs, summed over windows. */
static double block_spread(const fixture *f, uint32_t G, uint32_t L)
{
    double s = 0.0;
    uint64_t l[64];
    for (uint32_t w = 0; w < f->p.n_packs / G; w++) {
        loads(f, w, G, L, l);
        s += (double)(max_of(l, G / L) - min_of(l, G / L));
    }
    return s;
}

static void test_balance_halves(void **state)
{
    (void)state;
    /* (packs, G, b): water's 2 replicas x 4 micro-batches of 2 packs, of 4
     * packs, 4 replicas x 4 of 2, 2 x 16 of 1 */
    const uint32_t cases[][3] = {{160, 16, 2}, {160, 16, 4}, {320, 32, 2}, {160, 32, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const uint32_t n = cases[c][0], G = cases[c][1], b = cases[c][2];
        for (uint64_t seed = 1; seed <= 6; seed++) {
            fixture in, out;
            make(&in, n, seed * 104729 + c);
            copy(&out, &in);
            out.edges = NULL;
            assert_int_equal(pt_packs_balance(&out.p, in.edges, G, b), 0);
            out.edges = in.edges;
            /* the halves, what two replicas wait for: from thousands of
             * edges to a few; every finer level narrower than before too */
            const double top_in = block_spread(&in, G, G / 2), top = block_spread(&out, G, G / 2);
            assert_true(top * 20 < top_in);
            for (uint32_t L = b; L < G; L *= 2) {
                const double before = block_spread(&in, G, L), after = block_spread(&out, G, L);
                if (seed == 1)
                    print_message("G=%u b=%u: blocks of %u packs, spread %.0f -> %.0f edges\n", G,
                                  b, L, before, after);
                /* single packs are what they are */
                if (L > 1) assert_true(after < before);
                else assert_true(after == before);
            }
            /* packs of a micro-batch in epoch order */
            for (uint32_t a = 0; a + 1 < n / G * G; a++)
                if ((a + 1) % b)
                    assert_true(out.p.graphs[out.p.graph_offset[a]] <
                                out.p.graphs[out.p.graph_offset[a + 1]]);
            out.edges = NULL;
            drop(&out);
            drop(&in);
        }
    }
}

/* a window whose micro-batches are already equal stays as it is */
static void test_balance_equal_window_kept(void **state)
{
    (void)state;
    fixture f;
    make(&f, 32, 11);
    for (uint32_t s = 0; s < f.n_structs; s++) f.edges[s] = 0;
    for (uint32_t i = 0; i < 32; i++) f.edges[f.p.graphs[f.p.graph_offset[i]]] = 100;
    fixture out;
    copy(&out, &f);
    out.edges = NULL;
    assert_int_equal(pt_packs_balance(&out.p, f.edges, 16, 8), 0);
    assert_memory_equal(out.p.graph_offset, f.p.graph_offset, 33 * sizeof(uint32_t));
    assert_memory_equal(out.p.graphs, f.p.graphs, f.p.graph_offset[32] * sizeof(uint32_t));
    drop(&out);
    drop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_balance_windows),
        cmocka_unit_test(test_balance_leaves_alone),
        cmocka_unit_test(test_balance_halves),
        cmocka_unit_test(test_balance_equal_window_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
