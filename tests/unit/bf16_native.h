/* bf16_native.h — the native bf16 kernel a test of the products runs on:
 * the tests of bf16's kernels (test_bf16*.c) run each product test twice,
 * on AVX512-BF16 (set_up_avx512) and on AMX (set_up_amx), so both kernels
 * are checked on a CPU that has both.  Where AMX is not usable the second
 * run is on AVX512-BF16 again (what AUTO runs there), not a skip.  There,
 * the AMX tests check that AMX is refused instead (amx_refused_here).
 * Static inline (and `native` marked unused): a file takes what it uses. */
#ifndef PT_TEST_BF16_NATIVE_H
#define PT_TEST_BF16_NATIVE_H

#include "engine/model/bf16.h"

__attribute__((unused)) static pt_bf16_kernel native = PT_BF16_KERNEL_AVX512;

static inline int set_up_avx512(void **state)
{
    (void)state;
    native = PT_BF16_KERNEL_AVX512;
    return 0;
}

static inline int set_up_amx(void **state)
{
    (void)state;
    native = pt_cpu_has_amx() ? PT_BF16_KERNEL_AMX : PT_BF16_KERNEL_AVX512;
    return 0;
}

/* Where the CPU has no usable AMX, forcing it is refused and AUTO runs
 * another kernel (both checked): returns 1 then, and the caller's AMX
 * checks end there; 0 where AMX can run. */
static inline int amx_refused_here(void)
{
    if (pt_cpu_has_amx()) return 0;
    assert_int_equal(pt_bf16_set_kernel(PT_BF16_KERNEL_AMX), PT_BF16_ENOCPU);
    assert_true(pt_bf16_kernel_active() != PT_BF16_KERNEL_AMX);
    return 1;
}

/* cmocka entries of test f on each kernel */
#define NATIVE_TESTS(f)                                                                       \
    {#f, f, set_up_avx512, NULL, NULL}, { #f " (amx)", f, set_up_amx, NULL, NULL }

#endif
