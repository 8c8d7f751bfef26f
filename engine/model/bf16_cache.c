/* bf16_cache.c — packed weights kept per thread across products (bf16.c
 * asks before packing op(B)); why and when below. */
#include "engine/model/bf16_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* --- packed weights, cached per thread ------------------------------------
 * The filter network multiplies every 256-row chunk of a batch by the same
 * two weights (engine/model/schnet_filter.c), so packing op(B) afresh on each
 * call (rounding, a 16 × 16 transpose per block) repeated the same work ~80
 * times per block and step: ≈ 8% of the bf16 products' time on water.  A
 * packed weight is kept per calling thread (replicas never share it) and
 * reused only while its fp32 source is bit for bit the one it was packed
 * from (memcmp against the entry's copy: the optimizer updates weights in
 * place, at the same address), so a hit gives exactly the bits a fresh
 * packing would.  Only products whose op(A) is not transposed use it: in the
 * model those are a Linear layer's forward (X·Wᵀ) and input gradient (dY·W),
 * whose B is the weight; a weight gradient's B (dYᵀ·X) is activations that
 * change with every call.
 *
 * The comparison itself (40 KB per 100 × 100 weight) cost ~1% of a water
 * step, paid on each of a block's ~80 chunks.  A product that says its B is
 * held (pt_bf16_epilogue.b_held) reuses an entry compared (or packed) on
 * this thread since its last pt_bf16_weights_hold() without comparing: the
 * filter network starts a hold on each pass's first chunk, whose products
 * compare, and holds the weights over the pass's other chunks
 * (schnet_filter.c).  Products that do not say so always compare, so a
 * hold never outlives the caller's promise. */
#define WCACHE_ENTRIES 4
#define WCACHE_DIM 128 /* k and n of a cached weight */

typedef struct wentry {
    uint32_t packed[(WCACHE_DIM / 2) * WCACHE_DIM];
    float src[WCACHE_DIM * WCACHE_DIM]; /* op(B) as stored, rows of `width` */
    const void *b;
    int k, n, ld, trans, valid;
    unsigned long used;
    unsigned long held; /* the hold it was last compared or packed in */
} wentry;

typedef struct wcache {
    wentry e[WCACHE_ENTRIES];
    unsigned long clock;
    unsigned long hold; /* the current hold's number (from 1) */
} wcache;

static pthread_key_t wcache_key;
static pthread_once_t wcache_once = PTHREAD_ONCE_INIT;
static int wcache_key_ok;

static void wcache_key_make(void) { wcache_key_ok = pthread_key_create(&wcache_key, free) == 0; }

static wcache *wcache_get(void)
{
    pthread_once(&wcache_once, wcache_key_make);
    if (!wcache_key_ok) return NULL;
    wcache *w = pthread_getspecific(wcache_key);
    if (!w) {
        w = aligned_alloc(64, (sizeof(*w) + 63) / 64 * 64);
        if (!w) return NULL;
        memset(w, 0, sizeof(*w));
        if (pthread_setspecific(wcache_key, w)) {
            free(w);
            return NULL;
        }
    }
    return w;
}

void pt_bf16_weights_hold(void)
{
    wcache *w = wcache_get();
    if (w) w->hold++;
}

/* The packed op(B) of job (fp32, AVX-512 kernel), from the cache or packed
 * into it now; NULL when B is not cacheable (then the caller packs it). */
const uint32_t *pt_bf16_weight_packed(const pt_bf16_job *job)
{
    if (!job->b.f32 || job->a.trans || job->k > WCACHE_DIM || job->n > WCACHE_DIM) return NULL;
    wcache *w = wcache_get();
    if (!w) return NULL;
    const pt_bf16_operand *b = &job->b;
    const int rows = b->trans ? job->n : job->k, width = b->trans ? job->k : job->n;
    const float *src = b->p;
    wentry *e = NULL, *old = &w->e[0];
    for (int i = 0; i < WCACHE_ENTRIES; i++) {
        wentry *x = &w->e[i];
        if (x->valid && x->b == b->p && x->k == job->k && x->n == job->n && x->ld == b->ld &&
            x->trans == b->trans) {
            e = x;
            break;
        }
        if (!x->valid || x->used < old->used) old = x;
    }
    int same = e != NULL;
    if (same && job->b_held && w->hold && e->held == w->hold) {
        e->used = ++w->clock;
        return e->packed;
    }
    for (int r = 0; r < rows && same; r++)
        same = !memcmp(e->src + (size_t)r * width, src + (size_t)r * b->ld,
                       (size_t)width * sizeof(float));
    if (!e) e = old;
    e->used = ++w->clock;
    e->held = w->hold;
    if (same) return e->packed;
    for (int r = 0; r < rows; r++)
        memcpy(e->src + (size_t)r * width, src + (size_t)r * b->ld, (size_t)width * sizeof(float));
    pt_bf16_job pack = *job;
    pack.bp = e->packed;
    pack.bblock = NULL;
    pt_bf16_avx512_pack_b(&pack, 0, pack.kp);
    e->b = b->p;
    e->k = job->k;
    e->n = job->n;
    e->ld = b->ld;
    e->trans = b->trans;
    e->valid = 1;
    return e->packed;
}

