/* test_bf16_ssp_table.c — the generator of the bf16 softplus table
 * (engine/model/bf16_ssp_table_gen.c) against what is committed:
 *   - its text (fit, sweep, header) equals engine/model/bf16_ssp_table.h
 *     byte for byte (a coefficient edited by hand, a changed fit or a stale
 *     header fails here; the first differing line is printed);
 *   - the worst error of the float evaluation over x = 0..40 (step 1e-5)
 *     is printed and is within the stated bound, 3e-6 (and not 0: the
 *     sweep ran);
 *   - the arrays the kernels compile (the header included with BSSP_FN)
 *     are the fit's floats bit for bit;
 *   - pt_bf16_ssp_table_eval is the kernel's evaluation: its bits equal
 *     pt_bf16_ssp_ref(−x) (ssp~ at v ≤ 0 is the polynomial alone) over
 *     x = 0..40 and at the clamp, so the sweep measures what ships;
 *   - a stream that cannot be written makes pt_bf16_ssp_table_write
 *     return -1.
 * Run from the repository root (tests/run_unit.sh does). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/bf16_ssp.h"
#include "engine/model/bf16_ssp_table_gen.h"

#define HEADER_PATH "engine/model/bf16_ssp_table.h"

/* the committed arrays, as the kernels' includers see them */
#define BSSP_FN(name) committed_##name
#include "engine/model/bf16_ssp_table.h"
#undef BSSP_FN

static pt_bssp_coefs fit;
static double worst, worst_x;

static int fit_once(void **state)
{
    (void)state;
    pt_bf16_ssp_table_fit(fit);
    worst = pt_bf16_ssp_table_sweep(fit, &worst_x);
    return 0;
}

static char *read_all(FILE *f, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    *len = n;
    return buf;
}

static void print_first_difference(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t i = 0, line = 1, start = 0;
    while (i < alen && i < blen && a[i] == b[i]) {
        if (a[i] == '\n') {
            line++;
            start = i + 1;
        }
        i++;
    }
    const char *ae = memchr(a + start, '\n', alen - start);
    const char *be = memchr(b + start, '\n', blen - start);
    int al = (int)(ae ? (size_t)(ae - a) - start : alen - start);
    int bl = (int)(be ? (size_t)(be - b) - start : blen - start);
    fprintf(stderr, "%s:%zu differs from the generator's text:\n  committed: %.*s\n  generated: %.*s\n",
            HEADER_PATH, line, al, a + start, bl, b + start);
}

static void test_header_bytes(void **state)
{
    (void)state;
    char *gen = NULL;
    size_t glen = 0;
    FILE *mem = open_memstream(&gen, &glen);
    assert_non_null(mem);
    assert_int_equal(pt_bf16_ssp_table_write(mem, fit, worst, worst_x), 0);
    fclose(mem);

    FILE *f = fopen(HEADER_PATH, "rb");
    if (!f) fprintf(stderr, "cannot open %s (run from the repository root)\n", HEADER_PATH);
    assert_non_null(f);
    size_t clen;
    char *committed = read_all(f, &clen);
    fclose(f);

    printf("bf16_ssp_table: generated %zu bytes, committed %zu\n", glen, clen);
    const int same = glen == clen && memcmp(gen, committed, glen) == 0;
    if (!same) print_first_difference(committed, clen, gen, glen);
    assert_true(same);
    free(gen);
    free(committed);
}

static void test_sweep_bound(void **state)
{
    (void)state;
    printf("bf16_ssp_table: worst |f~ - f| over x = 0..%.0f: %.3g at x = %.6g (bound %.0e)\n",
           PT_BSSP_TABLE_SWEEP_MAX, worst, worst_x, PT_BSSP_TABLE_BOUND);
    assert_true(worst > 0);
    assert_true(worst <= PT_BSSP_TABLE_BOUND);
}

static void test_compiled_arrays(void **state)
{
    (void)state;
    const float *tabs[PT_BSSP_TABLE_DEG + 1] = {committed_c0, committed_c1, committed_c2,
                                                committed_c3};
    for (int j = 0; j <= PT_BSSP_TABLE_DEG; j++)
        assert_memory_equal(tabs[j], fit[j], sizeof fit[j]);
}

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static void test_eval_is_kernel(void **state)
{
    (void)state;
    for (int i = 0; i <= 400000; i++) {
        const float x = (float)(i * 1e-4);
        assert_int_equal(bits_of(pt_bf16_ssp_table_eval(fit, x)), bits_of(pt_bf16_ssp_ref(-x)));
    }
    const float edges[] = {PT_BSSP_TABLE_XMAX, nextafterf(PT_BSSP_TABLE_XMAX, 0.0f),
                           nextafterf(PT_BSSP_TABLE_XMAX, 16.0f), 15.75f, 0.25f, 0.75f,
                           nextafterf(0.25f, 0.0f), 1e30f, INFINITY};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        assert_int_equal(bits_of(pt_bf16_ssp_table_eval(fit, edges[i])),
                         bits_of(pt_bf16_ssp_ref(-edges[i])));
}

static void test_write_error(void **state)
{
    (void)state;
    FILE *ro = fopen("/dev/null", "r");
    assert_non_null(ro);
    assert_int_equal(pt_bf16_ssp_table_write(ro, fit, worst, worst_x), -1);
    fclose(ro);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_bytes),
        cmocka_unit_test(test_sweep_bound),
        cmocka_unit_test(test_compiled_arrays),
        cmocka_unit_test(test_eval_is_kernel),
        cmocka_unit_test(test_write_error),
    };
    return cmocka_run_group_tests(tests, fit_once, NULL);
}
