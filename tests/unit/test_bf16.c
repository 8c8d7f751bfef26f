/* test_bf16.c — bf16 conversions, CPU detection, and the bf16 products
 * (AVX512-BF16 kernel and portable path) against double-precision references
 * with error bounds derived from bf16's 8-bit significand.
 *
 * Bounds (u32 = 2^-24 fp32 unit roundoff, u16 = 2^-8 bf16 unit roundoff,
 * γ = (k+3)·u32 / (1 − (k+3)·u32), S = |α|·Σ_k |a_ik b_kj|):
 *   bf16 inputs:  products exact in fp32, so only the k−1 additions of the
 *                 accumulation, α·acc, β·c and the final add round:
 *                 |Δ| ≤ γ·(S + |β c0|)
 *   fp32 inputs:  each operand first rounds to bf16 (|δ| ≤ u16), a product
 *                 moves by ≤ 2u16 + u16² relative:
 *                 |Δ| ≤ (2u16 + u16²)·S + γ·(1 + 2u16 + u16²)·S + γ·|β c0|
 * A mis-packed operand or a wrong pair order breaks these by orders of
 * magnitude, and the AVX512 kernel must equal pt_bf16_gemm_ref bit for bit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/bf16.h"
#include "tests/unit/bf16_native.h"
#include "tests/unit/child_run.h"
#include "engine/core/rng.h"

static float bits_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof(x));
    return x;
}

/* --- conversions ---------------------------------------------------------- */

static void test_round_to_nearest_even(void **state)
{
    (void)state;
    assert_int_equal(pt_bf16_from_float(1.0f), 0x3f80);
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even 1 */
    assert_int_equal(pt_bf16_from_float(1.0f + 0x1p-8f), 0x3f80);
    /* 1 + 3·2^-8 is halfway between 0x3f81 and 0x3f82: even is 0x3f82 */
    assert_int_equal(pt_bf16_from_float(1.0f + 3 * 0x1p-8f), 0x3f82);
    /* just above the tie rounds up, just below rounds down */
    assert_int_equal(pt_bf16_from_float(bits_float(0x3f808001)), 0x3f81);
    assert_int_equal(pt_bf16_from_float(bits_float(0x3f807fff)), 0x3f80);
    assert_int_equal(pt_bf16_from_float(-2.5f), 0xc020);
    assert_int_equal(pt_bf16_from_float(-0.0f), 0x8000);
    assert_int_equal(pt_bf16_from_float(INFINITY), 0x7f80);
    assert_int_equal(pt_bf16_from_float(-INFINITY), 0xff80);
    /* finite values past bf16's largest round to infinity, like RNE must */
    assert_int_equal(pt_bf16_from_float(bits_float(0x7f7fffff)), 0x7f80);
    assert_int_equal(pt_bf16_from_float(bits_float(0x7f7f7fff)), 0x7f7f);
    /* subnormals round too (0x00008000 is the tie between 0 and 0x0001) */
    assert_int_equal(pt_bf16_from_float(bits_float(0x00008000)), 0x0000);
    assert_int_equal(pt_bf16_from_float(bits_float(0x00018000)), 0x0002);
}

static void test_nan_stays_nan(void **state)
{
    (void)state;
    /* a NaN whose payload sits only in the low 16 bits must not become inf */
    uint16_t h = pt_bf16_from_float(bits_float(0x7f800001));
    assert_int_equal(h, 0x7fc0);
    assert_true(isnan(pt_bf16_to_float(h)));
    h = pt_bf16_from_float(bits_float(0xffffffff)); /* would carry past the sign */
    assert_int_equal(h, 0xffff);
    assert_true(isnan(pt_bf16_to_float(pt_bf16_from_float(NAN))));
}

static void test_every_bf16_round_trips(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float x = pt_bf16_to_float((pt_bf16)h);
        uint32_t u;
        memcpy(&u, &x, sizeof(u));
        assert_int_equal(u, h << 16);
        if (!isnan(x)) assert_int_equal(pt_bf16_from_float(x), h);
        else assert_int_equal(pt_bf16_from_float(x), h | 0x40);
    }
}

static void test_array_conversions_match_scalar(void **state)
{
    (void)state;
    enum { N = 1003 };
    float src[N], back[N];
    pt_bf16 dst[N];
    pt_rng r;
    pt_rng_init(&r, 11, 0);
    for (int i = 0; i < N; i++) src[i] = (float)(pt_rng_normal(&r) * 1e3);
    src[7] = NAN;
    src[8] = INFINITY;
    pt_bf16_from_floats(dst, src, N);
    pt_bf16_to_floats(back, dst, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(dst[i], pt_bf16_from_float(src[i]));
        if (isfinite(src[i])) assert_true(fabsf(back[i] - src[i]) <= 0x1p-8f * fabsf(src[i]));
        else assert_true(isnan(src[i]) ? isnan(back[i]) : back[i] == src[i]);
    }
}

/* --- CPU support ---------------------------------------------------------- */

static int cpuinfo_has(const char *flag)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return -1;
    char line[8192];
    int found = 0;
    while (!found && fgets(line, sizeof(line), f)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        char *tok = strtok(strchr(line, ':') + 1, " \n");
        for (; tok && !found; tok = strtok(NULL, " \n")) found = strcmp(tok, flag) == 0;
        break;
    }
    fclose(f);
    return found;
}

static void test_detection_agrees_with_proc_cpuinfo(void **state)
{
    (void)state;
    int flag = cpuinfo_has("avx512_bf16");
    if (flag < 0) skip();
    pt_cpu_features f;
    pt_cpu_features_get(&f);
    assert_int_equal(f.avx512bf16, flag);
    assert_int_equal(f.avx512f, cpuinfo_has("avx512f"));
    assert_int_equal(pt_cpu_has_bf16(), flag && f.avx512bw && f.avx512vl && f.os_avx512);
}

static void test_explain_messages(void **state)
{
    (void)state;
    char buf[256];
    pt_cpu_features all = {1, 1, 1, 1, 1, 0, 0};
    assert_int_equal(pt_bf16_cpu_explain(&all, buf, sizeof(buf)), 1);
    assert_string_equal(buf, "");

    pt_cpu_features no_bf16 = all;
    no_bf16.avx512bf16 = 0;
    assert_int_equal(pt_bf16_cpu_explain(&no_bf16, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "training.precision \"bf16\" needs a CPU with AVX512-BF16; "
                             "this CPU lacks avx512_bf16 - use \"fp32\"");

    pt_cpu_features none = {0};
    assert_int_equal(pt_bf16_cpu_explain(&none, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "training.precision \"bf16\" needs a CPU with AVX512-BF16; "
                             "this CPU lacks avx512f, avx512bw, avx512vl, avx512_bf16, "
                             "OS support for AVX-512 state - use \"fp32\"");

    no_bf16.hidden = 1;
    pt_bf16_cpu_explain(&no_bf16, buf, sizeof(buf));
    assert_non_null(strstr(buf, "avx512_bf16 (hidden by PACKTRAIN_CPU_HIDE_BF16)"));
}

/* Child mode (re-executed with PACKTRAIN_CPU_HIDE_BF16=1, so detection runs
 * fresh): prints what a CPU without AVX512-BF16 gets. */
static int child_hidden(void)
{
    pt_cpu_features f;
    pt_cpu_features_get(&f);
    char buf[256];
    pt_bf16_cpu_explain(&f, buf, sizeof(buf));
    printf("has=%d\nexplain=%s\n", pt_cpu_has_bf16(), buf);
    printf("force=%s\n", pt_bf16_strerror(pt_bf16_set_kernel(PT_BF16_KERNEL_AVX512)));
    printf("active=%d\n", (int)pt_bf16_kernel_active());
    float a[2] = {1.5f, 2.0f}, b[2] = {4.0f, -1.0f}, c[1] = {0};
    int rc = pt_bf16_sgemm(CblasNoTrans, CblasNoTrans, 1, 1, 2, 1.0f, a, 2, b, 1, 0.0f, c, 1);
    printf("rc=%d c=%g\n", rc, (double)c[0]);
    return 0;
}

static void test_hidden_cpu_is_rejected_with_message(void **state)
{
    (void)state;
    char text[2048];
    child_run("test_bf16", "--child-hidden", "PACKTRAIN_CPU_HIDE_BF16=1", text, sizeof text);
    assert_non_null(strstr(text, "has=0\n"));
    assert_non_null(strstr(text, "explain=training.precision \"bf16\" needs a CPU with "
                                 "AVX512-BF16; this CPU lacks avx512_bf16 (hidden by "
                                 "PACKTRAIN_CPU_HIDE_BF16) - use \"fp32\"\n"));
    assert_non_null(strstr(text, "force=bf16 gemm: this CPU has no AVX512-BF16\n"));
    assert_non_null(strstr(text, "active=2\n"));        /* portable */
    assert_non_null(strstr(text, "rc=0 c=4\n"));         /* 1.5·4 − 2 */
}

/* --- products ------------------------------------------------------------- */

typedef struct shape {
    int m, n, k;
} shape;

/* n's last panel (64 columns a panel) with ≤ 4 columns in its last vector
 * takes bf16_avx512.c's 4-row tail (tile_run_q): 17, 65, 129 (1 lane), 20
 * and 68 (4), 100 and 36 (4 after 2 vectors), 33 (1 after 2), 3 (3) */
static const shape SHAPES[] = {
    {1, 1, 1},    {5, 17, 3},    {7, 15, 2},   {13, 65, 25},  {6, 64, 100},
    {100, 100, 25}, {37, 129, 257}, {12, 33, 600}, {241, 48, 31}, {9, 20, 40},
    {19, 68, 300}, {11, 36, 7},   {4, 3, 5},
};
static const float ALPHA_BETA[][2] = {{1.0f, 0.0f}, {0.5f, 0.0f}, {1.0f, 1.0f}, {-1.5f, 0.25f}};

typedef struct operands {
    int m, n, k, ta, tb, lda, ldb, ldc;
    float *a32, *b32, *c0;
    pt_bf16 *a16, *b16;
} operands;

/* Random operands stored as op says, leading dimensions padded by 3. */
static void operands_init(operands *o, shape s, int ta, int tb, uint64_t seed)
{
    *o = (operands){.m = s.m, .n = s.n, .k = s.k, .ta = ta, .tb = tb};
    o->lda = (ta ? s.m : s.k) + 3;
    o->ldb = (tb ? s.k : s.n) + 3;
    o->ldc = s.n + 3;
    size_t na = (size_t)(ta ? s.k : s.m) * o->lda, nb = (size_t)(tb ? s.n : s.k) * o->ldb;
    size_t nc = (size_t)s.m * o->ldc;
    o->a32 = malloc(na * sizeof(float));
    o->b32 = malloc(nb * sizeof(float));
    o->c0 = malloc(nc * sizeof(float));
    o->a16 = malloc(na * sizeof(pt_bf16));
    o->b16 = malloc(nb * sizeof(pt_bf16));
    assert_true(o->a32 && o->b32 && o->c0 && o->a16 && o->b16);
    pt_rng r;
    pt_rng_init(&r, seed, 0);
    for (size_t i = 0; i < na; i++) o->a32[i] = (float)(2.0 * pt_rng_uniform(&r) - 1.0);
    for (size_t i = 0; i < nb; i++) o->b32[i] = (float)(2.0 * pt_rng_uniform(&r) - 1.0);
    for (size_t i = 0; i < nc; i++) o->c0[i] = (float)(2.0 * pt_rng_uniform(&r) - 1.0);
    pt_bf16_from_floats(o->a16, o->a32, na);
    pt_bf16_from_floats(o->b16, o->b32, nb);
}

static void operands_close(operands *o)
{
    free(o->a32);
    free(o->b32);
    free(o->c0);
    free(o->a16);
    free(o->b16);
}

static double op_a(const operands *o, int i, int kk, int bf)
{
    size_t at = o->ta ? (size_t)kk * o->lda + i : (size_t)i * o->lda + kk;
    return bf ? pt_bf16_to_float(o->a16[at]) : o->a32[at];
}

static double op_b(const operands *o, int kk, int j, int bf)
{
    size_t at = o->tb ? (size_t)j * o->ldb + kk : (size_t)kk * o->ldb + j;
    return bf ? pt_bf16_to_float(o->b16[at]) : o->b32[at];
}

static float *c_copy(const operands *o)
{
    size_t nc = (size_t)o->m * o->ldc;
    float *c = malloc(nc * sizeof(float));
    assert_non_null(c);
    memcpy(c, o->c0, nc * sizeof(float));
    return c;
}

/* Every element within the bound of the header comment; the padding columns
 * of C untouched.  bf = 1: inputs were bf16 already (exact operands). */
static void check_bound(const operands *o, const float *c, float alpha, float beta, int bf)
{
    const double u32 = 0x1p-24, u16 = 0x1p-8, rel = 2 * u16 + u16 * u16;
    const double gamma = (o->k + 3) * u32 / (1 - (o->k + 3) * u32);
    for (int i = 0; i < o->m; i++) {
        for (int j = 0; j < o->n; j++) {
            double exact = 0, s = 0;
            for (int kk = 0; kk < o->k; kk++) {
                double p = op_a(o, i, kk, bf) * op_b(o, kk, j, bf);
                exact += p;
                s += fabs(p);
            }
            double c0 = o->c0[(size_t)i * o->ldc + j];
            double want = alpha * exact + (beta == 0.0f ? 0.0 : beta * c0);
            s *= fabs(alpha);
            double bound = bf ? gamma * (s + fabs(beta * c0))
                              : rel * s + gamma * (1 + rel) * s + gamma * fabs(beta * c0);
            double err = fabs(c[(size_t)i * o->ldc + j] - want);
            if (!(err <= bound))
                fail_msg("m=%d n=%d k=%d ta=%d tb=%d at (%d,%d): |%.9g - %.9g| = %.3g > %.3g",
                         o->m, o->n, o->k, o->ta, o->tb, i, j, (double)c[(size_t)i * o->ldc + j],
                         want, err, bound);
        }
        for (int j = o->n; j < o->ldc; j++)
            assert_memory_equal(&c[(size_t)i * o->ldc + j], &o->c0[(size_t)i * o->ldc + j],
                                sizeof(float));
    }
}

static CBLAS_TRANSPOSE tr(int t) { return t ? CblasTrans : CblasNoTrans; }

/* For each shape, transpose pair and alpha/beta: gemm on bf16 inputs and
 * sgemm on fp32 inputs within their bounds, sgemm equal bit for bit to gemm
 * on the same values pre-rounded (rounding while packing = pt_bf16_from_floats),
 * and, when `exact`, gemm equal to the scalar reference bit for bit. */
static void products_check(int exact)
{
    for (size_t s = 0; s < sizeof(SHAPES) / sizeof(SHAPES[0]); s++)
        for (int t = 0; t < 4; t++)
            for (size_t ab = 0; ab < sizeof(ALPHA_BETA) / sizeof(ALPHA_BETA[0]); ab++) {
                float alpha = ALPHA_BETA[ab][0], beta = ALPHA_BETA[ab][1];
                operands o;
                operands_init(&o, SHAPES[s], t & 1, t >> 1, 100 + s * 8 + (size_t)t);
                float *c16 = c_copy(&o), *c32 = c_copy(&o);
                assert_int_equal(pt_bf16_gemm(tr(o.ta), tr(o.tb), o.m, o.n, o.k, alpha, o.a16,
                                              o.lda, o.b16, o.ldb, beta, c16, o.ldc),
                                 PT_BF16_OK);
                check_bound(&o, c16, alpha, beta, 1);
                assert_int_equal(pt_bf16_sgemm(tr(o.ta), tr(o.tb), o.m, o.n, o.k, alpha, o.a32,
                                               o.lda, o.b32, o.ldb, beta, c32, o.ldc),
                                 PT_BF16_OK);
                check_bound(&o, c32, alpha, beta, 0);
                assert_memory_equal(c16, c32, (size_t)o.m * o.ldc * sizeof(float));
                if (exact) {
                    float *cref = c_copy(&o);
                    pt_bf16_gemm_ref_kernel(native, tr(o.ta), tr(o.tb), o.m, o.n, o.k, alpha, o.a16, o.lda,
                                     o.b16, o.ldb, beta, cref, o.ldc);
                    for (size_t i = 0; i < (size_t)o.m * o.ldc; i++)
                        if (memcmp(&cref[i], &c16[i], sizeof(float)) != 0)
                            fail_msg("m=%d n=%d k=%d t=%d: kernel %.9g != reference %.9g at %zu",
                                     o.m, o.n, o.k, t, (double)c16[i], (double)cref[i], i);
                    free(cref);
                }
                free(c16);
                free(c32);
                operands_close(&o);
            }
}

static void test_avx512_kernel_products(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) skip();
    assert_int_equal(pt_bf16_set_kernel(native), PT_BF16_OK);
    assert_int_equal(pt_bf16_kernel_active(), native);
    products_check(1);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

static void test_portable_products(void **state)
{
    (void)state;
    assert_int_equal(pt_bf16_set_kernel(PT_BF16_KERNEL_PORTABLE), PT_BF16_OK);
    assert_int_equal(pt_bf16_kernel_active(), PT_BF16_KERNEL_PORTABLE);
    products_check(0);
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* the product really is bf16: fp32 sgemm of the same data differs */
static void test_sgemm_rounds_operands(void **state)
{
    (void)state;
    operands o;
    operands_init(&o, (shape){13, 65, 25}, 0, 1, 5);
    float *cb = c_copy(&o), *cf = c_copy(&o);
    pt_bf16_sgemm(CblasNoTrans, CblasTrans, o.m, o.n, o.k, 1.0f, o.a32, o.lda, o.b32, o.ldb,
                  0.0f, cb, o.ldc);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, o.m, o.n, o.k, 1.0f, o.a32, o.lda,
                o.b32, o.ldb, 0.0f, cf, o.ldc);
    double worst = 0;
    for (int i = 0; i < o.m; i++)
        for (int j = 0; j < o.n; j++)
            worst = fmax(worst, fabs(cb[i * o.ldc + j] - cf[i * o.ldc + j]));
    assert_true(worst > 1e-4); /* fp32 products of these agree to ~1e-6 */
    free(cb);
    free(cf);
    operands_close(&o);
}

/* Splitting rows over threads (and packing B over threads) changes no bit. */
static void test_threads_change_no_bit(void **state)
{
    (void)state;
    operands o;
    operands_init(&o, (shape){100, 100, 1400}, 1, 0, 9); /* dW = dYᵀ·X */
    float *c1 = c_copy(&o), *c2 = c_copy(&o);
    pt_bf16_set_threads(1);
    pt_bf16_sgemm(CblasTrans, CblasNoTrans, o.m, o.n, o.k, 1.0f, o.a32, o.lda, o.b32, o.ldb,
                  1.0f, c1, o.ldc);
    pt_bf16_set_threads(2);
    assert_int_equal(pt_bf16_get_threads(), 2);
    pt_bf16_sgemm(CblasTrans, CblasNoTrans, o.m, o.n, o.k, 1.0f, o.a32, o.lda, o.b32, o.ldb,
                  1.0f, c2, o.ldc);
    pt_bf16_set_threads(0);
    assert_int_equal(pt_bf16_get_threads(), 1);
    assert_memory_equal(c1, c2, (size_t)o.m * o.ldc * sizeof(float));
    check_bound(&o, c2, 1.0f, 1.0f, 0);
    free(c1);
    free(c2);
    operands_close(&o);
}

/* A packed B gives the same bits as sgemm; update re-packs new values. */
static void packed_check(void)
{
    for (int tb = 0; tb < 2; tb++) {
        operands o;
        operands_init(&o, (shape){29, 100, 25}, 0, tb, 21 + (uint64_t)tb);
        pt_bf16_packed p;
        assert_int_equal(pt_bf16_pack_init(&p, tr(tb), o.k, o.n, o.b32, o.ldb), PT_BF16_OK);
        float *cp = c_copy(&o), *cs = c_copy(&o);
        assert_int_equal(pt_bf16_gemm_packed(CblasNoTrans, o.m, 0.5f, o.a32, o.lda, &p, 0.25f,
                                             cp, o.ldc),
                         PT_BF16_OK);
        pt_bf16_sgemm(CblasNoTrans, tr(tb), o.m, o.n, o.k, 0.5f, o.a32, o.lda, o.b32, o.ldb,
                      0.25f, cs, o.ldc);
        assert_memory_equal(cp, cs, (size_t)o.m * o.ldc * sizeof(float));
        size_t nb = (size_t)(tb ? o.n : o.k) * o.ldb;
        for (size_t i = 0; i < nb; i++) o.b32[i] = -2.0f * o.b32[i];
        assert_int_equal(pt_bf16_pack_update(&p, o.b32, o.ldb), PT_BF16_OK);
        memcpy(cp, o.c0, (size_t)o.m * o.ldc * sizeof(float));
        pt_bf16_gemm_packed(CblasNoTrans, o.m, 0.5f, o.a32, o.lda, &p, 0.25f, cp, o.ldc);
        check_bound(&o, cp, 0.5f, 0.25f, 0);
        pt_bf16_pack_close(&p);
        assert_null(p.data);
        free(cp);
        free(cs);
        operands_close(&o);
    }
}

static void test_packed_b_avx512(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) skip();
    pt_bf16_set_kernel(native);
    packed_check();
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

static void test_packed_b_portable(void **state)
{
    (void)state;
    pt_bf16_set_kernel(PT_BF16_KERNEL_PORTABLE);
    packed_check();
    pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
}

/* The vector packer and the scalar one write the same layout, padding too. */
static void test_packers_agree(void **state)
{
    (void)state;
    if (!pt_cpu_has_bf16()) skip();
    for (int tb = 0; tb < 2; tb++) {
        operands o;
        operands_init(&o, (shape){1, 81, 7}, 0, tb, 3);
        pt_bf16_packed pv, ps;
        pt_bf16_set_kernel(native);
        assert_int_equal(pt_bf16_pack_init(&pv, tr(tb), o.k, o.n, o.b32, o.ldb), PT_BF16_OK);
        pt_bf16_set_kernel(PT_BF16_KERNEL_PORTABLE);
        assert_int_equal(pt_bf16_pack_init(&ps, tr(tb), o.k, o.n, o.b32, o.ldb), PT_BF16_OK);
        pt_bf16_set_kernel(PT_BF16_KERNEL_AUTO);
        assert_int_equal(pv.pairs, (size_t)4 * (64 + 32)); /* 4 pairs × (64 + 17→32) */
        assert_memory_equal(pv.data, ps.data, pv.pairs * sizeof(uint32_t));
        /* column 80 pair 3: B(6, 80) low, nothing high (k = 7 is odd) */
        uint32_t last = pv.data[4 * 64 + 3 * 32 + 16];
        assert_int_equal(last, pt_bf16_from_float((float)op_b(&o, 6, 80, 0)));
        assert_int_equal(pv.data[4 * 64 + 3 * 32 + 17], 0);
        pt_bf16_pack_close(&pv);
        pt_bf16_pack_close(&ps);
        operands_close(&o);
    }
}

static void test_degenerate_sizes(void **state)
{
    (void)state;
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 1, 1, 1};
    float c[4] = {1, 2, 3, 4};
    /* m = 0 or n = 0: nothing written */
    assert_int_equal(pt_bf16_sgemm(CblasNoTrans, CblasNoTrans, 0, 2, 2, 1, a, 2, b, 2, 0, c, 2), 0);
    assert_int_equal(pt_bf16_sgemm(CblasNoTrans, CblasNoTrans, 2, 0, 2, 1, a, 2, b, 1, 0, c, 1), 0);
    assert_true(c[0] == 1 && c[3] == 4);
    /* k = 0 and alpha = 0 scale C by beta */
    assert_int_equal(pt_bf16_sgemm(CblasNoTrans, CblasNoTrans, 2, 2, 0, 1, a, 1, b, 2, 2, c, 2), 0);
    assert_true(c[0] == 2 && c[3] == 8);
    pt_bf16_sgemm(CblasNoTrans, CblasNoTrans, 2, 2, 2, 0, a, 2, b, 2, 0.5f, c, 2);
    assert_true(c[0] == 1 && c[3] == 4);
    /* beta = 0 never reads C: NaN there does not leak */
    for (int i = 0; i < 4; i++) c[i] = NAN;
    pt_bf16_sgemm(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2);
    assert_true(c[0] == 3 && c[1] == 3 && c[2] == 7 && c[3] == 7);
    for (int i = 0; i < 4; i++) c[i] = NAN;
    pt_bf16_sgemm(CblasNoTrans, CblasNoTrans, 2, 2, 0, 1, a, 1, b, 2, 0, c, 2);
    assert_true(c[0] == 0 && c[3] == 0);
}

static void test_error_messages(void **state)
{
    (void)state;
    float a[16] = {0}, b[16] = {0}, c[16] = {0};
    pt_bf16 h[16] = {0};
    CBLAS_TRANSPOSE bad = (CBLAS_TRANSPOSE)200;
    int rc = pt_bf16_sgemm(bad, CblasNoTrans, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2);
    assert_string_equal(pt_bf16_strerror(rc),
                         "bf16 gemm: transpose flag must be CblasNoTrans or CblasTrans");
    rc = pt_bf16_gemm(CblasNoTrans, CblasNoTrans, -1, 2, 2, 1, h, 2, h, 2, 0, c, 2);
    assert_string_equal(pt_bf16_strerror(rc), "bf16 gemm: m, n and k must not be negative");
    rc = pt_bf16_sgemm(CblasNoTrans, CblasNoTrans, 2, 2, 3, 1, a, 2, b, 2, 0, c, 2);
    assert_string_equal(pt_bf16_strerror(rc), "bf16 gemm: lda is smaller than a stored row of A");
    rc = pt_bf16_sgemm(CblasTrans, CblasNoTrans, 3, 2, 2, 1, a, 2, b, 2, 0, c, 2);
    assert_int_equal(rc, PT_BF16_ELDA); /* stored Aᵀ rows have m = 3 entries */
    rc = pt_bf16_sgemm(CblasNoTrans, CblasTrans, 2, 2, 3, 1, a, 3, b, 2, 0, c, 2);
    assert_string_equal(pt_bf16_strerror(rc), "bf16 gemm: ldb is smaller than a stored row of B");
    rc = pt_bf16_sgemm(CblasNoTrans, CblasNoTrans, 2, 3, 2, 1, a, 2, b, 3, 0, c, 2);
    assert_string_equal(pt_bf16_strerror(rc), "bf16 gemm: ldc is smaller than n");
    rc = pt_bf16_sgemm(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1, NULL, 2, b, 2, 0, c, 2);
    assert_string_equal(pt_bf16_strerror(rc), "bf16 gemm: a, b or c is NULL");
    rc = pt_bf16_gemm(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1, h, 2, h, 2, 0, NULL, 2);
    assert_int_equal(rc, PT_BF16_ENULL);
    /* a NULL A is fine when alpha = 0: the product is never formed */
    assert_int_equal(pt_bf16_sgemm(CblasNoTrans, CblasNoTrans, 2, 2, 2, 0, NULL, 2, NULL, 2, 0,
                                   c, 2),
                     PT_BF16_OK);
    /* sizes that would need more than PT_BF16_MAX_PACK fail before allocating or reading */
    rc = pt_bf16_sgemm(CblasNoTrans, CblasNoTrans, 1, 1 << 30, 1 << 30, 1, a, 1 << 30, b,
                       1 << 30, 0, c, 1 << 30);
    assert_string_equal(pt_bf16_strerror(rc),
                        "bf16 gemm: operands too large to pack (more than 16 GiB)");
    pt_bf16_packed p;
    rc = pt_bf16_pack_init(&p, CblasNoTrans, 1 << 30, 1 << 30, b, 1 << 30);
    assert_int_equal(rc, PT_BF16_ETOOBIG);
    assert_null(p.data);
    assert_int_equal(pt_bf16_pack_init(&p, bad, 2, 2, b, 2), PT_BF16_ETRANS);
    assert_int_equal(pt_bf16_pack_init(&p, CblasNoTrans, -2, 2, b, 2), PT_BF16_EDIM);
    assert_int_equal(pt_bf16_pack_init(&p, CblasTrans, 4, 2, b, 2), PT_BF16_ELDB);
    assert_null(p.data);
    assert_int_equal(pt_bf16_pack_init(&p, CblasNoTrans, 2, 2, NULL, 2), PT_BF16_ENULL);
    /* a closed (or never initialised) packed B */
    rc = pt_bf16_gemm_packed(CblasNoTrans, 2, 1, a, 2, &p, 0, c, 2);
    assert_string_equal(pt_bf16_strerror(rc), "bf16 gemm: packed B is not initialised");
    assert_int_equal(pt_bf16_pack_update(&p, b, 2), PT_BF16_EPACKED);
    assert_int_equal(pt_bf16_gemm_packed(CblasNoTrans, 2, 1, a, 2, NULL, 0, c, 2),
                     PT_BF16_EPACKED);
    assert_int_equal(pt_bf16_pack_init(&p, CblasNoTrans, 2, 2, b, 2), PT_BF16_OK);
    assert_int_equal(pt_bf16_gemm_packed(CblasNoTrans, 2, 1, a, 1, &p, 0, c, 2), PT_BF16_ELDA);
    assert_int_equal(pt_bf16_pack_update(&p, b, 1), PT_BF16_ELDB);
    pt_bf16_pack_close(&p);
    assert_string_equal(pt_bf16_strerror(PT_BF16_ENOMEM),
                        "bf16 gemm: out of memory for the packed operands");
    assert_string_equal(pt_bf16_strerror(42), "bf16 gemm: unknown error");
    assert_string_equal(pt_bf16_strerror(PT_BF16_OK), "ok");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child-hidden") == 0) return child_hidden();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_to_nearest_even),
        cmocka_unit_test(test_nan_stays_nan),
        cmocka_unit_test(test_every_bf16_round_trips),
        cmocka_unit_test(test_array_conversions_match_scalar),
        cmocka_unit_test(test_detection_agrees_with_proc_cpuinfo),
        cmocka_unit_test(test_explain_messages),
        cmocka_unit_test(test_hidden_cpu_is_rejected_with_message),
        NATIVE_TESTS(test_avx512_kernel_products),
        cmocka_unit_test(test_portable_products),
        cmocka_unit_test(test_sgemm_rounds_operands),
        cmocka_unit_test(test_threads_change_no_bit),
        NATIVE_TESTS(test_packed_b_avx512),
        cmocka_unit_test(test_packed_b_portable),
        NATIVE_TESTS(test_packers_agree),
        cmocka_unit_test(test_degenerate_sizes),
        cmocka_unit_test(test_error_messages),
    };
    return cmocka_run_group_tests_name("bf16", tests, NULL, NULL);
}
