/* rng.c — xoshiro256** (Blackman & Vigna) seeded by splitmix64; see rng.h. */
#include "engine/core/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void pt_rng_init(pt_rng *rng, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL);
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&x);
}

uint64_t pt_rng_next(pt_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double pt_rng_uniform(pt_rng *rng)
{
    return (double)(pt_rng_next(rng) >> 11) * 0x1.0p-53;
}

/* Lemire's multiply-shift with rejection: unbiased for every n. */
uint64_t pt_rng_below(pt_rng *rng, uint64_t n)
{
    unsigned __int128 m = (unsigned __int128)pt_rng_next(rng) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = -n % n;
        while (low < threshold) {
            m = (unsigned __int128)pt_rng_next(rng) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double pt_rng_normal(pt_rng *rng)
{
    double u1 = pt_rng_uniform(rng);
    double u2 = pt_rng_uniform(rng);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

void pt_rng_shuffle_u32(pt_rng *rng, uint32_t *v, uint32_t n)
{
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = (uint32_t)pt_rng_below(rng, i);
        uint32_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}
