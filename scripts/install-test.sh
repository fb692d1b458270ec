#!/usr/bin/env bash
# Installs a built tree into a temporary prefix, then configures, builds and runs the consumer
# project of tests/install against it (find_package(tileops) + tileops::tileops).
#
# Usage: scripts/install-test.sh [BUILD_DIR]   (default: build)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-${TILEOPS_BUILD_DIR:-build}}"
case "$build" in /*) ;; *) build="$repo/$build" ;; esac
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  echo "install-test: $build is not a configured build directory" >&2
  exit 2
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/tileops-install-test.XXXXXX")"
cleanup() { rm -rf "$work"; }
trap cleanup EXIT

prefix="$work/prefix"
echo "install-test: installing $build into $prefix"
cmake --install "$build" --prefix "$prefix" > "$work/install.log" || {
  cat "$work/install.log" >&2
  exit 1
}

generator=()
if command -v ninja > /dev/null 2>&1; then generator=(-G Ninja); fi
cuda_root=()
if [[ -d /usr/local/cuda ]]; then cuda_root=(-DCUDAToolkit_ROOT=/usr/local/cuda); fi

echo "install-test: building the consumer of tests/install"
cmake -S "$repo/tests/install" -B "$work/consumer" "${generator[@]}" "${cuda_root[@]}" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" || {
  cat "$work/configure.log" >&2
  exit 1
}
cmake --build "$work/consumer" > "$work/build.log" 2>&1 || {
  cat "$work/build.log" >&2
  exit 1
}
"$work/consumer/consumer"

# The installed command runs from the prefix (its RPATH finds the installed library).
if [[ -x "$prefix/bin/tileops" ]]; then
  "$prefix/bin/tileops" --version
  "$prefix/bin/tileops" list > /dev/null
fi
echo "install-test: PASSED"
