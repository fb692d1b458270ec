// What the MoE kernel benchmarks share (bench_moe_kernels, bench_moe_fp8_decode): the L2-flush
// switch, device buffers kept per case, the timing loop of one launch per repetition and the
// repetition settings. Only for builds with CUDA (include it inside `#if TILEOPS_WITH_CUDA`).
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cuda_bench_setup.h"
#include "tileops/core/dtype.h"

namespace tileops::bench {

inline bool flush_enabled() {
  const char* v = std::getenv("TILEOPS_BENCH_FLUSH");
  return v == nullptr || std::strcmp(v, "none") != 0;
}

inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The device buffers of one benchmark case, kept while consecutive benchmarks use the same case
// (Google Benchmark calls the function once per repetition) and freed when the case changes, so
// that the large GEMM shapes do not accumulate in device memory.
class CaseBuffers {
 public:
  static CaseBuffers& get(const std::string& key) {
    static CaseBuffers current;
    if (current.key_ != key) {
      current.release();
      current.key_ = key;
    }
    return current;
  }

  // A buffer of `bytes` filled with random bf16 / fp32 values of magnitude in [lo, hi] (never
  // zero), or float8_e4m3fn codes with bit 6 clear (exponent at most 0111: |v| < 2, never NaN;
  // lo and hi unused): 4 MB of host-made values, then doubled on the device.
  void* random(const std::string& name, size_t bytes, DType dtype, float lo, float hi) {
    if (void* p = find(name)) return p;
    void* ptr = alloc(name, bytes);
    if (ptr == nullptr) return nullptr;
    const size_t chunk = std::min<size_t>(bytes, size_t{4} << 20) / 4 * 4;
    std::vector<unsigned char> host(std::max<size_t>(chunk, 4));
    uint64_t s = std::hash<std::string>{}(key_ + name);
    for (size_t i = 0; i + 4 <= chunk; i += 4) {
      const float u = static_cast<float>(mix(s) >> 40) * (1.0f / 16777216.0f);
      const float mag = lo + (hi - lo) * u;
      const float v = (mix(s) & 1) ? mag : -mag;
      if (dtype == DType::float32) {
        std::memcpy(&host[i], &v, 4);
      } else if (dtype == DType::float8_e4m3fn) {
        const uint32_t codes = static_cast<uint32_t>(mix(s)) & 0xbfbfbfbfu;
        std::memcpy(&host[i], &codes, 4);
      } else {
        const uint16_t b0 = to_bf16(v);
        const uint16_t b1 = to_bf16(-v * 0.75f);
        std::memcpy(&host[i], &b0, 2);
        std::memcpy(&host[i + 2], &b1, 2);
      }
    }
    if (cudaMemcpy(ptr, host.data(), std::min(chunk, bytes), cudaMemcpyHostToDevice) != cudaSuccess)
      return nullptr;
    for (size_t filled = chunk; filled > 0 && filled < bytes;) {
      const size_t n = std::min(filled, bytes - filled);
      if (cudaMemcpy(static_cast<unsigned char*>(ptr) + filled, ptr, n, cudaMemcpyDeviceToDevice) !=
          cudaSuccess)
        return nullptr;
      filled += n;
    }
    return ptr;
  }

  void* copy(const std::string& name, const void* data, size_t bytes) {
    if (void* p = find(name)) return p;
    void* ptr = alloc(name, bytes);
    if (ptr == nullptr) return nullptr;
    if (cudaMemcpy(ptr, data, bytes, cudaMemcpyHostToDevice) != cudaSuccess) return nullptr;
    return ptr;
  }

  void* zeros(const std::string& name, size_t bytes) {
    if (void* p = find(name)) return p;
    void* ptr = alloc(name, bytes);
    if (ptr == nullptr) return nullptr;
    if (cudaMemset(ptr, 0, bytes) != cudaSuccess) return nullptr;
    return ptr;
  }

 private:
  void* find(const std::string& name) {
    const auto it = buffers_.find(name);
    return it == buffers_.end() ? nullptr : it->second;
  }
  void* alloc(const std::string& name, size_t bytes) {
    void* ptr = nullptr;
    if (cudaMalloc(&ptr, std::max<size_t>(bytes, 16)) != cudaSuccess) return nullptr;
    buffers_[name] = ptr;
    return ptr;
  }
  void release() {
    cudaDeviceSynchronize();
    for (auto& [name, ptr] : buffers_) cudaFree(ptr);
    buffers_.clear();
  }

  std::string key_;
  std::map<std::string, void*> buffers_;
};

// Times `launch` (one or more kernels on the stream; may throw): one warm-up, then each
// iteration flushes L2 (untimed) and times one launch with events; returns the timed seconds of
// all iterations (0 when skipped). `flops` > 0: the "TFLOPs"
// counter; `bytes` > 0: bytes_per_second.
inline double time_launches(benchmark::State& state, double flops, int64_t bytes,
                            const std::function<void()>& launch) {
  Gpu& g = gpu();
  if (!g.error.empty()) {
    state.SkipWithError(g.error.c_str());
    return 0.0;
  }
  try {
    launch();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return 0.0;
  }
  if (const cudaError_t err = cudaStreamSynchronize(g.stream); err != cudaSuccess) {
    state.SkipWithError(cuda_error(err, "warm-up").c_str());
    return 0.0;
  }
  const bool flush = flush_enabled();
  int flip = 0;
  double seconds = 0.0;
  for (auto _ : state) {
    if (flush) cudaMemsetAsync(g.flush, flip ^= 1, kFlushBytes, g.stream);
    cudaEventRecord(g.start, g.stream);
    launch();
    cudaEventRecord(g.stop, g.stream);
    if (const cudaError_t err = cudaEventSynchronize(g.stop); err != cudaSuccess) {
      state.SkipWithError(cuda_error(err, "timed launch").c_str());
      return 0.0;
    }
    float ms = 0.f;
    cudaEventElapsedTime(&ms, g.start, g.stop);
    state.SetIterationTime(static_cast<double>(ms) * 1e-3);
    seconds += static_cast<double>(ms) * 1e-3;
  }
  if (bytes > 0) state.SetBytesProcessed(state.iterations() * bytes);
  if (flops > 0 && seconds > 0)
    state.counters["TFLOPs"] = flops * static_cast<double>(state.iterations()) / seconds * 1e-12;
  return seconds;
}

inline void finish(benchmark::internal::Benchmark* b, int reps) {
  b->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(1)
      ->Repetitions(reps)
      ->ReportAggregatesOnly(true)
      ->ComputeStatistics(
          "min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); })
      ->ComputeStatistics("max", [](const std::vector<double>& v) {
        return *std::max_element(v.begin(), v.end());
      });
}

}  // namespace tileops::bench
