#!/usr/bin/env bash
# The test command of the README and of CI: configure (CUDA on when nvcc exists), build, run the
# install test, the expression fuzzer and the sanitizers when their scripts exist, then one ctest
# run over the CPU and GPU tests (the GPU tests skip themselves without a GPU). ctest's summary and
# a plain 'tests: P passed, F failed, S skipped' line close the output; any failure exits 1.
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

# One ctest run over both labels, last, so that its summary closes the output: the CPU tests run,
# the GPU tests skip themselves without a GPU (ctest lists them as "(Skipped)").
step "ctest -L 'cpu|gpu' (GPU tests skip themselves without a GPU)"
ctest --test-dir "$build" --output-on-failure -j "$jobs" -L 'cpu|gpu' 2>&1 | tee "$logs/ctest.log" || true
summary=$(grep -E "tests passed|tests failed|No tests were found" "$logs/ctest.log" | tail -1 || true)
total=$(sed -nE 's/.* out of ([0-9]+).*/\1/p' <<< "$summary")
failed_tests=$(sed -nE 's/.* ([0-9]+) tests failed.*/\1/p' <<< "$summary")
skipped=$(grep -c "(Skipped)$" "$logs/ctest.log" || true)
total=${total:-0} failed_tests=${failed_tests:-0} skipped=${skipped:-0}
if ((total == 0 || failed_tests > 0)); then failed+=("ctest"); fi

step "done"
if ((${#failed[@]})); then echo "FAILED: ${failed[*]}"; fi
# The plain closing line: ctest's passed, failed and skipped tests of both labels.
echo "tests: $((total - failed_tests - skipped)) passed, ${failed_tests} failed, ${skipped} skipped"
if ((${#failed[@]})); then exit 1; fi
