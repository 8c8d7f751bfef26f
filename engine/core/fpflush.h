/* fpflush.h — a scope in which the CPU flushes subnormal float results to
 * zero and reads subnormal operands as zero (x86's MXCSR FTZ and DAZ bits),
 * for the few products whose operands or partial sums fall below 2^-126.
 *
 * Why: an Intel core (this project's Xeon with AMX) runs an instruction
 * that reads or produces a subnormal through a microcode assist, roughly a
 * hundred cycles instead of one; AMD's Zen cores do not.  Two products of
 * the force passes meet them on every row (schnet_forces.c: the filter's
 * derivative A1 e' from a chain started at 0 over Gaussians that are ~1e-38
 * far from the distance, and dA1's half over ė = e' λ, 0.3–21% subnormal on
 * EMT), and took 60% of an energy+forces step there.
 *
 * What it changes: a subnormal result or operand is below 2^-126, so it can
 * move a later sum of magnitude s only when s + δ (|δ| < 2^-126 per
 * flushed term) crosses a rounding midpoint of s, i.e. when s itself is
 * within a few subnormals of a midpoint: for sums dominated by normal terms
 * (these products' results are 1e-8..1 where the rows are near a Gaussian)
 * the bits are those of IEEE arithmetic; tests/unit/test_schnet_forces_flush.c
 * checks this bit for bit on real EMT and water force steps.
 *
 * Per thread (MXCSR is), restored on leaving; a no-op off x86. */
#ifndef PT_FPFLUSH_H
#define PT_FPFLUSH_H

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define PT_MXCSR_FTZ_DAZ 0x8040u

static inline unsigned pt_flush_begin(int on)
{
    unsigned old = _mm_getcsr();
    if (on) _mm_setcsr(old | PT_MXCSR_FTZ_DAZ);
    return old;
}

static inline void pt_flush_end(unsigned old)
{
    _mm_setcsr(old);
}
#else
static inline unsigned pt_flush_begin(int on)
{
    (void)on;
    return 0;
}

static inline void pt_flush_end(unsigned old)
{
    (void)old;
}
#endif

#endif
