/* simd.h — PT_SIMD_CLONES: one elementwise loop built for AVX-512 and for the
 * build's instruction set, the CPU choosing at load time.
 *
 * A function marked PT_SIMD_CLONES is compiled twice — for the build's
 * instruction set (x86-64-v3, AVX2) and for x86-64-v4 (AVX-512) — and the
 * dynamic loader picks one for the CPU it runs on (gcc's target_clones: an
 * ifunc).  The release build stays portable while an AVX-512 CPU runs 16
 * lanes per instruction instead of 8.  The loops it is used on perform the
 * same operations in the same order on each element (vector width only
 * changes how many elements go at once; every sum over rows keeps its row
 * order), so a result does not depend on the clone taken.  Not with clang
 * (make fuzz builds with it): clang 14 names a clone set's ifunc
 * "NAME.ifunc", so calls from other files do not link; there the build's
 * instruction set alone is used. */
#ifndef PT_SIMD_H
#define PT_SIMD_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PT_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "default")))
#else
#define PT_SIMD_CLONES
#endif

#endif
