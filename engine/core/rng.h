/* rng.h — the one seeded random generator of packtrain (xoshiro256**,
 * seeded through splitmix64).  Every random choice (splits, epoch shuffles,
 * pack draws, weight init) goes through it, so a job is reproducible from its
 * seed alone, on any machine. */
#ifndef PT_RNG_H
#define PT_RNG_H

#include <stdint.h>

typedef struct pt_rng {
    uint64_t s[4];
} pt_rng;

/* Seeds from one 64-bit value; `stream` lets independent consumers of the
 * same job seed (split, shuffle, init) draw unrelated sequences. */
void pt_rng_init(pt_rng *rng, uint64_t seed, uint64_t stream);
uint64_t pt_rng_next(pt_rng *rng);
/* uniform in [0, 1) with 53 random bits */
double pt_rng_uniform(pt_rng *rng);
/* uniform integer in [0, n), unbiased; n > 0 */
uint64_t pt_rng_below(pt_rng *rng, uint64_t n);
/* standard normal (Box-Muller, one value per call) */
double pt_rng_normal(pt_rng *rng);
/* Fisher-Yates shuffle of n uint32 values */
void pt_rng_shuffle_u32(pt_rng *rng, uint32_t *v, uint32_t n);

#endif
