/* test_schnet_acts.c — the activation arena's layouts (schnet_acts.c):
 *   - a forward-only arena (pt_schnet_acts_init_forward: evaluation and
 *     prediction) predicts the same bits as a full arena with no_grad, in
 *     fp32 and bf16, batch after batch (and in fp32 the double-precision
 *     reference of schnet_fixture.h);
 *   - its blocks share one set of arrays, h alternates between two buffers,
 *     it keeps no backward scratch, and its size is what
 *     pt_schnet_acts_bytes_forward says, below the full arena's by at least
 *     the [rows,F] arrays it drops;
 *   - bad capacities are refused with a message, as by the full arena;
 *   - arenas of 2 MB and more start on a 2 MB boundary and ask for
 *     transparent huge pages (accepted wherever the kernel has them),
 *     smaller ones stay 64-byte aligned without asking, and
 *     PACKTRAIN_HUGEPAGES=0 turns the advice off (other values do not). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/model/bf16.h"
#include "engine/model/schnet.h"
#include "tests/unit/schnet_fixture.h"

/* Every head's predictions of one forward on arena a. */
static void predict(fixture *fx, pt_schnet_acts *a, pt_precision prec, double *y, int *n)
{
    a->precision = prec;
    pt_schnet_forward(&fx->m, a, &fx->hb.b);
    *n = 0;
    for (int k = 0; k < fx->m.n_heads; k++)
        for (int g = 0; g < fx->hb.b.cap_graphs; g++) y[(*n)++] = a->head[k].y[g];
}

static void same_predictions(pt_precision prec)
{
    fixture fx;
    fixture_open(&fx, PT_READOUT_SUM);
    pt_schnet_acts fwd;
    assert_int_equal(pt_schnet_acts_init_forward(&fwd, &fx.m, fx.hb.b.cap_nodes,
                                                 fx.hb.b.cap_edges, fx.hb.b.cap_graphs, NULL),
                     0);
    double ref[256], got[256];
    int nr = 0, ng = 0;
    assert_true(fx.m.n_heads * fx.hb.b.cap_graphs <= 256);
    fx.a.no_grad = 1;
    predict(&fx, &fx.a, prec, ref, &nr);
    /* twice: the second forward starts from the first one's leftovers */
    for (int rep = 0; rep < 2; rep++) {
        predict(&fx, &fwd, prec, got, &ng);
        assert_int_equal(ng, nr);
        assert_memory_equal(got, ref, sizeof(double) * (size_t)nr);
    }
    /* and, in fp32, PyG's numbers (the double-precision per-edge reference) */
    if (prec == PT_PRECISION_FP32) {
        double *theta = theta_of(&fx.m), want[64];
        assert_true(fx.hb.b.cap_graphs <= 64);
        reference(&fx.m, theta, &fx.hb.b, want);
        for (int g = 0; g < fx.hb.b.cap_graphs; g++)
            if (fx.hb.b.graph_id[g] >= 0)
                assert_true(fabs(got[g] - want[g]) <= 1e-5 * (1.0 + fabs(want[g])));
        free(theta);
    }
    pt_schnet_acts_close(&fwd);
    fixture_close(&fx);
}

static void test_forward_arena_predicts_the_same_fp32(void **state)
{
    (void)state;
    same_predictions(PT_PRECISION_FP32);
}

static void test_forward_arena_predicts_the_same_bf16(void **state)
{
    (void)state;
    same_predictions(PT_PRECISION_BF16);
}

static void test_forward_arena_layout(void **state)
{
    (void)state;
    fixture fx;
    fixture_open(&fx, PT_READOUT_SUM);
    const int32_t N = fx.hb.b.cap_nodes, E = fx.hb.b.cap_edges, B = fx.hb.b.cap_graphs;
    const int T = fx.m.cfg.interactions;
    pt_schnet_acts a;
    assert_int_equal(pt_schnet_acts_init_forward(&a, &fx.m, N, E, B, NULL), 0);
    assert_int_equal(a.forward_only, 1);
    assert_int_equal(a.no_grad, 1);
    assert_int_equal((int)a.mode, (int)PT_SCHNET_ENERGY);
    assert_int_equal(a.bytes, pt_schnet_acts_bytes_forward(&fx.m.cfg, N, E, B));
    /* the full arena keeps 3 [rows,F] arrays per block and 2 of backward
     * scratch; this one 2 in all */
    const size_t row_array = (size_t)E * (size_t)fx.m.cfg.filters * sizeof(float);
    const size_t full = pt_schnet_acts_bytes(&fx.m.cfg, N, E, B);
    assert_int_equal(fx.a.bytes, full);
    assert_true(a.bytes + (size_t)(3 * T) * row_array <= full);
    assert_true(T >= 2);
    assert_ptr_not_equal(a.h[0], a.h[1]);
    for (int t = 0; t <= T; t++) assert_ptr_equal(a.h[t], a.h[t & 1]);
    for (int t = 1; t < T; t++) {
        assert_ptr_equal(a.block[t].s1, a.block[0].s1);
        assert_ptr_equal(a.block[t].w, a.block[0].w);
        assert_ptr_equal(a.block[t].x, a.block[0].x);
        assert_ptr_equal(a.block[t].m, a.block[0].m);
        assert_ptr_equal(a.block[t].u, a.block[0].u);
    }
    assert_ptr_equal(a.block[0].p, a.block[0].w);
    assert_null(a.dp);
    assert_null(a.ds1);
    assert_null(a.dh);
    assert_null(a.dm);
    assert_null(a.dx);
    /* every array lies inside the allocation */
    const char *lo = a.memory, *hi = lo + a.bytes;
    const void *arrays[] = {a.row, a.first, a.row_dist, a.e, a.cut, a.h[0], a.h[1],
                            a.block[0].s1, a.block[0].w, a.block[0].x, a.block[0].m,
                            a.block[0].u, a.q, a.o, a.y, a.count};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        assert_true((const char *)arrays[i] >= lo && (const char *)arrays[i] < hi);
    pt_schnet_acts_close(&a);
    fixture_close(&fx);
}

static void test_forward_arena_bad_capacities(void **state)
{
    (void)state;
    fixture fx;
    fixture_open(&fx, PT_READOUT_SUM);
    pt_schnet_acts a;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_schnet_acts_init_forward(&a, &fx.m, 0, 10, 1, &errs), -1);
    char msg[256];
    pt_errors_first(&errs, msg, sizeof msg);
    assert_non_null(strstr(msg, "capacities"));
    assert_null(a.memory);
    pt_errors_close(&errs);
    fixture_close(&fx);
}

static void test_arena_huge_pages(void **state)
{
    (void)state;
    assert_int_equal(unsetenv("PACKTRAIN_HUGEPAGES"), 0);   /* the default */
    fixture fx;
    fixture_open(&fx, PT_READOUT_SUM);
    /* the fixture's own arena is small */
    assert_true(fx.a.bytes < ((size_t)2 << 20));
    assert_int_equal((uintptr_t)fx.a.memory % 64, 0);
    assert_int_equal(fx.a.huge_pages, 0);
    /* one of at least 4 MB in each layout */
    const int thp = access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0;
    for (int fwd = 0; fwd <= 1; fwd++) {
        int32_t E = 1024;
        const pt_schnet_config *c = &fx.m.cfg;
        while ((fwd ? pt_schnet_acts_bytes_forward(c, 64, E, 4)
                    : pt_schnet_acts_bytes(c, 64, E, 4)) < ((size_t)4 << 20))
            E *= 2;
        pt_schnet_acts a;
        assert_int_equal(fwd ? pt_schnet_acts_init_forward(&a, &fx.m, 64, E, 4, NULL)
                             : pt_schnet_acts_init(&a, &fx.m, 64, E, 4, NULL),
                         0);
        assert_true(a.bytes >= ((size_t)4 << 20));
        assert_int_equal((uintptr_t)a.memory % ((uintptr_t)2 << 20), 0);
        assert_int_equal(a.huge_pages, thp);
        /* every byte of the layout is there (ASan: inside the allocation) */
        memset(a.memory, 0x5a, a.bytes);
        assert_int_equal(((const uint8_t *)a.memory)[a.bytes - 1], 0x5a);
        pt_schnet_acts_close(&a);
    }
    /* PACKTRAIN_HUGEPAGES=0: the plain allocation, the same layout */
    const int32_t E = 1 << 16;
    const size_t bytes = pt_schnet_acts_bytes(&fx.m.cfg, 64, E, 4);
    assert_true(bytes >= ((size_t)2 << 20));
    const char *const values[] = {"0", "1", "yes"};
    for (int v = 0; v < 3; v++) {
        assert_int_equal(setenv("PACKTRAIN_HUGEPAGES", values[v], 1), 0);
        pt_schnet_acts a;
        assert_int_equal(pt_schnet_acts_init(&a, &fx.m, 64, E, 4, NULL), 0);
        assert_int_equal(a.bytes, bytes);
        assert_int_equal((uintptr_t)a.memory % 64, 0);
        assert_int_equal(a.huge_pages, v == 0 ? 0 : thp);
        if (v) assert_int_equal((uintptr_t)a.memory % ((uintptr_t)2 << 20), 0);
        memset(a.memory, 0x5a, a.bytes);
        pt_schnet_acts_close(&a);
    }
    assert_int_equal(unsetenv("PACKTRAIN_HUGEPAGES"), 0);
    fixture_close(&fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_arena_predicts_the_same_fp32),
        cmocka_unit_test(test_forward_arena_predicts_the_same_bf16),
        cmocka_unit_test(test_forward_arena_layout),
        cmocka_unit_test(test_forward_arena_bad_capacities),
        cmocka_unit_test(test_arena_huge_pages),
    };
    return cmocka_run_group_tests_name("schnet_acts", tests, NULL, NULL);
}
