#!/usr/bin/env bash
# Kernel-variant check for an H200: builds with CUDA, runs the GPU tests of the RMSNorm and grouped
# GEMM kernels (every configuration of their tuning spaces; the staged RMSNorm kernel first, alone,
# with a short limit, then the re-reading and lean streaming kernels), then times every RMSNorm
# configuration (the staged and lean ones too when their tests passed) on the bf16 [2048, 4096],
# [2048, 8192] and [2048, 16384] shapes (plain and fused, with copies of the same bytes) and the
# grouped GEMM configurations on the two large MoE shapes (VARIANTS_CHECK_GEMM=0 skips them).
# Prints the fastest configurations per shape last. Logs in $OUT (default
# build-gpu/variants-check).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${TILEOPS_BUILD_DIR:-build-gpu}"
logs="${OUT:-$build/variants-check}"
mkdir -p "$logs"
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTILEOPS_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DTILEOPS_BUILD_TESTS=ON -DTILEOPS_BUILD_BENCH=ON \
  -DTILEOPS_WERROR=OFF > "$logs/build.log" 2>&1
cmake --build "$build" -j "$(nproc)" --target tileops_gpu_tests bench_cuda_kernels \
  bench_moe_kernels >> "$logs/build.log" 2>&1 || { tail -30 "$logs/build.log"; exit 1; }
# The staged RMSNorm kernel (RMSNormStagedConfig) first, on its own short limit:
# a wrong mbarrier parity would hang rather than fail. Its bench configurations only if it passed.
timeout 60 "$build/tests/tileops_gpu_tests" --gtest_filter='RMSNormKernels.Staged*' \
  > "$logs/staged-tests.log" 2>&1
staged_rc=$?
echo "staged tests rc=$staged_rc"
grep -E "^\[  (PASSED|FAILED) |Failure|OK \]" "$logs/staged-tests.log" | head -10
# The lean streaming kernels (RMSNormHighOccupancyStreamingConfig): their bench configurations
# only if their tests passed.
timeout 120 "$build/tests/tileops_gpu_tests" --gtest_filter='RMSNormKernels.StreamingUnroll' \
  > "$logs/lean-tests.log" 2>&1
lean_rc=$?
echo "lean streaming tests rc=$lean_rc"
grep -E "^\[  (PASSED|FAILED) |Failure|OK \]" "$logs/lean-tests.log" | head -10
# The re-reading kernel (RMSNormRereadConfig): its bench configurations only if its
# tests passed.
timeout 120 "$build/tests/tileops_gpu_tests" --gtest_filter='RMSNormKernels.Reread' \
  > "$logs/reread-tests.log" 2>&1
reread_rc=$?
echo "reread tests rc=$reread_rc"
grep -E "^\[  (PASSED|FAILED) |Failure|OK \]" "$logs/reread-tests.log" | head -10
timeout 200 "$build/tests/tileops_gpu_tests" \
  --gtest_filter='RMSNormKernels.*:MoEGroupedGemm.*:-RMSNormKernels.Staged*:RMSNormKernels.StreamingUnroll:RMSNormKernels.Reread' \
  > "$logs/tests.log" 2>&1
echo "tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |Failure|OK \]" "$logs/tests.log" | head -30
staged_bench=0
((staged_rc == 0)) && staged_bench=1
lean_bench=0
((lean_rc == 0)) && lean_bench=1
reread_bench=0
((reread_rc == 0)) && reread_bench=1
TILEOPS_BENCH_STAGED=$staged_bench TILEOPS_BENCH_LEAN=$lean_bench TILEOPS_BENCH_REREAD=$reread_bench \
  TILEOPS_BENCH_TUNE=1 TILEOPS_BENCH_REPS=31 timeout 150 \
  "$build/bench/bench_cuda_kernels" \
  --benchmark_filter='rms_norm/bf16/2048x(4096|8192|16384)|^copy/(33554432|67108864|134217728|268435456)/' \
  > "$logs/rms.log" 2>&1
echo "rms bench rc=$?"
if [[ "${VARIANTS_CHECK_GEMM:-1}" == 1 ]]; then
  timeout 150 "$build/bench/bench_moe_kernels" --benchmark_filter='grouped_gemm/bf16/e(256|128)_r1024' \
    > "$logs/gemm.log" 2>&1
  echo "gemm bench rc=$?"
fi
echo "== fastest RMSNorm configurations (median) per shape"
grep -E "_median " "$logs/rms.log" | awk '{print $1, $2, $3}' | sed 's/\/iterations.*_median//' |
  awk '{split($1, p, "/"); key = p[1] "/" p[2] "/" p[3]; print key, $2, $3, $1}' | sort -k1,1 -k2,2g |
  awk '{if (n[$1]++ < 4) print}'
grep -E "^copy.*_median " "$logs/rms.log" | awk '{print $1, $2, $3}'
if [[ -f "$logs/gemm.log" ]]; then
  echo "== grouped GEMM (median)"
  grep -E "_median " "$logs/gemm.log" | sed -E 's/\/iterations:[^ ]*//' | awk '{print $1, $2, $3, $NF}' |
    grep -o "^[^ ]* [^ ]* [^ ]*\|TFLOPs=[0-9.]*" | paste - -
fi
