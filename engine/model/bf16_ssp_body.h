/* bf16_ssp_body.h — the bf16 filter network's shifted softplus and its
 * derivative, spelled once for the scalar reference (bf16_ssp.c) and the
 * AVX-512 loops (bf16_ssp_avx512.c), so both give the same bits
 * (tests/unit/test_bf16_ssp.c sweeps them against each other).  The
 * includer defines T (float, __m512) and the operations below on T; every
 * operation is one IEEE operation with one rounding (fused multiply-adds
 * written as such, never left to contraction).
 *
 * Why not ssp_body.h's fp32 spelling: its result is rounded to bf16 (8
 * significant bits, relative error up to 2^-9) as soon as it is stored, so
 * fp32's 3.6 u accuracy is bought with two divisions (σ and log1p's s) and
 * ~30 dependent operations a vector that bound the first product's
 * epilogue (bench/bf16_filter fwd1: 85 GF/s).  Here:
 *
 *   t = e^a, a = max(−|v|, −87)   Cody-Waite with one constant: n = round(a
 *                 log2 e) (1.5·2^23 added and taken away), r = a − n ln 2
 *                 (|r| ≤ 0.35, the single-float ln 2's error times |n| ≤ 126
 *                 is < 3e-7 in r), e^r = 1 + r(c1 + r(c2 + r(c3 + r c4)))
 *                 (degree-4 least-maximum fit, relative error ≤ 2.9e-6),
 *                 times 2^n exactly (vscalefps; the result stays normal:
 *                 a ≥ −87)
 *   ssp(v) = max(v, 0) + L(t), L(t) ≈ log1p(t) − ln 2 on [0, 1] as a
 *                 degree-5 polynomial in t (absolute error ≤ 8.7e-6), no
 *                 division
 *   σ̃(s)  = max(1 − e^−s / 2, 0) with e^−s as above: σ derived from the
 *                 bf16-rounded ssp value s = bf16(ssp(v)) (the pairs the
 *                 weight gradient of the second product already reads), as
 *                 σ(v) = 1 − e^−softplus(v) = 1 − e^−(ssp(v)+ln 2) = 1 −
 *                 e^−ssp(v)/2: the backward keeps no σ1 array at all.
 *
 * Errors against double (bounds asserted over a sweep of the whole float
 * range in tests/unit/test_bf16_ssp.c, which prints the measured maxima):
 *   ssp:  |ssp~(v) − ssp(v)| ≤ 1.4e-5 + 2^-23·|v| (measured 9.4e-6 past the
 *         last term, v's own rounding when added).  bf16 has 8 significant
 *         bits: rounding ssp leaves up to 2^-8·|ssp| (2.7e-3 at |ssp| = ln 2),
 *         so this is ≤ 1% of the rounding that follows for |ssp| ≥ 1/256.
 *         ssp~(0) = 8.7e-6 (not 0); +inf → +inf, −inf → −ln 2 + 8.7e-6,
 *         NaN → NaN; for v ≥ 18, ssp~(v) = v − ln 2 within 1e-5 + 2^-23 v,
 *         for v ≤ −18, −ln 2 within 1e-5.
 *   σ̃:    |σ̃(bf16(ssp~(v))) − σ(v)| ≤ (1 − σ(v))·(e^δ − 1) + 1e-6,
 *         δ = 2^-8·|ssp(v)| + 1.4e-5 + 2^-23·|v| (the bf16 rounding of s and
 *         ssp~'s error: e^−s/2 is 1 − σ, so an error δ in s moves σ̃ by
 *         (1 − σ)(e^δ − 1)); measured 2.9e-8 past the first term.
 *         Where v ≪ 0 (σ → 0, s → −ln 2) that is an ABSOLUTE error of up to
 *         2e-3 (measured 1.95e-3): bf16(s) cannot tell σ(−7) from σ(−20)
 *         (both s round to −0.6914), and σ̃ there is 1.74e-3 instead of ~e^v.
 *         Relative to σ's scale (≤ 1) that is bf16's own rounding, which
 *         ds1 = (dP A2) ⊙ σ gets as it is rounded to bf16 anyway.
 *         σ̃(+inf) = 1, σ̃(0) = ½, σ̃(NaN) = NaN, σ̃ ∈ [0, 1]. */

/* e^a for a ∈ [−87, 0.7] (the callers clamp): see above */
static inline __attribute__((always_inline)) T BSSP_FN(exp)(T a)
{
    const T big = VFMA(a, VSET1(1.44269504088896341f), VSET1(12582912.0f));
    const T fn = VSUB(big, VSET1(12582912.0f));
    const T r = VFMA(fn, VSET1(-0.693147182464599609f), a);
    T p = VFMA(VSET1(4.1513849049806595e-2f), r, VSET1(1.6787473857402802e-1f));
    p = VFMA(p, r, VSET1(5.000301599502563e-1f));
    p = VFMA(p, r, VSET1(9.999668598175049e-1f));
    p = VFMA(p, r, VSET1(1.0f));
    /* p·2^n, exact (the result is normal): one vscalefps */
    return VSCALE(p, fn);
}

/* ssp~(v) (above) */
static inline __attribute__((always_inline)) T BSSP_FN(ssp)(T v)
{
    const T t = BSSP_FN(exp)(VMAX(VNEGABS(v), VSET1(-87.0f)));
    T l = VFMA(VSET1(3.110399842262268e-2f), t, VSET1(-1.3321983814239502e-1f));
    l = VFMA(l, t, VSET1(2.867065668106079e-1f));
    l = VFMA(l, t, VSET1(-4.9074313044548035e-1f));
    l = VFMA(l, t, VSET1(9.992995858192444e-1f));
    l = VFMA(l, t, VSET1(-6.931384801864624e-1f));
    /* max(0, v) passes a NaN v through (maxps returns its second operand) */
    return VADD(VMAX(VSET1(0.0f), v), l);
}

/* σ̃(s) for the fp32 value s of a bf16 ssp (above) */
static inline __attribute__((always_inline)) T BSSP_FN(dssp)(T s)
{
    /* −s ≤ ln 2 (ssp ≥ −ln 2); max(−s, −87) keeps a NaN s: maxps(NaN, x)
     * gives x, so the order is (clamp, −s) → NaN */
    const T t = BSSP_FN(exp)(VMAX(VSET1(-87.0f), VNEG(s)));
    /* max(0, ·) keeps a NaN as well */
    return VMAX(VSET1(0.0f), VFNMA(VSET1(0.5f), t, VSET1(1.0f)));
}
