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
 *   ssp(v) = max(v, 0) + f(x), f(x) = log1p(e^−x) − ln 2, x = min(|v|,
 *                 15.74): f by a table of 32 degree-3 polynomials, one per
 *                 interval of width ½ centred on k/2 (k = round(2x), the
 *                 low bits of 2x + 1.5·2^23 pick the coefficients with one
 *                 vpermt2ps each, u = x − k/2 exact), absolute error ≤
 *                 2.6e-6; no exp, no log, no division: 5 FMAs, 4 permutes
 *                 and 5 other operations a vector (session 19; before it
 *                 e^−|v| as below and a degree-5 polynomial for log1p, 12
 *                 FMA-pipe operations and 9.4e-6).  Past x = 15.74 f moves
 *                 by < 1.5e-7 (e^−15.74), which the bound below covers.
 *   t = e^a, a = max(−s, −87)   (σ̃ only) Cody-Waite with one constant: n =
 *                 round(a log2 e) (1.5·2^23 added and taken away), r = a −
 *                 n ln 2 (|r| ≤ 0.35, the single-float ln 2's error times
 *                 |n| ≤ 126 is < 3e-7 in r), e^r = 1 + r(c1 + r(c2 + r(c3 +
 *                 r c4))) (degree-4 least-maximum fit, relative error ≤
 *                 2.9e-6), times 2^n exactly (vscalefps; the result stays
 *                 normal: a ≥ −87)
 *   σ̃(s)  = max(1 − e^−s / 2, 0) with e^−s as above: σ derived from the
 *                 bf16-rounded ssp value s = bf16(ssp(v)) (the pairs the
 *                 weight gradient of the second product already reads), as
 *                 σ(v) = 1 − e^−softplus(v) = 1 − e^−(ssp(v)+ln 2) = 1 −
 *                 e^−ssp(v)/2: the backward keeps no σ1 array at all.
 *
 * Errors against double (bounds asserted over a sweep of the whole float
 * range in tests/unit/test_bf16_ssp.c, which prints the measured maxima):
 *   ssp:  |ssp~(v) − ssp(v)| ≤ 3e-6 + 2^-23·|v| (measured 2.53e-6 past the
 *         last term, v's own rounding when added; 1.4e-5 and 9.4e-6 before
 *         session 19).  bf16 has 8 significant bits: rounding ssp leaves up
 *         to 2^-8·|ssp| (2.7e-3 at |ssp| = ln 2), so this is ≤ 0.2% of the
 *         rounding that follows for |ssp| ≥ 1/256.
 *         ssp~(0) = 2.5e-6 (not 0); +inf → +inf, −inf → −ln 2 + 1.5e-7,
 *         NaN → NaN; for v ≥ 18, ssp~(v) = v − ln 2 within 1e-5 + 2^-23 v,
 *         for v ≤ −18, −ln 2 within 1e-5.
 *   σ̃:    |σ̃(bf16(ssp~(v))) − σ(v)| ≤ (1 − σ(v))·(e^δ − 1) + 1e-6,
 *         δ = 2^-8·|ssp(v)| + 3e-6 + 2^-23·|v| (the bf16 rounding of s and
 *         ssp~'s error: e^−s/2 is 1 − σ, so an error δ in s moves σ̃ by
 *         (1 − σ)(e^δ − 1)); measured 2.9e-8 past the first term.
 *         Where v ≪ 0 (σ → 0, s → −ln 2) that is an ABSOLUTE error of up to
 *         2e-3 (measured 1.95e-3): bf16(s) cannot tell σ(−7) from σ(−20)
 *         (both s round to −0.6914), and σ̃ there is 1.74e-3 instead of ~e^v.
 *         Relative to σ's scale (≤ 1) that is bf16's own rounding, which
 *         ds1 = (dP A2) ⊙ σ gets as it is rounded to bf16 anyway.
 *         σ̃(+inf) = 1, σ̃(0) = ½, σ̃(NaN) = NaN, σ̃ ∈ [0, 1]. */

/* e^a for a ∈ [−87, 0.7] (the caller clamps): see above */
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

/* f(x) = log1p(e^−x) − ln 2 on x ∈ [k/2 − 1/4, k/2 + 1/4], k = 0..31, as
 * c0[k] + u(c1[k] + u(c2[k] + u c3[k])), u = x − k/2: degree-3
 * least-maximum fits (Remez in long double, coefficients rounded to float;
 * generator and sweep in docs/performance.md "Session 19 (bfz)") */
static const float BSSP_FN(c0)[32] = {
    2.527327069e-06f, -2.190682441e-01f, -3.798847795e-01f, -4.917342067e-01f,
    -5.662199259e-01f, -6.142582893e-01f, -6.445605159e-01f, -6.633972526e-01f,
    -6.749975681e-01f, -6.820996404e-01f, -6.864319444e-01f, -6.890687943e-01f,
    -6.906715631e-01f, -6.916449070e-01f, -6.922357082e-01f, -6.925942898e-01f,
    -6.928117871e-01f, -6.929437518e-01f, -6.930238008e-01f, -6.930723190e-01f,
    -6.931017637e-01f, -6.931196451e-01f, -6.931304932e-01f, -6.931370497e-01f,
    -6.931410432e-01f, -6.931434274e-01f, -6.931449175e-01f, -6.931458116e-01f,
    -6.931463480e-01f, -6.931467056e-01f, -6.931468844e-01f, -6.931470037e-01f,
};
static const float BSSP_FN(c1)[32] = {
    -5.000000000e-01f, -3.775423467e-01f, -2.689434290e-01f, -1.824267209e-01f,
    -1.192032620e-01f, -7.585802674e-02f, -4.742556810e-02f, -2.931194380e-02f,
    -1.798599213e-02f, -1.098679192e-02f, -6.692752708e-03f, -4.070075229e-03f,
    -2.472584369e-03f, -1.501158345e-03f, -9.110365063e-04f, -5.527696921e-04f,
    -3.353446955e-04f, -2.034236677e-04f, -1.233925723e-04f, -7.484501111e-05f,
    -4.539712972e-05f, -2.753524132e-05f, -1.670114943e-05f, -1.012982557e-05f,
    -6.144074177e-06f, -3.726578598e-06f, -2.260287374e-06f, -1.370934797e-06f,
    -8.315144555e-07f, -5.043391980e-07f, -3.058972311e-07f, -1.855360807e-07f,
};
static const float BSSP_FN(c2)[32] = {
    1.246758327e-01f, 1.172517091e-01f, 9.821387380e-02f, 7.461326569e-02f,
    5.259749293e-02f, 3.515743464e-02f, 2.267405577e-02f, 1.428799052e-02f,
    8.872519247e-03f, 5.459604319e-03f, 3.340677125e-03f, 2.037103055e-03f,
    1.239594305e-03f, 7.533399039e-04f, 4.574724589e-04f, 2.776732144e-04f,
    1.684917661e-04f, 1.022228171e-04f, 6.201135693e-05f, 3.761549669e-05f,
    2.281631714e-05f, 1.383929794e-05f, 8.394143151e-06f, 5.091373168e-06f,
    3.088098993e-06f, 1.873035899e-06f, 1.136057108e-06f, 6.890547297e-07f,
    4.179332791e-07f, 2.534895032e-07f, 1.537492267e-07f, 9.325363948e-08f,
};
static const float BSSP_FN(c3)[32] = {
    7.279476319e-19f, -9.511514567e-03f, -1.504694670e-02f, -1.573014632e-02f,
    -1.331070904e-02f, -9.918564931e-03f, -6.829835009e-03f, -4.477929324e-03f,
    -2.848373726e-03f, -1.778468722e-03f, -1.097899163e-03f, -6.730883615e-04f,
    -4.109156143e-04f, -2.502198331e-04f, -1.521303930e-04f, -9.240608779e-05f,
    -5.609661093e-05f, -3.404253584e-05f, -2.065454646e-05f, -1.253008395e-05f,
    -7.600787740e-06f, -4.610445103e-06f, -2.796499075e-06f, -1.696207619e-06f,
    -1.028818588e-06f, -6.240161383e-07f, -3.784871581e-07f, -2.295649040e-07f,
    -1.392384519e-07f, -8.445250188e-08f, -5.122307556e-08f, -3.106838165e-08f,
};

/* ssp~(v) (above): x = min(|v|, 15.74) (a NaN v gives 15.74: minps returns
 * its second operand; the NaN comes back through max(0, v)); k = round(2x)
 * ≤ 31 is the low bits of 2x + 1.5·2^23, which index the tables directly
 * (vpermt2ps reads an index's low 5 bits); u = x − k/2 exactly */
static inline __attribute__((always_inline)) T BSSP_FN(ssp)(T v)
{
    const T x = VMIN(VABS(v), VSET1(15.74f));
    const T big = VFMA(x, VSET1(2.0f), VSET1(12582912.0f));
    const T u = VFMA(VSUB(big, VSET1(12582912.0f)), VSET1(-0.5f), x);
    T p = VFMA(VTAB(BSSP_FN(c3), big), u, VTAB(BSSP_FN(c2), big));
    p = VFMA(p, u, VTAB(BSSP_FN(c1), big));
    p = VFMA(p, u, VTAB(BSSP_FN(c0), big));
    /* max(0, v) passes a NaN v through (maxps returns its second operand) */
    return VADD(VMAX(VSET1(0.0f), v), p);
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
