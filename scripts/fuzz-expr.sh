#!/usr/bin/env bash
# Fuzzes the manifest expression language (tools/gen/fuzz/fuzz_expr.cpp): builds the libFuzzer
# target standalone with clang++ (-fsanitize=fuzzer,address,undefined) from the tools/gen
# sources, then runs it for the given number of seconds on the seed corpus
# tests/manifest/fuzz_corpus/. New inputs go to the working corpus in the build folder, never
# into the repository. The main build does not need clang.
#
#   scripts/fuzz-expr.sh [SECONDS=30] [extra libFuzzer flags...]
#   FUZZ_BUILD_DIR=/tmp/fz scripts/fuzz-expr.sh 120 -jobs=2 -workers=2
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-30}
shift || true
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
cxx=${CLANGXX:-clang++}
gen=$root/tools/gen

mkdir -p "$build/corpus" "$build/crashes"
sources=(
  "$gen/fuzz/fuzz_expr.cpp" "$gen/dtypes.cpp" "$root/src/core/float_repr.cpp"
  "$gen/expr/ast.cpp" "$gen/expr/checker.cpp" "$gen/expr/emit_cpp.cpp" "$gen/expr/eval.cpp"
  "$gen/expr/kind.cpp" "$gen/expr/lexer.cpp" "$gen/expr/parser.cpp" "$gen/expr/simplify.cpp"
)
echo "fuzz-expr: building $build/fuzz_expr with $cxx"
"$cxx" -std=c++20 -O1 -g -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$gen" -I"$root/src" "${sources[@]}" -o "$build/fuzz_expr"

echo "fuzz-expr: running for ${seconds}s"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  "$build/fuzz_expr" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=1024 \
  -dict="$gen/fuzz/expr.dict" -artifact_prefix="$build/crashes/" -print_final_stats=1 \
  "$@" "$build/corpus" "$root/tests/manifest/fuzz_corpus"
