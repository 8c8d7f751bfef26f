/* colsum_avx2.c — the column sums of colsum_body.h for AVX2: panels of up
 * to 13 ymm (104 columns, so a 100-wide row is one panel, the last vector
 * masked to 4 lanes; 13 accumulators, the mask and a load in the 16
 * registers), each block's lanes added to the double total as two vectors
 * of 4 doubles.  Called by colsum_kernels.c only when the CPU has AVX2. */
#pragma GCC target("avx2,fma")
#include <immintrin.h>
#include <stddef.h>

#include "engine/model/colsum_kernels.h"
#include "engine/model/vec_avx2.h"

#define CS(name) pt_colsum_avx2_##name
#define CS_KERNEL pt_colsum_avx2
#define NVMAX 13
#include "engine/model/colsum_body.h"
