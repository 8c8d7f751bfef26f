/* test_sgemm_prefetch.c — the prefetches a product issues for its caller
 * (pt_sgemm_prefetch, engine/model/sgemm_kernels.h; the walk in
 * sgemm_kernels_internal.h):
 *   - the walk issues each region's lines once, in order, a tile's share
 *     at a time, and stops at the call's budget or when the regions end;
 *   - regions are taken by the thread's next product on an own kernel
 *     (NT, NT with a bias, NN, TN over several passes, the narrow TN run as
 *     its transpose), whose result stays the scalar reference's bits on
 *     AVX-512 and AVX2; a product OpenBLAS runs leaves them to the next;
 *   - NULL, empty and fifth regions are ignored; starts off a line are
 *     rounded down to it (the last line counted once);
 *   - a TN product over more rows than L2 keeps fetches its own next
 *     pass when no regions are pending, with the reference's bits. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/sgemm_kernels.h"
#include "engine/model/sgemm_kernels_internal.h"

#define PT_TEST_SEED 0xbb67ae8584caa73bull
#include "tests/unit/rand_fixture.h"

static void test_walk(void **state)
{
    (void)state;
    static char mem[64 * 20] __attribute__((aligned(64)));
    pt_sgemm_pf pf = {{mem, mem + 64 * 10}, {4, 6}, 2, 0, 7, 3};
    pt_sgemm_pf_tile(&pf); /* 3 lines of the first region */
    assert_ptr_equal(pf.p[0], mem + 64 * 3);
    assert_int_equal(pf.left[0], 1);
    assert_int_equal(pf.lines, 4);
    pt_sgemm_pf_tile(&pf); /* its last line, then two of the second */
    assert_int_equal(pf.cur, 1);
    assert_int_equal(pf.left[0], 0);
    assert_ptr_equal(pf.p[1], mem + 64 * 12);
    assert_int_equal(pf.left[1], 4);
    assert_int_equal(pf.lines, 1);
    pt_sgemm_pf_tile(&pf); /* the budget's last line */
    assert_int_equal(pf.lines, 0);
    assert_int_equal(pf.left[1], 3);
    pf.lines = 100; /* more budget than lines: the regions end it */
    pt_sgemm_pf_tile(&pf);
    pt_sgemm_pf_tile(&pf);
    assert_int_equal(pf.cur, 2);
    assert_int_equal(pf.left[1], 0);
    assert_int_equal(pf.lines, 94);
    pt_sgemm_pf_tile(&pf); /* nothing left: no access past the regions */
    assert_int_equal(pf.cur, 2);
}

static void test_requests(void **state)
{
    (void)state;
    static char mem[64 * 100] __attribute__((aligned(64)));
    float a[4] = {0}, b[4] = {0}, c[4] = {0};
    pt_sgemm_force(PT_SGEMM_AUTO);
    pt_sgemm_run(PT_SGEMM_SCALAR, CblasNoTrans, CblasNoTrans, 1, 1, 1, a, 1, b, 1, 0.0f, c, 1);
    assert_int_equal(pt_sgemm_prefetch_pending(), 0);
    pt_sgemm_prefetch(NULL, 100);
    pt_sgemm_prefetch(mem, 0);
    assert_int_equal(pt_sgemm_prefetch_pending(), 0);
    pt_sgemm_prefetch(mem + 10, 54);  /* one line, from the line's start */
    pt_sgemm_prefetch(mem + 60, 8);   /* two lines: 60 .. 68 crosses one */
    pt_sgemm_prefetch(mem + 128, 64 * 5);
    pt_sgemm_prefetch(mem + 64 * 50, 1);
    pt_sgemm_prefetch(mem, 64 * 40);  /* a fifth: ignored */
    assert_int_equal(pt_sgemm_prefetch_pending(), 1 + 2 + 5 + 1);
    /* the scalar reference and OpenBLAS leave them */
    pt_sgemm_run(PT_SGEMM_SCALAR, CblasNoTrans, CblasNoTrans, 1, 1, 1, a, 1, b, 1, 0.0f, c, 1);
    pt_sgemm_run(PT_SGEMM_OPENBLAS, CblasNoTrans, CblasNoTrans, 1, 1, 1, a, 1, b, 1, 0.0f, c, 1);
    assert_int_equal(pt_sgemm_prefetch_pending(), 9);
    float *x = rnd_floats(64 * 32, 1.0f), *y = rnd_floats(32 * 32, 1.0f), *z = rnd_floats(64 * 32, 0.0f);
    assert_int_equal(pt_sgemm_small(CblasNoTrans, CblasNoTrans, 64, 32, 32, x, 32, y, 32, 0.0f, z, 32),
                     pt_sgemm_supported(PT_SGEMM_AVX512) || pt_sgemm_supported(PT_SGEMM_AVX2));
    if (pt_sgemm_supported(PT_SGEMM_AVX512) || pt_sgemm_supported(PT_SGEMM_AVX2))
        assert_int_equal(pt_sgemm_prefetch_pending(), 0);
    free(x), free(y), free(z);
    pt_sgemm_prefetch(mem, 64);
    pt_sgemm_run(PT_SGEMM_AUTO, CblasNoTrans, CblasNoTrans, 1, 1, 1, a, 1, b, 1, 0.0f, c, 1);
    if (pt_sgemm_supported(PT_SGEMM_AVX512) || pt_sgemm_supported(PT_SGEMM_AVX2))
        assert_int_equal(pt_sgemm_prefetch_pending(), 1); /* n = 1: OpenBLAS's */
    pt_sgemm_prefetch(NULL, 0);
}

/* one product with regions pending (a big one: more lines than tiles ×
 * their share can carry, and a small one; none when region is NULL)
 * against the scalar reference */
static void check(pt_sgemm_impl impl, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n,
                  int k, float beta, int bias, const char *region, size_t bytes)
{
    const int ar = ta == CblasTrans ? k : m, ac = ta == CblasTrans ? m : k;
    const int br = tb == CblasTrans ? n : k, bc = tb == CblasTrans ? k : n;
    float *a = rnd_floats((size_t)ar * ac, 1.0f), *b = rnd_floats((size_t)br * bc, 0.5f);
    float *bs = bias ? rnd_floats((size_t)n, 0.1f) : NULL, *c0 = rnd_floats((size_t)m * n, 1.0f);
    float *want = floats_copy(c0, (size_t)m * n), *got = floats_copy(c0, (size_t)m * n);
    if (bias)
        assert_int_equal(pt_sgemm_bias_run(PT_SGEMM_SCALAR, ta, tb, m, n, k, a, ac, b, bc, bs,
                                           want, n), 0);
    else
        assert_int_equal(pt_sgemm_run(PT_SGEMM_SCALAR, ta, tb, m, n, k, a, ac, b, bc, beta, want,
                                      n), 0);
    if (region) {
        pt_sgemm_prefetch(region, bytes);
        pt_sgemm_prefetch(region + 64 * 3, 64 * 2);
    }
    int rc = bias ? pt_sgemm_bias_run(impl, ta, tb, m, n, k, a, ac, b, bc, bs, got, n)
                  : pt_sgemm_run(impl, ta, tb, m, n, k, a, ac, b, bc, beta, got, n);
    assert_int_equal(rc, 0);
    assert_int_equal(pt_sgemm_prefetch_pending(), 0);
    if (memcmp(got, want, sizeof(float) * (size_t)m * n))
        fail_msg("%s %c%c %dx%dx%d with prefetches: not the reference's bits",
                 pt_sgemm_impl_name(impl), ta == CblasTrans ? 'T' : 'N',
                 tb == CblasTrans ? 'T' : 'N', m, n, k);
    free(a), free(b), free(bs), free(c0), free(want), free(got);
}

static void test_products(void **state)
{
    (void)state;
    const size_t big = 64 * 4096;
    char *region = malloc(big);
    assert_non_null(region);
    memset(region, 1, big);
    const pt_sgemm_impl vec[] = {PT_SGEMM_AVX512, PT_SGEMM_AVX2};
    for (int v = 0; v < 2; v++) {
        if (!pt_sgemm_supported(vec[v])) continue;
        for (int r = 0; r < 2; r++) {
            const size_t bytes = r ? big : 64 * 7 + 5;
            check(vec[v], CblasNoTrans, CblasTrans, 256, 100, 25, 0.0f, 1, region, bytes);
            check(vec[v], CblasNoTrans, CblasTrans, 37, 100, 100, 1.0f, 0, region, bytes);
            check(vec[v], CblasNoTrans, CblasNoTrans, 256, 100, 100, 0.0f, 0, region, bytes);
            check(vec[v], CblasTrans, CblasNoTrans, 100, 100, 256, 1.0f, 0, region, bytes);
            check(vec[v], CblasTrans, CblasNoTrans, 100, 100, 200, 0.5f, 0, region, bytes);
            check(vec[v], CblasTrans, CblasNoTrans, 100, 25, 256, 1.0f, 0, region, bytes);
            check(vec[v], CblasTrans, CblasNoTrans, 100, 25, 256, 0.0f, 0, region, bytes);
        }
    }
    free(region);
}

/* A weight gradient over more rows than PT_SGEMM_AHEAD_A_BYTES (655 rows
 * of 100 floats and up) fetches each next pass's rows itself when the
 * caller gave no regions, and takes the caller's when it did: the bits
 * stay the reference's either way, at pass (64-row) edges and past them,
 * with beta 0 and 1, and nothing is left pending. */
static void test_tn_next_pass(void **state)
{
    (void)state;
    const size_t big = 64 * 4096;
    char *region = malloc(big);
    assert_non_null(region);
    memset(region, 1, big);
    const int rows[] = {655, 656, 704, 705, 1128};
    const pt_sgemm_impl vec[] = {PT_SGEMM_AVX512, PT_SGEMM_AVX2};
    for (int v = 0; v < 2; v++) {
        if (!pt_sgemm_supported(vec[v])) continue;
        for (int r = 0; r < 5; r++) {
            check(vec[v], CblasTrans, CblasNoTrans, 100, 100, rows[r], 1.0f, 0, NULL, 0);
            check(vec[v], CblasTrans, CblasNoTrans, 100, 100, rows[r], 0.0f, 0, NULL, 0);
            check(vec[v], CblasTrans, CblasNoTrans, 50, 100, rows[r], 1.0f, 0, NULL, 0);
            check(vec[v], CblasTrans, CblasNoTrans, 100, 100, rows[r], 1.0f, 0, region, big);
        }
    }
    free(region);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk),
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_products),
        cmocka_unit_test(test_tn_next_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
