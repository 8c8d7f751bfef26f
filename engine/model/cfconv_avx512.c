/* cfconv_avx512.c — the convolution kernels of cfconv_body.h for AVX-512F:
 * panels of up to 8 zmm (128 floats), so a 100-filter row is one panel of
 * 7 vectors with the last masked to 4 lanes.  The only file of the
 * convolution compiled for AVX-512F; cfconv_kernels.c calls it only when
 * the CPU and OS have it. */
#pragma GCC target("avx512f")
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "engine/model/cfconv_kernels_internal.h"
#include "engine/model/vec_avx512.h"

#define CK(name) pt_cfconv_avx512_##name
#define NVMAX 8
/* the backward by senders keeps x_j and dx_j: 2 × 8 zmm of 32 */
#define SNVMAX 8
/* the backward by rows keeps dm_i, x_i and dx_i: 3 × 8 zmm of 32 */
#define RNVMAX 8

#include "engine/model/cfconv_body.h"
