/* cfconv_avx2.c — the convolution kernels of cfconv_body.h for AVX2 + FMA:
 * panels of up to 8 ymm (64 floats; the 16 ymm registers hold 8
 * accumulators, the temporaries and the tail mask), so a 100-filter row is
 * two panels of 7 and 6 vectors, the last masked to 4 lanes.  No backward
 * by senders: x_j and dx_j in registers would leave panels of 5 (three
 * walks of the edges for f = 100), and with x_j read per edge it measured
 * slower than the receiver-order kernel (bench/cfconv_rate, water: 19.5-20
 * against 16.2-16.4 ns per edge), which cfconv_kernels.c runs instead.  Called by
 * cfconv_kernels.c only when the CPU has AVX2 and FMA. */
#pragma GCC target("avx2,fma")
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "engine/model/cfconv_kernels_internal.h"
#include "engine/model/vec_avx2.h"

#define CK(name) pt_cfconv_avx2_##name
#define NVMAX 8
/* the backward by rows keeps dm_i, x_i and dx_i: 3 × 4 ymm of 16, so a
 * 100-filter row is four panels (bench/cfconv_rate, water: 17-18 ns an
 * edge warm against 29-30 for the receiver-order kernel) */
#define RNVMAX 4

#include "engine/model/cfconv_body.h"
