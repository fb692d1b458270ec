#!/usr/bin/env bash
# The paged attention's check on an H200 (or any sm_90a GPU) host in one command, sized for a
# short lease, most important first: configure for sm_90a, build the GPU tests, the command and
# the Python package, run the paged attention's GPU tests (and the merge's, which shares its
# arithmetic, and the varlen op's decode-shaped calls, which run its split kernel over contiguous
# keys), bench/peers_attention_paged.py (ours beside SDPA cuDNN / flash and flex_attention
# on the same keys), memcheck and racecheck on the small cases, `tileops bench` on a few
# workloads (each result checked against the reference); the step summary and the peers' table
# print last. Each step has a time limit within PAGED_CHECK_BUDGET_S (default 200).
#
# Environment: TILEOPS_BUILD_DIR (default build-gpu), OUT (logs; default BUILD/paged-check),
# PAGED_CHECK_BUDGET_S, PAGED_CHECK_FLEX (labels that get the flex peer; default the script's),
# PAGED_CHECK_ITERS (timed calls per peer, default 20).
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${TILEOPS_BUILD_DIR:-build-gpu}"
logs="${OUT:-$build/paged-check}"
mkdir -p "$logs"
DEVICE_STEPS_BUDGET_S=${PAGED_CHECK_BUDGET_S:-200}
source "$repo/scripts/device-steps.sh"

step configure 60 build.log -- cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTILEOPS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DTILEOPS_BUILD_TESTS=ON \
  -DTILEOPS_BUILD_BENCH=OFF -DTILEOPS_WERROR=OFF -DPython3_EXECUTABLE="$(command -v python3)"
step build 150 build.log -- cmake --build "$build" -j "$(nproc)" --target tileops_gpu_tests \
  tileops_cli tileops_python_stage -- -k 0
grep -E "error|FAILED" "$logs/build.log" | head -20

tests="$build/tests/tileops_gpu_tests"
step "gpu tests" 90 gtest.log -- "$tests" --gtest_brief=0 \
  --gtest_filter='AttentionPagedGpu.*:AttentionMergeStatesGpu.*:AttentionVarlenSplitGpu.*'
grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|Failure|error|plan for" "$logs/gtest.log" | head -60
flex="${PAGED_CHECK_FLEX:-decode-64x4k-page16}"
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
step peers 100 peers.log -- \
  python3 bench/peers_attention_paged.py --iters "${PAGED_CHECK_ITERS:-20}" \
  --csv "$logs/peers.csv" --flex "$flex"
small='AttentionPagedGpu.SmallCasesEveryHeadDim:AttentionPagedGpu.TmaKernelSmallCasesEveryHeadDim'
small="$small:AttentionVarlenSplitGpu.SmallCasesEveryHeadDim"
step memcheck 40 sanitize.log -- compute-sanitizer --tool memcheck --error-exitcode 99 "$tests" \
  --gtest_filter="$small:AttentionPagedGpu.UnusedCacheRowsAndTableEntriesAreNeverRead:AttentionVarlenSplitGpu.RowsNoSequenceCoversAreNeverRead" \
  --gtest_brief=1
step racecheck 40 sanitize.log -- compute-sanitizer --tool racecheck --racecheck-report all \
  --error-exitcode 99 "$tests" --gtest_filter="$small" --gtest_brief=1
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race reported" "$logs/sanitize.log" | sort | uniq -c

step "tileops bench" 40 bench.log -- "$build/tools/cli/tileops" bench GroupedQueryAttentionPagedFwdOp \
  --device cuda --budget-ms 50 --workload decode-1x4k-page16 --workload mixed-60x1-4x512-page16 \
  --workload gemma2-9b-decode-32x8k --workload d64-decode-64x4k-page128
step "tileops bench varlen" 30 bench.log -- "$build/tools/cli/tileops" bench \
  GroupedQueryAttentionVarlenFwdOp --device cuda --budget-ms 50 --workload decode-1x4k \
  --workload decode-64x4k --workload decode-8x32k
cat "$logs/bench.log" | grep -vE "^tileops bench: \[" | tail -16

printf '%s\n' "${results[@]}"
sed -n '/^case  /,$p' "$logs/peers.log"
