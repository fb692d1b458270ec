#!/usr/bin/env bash
# The check of the per-token-group FP8 quantization kernel and of group-limited routing on an
# H200 (sm_90a) host, in one device call of about two minutes: build only the library, the GPU
# tests and the CLI; run the quantization, routing and pre-permute GPU tests (the fused
# quantizing pre-permute's included); time the two ops' workloads with
# `tileops bench`, two rounds (alone on the GPU); then compute-sanitizer memcheck over the same
# tests and racecheck over the kernel tests but the two 4096-token ones, side by side. Logs go
# to $OUT (default build-gpu/quant-route-check); a summary is printed last. Environment:
# TILEOPS_BUILD_DIR (default build-gpu), JOBS (default: cores).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${TILEOPS_BUILD_DIR:-build-gpu}"
jobs="${JOBS:-$(nproc)}"
logs="${OUT:-$build/quant-route-check}"
mkdir -p "$logs"
export PATH="$PATH:/usr/local/cuda/bin"
source "$repo/scripts/offline-deps.sh"

filter='TokenGroupQuantKernel.*:MoEGroupedTopKRouting.*:MoETopKRouting.*'
filter+=':GpuMoEOps.*Routing*:GpuMoEOps.TokenGroupQuant*:GpuMoEOps.Permutes*'
filter+=':MoEPrePermuteQuantKernel.*:MoEPrePermute.*'
tests="$build/tests/tileops_gpu_tests"
results=()
run() {  # run NAME LIMIT LOG -- command...
  local name=$1 limit=$2 log=$3 t0=$SECONDS rc
  shift 4
  echo "== $name ($(date -u +%H:%M:%S), limit ${limit}s)"
  timeout --kill-after=5 "$limit" "$@" > "$logs/$log" 2>&1
  rc=$?
  tail -n 8 "$logs/$log"
  results+=("$(printf '%-22s rc=%-4s %4ss  %s' "$name" "$rc" $((SECONDS - t0)) "$log")")
  return $rc
}

run configure 40 configure.log -- cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTILEOPS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DTILEOPS_BUILD_TESTS=ON \
  -DTILEOPS_BUILD_BENCH=OFF -DTILEOPS_TORCH=OFF -DTILEOPS_WERROR=OFF
if run build 140 build.log -- cmake --build "$build" -j "$jobs" --target tileops \
  tileops_gpu_tests tileops_cli; then
  run tests 30 tests.log -- "$tests" --gtest_filter="$filter" --gtest_brief=1
  for round in 1 2; do  # two rounds: the second one's difference is the noise
    run "bench round $round" 30 "bench-$round.log" -- "$build/tools/cli/tileops" bench \
      PerTokenGroupQuantFP8FwdOp MoETopKRoutingFwdOp --device cuda --budget-ms 40 \
      --warmup-ms 10 -q
  done
  # memcheck in two shards and racecheck (the routing kernel's shared memory) side by side.
  sanitize() {  # sanitize TOOL SHARD SHARDS FILTER
    GTEST_TOTAL_SHARDS=$3 GTEST_SHARD_INDEX=$2 timeout --kill-after=5 40 compute-sanitizer \
      --tool "$1" --error-exitcode 99 "$tests" --gtest_filter="$4" --gtest_brief=1 \
      > "$logs/$1-$2.log" 2>&1
    echo "$?" > "$logs/$1-$2.rc"
  }
  t0=$SECONDS
  sanitize memcheck 0 2 "$filter" &
  sanitize memcheck 1 2 "$filter" &
  race='MoEGroupedTopKRouting.*:MoETopKRouting.*:TokenGroupQuantKernel.*'
  race+=':MoEPrePermuteQuantKernel.*'
  race+=':-MoETopKRouting.LargeAndSpecial:MoEGroupedTopKRouting.DeepSeekV3DecodeAndPrefill'
  sanitize racecheck 0 2 "$race" &
  sanitize racecheck 1 2 "$race" &
  wait
  for f in "$logs"/memcheck-?.log "$logs"/racecheck-?.log; do
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$f" | tail -1)
    tests_line=$(grep -E "^\[  (PASSED|FAILED)" "$f" | tr '\n' ' ')
    results+=("$(printf '%-22s rc=%-4s %4ss  %s %s' "$(basename "$f" .log)" \
      "$(cat "${f%.log}.rc")" $((SECONDS - t0)) "${summary:-no summary}" "$tests_line")")
  done
fi
echo
echo "== tests: $(grep -E '^\[  (PASSED|FAILED)' "$logs/tests.log" 2>/dev/null | tr '\n' ' ')"
grep -E "^\[  FAILED  \]" "$logs/tests.log" 2>/dev/null | head -20
for round in 1 2; do
  echo "== bench round $round"
  grep -E "^(PerTokenGroupQuant|MoETopKRouting)" "$logs/bench-$round.log" 2>/dev/null |
    awk '{print $1, $2, $5, $6}'
done
echo "== summary"
printf '%s\n' "${results[@]}"
