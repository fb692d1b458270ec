// Google Benchmark program for the CUDA kernels of RMSNorm, fused add+RMSNorm and LongRoPE.
//
// Each repetition times one launch with CUDA events (manual time); before it, outside the timed
// region, the L2 is flushed by writing a 256 MB buffer with cudaMemsetAsync. The aggregates over
// the repetitions (median, mean, min, max, stddev) are reported; bytes_per_second counts the
// fewest bytes each kernel must move:
//   RMSNorm:            read x + read weight + write y
//   fused add+RMSNorm:  read x + read and write residual + read weight + write y
//   LongRoPE:           read x + write y
// Environment:
//   TILEOPS_BENCH_REPS=N    repetitions (default 51)
//   TILEOPS_BENCH_TUNE=1    also time every configuration of each shape's tuning space
//   TILEOPS_BENCH_STAGED=1  also time the shared-memory-staged RMSNorm kernel (staged_rows, sm_90
//                           only): per shape, the most stages that fit one block a multiprocessor
//                           (1024 threads at most), and two blocks a multiprocessor (512 threads
//                           at most), where 2 stages fit; without and with their L2 policies
//   TILEOPS_BENCH_LEAN=1    also time the lean streaming RMSNorm kernels (streaming_unroll 1 and
//                           2, cache_hint 0 to 3): 256 and 512 threads, persistent grid and a
//                           block per row; fused, also with fused_recompute (a block per row)
//   TILEOPS_BENCH_REREAD=1  also time the re-reading RMSNorm kernel (reread) in each (threads,
//                           vecs_per_thread) that makes the case's row exactly, a block per row
//                           and a persistent grid
//   TILEOPS_BENCH_FLUSH=... "memset" (default), "memset+read" (then also read 128 MB of the
//                           flush buffer back to the host, so that no dirty flush lines are left in
//                           L2 to be written back during the timed kernel), "kernel" (the buffer
//                           written by a kernel of 16-byte stores, as `tileops bench --flush
//                           kernel` does), or "none"
//   TILEOPS_BENCH_GRAPH=N   time a CUDA graph of N back-to-back launches (one flush before the
//                           graph, none between its launches) and report its time / N: the
//                           kernel time without the event and launch overheads (decode sizes)
// A reference "copy/<bytes>" case times cudaMemcpyAsync device to device of the same byte count
// (half read, half written) under the same flush and timing, so each figure can be read as a
// fraction of a copy measured the same way.
// Without CUDA or without a device it prints a message and exits 0.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_bench_setup.h"
#include "kernels/norm/rms_norm_cuda.h"
#include "kernels/rope/long_rope_cuda.h"
#include "perf/flush.h"
#include "tileops/core/dtype.h"
#endif

namespace {

#if TILEOPS_WITH_CUDA

using tileops::DType;
namespace ck = tileops::cuda_kernels;

using tileops::bench::cuda_error;
using tileops::bench::Gpu;
using tileops::bench::gpu;
using tileops::bench::kFlushBytes;
using tileops::bench::mix;
constexpr size_t kFlushReadBytes = size_t{128} << 20;

enum class Flush { none, memset, memset_read, kernel };

Flush flush_mode() {
  const char* v = std::getenv("TILEOPS_BENCH_FLUSH");
  if (v == nullptr || std::strcmp(v, "memset") == 0) return Flush::memset;
  if (std::strcmp(v, "memset+read") == 0) return Flush::memset_read;
  if (std::strcmp(v, "kernel") == 0) return Flush::kernel;
  return Flush::none;
}

int graph_launches() {
  const char* v = std::getenv("TILEOPS_BENCH_GRAPH");
  const int n = v != nullptr ? std::atoi(v) : 0;
  return n > 0 ? n : 0;
}

int repetitions() {
  return tileops::bench::repetitions(51);
}

// Pinned host memory the memset+read flush copies into, made once (nullptr when it failed).
void* flush_read_sink() {
  static void* sink = [] {
    void* p = nullptr;
    return cudaMallocHost(&p, kFlushReadBytes) == cudaSuccess ? p : nullptr;
  }();
  return sink;
}

uint16_t to_bits16(float f, DType dtype) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (dtype == DType::bfloat16)
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  // float16, for |f| in [2^-14, 65504] (the values drawn here): round to nearest even.
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  const uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
}

// Device buffers filled with random values in +-[lo, hi] (never zero), cached by name across
// repetitions and benchmarks.
void* random_buffer(const std::string& name, size_t elems, DType dtype, float lo, float hi) {
  static std::map<std::string, void*> cache;
  const size_t es = tileops::element_size(dtype);
  const std::string key = name + "/" + std::to_string(elems) + "/" + std::to_string(es);
  const auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  void* ptr = nullptr;
  if (cudaMalloc(&ptr, std::max<size_t>(elems * es, 16)) != cudaSuccess) return nullptr;
  // A random chunk of up to 4M elements, copied over the buffer.
  const size_t chunk = std::min<size_t>(elems, size_t{1} << 22);
  std::vector<unsigned char> host(chunk * es);
  uint64_t s = std::hash<std::string>{}(key);
  for (size_t i = 0; i < chunk; ++i) {
    const float u = static_cast<float>(mix(s) >> 40) * (1.0f / 16777216.0f);
    const float mag = lo + (hi - lo) * u;
    const float v = (mix(s) & 1) ? mag : -mag;
    if (es == 4) {
      std::memcpy(&host[4 * i], &v, 4);
    } else {
      const uint16_t b = to_bits16(v, dtype);
      std::memcpy(&host[2 * i], &b, 2);
    }
  }
  for (size_t off = 0; off < elems; off += chunk) {
    const size_t n = std::min(chunk, elems - off);
    if (cudaMemcpy(static_cast<unsigned char*>(ptr) + off * es, host.data(), n * es,
                   cudaMemcpyHostToDevice) != cudaSuccess)
      return nullptr;
  }
  cache[key] = ptr;
  return ptr;
}

void* device_copy(const std::string& name, const void* data, size_t bytes) {
  static std::map<std::string, void*> cache;
  const auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  void* ptr = nullptr;
  if (cudaMalloc(&ptr, bytes) != cudaSuccess) return nullptr;
  if (cudaMemcpy(ptr, data, bytes, cudaMemcpyHostToDevice) != cudaSuccess) return nullptr;
  cache[name] = ptr;
  return ptr;
}

// Times `launch` (which enqueues one kernel on the stream and may throw): one warm-up, then each
// iteration flushes L2 (untimed) and times one launch with events, or, with TILEOPS_BENCH_GRAPH=N,
// one replay of a graph of N launches (the time reported is the replay's time / N).
void time_launches(benchmark::State& state, int64_t bytes, const std::function<void()>& launch) {
  Gpu& g = gpu();
  if (!g.error.empty()) {
    state.SkipWithError(g.error.c_str());
    return;
  }
  const Flush flush = flush_mode();
  if (flush == Flush::memset_read && flush_read_sink() == nullptr) {
    state.SkipWithError("cudaMallocHost of the flush read buffer failed");
    return;
  }
  const int per_graph = graph_launches();
  try {
    launch();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  if (const cudaError_t err = cudaStreamSynchronize(g.stream); err != cudaSuccess) {
    state.SkipWithError(cuda_error(err, "warm-up").c_str());
    return;
  }
  cudaGraphExec_t exec = nullptr;
  if (per_graph > 0) {
    cudaGraph_t graph = nullptr;
    cudaError_t err = cudaStreamBeginCapture(g.stream, cudaStreamCaptureModeThreadLocal);
    if (err == cudaSuccess) {
      try {
        for (int i = 0; i < per_graph; ++i) launch();
      } catch (const std::exception&) {
        err = cudaErrorUnknown;
      }
      const cudaError_t end = cudaStreamEndCapture(g.stream, &graph);
      if (err == cudaSuccess) err = end;
    }
    if (err == cudaSuccess) err = cudaGraphInstantiate(&exec, graph, 0);
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (err == cudaSuccess) err = cudaGraphLaunch(exec, g.stream);  // warm-up replay
    if (err == cudaSuccess) err = cudaStreamSynchronize(g.stream);
    if (err != cudaSuccess) {
      if (exec != nullptr) cudaGraphExecDestroy(exec);
      state.SkipWithError(cuda_error(err, "graph capture").c_str());
      return;
    }
  }
  int flip = 0;
  for (auto _ : state) {
    if (flush == Flush::kernel) {
      tileops::perf::detail::fill_bytes_kernel(g.flush, kFlushBytes,
                                               static_cast<unsigned char>(flip ^= 1), g.stream);
    } else if (flush != Flush::none) {
      cudaMemsetAsync(g.flush, flip ^= 1, kFlushBytes, g.stream);
      if (flush == Flush::memset_read) {
        cudaMemcpyAsync(flush_read_sink(), g.flush, kFlushReadBytes, cudaMemcpyDeviceToHost,
                        g.stream);
        // A 16-byte memset (a kernel) after the copy, so that the start event follows work of
        // the compute engine rather than the copy engine's completion (seen: +6.6 us without).
        cudaMemsetAsync(g.flush, flip, 16, g.stream);
      }
    }
    cudaEventRecord(g.start, g.stream);
    if (exec != nullptr) {
      cudaGraphLaunch(exec, g.stream);
    } else {
      launch();
    }
    cudaEventRecord(g.stop, g.stream);
    if (const cudaError_t err = cudaEventSynchronize(g.stop); err != cudaSuccess) {
      if (exec != nullptr) cudaGraphExecDestroy(exec);
      state.SkipWithError(cuda_error(err, "timed launch").c_str());
      return;
    }
    float ms = 0.f;
    cudaEventElapsedTime(&ms, g.start, g.stop);
    state.SetIterationTime(static_cast<double>(ms) * 1e-3 / std::max(1, per_graph));
  }
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["GB"] = static_cast<double>(bytes) * 1e-9;
}

// The reference: a device-to-device copy of bytes / 2 (bytes counts the read and the write).
void bench_copy(benchmark::State& state, int64_t bytes) {
  const size_t half = static_cast<size_t>(bytes / 2);
  void* src = random_buffer("copy/src", half / 2, DType::bfloat16, 0.05f, 2.0f);
  void* dst = random_buffer("copy/dst", half / 2, DType::bfloat16, 0.05f, 2.0f);
  if (src == nullptr || dst == nullptr) {
    state.SkipWithError("device allocation failed");
    return;
  }
  time_launches(state, bytes, [&] {
    if (const cudaError_t err =
            cudaMemcpyAsync(dst, src, half, cudaMemcpyDeviceToDevice, gpu().stream);
        err != cudaSuccess)
      throw std::runtime_error(cuda_error(err, "cudaMemcpyAsync"));
  });
}

const char* dtype_tag(DType d) {
  return d == DType::float32 ? "fp32" : d == DType::float16 ? "fp16" : "bf16";
}

struct RMSCase {
  DType dtype;
  int64_t rows, cols;
  bool fused;
};

std::string rms_name(const RMSCase& c) {
  return std::string(c.fused ? "fused_add_rms_norm/" : "rms_norm/") + dtype_tag(c.dtype) + "/" +
         std::to_string(c.rows) + "x" + std::to_string(c.cols);
}

void bench_rms(benchmark::State& state, RMSCase c, std::optional<ck::RMSNormConfig> config) {
  const size_t n = static_cast<size_t>(c.rows * c.cols);
  const int64_t es = static_cast<int64_t>(tileops::element_size(c.dtype));
  const std::string tag = rms_name(c);
  ck::RMSNormArgs a;
  a.x = random_buffer(tag + "/x", n, c.dtype, 0.05f, 2.0f);
  a.weight = random_buffer(tag + "/w", static_cast<size_t>(c.cols), c.dtype, 0.5f, 1.5f);
  a.y = random_buffer(tag + "/y", n, c.dtype, 0.05f, 2.0f);
  a.residual = c.fused ? random_buffer(tag + "/r", n, c.dtype, 0.05f, 2.0f) : nullptr;
  if (a.x == nullptr || a.weight == nullptr || a.y == nullptr || (c.fused && !a.residual)) {
    state.SkipWithError("device allocation failed");
    return;
  }
  a.x_row_stride = a.y_row_stride = a.residual_row_stride = c.cols;
  a.rows = c.rows;
  a.cols = c.cols;
  a.eps = 1e-6f;
  a.dtype = c.dtype;
  int device = 0;
  cudaGetDevice(&device);
  const ck::RMSNormConfig cfg =
      config ? *config : ck::rms_norm_default_config(c.rows, c.cols, c.dtype, c.fused, device);
  state.SetLabel(cfg.str());
  const int64_t bytes = static_cast<int64_t>(n) * es * (c.fused ? 4 : 2) + c.cols * es;
  time_launches(state, bytes, [&] { ck::launch_rms_norm(a, cfg, gpu().stream); });
}

struct RoPECase {
  DType dtype;
  int64_t batch, seq, heads, dim;
};

std::string rope_name(const RoPECase& c) {
  return std::string("long_rope/") + dtype_tag(c.dtype) + "/" + std::to_string(c.batch) + "x" +
         std::to_string(c.seq) + "x" + std::to_string(c.heads) + "x" + std::to_string(c.dim);
}

void bench_rope(benchmark::State& state, RoPECase c, std::optional<ck::LongRoPEConfig> config) {
  const size_t n = static_cast<size_t>(c.batch * c.seq * c.heads * c.dim);
  const int64_t half = c.dim / 2;
  const int64_t es = static_cast<int64_t>(tileops::element_size(c.dtype));
  const std::string tag = rope_name(c);
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)  // Phi-3 style: base 10000, rescale factors in [1, 2)
    inv_freq[static_cast<size_t>(i)] =
        1.0 / ((1.0 + static_cast<double>(i) / static_cast<double>(half)) *
               std::pow(10000.0, 2.0 * static_cast<double>(i) / static_cast<double>(c.dim)));
  std::vector<int64_t> positions(static_cast<size_t>(c.batch * c.seq));
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t s = 0; s < c.seq; ++s)
      positions[static_cast<size_t>(b * c.seq + s)] = c.seq == 1 ? 4000 + 37 * b : s;
  ck::LongRoPEArgs a;
  a.x = random_buffer(tag + "/x", n, c.dtype, 0.05f, 2.0f);
  a.y = random_buffer(tag + "/y", n, c.dtype, 0.05f, 2.0f);
  a.inv_freq = static_cast<const double*>(
      device_copy(tag + "/inv_freq", inv_freq.data(), inv_freq.size() * sizeof(double)));
  a.positions = device_copy(tag + "/positions", positions.data(), positions.size() * 8);
  a.positions_dtype = DType::int64;
  if (a.x == nullptr || a.y == nullptr || a.inv_freq == nullptr || a.positions == nullptr) {
    state.SkipWithError("device allocation failed");
    return;
  }
  a.batch = c.batch;
  a.seq = c.seq;
  a.heads = c.heads;
  a.half_dim = half;
  a.attention_scaling = 1.1902380714238083f;
  a.dtype = c.dtype;
  int device = 0;
  cudaGetDevice(&device);
  const ck::LongRoPEConfig cfg =
      config ? *config
             : ck::long_rope_default_config(c.batch, c.seq, c.heads, half, c.dtype, device);
  state.SetLabel(cfg.str());
  const int64_t bytes = static_cast<int64_t>(n) * es * 2;
  time_launches(state, bytes, [&] { ck::launch_long_rope(a, cfg, gpu().stream); });
}

void finish(benchmark::internal::Benchmark* b) {
  b->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(1)
      ->Repetitions(repetitions())
      ->ReportAggregatesOnly(true)
      ->ComputeStatistics(
          "min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); })
      ->ComputeStatistics("max", [](const std::vector<double>& v) {
        return *std::max_element(v.begin(), v.end());
      });
}

// The staged configurations to time next to the defaults: those of the shape's tuning space (one
// block a multiprocessor with the most stages that fit, and two blocks with half the shared memory
// each).
std::vector<ck::RMSNormConfig> staged_configs(const RMSCase& c, int device) {
  std::vector<ck::RMSNormConfig> out;
  for (const auto& cfg : ck::rms_norm_tuning_space(c.rows, c.cols, c.dtype, c.fused, device))
    if (cfg.as<ck::RMSNormStagedConfig>() != nullptr) out.push_back(cfg);
  return out;
}

// The high-occupancy streaming configurations (1 and 2 vectors in flight, each cache hint).
std::vector<ck::RMSNormConfig> lean_configs(bool /*fused*/) {
  std::vector<ck::RMSNormConfig> out;
  for (const int in_flight : {1, 2})
    for (const int hint : {0, 1, 2, 3})
      for (const int threads : {256, 512})
        for (const auto grid : {ck::RMSNormGrid::persistent, ck::RMSNormGrid::all})
          out.push_back({ck::RMSNormHighOccupancyStreamingConfig{.threads = threads,
                                                                 .grid = grid,
                                                                 .vectors_in_flight = in_flight,
                                                                 .cache_hint = hint}});
  return out;
}

// The re-reading configurations (RMSNormRereadConfig) that serve the case: each (threads,
// vecs_per_thread) whose vectors make the row exactly, a block per row and a persistent grid.
std::vector<ck::RMSNormConfig> reread_configs(const RMSCase& c) {
  std::vector<ck::RMSNormConfig> out;
  const int64_t vec = 16 / static_cast<int64_t>(tileops::element_size(c.dtype));
  for (const int threads : {256, 512, 1024})
    for (const int nv : {1, 2, 4}) {
      if (int64_t{threads} * nv * vec != c.cols || (c.fused && nv == 4)) continue;
      for (const auto grid : {ck::RMSNormGrid::all, ck::RMSNormGrid::persistent}) {
        out.push_back(
            {ck::RMSNormRereadConfig{.threads = threads, .vecs_per_thread = nv, .grid = grid}});
      }
    }
  return out;
}

void register_all(bool tune, bool staged, bool lean, bool reread) {
  int device = 0;
  cudaGetDevice(&device);
  // Copies of the byte counts of the cases below (bf16 [2048, 16384] read + write: 134 MB;
  // [2048, 4096]: 33.5 MB; fused [2048, 16384]: 268 MB; fused [2048, 4096]: 67 MB; decode
  // [1, 4096]: 16 KB).
  for (const int64_t bytes :
       {int64_t{2048} * 16384 * 4, int64_t{2048} * 4096 * 4, int64_t{2048} * 16384 * 8,
        int64_t{2048} * 4096 * 8, int64_t{4096} * 4}) {
    finish(
        benchmark::RegisterBenchmark(("copy/" + std::to_string(bytes)).c_str(), bench_copy, bytes));
  }
  const RMSCase rms_cases[] = {
      {DType::bfloat16, 2048, 16384, false}, {DType::bfloat16, 2048, 4096, false},
      {DType::bfloat16, 1, 4096, false},     {DType::bfloat16, 16384, 8192, false},
      {DType::float16, 16384, 8192, false},  {DType::float32, 16384, 8192, false},
      {DType::bfloat16, 2048, 16384, true},  {DType::bfloat16, 2048, 4096, true},
      {DType::float32, 2048, 4096, false},   {DType::float16, 2048, 4096, true},
      {DType::bfloat16, 64, 8192, false},    {DType::bfloat16, 1, 4096, true},
      {DType::bfloat16, 2048, 8192, false},  {DType::bfloat16, 2048, 8192, true},
      {DType::float32, 2048, 4096, true},    {DType::bfloat16, 1, 16384, false},
      {DType::bfloat16, 32, 8192, false},    {DType::bfloat16, 64, 16384, false},
      {DType::bfloat16, 64, 8192, true},     {DType::bfloat16, 1, 16384, true},
  };
  for (const RMSCase& c : rms_cases) {
    finish(benchmark::RegisterBenchmark(rms_name(c).c_str(), bench_rms, c,
                                        std::optional<ck::RMSNormConfig>{}));
    // A staged default is timed next to the fallback (what unaligned arguments get).
    if (const auto fallback =
            ck::rms_norm_fallback_config(c.rows, c.cols, c.dtype, c.fused, device);
        fallback != ck::rms_norm_default_config(c.rows, c.cols, c.dtype, c.fused, device))
      finish(benchmark::RegisterBenchmark((rms_name(c) + "/fallback/" + fallback.str()).c_str(),
                                          bench_rms, c,
                                          std::optional<ck::RMSNormConfig>{fallback}));
    if (staged) {
      for (const auto& cfg : staged_configs(c, device))
        finish(benchmark::RegisterBenchmark((rms_name(c) + "/" + cfg.str()).c_str(), bench_rms, c,
                                            std::optional<ck::RMSNormConfig>{cfg}));
    }
    if (lean) {
      for (const auto& cfg : lean_configs(c.fused))
        finish(benchmark::RegisterBenchmark((rms_name(c) + "/" + cfg.str()).c_str(), bench_rms, c,
                                            std::optional<ck::RMSNormConfig>{cfg}));
    }
    if (reread) {
      for (const auto& cfg : reread_configs(c))
        finish(benchmark::RegisterBenchmark((rms_name(c) + "/" + cfg.str()).c_str(), bench_rms, c,
                                            std::optional<ck::RMSNormConfig>{cfg}));
    }
    if (!tune) continue;
    for (const auto& cfg : ck::rms_norm_tuning_space(c.rows, c.cols, c.dtype, c.fused, device))
      finish(benchmark::RegisterBenchmark((rms_name(c) + "/" + cfg.str()).c_str(), bench_rms, c,
                                          std::optional<ck::RMSNormConfig>{cfg}));
  }
  const RoPECase rope_cases[] = {{DType::float16, 1, 8192, 32, 128},
                                 {DType::bfloat16, 32, 1, 32, 128}};
  for (const RoPECase& c : rope_cases) {
    finish(benchmark::RegisterBenchmark(rope_name(c).c_str(), bench_rope, c,
                                        std::optional<ck::LongRoPEConfig>{}));
    if (!tune) continue;
    for (const auto& cfg :
         ck::long_rope_tuning_space(c.batch, c.seq, c.heads, c.dim / 2, c.dtype, device))
      finish(benchmark::RegisterBenchmark((rope_name(c) + "/" + cfg.str()).c_str(), bench_rope, c,
                                          std::optional<ck::LongRoPEConfig>{cfg}));
  }
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace

int main(int argc, char** argv) {
#if !TILEOPS_WITH_CUDA
  (void)argc;
  (void)argv;
  std::printf("bench_cuda_kernels: built without CUDA, nothing to measure\n");
  return 0;
#else
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("bench_cuda_kernels: no CUDA device, nothing to measure\n");
    return 0;
  }
  const auto flag = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && v[0] != '\0' && v[0] != '0';
  };
  register_all(flag("TILEOPS_BENCH_TUNE"), flag("TILEOPS_BENCH_STAGED"), flag("TILEOPS_BENCH_LEAN"),
               flag("TILEOPS_BENCH_REREAD"));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
#endif
}
