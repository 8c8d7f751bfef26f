/* ssp_vec_loop.h — the loop of a vector shifted-softplus kernel over a flat
 * run of floats, shared by ssp_avx512.c and ssp_avx2.c (after their
 * vocabulary, vec_avx512.h / vec_avx2.h, VSTREAM (an aligned non-temporal
 * store of one vector), and instantiations of ssp_body.h: sspB_step over
 * SSP_BLOCK vectors (the forward), sspD_dsig over SSP_DBLOCK (the backward's
 * σ̃: its own count, since its chain and mix of pipes differ), and ssp1_* over
 * one).
 * Blocks of SSP_BLOCK vectors, then single vectors, then the last partial
 * vector through a lane mask (masked-off lanes load 0 and are not stored).
 * stream_sig: the blocks' σ go out with non-temporal stores (sig aligned to
 * a vector; the few single and partial vectors after them are plain
 * stores), then a store fence, so the thread's later loads and other
 * threads after a synchronisation see them like plain stores.  copy (NULL:
 * none): the values written a second time there, the blocks' the same way
 * when stream_copy (copy aligned to a vector). */

static inline __attribute__((always_inline)) void ssp_loop(float *restrict x,
                                                           float *restrict copy,
                                                           float *restrict sig, size_t len,
                                                           const int want_sig,
                                                           const int stream_sig,
                                                           const int stream_copy)
{
    size_t k = 0;
    for (; k + SSP_BLOCK * (size_t)VW <= len; k += SSP_BLOCK * (size_t)VW) {
        T v[SSP_BLOCK], o[SSP_BLOCK], g[SSP_BLOCK];
        for (int j = 0; j < SSP_BLOCK; j++) v[j] = VLOADU(x + k + (size_t)VW * j);
        sspB_step(v, o, want_sig ? g : NULL);
        for (int j = 0; j < SSP_BLOCK; j++) VSTOREU(x + k + (size_t)VW * j, o[j]);
        if (copy && stream_copy)
            for (int j = 0; j < SSP_BLOCK; j++) VSTREAM(copy + k + (size_t)VW * j, o[j]);
        else if (copy)
            for (int j = 0; j < SSP_BLOCK; j++) VSTOREU(copy + k + (size_t)VW * j, o[j]);
        if (want_sig && stream_sig)
            for (int j = 0; j < SSP_BLOCK; j++) VSTREAM(sig + k + (size_t)VW * j, g[j]);
        else if (want_sig)
            for (int j = 0; j < SSP_BLOCK; j++) VSTOREU(sig + k + (size_t)VW * j, g[j]);
    }
    for (; k + (size_t)VW <= len; k += VW) {
        T v = VLOADU(x + k), o, g;
        ssp1_step(&v, &o, want_sig ? &g : NULL);
        VSTOREU(x + k, o);
        if (copy) VSTOREU(copy + k, o);
        if (want_sig) VSTOREU(sig + k, g);
    }
    if (k < len) {
        const MASK_T m = MASK((int)(len - k));
        T v = VLOADM(x + k, m), o, g;
        ssp1_step(&v, &o, want_sig ? &g : NULL);
        VSTOREM(x + k, m, o);
        if (copy) VSTOREM(copy + k, m, o);
        if (want_sig) VSTOREM(sig + k, m, g);
    }
    if (stream_sig || stream_copy) _mm_sfence();
}

void SSP_KERNEL(float *x, float *sig, size_t len)
{
    if (sig)
        ssp_loop(x, NULL, sig, len, 1, 0, 0);
    else
        ssp_loop(x, NULL, NULL, len, 0, 0, 0);
}

void SSP_KERNEL_NT(float *x, float *sig, size_t len)
{
    if (sig && (uintptr_t)sig % (sizeof(float) * VW) == 0)
        ssp_loop(x, NULL, sig, len, 1, 1, 0);
    else
        SSP_KERNEL(x, sig, len);
}

void SSP_KERNEL_COPY_NT(float *x, float *copy, size_t len)
{
    if ((uintptr_t)copy % (sizeof(float) * VW) == 0)
        ssp_loop(x, copy, NULL, len, 0, 0, 1);
    else
        ssp_loop(x, copy, NULL, len, 0, 0, 0);
}

/* d[len] ← d · σ̃(s) (ssp_body.h's dsig), the same blocks, singles and
 * masked tail as the forward */
void SSP_DSIG_KERNEL(float *restrict d, const float *restrict s, size_t len)
{
    size_t k = 0;
    for (; k + SSP_DBLOCK * (size_t)VW <= len; k += SSP_DBLOCK * (size_t)VW) {
        T sv[SSP_DBLOCK], dv[SSP_DBLOCK];
        for (int j = 0; j < SSP_DBLOCK; j++) {
            sv[j] = VLOADU(s + k + (size_t)VW * j);
            dv[j] = VLOADU(d + k + (size_t)VW * j);
        }
        sspD_dsig(sv, dv);
        for (int j = 0; j < SSP_DBLOCK; j++) VSTOREU(d + k + (size_t)VW * j, dv[j]);
    }
    for (; k < len; k += VW) {
        const MASK_T m = MASK(len - k < (size_t)VW ? (int)(len - k) : VW);
        T sv = VLOADM(s + k, m), dv = VLOADM(d + k, m);
        ssp1_dsig(&sv, &dv);
        VSTOREM(d + k, m, dv);
    }
}
