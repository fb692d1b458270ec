#!/usr/bin/env bash
# Builds the CPU test programs under AddressSanitizer+UndefinedBehaviorSanitizer and under
# ThreadSanitizer and runs the base-class and ops tests, then the concurrency stress tests
# (tests/base/test_concurrency.cpp, tests/ops/test_concurrency.cpp) repeated.
# Usage: scripts/sanitize.sh [asan|tsan|all]   (default all)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
which=${1:-all}
jobs=${JOBS:-2}

run() {
  local name=$1 flags=$2
  local dir="$root/build-$name"
  # -O1 -g1 (line tables: file and line in the reports) compile in 40% less time than -O2 -g on
  # the test sources, most of CI's time here.
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTILEOPS_CUDA=OFF \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DTILEOPS_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" >/dev/null
  cmake --build "$dir" -j "$jobs" --target tileops_base_tests tileops_ops_tests
  echo "== $name: base-class tests"
  "$dir/tests/tileops_base_tests" --gtest_brief=1
  if [ -x "$dir/tests/tileops_ops_tests" ]; then
    echo "== $name: ops tests"
    "$dir/tests/tileops_ops_tests" --gtest_brief=1
  fi
  # The concurrency stress tests again, more trials: their races need many interleavings.
  echo "== $name: concurrency stress (repeated)"
  "$dir/tests/tileops_base_tests" --gtest_brief=1 --gtest_filter='Concurrency.*' --gtest_repeat=4
  "$dir/tests/tileops_ops_tests" --gtest_brief=1 --gtest_filter='Concurrency.*' --gtest_repeat=4
}

case "$which" in
  asan | all) ASAN_OPTIONS=detect_leaks=1 run asan "-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" ;;&
  tsan | all) TSAN_OPTIONS=halt_on_error=1 run tsan "-fsanitize=thread" ;;
  asan) ;;
  *) echo "usage: $0 [asan|tsan|all]" >&2; exit 2 ;;
esac
