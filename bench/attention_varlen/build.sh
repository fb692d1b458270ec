#!/bin/bash
# Builds the shared library bench.py loads: the attention varlen kernel sources and capi.cpp,
# for sm_90a. Usage: bench/attention_varlen/build.sh OUT.so [extra nvcc flags, e.g.
# -DTILEOPS_ATTENTION_WATCHDOG]. Run from the repository root (or set ROOT).
set -euo pipefail
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
OUT=$1
shift
NVCC=${NVCC:-nvcc}
SRC=(
  "$ROOT"/src/kernels/attention/attention_varlen_launch_cuda.cu
  "$ROOT"/src/kernels/attention/attention_varlen_d64_cuda.cu
  "$ROOT"/src/kernels/attention/attention_varlen_d128_cuda.cu
  "$ROOT"/src/kernels/attention/attention_varlen_d256_cuda.cu
  "$ROOT"/src/kernels/attention/attention_paged_launch_cuda.cu
  "$ROOT"/src/kernels/attention/attention_paged_d64_cuda.cu
  "$ROOT"/src/kernels/attention/attention_paged_d128_cuda.cu
  "$ROOT"/src/kernels/attention/attention_paged_d256_cuda.cu
  "$ROOT"/src/kernels/attention/attention_paged_tma_d64_cuda.cu
  "$ROOT"/src/kernels/attention/attention_paged_tma_d128_cuda.cu
  "$ROOT"/src/kernels/attention/attention_paged_tma_d256_cuda.cu
  "$ROOT"/src/kernels/common/tma_map.cu
  "$ROOT"/src/core/dtype.cpp
)
TMP=$(mktemp -d)
pids=()
for f in "${SRC[@]}" "$ROOT"/bench/attention_varlen/capi.cpp; do
  o="$TMP/$(basename "$f").o"
  "$NVCC" -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++20 -Xcompiler -fPIC \
    -I "$ROOT/include" -I "$ROOT/src" "$@" -x cu -c "$f" -o "$o" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
"$NVCC" -shared -o "$OUT" "$TMP"/*.o -Xlinker --no-undefined -cudart static
rm -rf "$TMP"
