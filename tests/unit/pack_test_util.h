/* pack_test_util.h — helpers shared by the packing tests: graph-size tables
 * (synthetic, hand-written or read from tests/data), and the per-epoch
 * invariant check (each id once, every pack within its limits). */
#ifndef PT_PACK_TEST_UTIL_H
#define PT_PACK_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "engine/pack/packing.h"
#include "engine/core/rng.h"

typedef struct sizes {
    uint32_t n;
    uint32_t *natoms, *nedges, *ids;
} sizes;

static inline void sizes_alloc(sizes *s, uint32_t n)
{
    s->n = n;
    s->natoms = calloc(n + 1, sizeof(uint32_t));
    s->nedges = calloc(n + 1, sizeof(uint32_t));
    s->ids = calloc(n + 1, sizeof(uint32_t));
    for (uint32_t i = 0; i < n; i++) s->ids[i] = i;
}

static inline void sizes_free(sizes *s)
{
    free(s->natoms);
    free(s->nedges);
    free(s->ids);
}

static inline void sizes_set(sizes *s, const uint32_t *natoms, const uint32_t *nedges, uint32_t n)
{
    sizes_alloc(s, n);
    for (uint32_t i = 0; i < n; i++) {
        s->natoms[i] = natoms[i];
        s->nedges[i] = nedges ? nedges[i] : 0;
    }
}

/* Reads "natoms nedges" lines ('#' lines are comments) of a gzip file. */
static inline void sizes_read(sizes *s, const char *path)
{
    gzFile f = gzopen(path, "rb");
    assert_non_null(f);
    uint32_t cap = 1024, n = 0;
    uint32_t *na = malloc(cap * sizeof(uint32_t)), *ne = malloc(cap * sizeof(uint32_t));
    char line[512];
    while (gzgets(f, line, sizeof line)) {
        if (line[0] == '#') continue;
        if (n == cap) {
            cap *= 2;
            na = realloc(na, cap * sizeof(uint32_t));
            ne = realloc(ne, cap * sizeof(uint32_t));
        }
        assert_int_equal(sscanf(line, "%u %u", &na[n], &ne[n]), 2);
        n++;
    }
    gzclose(f);
    sizes_set(s, na, ne, n);
    free(na);
    free(ne);
}

static inline void random_sizes(sizes *s, uint32_t n, uint64_t seed)
{
    pt_rng rng;
    pt_rng_init(&rng, seed, 0);
    sizes_alloc(s, n);
    for (uint32_t i = 0; i < n; i++) {
        s->natoms[i] = 3 + (uint32_t)pt_rng_below(&rng, 27);
        uint32_t k = s->natoms[i] - 1 < 24 ? s->natoms[i] - 1 : 24;
        s->nedges[i] = s->natoms[i] * (k / 2 + (uint32_t)pt_rng_below(&rng, k / 2 + 1));
    }
}

static inline int plan(pt_packer *pk, const pt_pack_request *req, const sizes *s, pt_errors *errs)
{
    return pt_packer_init(pk, req, s->natoms, s->nedges, s->n, s->ids, s->n, errs);
}

static inline void assert_first_error(const pt_errors *errs, const char *expect)
{
    char buf[600];
    pt_errors_first(errs, buf, sizeof buf);
    assert_string_equal(buf, expect);
}

/* Every id of ids[] exactly once, nothing else, every pack within limits
 * (dynamic: the padding graph's node and graph slot kept free). */
static inline void check_epoch(const pt_packer *pk, const pt_packs *packs, const sizes *s,
                        const uint32_t *ids, uint32_t n_ids)
{
    unsigned char *want = calloc(s->n + 1, 1), *seen = calloc(s->n + 1, 1);
    for (uint32_t k = 0; k < n_ids; k++) want[ids[k]] = 1;
    assert_int_equal(packs->graph_offset[0], 0);
    assert_int_equal(packs->graph_offset[packs->n_packs], n_ids);
    int dyn = pk->req.method == PT_PACK_DYNAMIC;
    if (pk->n_packs) assert_int_equal(packs->n_packs, pk->n_packs);
    for (uint32_t p = 0; p < packs->n_packs; p++) {
        uint64_t nodes = 0, edges = 0;
        uint32_t g = packs->graph_offset[p + 1] - packs->graph_offset[p];
        assert_true(g >= 1);
        for (uint32_t q = packs->graph_offset[p]; q < packs->graph_offset[p + 1]; q++) {
            uint32_t id = packs->graphs[q];
            assert_true(id < s->n);
            assert_true(want[id]);
            assert_false(seen[id]);
            seen[id] = 1;
            nodes += s->natoms[id];
            edges += s->nedges[id];
        }
        assert_true(nodes + (uint64_t)dyn <= (uint64_t)pk->limits.max_nodes);
        assert_true(edges <= (uint64_t)pk->limits.max_edges);
        assert_true(g + (uint32_t)dyn <= (uint32_t)pk->limits.max_graphs);
        if (pk->req.method == PT_PACK_STATIC64 || pk->req.method == PT_PACK_STATIC2N)
            assert_true(g <= (uint32_t)pk->req.batch_size - 1);
    }
    for (uint32_t k = 0; k < n_ids; k++) assert_true(seen[ids[k]]);
    free(want);
    free(seen);
}

#endif
