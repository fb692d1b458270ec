#!/usr/bin/env bash
# Fast iteration on the CUDA kernels alone: builds the kernel sources, their GPU tests and the
# kernel benchmark without the rest of the library (no tileops-gen, no CMake), runs them, and
# prints the benchmark table last. Run on a GPU machine: `bash scripts/kernel-check.sh`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/kernel-check}
build=${TMPDIR:-/tmp}/tileops-kernel-check
mkdir -p "$build" "$out"
cd "$root"
export PATH="$PATH:/usr/local/cuda/bin"
nvflags=(-std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -DTILEOPS_WITH_CUDA=1)
cxxflags=(-std=c++20 -O2 -Iinclude -Isrc -Itests -DTILEOPS_WITH_CUDA=1 -I/usr/local/cuda/include)
nvcc "${nvflags[@]}" -Xptxas -v -c src/kernels/norm/rms_norm_cuda.cu -o "$build/norm.o" 2> "$out/ptxas-norm.txt" &
nvcc "${nvflags[@]}" -Xptxas -v -c src/kernels/rope/long_rope_cuda.cu -o "$build/rope.o" 2> "$out/ptxas-rope.txt" &
wait
libs=(-L/usr/local/cuda/lib64 -lcudart -lfmt -lpthread)
g++ "${cxxflags[@]}" tests/gpu/test_norm_kernels.cpp tests/gpu/test_rope_kernels.cpp src/core/dtype.cpp \
  "$build/norm.o" "$build/rope.o" "${libs[@]}" -lgtest -lgtest_main -o "$build/kernel_tests" &
g++ "${cxxflags[@]}" bench/bench_cuda_kernels.cpp src/core/dtype.cpp "$build/norm.o" "$build/rope.o" \
  "${libs[@]}" -lbenchmark -o "$build/bench_kernels" &
wait
grep -E "registers|spill" "$out"/ptxas-*.txt | sort | uniq -c | sort -rn | head -20 || true
"$build/kernel_tests" --gtest_brief=1 2>&1 | tee "$out/kernel_tests.txt" | tail -30
"$build/bench_kernels" --benchmark_min_time=0.2 2>&1 | tee "$out/bench_kernels.txt"
