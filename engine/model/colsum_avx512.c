/* colsum_avx512.c — the column sums of colsum_body.h for AVX-512F: panels
 * of up to 8 zmm (128 columns; a 100-wide row is one panel of 7, the last
 * masked to 4 lanes), each block's lanes added to the double total as two
 * vectors of 8 doubles.  Called by colsum_kernels.c only when the CPU has
 * AVX-512F. */
#pragma GCC target("avx512f")
#include <immintrin.h>
#include <stddef.h>

#include "engine/model/colsum_kernels.h"
#include "engine/model/vec_avx512.h"

#define CS(name) pt_colsum_avx512_##name
#define CS_KERNEL pt_colsum_avx512
#define NVMAX 8
#include "engine/model/colsum_body.h"
