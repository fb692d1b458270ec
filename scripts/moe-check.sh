#!/usr/bin/env bash
# The MoE check for an H200 (sm_90a) host, in one command that fits a 10-minute device call:
# build with CUDA, the GPU tests, the MoE kernel benchmark (bench/bench_moe_kernels), the op-level
# `tileops bench` of the MoE workloads that fit the time, and the PyTorch peers
# (bench/peers_moe.py). Logs go to $OUT (default build-gpu/moe-check); a summary is printed last.
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
run build 260 build2.log -- cmake --build "$build" -j "$(nproc)" -- -k 0
run "ctest -L gpu" 110 ctest.log -- ctest --test-dir "$build" --output-on-failure -j 2 -L gpu \
  --timeout 100
run "bench_moe_kernels" 110 kernels.log -- "$build/bench/bench_moe_kernels"
run "tileops bench moe" 100 ops.log -- "$build/tools/cli/tileops" bench MoETopKRoutingFwdOp \
  MoEPrePermuteFwdOp MoEPostPermuteFwdOp MoEGroupedGemmFwdOp MoEExpertMLPFwdOp \
  FusedMoEExpertsFwdOp FusedMoEFwdOp --device cuda --budget-ms 40 \
  --workload deepseek-v3-4k --workload qwen3-30b-4k --workload deepseek-v3-decode \
  --workload deepseek-v3-ep8-512 --workload qwen3-gate-up-64t --workload dsv3-gate-up-512t \
  --workload qwen3-64t --workload qwen3-30b-4096t --workload qwen3-30b-64t --workload dsv3-512t
[[ "${MOE_CHECK_PEERS:-1}" != 0 ]] && run "peers_moe.py" 100 peers.log -- python3 bench/peers_moe.py
echo "== summary"
cat "$logs/info.txt"
grep -E "tests passed|tests failed" "$logs/ctest.log" | tail -1
grep -E "^[0-9]+ cases:" "$logs/ops.log" | tail -1
printf '%s\n' "${results[@]}"
