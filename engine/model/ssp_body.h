/* ssp_body.h — the shifted softplus and its derivative, spelled once for
 * every instruction set (ssp_kernels.c: scalar, the reference and the
 * tails; ssp_avx512.c, ssp_avx2.c).  The includer defines T (float, __m256,
 * __m512), the operations below on T, SSP_U (vectors in flight per step)
 * and SSP_FN(name); every operation is one IEEE operation with one
 * rounding (fused multiply-adds written as such, never left to
 * contraction), so each lane of a vector gets the scalar bits.
 *
 *   t = e^−|v|   (Cody-Waite: v·log2 e rounded to n by 1.5·2^23, r = x − n ln2
 *                 in two parts, e^r = 1 + r + r²·P(r) with a degree-4
 *                 minimax P, n added to the exponent field; |v| ≥ 87 gives
 *                 e^−87, 0 for every use here)
 *   σ = ssp'(v) = (v ≥ 0 ? 1 : t) / (1 + t)         (one division)
 *   ssp(v) = log1p(t) + max(v, 0) − ln 2,  log1p(t) = s·2Q(s²), s = t/(2+t)
 *                 (2 atanh(s) with a degree-4 minimax Q on s² ≤ 1/9)
 *
 * Errors against double over every float (all 2^32 inputs, 2026-11-26; the
 * three implementations agree on every one of them): ssp ≤ 3.62 u ·
 * max(|ssp|, ln 2) (u = 2^−24; the shift makes the error absolute near 0,
 * worst at v ≈ −2.8e−3), σ ≤ 2.97 u · σ (+ 2e−38 where e^−|v| is clamped);
 * asserted on a sweep of the whole range in tests/unit/test_ssp_kernels.c.
 * ssp(0) = 0 exactly (the sum is rounded before ln 2 is subtracted, which
 * is exact there), ssp(+inf) = +inf, ssp(−inf) = −ln 2, ssp(NaN) = NaN
 * (max(0, v) passes a NaN through).
 *
 * The steps are written over SSP_U independent vectors at once: the chain
 * of one vector is ~30 dependent operations, and the scheduler keeps the
 * pipes busy only when several chains are interleaved in program order (a
 * loop over vectors one at a time runs them back to back).  Eight vectors
 * per step: 0.315 → 0.218 ns per element with σ on AVX-512
 * (bench/elementwise_rate, thread CPU time). */

#define SSP_EACH for (int j = 0; j < SSP_U; j++)

/* v[0..U) in; out ← ssp(v), sig ← σ(v) (sig NULL: not computed; the
 * values are the same either way). */
static inline __attribute__((always_inline)) void SSP_FN(step)(const T *v, T *out, T *sig)
{
    T x[SSP_U], big[SSP_U], fn[SSP_U], r[SSP_U], p[SSP_U], t[SSP_U], s[SSP_U], z[SSP_U],
        q[SSP_U];
    SSP_EACH x[j] = VMAX(VNEGABS(v[j]), VSET1(-87.0f));
    SSP_EACH big[j] = VFMA(x[j], VSET1(1.44269504088896341f), VSET1(12582912.0f));
    SSP_EACH fn[j] = VSUB(big[j], VSET1(12582912.0f));
    SSP_EACH r[j] = VFMA(fn[j], VSET1(-0.693359375f), x[j]);
    SSP_EACH r[j] = VFMA(fn[j], VSET1(2.12194440e-4f), r[j]);
    SSP_EACH p[j] = VFMA(VSET1(1.381461276e-3f), r[j], VSET1(8.368710056e-3f));
    SSP_EACH p[j] = VFMA(p[j], r[j], VSET1(4.166838899e-2f));
    SSP_EACH p[j] = VFMA(p[j], r[j], VSET1(1.666652113e-1f));
    SSP_EACH p[j] = VFMA(p[j], r[j], VSET1(4.999999404e-1f));
    SSP_EACH p[j] = VMUL(p[j], r[j]);
    SSP_EACH p[j] = VADD(VFMA(p[j], r[j], r[j]), VSET1(1.0f));
    /* p·2^n: big's low bits hold n (two's complement over 1.5·2^23), and
     * shifted left by 23 only n remains, in the exponent field; the result
     * stays normal (n = −126 only with r > 0.34, p > 1.4) */
    SSP_EACH t[j] = VSCALE(p[j], big[j]);
    if (sig)
        SSP_EACH sig[j] = VDIV(VSEL_GE0(v[j], VSET1(1.0f), t[j]), VADD(VSET1(1.0f), t[j]));
    SSP_EACH s[j] = VDIV(t[j], VADD(VSET1(2.0f), t[j]));
    SSP_EACH z[j] = VMUL(s[j], s[j]);
    SSP_EACH q[j] = VFMA(VSET1(2.801199257e-1f), z[j], VSET1(2.800180316e-1f));
    SSP_EACH q[j] = VFMA(q[j], z[j], VSET1(4.002152681e-1f));
    SSP_EACH q[j] = VFMA(q[j], z[j], VSET1(6.666641831e-1f));
    SSP_EACH q[j] = VFMA(q[j], z[j], VSET1(2.0f));
    SSP_EACH out[j] = VSUB(VFMA(s[j], q[j], VMAX(VSET1(0.0f), v[j])), VSET1(0.69314718f));
}

#undef SSP_EACH
