/* cfconv_body.h — the convolution's register-resident kernels, written once
 * and compiled per instruction set: cfconv_avx512.c and cfconv_avx2.c each
 * define the macros below (the vector vocabulary by including vec_avx512.h /
 * vec_avx2.h) and include this file (no guard on purpose).
 * Operations and numerics: cfconv_kernels.h; arguments: schnet_ops.h's
 * pt_cfconv_forward_range / pt_cfconv_backward_range.
 *
 * The caller defines:
 *   CK(name)        the symbol prefix (pt_cfconv_avx512_##name)
 *   V, MASK_T       the vector and lane-mask types; VW lanes per vector (vec_*.h)
 *   NVMAX           vectors of a panel (≤ 8: NVMAX accumulators + temporaries
 *                   must fit the register file)
 *   SNVMAX          the same for the backward by senders, which keeps x_j
 *                   and dx_j in registers (2 SNVMAX of them); undefined: no
 *                   such kernel
 *   VZERO() VSET1(x) VLOADU(p) VLOADM(p, m) VSTOREU(p, v) VSTOREM(p, m, v)
 *   VFMA(a, b, c) = a·b + c fused   VMUL(a, b)   MASK(n) (first n lanes) (vec_*.h)
 *
 * A row of f floats is cut into panels of at most NVMAX vectors (balanced:
 * f = 100 is one panel of 7 zmm, or 7 + 6 ymm); each panel walks a
 * receiver's edges with its slice of m_i (forward) or dm_i (backward) in
 * named registers — gcc keeps an array of vectors in memory — and only the
 * last vector of the last panel is masked.  Panels are instantiated per
 * (vector count, tail) through a switch, so every guard below folds.  Each
 * element still sees its edges in CSR order, one panel at a time, so the
 * panel cut changes no bits. */

#define CK_V8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
/* A panel's tail: 0 none (the panel ends on a whole vector), 2 exactly 4
 * lanes (a 100-float row: 6 zmm + 4, 12 ymm + 4), 1 any other count.  A
 * tail of 4 is loaded and stored as one xmm (VLOAD4 / VSTORE4), not
 * through the lane mask: a masked store's footprint is the whole vector,
 * 64 bytes from the row's last 16, so it covers the first 48 bytes of the
 * next row, and a load overlapping a store still in flight that it cannot
 * take its data from waits until the store has written the cache.  The
 * forward's first edges stored W_u over P_u until session 15, and the
 * receiver's next rows, often row u + 1, were loaded right after; the
 * backward stores dx and dP rows the same way.  An xmm store overlaps
 * nothing beyond its 16 bytes, and a later xmm load of the same bytes takes
 * them from the store.  Same values, same bits (docs/performance.md,
 * session 11 conv: water's pipeline forward 13.1-14.4 -> 11.6-12.9 ns an
 * edge). */
#define CK_TAIL(f, p, npan) ((p) != (npan) - 1 || (f) % VW == 0 ? 0 : (f) % VW == 4 ? 2 : 1)
/* vector v of a panel row at p: whole, or the tail (4 lanes or masked) */
#define CK_LD(p, v)                                                                      \
    ((tail && (v) == nv - 1) ? (tail == 2 ? VLOAD4((p) + (v) * VW) : VLOADM((p) + (v) * VW, last)) \
                             : VLOADU((p) + (v) * VW))
#define CK_ST(p, v, x)                                                                   \
    do {                                                                                 \
        if (tail == 2 && (v) == nv - 1)                                                  \
            VSTORE4((p) + (v) * VW, (x));                                                \
        else if (tail && (v) == nv - 1)                                                  \
            VSTOREM((p) + (v) * VW, last, (x));                                          \
        else                                                                             \
            VSTOREU((p) + (v) * VW, (x));                                                \
    } while (0)

/* Edges ahead whose W row is prefetched.  In the pipeline a chunk's
 * receivers read rows written one structure back (forward) and the
 * backward reads every W row from memory (the forward wrote it long
 * before): the lines of the row PF edges ahead are requested now, so the
 * loads find them in L1.  bench/cfconv_rate's pipeline figures, water,
 * load 9: AVX-512 convolution 36-37 -> 28.5-30 ns per edge at 8 (12 and
 * 16 no better; x and dx rows too: no better on water, 5% worse on QM9,
 * whose rows stay in cache anyway; QM9 with W alone: within 2%). */
#define CK_PF 8
/* the lines of n floats at p */
#define CK_PREFETCH(p, n)                                                                \
    do {                                                                                 \
        const char *pc_ = (const char *)(p);                                             \
        for (long o_ = 0; o_ < (long)(n) * 4; o_ += 64) _mm_prefetch(pc_ + o_, _MM_HINT_T0); \
        _mm_prefetch(pc_ + (long)(n) * 4 - 1, _MM_HINT_T0);                              \
    } while (0)
/* W's row for the edge PF ahead in the range (a padding edge has none) */
#define CK_PREFETCH_W(k)                                                                 \
    if ((k) + CK_PF < kend) {                                                            \
        const int32_t up_ = row[(k) + CK_PF];                                            \
        if (up_ >= 0) CK_PREFETCH(w + up_ * f, nv * VW);                                 \
    }

/* m_i[panel] = Σ_k x_j ⊙ W_u over receiver i's edges, i0 ≤ i < i1; m, w, x
 * already offset to the panel's first column, f the row stride.  sc (w
 * holds P: the pipeline's fp32 path): every edge forms W_u = P_u · C_u in
 * registers, rounded once as the cutoff pass rounds it, and stores nothing;
 * the backward by rows forms it again from P (pt_cfconv_backward_rows' pc).
 * Until session 15 a row's first edge stored W_u over P for the later
 * edges and the backward: the stores, and the loads of the receiver's next
 * rows behind them, cost ~1.3 ns an edge of ~11.5 in the pipeline
 * (docs/performance.md, session 15 conv). */
static inline __attribute__((always_inline)) void CK(fwd_panel)(
    const int nv, const int tail, const int sc, const MASK_T last, float *m, const float *w,
    const float *wcut, const int32_t *row, const float *x, const int32_t *src,
    const int32_t *off, int i0, int i1, long f)
{
    const int32_t kend = off[i1];
    for (int i = i0; i < i1; i++) {
#define CK_ZERO(v) V a##v = VZERO();
        CK_V8(CK_ZERO)
        for (int32_t k = off[i]; k < off[i + 1]; k++) {
            const int32_t u = row[k];
            if (u < 0) continue;
            const float *xp = x + src[k] * f, *wp = w + u * f;
            CK_PREFETCH_W(k)
            if (sc) {
                const V ck = VSET1(wcut[u]);
#define CK_FMAC(v) if ((v) < nv) a##v = VFMA(CK_LD(xp, v), VMUL(CK_LD(wp, v), ck), a##v);
                CK_V8(CK_FMAC)
            } else {
#define CK_FMA(v) if ((v) < nv) a##v = VFMA(CK_LD(xp, v), CK_LD(wp, v), a##v);
                CK_V8(CK_FMA)
            }
        }
        float *mp = m + i * f;
#define CK_STORE(v) if ((v) < nv) CK_ST(mp, v, a##v);
        CK_V8(CK_STORE)
    }
}

/* dP_u (=|+=) (dm_i ⊙ x_j)·C_u and dx_j += dm_i ⊙ W_u over receiver i's
 * edges, i0 ≤ i < i1, dm_i's panel in registers; array pointers offset to
 * the panel's first column (cut, row, first, src, off are not). */
static inline __attribute__((always_inline)) void CK(bwd_panel)(
    const int nv, const int tail, const MASK_T last, float *dx, float *dp, const float *dm,
    const float *x, const float *w, const float *cut, const int32_t *row, const uint8_t *first,
    const int32_t *src, const int32_t *off, int i0, int i1, long f, int32_t ring)
{
    const int32_t kend = off[i1];
    for (int i = i0; i < i1; i++) {
        const float *dmp = dm + i * f;
#define CK_DM(v) const V d##v = (v) < nv ? CK_LD(dmp, v) : VZERO();
        CK_V8(CK_DM)
        for (int32_t k = off[i]; k < off[i + 1]; k++) {
            const int32_t u = row[k];
            if (u < 0) continue;
            const long j = src[k] * f;
            const float *xp = x + j, *wp = w + u * f;
            float *dxp = dx + j, *dpp = dp + (ring > 0 ? u % ring : u) * f;
            CK_PREFETCH_W(k)
            const V cu = VSET1(cut[u]);
            /* the row's first edge writes its gradient, later ones add */
#define CK_DX(v) CK_ST(dxp, v, VFMA(d##v, CK_LD(wp, v), CK_LD(dxp, v)));
#define CK_BW_FIRST(v)                                                                   \
    if ((v) < nv) {                                                                      \
        CK_ST(dpp, v, VMUL(VMUL(d##v, CK_LD(xp, v)), cu));                               \
        CK_DX(v)                                                                         \
    }
#define CK_BW_ADD(v)                                                                     \
    if ((v) < nv) {                                                                      \
        CK_ST(dpp, v, VFMA(VMUL(d##v, CK_LD(xp, v)), cu, CK_LD(dpp, v)));                \
        CK_DX(v)                                                                         \
    }
            if (first[k]) {
                CK_V8(CK_BW_FIRST)
            } else {
                CK_V8(CK_BW_ADD)
            }
        }
    }
}

/* The force passes' tangent (schnet_ops.h's pt_cfconv_tangent):
 * ṁ_i[panel] = Σ_k ẋ_j ⊙ W_u + x_j ⊙ (W'_u λ_u) over receiver i's edges,
 * ṁ_i in registers; per element the operations of the loop it replaced
 * (which gcc contracted): ṁ + fma(ẋ, W, x·(W'·λ)), or without ẋ (the first
 * block) fma(x, W'·λ, ṁ).  Pointers offset as in fwd_panel. */
static inline __attribute__((always_inline)) void CK(tan_panel)(
    const int nv, const int tail, const MASK_T last, float *m, const float *w, const float *wd,
    const float *lambda, const int32_t *row, const float *x, const float *xd,
    const int32_t *src, const int32_t *off, int i0, int i1, long f)
{
    const int32_t kend = off[i1];
    for (int i = i0; i < i1; i++) {
        CK_V8(CK_ZERO)
        for (int32_t k = off[i]; k < off[i + 1]; k++) {
            const int32_t u = row[k];
            if (u < 0) continue;
            const long j = src[k] * f;
            const float *xp = x + j, *wp = w + u * f, *wdp = wd + u * f;
            CK_PREFETCH_W(k)
            if ((k) + CK_PF < kend && row[(k) + CK_PF] >= 0)
                CK_PREFETCH(wd + row[(k) + CK_PF] * f, nv * VW);
            const V l = VSET1(lambda[u]);
            if (xd) {
                const float *xdp = xd + j;
#define CK_TAN_XD(v)                                                                     \
    if ((v) < nv)                                                                        \
        a##v = VADD(a##v, VFMA(CK_LD(xdp, v), CK_LD(wp, v),                              \
                               VMUL(CK_LD(xp, v), VMUL(CK_LD(wdp, v), l))));
                CK_V8(CK_TAN_XD)
            } else {
#define CK_TAN(v) if ((v) < nv) a##v = VFMA(CK_LD(xp, v), VMUL(CK_LD(wdp, v), l), a##v);
                CK_V8(CK_TAN)
            }
        }
        float *mp = m + i * f;
        CK_V8(CK_STORE)
    }
}

/* The panels of a row: count and the vectors of panel p (balanced). */
static inline int CK(panels)(int nvec)
{
    return (nvec + NVMAX - 1) / NVMAX;
}

#define CK_CASES(CALL)                                                                   \
    CK_CASE(CALL, 1) CK_CASE(CALL, 2) CK_CASE(CALL, 3) CK_CASE(CALL, 4)                  \
    CK_CASE(CALL, 5) CK_CASE(CALL, 6) CK_CASE(CALL, 7) CK_CASE(CALL, 8)
#define CK_CASE(CALL, n)                                                                 \
    case 3 * (n): if ((n) <= NVMAX) CALL((n), 0); break;                                 \
    case 3 * (n) + 1: if ((n) <= NVMAX) CALL((n), 1); break;                             \
    case 3 * (n) + 2: if ((n) <= NVMAX) CALL((n), 2); break;

/* CALL(nv, tail) for each panel of a row of f floats cut into panels of at
 * most MAXV vectors (balanced), with the last vector's mask lm and the
 * panel's first column c0 in scope; CASES instantiates the (nv, tail)
 * pairs (the walks by senders and by rows) */
#define CK_PANELS(f, MAXV, CASES, CALL)                                                  \
    for (int p_ = 0, v0_ = 0, nvec_ = ((f) + VW - 1) / VW,                               \
             npan_ = (nvec_ + (MAXV) - 1) / (MAXV); p_ < npan_; p_++) {                  \
        const int nv = (nvec_ - v0_ + npan_ - p_ - 1) / (npan_ - p_);                    \
        const int tail = CK_TAIL(f, p_, npan_);                                          \
        const MASK_T lm = MASK(tail ? (f) % VW : VW);                                    \
        const long c0 = (long)v0_ * VW;                                                  \
        switch (3 * nv + tail) { CASES(CALL) default: break; }                           \
        v0_ += nv;                                                                       \
    }

void CK(forward)(float *m, const float *w, const float *wcut, const int32_t *row, const float *x,
                 const int32_t *src, const int32_t *off, int i0, int i1, int f)
{
    if (f <= 0 || i0 >= i1) return;
    const int nvec = (f + VW - 1) / VW, npan = CK(panels)(nvec);
    for (int p = 0, v0 = 0; p < npan; p++) {
        const int nv = (nvec - v0 + npan - p - 1) / (npan - p);
        const int tail = CK_TAIL(f, p, npan);
        const MASK_T last = MASK(tail ? f % VW : VW);
        const long c0 = (long)v0 * VW;
#define CK_FWD(n, t)                                                                     \
    CK(fwd_panel)((n), (t), 0, last, m + c0, w + c0, NULL, row, x + c0, src, off, i0, i1, f)
#define CK_FWDC(n, t)                                                                    \
    CK(fwd_panel)((n), (t), 1, last, m + c0, w + c0, wcut, row, x + c0, src, off, i0, i1, f)
        if (wcut)
            switch (3 * nv + tail) { CK_CASES(CK_FWDC) default: break; }
        else
            switch (3 * nv + tail) { CK_CASES(CK_FWD) default: break; }
        v0 += nv;
    }
}

void CK(tangent)(float *m, const float *w, const float *wd, const float *lambda,
                 const int32_t *row, const float *x, const float *xd, const int32_t *src,
                 const int32_t *off, int i0, int i1, int f)
{
    if (f <= 0 || i0 >= i1) return;
    const int nvec = (f + VW - 1) / VW, npan = CK(panels)(nvec);
    for (int p = 0, v0 = 0; p < npan; p++) {
        const int nv = (nvec - v0 + npan - p - 1) / (npan - p);
        const int tail = CK_TAIL(f, p, npan);
        const MASK_T last = MASK(tail ? f % VW : VW);
        const long c0 = (long)v0 * VW;
#define CK_TANC(n, t)                                                                    \
    CK(tan_panel)((n), (t), last, m + c0, w + c0, wd + c0, lambda, row, x + c0,         \
                  xd ? xd + c0 : NULL, src, off, i0, i1, f)
        switch (3 * nv + tail) { CK_CASES(CK_TANC) default: break; }
        v0 += nv;
    }
}

void CK(backward)(float *dx, float *dp, const float *dm, const float *x, const float *w,
                  const float *cut, const int32_t *row, const uint8_t *first,
                  const int32_t *src, const int32_t *off, int i0, int i1, int f, int32_t ring)
{
    if (f <= 0 || i0 >= i1) return;
    const int nvec = (f + VW - 1) / VW, npan = CK(panels)(nvec);
    for (int p = 0, v0 = 0; p < npan; p++) {
        const int nv = (nvec - v0 + npan - p - 1) / (npan - p);
        const int tail = CK_TAIL(f, p, npan);
        const MASK_T last = MASK(tail ? f % VW : VW);
        const long c0 = (long)v0 * VW;
#define CK_BWD(n, t)                                                                     \
    CK(bwd_panel)((n), (t), last, dx + c0, dp + c0, dm + c0, x + c0, w + c0, cut, row, first, \
                  src, off, i0, i1, f, ring)
        switch (3 * nv + tail) { CK_CASES(CK_BWD) default: break; }
        v0 += nv;
    }
}

/* --- the backward by rows (schnet_ops.h's pt_cfconv_backward_rows) --------
 * Rows in ascending order, each with both its edges: W_u read once, dP_u
 * written once.  Rows are numbered by first use in receiver order
 * (edge_rows.h), so receiver i's rows follow each other: dm_i, x_i and
 * dx_i's accumulator stay in registers (3 nv of them, RNVMAX per panel)
 * across them, and each row reads the sender's dm_j, x_j and W_u and adds
 * to dx_j in memory.  Per element the generic loop's operations
 * (cfconv_kernels.c), so the same bits.  pc (w holds P: the forward with
 * wcut stored no W): W_u = P_u · C_u formed here, rounded once as the
 * cutoff pass rounds it (the same bits).  Pointers offset to the panel's
 * first column (re is not). */
static inline __attribute__((always_inline)) void CK(rows_panel)(
    const int nv, const int tail, const int pc, const MASK_T last, float *dx, float *dp,
    const float *dm,
    const float *x, const float *w, const pt_cfconv_redge *re, int32_t r0, int32_t r1, long f)
{
    for (int32_t u = r0; u < r1;) {
        const int32_t i = re[u].i;
        const float *dmp = dm + i * f, *xip = x + i * f;
        float *dxi = dx + i * f;
        CK_V8(CK_DM)
#define CK_XI(v) const V y##v = (v) < nv ? CK_LD(xip, v) : VZERO();
        CK_V8(CK_XI)
#define CK_ACCI(v) V a##v = (v) < nv ? CK_LD(dxi, v) : VZERO();
        CK_V8(CK_ACCI)
        for (; u < r1 && re[u].i == i; u++) {
            const pt_cfconv_redge e = re[u];
            const long j = e.j * f;
            const float *wp = w + u * f, *xj = x + j, *dmj = dm + j;
            float *dxj = dx + j, *dpp = dp + (u - r0) * f;
            const V cu = VSET1(e.cut);
            /* dP's row PF rows ahead into L1: the chunk's scratch is in
             * L2, and seven stores a row that each wait for their line cost
             * ~8 ns an edge of ~20 (docs/performance.md, session 13 rows:
             * warm 20-21 -> 13-13.5 ns an edge; prefetchw no better) */
            if (u + CK_PF < r1) CK_PREFETCH(dpp + CK_PF * f, nv * VW);
            /* the first edge (receiver i, sender j): dx_j += dm_i ⊙ W_u,
             * and its product (dm_i ⊙ x_j)·C_u.  x_j is loaded before dx_j
             * is stored: rows j of x and dx can sit at the same offset in
             * their pages, and a load behind a store with the same low 12
             * address bits waits for it (4K aliasing). */
#define CK_LDW(v) (pc ? VMUL(CK_LD(wp, v), cu) : CK_LD(wp, v))
#define CK_R1(v) const V w_ = CK_LDW(v), x_ = CK_LD(xj, v);                              \
                 const V t_ = VMUL(VMUL(d##v, x_), cu);                                  \
                 CK_ST(dxj, v, VFMA(d##v, w_, CK_LD(dxj, v)));
#define CK_RONE(v) if ((v) < nv) { CK_R1(v) CK_ST(dpp, v, t_); }
            /* and the reverse (receiver j, sender i): dx_i += dm_j ⊙ W_u,
             * dP_u = fma(dm_j ⊙ x_i, C_u, first's) */
#define CK_RBOTH(v)                                                                      \
    if ((v) < nv) {                                                                      \
        const V m_ = CK_LD(dmj, v);                                                      \
        CK_R1(v)                                                                         \
        a##v = VFMA(m_, w_, a##v);                                                       \
        CK_ST(dpp, v, VFMA(VMUL(m_, y##v), cu, t_));                                     \
    }
            /* j = i (an atom's image): dx_i is the accumulator */
#define CK_RS1(v) const V w_ = CK_LDW(v);                                                \
                  a##v = VFMA(d##v, w_, a##v);                                           \
                  const V t_ = VMUL(VMUL(d##v, y##v), cu);
#define CK_RONES(v) if ((v) < nv) { CK_RS1(v) CK_ST(dpp, v, t_); }
#define CK_RBOTHS(v)                                                                     \
    if ((v) < nv) {                                                                      \
        CK_RS1(v)                                                                        \
        a##v = VFMA(d##v, w_, a##v);                                                     \
        CK_ST(dpp, v, VFMA(VMUL(d##v, y##v), cu, t_));                                   \
    }
            switch (e.part) {
            case PT_REDGE_ONE: CK_V8(CK_RONE) break;
            case PT_REDGE_BOTH: CK_V8(CK_RBOTH) break;
            case PT_REDGE_ONE_SELF: CK_V8(CK_RONES) break;
            default: CK_V8(CK_RBOTHS) break;
            }
        }
#define CK_STI(v) if ((v) < nv) CK_ST(dxi, v, a##v);
        CK_V8(CK_STI)
    }
}

void CK(backward_rows)(float *dx, float *dp, const float *dm, const float *x, const float *w,
                       int pc, const pt_cfconv_redge *re, int32_t r0, int32_t r1, int f)
{
    if (f <= 0 || r0 >= r1) return;
#define CK_BWR(nn, t)                                                                    \
    CK(rows_panel)((nn), (t), 0, lm, dx + c0, dp + c0, dm + c0, x + c0, w + c0, re, r0, r1, f)
#define CK_BWRP(nn, t)                                                                   \
    CK(rows_panel)((nn), (t), 1, lm, dx + c0, dp + c0, dm + c0, x + c0, w + c0, re, r0, r1, f)
    /* nv ≤ RNVMAX ≤ NVMAX: the forward's cases, the larger ones unused */
    if (pc)
        CK_PANELS(f, RNVMAX, CK_CASES, CK_BWRP)
    else
        CK_PANELS(f, RNVMAX, CK_CASES, CK_BWR)
}

/* --- the backward by senders (cfconv_kernels.h) ----------------------------
 * Compiled where the caller defines SNVMAX (AVX-512: x_j and dx_j both fit
 * the register file). */
#ifdef SNVMAX

/* The lines of the W row of the listed edge PF ahead (the next senders'
 * edges when this one's end: the lists follow each other in visit order). */
#define CK_PREFETCH_S(e)                                                                 \
    if ((e) + CK_PF < eend) CK_PREFETCH(w + row[se[(e) + CK_PF]] * f, nv * VW);

/* dx_j[panel] += Σ dm_i ⊙ W_u over sender j's edges and dP_u per the edge's
 * part (cfconv_kernels.h: write, add, dx only, combine), senders j0 ≤ j < j1
 * in ascending order; x_j's panel and dx_j's accumulator in registers
 * (2 nv of them).  Each edge's row, receiver, dP row, part and cutoff come
 * from its list entry sr[e] (pt_cfconv_sender_edges), read in order: the
 * lookups through se, row, dst, first, row_last and cut were a chain of
 * dependent loads of scattered entries on every edge, ~4 ns of its ~24 in
 * the pipeline (docs/performance.md, session 12 bwd).  Array pointers
 * offset to the panel's first column (so and sr are not). */
static inline __attribute__((always_inline)) void CK(bws_panel)(
    const int nv, const int tail, const MASK_T last, float *dx, float *dp, const float *dm,
    const float *x, const float *w, const int32_t *so, const pt_cfconv_sedge *sr, int j0,
    int j1, long f)
{
    const int32_t eend = so[j1];
    for (int j = j0; j < j1; j++) {
        if (so[j] == so[j + 1]) continue;
        const float *xp = x + j * f, *dmj = dm + j * f;
        float *dxp = dx + j * f;
#define CK_XS(v) const V x##v = (v) < nv ? CK_LD(xp, v) : VZERO();
        CK_V8(CK_XS)
#define CK_ACC(v) V a##v = (v) < nv ? CK_LD(dxp, v) : VZERO();
        CK_V8(CK_ACC)
        /* dm_j too: a combining edge (receiver i, sender j) forms its row's
         * other product dm_j ⊙ x_i itself (below) */
#define CK_DMJ(v) const V m##v = (v) < nv ? CK_LD(dmj, v) : VZERO();
        CK_V8(CK_DMJ)
        for (int32_t e = so[j]; e < so[j + 1]; e++) {
            const pt_cfconv_sedge s = sr[e];
            /* W's row of the edge PF ahead (the next senders' edges when
             * this one's end: the lists follow each other in visit order) */
            if (e + CK_PF < eend) CK_PREFETCH(w + sr[e + CK_PF].row * f, nv * VW);
            const float *dmp = dm + s.dst * f, *wp = w + s.row * f;
            float *dpp = dp + PT_SEDGE_DP(s) * f;
            const V cu = VSET1(s.cut);
#define CK_BS(v, DP)                                                                     \
    if ((v) < nv) {                                                                      \
        const V d_ = CK_LD(dmp, v);                                                      \
        a##v = VFMA(d_, CK_LD(wp, v), a##v);                                             \
        const V t_ = VMUL(d_, x##v);                                                     \
        CK_ST(dpp, v, DP);                                                               \
    }
#define CK_BS_WRITE(v) CK_BS(v, VMUL(t_, cu))
#define CK_BS_ADD(v) CK_BS(v, VFMA(t_, cu, CK_LD(dpp, v)))
#define CK_BS_COMBINE(v) CK_BS(v, VFMA(VMUL(m##v, CK_LD(xip, v)), cu, VMUL(t_, cu)))
#define CK_BS_DX(v) if ((v) < nv) a##v = VFMA(CK_LD(dmp, v), CK_LD(wp, v), a##v);
            PT_SEDGE_EDGE(s, CK_V8, CK_BS_WRITE, CK_BS_ADD, CK_BS_DX, CK_BS_COMBINE, x, f)
        }
#define CK_STACC(v) if ((v) < nv) CK_ST(dxp, v, a##v);
        CK_V8(CK_STACC)
    }
}

#define CK_SCASES(CALL)                                                                  \
    CK_SCASE(CALL, 1) CK_SCASE(CALL, 2) CK_SCASE(CALL, 3) CK_SCASE(CALL, 4)              \
    CK_SCASE(CALL, 5) CK_SCASE(CALL, 6) CK_SCASE(CALL, 7) CK_SCASE(CALL, 8)
#define CK_SCASE(CALL, n)                                                                \
    case 3 * (n): if ((n) <= SNVMAX) CALL((n), 0); break;                                \
    case 3 * (n) + 1: if ((n) <= SNVMAX) CALL((n), 1); break;                            \
    case 3 * (n) + 2: if ((n) <= SNVMAX) CALL((n), 2); break;

void CK(backward_senders)(float *dx, float *dp, const float *dm, const float *x, const float *w,
                          const int32_t *so, const pt_cfconv_sedge *sr, int j0, int j1, int f)
{
    if (f <= 0 || j0 >= j1) return;
#define CK_BWS(nn, t)                                                                    \
    CK(bws_panel)((nn), (t), lm, dx + c0, dp + c0, dm + c0, x + c0, w + c0, so, sr, j0, j1, f)
    CK_PANELS(f, SNVMAX, CK_SCASES, CK_BWS)
}

/* The force passes' second backward by senders (schnet_ops.h's
 * pt_cfconv_backward2): x̂_j in registers with x_j and ẋ_j (3 nv of them),
 * per element the operations of the loop it replaced (which gcc
 * contracted): t = m̄·x, s = fma(m̂, x, ẋ·m̄) (m̂·x without ẋ),
 * P̂ (=|+=) fma(s, C, t·Ċ), P̄ (=|fma) t·C, x̂ = x̂ + fma(m̂, W, m̄·(W'·λ));
 * a row's other edge, coming first in sender order, leaves its products
 * in the rows ("stash") and the first edge adds its own ("combine"; the
 * backward by senders did so until session 7: here x̂_j, x_j and ẋ_j leave
 * no registers for m̂_j and m̄_j; P̂'s two terms are added, so the order of
 * the pair does not matter for it). */
static inline __attribute__((always_inline)) void CK(b2s_panel)(
    const int nv, const int tail, const MASK_T last, float *dxh, float *ph, float *pb,
    const float *mh, const float *mb, const float *x, const float *xd, const float *w,
    const float *wd, const float *lambda, const float *cut, const float *dcut,
    const int32_t *row, const uint8_t *first, const int32_t *rlast, const int32_t *dst,
    const int32_t *so, const int32_t *se, int j0, int j1, long f)
{
    const int32_t eend = so[j1];
    for (int j = j0; j < j1; j++) {
        if (so[j] == so[j + 1]) continue;
        const float *xp = x + j * f, *xdp = xd ? xd + j * f : xp;
        float *dxp = dxh + j * f;
        CK_V8(CK_XS)
#define CK_XDS(v) const V y##v = xd && (v) < nv ? CK_LD(xdp, v) : VZERO();
        CK_V8(CK_XDS)
        CK_V8(CK_ACC)
        for (int32_t e = so[j]; e < so[j + 1]; e++) {
            const int32_t k = se[e], u = row[k], i = dst[k];
            CK_PREFETCH_S(e)
            if ((e) + CK_PF < eend) CK_PREFETCH(wd + row[se[(e) + CK_PF]] * f, nv * VW);
            const float *mhp = mh + i * f, *mbp = mb + i * f, *wp = w + u * f, *wdp = wd + u * f;
            float *php = ph + u * f, *pbp = pb + u * f;
            const float lf = lambda[u];
            const V l = VSET1(lf), cu = VSET1(cut[u]), cd = VSET1(dcut[u] * lf);
            const int mode = first[k] ? (rlast[u] == i ? 0 : 3) : (j < i ? 2 : 1);
#define CK_B2(v, PH, PB)                                                                 \
    if ((v) < nv) {                                                                      \
        const V h_ = CK_LD(mhp, v), b_ = CK_LD(mbp, v);                                  \
        const V t_ = VMUL(b_, x##v);                                                     \
        const V s_ = xd ? VFMA(h_, x##v, VMUL(y##v, b_)) : VMUL(h_, x##v);               \
        const V vh_ = VFMA(s_, cu, VMUL(t_, cd));                                        \
        CK_ST(php, v, PH);                                                               \
        CK_ST(pbp, v, PB);                                                               \
        a##v = VADD(a##v, VFMA(h_, CK_LD(wp, v), VMUL(b_, VMUL(CK_LD(wdp, v), l))));     \
    }
#define CK_B2_WRITE(v) CK_B2(v, vh_, VMUL(t_, cu))
#define CK_B2_ADD(v) CK_B2(v, VADD(CK_LD(php, v), vh_), VFMA(t_, cu, CK_LD(pbp, v)))
#define CK_B2_STASH(v) CK_B2(v, vh_, t_)
#define CK_B2_COMBINE(v) CK_B2(v, VADD(vh_, CK_LD(php, v)), VFMA(CK_LD(pbp, v), cu, VMUL(t_, cu)))
            switch (mode) {
            case 0: CK_V8(CK_B2_WRITE) break;
            case 1: CK_V8(CK_B2_ADD) break;
            case 2: CK_V8(CK_B2_STASH) break;
            default: CK_V8(CK_B2_COMBINE) break;
            }
        }
        CK_V8(CK_STACC)
    }
}

void CK(backward2_senders)(float *dxh, float *ph, float *pb, const float *mh, const float *mb,
                           const float *x, const float *xd, const float *w, const float *wd,
                           const float *lambda, const float *cut, const float *dcut,
                           const int32_t *row, const uint8_t *first, const int32_t *row_last,
                           const int32_t *dst, const int32_t *so, const int32_t *se, int j0,
                           int j1, int f)
{
    if (f <= 0 || j0 >= j1) return;
#define CK_B2S(nn, t)                                                                    \
    CK(b2s_panel)((nn), (t), lm, dxh + c0, ph + c0, pb + c0, mh + c0, mb + c0, x + c0,   \
                  xd ? xd + c0 : NULL, w + c0, wd + c0, lambda, cut, dcut, row, first,  \
                  row_last, dst, so, se, j0, j1, f)
    CK_PANELS(f, SNVMAX, CK_SCASES, CK_B2S)
}

/* The force passes' distance backward (schnet_ops.h's
 * pt_cfconv_backward_dist), receiver order with dm_i in registers, for
 * rows of one panel (f ≤ NVMAX·VW): dx_j += dm_i ⊙ W_u through memory and
 * g_u += ⟨dm_i ⊙ x_j, W'_u⟩ formed as the loop it replaced formed it (its
 * AVX-512 clone, fp-contract=fast): 16 partial sums p_l = fma(dm·x, W', p_l)
 * over the whole 16-lane blocks, then a scalar sum s over the rest in
 * order (from 0: the first 8 of a tail of 8 or more as s + (dm·x)·W', the
 * others s = fma(dm·x, W', s)), then s += p_0, ..., p_15; g_u = g_u + s. */
static inline __attribute__((always_inline)) void CK(dist_panel)(
    const int nv, const int tail, const MASK_T last, float *dx, float *g, const float *dm,
    const float *x, const float *w, const float *wd, const int32_t *row, const int32_t *src,
    const int32_t *off, int n, long f)
{
    const int32_t kend = off[n];
    const int nfull = (int)(f / 16), rest = (int)(f - 16L * nfull);
    for (int i = 0; i < n; i++) {
        const float *dmp = dm + i * f;
        CK_V8(CK_DM)
        for (int32_t k = off[i]; k < off[i + 1]; k++) {
            const int32_t u = row[k];
            if (u < 0) continue;
            const long j = src[k] * f;
            const float *xp = x + j, *wp = w + u * f, *wdp = wd + u * f;
            float *dxp = dx + j;
            CK_PREFETCH_W(k)
            if ((k) + CK_PF < kend && row[(k) + CK_PF] >= 0)
                CK_PREFETCH(wd + row[(k) + CK_PF] * f, nv * VW);
            V p = VZERO();
            float tv[16] __attribute__((aligned(64)));
#define CK_DIST(v)                                                                       \
    if ((v) < nv) {                                                                      \
        CK_DX(v)                                                                         \
        if ((v) < nfull) p = VFMA(VMUL(d##v, CK_LD(xp, v)), CK_LD(wdp, v), p);           \
        else VSTOREU(tv, VMUL(d##v, CK_LD(xp, v)));                                      \
    }
            CK_V8(CK_DIST)
            float s = 0.0f;
            const float *wt = wdp + 16L * nfull;
            int c = 0;
            if (rest >= 8)
                for (; c < 8; c++) s = s + tv[c] * wt[c];
            for (; c < rest; c++) s = fmaf(tv[c], wt[c], s);
            float pv[16] __attribute__((aligned(64)));
            VSTOREU(pv, p);
            for (int l = 0; l < 16; l++) s += pv[l];
            g[u] = g[u] + s;
        }
    }
}

/* 1 when it ran (f ≤ NVMAX·VW), 0 when the caller must run the generic
 * loop; dx is zeroed by the caller. */
int CK(backward_dist)(float *dx, float *g, const float *dm, const float *x, const float *w,
                      const float *wd, const int32_t *row, const int32_t *src,
                      const int32_t *off, int n, int f)
{
    const int nv = (f + VW - 1) / VW, tail = CK_TAIL(f, 0, 1);
    if (f <= 0 || nv > NVMAX) return f <= 0;
    const MASK_T last = MASK(tail ? f % VW : VW);
#define CK_DISTC(nn, t) CK(dist_panel)((nn), (t), last, dx, g, dm, x, w, wd, row, src, off, n, f)
    switch (3 * nv + tail) { CK_CASES(CK_DISTC) default: break; }
    return 1;
}
#endif
