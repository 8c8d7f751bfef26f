/* colsum_body.h — the column sums of colsum_kernels.h over a panel of a
 * row's vectors held in registers, written once in the vector vocabulary
 * of vec_avx512.h / vec_avx2.h.  The including file defines CS(name) (its
 * functions' names), NVMAX (vectors in a panel: accumulators that fit in
 * the register file with the load and mask temporaries) and
 * CS_KERNEL (the kernel's name, colsum_kernels.h).
 *
 * Per block of PT_SUM_BLOCK rows, each of the panel's vectors is one
 * chain of float adds from +0.0f over the block's rows in order, then its
 * lanes join the double total: lane for lane the scalar reference's order.
 * A row is split into as few panels as NVMAX allows, of equal width, so a
 * 100-wide row is one panel on either set and no panel is a lone chain
 * waiting on the add latency.  The panel's width is a constant in each
 * instance (the switch below), so the accumulator array lives in registers. */

/* t[0..lanes) += the first lanes lanes of v (the last, masked vector) */
static inline __attribute__((always_inline)) void CS(add_total)(double *restrict t, V v,
                                                                int lanes)
{
    if (lanes == VW) {
        VDSTOREU(t, VDADD(VDLOADU(t), VD_LO(v)));
        VDSTOREU(t + VW / 2, VDADD(VDLOADU(t + VW / 2), VD_HI(v)));
        return;
    }
#ifdef VTOTAL_ADDM
    VTOTAL_ADDM(t, v, lanes);
    return;
#endif
    float part[VW];
    VSTOREU(part, v);
    for (int i = 0; i < lanes; i++) t[i] += (double)part[i];
}

/* columns [0, (nv-1)·VW + lanes) of m's rows (c floats apart) into total;
 * nv a constant after inlining */
static inline __attribute__((always_inline)) void CS(panel)(double *restrict total,
                                                            const float *restrict m, int n,
                                                            int c, const int nv, int lanes)
{
    const MASK_T last = MASK(lanes);
    for (int r0 = 0; r0 < n; r0 += PT_SUM_BLOCK) {
        const int r1 = r0 + PT_SUM_BLOCK < n ? r0 + PT_SUM_BLOCK : n;
        V p[NVMAX];
#pragma GCC unroll 16
        for (int j = 0; j < nv; j++) p[j] = VZERO();
        for (int r = r0; r < r1; r++) {
            const float *row = m + (size_t)r * (size_t)c;
#pragma GCC unroll 16
            for (int j = 0; j < nv - 1; j++) p[j] = VADD(p[j], VLOADU(row + j * VW));
            p[nv - 1] = VADD(p[nv - 1], VLOADM(row + (nv - 1) * VW, last));
        }
#pragma GCC unroll 16
        for (int j = 0; j < nv - 1; j++) CS(add_total)(total + j * VW, p[j], VW);
        CS(add_total)(total + (nv - 1) * VW, p[nv - 1], lanes);
    }
}

void CS_KERNEL(double *restrict total, const float *restrict m, int n, int c)
{
    const int vecs = (c + VW - 1) / VW;
    const int panels = (vecs + NVMAX - 1) / NVMAX;
    const int per = (vecs + panels - 1) / panels;
    for (int v0 = 0; v0 < vecs; v0 += per) {
        const int nv = vecs - v0 < per ? vecs - v0 : per;
        const int k0 = v0 * VW, lanes = c - (k0 + (nv - 1) * VW) < VW ? c - (k0 + (nv - 1) * VW)
                                                                      : VW;
        switch (nv) {
#define CS_CASE(k) \
    case k: CS(panel)(total + k0, m + k0, n, c, k, lanes); break;
            CS_CASE(1) CS_CASE(2) CS_CASE(3) CS_CASE(4) CS_CASE(5) CS_CASE(6) CS_CASE(7)
#if NVMAX >= 8
            CS_CASE(8)
#endif
#if NVMAX >= 13
            CS_CASE(9) CS_CASE(10) CS_CASE(11) CS_CASE(12) CS_CASE(13)
#endif
#undef CS_CASE
        default: break;
        }
    }
}
