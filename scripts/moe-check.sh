#!/usr/bin/env bash
# The MoE check for an H200 (sm_90a) host, in one command that fits a 10-minute device call:
# build with CUDA, the GPU tests, the MoE kernel benchmark (bench/bench_moe_kernels), the op-level
# `tileops bench` of the MoE workloads that fit the time, and the PyTorch peers
# (bench/peers_moe.py). Logs go to $OUT (default build-gpu/moe-check); a summary is printed last.
# Environment, to spend less device time on one question:
#   MOE_CHECK_TARGETS="t1 t2"   build only these targets (default: all)
#   MOE_CHECK_GTEST_FILTER=F    run tileops_gpu_tests --gtest_filter=F instead of ctest -L gpu
#   MOE_CHECK_BENCH_FILTER=R    bench_moe_kernels --benchmark_filter=R
#   MOE_CHECK_OPS_ARGS="..."    ops and --workload options of `tileops bench` (default: all MoE)
#   MOE_CHECK_OPS=0             skip `tileops bench`;  MOE_CHECK_PEERS=0  skip peers_moe.py
#   MOE_CHECK_PEERS_ARGS="..."  arguments of peers_moe.py (e.g. --only gemm)
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${TILEOPS_BUILD_DIR:-build-gpu}"
logs="${OUT:-$build/moe-check}"
mkdir -p "$logs"
export PATH="$PATH:/usr/local/cuda/bin" PYTHONUNBUFFERED=1
step() { echo "== $1 ($(date -u +%H:%M:%S))"; }
results=()
run() {  # run NAME LIMIT LOG -- command...
  local name=$1 limit=$2 log=$3 t0=$SECONDS rc
  shift 4
  step "$name"
  timeout --kill-after=5 "$limit" "$@" > "$logs/$log" 2>&1
  rc=$?
  tail -n 25 "$logs/$log"
  results+=("$(printf '%-24s rc=%-4s %4ss  %s' "$name" "$rc" $((SECONDS - t0)) "$log")")
}
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo ' (tree differs)')"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
} > "$logs/info.txt"
run configure 60 build.log -- cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTILEOPS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DTILEOPS_BUILD_TESTS=ON -DTILEOPS_BUILD_BENCH=ON \
  -DTILEOPS_WERROR=OFF
targets=()
for t in ${MOE_CHECK_TARGETS:-}; do targets+=(--target "$t"); done
run build 260 build2.log -- cmake --build "$build" -j "$(nproc)" "${targets[@]}" -- -k 0
if [[ -n "${MOE_CHECK_GTEST_FILTER:-}" ]]; then
  run "gpu tests (filtered)" 200 ctest.log -- "$build/tests/tileops_gpu_tests" \
    --gtest_filter="$MOE_CHECK_GTEST_FILTER"
else
  run "ctest -L gpu" 110 ctest.log -- ctest --test-dir "$build" --output-on-failure -j 2 -L gpu \
    --timeout 100
fi
run "bench_moe_kernels" 200 kernels.log -- "$build/bench/bench_moe_kernels" \
  --benchmark_filter="${MOE_CHECK_BENCH_FILTER:-.}"
default_ops="MoETopKRoutingFwdOp MoEPrePermuteFwdOp MoEPostPermuteFwdOp MoEGroupedGemmFwdOp \
  MoEExpertMLPFwdOp FusedMoEExpertsFwdOp FusedMoEFwdOp --workload deepseek-v3-4k \
  --workload qwen3-30b-4k --workload deepseek-v3-decode --workload deepseek-v3-ep8-512 \
  --workload qwen3-gate-up-64t --workload dsv3-gate-up-512t --workload qwen3-64t \
  --workload qwen3-30b-4096t --workload qwen3-30b-64t --workload dsv3-512t"
# shellcheck disable=SC2086 # word splitting of the op and workload list is intended
[[ "${MOE_CHECK_OPS:-1}" != 0 ]] && run "tileops bench moe" 200 ops.log -- \
  "$build/tools/cli/tileops" bench ${MOE_CHECK_OPS_ARGS:-$default_ops} --device cuda --budget-ms 40
[[ "${MOE_CHECK_PEERS:-1}" != 0 ]] && run "peers_moe.py" 100 peers.log -- python3 bench/peers_moe.py ${MOE_CHECK_PEERS_ARGS:-}
echo "== summary"
cat "$logs/info.txt"
grep -E "tests passed|tests failed|PASSED|FAILED" "$logs/ctest.log" | tail -3
grep -E "^[0-9]+ cases:" "$logs/ops.log" 2> /dev/null | tail -1
grep -E "_median" "$logs/kernels.log" 2> /dev/null | sed -E 's#/iterations:[0-9]+/repeats:[0-9]+/manual_time_median##' |
  awk '{ printf "%-100s %10s %s", $1, $2, $3; for (i = 4; i <= NF; ++i) if ($i ~ /TFLOPs=|bytes_per_second=/) printf " %s", $i; print "" }' |
  sed -E 's/ +$//' | tail -40
printf '%s\n' "${results[@]}"
