/* test_edge_rows.c — the filter-row table (engine/pack/edge_rows.h,
 * pt_edge_rows_build) against a scan written here (each edge's partner:
 * the first edge of the sender's list with the receiver as sender, the
 * vector negated and the distance bit-identical), on random batches of a
 * few hundred nodes:
 *   - lists in sender order, as the neighbour lists write them, with one
 *     sender at several images in one list (periodic: a run of equal
 *     senders, the partner not always its first edge), an atom's bonds to
 *     its own images, one-sided bonds, partners whose distance differs in
 *     the last bit, edges at or past the cutoff, and receivers without
 *     edges;
 *   - the same batches with every list shuffled;
 * row, first and row_dist bit for bit, and the row count: the search from
 * a cursor per list (edge_rows.c; one step per partner on sorted lists,
 * scans on shuffled ones) and any later reverse-edge index have their
 * reference here.  (Small tables by hand, and the
 * model over them: test_schnet_rows.c.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/pack/edge_rows.h"

#define PT_TEST_SEED 0x243f6a8885a308d3ull
#include "tests/unit/rand_fixture.h"

enum { MAXE = 40000 };
static const float CUTOFF = 6.0f;

/* one directed edge before the CSR is laid out */
typedef struct edge {
    int32_t dst, src;
    float v[3], d;
    uint32_t key; /* a random order within a list */
} edge;

typedef struct batch {
    int n;
    int32_t e;
    int32_t off[1024], src[MAXE];
    float dist[MAXE], vec[3 * MAXE];
} batch;

static int by_list(const void *pa, const void *pb, int sorted)
{
    const edge *a = pa, *b = pb;
    if (a->dst != b->dst) return a->dst < b->dst ? -1 : 1;
    if (sorted && a->src != b->src) return a->src < b->src ? -1 : 1;
    return a->key < b->key ? -1 : a->key > b->key;
}
static int by_sender(const void *a, const void *b) { return by_list(a, b, 1); }
static int by_key(const void *a, const void *b) { return by_list(a, b, 0); }

static edge pool[MAXE];
static int32_t n_pool;

static void add(int32_t dst, int32_t src, const float v[3], float d)
{
    assert_true(n_pool < MAXE);
    edge *x = &pool[n_pool++];
    x->dst = dst, x->src = src, x->d = d, x->key = rnd_u();
    memcpy(x->v, v, sizeof x->v);
}

/* A bond i–j at vector v (j seen from i): both directions, unless one-sided
 * (a truncated list) or the reverse distance is one bit off. */
static void bond(int32_t i, int32_t j, float scale)
{
    const float v[3] = {scale * rnd(), scale * rnd(), scale * rnd()};
    const float nv[3] = {-v[0], -v[1], -v[2]};
    const float d = sqrtf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    const uint32_t kind = rnd_u() % 16;
    add(i, j, v, d);
    if (kind == 0) return; /* one-sided */
    add(j, i, nv, kind == 1 ? nextafterf(d, 10.0f) : d);
}

static void make(batch *b, int n, int sorted)
{
    n_pool = 0;
    for (int i = 0; i < n; i++) {
        if (i % 37 == 5) continue; /* a node without edges */
        const int deg = 1 + (int)(rnd_u() % 10);
        for (int t = 0; t < deg; t++) {
            const int32_t j = i + 1 + (int32_t)(rnd_u() % 24);
            if (j >= n || j % 37 == 5) continue;
            /* past the cutoff now and then: no row either way */
            bond(i, j, rnd_u() % 9 == 0 ? 20.0f : 3.0f);
            if (rnd_u() % 6 == 0) bond(i, j, 3.0f); /* the same pair at another image */
        }
        if (rnd_u() % 8 == 0) { /* an atom and its own images: i←i at ±S */
            bond(i, i, 3.0f);
            if (rnd_u() % 2) bond(i, i, 3.0f);
        }
    }
    qsort(pool, (size_t)n_pool, sizeof pool[0], sorted ? by_sender : by_key);
    b->n = n;
    b->e = n_pool;
    int32_t k = 0;
    for (int i = 0; i <= n; i++) {
        b->off[i] = k;
        for (; k < n_pool && pool[k].dst == i; k++) {
            b->src[k] = pool[k].src;
            b->dist[k] = pool[k].d;
            memcpy(b->vec + 3 * (size_t)k, pool[k].v, sizeof pool[k].v);
        }
    }
    assert_int_equal(k, n_pool);
}

/* the scan: every edge's partner searched from the start of the list */
static int32_t ref_build(int32_t *row, uint8_t *first, float *rd, const batch *b)
{
    int32_t n_rows = 0;
    for (int32_t i = 0; i < b->n; i++)
        for (int32_t k = b->off[i]; k < b->off[i + 1]; k++) {
            first[k] = 0;
            if (!(b->dist[k] < CUTOFF)) {
                row[k] = -1;
                continue;
            }
            const int32_t j = b->src[k];
            int32_t partner = -1;
            if (j <= i) {
                const int32_t end = j < i ? b->off[j + 1] : k;
                const float *v = b->vec + 3 * (size_t)k;
                for (int32_t p = b->off[j]; p < end && partner < 0; p++) {
                    const float *w = b->vec + 3 * (size_t)p;
                    if (b->src[p] == i && w[0] == -v[0] && w[1] == -v[1] && w[2] == -v[2] &&
                        memcmp(&b->dist[p], &b->dist[k], sizeof(float)) == 0)
                        partner = p;
                }
            }
            if (partner >= 0 && row[partner] >= 0) {
                row[k] = row[partner];
                continue;
            }
            row[k] = n_rows;
            first[k] = 1;
            rd[n_rows++] = b->dist[k];
        }
    return n_rows;
}

static void check(int n, int sorted)
{
    static batch b;
    static int32_t row[MAXE], row_ref[MAXE];
    static uint8_t first[MAXE], first_ref[MAXE];
    static float rd[MAXE], rd_ref[MAXE];
    make(&b, n, sorted);
    const int32_t want = ref_build(row_ref, first_ref, rd_ref, &b);
    static int32_t cursor[1024];
    const int32_t got =
        pt_edge_rows_build(row, first, rd, cursor, b.src, b.off, b.dist, b.vec, n, CUTOFF);
    print_message("%d nodes, %d edges, %d rows, lists %s\n", n, (int)b.e, (int)want,
                  sorted ? "in sender order" : "shuffled");
    if (n > 1) assert_true(want > 0 && want < b.e); /* some edges share rows, some not */
    assert_int_equal(got, want);
    assert_memory_equal(row, row_ref, (size_t)b.e * sizeof(int32_t));
    assert_memory_equal(first, first_ref, (size_t)b.e);
    assert_memory_equal(rd, rd_ref, (size_t)want * sizeof(float));
}

static void test_sender_order(void **state)
{
    (void)state;
    check(1, 1); /* no edges */
    for (int n = 50; n <= 800; n += 250) check(n, 1);
}

static void test_shuffled(void **state)
{
    (void)state;
    for (int n = 50; n <= 800; n += 250) check(n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sender_order),
        cmocka_unit_test(test_shuffled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
