/* test_sgemm_weights.c — a Linear layer's products whose B is its weight
 * through pt_sgemm_small_weight (engine/model/sgemm_kernels.h), with the
 * weight's layout kept per thread and, inside a hold, reused without
 * comparing:
 *   - NT with a bias and NN with every beta kind (0, 1, other), padded
 *     leading dimensions, on the AVX-512 and AVX2 kernels: the scalar
 *     reference's bits (pt_sgemm_bias_run / pt_sgemm_run), compared and
 *     held, over several calls on new rows (the padding stays untouched);
 *   - a weight changed in place is seen by a compared call and by the
 *     first held call of a new hold (a layout from an earlier hold is
 *     compared again), never by a held call inside the same hold (the
 *     caller's promise: that is what makes the hold skip the comparison);
 *   - four weights in turn within one hold (more than the cache keeps), and
 *     one weight buffer read as NT and as NN: every call the reference's;
 *   - refusals (TN, a layout that is neither NT nor NN, too wide, short
 *     leading dimensions, OpenBLAS forced): 0, C untouched;
 *   - two threads holding their own weights at once, over passes with a
 *     weight step between them: every call the reference's bits.
 * On a CPU without AVX-512 (or AVX2) forcing it falls back to the policy,
 * whose result is checked the same way. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/sgemm_kernels.h"

#define PT_TEST_SEED 0x6a09e667f3bcc908ull
#include "tests/unit/rand_fixture.h"

/* one product: A[m, k] (lda), the weight (NT: [n, k]; NN: [k, n]; ldb),
 * C[m, n] (ldc), beta, bias (NT only, or NULL) */
typedef struct prod {
    CBLAS_TRANSPOSE tb;
    int m, n, k, lda, ldb, ldc;
    float beta;
    float *a, *b, *bias, *c0;
} prod;

static prod make(CBLAS_TRANSPOSE tb, int m, int n, int k, int pad, float beta, int bias)
{
    prod p = {tb, m, n, k, k + pad, (tb == CblasTrans ? k : n) + pad, n + pad, beta,
              NULL, NULL, NULL, NULL};
    p.a = rnd_floats((size_t)m * p.lda, 1.0f);
    p.b = rnd_floats((size_t)(tb == CblasTrans ? n : k) * p.ldb, 0.3f);
    p.bias = bias ? rnd_floats((size_t)n, 0.1f) : NULL;
    p.c0 = rnd_floats((size_t)m * p.ldc, 1.0f);
    return p;
}

static void drop(prod *p)
{
    free(p->a);
    free(p->b);
    free(p->bias);
    free(p->c0);
}

/* the scalar reference's C for the weight as it is now */
static float *reference(const prod *p)
{
    float *c = floats_copy(p->c0, (size_t)p->m * p->ldc);
    int rc = p->bias ? pt_sgemm_bias_run(PT_SGEMM_SCALAR, CblasNoTrans, p->tb, p->m, p->n, p->k,
                                         p->a, p->lda, p->b, p->ldb, p->bias, c, p->ldc)
                     : pt_sgemm_run(PT_SGEMM_SCALAR, CblasNoTrans, p->tb, p->m, p->n, p->k,
                                    p->a, p->lda, p->b, p->ldb, p->beta, c, p->ldc);
    assert_int_equal(rc, 0);
    return c;
}

static float *weighted(const prod *p, int held)
{
    float *c = floats_copy(p->c0, (size_t)p->m * p->ldc);
    assert_int_equal(pt_sgemm_small_weight(p->tb, p->m, p->n, p->k, p->a, p->lda, p->b, p->ldb,
                                           p->beta, p->bias, c, p->ldc, held),
                     1);
    return c;
}

/* C of a (held) call equals the reference's (same_as_now), or differs */
static void expect(const prod *p, int held, int same_as_now)
{
    float *want = reference(p), *got = weighted(p, held);
    const size_t bytes = sizeof(float) * (size_t)p->m * p->ldc;
    if (same_as_now && memcmp(got, want, bytes))
        fail_msg("%s %dx%dx%d held %d: not the reference's bits",
                 p->tb == CblasTrans ? "NT" : "NN", p->m, p->n, p->k, held);
    if (!same_as_now && !memcmp(got, want, bytes))
        fail_msg("held call compared the weight (the hold skipped nothing)");
    free(want);
    free(got);
}

/* new rows of A (the next chunk) */
static void next_rows(prod *p)
{
    for (size_t i = 0; i < (size_t)p->m * p->lda; i++) p->a[i] = rnd();
}

static const pt_sgemm_impl vec[] = {PT_SGEMM_AVX512, PT_SGEMM_AVX2};

static void test_bits(void **state)
{
    (void)state;
    const int shapes[][3] = {{256, 100, 25}, {256, 100, 100}, {37, 100, 100}, {5, 17, 33},
                             {100, 128, 128}, {64, 20, 7}};
    const float betas[] = {0.0f, 1.0f, 0.5f};
    for (int v = 0; v < 2; v++) {
        pt_sgemm_force(vec[v]);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int t = 0; t < 2; t++)
                for (int bk = 0; bk < 3; bk++) {
                    const CBLAS_TRANSPOSE tb = t ? CblasTrans : CblasNoTrans;
                    prod p = make(tb, shapes[s][0], shapes[s][1], shapes[s][2], bk, betas[bk],
                                  tb == CblasTrans && bk == 0);
                    pt_sgemm_weights_hold();
                    expect(&p, 0, 1);
                    for (int chunk = 0; chunk < 3; chunk++) {
                        next_rows(&p);
                        expect(&p, 1, 1);
                    }
                    drop(&p);
                }
    }
    pt_sgemm_force(PT_SGEMM_AUTO);
}

static void test_changed_weight(void **state)
{
    (void)state;
    for (int v = 0; v < 2; v++) {
        pt_sgemm_force(vec[v]);
        for (int t = 0; t < 2; t++) {
            prod p = make(t ? CblasTrans : CblasNoTrans, 40, 100, 100, 3, 0.0f, t);
            const long last = (long)(p.n - 1) * p.ldb + p.k - 1;
            pt_sgemm_weights_hold();
            expect(&p, 0, 1);
            p.b[last / 2] += 0.5f;   /* an optimizer step, in place */
            expect(&p, 0, 1);        /* compared: seen */
            p.b[0] -= 0.25f;
            pt_sgemm_weights_hold(); /* the next pass: its first held call compares */
            expect(&p, 1, 1);
            expect(&p, 1, 1);
            p.b[last] += 0.5f;       /* a broken promise inside the hold: not seen */
            expect(&p, 1, 0);
            expect(&p, 0, 1);        /* a compared call sees it again */
            drop(&p);
        }
    }
    pt_sgemm_force(PT_SGEMM_AUTO);
}

static void test_many_weights(void **state)
{
    (void)state;
    for (int v = 0; v < 2; v++) {
        pt_sgemm_force(vec[v]);
        prod w[4];
        for (int i = 0; i < 4; i++)
            w[i] = make(i % 2 ? CblasNoTrans : CblasTrans, 30, 100, 100 - i, 0, 0.0f, 0);
        pt_sgemm_weights_hold();
        for (int r = 0; r < 12; r++) expect(&w[r % 4], r >= 4, 1);
        /* one buffer read as NT and as NN (the cache keys the layout) */
        prod nn = w[0];
        nn.tb = CblasNoTrans;
        nn.k = w[0].n;
        nn.n = w[0].k;
        nn.ldb = w[0].ldb;
        nn.lda = nn.k;
        nn.ldc = nn.n;
        nn.a = rnd_floats((size_t)nn.m * nn.lda, 1.0f);
        nn.c0 = rnd_floats((size_t)nn.m * nn.ldc, 1.0f);
        expect(&nn, 1, 1);
        expect(&w[0], 1, 1);
        free(nn.a);
        free(nn.c0);
        for (int i = 0; i < 4; i++) drop(&w[i]);
    }
    pt_sgemm_force(PT_SGEMM_AUTO);
}

static void refused(CBLAS_TRANSPOSE tb, int m, int n, int k, int lda, int ldb, int ldc)
{
    float *a = rnd_floats(200 * 200, 1.0f), *b = rnd_floats(200 * 200, 1.0f);
    float *c = rnd_floats(200 * 200, 1.0f), *c0 = floats_copy(c, 200 * 200);
    assert_int_equal(pt_sgemm_small_weight(tb, m, n, k, a, lda, b, ldb, 0.0f, NULL, c, ldc, 0), 0);
    assert_int_equal(pt_sgemm_small_weight(tb, m, n, k, a, lda, b, ldb, 0.0f, NULL, c, ldc, 1), 0);
    assert_memory_equal(c, c0, sizeof(float) * 200 * 200);
    free(a), free(b), free(c), free(c0);
}

static void test_refusals(void **state)
{
    (void)state;
    pt_sgemm_force(PT_SGEMM_AUTO);
    refused((CBLAS_TRANSPOSE)0, 10, 100, 100, 100, 100, 100); /* neither NT nor NN */
    refused(CblasConjTrans, 10, 100, 100, 100, 100, 100);
    refused(CblasTrans, 10, 129, 100, 100, 100, 129);         /* too wide */
    refused(CblasNoTrans, 10, 100, 129, 129, 100, 100);
    refused(CblasTrans, 10, 100, 100, 99, 100, 100);          /* short lda */
    refused(CblasTrans, 10, 100, 100, 100, 99, 100);          /* short ldb */
    refused(CblasNoTrans, 10, 100, 100, 100, 99, 100);
    refused(CblasNoTrans, 10, 100, 100, 100, 100, 99);        /* short ldc */
    refused(CblasNoTrans, -1, 100, 100, 100, 100, 100);       /* negative size */
    refused(CblasTrans, 10, 8, 100, 100, 100, 8);             /* narrow: OpenBLAS's */
    pt_sgemm_force(PT_SGEMM_OPENBLAS);
    refused(CblasTrans, 10, 100, 100, 100, 100, 100);
    refused(CblasNoTrans, 10, 100, 100, 100, 100, 100);
    pt_sgemm_force(PT_SGEMM_AUTO);
}

/* two threads at once, each holding its own weight over many calls (the
 * layouts are per thread: shared, one thread's would overwrite the
 * other's); cmocka's checks stay on the main thread */
typedef struct job {
    prod p;
    int bad;
} job;

static void *run_held(void *arg)
{
    job *j = arg;
    for (int pass = 0; pass < 3; pass++) {
        j->p.b[pass] += 0.125f; /* an optimizer step between passes */
        pt_sgemm_weights_hold();
        for (int chunk = 0; chunk < 20; chunk++) {
            for (size_t i = 0; i < (size_t)j->p.m * j->p.lda; i++)
                j->p.a[i] = (float)((i * 7 + (size_t)chunk * 13 + (size_t)pass) % 19) - 9.0f;
            float *want = floats_copy(j->p.c0, (size_t)j->p.m * j->p.ldc);
            float *got = floats_copy(j->p.c0, (size_t)j->p.m * j->p.ldc);
            pt_sgemm_bias_run(PT_SGEMM_SCALAR, CblasNoTrans, CblasTrans, j->p.m, j->p.n, j->p.k,
                              j->p.a, j->p.lda, j->p.b, j->p.ldb, j->p.bias, want, j->p.ldc);
            if (pt_sgemm_small_weight(CblasTrans, j->p.m, j->p.n, j->p.k, j->p.a, j->p.lda,
                                      j->p.b, j->p.ldb, 0.0f, j->p.bias, got, j->p.ldc,
                                      chunk > 0) != 1 ||
                memcmp(got, want, sizeof(float) * (size_t)j->p.m * j->p.ldc))
                j->bad++;
            free(want);
            free(got);
        }
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    pt_sgemm_force(PT_SGEMM_AUTO);
    job j[2];
    for (int i = 0; i < 2; i++) {
        j[i].p = make(CblasTrans, 30, 100, 100 - 75 * i, 0, 0.0f, 1);
        j[i].bad = 0;
    }
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_held, &j[1]), 0);
    run_held(&j[0]);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(j[0].bad, 0);
    assert_int_equal(j[1].bad, 0);
    for (int i = 0; i < 2; i++) drop(&j[i].p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bits),
        cmocka_unit_test(test_changed_weight),
        cmocka_unit_test(test_many_weights),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
