/* rand_fixture.h — reproducible random operands for the kernel tests: one
 * 64-bit LCG (Knuth's MMIX constants) per test file, seeded by the file
 * (#define PT_TEST_SEED before including), uniform floats in [-1, 1) from
 * its top 24 bits, arrays of them and plain copies.  The state is static
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

/* uniform in [-1, 1), 24 random bits */
static inline float rnd(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((lcg >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

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

#endif
