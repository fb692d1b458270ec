#!/usr/bin/env bash
# The test command of the README and of CI: configure (CUDA on when nvcc exists), build, run the
# install test, the expression fuzzer and the sanitizers when their scripts exist, then one ctest
# run over the CPU and GPU tests (the GPU tests skip themselves without a GPU), then the Python
# tests (pytest over the package staged in the build tree; the CUDA ones skip themselves without a
# GPU) when the interpreter has torch. The summaries and a plain 'tests: P passed, F failed, S
# skipped' line (ctest's and pytest's counts together) close the output; any failure exits 1.
#
# Environment: TILEOPS_BUILD_DIR (default build), JOBS (default 2), TILEOPS_CUDA (ON/OFF, default:
# ON when nvcc is found), TILEOPS_PYTHON (the interpreter with torch, default python3; without
# torch the extension is not built and the Python tests are skipped with a note).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${TILEOPS_BUILD_DIR:-build}"
python="${TILEOPS_PYTHON:-python3}"
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
  -DTILEOPS_BUILD_TESTS=ON -DTILEOPS_BUILD_BENCH=ON -DPython3_EXECUTABLE="$(command -v "$python" || echo "$python")"

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

# The Python tests: the package staged in the build tree (the extension is built when the
# interpreter can import torch).
py_passed=0 py_failed=0 py_skipped=0
if [[ -f "$build/python/tileops/libtileops_torch.so" ]]; then
  step "pytest python/tests (CUDA tests skip themselves without a GPU)"
  staged="$build/python"
  [[ "$staged" == /* ]] || staged="$repo/$staged"
  PYTHONPATH="$staged${PYTHONPATH:+:$PYTHONPATH}" "$python" -m pytest python/tests -q \
    -rs -p no:cacheprovider -o log_level=WARNING 2>&1 | tee "$logs/pytest.log" || true
  py_summary=$(grep -E "^=+ .*(passed|failed|error).* =+$|^[0-9]+ (passed|failed|error)" "$logs/pytest.log" | tail -1 || true)
  py_passed=$(grep -oE "[0-9]+ passed" <<< "$py_summary" | grep -oE "[0-9]+" || echo 0)
  py_failed=$(( $(grep -oE "[0-9]+ failed" <<< "$py_summary" | grep -oE "[0-9]+" || echo 0) + \
                $(grep -oE "[0-9]+ error" <<< "$py_summary" | grep -oE "[0-9]+" || echo 0) ))
  py_skipped=$(grep -oE "[0-9]+ skipped" <<< "$py_summary" | grep -oE "[0-9]+" || echo 0)
  if [[ -z "$py_summary" || $py_failed -gt 0 ]]; then failed+=("pytest"); fi
else
  echo "note: Python tests not run: '$python' cannot import torch, so the extension was not built"
fi

step "done"
if ((${#failed[@]})); then echo "FAILED: ${failed[*]}"; fi
echo "ctest: $summary"
# The plain closing line: ctest's (both labels) and pytest's passed, failed and skipped tests.
echo "tests: $((total - failed_tests - skipped + py_passed)) passed, $((failed_tests + py_failed)) failed, $((skipped + py_skipped)) skipped"
if ((${#failed[@]})); then exit 1; fi
