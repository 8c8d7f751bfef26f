#!/usr/bin/env bash
# bench_bf16.sh BENCH_BF16 [THREADS...] — bf16 products against OpenBLAS sgemm,
# run twice: with the kernel OpenBLAS picks by itself, and forced to its
# AVX-512 kernel (OPENBLAS_CORETYPE=SkylakeX).  Debian 12's OpenBLAS 0.3.21
# predates Zen 4/5 and picks its AVX2 "Haswell" kernel there, which halves
# sgemm; the second run compares bf16 with the best fp32 this machine has.
set -euo pipefail
bin=${1:?usage: bench_bf16.sh BENCH_BF16 [THREADS...]}
shift
threads=("$@")
[ ${#threads[@]} -gt 0 ] || threads=(1 2)

echo "# bf16 vs sgemm, OpenBLAS default kernel" >&2
"$bin" "${threads[@]}"
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
  echo "# bf16 vs sgemm, OpenBLAS forced to its AVX-512 kernel" >&2
  OPENBLAS_CORETYPE=SkylakeX "$bin" "${threads[@]}"
else
  echo "# no AVX-512 here: skipping the OPENBLAS_CORETYPE=SkylakeX run" >&2
fi
