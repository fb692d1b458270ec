// What the CUDA kernel benchmarks share: the repetition count, CUDA error text, the stream,
// events and L2 flush buffer made once, and the seeded generator of their input buffers.
// Only for builds with CUDA (include it inside `#if TILEOPS_WITH_CUDA`).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace tileops::bench {

/// Bytes written before each timed launch to flush the L2 (twice the H200's 50 MB and more).
inline constexpr std::size_t kFlushBytes = std::size_t{256} << 20;

/// $TILEOPS_BENCH_REPS when positive, else `fallback`.
inline int repetitions(int fallback) {
  const char* v = std::getenv("TILEOPS_BENCH_REPS");
  const int n = v != nullptr ? std::atoi(v) : 0;
  return n > 0 ? n : fallback;
}

/// "what: cudaErrorX: description".
inline std::string cuda_error(cudaError_t err, const char* what) {
  return std::string(what) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
}

/// The stream, the events and the flush buffer, made once; `error` says why when they could not
/// be made (no device).
struct Gpu {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  void* flush = nullptr;
  std::string error;

  Gpu() {
    cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (err == cudaSuccess) err = cudaEventCreate(&start);
    if (err == cudaSuccess) err = cudaEventCreate(&stop);
    if (err == cudaSuccess) err = cudaMalloc(&flush, kFlushBytes);
    if (err != cudaSuccess) error = cuda_error(err, "setting up the stream, events and buffers");
  }
};

inline Gpu& gpu() {
  static Gpu g;
  return g;
}

/// splitmix64: the next value of the generator whose state is `s`.
inline std::uint64_t mix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace tileops::bench
