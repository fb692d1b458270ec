# Sourced by the A/B scripts (ab-check.sh, ncu-ab.sh): build_cli SOURCE BUILD_DIR [JOBS] configures
# a Release build for sm_90a and builds the `tileops` command only (no tests, benches or torch).
build_cli() {
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTILEOPS_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DTILEOPS_BUILD_TESTS=OFF -DTILEOPS_BUILD_BENCH=OFF \
    -DTILEOPS_TORCH=OFF -DTILEOPS_WERROR=OFF && cmake --build "$2" -j "${3:-$(nproc)}" --target tileops_cli
}
