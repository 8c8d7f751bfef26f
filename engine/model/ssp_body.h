/* ssp_body.h — the shifted softplus, its derivative, and the derivative
 * recovered from the softplus, spelled once for every instruction set
 * (ssp_kernels.c: scalar, the reference and the tails; ssp_avx512.c,
 * ssp_avx2.c).  The includer defines T (float, __m256, __m512), the
 * operations below on T, SSP_U (vectors in flight per step) and
 * SSP_FN(name); every operation is one IEEE operation with one rounding
 * (fused multiply-adds written as such, never left to contraction), and
 * VLUT(row, key) is an exact table read (ssp_table.h: one 8-entry permute,
 * vpermps, on AVX2; the same on AVX-512 from the row written twice; an
 * array index in scalar code), so each lane of a vector gets the scalar bits.
 *
 *   ssp(v) = max(v, 0) + H_k(r),  t = min(|v|, 20.5), k the interval of t
 *            picked by the exponent and first mantissa bit of x = 1 + t S
 *            (S = (float)(8/11): t in [0, 0.6875), [0.6875, 1.375),
 *            [1.375, 2.75), … [15.125, 20.5], widening as ln(1 + e^−t)
 *            falls off), r = m_k − t (exact: m_k a short float, |r| ≤ t),
 *            H_k ≈ ln(1 + e^−t) − ln 2 a degree-7 polynomial per interval
 *            (ssp_table.py: 8 Chebyshev fits).  8 intervals, so that AVX2's
 *            one-register permute picks the coefficients (session 10's 32
 *            degree-5 intervals needed AVX-512's two-register permute and
 *            made AVX2 gather, 2x slower than the exp form).  No exp, no
 *            log, no division: 23 operations a vector where the exp +
 *            log1p form (sessions 4-6) took 27 and a division.
 *   σ = ssp'(v) = (v ≥ 0 ? 1 : e) / (1 + e),  e = e^−|v|  (the exp below;
 *            only where a caller asks for σ: these bits are the old ones)
 *   σ̃(s) = 1 − ½ e^−s from s = ssp(v) alone (σ = 1 − e^−softplus and
 *            softplus = s + ln 2): the filter's backward, which then needs
 *            no σ1 array (schnet_filter.c)
 *   e^x      Cody-Waite: x·log2 e rounded to n by 1.5·2^23, r = x − n ln2
 *            in two parts, e^r = 1 + r + r²·P(r), P a degree-4 minimax, n
 *            added to the exponent field
 *
 * Errors against double (u = 2^−24; test_ssp_kernels.c asserts them over
 * every 2^9+1-th float and the limits, test_schnet_ops_sweep.c densely over
 * the filter's range; measured 2026-11-26):
 *   ssp: ≤ 2.2 u · max(|ssp|, ln 2): the fit with its float coefficients
 *        ≤ 0.39 u ln 2 (mostly c0's rounding; ssp_table.py picks m_k for
 *        it), Horner's last rounding ½ ulp(|H| ≤ ln 2) ≤ 0.72, its earlier
 *        ones through |r| ≤ 0.69 ≤ 0.29, r exact, the clamp at 20.5 ≤ 0.03
 *        (x's rounding only moves t a few ulps across an edge, inside the
 *        fits' ranges), the add's ½ ulp ≤ 0.72 (≤ 1 u·|ssp| for |ssp| ≥ 1,
 *        where H's 1.43 u ln 2 is ≤ 1 u·|ssp|).  Measured 1.47 u (whole
 *        range), 1.50 u (the filter's range); session 10's 32 degree-5
 *        polynomials had 1.70 u, the exp + log1p form 3.62 u.  ssp(0) = 0
 *        exactly (H_0 has c0 = 0 at r = −t = 0), ssp(+inf) = +inf,
 *        ssp(−inf) = −ln 2, ssp(NaN) = NaN (max(0, v) passes it through).
 *   σ:   2.97 u · σ (+ 2e−38 where e^−|v| is clamped at e^−87), unchanged.
 *   σ̃:   |σ̃ − σ| ≤ (1 − σ)(|δs| + |ε_e|) + ½ u ≤ 4.1 u absolute, δs the
 *        ssp error (with (1 − σ)·max(|s|, ln 2) ≤ ln 2), ε_e ≤ 2 u the
 *        exp's; measured 1.09 u.  Not relative where σ is small: for v ≪ 0,
 *        s = −ln 2 + e^v keeps e^v only to ±ln 2·u, so σ̃ there is σ ± 1e−7,
 *        not σ·(1 ± u) (σ̃(ssp(−inf)) = 0, σ̃ ∈ [0, 1]).
 *
 * The steps are written over SSP_U independent vectors at once: the chains
 * are ~10-20 dependent operations, and the scheduler keeps the pipes busy
 * only when several chains are interleaved in program order. */

#define SSP_EACH for (int j = 0; j < SSP_U; j++)

/* e[0..U) ← e^x[0..U), x ∈ [−87, 1] */
static inline __attribute__((always_inline)) void SSP_FN(exp)(const T *x, T *e)
{
    T big[SSP_U], fn[SSP_U], r[SSP_U], p[SSP_U];
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
    SSP_EACH e[j] = VSCALE(p[j], big[j]);
}

/* v[0..U) in; out ← ssp(v), sig ← σ(v) (sig NULL: not computed; the
 * values are the same either way).  out may be v (the scalar loop works in
 * place): σ first. */
static inline __attribute__((always_inline)) void SSP_FN(step)(const T *v, T *out, T *sig)
{
    T x[SSP_U], key[SSP_U], r[SSP_U], p[SSP_U];
    if (sig) {
        T e[SSP_U];
        SSP_EACH x[j] = VMAX(VNEGABS(v[j]), VSET1(-87.0f));
        SSP_FN(exp)(x, e);
        SSP_EACH sig[j] = VDIV(VSEL_GE0(v[j], VSET1(1.0f), e[j]), VADD(VSET1(1.0f), e[j]));
    }
    /* −t; a NaN v gives −20.5 here (maxps returns its second operand) and
     * comes back through max(0, v) below */
    SSP_EACH x[j] = VMAX(VNEGABS(v[j]), VSET1(-SSP_TMAX));
    /* the interval: exponent and first mantissa bit of 1 + t S */
    SSP_EACH key[j] = VKEY(VFMA(x[j], VSET1(-SSP_S), VSET1(1.0f)));
    SSP_EACH r[j] = VADD(x[j], VLUT(SSP_M, key[j])); /* m − t */
    SSP_EACH p[j] = VLUT(SSP_C[SSP_DEG], key[j]);
    for (int c = SSP_DEG - 1; c >= 0; c--) SSP_EACH p[j] = VFMA(p[j], r[j], VLUT(SSP_C[c], key[j]));
    SSP_EACH out[j] = VADD(VMAX(VSET1(0.0f), v[j]), p[j]);
}

/* d[0..U) ← d · σ̃(s), s = ssp(v): σ̃ = 1 − ½ e^−s, e^−s from e^max(−s, −20)
 * (½ e^−20 < 2^−29: σ̃ = 1 from there on, as σ rounds); a NaN s gives NaN
 * (maxps returns its second operand). */
static inline __attribute__((always_inline)) void SSP_FN(dsig)(const T *s, T *d)
{
    T x[SSP_U], e[SSP_U];
    SSP_EACH x[j] = VMAX(VSET1(-20.0f), VSUB(VSET1(0.0f), s[j]));
    SSP_FN(exp)(x, e);
    SSP_EACH d[j] = VMUL(d[j], VFMA(VSET1(-0.5f), e[j], VSET1(1.0f)));
}

#undef SSP_EACH
