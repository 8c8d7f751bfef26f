/* split.c — seeded train / validation / test split; see split.h. */
#include "engine/data/split.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* floor(f * n), guarded against 0.58 * 100 = 57.99999999999999: a product within 1e-9 of
 * the next integer counts as that integer. */
static uint32_t part_size(double f, uint32_t n)
{
    double x = f * (double)n;
    return (uint32_t)floor(x + 1e-9);
}

int pt_split_init_items(pt_split *sp, const uint32_t *items, uint32_t n, const double f[3],
                        uint64_t seed, pt_errors *errs)
{
    memset(sp, 0, sizeof(*sp));
    uint32_t n_train = part_size(f[0], n), n_val = part_size(f[1], n);
    if (n_train + n_val > n) n_val = n - n_train;
    if (n_train == 0 || n_val == 0) {
        pt_errors_add(errs, NULL, 0, "training.split",
                      "%u structures split %g/%g/%g leave the %s part empty; use more data or "
                      "larger fractions", n, f[0], f[1], f[2], n_train == 0 ? "training" : "validation");
        return -1;
    }
    sp->ids_ = malloc((size_t)n * sizeof(uint32_t));
    if (!sp->ids_) {
        pt_errors_add(errs, NULL, 0, "training.split", "out of memory splitting %u structures", n);
        return -1;
    }
    if (items) memcpy(sp->ids_, items, (size_t)n * sizeof(uint32_t));
    else for (uint32_t i = 0; i < n; i++) sp->ids_[i] = i;
    pt_rng rng;
    pt_rng_init(&rng, seed, PT_RNG_STREAM_SPLIT);
    pt_rng_shuffle_u32(&rng, sp->ids_, n);

    sp->n = n;
    sp->n_train = n_train;
    sp->n_val = n_val;
    sp->n_test = n - n_train - n_val;
    sp->train = sp->ids_;
    sp->val = sp->ids_ + n_train;
    sp->test = sp->val + n_val;
    qsort(sp->train, sp->n_train, sizeof(uint32_t), cmp_u32);
    qsort(sp->val, sp->n_val, sizeof(uint32_t), cmp_u32);
    if (sp->n_test) qsort(sp->test, sp->n_test, sizeof(uint32_t), cmp_u32);
    return 0;
}

int pt_split_init(pt_split *sp, uint32_t n, const double f[3], uint64_t seed, pt_errors *errs)
{
    return pt_split_init_items(sp, NULL, n, f, seed, errs);
}

void pt_split_close(pt_split *sp)
{
    free(sp->ids_);
    memset(sp, 0, sizeof(*sp));
}

/* Bitmask of the elements of structure s (Z <= 99 fits two words). */
static void element_mask(const pt_dataset *ds, uint32_t s, uint64_t mask[2])
{
    mask[0] = mask[1] = 0;
    for (uint64_t a = ds->atom_offset[s]; a < ds->atom_offset[s + 1]; a++)
        mask[ds->z[a] >> 6] |= 1ULL << (ds->z[a] & 63);
}

static void count_elements(const pt_dataset *ds, uint32_t s, uint32_t *count, int delta)
{
    uint64_t m[2];
    element_mask(ds, s, m);
    for (int z = 0; z <= PT_Z_MAX; z++)
        if (m[z >> 6] >> (z & 63) & 1) count[z] = (uint32_t)((int)count[z] + delta);
}

/* A training structure none of whose elements would vanish from training. */
static int find_donor(const pt_split *sp, const pt_dataset *ds, const uint32_t *count,
                      uint32_t *at)
{
    for (uint32_t i = 0; i < sp->n_train; i++) {
        uint64_t m[2];
        element_mask(ds, sp->train[i], m);
        int ok = 1;
        for (int z = 0; z <= PT_Z_MAX && ok; z++)
            if ((m[z >> 6] >> (z & 63) & 1) && count[z] < 2) ok = 0;
        if (ok) {
            *at = i;
            return 0;
        }
    }
    return -1;
}

int pt_split_cover_elements(pt_split *sp, const pt_dataset *ds, uint32_t *moved, pt_errors *errs)
{
    uint32_t count[PT_Z_MAX + 1] = {0};   /* training structures holding each element */
    *moved = 0;
    for (uint32_t i = 0; i < sp->n_train; i++) count_elements(ds, sp->train[i], count, +1);
    uint32_t *rest = sp->val;             /* validation and test are contiguous */
    uint32_t n_rest = sp->n_val + sp->n_test;
    for (uint32_t i = 0; i < n_rest; i++) {
        uint64_t m[2];
        element_mask(ds, rest[i], m);
        int unseen = -1;
        for (int z = 0; z <= PT_Z_MAX && unseen < 0; z++)
            if ((m[z >> 6] >> (z & 63) & 1) && count[z] == 0) unseen = z;
        if (unseen < 0) continue;
        uint32_t at;
        if (find_donor(sp, ds, count, &at) != 0) {
            pt_errors_add(errs, NULL, 0, "training.split",
                          "structure %u has element Z=%d, which no training structure has, and "
                          "every training structure holds an element found nowhere else in "
                          "training; use a larger training fraction", rest[i], unseen);
            return -1;
        }
        count_elements(ds, sp->train[at], count, -1);
        count_elements(ds, rest[i], count, +1);
        uint32_t t = sp->train[at];
        sp->train[at] = rest[i];
        rest[i] = t;
        ++*moved;
    }
    if (*moved) {
        qsort(sp->train, sp->n_train, sizeof(uint32_t), cmp_u32);
        qsort(sp->val, sp->n_val, sizeof(uint32_t), cmp_u32);
        if (sp->n_test) qsort(sp->test, sp->n_test, sizeof(uint32_t), cmp_u32);
    }
    return 0;
}
