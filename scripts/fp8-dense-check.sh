#!/usr/bin/env bash
# FP8BlockScaledGemmFwdOp's check on an H200 (or any sm_90a GPU) host in one command, sized for a
# short lease: configure for sm_90a, build the GPU tests and the command, run the dense op's GPU
# tests (and the FP8 grouped GEMM's small ones, whose helpers it shares), `tileops bench` on the
# op's workloads (each result checked against the sampled reference), bench/peers_gemm_fp8.py
# (torch.matmul bf16 and torch._scaled_mm on the same shapes, the same flush and statistic),
# memcheck and racecheck on the small cases; the step summary prints last. Each step has a time
# limit within FP8_DENSE_CHECK_BUDGET_S (default 280).
#
# Environment: TILEOPS_BUILD_DIR (default build-gpu), OUT (logs; default BUILD/fp8-dense-check),
# FP8_DENSE_CHECK_BUDGET_S.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${TILEOPS_BUILD_DIR:-build-gpu}"
logs="${OUT:-$build/fp8-dense-check}"
mkdir -p "$logs"
DEVICE_STEPS_BUDGET_S=${FP8_DENSE_CHECK_BUDGET_S:-280}
source "$repo/scripts/device-steps.sh"

step configure 60 build.log -- cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTILEOPS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DTILEOPS_BUILD_TESTS=ON \
  -DTILEOPS_BUILD_BENCH=OFF -DTILEOPS_WERROR=OFF -DTILEOPS_TORCH=OFF
step build 170 build.log -- cmake --build "$build" -j "$(nproc)" --target tileops_gpu_tests \
  tileops_cli -- -k 0
grep -E "error|FAILED" "$logs/build.log" | head -20

tests="$build/tests/tileops_gpu_tests"
step "gpu tests" 60 gtest.log -- "$tests" --gtest_brief=0 \
  --gtest_filter='FP8BlockScaledGemmGpu.*:MoEGroupedGemmFP8Kernels.SmallShapesEveryConfig:MoEGroupedGemmFP8Kernels.OpsRunOnCudaAndRefuseWhatTheKernelCannotDo'
grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|Failure|error" "$logs/gtest.log" | head -40

step "tileops bench" 80 bench.log -- "$build/tools/cli/tileops" bench FP8BlockScaledGemmFwdOp \
  --device cuda --flush kernel --budget-ms 50 --sample-rows 8 --all-cases --format table \
  --json "$logs/bench.json"
grep -vE "^tileops bench: \[" "$logs/bench.log" | tail -20

step peers 70 peers.log -- python3 bench/peers_gemm_fp8.py --iters 21 --csv "$logs/peers.csv"
cat "$logs/peers.log"

small='FP8BlockScaledGemmGpu.SmallShapes'
step memcheck 40 sanitize.log -- compute-sanitizer --tool memcheck --error-exitcode 99 "$tests" \
  --gtest_filter="$small:FP8BlockScaledGemmGpu.EqualsTheGroupedGemmOfOneExpertBitForBit:FP8BlockScaledGemmGpu.AcceptsTransposedTmaAlignedActivationScales:FP8BlockScaledGemmGpu.OtherBlockSizesAreRefusedOnCuda" \
  --gtest_brief=1
step racecheck 40 sanitize.log -- compute-sanitizer --tool racecheck --racecheck-report all \
  --error-exitcode 99 "$tests" --gtest_filter="$small" --gtest_brief=1
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race reported" "$logs/sanitize.log" | sort | uniq -c

printf '%s\n' "${results[@]}"
