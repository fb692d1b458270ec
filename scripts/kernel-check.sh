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
norm_objs=()
for cu in src/kernels/norm/rms_norm_*_cuda.cu; do
  name=$(basename "$cu" .cu)
  nvcc "${nvflags[@]}" -Xptxas -v -c "$cu" -o "$build/$name.o" 2> "$out/ptxas-$name.txt" &
  norm_objs+=("$build/$name.o")
done
nvcc "${nvflags[@]}" -Xptxas -v -c src/kernels/rope/long_rope_cuda.cu -o "$build/rope.o" 2> "$out/ptxas-rope.txt" &
wait
libs=(-L/usr/local/cuda/lib64 -lcudart -lfmt -lpthread)
norm_host=(src/kernels/norm/rms_norm_config.cpp src/kernels/norm/rms_norm_policy.cpp)
g++ "${cxxflags[@]}" tests/gpu/test_norm_*.cpp tests/gpu/test_rope_kernels.cpp src/core/dtype.cpp \
  "${norm_host[@]}" "${norm_objs[@]}" "$build/rope.o" "${libs[@]}" -lgtest -lgtest_main -o "$build/kernel_tests" &
g++ "${cxxflags[@]}" bench/bench_cuda_kernels.cpp src/core/dtype.cpp "${norm_host[@]}" \
  "${norm_objs[@]}" "$build/rope.o" \
  "${libs[@]}" -lbenchmark -o "$build/bench_kernels" &
wait
grep -E "registers|spill" "$out"/ptxas-*.txt | sort | uniq -c | sort -rn | head -20 || true
"$build/kernel_tests" --gtest_brief=1 2>&1 | tee "$out/kernel_tests.txt" | tail -30
# The benchmark under each timing method (see bench/bench_cuda_kernels.cpp):
#   memset:      L2 flushed by a 256 MB memset before each launch (the op bench's method; the
#                flush's dirty lines are written back during the timed kernel)
#   memset+read: the same, then 128 MB of the flush buffer read back, so L2 is cold and clean
#   graph:       decode sizes only, a CUDA graph of 200 back-to-back launches, no flush, time / 200
# TILEOPS_BENCH_TUNE=1 times every tuning configuration, with memset+read.
bench=("$build/bench_kernels")
TILEOPS_BENCH_FLUSH=memset TILEOPS_BENCH_TUNE=0 "${bench[@]}" > "$out/bench_memset.txt" 2>&1
TILEOPS_BENCH_FLUSH=memset+read TILEOPS_BENCH_TUNE=0 "${bench[@]}" > "$out/bench_clean.txt" 2>&1
TILEOPS_BENCH_FLUSH=none TILEOPS_BENCH_GRAPH=200 TILEOPS_BENCH_TUNE=0 "${bench[@]}" \
  --benchmark_filter='copy/16384/|/1x4096/|32x1x32x128/' > "$out/bench_graph.txt" 2>&1
if [[ "${TILEOPS_BENCH_TUNE:-0}" != 0 ]]; then
  TILEOPS_BENCH_FLUSH=memset+read TILEOPS_BENCH_REPS=${TILEOPS_BENCH_REPS:-21} "${bench[@]}" \
    --benchmark_filter="${TILEOPS_BENCH_TUNE_FILTER:-.}" > "$out/bench_tune.txt" 2>&1 || true
  grep -E "_median" "$out/bench_tune.txt" | awk '{b=""; for(i=1;i<=NF;i++) if($i ~ /^bytes_per_second=/) b=$i; print $1, $2, b}' \
    | sed -e 's/_median//' -e 's/repeats:[0-9]*.manual_time//' \
    | sort -k1,1 > "$out/tune_medians.txt"
fi
for m in memset clean graph; do
  echo "== $m (median)"
  grep -E "_median|ERROR|error" "$out/bench_$m.txt" | awk '{b=""; for(i=1;i<=NF;i++) if($i ~ /^bytes_per_second=/) b=$i; printf "%-44s %9s %s %s %s\n", $1, $2, $3, b, $NF}' \
    | sed -e 's/_median//' -e 's/repeats:[0-9]*.manual_time//'  || true
done
