/* bf16_ssp_table_gen.c — the generator of bf16_ssp_table.h, the 32 cubics
 * of the bf16 filter network's shifted softplus (bf16_ssp_body.h).
 *
 * What it computes.  ssp(v) = max(v, 0) + f(x), x = min(|v|, 15.74),
 * f(x) = log1p(e^−x) − ln 2.  For k = 0..31, on the interval of width ½
 * centred on k/2 (u = x − k/2 ∈ [−¼, ¼]), the degree-3 polynomial
 * c0[k] + u(c1[k] + u(c2[k] + u c3[k])) of least maximum error against f,
 * by the Remez exchange in long double (log1pl/expl: f's rounding must sit
 * far below the ~1e-6 fit error), coefficients then rounded to float.  Then
 * the float evaluation exactly as the kernels do it (pt_bf16_ssp_table_eval)
 * swept over x = 0..40 in steps of 1e-5 against f in long double; the worst
 * error goes into the header's comment and must be ≤ 3e-6 (the bound
 * bf16_ssp_body.h and tests/unit/test_bf16_ssp.c state).
 *
 * Why this shape (session 19, bfz; docs/performance.md "Session 19 (bfz)"):
 *   - k = round(2x) costs one FMA: 2x + 1.5·2^23 rounds 2x to an integer in
 *     the low mantissa bits, and vpermt2ps reads a lane's low 5 bits as the
 *     index into two 16-float registers, so k is used without extracting
 *     it; u = x − k/2 is exact (one more FMA).  Intervals centred on k/2
 *     keep |u| ≤ ¼ around every k, 0 included.
 *   - x ≤ 15.74 keeps round(2x) ≤ 31 (2x < 31.5) with margin; past it f
 *     moves by less than e^−15.74 ≈ 1.5e-7, inside the bound.
 *   - degree 3 on width ½ errs ≤ 2.6e-6, which is ≤ 0.2% of the bf16
 *     rounding (2^-8 |ssp|) that follows for |ssp| ≥ 1/256: enough, and
 *     three FMAs.  Remez (minimax), not Chebyshev interpolation: the
 *     error is absolute and the same on every interval that matters.
 *
 * Reproducing the shipped floats bit for bit needs these exact steps:
 * starting points 0.25·cos(π(4 − i)/4) (π rounded to double, times (4 − i) in
 * double), 30 exchanges, each solving the 5×5 system by Gauss-Jordan with
 * partial pivoting over every column, then taking each new point as the
 * grid maximum of |error| (4,001 points) between the midpoints of the old
 * ones.  c3[0] in particular is rounding noise (7.3e-19: f(u) + u/2 is even
 * around 0, so the true minimax cubic term there is 0), and any change in
 * the order of the long double operations moves its bits (harmlessly: its
 * contribution is < 1e-20).
 *
 * Run (from the repository root):
 *   cc -std=c11 -O2 -I. -DPT_BSSP_TABLE_MAIN -o /tmp/bssp_gen \
 *      engine/model/bf16_ssp_table_gen.c -lm
 *   /tmp/bssp_gen > engine/model/bf16_ssp_table.h
 * It prints the worst error on stderr and exits 1 if it exceeds the bound.
 * `make test` (tests/unit/test_bf16_ssp_table.c) runs the same code and
 * fails unless its text equals the committed header byte for byte. */
#include "engine/model/bf16_ssp_table_gen.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define NCO (PT_BSSP_TABLE_DEG + 1) /* coefficients a fit */
#define NPT (NCO + 1)               /* reference points: NCO and the level E */
#define REMEZ_ITERS 30
#define GRID 4000                   /* grid steps between two midpoints */
#define HALF_WIDTH 0.25
#define ROUND_BIG 12582912.0f       /* 1.5·2^23 */
#define SWEEP_STEPS 4000000         /* 40 / 1e-5 */
#define PI_DOUBLE 3.14159265358979323846 /* M_PI: π rounded to double */

/* f(x) = log1p(e^−x) − ln 2 in long double */
static long double bssp_f(long double x)
{
    return log1pl(expl(-x)) - 0.693147180559945309417232121458L;
}

static long double bssp_poly(const long double co[NCO], long double u)
{
    long double p = co[NCO - 1];
    for (int j = NCO - 2; j >= 0; j--) p = co[j] + u * p;
    return p;
}

/* Gauss-Jordan with partial pivoting on the n × (n + 1) augmented matrix;
 * the solution ends in column n.  Every column is updated at every step
 * (the eliminated ones keep their rounding residues, which later steps
 * carry into the diagonal): the order the shipped table was made in. */
static void bssp_solve(int n, long double a[NPT][NPT + 1])
{
    for (int i = 0; i < n; i++) {
        int piv = i;
        for (int r = i + 1; r < n; r++)
            if (fabsl(a[r][i]) > fabsl(a[piv][i])) piv = r;
        for (int col = 0; col <= n; col++) {
            const long double t = a[i][col];
            a[i][col] = a[piv][col];
            a[piv][col] = t;
        }
        for (int r = 0; r < n; r++) {
            if (r == i) continue;
            const long double m = a[r][i] / a[i][i];
            for (int col = 0; col <= n; col++) a[r][col] -= m * a[i][col];
        }
    }
    for (int i = 0; i < n; i++) a[i][n] /= a[i][i];
}

/* The minimax cubic of f(centre + u) on u ∈ [−¼, ¼] into co. */
static void bssp_remez(long double centre, long double co[NCO])
{
    long double pts[NPT];
    for (int i = 0; i < NPT; i++) {
        const double angle = PI_DOUBLE * (NPT - 1 - i);
        pts[i] = HALF_WIDTH * cosl(angle / 4.0L);
    }
    for (int it = 0; it < REMEZ_ITERS; it++) {
        /* p(u_i) + (−1)^i E = f(u_i) for the NCO coefficients and E */
        long double a[NPT][NPT + 1];
        for (int i = 0; i < NPT; i++) {
            long double pw = 1;
            for (int j = 0; j < NCO; j++) {
                a[i][j] = pw;
                pw *= pts[i];
            }
            a[i][NCO] = (i % 2) ? -1 : 1;
            a[i][NPT] = bssp_f(centre + pts[i]);
        }
        bssp_solve(NPT, a);
        for (int j = 0; j < NCO; j++) co[j] = a[j][NPT];

        /* exchange: each point moves to the largest |error| between the
         * midpoints to its neighbours (the interval's ends outermost) */
        long double edge[NPT + 1];
        edge[0] = -HALF_WIDTH;
        for (int i = 1; i < NPT; i++) edge[i] = (pts[i - 1] + pts[i]) / 2;
        edge[NPT] = HALF_WIDTH;
        for (int i = 0; i < NPT; i++) {
            long double best = -1, at = edge[i];
            for (int g = 0; g <= GRID; g++) {
                const long double u = edge[i] + (edge[i + 1] - edge[i]) * g / GRID;
                const long double e = fabsl(bssp_f(centre + u) - bssp_poly(co, u));
                if (e > best) {
                    best = e;
                    at = u;
                }
            }
            pts[i] = at;
        }
    }
}

void pt_bf16_ssp_table_fit(pt_bssp_coefs c)
{
    for (int k = 0; k < PT_BSSP_TABLE_N; k++) {
        long double co[NCO];
        bssp_remez(k * 0.5L, co);
        for (int j = 0; j < NCO; j++) c[j][k] = (float)co[j];
    }
}

float pt_bf16_ssp_table_eval(const pt_bssp_coefs c, float x)
{
    /* bf16_ssp_body.h's BSSP_FN(ssp) without max(v, 0): minps, the index
     * from the low 5 bits of 2x + 1.5·2^23, u exact, Horner in FMAs */
    const float xc = x < PT_BSSP_TABLE_XMAX ? x : PT_BSSP_TABLE_XMAX;
    const float big = fmaf(xc, 2.0f, ROUND_BIG);
    uint32_t bits;
    memcpy(&bits, &big, sizeof bits);
    const unsigned k = bits & 31u;
    const float u = fmaf(big - ROUND_BIG, -0.5f, xc);
    float p = fmaf(c[3][k], u, c[2][k]);
    p = fmaf(p, u, c[1][k]);
    return fmaf(p, u, c[0][k]);
}

double pt_bf16_ssp_table_sweep(const pt_bssp_coefs c, double *worst_x)
{
    double worst = 0, at = 0;
    for (int i = 0; i <= SWEEP_STEPS; i++) {
        const float x = (float)(i * 1e-5);
        const double e = fabs((double)pt_bf16_ssp_table_eval(c, x) - (double)bssp_f(x));
        if (e > worst) {
            worst = e;
            at = x;
        }
    }
    if (worst_x) *worst_x = at;
    return worst;
}

static void bssp_write_array(FILE *out, const pt_bssp_coefs c, int j)
{
    fprintf(out, "static const float BSSP_FN(c%d)[%d] = {\n", j, PT_BSSP_TABLE_N);
    for (int k = 0; k < PT_BSSP_TABLE_N; k++)
        fprintf(out, "%s%.9ef,%s", k % 4 == 0 ? "    " : "", c[j][k], k % 4 == 3 ? "\n" : " ");
    fprintf(out, "};\n");
}

int pt_bf16_ssp_table_write(FILE *out, const pt_bssp_coefs c, double worst, double worst_x)
{
    fprintf(out,
            "/* bf16_ssp_table.h — generated by engine/model/bf16_ssp_table_gen.c (do not\n"
            " * edit: tests/unit/test_bf16_ssp_table.c regenerates it and compares byte\n"
            " * for byte).  f(x) = log1p(e^−x) − ln 2 on x ∈ [k/2 − 1/4, k/2 + 1/4],\n"
            " * k = 0..%d, as c0[k] + u(c1[k] + u(c2[k] + u c3[k])), u = x − k/2:\n"
            " * degree-%d least-maximum fits (Remez in long double), coefficients\n"
            " * rounded to float.  Evaluated in float as bf16_ssp_body.h does (x =\n"
            " * min(|v|, %.2f), k = the low 5 bits of 2x + 1.5·2^23), the worst\n"
            " * absolute error over x = 0..%.0f in steps of 1e-5 is %.3g (at x = %.6g);\n"
            " * bound %.0e.  Included by bf16_ssp_body.h, once per spelling: BSSP_FN\n"
            " * names the arrays (bssp_ scalar, bsspv_ AVX-512), so no include guard. */\n",
            PT_BSSP_TABLE_N - 1, PT_BSSP_TABLE_DEG, (double)PT_BSSP_TABLE_XMAX,
            PT_BSSP_TABLE_SWEEP_MAX, worst, worst_x, PT_BSSP_TABLE_BOUND);
    for (int j = 0; j < NCO; j++) bssp_write_array(out, c, j);
    return fflush(out) != 0 || ferror(out) ? -1 : 0;
}

#ifdef PT_BSSP_TABLE_MAIN
int main(void)
{
    pt_bssp_coefs c;
    double at;
    pt_bf16_ssp_table_fit(c);
    const double worst = pt_bf16_ssp_table_sweep(c, &at);
    fprintf(stderr, "bf16_ssp_table: worst %.3g at x = %.6g (bound %.0e)\n", worst, at,
            PT_BSSP_TABLE_BOUND);
    if (pt_bf16_ssp_table_write(stdout, c, worst, at) != 0) return 1;
    return worst <= PT_BSSP_TABLE_BOUND ? 0 : 1;
}
#endif
