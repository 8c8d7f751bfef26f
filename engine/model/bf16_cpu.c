/* bf16_cpu.c — fp32 <-> bf16 conversions, detection of AVX512-BF16 and of
 * AMX-BF16 (with the OS's permission for tile data), the message saying what
 * a CPU lacks, and the process-wide kernel and thread settings of the
 * products (bf16.h). */
#include "engine/model/bf16.h"
#include "engine/model/bf16_internal.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif


/* --- conversions ---------------------------------------------------------- */

pt_bf16 pt_bf16_from_float(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof(u));
    return pt_bf16_round_bits(u);
}

float pt_bf16_to_float(pt_bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof(x));
    return x;
}

void pt_bf16_from_floats(pt_bf16 *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = pt_bf16_from_float(src[i]);
}

void pt_bf16_to_floats(float *dst, const pt_bf16 *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = pt_bf16_to_float(src[i]);
}

/* --- CPU support ---------------------------------------------------------- */

static pt_cpu_features g_cpu;
static pthread_once_t g_cpu_once = PTHREAD_ONCE_INIT;

/* XCR0 bits 1, 2 (SSE, AVX) and 5, 6, 7 (opmask, ZMM0-15 upper, ZMM16-31):
 * without all of them the OS does not save AVX-512 registers on a switch. */
#define XCR0_AVX512 0xe6u
/* XCR0 bits 17, 18: tile configuration and tile data */
#define XCR0_AMX (3u << 17)

/* Linux gives a process AMX tile data (8 KB more per thread's saved state)
 * only once asked: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), per
 * process, for every thread (the tiles' configuration is per thread:
 * bf16_amx.c).  1 when granted. */
static int amx_permission(void)
{
#if defined(__linux__) && defined(SYS_arch_prctl)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */,
                   18 /* XFEATURE_XTILEDATA */) == 0;
#else
    return 0;
#endif
}

static void cpu_detect(void)
{
    unsigned a, b, c, d;
    pt_cpu_features f = {0};
    if (__get_cpuid(1, &a, &b, &c, &d) && (c >> 27 & 1u)) { /* OSXSAVE */
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        f.os_avx512 = (lo & XCR0_AVX512) == XCR0_AVX512;
        f.os_amx = (lo & XCR0_AMX) == XCR0_AMX;
    }
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        f.avx512f = b >> 16 & 1u;
        f.avx512bw = b >> 30 & 1u;
        f.avx512vl = b >> 31 & 1u;
        f.amx_bf16 = d >> 22 & 1u;
        f.amx_tile = d >> 24 & 1u;
        unsigned max_sub = a;
        if (max_sub >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512bf16 = a >> 5 & 1u;
    }
    const char *hide = getenv("PACKTRAIN_CPU_HIDE_BF16");
    if (hide && *hide && strcmp(hide, "0") != 0) {
        f.hidden = 1;
        f.avx512bf16 = 0;
    }
    const char *hide_amx = getenv("PACKTRAIN_CPU_HIDE_AMX");
    if (hide_amx && *hide_amx && strcmp(hide_amx, "0") != 0) {
        f.amx_hidden = 1;
        f.amx_bf16 = 0;
    }
    /* asked only where the tiles could run (the products' other work is
     * AVX512-BF16's) */
    if (f.amx_bf16 && f.amx_tile && f.os_amx && f.avx512bf16 && f.os_avx512 && f.avx512bw &&
        f.avx512vl)
        f.amx = amx_permission();
    g_cpu = f;
}

void pt_cpu_features_get(pt_cpu_features *f)
{
    pthread_once(&g_cpu_once, cpu_detect);
    *f = g_cpu;
}

int pt_bf16_cpu_explain(const pt_cpu_features *f, char *buf, size_t len)
{
    char lacks[128] = "";
    const struct { int have; const char *name; } need[] = {
        {f->avx512f, "avx512f"},     {f->avx512bw, "avx512bw"},
        {f->avx512vl, "avx512vl"},   {f->avx512bf16, "avx512_bf16"},
        {f->os_avx512, "OS support for AVX-512 state"},
    };
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        if (need[i].have) continue;
        size_t used = strlen(lacks);
        snprintf(lacks + used, sizeof(lacks) - used, "%s%s", used ? ", " : "", need[i].name);
    }
    if (!lacks[0]) {
        if (len) buf[0] = '\0';
        return 1;
    }
    snprintf(buf, len,
             "training.precision \"bf16\" needs a CPU with AVX512-BF16; this CPU lacks %s%s"
             " - use \"fp32\"",
             lacks, f->hidden ? " (hidden by PACKTRAIN_CPU_HIDE_BF16)" : "");
    return 0;
}

int pt_cpu_has_bf16(void)
{
    pt_cpu_features f;
    pt_cpu_features_get(&f);
    char unused[1];
    return pt_bf16_cpu_explain(&f, unused, sizeof(unused));
}

int pt_cpu_has_amx(void)
{
    pt_cpu_features f;
    pt_cpu_features_get(&f);
    return f.amx && pt_cpu_has_bf16();
}

/* --- settings ------------------------------------------------------------- */

static atomic_int g_kernel = PT_BF16_KERNEL_AUTO;
static atomic_int g_threads = 1;

int pt_bf16_set_kernel(pt_bf16_kernel kernel)
{
    if (kernel == PT_BF16_KERNEL_AVX512 && !pt_cpu_has_bf16()) return PT_BF16_ENOCPU;
    if (kernel == PT_BF16_KERNEL_AMX && !pt_cpu_has_amx()) return PT_BF16_ENOCPU;
    if (kernel != PT_BF16_KERNEL_AUTO && kernel != PT_BF16_KERNEL_AVX512 &&
        kernel != PT_BF16_KERNEL_PORTABLE && kernel != PT_BF16_KERNEL_AMX)
        kernel = PT_BF16_KERNEL_AUTO;
    atomic_store(&g_kernel, (int)kernel);
    return PT_BF16_OK;
}

pt_bf16_kernel pt_bf16_kernel_active(void)
{
    int k = atomic_load(&g_kernel);
    if (k == PT_BF16_KERNEL_AUTO)
        return pt_cpu_has_amx()    ? PT_BF16_KERNEL_AMX
               : pt_cpu_has_bf16() ? PT_BF16_KERNEL_AVX512
                                   : PT_BF16_KERNEL_PORTABLE;
    return (pt_bf16_kernel)k;
}

int pt_bf16_kernel_native(void)
{
    const pt_bf16_kernel k = pt_bf16_kernel_active();
    return k == PT_BF16_KERNEL_AVX512 || k == PT_BF16_KERNEL_AMX;
}

void pt_bf16_set_threads(int threads)
{
    if (threads > PT_BF16_MAX_THREADS) threads = PT_BF16_MAX_THREADS;
    atomic_store(&g_threads, threads < 1 ? 1 : threads);
}

static atomic_int g_fusion = 1;

void pt_bf16_set_fusion(int on) { atomic_store(&g_fusion, on != 0); }

int pt_bf16_fusion(void) { return atomic_load(&g_fusion); }

int pt_bf16_get_threads(void) { return atomic_load(&g_threads); }

