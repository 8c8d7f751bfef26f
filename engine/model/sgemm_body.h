/* sgemm_body.h — the register-blocked product kernels, written once and
 * compiled per instruction set: sgemm_avx512.c and sgemm_avx2.c each define
 * the macros below (the vector vocabulary by including vec_avx512.h /
 * vec_avx2.h) and include this file (it has no guard on purpose).  See sgemm_kernels.h for the layouts and the numerics.
 *
 * The caller defines:
 *   SK(name)       the symbol prefix (pt_sgemm_avx512_##name)
 *   V, MASK_T      the vector and lane-mask types; VW lanes per vector (vec_*.h)
 *   RB, NVMAX      rows and vectors of a register tile (RB·NVMAX + NVMAX + 1
 *                  vector registers must fit the file)
 *   VZERO() VSET1(x) VLOADU(p) VLOADM(p, m) VSTOREU(p, v) VSTOREM(p, m, v)
 *   VFMA(a, b, c) = a·b + c fused   VMUL(a, b)   MASK(n) (first n lanes) (vec_*.h)
 *   SK_NV_CASES(R) SK_CASE(R, 1) … SK_CASE(R, NVMAX): the tiles of a row count
 *
 * A tile is rb ≤ RB rows of C times nv ≤ NVMAX vectors of columns, the last
 * vector masked to the columns that exist when the panel is not whole
 * (`full` says it is: AVX2's masked load and store, vmaskmovps, cost more
 * than plain ones, and a 100-column row is six whole 16-column panels of
 * the AVX2 tile and one of 4).  Tiles are instantiated for each
 * (rb, nv) pair through a switch so that every loop below has constant
 * bounds and the accumulators live in registers. */

/* C tile (+)= Σ_p a_p ⊗ b_p over p < k, where a_p[i] = a[i·ars + p·aps] and
 * b_p = b[p·ldb .. +nv·VW) (ldb a whole number of vectors): NN has ars = lda,
 * aps = 1; TN ars = 1, aps = lda.
 * The chains start from bias (a row, whole vectors; plus c0's row when c0
 * is not NULL: a residual, SK(nn_res)), else from 0, C or beta·C.  The
 * accumulators are named variables (acc<row><vector>), not an array: gcc
 * keeps an array of vectors in memory and spills it on every step.
 * With rb and nv constant (SK(block)'s switch) every guard below folds. */
/* B's vectors are loaded once per step into registers: without the empty asm
 * gcc folds each load into every FMA that uses it (a memory operand), so a
 * 3 x 7 tile issued 24 loads per 21 FMAs and the two load ports, not the
 * FMA pipes, set the rate. */
#define SK_REG(x) __asm__("" : "+v"(x))
#define SK_V7(X, i) X(i, 0) X(i, 1) X(i, 2) X(i, 3) X(i, 4) X(i, 5) X(i, 6)
#define SK_IV(X) SK_V7(X, 0) SK_V7(X, 1) SK_V7(X, 2) SK_V7(X, 3) SK_V7(X, 4) SK_V7(X, 5)
#define SK_I(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define SK_V(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6)
#define SK_DECL(i, v) V acc##i##v = VZERO();
#define SK_INIT(i, v)                                                                    \
    if ((i) < rb && (v) < nv && bias) {                                                  \
        acc##i##v = VLOADU(bias + (v) * VW);                                             \
        if (c0) {                                                                        \
            const float *rp = c0 + (i) * ldc0 + (v) * VW;                                \
            V x = (v) == nv - 1 && !full ? VLOADM(rp, last) : VLOADU(rp);                \
            acc##i##v = VADD(x, acc##i##v);                                              \
        }                                                                                \
    } else if ((i) < rb && (v) < nv && beta != 0.0f) {                                   \
        const float *cp = c + (i) * ldc + (v) * VW;                                      \
        V x = (v) == nv - 1 && !full ? VLOADM(cp, last) : VLOADU(cp);                    \
        acc##i##v = beta == 1.0f ? x : VMUL(vb, x);                                      \
    }
/* B's rows are read in whole vectors: the last vector's extra lanes only
 * feed accumulator lanes that are never stored.  But TN reads B as the
 * caller has it, where a whole vector could run past the end of the last
 * rows: those (below) read their last vector masked.  Not
 * every row: AVX2's masked load (vmaskmovps) in every step cost 4%. */
#define SK_LOADB(v)                                                                      \
    V b##v = (v) < nv ? VLOADU(bp + (v) * VW) : VZERO();                                 \
    if ((v) < nv) SK_REG(b##v);
#define SK_LOADB_TAIL(v)                                                                 \
    V b##v = (v) < nv - 1    ? VLOADU(bp + (v) * VW)                                     \
             : (v) == nv - 1 ? VLOADM(bp + (v) * VW, last)                               \
                             : VZERO();                                                  \
    if ((v) < nv) SK_REG(b##v);
/* one broadcast at a time, each used by its row's FMAs at once, so that
 * only one A value is live (the AVX2 tile has no register to spare) */
#define SK_FMA(i, v) if ((v) < nv) acc##i##v = VFMA(ai, b##v, acc##i##v);
#define SK_ROW_FMA(i)                                                                    \
    if ((i) < rb) {                                                                      \
        V ai = VSET1(ap[(i) * ars]);                                                     \
        SK_V7(SK_FMA, i)                                                                 \
        SK_PK_A(i)                                                                       \
    }
#define SK_STORE(i, v)                                                                   \
    if ((i) < rb && (v) < nv) {                                                          \
        float *cp = c + (i) * ldc + (v) * VW;                                            \
        if ((v) == nv - 1 && !full)                                                      \
            VSTOREM(cp, last, acc##i##v);                                                \
        else                                                                             \
            VSTOREU(cp, acc##i##v);                                                      \
    }

#ifdef SK_PACK4
#if RB > 3
#error "the packed last columns hold 4 columns of at most 3 rows (lanes 0-11)"
#endif
/* the packed accumulator's start: bias columns (plus c0's rows: a residual),
 * else rows of C (times beta) */
#define SK_PK_INIT                                                                       \
    if (pk && bias) {                                                                    \
        accp = SK_BCAST4(bias + nv * VW);                                                \
        if (c0) {                                                                        \
            V x = SK_INSERT4(VZERO(), c0 + nv * VW, 0);                                  \
            if (rb > 1) x = SK_INSERT4(x, c0 + ldc0 + nv * VW, 1);                       \
            if (rb > 2) x = SK_INSERT4(x, c0 + 2 * ldc0 + nv * VW, 2);                   \
            accp = VADD(x, accp);                                                        \
        }                                                                                \
    } else if (pk && beta != 0.0f) {                                                     \
        V x = SK_INSERT4(VZERO(), c + nv * VW, 0);                                       \
        if (rb > 1) x = SK_INSERT4(x, c + ldc + nv * VW, 1);                             \
        if (rb > 2) x = SK_INSERT4(x, c + 2 * ldc + nv * VW, 2);                         \
        accp = beta == 1.0f ? x : VMUL(vb, x);                                           \
    }
/* row i's A value into its 4 lanes (row 0 fills the vector: lanes past the
 * tile's rows are never stored) */
#define SK_PK_A(i) if (pk) ap4 = (i) == 0 ? ai : SK_MASKMOV(ap4, 0xFu << (4 * (i)), ai);
#define SK_PK_STEP                                                                       \
    if (pk) {                                                                            \
        V bq = SK_BCAST4(bp + nv * VW);                                                  \
        accp = VFMA(ap4, bq, accp);                                                      \
    }
/* (lane indices spelled as constants: they are instruction immediates,
 * which a loop gives only where the compiler unrolls it) */
#define SK_PK_STORE                                                                      \
    if (pk) {                                                                            \
        SK_EXTRACT4(c + nv * VW, accp, 0);                                               \
        if (rb > 1) SK_EXTRACT4(c + ldc + nv * VW, accp, 1);                             \
        if (rb > 2) SK_EXTRACT4(c + 2 * ldc + nv * VW, accp, 2);                         \
    }
#else
#define SK_PK_INIT
#define SK_PK_A(i)
#define SK_PK_STEP
#define SK_PK_STORE
#endif

static inline __attribute__((always_inline)) void SK(tile)(int rb, int nv, int pk, MASK_T last,
                                                           int full, int k,
                                                           const float *a, long ars, long aps,
                                                           const float *b, long ldb, float beta,
                                                           const float *bias, const float *c0,
                                                           long ldc0, float *c, long ldc)
{
    const V vb = VSET1(beta);
    SK_IV(SK_DECL)
    SK_IV(SK_INIT)
    V accp = VZERO(), ap4 = VZERO();
    (void)accp;
    (void)ap4;
    SK_PK_INIT
    /* the last vector of row p runs at most VW - 1 floats past column n,
     * so it stays inside B (whose last row ends at column n) for every row
     * but the last 1 + ceil((VW - 1) / ldb) */
    const long tail = 1 + (VW - 1 + ldb - 1) / ldb;
    /* packed: every vector is whole, the 4 columns read as 4 floats */
    const int whole = pk ? k : k > tail ? k - (int)tail : 0;
    for (int p = 0; p < whole; p++) {
        const float *bp = b + p * ldb;
        const float *ap = a + p * aps;
        SK_V(SK_LOADB)
        SK_I(SK_ROW_FMA)
        SK_PK_STEP
    }
    for (int p = whole; p < k; p++) {
        const float *bp = b + p * ldb;
        const float *ap = a + p * aps;
        SK_V(SK_LOADB_TAIL)
        SK_I(SK_ROW_FMA)
    }
    SK_IV(SK_STORE)
    SK_PK_STORE
}

#define SK_CASE(R, N)                                                                    \
    case (R) * 16 + (N):                                                                 \
        SK(tile)(R, N, 0, last, full, k, a, ars, aps, b, ldb, beta, bias, c0, ldc0, c, ldc); \
        break;
#ifdef SK_PACK4
/* N whole vectors and the packed 4 columns (key 8 + N) */
#define SK_PCASE(R, N)                                                                   \
    case (R) * 16 + 8 + (N):                                                             \
        SK(tile)(R, N, 1, last, 1, k, a, ars, aps, b, ldb, beta, bias, c0, ldc0, c, ldc);    \
        break;
#define SK_ROW(R) SK_NV_CASES(R) SK_PK_CASES(R)
#else
#define SK_ROW(R) SK_NV_CASES(R)
#endif

/* One tile with run-time (rb, nv) dispatched to its constant-bound copy.
 * Not inlined into the loops over tiles: there their pointers and counters
 * crowded the registers, and gcc spilled one of B's vectors to the stack in
 * the innermost loop (a store and three reloads per step). */
static __attribute__((noinline)) void SK(block)(int rb, int nv, int pk, MASK_T last, int full,
                                                int k, const float *a, long ars, long aps,
                                                const float *b, long ldb, float beta,
                                                const float *bias, const float *c0, long ldc0,
                                                float *c, long ldc)
{
    switch (rb * 16 + (pk ? 8 : 0) + nv) {
        SK_ROW(1)
#if RB >= 2
        SK_ROW(2)
#endif
#if RB >= 3
        SK_ROW(3)
#endif
#if RB >= 4
        SK_ROW(4)
#endif
#if RB >= 5
        SK_ROW(5)
#endif
#if RB >= 6
        SK_ROW(6)
#endif
    default:
        break;
    }
}

/* rows × bytes from p (rows ld floats apart) fetched into cache: a hint,
 * no effect on any result */
static inline __attribute__((always_inline)) void SK(fetch_rows)(const float *p, long ld,
                                                                 int rows, int bytes)
{
    for (int r = 0; r < rows; r++) {
        const char *q = (const char *)(p + r * ld);
        for (int o = 0; o < bytes; o += 64) __builtin_prefetch(q + o, 0, 3);
        __builtin_prefetch(q + bytes - 1, 0, 3);
    }
}

/* Every tile of C[m, n]: column panels of NVMAX vectors, row blocks of RB.
 * ahead (PT_SGEMM_AHEAD_*): as a tile starts, the rows the next tile of the
 * panel reads first are fetched — its chains' start (c0's rows, or C's
 * when beta ≠ 0 and there is no bias) and, with _A, its rows of A (NN
 * only).  A tile's start waits on those loads before its first FMA; where
 * they come from L3 or memory (a node product's operand after the edge
 * pipeline) each tile paid that latency, which a tile's ~1,000 cycles of
 * FMAs now cover (docs/performance.md, session 19 (nodew)). */
static void SK(tiles)(int m, int n, int k, const float *a, long ars, long aps, long a_row_step,
                      const float *b, long ldb, float beta, const float *bias,
                      const float *c0, long ldc0, float *c, long ldc, pt_sgemm_pf *pf,
                      int ahead)
{
    const int panel = VW * NVMAX;
    if (pf) { /* the caller's lines over this call's tiles (about m / RB a panel) */
        const long tiles = (long)((n + panel - 1) / panel) * ((m + RB - 1) / RB);
        pf->tile_lines = (pf->lines + tiles - 1) / tiles;
    }
    /* row blocks of RB, but a remainder just over RB is split in two halves
     * (100 rows with RB 3: 32 × 3 + 2 + 2, not 33 × 3 + 1): a one-row tile
     * loads B for a single FMA per vector */
    for (int j0 = 0; j0 < n; j0 += panel) {
        int w = n - j0 < panel ? n - j0 : panel;
        int nv = (w + VW - 1) / VW;
        MASK_T last = MASK(w - (nv - 1) * VW);
        int pk = 0;
#ifdef SK_PACK4
        /* a last vector of exactly 4 columns: packed (above) */
        if (w > VW && w % VW == 4) {
            pk = 1;
            nv--;
        }
#endif
        for (int i0 = 0, rb; i0 < m; i0 += rb) {
            int rem = m - i0;
            rb = rem <= RB ? rem : rem < 2 * RB ? (rem + 1) / 2 : RB;
            if (pf && pf->lines > 0) pt_sgemm_pf_tile(pf);
            if (ahead && i0 + rb < m) {
                const int rem2 = m - i0 - rb;
                const int rb2 = rem2 <= RB ? rem2 : rem2 < 2 * RB ? (rem2 + 1) / 2 : RB;
                if (c0)
                    SK(fetch_rows)(c0 + (long)(i0 + rb) * ldc0 + j0, ldc0, rb2, w * 4);
                else if (beta != 0.0f && !bias)
                    SK(fetch_rows)(c + (long)(i0 + rb) * ldc + j0, ldc, rb2, w * 4);
                if ((ahead & PT_SGEMM_AHEAD_A) && aps == 1)
                    SK(fetch_rows)(a + (long)(i0 + rb) * a_row_step, a_row_step, rb2, k * 4);
            }
            SK(block)(rb, nv, pk, last, w == nv * VW, k, a + (long)i0 * a_row_step, ars, aps, b + j0,
                      ldb, beta, bias ? bias + j0 : NULL, c0 ? c0 + (long)i0 * ldc0 + j0 : NULL,
                      ldc0, c + (long)i0 * ldc + j0, ldc);
        }
    }
}

/* NN: C[m,n] = A[m,k] B[k,n] + beta C, or + bias[n] on every row when bias
 * is not NULL (the chains then start from the bias instead of C; bias
 * padded to whole vectors), in one pass over k (≤ PT_SGEMM_MAX_DIM): with
 * B's vectors in registers, passes of 64 rows of B (for L1) cost more in
 * C's round trips than they saved (filter 100 → 100 products 4% slower).
 * B is the dispatcher's packed copy: rows 64-byte aligned (ldb a multiple
 * of 16). */
void SK(nn)(int m, int n, int k, const float *a, int lda, const float *b, int ldb, float beta,
            const float *bias, float *c, int ldc, pt_sgemm_pf *pf, int ahead)
{
    SK(tiles)(m, n, k, a, lda, 1, lda, b, ldb, beta, bias, NULL, 0, c, ldc, pf, ahead);
}

/* NN with a residual: the chains start from c0's row plus the bias (c0[i·ldc0
 * + j] + bias[j], one rounding: C = c0 + bias written first and read back
 * with beta = 1 has the same start), so c0 is read as each tile starts
 * instead of in a pass of its own (sgemm_kernels.h); the next tile's c0
 * rows fetched ahead. */
void SK(nn_res)(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                const float *bias, const float *c0, int ldc0, float *c, int ldc,
                pt_sgemm_pf *pf)
{
    SK(tiles)(m, n, k, a, lda, 1, lda, b, ldb, 0.0f, bias, c0, ldc0, c, ldc, pf,
              PT_SGEMM_AHEAD_START);
}

/* TN: C[m,n] = A[k,m]ᵀ B[k,n] + beta C for one pass of k ≤ PT_SGEMM_KC rows
 * (the dispatcher chains the passes); B as the caller has it. */
void SK(tn)(int m, int n, int k, const float *a, int lda, const float *b, int ldb, float beta,
            float *c, int ldc, pt_sgemm_pf *pf)
{
    SK(tiles)(m, n, k, a, 1, lda, 1, b, ldb, beta, NULL, NULL, 0, c, ldc, pf, 0);
}

#undef SK_CASE
#undef SK_PCASE
#undef SK_ROW
#undef SK_PK_INIT
#undef SK_PK_A
#undef SK_PK_STEP
#undef SK_PK_STORE
#undef SK_NV_CASES
#undef SK_V7
#undef SK_IV
#undef SK_I
#undef SK_V
#undef SK_DECL
#undef SK_INIT
#undef SK_LOADB
#undef SK_LOADB_TAIL
#undef SK_ROW_FMA
#undef SK_FMA
#undef SK_STORE
