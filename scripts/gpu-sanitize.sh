#!/usr/bin/env bash
# compute-sanitizer over the GPU tests: memcheck over every GPU test, then racecheck and synccheck
# over the tests of the kernels that use shared memory, mbarriers or TMA (every kernel family:
# the bf16 and FP8 grouped GEMMs with their TMA loads and mbarrier pipelines, the staged and
# re-reading RMSNorm kernels, the permutes, the quantizations, the routing, LongRoPE, the varlen
# attention's pipeline, the paged attention's split-KV kernel and its merge and its TMA pipeline, the KV-cache write and the attention state merge), on their small shapes
# since the race and sync checkers slow a kernel down a hundredfold; and racecheck over every FP8
# test (the FP8 GEMM kernels, the quantizing pre-permutes, the quantization, the FP8 and masked
# MoE ops, CUDA-graph replays included), one process per test. Any reported error fails the
# script.
#
# Usage: scripts/gpu-sanitize.sh [BUILD_DIR]   (default: $TILEOPS_BUILD_DIR, else build-gpu; the
# directory must hold a CUDA build of tests/tileops_gpu_tests). Environment: OUT or LOGS (where
# sanitize.log goes; default BUILD_DIR/gpu-sanitize), GPU_SANITIZE_MEMCHECK_S (time limit of the
# memcheck run, default 300), GPU_SANITIZE_RACE_S (of each test under racecheck or synccheck,
# default 60), GPU_SANITIZE_FP8_RACE_S (of each FP8 test under racecheck, default 600: the
# DeepSeek-V3 shapes run there too), GPU_SANITIZE_JOBS (racecheck and synccheck processes at
# once, default 4). Runs alone or as a step of scripts/gpu-check.sh.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${1:-${TILEOPS_BUILD_DIR:-build-gpu}}"
tests="$build/tests/tileops_gpu_tests"
logs="${LOGS:-${OUT:-$build/gpu-sanitize}}"
mkdir -p "$logs"
log="$logs/sanitize.log"
: > "$log"
if [[ -d /usr/local/cuda/bin && ":$PATH:" != *":/usr/local/cuda/bin:"* ]]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi
if ! command -v compute-sanitizer > /dev/null 2>&1; then
  echo "gpu-sanitize: compute-sanitizer is not installed" | tee -a "$log"
  exit 2
fi
if [[ ! -x "$tests" ]]; then
  echo "gpu-sanitize: $tests is not built (a CUDA build with TILEOPS_BUILD_TESTS=ON)" | tee -a "$log"
  exit 2
fi

# The kernel tests on small shapes, one per kernel family that stages data in shared memory.
shared_memory_tests=(
  'MoEGroupedGemm.SmallShapesEveryVariant' 'MoEGroupedGemm.MisalignedA'
  'MoEGroupedGemm.ClusterConfigs' 'MoEPrePermute.Cases' 'MoEPostPermute.Cases'
  'MoETopKRouting.Cases' 'MoETopKRouting.Ties' 'RMSNormKernels.ShapesDefaultConfig'
  'RMSNormKernels.StridedRows' 'RMSNormKernels.Reread' 'RMSNormKernels.StagedConfigs'
  'LongRoPEKernels.ShapesDefaultConfig' 'MoEGroupedGemmFP8Kernels.SmallShapesEveryConfig'
  'MoEGroupedGemmFP8Kernels.MaskedCountsEveryConfig' 'MoEGroupedGemmFP8Kernels.NonFiniteAndZeroScales'
  'FP8BlockScaledGemmGpu.SmallShapes'
  'MoEPrePermuteQuantKernel.MatchesTheCpuCompositionBitForBit' 'TokenGroupQuantKernel.MatchesTheCpuBitForBit'
  'MoEGroupedTopKRouting.Cases' 'GpuMoEOps.PrePermuteQuantMaskedMatchesTheCpuImplementationBitForBit'
  'AttentionKVCacheWriteGpu.SlotsOutsideTheCacheAreSkipped' 'AttentionMergeStatesGpu.MatchesTheCpuImplementation'
  'AttentionVarlenGpu.SmallCasesEveryHeadDim' 'AttentionPagedGpu.SmallCasesEveryHeadDim'
  'AttentionPagedGpu.TmaKernelSmallCasesEveryHeadDim' 'AttentionPagedGpu.LargeBatchesOneSplitAndManySplits'
)

# Every FP8 test, each under racecheck in its own process (gtest filter patterns, expanded with
# --gtest_list_tests below).
fp8_filter='MoEGroupedGemmFP8Kernels.*:MoEPrePermuteQuantKernel.*:TokenGroupQuantKernel.*'
fp8_filter+=':GpuMoEOps.TokenGroupQuant*:GpuMoEOps.PrePermuteQuant*:GpuMoEOps.*Masked*'
fp8_filter+=':GpuMoEOps.*FP8*:FP8BlockScaledGemmGpu.*'

status=0
results=()
# sanitize NAME LIMIT_S GTEST_FILTER TOOL_ARGS...
sanitize() {
  local name=$1 limit=$2 filter=$3
  local args=("${@:4}")
  local t0=$SECONDS rc
  echo "== compute-sanitizer $name (limit ${limit}s, --gtest_filter=$filter)" | tee -a "$log"
  timeout --kill-after=10 "$limit" compute-sanitizer "${args[@]}" --error-exitcode 99 \
    "$tests" --gtest_filter="$filter" --gtest_brief=1 >> "$log" 2>&1
  rc=$?
  local summary
  summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
  if ((rc == 0)); then
    results+=("$name: ok ($((SECONDS - t0)) s; ${summary:-no summary})")
  else
    status=1
    if ((rc == 124 || rc == 137)); then
      results+=("$name: TIMEOUT after ${limit} s")
    else
      results+=("$name: FAIL (exit $rc; ${summary:-see $log})")
    fi
  fi
}

# memcheck over every GPU test: in GPU_SANITIZE_SHARDS processes at once (gtest shards; the
# checker's host side is the bottleneck), then the tests that take the whole GPU memory alone.
shards=${GPU_SANITIZE_SHARDS:-4}
memcheck_shards() {
  local pids=() rc=0
  for ((i = 0; i < shards; ++i)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i compute-sanitizer --tool memcheck \
      --error-exitcode 99 "$tests" --gtest_filter='-GpuFailure.*' --gtest_brief=1 \
      > "$logs/memcheck-$i.tmp" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  cat "$logs"/memcheck-*.tmp >> "$log"
  rm -f "$logs"/memcheck-*.tmp
  return $rc
}
t0=$SECONDS
echo "== compute-sanitizer memcheck, $shards shards (limit ${GPU_SANITIZE_MEMCHECK_S:-300}s)" |
  tee -a "$log"
export -f memcheck_shards
export tests logs log shards
timeout --kill-after=10 "${GPU_SANITIZE_MEMCHECK_S:-300}" bash -c memcheck_shards
rc=$?
errors=$(grep -c "ERROR SUMMARY: [1-9]" "$log")
if ((rc == 0)); then
  results+=("memcheck: ok ($((SECONDS - t0)) s; $(grep -c 'ERROR SUMMARY: 0 errors' "$log") shards with 0 errors)")
else
  status=1
  results+=("memcheck: $( ((rc == 124 || rc == 137)) && echo TIMEOUT || echo "FAIL (exit $rc)"); $errors shards with errors")
fi
# These tests exhaust the GPU memory on purpose: the allocator's cudaErrorMemoryAllocation is
# what they check, not an error to report (memory accesses are still checked).
sanitize "memcheck, whole-memory tests" "${GPU_SANITIZE_RACE_S:-60}" 'GpuFailure.*' \
  --tool memcheck --report-api-errors no
# Each (tool, test) pair in its own process with its own limit and log, GPU_SANITIZE_JOBS (default
# 4) at a time: a slow one leaves the others' results, and the checkers' host side is the
# bottleneck, not the GPU.
jobs_at_once=${GPU_SANITIZE_JOBS:-4}
race_limit=${GPU_SANITIZE_RACE_S:-60}
fp8_race_limit=${GPU_SANITIZE_FP8_RACE_S:-600}
pairs=()    # "TOOL TEST LIMIT_S"
for t in "${shared_memory_tests[@]}"; do
  pairs+=("racecheck $t $race_limit" "synccheck $t $race_limit")
done
fp8_tests=$("$tests" --gtest_list_tests --gtest_filter="$fp8_filter" |
  awk '/^[^ ]/ {suite = $1} /^  / {print suite $1}')
if [[ -z $fp8_tests ]]; then
  status=1
  results+=("racecheck, FP8 tests: none matched '$fp8_filter'")
fi
for t in $fp8_tests; do
  # The FP8 tests already checked above keep their pair; every other one gets racecheck.
  [[ " ${shared_memory_tests[*]} " == *" $t "* ]] || pairs+=("racecheck $t $fp8_race_limit")
done
run_pair() {  # run_pair INDEX TOOL TEST LIMIT_S
  local args=(--tool "$2")
  [[ $2 == racecheck ]] && args+=(--racecheck-report all)
  local t0=$SECONDS
  timeout --kill-after=10 "$4" compute-sanitizer "${args[@]}" --error-exitcode 99 \
    "$tests" --gtest_filter="$3" --gtest_brief=1 > "$logs/pair-$1.log" 2>&1
  echo "$? $((SECONDS - t0))" > "$logs/pair-$1.rc"
}
for i in "${!pairs[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs_at_once)); do wait -n; done
  read -r tool test limit <<< "${pairs[$i]}"
  run_pair "$i" "$tool" "$test" "$limit" &
done
wait
for i in "${!pairs[@]}"; do
  read -r rc took < "$logs/pair-$i.rc"
  read -r tool test limit <<< "${pairs[$i]}"
  echo "== compute-sanitizer $tool $test (limit ${limit}s)" >> "$log"
  cat "$logs/pair-$i.log" >> "$log"
  summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$logs/pair-$i.log" | tail -1)
  if ((rc == 0)); then
    results+=("$tool $test: ok (${took} s; ${summary:-no summary})")
  else
    status=1
    if ((rc == 124 || rc == 137)); then
      results+=("$tool $test: TIMEOUT after ${limit} s")
    else
      results+=("$tool $test: FAIL (exit $rc; ${summary:-see $log})")
    fi
  fi
  rm -f "$logs/pair-$i.log" "$logs/pair-$i.rc"
done

grep -E "^\[  FAILED  \]|ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race reported|Barrier error" \
  "$log" | sort | uniq -c | head -40
printf '%s\n' "${results[@]}"
exit "$status"
