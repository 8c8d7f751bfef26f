/* rand_fixture.h — reproducible random operands for the kernel tests: one
 * 64-bit LCG (Knuth's MMIX constants) per test file, seeded by the file
 * (#define PT_TEST_SEED before including), uniform floats in [-1, 1) from
 * its top 24 bits (or 32 as rnd_u), arrays of them and plain copies; floats by bit pattern
 * and the values bf16 rounding must get right (sprinkle).  The state is static
 * per file, so each test binary draws the same sequence on every run and
 * no file's draws move another's.  Header-only, static inline: a file
 * takes what it uses.  Include after <cmocka.h> (assert_non_null). */
#ifndef PT_RAND_FIXTURE_H
#define PT_RAND_FIXTURE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef PT_TEST_SEED
#error "define PT_TEST_SEED (the file's LCG seed) before including rand_fixture.h"
#endif

static uint64_t lcg = PT_TEST_SEED;

/* 32 random bits: the LCG's top half (its low bits have short periods) */
static inline uint32_t rnd_u(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(lcg >> 32);
}

/* uniform in [-1, 1), 24 random bits (the top ones) */
static inline float rnd(void) { return (float)(rnd_u() >> 8) / 16777216.0f * 2.0f - 1.0f; }

/* n floats scale·rnd() (n = 0 gives a valid one-float buffer); free() it */
static inline float *rnd_floats(size_t n, float scale)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = scale * rnd();
    return p;
}

/* a malloc'd copy of n floats; free() it */
static inline float *floats_copy(const float *src, size_t n)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    assert_non_null(p);
    memcpy(p, src, sizeof(float) * n);
    return p;
}

/* The float with bit pattern u. */
static inline float bits_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Values bf16 rounding must get right, written into x[0..n): a whole
 * 16-lane vector of subnormals at element `at` (the smallest, a tie that
 * rounds up, the largest) and, scattered, those and ties to even and −0.
 * (NaN and inf: test_bf16_bias.c; their payloads need not match the scalar
 * reference.) */
static inline void sprinkle(float *x, size_t n, size_t at)
{
    static const uint32_t odd[] = {0x00000001, 0x00008000, 0x007fffff, 0x80018000, 0x3f808000,
                                   0x3f818000, 0x80000000};
    for (size_t i = 0; i < 16 && at + i < n; i++) x[at + i] = bits_float(odd[i % 3]);
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) x[(i * 97 + 11) % n] = bits_float(odd[i]);
}

#endif
