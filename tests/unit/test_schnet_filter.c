/* test_schnet_filter.c — the filter network in cache-sized chunks of rows
 * (engine/model/schnet_filter.c) against the whole-batch sequence of ops it
 * replaced (the reference: pt_linear_forward, pt_ssp_forward,
 * pt_filter_cutoff_forward, pt_linear_backward, pt_ssp_backward over all U
 * rows at once):
 *   - forward s1, σ1, P, W and backward ds1, dA1, da1, dA2, da2 equal the
 *     reference bit for bit, for U below one chunk, at one chunk, and over
 *     several chunks with a ragged last one; on the policy's kernels
 *     (chunked), on the AVX2 kernel forced (chunked), in bf16 (chunked on
 *     the AVX512-BF16 kernel) and on OpenBLAS forced (whole-batch: OpenBLAS
 *     rounds a chunk's rows differently from the same rows in a whole batch);
 *   - in bf16 on the AVX512-BF16 kernel s1 is kept only as bf16 (the
 *     reference's s1 rounded: as pairs only where the arena has room for
 *     them, else as rows) and the first product's stores apply a1, the
 *     shifted softplus and the rounding, the second's a2 and, when P is W's
 *     own array, the cutoff and W's rounding (W kept only as bf16 rows: the
 *     reference's W rounded): still the reference's bits, also split over
 *     two threads; the portable bf16 path keeps fp32 s1 and W;
 *   - in bf16 the backward rounds each chunk's dP once (pairs for dA2, rows
 *     for ds1), ds1's product applies σ1 (bf16_ssp.h's σ̃ of s1's bf16
 *     values; the forward's softplus is bf16_ssp.h's too: the reference runs
 *     their scalar references), adds its rows into da1 (runs of 12 rows in
 *     float, in double once a chunk: the reference does the same) and rounds ds1 into the pairs dA1
 *     reads (its fp32 rows are not kept), and it reads s1 as the pairs the forward kept, and the basis as
 *     the padded rows and pairs block 0's forward rounded once, where the
 *     arena has room for them, else as before: the reference's bits with
 *     room for all, for s1's pairs only, and for none;
 *   - bf16 with σ1 big enough to be streamed past the caches (4000 rows):
 *     the same bits;
 *   - fp32: ds1 ⊙= σ̃1 = 1 − ½e^−s1 from s1 (pt_ssp_backward_s; the
 *     reference does the same over all U rows); σ1 is stored only on a
 *     forces arena (the force passes read it): both arenas checked, on the
 *     policy's kernels and on AVX2;
 *   - fp32 energy training computes each chunk's s1 in the first rows of
 *     a->ds1 (an L2 scratch) and writes it to s1's array through
 *     non-temporal stores: after a forward, s1's array is the reference's
 *     and ds1's first rows hold the last chunk's s1 (so the scratch path
 *     ran), on the policy's kernels and on AVX2; with no_grad and on a
 *     forces arena ds1 is not touched (s1 straight into its array);
 *   - fp32: a backward chunk leaves no prefetch region pending (the next
 *     chunk's s1 and e go to its own products), on the own kernels and on
 *     OpenBLAS (no regions then);
 *   - gradients accumulate (+=) onto what dw held, as the reference does;
 *   - fp32 chunks hold the weights' layouts over a pass: a second pass
 *     after the weights changed in place runs on the new ones;
 *   - the policy gives the filter network's products to the own kernels
 *     here (so the first case above tests the chunked path). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/schnet_internal.h"
#include "engine/model/bf16_ssp.h"
#include "engine/model/sgemm_kernels.h"
#include "engine/model/sgemm_kernels_internal.h" /* pt_sgemm_prefetch_pending */
#include "engine/model/ssp_kernels.h"

enum { G = 25, F = 100 };

#define PT_TEST_SEED 0x2545f4914f6cdd1dull
#include "tests/unit/rand_fixture.h"

/* Everything one block's filter network reads and writes. */
typedef struct side {
    pt_schnet_block w, dw;
    pt_schnet_acts a; /* its block 0 is the block (a.block[0], as K) */
} side;
#define K(s) ((s)->a.block[0])

/* rows the chunks' arena has (cap_edges) over the U rows in use: with room
 * the bf16 forward keeps s1 as pairs and the basis as padded rows and pairs
 * in the free half of s1's memory (schnet_filter.c: spare_of); at 1.2 only
 * s1's pairs fit, at 1 nothing does and the products lay out their operands
 * themselves */
static float room = 2.0f;

static void side_init(side *s, const side *from, int U)
{
    memset(s, 0, sizeof *s);
    const size_t rf = (size_t)U * F;
    s->a.n_rows = U;
    s->a.cap_edges = (int32_t)(room * (float)U);
    if (!from) {
        s->w.mlp0_w = rnd_floats((size_t)F * G, 0.3f);
        s->w.mlp0_b = rnd_floats(F, 0.1f);
        s->w.mlp2_w = rnd_floats((size_t)F * F, 0.1f);
        s->w.mlp2_b = rnd_floats(F, 0.1f);
        s->dw.mlp0_w = rnd_floats((size_t)F * G, 0.01f); /* accumulated onto */
        s->dw.mlp0_b = rnd_floats(F, 0.01f);
        s->dw.mlp2_w = rnd_floats((size_t)F * F, 0.01f);
        s->dw.mlp2_b = rnd_floats(F, 0.01f);
        s->a.e = rnd_floats((size_t)U * G, 1.0f);
        s->a.cut = rnd_floats(U, 1.0f);
        s->a.dp = rnd_floats(rf, 1.0f);
    } else {
        s->w = from->w; /* read only: shared */
        s->dw.mlp0_w = floats_copy(from->dw.mlp0_w, (size_t)F * G);
        s->dw.mlp0_b = floats_copy(from->dw.mlp0_b, F);
        s->dw.mlp2_w = floats_copy(from->dw.mlp2_w, (size_t)F * F);
        s->dw.mlp2_b = floats_copy(from->dw.mlp2_b, F);
        s->a.e = floats_copy(from->a.e, (size_t)U * G);
        s->a.cut = floats_copy(from->a.cut, U);
        s->a.dp = floats_copy(from->a.dp, rf);
    }
    K(s).s1 = rnd_floats((size_t)s->a.cap_edges * F, 0.0f);
    K(s).sig1 = rnd_floats(rf, 0.0f);
    K(s).p = rnd_floats(rf, 0.0f);
    K(s).w = rnd_floats(rf, 0.0f);
    s->a.ds1 = rnd_floats(rf, 0.0f);
}

static void side_free(side *s, int owner)
{
    if (owner) {
        free(s->w.mlp0_w), free(s->w.mlp0_b), free(s->w.mlp2_w), free(s->w.mlp2_b);
    }
    free(s->dw.mlp0_w), free(s->dw.mlp0_b), free(s->dw.mlp2_w), free(s->dw.mlp2_b);
    free(s->a.e), free(s->a.cut), free(s->a.dp), free(s->a.ds1);
    free(K(s).s1), free(K(s).sig1), free(K(s).p), free(K(s).w);
}

/* The whole-batch sequence the chunks replaced (schnet.c before). */
static void reference(side *s, int U)
{
    const pt_precision prec = s->a.precision;
    pt_linear_forward(K(s).s1, s->a.e, s->w.mlp0_w, s->w.mlp0_b, U, G, F, 0.0f, prec);
    if (pt_schnet_bf16_fused(&s->a)) {
        /* the fused bf16 path's softplus (bf16_ssp.h): ssp~, and σ̃ of s1's
         * bf16 value, by their scalar references */
        for (size_t i = 0; i < (size_t)U * F; i++) {
            K(s).s1[i] = pt_bf16_ssp_ref(K(s).s1[i]);
            K(s).sig1[i] =
                pt_bf16_dssp_ref(pt_bf16_to_float(pt_bf16_from_float(K(s).s1[i])));
        }
    } else {
        pt_ssp_forward(K(s).s1, K(s).sig1, NULL, U, F);
    }
    pt_linear_forward(K(s).p, K(s).s1, s->w.mlp2_w, s->w.mlp2_b, U, F, F, 0.0f, prec);
    pt_filter_cutoff_forward(K(s).w, K(s).p, s->a.cut, U, F);
    pt_linear_backward(s->a.ds1, s->dw.mlp2_w, s->dw.mlp2_b, s->a.dp, K(s).s1, s->w.mlp2_w, U, F,
                       F, 0.0f, prec);
    if (pt_schnet_bf16_fused(&s->a)) {
        /* the fused path: ds1 ⊙= σ̃1 as it is stored; da1: runs of
         * PT_BF16_EPI_ROWS rows from a chunk's first summed in float, each
         * run's sum in double, into da1 once per chunk of rows */
        const int chunk = pt_schnet_filter_chunk(prec, G, F, U);
        for (size_t i = 0; i < (size_t)U * F; i++) s->a.ds1[i] *= K(s).sig1[i];
        for (int r0 = 0; r0 < U; r0 += chunk) {
            const int r1 = U < r0 + chunk ? U : r0 + chunk;
            double total[F];
            for (int c = 0; c < F; c++) total[c] = 0.0;
            for (int g = r0; g < r1; g += PT_BF16_EPI_ROWS)
                for (int c = 0; c < F; c++) {
                    float part = s->a.ds1[(size_t)g * F + c];
                    for (int r = g + 1; r < r1 && r < g + PT_BF16_EPI_ROWS; r++)
                        part += s->a.ds1[(size_t)r * F + c];
                    total[c] += part;
                }
            for (int c = 0; c < F; c++) s->dw.mlp0_b[c] += (float)total[c];
        }
    } else {
        /* fp32: σ̃1 = 1 − ½e^−s1 from s1, whether or not σ1 is kept */
        pt_ssp_backward_s(s->a.ds1, s->dw.mlp0_b, K(s).s1, U, F);
    }
    pt_linear_backward(NULL, s->dw.mlp0_w, NULL, s->a.ds1, s->a.e, s->w.mlp0_w, U, G, F, 0.0f,
                       prec);
}

static void chunked(side *s, int U)
{
    pt_stopwatch sw;
    pt_stopwatch_start(&sw, NULL);
    pt_schnet_filter_forward(&s->w, &K(s), &s->a, U, G, F, &sw);
    pt_schnet_filter_backward(&s->w, &s->dw, &K(s), &s->a, U, G, F, &sw);
}

#define SAME(x, y, n) assert_memory_equal((x), (y), sizeof(float) * (size_t)(n))

/* the four weight and bias gradients, bit for bit */
static void same_grads(const side *c, const side *r)
{
    SAME(c->dw.mlp2_w, r->dw.mlp2_w, F * F);
    SAME(c->dw.mlp2_b, r->dw.mlp2_b, F);
    SAME(c->dw.mlp0_w, r->dw.mlp0_w, F * G);
    SAME(c->dw.mlp0_b, r->dw.mlp0_b, F);
}

/* a tensor kept as bf16 where the reference keeps fp32: its n values are
 * the reference's rounded, bit for bit */
static void same_bf16(const pt_bf16 *got, const float *ref, size_t n)
{
    pt_bf16 *want = malloc(n * sizeof(pt_bf16));
    assert_non_null(want);
    pt_bf16_from_floats(want, ref, n);
    assert_memory_equal(got, want, n * sizeof(pt_bf16));
    free(want);
}

/* the arenas' mode in check_alias (the energy arena unless a test says) */
static pt_schnet_mode arena_mode = PT_SCHNET_ENERGY;

/* alias: the chunks' P is W's own array (the energy arena's layout, where
 * bf16 applies the cutoff as P is stored); the reference keeps both. */
static void check_alias(int U, pt_precision prec, int alias)
{
    side r, c;
    side_init(&r, NULL, U);
    side_init(&c, &r, U);
    r.a.precision = c.a.precision = prec;
    r.a.mode = c.a.mode = arena_mode;
    float *own_p = K(&c).p;
    if (alias) K(&c).p = K(&c).w;
    reference(&r, U);
    chunked(&c, U);
    const size_t rf = (size_t)U * F;
    const pt_bf16 *s1h = pt_schnet_s1_bf16(&K(&c), &c.a, G, F);
    const uint32_t *s1p = pt_schnet_s1_pairs(&K(&c), &c.a, G, F);
    if (s1p) {
        /* with room for s1's pairs only those are kept (its rows lived in
         * the chunk's scratch): the reference's s1 rounded into pairs */
        assert_null(s1h);
        const size_t np = (size_t)(U + 1) / 2 * pt_bf16_pairs_ld(F);
        uint32_t *want = malloc(np * sizeof(uint32_t));
        assert_non_null(want);
        pt_bf16_pairs_pack(want, K(&r).s1, F, U, F, NULL, 0);
        assert_memory_equal(s1p, want, np * sizeof(uint32_t));
        free(want);
    } else if (s1h) {
        /* bf16 on the AVX512-BF16 kernel keeps s1 only as bf16: the
         * reference's s1 rounded, and all else the same bits */
        same_bf16(s1h, K(&r).s1, rf);
    } else {
        assert_true(prec == PT_PRECISION_FP32 ||
                    pt_bf16_kernel_active() != PT_BF16_KERNEL_AVX512);
        SAME(K(&c).s1, K(&r).s1, rf);
    }
    /* the fused bf16 path keeps no σ1 (the backward derives it from s1),
     * nor does fp32 for an energy arena (σ̃1 from s1: sig_stored) */
    if (!pt_schnet_bf16_fused(&c.a) && pt_schnet_sig_stored(&c.a))
        SAME(K(&c).sig1, K(&r).sig1, rf);
    if (!alias) SAME(K(&c).p, K(&r).p, rf);
    const pt_bf16 *wh = pt_schnet_w_bf16(&K(&c), &c.a);
    if (wh) {
        /* fused bf16 with P in W's memory keeps W only as bf16 rows (for
         * cfconv_bf16.h): the reference's W rounded */
        assert_true(alias);
        same_bf16(wh, K(&r).w, rf);
    } else {
        assert_true(!alias || !pt_schnet_bf16_fused(&c.a));
        SAME(K(&c).w, K(&r).w, rf);
    }
    K(&c).p = own_p;
    /* the fused bf16 path keeps ds1 only as the pairs dA1 reads */
    if (!pt_schnet_bf16_fused(&c.a)) SAME(c.a.ds1, r.a.ds1, rf);
    same_grads(&c, &r);
    side_free(&c, 0);
    side_free(&r, 1);
}

static void check(int U, pt_precision prec) { check_alias(U, prec, 0); }

/* as a forces arena: σ1 is then stored by the forward (the force passes
 * read it); the backward's bits are the energy arena's */
static void check_sizes(pt_precision prec);
static void check_sizes_forces(pt_precision prec)
{
    arena_mode = PT_SCHNET_FORCES_TRAIN;
    check_sizes(prec);
    arena_mode = PT_SCHNET_ENERGY;
}

static const int sizes[] = {1, 37, 256, 700, 1100};

static void check_sizes(pt_precision prec)
{
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) check(sizes[i], prec);
}

static void test_policy(void **state)
{
    (void)state;
    pt_sgemm_force(PT_SGEMM_AUTO);
    /* with an own kernel on this CPU and OpenBLAS on a non-AVX-512 set (the
     * unit tests pin Haswell), the filter network's products run on the
     * own kernels: the chunked path is what test_policy_kernels compares */
    if ((pt_sgemm_supported(PT_SGEMM_AVX512) || pt_sgemm_supported(PT_SGEMM_AVX2)) &&
        !pt_sgemm_openblas_avx512()) {
        assert_int_not_equal(pt_sgemm_choice(CblasNoTrans, CblasTrans, 256, F, G),
                             PT_SGEMM_OPENBLAS);
        assert_int_not_equal(pt_sgemm_choice(CblasNoTrans, CblasNoTrans, 256, F, F),
                             PT_SGEMM_OPENBLAS);
        assert_int_not_equal(pt_sgemm_choice(CblasTrans, CblasNoTrans, F, F, 256),
                             PT_SGEMM_OPENBLAS);
        assert_int_not_equal(pt_sgemm_choice(CblasTrans, CblasNoTrans, F, G, 256),
                             PT_SGEMM_OPENBLAS);
    }
}

static void test_policy_kernels(void **state)
{
    (void)state;
    pt_sgemm_force(PT_SGEMM_AUTO);
    check_sizes(PT_PRECISION_FP32);
    check_sizes_forces(PT_PRECISION_FP32);
}

static void test_avx2(void **state)
{
    (void)state;
    if (!pt_sgemm_supported(PT_SGEMM_AVX2)) {
        assert_int_equal(pt_sgemm_run(PT_SGEMM_AVX2, CblasNoTrans, CblasNoTrans, 1, 1, 1, NULL, 1,
                                      NULL, 1, 0.0f, NULL, 1),
                         -1);
        return;
    }
    pt_sgemm_force(PT_SGEMM_AVX2);
    check_sizes(PT_PRECISION_FP32);
    check_sizes_forces(PT_PRECISION_FP32);
    pt_sgemm_force(PT_SGEMM_AUTO);
}

static void test_openblas(void **state)
{
    (void)state;
    pt_sgemm_force(PT_SGEMM_OPENBLAS);
    check_sizes(PT_PRECISION_FP32);
    pt_sgemm_force(PT_SGEMM_AUTO);
}

/* fp32 chunks hold the weights' layouts over a pass (sgemm_kernels.h): a
 * second pass after an optimizer step (the weights changed in place, at
 * the same addresses) runs on the new weights, the reference's bits */
static void test_pass_after_step(void **state)
{
    (void)state;
    const int U = 700;
    for (int v = 0; v < 2; v++) {
        pt_sgemm_force(v ? PT_SGEMM_AVX2 : PT_SGEMM_AUTO);
        side r, first, c;
        side_init(&r, NULL, U);
        side_init(&first, &r, U);
        r.a.precision = first.a.precision = PT_PRECISION_FP32;
        chunked(&first, U); /* lays the old weights out */
        r.w.mlp0_w[0] += 0.5f, r.w.mlp0_w[F * G / 2] -= 0.25f, r.w.mlp0_w[F * G - 1] += 0.5f;
        r.w.mlp2_w[0] += 0.5f, r.w.mlp2_w[F * F / 2] -= 0.25f, r.w.mlp2_w[F * F - 1] += 0.5f;
        side_init(&c, &r, U);
        c.a.precision = PT_PRECISION_FP32;
        reference(&r, U);
        chunked(&c, U);
        const size_t rf = (size_t)U * F;
        SAME(K(&c).s1, K(&r).s1, rf); /* σ1: not kept (energy arena) */
        SAME(K(&c).p, K(&r).p, rf);
        SAME(K(&c).w, K(&r).w, rf);
        SAME(c.a.ds1, r.a.ds1, rf);
        SAME(c.dw.mlp2_w, r.dw.mlp2_w, F * F);
        SAME(c.dw.mlp0_w, r.dw.mlp0_w, F * G);
        side_free(&first, 0);
        side_free(&c, 0);
        side_free(&r, 1);
    }
    pt_sgemm_force(PT_SGEMM_AUTO);
}

/* fp32: where a forward computes s1 (s1_scratch in schnet_filter.c) */
static void test_s1_scratch(void **state)
{
    (void)state;
    const int U = 700, last = 512; /* chunks of 256: the last holds rows 512..699 */
    const pt_schnet_mode modes[] = {PT_SCHNET_ENERGY, PT_SCHNET_ENERGY, PT_SCHNET_FORCES_TRAIN};
    for (int v = 0; v < 2; v++)
        for (int m = 0; m < 3; m++) {
            pt_sgemm_force(v ? PT_SGEMM_AVX2 : PT_SGEMM_AUTO);
            side r, c;
            side_init(&r, NULL, U);
            side_init(&c, &r, U);
            r.a.precision = c.a.precision = PT_PRECISION_FP32;
            r.a.mode = c.a.mode = modes[m];
            c.a.no_grad = m == 1;
            reference(&r, U);
            pt_stopwatch sw;
            pt_stopwatch_start(&sw, NULL);
            pt_schnet_filter_forward(&c.w, &K(&c), &c.a, U, G, F, &sw);
            const size_t rf = (size_t)U * F, tail = (size_t)(U - last) * F;
            SAME(K(&c).s1, K(&r).s1, rf);
            SAME(K(&c).w, K(&r).w, rf);
            if (m == 0) {
                SAME(c.a.ds1, K(&r).s1 + (size_t)last * F, tail);
            } else {
                for (size_t i = 0; i < rf; i++)
                    if (c.a.ds1[i] != 0.0f) fail_msg("mode %d: ds1[%zu] written", m, i);
            }
            side_free(&c, 0);
            side_free(&r, 1);
        }
    pt_sgemm_force(PT_SGEMM_AUTO);
}

/* fp32: each backward chunk hands the next chunk's s1 and e to its own
 * products as regions to fetch (pt_sgemm_prefetch: s1 to dS1, e to dA1),
 * so none is left pending after the chunk (it would ride on an unrelated
 * later product) and none is registered by the last chunk; on the own
 * kernels the bits are the reference's all the same.  On OpenBLAS (which
 * takes no regions) none is registered: there the pieces of 256 rows are
 * the test's (the pipeline runs one whole-batch piece), and their bits
 * not compared (OpenBLAS rounds a piece as it likes: schnet_filter.c). */
static void test_backward_prefetch(void **state)
{
    (void)state;
    const int U = 700, chunk = 256;
    for (int v = 0; v < 3; v++) {
        pt_sgemm_force(v == 2 ? PT_SGEMM_OPENBLAS : v ? PT_SGEMM_AVX2 : PT_SGEMM_AUTO);
        side r, c;
        side_init(&r, NULL, U);
        side_init(&c, &r, U);
        r.a.precision = c.a.precision = PT_PRECISION_FP32;
        reference(&r, U);
        pt_stopwatch sw;
        pt_stopwatch_start(&sw, NULL);
        pt_schnet_filter_forward(&c.w, &K(&c), &c.a, U, G, F, &sw);
        assert_int_equal(pt_schnet_filter_chunk(PT_PRECISION_FP32, G, F, U), v == 2 ? U : chunk);
        double total[F];
        for (int j = 0; j < F; j++) total[j] = 0.0;
        for (int r0 = 0; r0 < U; r0 += chunk) {
            const int n = U - r0 < chunk ? U - r0 : chunk;
            pt_schnet_filter_backward_rows(&c.w, &c.dw, &K(&c), &c.a, r0, n, G, F,
                                           c.a.dp + (size_t)r0 * F, c.a.ds1 + (size_t)r0 * F,
                                           total, &sw);
            assert_int_equal(pt_sgemm_prefetch_pending(), 0);
        }
        for (int j = 0; j < F; j++) c.dw.mlp2_b[j] += (float)total[j];
        if (v < 2) {
            SAME(c.a.ds1, r.a.ds1, (size_t)U * F);
            same_grads(&c, &r);
        }
        side_free(&c, 0);
        side_free(&r, 1);
    }
    pt_sgemm_force(PT_SGEMM_AUTO);
}

static void test_bf16(void **state)
{
    (void)state;
    static const float rooms[] = {1.0f, 1.2f, 2.0f};
    for (size_t ri = 0; ri < sizeof rooms / sizeof rooms[0]; ri++) {
        room = rooms[ri];
        check_sizes(PT_PRECISION_BF16);
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            check_alias(sizes[i], PT_PRECISION_BF16, 1);
    }
    room = 2.0f;
    /* past 1.5 MB of σ1 the first product streams it (schnet_filter.c):
     * the same bits */
    check_alias(4000, PT_PRECISION_BF16, 1);
}

/* The fused bf16 products split over two threads (a 256-row chunk is
 * enough work for two) and the portable path (whole batch, s1 in fp32):
 * the reference's bits. */
static void test_bf16_threads_and_portable(void **state)
{
    (void)state;
    pt_bf16_set_threads(2);
    check_alias(700, PT_PRECISION_BF16, 1);
    check_alias(37, PT_PRECISION_BF16, 0);
    pt_bf16_set_threads(1);
    pt_bf16_set_kernel(PT_BF16_KERNEL_PORTABLE);
    check_alias(700, PT_PRECISION_BF16, 1);
    check_alias(37, PT_PRECISION_BF16, 0);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy),
        cmocka_unit_test(test_policy_kernels),
        cmocka_unit_test(test_avx2),
        cmocka_unit_test(test_openblas),
        cmocka_unit_test(test_pass_after_step),
        cmocka_unit_test(test_s1_scratch),
        cmocka_unit_test(test_backward_prefetch),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_bf16_threads_and_portable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
