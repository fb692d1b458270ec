#!/usr/bin/env bash
# The main job on a fresh Debian 12 / Ubuntu 24.04 machine (as root, or a user with sudo):
# installs the build dependencies, builds tileops (with CUDA when nvcc is installed), measures the
# hardware profile, and runs every op's manifest workloads with `tileops bench --all` on the best
# device available (CUDA when `nvidia-smi` works and the build has CUDA, else the CPU).
#
# Environment: TILEOPS_BUILD_DIR (default build), JOBS (default: number of cores),
# SKIP_APT=1 to skip the package installation. Logs go to $OUT when set, else to $BUILD/bench.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${TILEOPS_BUILD_DIR:-build}"
jobs="${JOBS:-$(nproc)}"

if [[ "${SKIP_APT:-0}" != 1 ]]; then
  sudo=()
  if [[ "$(id -u)" != 0 ]]; then sudo=(sudo); fi
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    cmake ninja-build g++ libyaml-cpp-dev libfmt-dev libcli11-dev libgtest-dev libgmock-dev \
    libbenchmark-dev libdlpack-dev libopenblas-dev clang libclang-rt-dev
fi

if [[ -d /usr/local/cuda/bin && ":$PATH:" != *":/usr/local/cuda/bin:"* ]]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi
cuda=OFF
if command -v nvcc > /dev/null 2>&1; then cuda=ON; fi

echo "== configure $build (TILEOPS_CUDA=$cuda)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTILEOPS_CUDA="$cuda" \
  -DTILEOPS_BUILD_TESTS=ON -DTILEOPS_BUILD_BENCH=ON
echo "== build tileops (-j$jobs)"
cmake --build "$build" -j "$jobs" --target tileops_cli

device=cpu
if grep -q '^TILEOPS_CUDA:BOOL=ON' "$build/CMakeCache.txt" && command -v nvidia-smi > /dev/null 2>&1 &&
  nvidia-smi -L > /dev/null 2>&1; then
  device=cuda
fi

logs="${OUT:-$build/bench}"
mkdir -p "$logs"
tileops="$build/tools/cli/tileops"
"$tileops" --version

echo "== calibrate the $device hardware profile"
"$tileops" calibrate --device "$device" | tee "$logs/calibrate-$device.txt"

echo "== tileops bench --all --device $device"
set +e
"$tileops" bench --all --device "$device" --format table | tee "$logs/bench-$device.txt"
status=${PIPESTATUS[0]}  # the bench's own status: non-zero when a result is wrong or a case fails
set -e
echo "== results in $logs/bench-$device.txt"
exit "$status"
