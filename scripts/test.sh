#!/usr/bin/env bash
# The test command of the README and of CI: configure (CUDA on when nvcc exists), build, run the
# CPU tests and the GPU tests (which skip themselves without a GPU), the install test, the
# expression fuzzer and the sanitizers when their scripts exist. Prints the ctest summary last.
#
# Environment: TILEOPS_BUILD_DIR (default build), JOBS (default 2), TILEOPS_CUDA (ON/OFF, default:
# ON when nvcc is found).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${TILEOPS_BUILD_DIR:-build}"
jobs="${JOBS:-2}"
start=$SECONDS

if [[ -d /usr/local/cuda/bin && ":$PATH:" != *":/usr/local/cuda/bin:"* ]]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi
if [[ -z "${TILEOPS_CUDA:-}" ]]; then
  if command -v nvcc > /dev/null 2>&1; then TILEOPS_CUDA=ON; else TILEOPS_CUDA=OFF; fi
fi

step() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - start)); }

step "configure $build (TILEOPS_CUDA=$TILEOPS_CUDA)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTILEOPS_CUDA="$TILEOPS_CUDA" \
  -DTILEOPS_BUILD_TESTS=ON -DTILEOPS_BUILD_BENCH=ON

step "build (-j$jobs)"
cmake --build "$build" -j "$jobs"

failed=()
logs="$(mktemp -d "${TMPDIR:-/tmp}/tileops-test.XXXXXX")"
trap 'rm -rf "$logs"' EXIT

step "ctest -L cpu"
ctest --test-dir "$build" --output-on-failure -j "$jobs" -L cpu 2>&1 | tee "$logs/cpu.log" || true
# Judged from ctest's summary line: every selected test passed (skips count as passed).
grep -q " 0 tests failed out of" "$logs/cpu.log" || failed+=("ctest -L cpu")

step "ctest -L gpu (these skip themselves without a GPU)"
if ! ctest --test-dir "$build" --output-on-failure -j "$jobs" -L gpu 2>&1 | tee "$logs/gpu.log"; then
  failed+=("ctest -L gpu")
fi

step "install test"
bash scripts/install-test.sh "$build" || failed+=("install test")

if [[ -f scripts/fuzz-expr.sh ]] && command -v clang++ > /dev/null 2>&1; then
  step "expression fuzzer (20 s)"
  bash scripts/fuzz-expr.sh 20 || failed+=("fuzz-expr")
fi

if [[ -f scripts/sanitize.sh ]]; then
  step "sanitizers"
  JOBS="$jobs" bash scripts/sanitize.sh || failed+=("sanitize")
fi

step "done"
summary() { grep -E "tests passed|tests failed|No tests were found" "$1" | tail -1; }
# counts LOG: "total failed skipped" from ctest's summary line and its "(Skipped)" lines.
counts() {
  local line total failed skipped
  line=$(summary "$1")
  total=$(sed -nE 's/.* out of ([0-9]+).*/\1/p' <<< "$line")
  failed=$(sed -nE 's/.* ([0-9]+) tests failed.*/\1/p' <<< "$line")
  skipped=$(grep -c "(Skipped)$" "$1" || true)
  echo "${total:-0} ${failed:-0} ${skipped:-0}"
}
read -r cpu_total cpu_failed cpu_skipped <<< "$(counts "$logs/cpu.log")"
read -r gpu_total gpu_failed gpu_skipped <<< "$(counts "$logs/gpu.log")"
echo "cpu tests: $(summary "$logs/cpu.log")"
echo "gpu tests: $(summary "$logs/gpu.log") (${gpu_skipped} skipped)"
if ((${#failed[@]})); then echo "FAILED: ${failed[*]}"; fi
total_failed=$((cpu_failed + gpu_failed))
total_skipped=$((cpu_skipped + gpu_skipped))
total_passed=$((cpu_total + gpu_total - total_failed - total_skipped))
# The plain closing line CI reads: passed, failed and skipped ctest tests of both labels.
echo "tests: ${total_passed} passed, ${total_failed} failed, ${total_skipped} skipped"
if ((${#failed[@]})); then exit 1; fi
