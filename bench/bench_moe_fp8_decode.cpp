// Google Benchmark program: the FP8 experts of one DeepSeek-V3 decode step in the masked layout,
// captured in a CUDA graph and replayed, against the time the weights take to read from HBM.
//
// The step is what follows a low-latency dispatch (which hands the rows over already in the
// masked layout, e4m3 with their 1 x 128 scales): the masked gate_up GEMM with silu_and_mul, the
// per-token-group quantization of h (all E * max_m rows), the masked down GEMM. Cases:
//   ep8_t64: 64 tokens on each of 8 GPUs, top-8 of 256 experts, this GPU's 32 experts, max_m 128
//   t64:     64 tokens on one GPU, all 256 experts, max_m = 64 (no expert can get more rows)
// Rows per expert come from a seeded random top-8 routing (distinct experts per token).
// Modes: "graph" replays the captured step (one cudaGraphLaunch per repetition), "eager" launches
// the three kernels, "contiguous" runs the same rows through the contiguous GEMMs (expert
// offsets) in a graph: the comparison the masked path's selection needs (docs/design/moe.md).
// Timing as bench_moe_kernels (moe_bench_util.h): the L2 flushed before each repetition, CUDA
// events, median over the repetitions. Counters: "weight_TBps" (the weight and scale bytes of
// the experts that received rows / time) and "of_bound" (the HBM read time of those bytes at
// 4.8 TB/s / time).
#include <benchmark/benchmark.h>

#include <cstdio>

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda_bench_setup.h"
#include "kernels/moe/grouped_gemm_fp8_cuda.h"
#include "kernels/quant/quant_cuda.h"
#include "moe_bench_util.h"
#endif

namespace {

#if TILEOPS_WITH_CUDA

using tileops::DType;
namespace ck = tileops::cuda_kernels;
using tileops::bench::CaseBuffers;
using tileops::bench::gpu;

constexpr double kHbmBytesPerSecond = 4.8e12;  // the H200's datasheet figure

struct DecodeCase {
  const char* label;
  int64_t tokens;         ///< tokens routed (all ranks together)
  int64_t top_k;          ///< experts per token
  int64_t experts_total;  ///< experts of the model
  int64_t E;              ///< experts on this GPU (0 .. E - 1)
  int64_t max_m;
  int64_t H = 7168, F = 2048;
};

enum class Mode { graph, eager, contiguous };

// Rows of each local expert under a seeded top-k routing with distinct experts per token.
std::vector<int32_t> routed_counts(const DecodeCase& c) {
  std::vector<int32_t> counts(static_cast<size_t>(c.E), 0);
  std::mt19937_64 rng(20261202);
  std::vector<int32_t> pool(static_cast<size_t>(c.experts_total));
  for (int64_t t = 0; t < c.tokens; ++t) {
    std::iota(pool.begin(), pool.end(), 0);
    for (int64_t k = 0; k < c.top_k; ++k) {
      std::uniform_int_distribution<int64_t> pick(k, c.experts_total - 1);
      std::swap(pool[static_cast<size_t>(k)], pool[static_cast<size_t>(pick(rng))]);
      const int32_t e = pool[static_cast<size_t>(k)];
      if (e < c.E) ++counts[static_cast<size_t>(e)];
    }
  }
  return counts;
}

// Bytes the step must read at least: the e4m3 weights of both GEMMs and their 128 x 128 block
// scales, of the experts that received rows (the others' are never read).
double weight_bytes(const DecodeCase& c, const std::vector<int32_t>& counts) {
  const auto used = static_cast<double>(
      std::count_if(counts.begin(), counts.end(), [](int32_t n) { return n > 0; }));
  const double per_expert = 3.0 * static_cast<double>(c.F * c.H) +
                            4.0 * 3.0 * static_cast<double>((c.F / 128) * (c.H / 128));
  return used * per_expert;
}

void bench_decode(benchmark::State& state, DecodeCase c, Mode mode) {
  const std::string key = std::string("fp8_decode/") + c.label;
  CaseBuffers& buf = CaseBuffers::get(key);
  const std::vector<int32_t> counts = routed_counts(c);
  const int64_t routed = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  const bool masked = mode != Mode::contiguous;
  const int64_t rows = masked ? c.E * c.max_m : routed;
  std::vector<int32_t> offsets(static_cast<size_t>(c.E + 1), 0);
  std::partial_sum(counts.begin(), counts.end(), offsets.begin() + 1);
  const std::string layout = masked ? "masked/" : "contiguous/";

  const auto codes = [&](const std::string& name, size_t n) {
    return buf.random(name, n, DType::float8_e4m3fn, 0.f, 0.f);
  };
  const int64_t h_blocks = c.H / 128;
  const int64_t f_blocks = c.F / 128;
  void* a = codes(layout + "a", static_cast<size_t>(rows * c.H));
  void* a_scales = buf.random(layout + "a_scales", static_cast<size_t>(rows * h_blocks) * 4,
                              DType::float32, 0.01f, 0.02f);
  void* w13 = codes("w13", static_cast<size_t>(c.E * 2 * c.F * c.H));
  void* w13_scales =
      buf.random("w13_scales", static_cast<size_t>(c.E * 2 * f_blocks * h_blocks) * 4,
                 DType::float32, 0.01f, 0.02f);
  void* w2 = codes("w2", static_cast<size_t>(c.E * c.H * c.F));
  void* w2_scales = buf.random("w2_scales", static_cast<size_t>(c.E * h_blocks * f_blocks) * 4,
                               DType::float32, 0.01f, 0.02f);
  void* h = buf.zeros(layout + "h", static_cast<size_t>(rows * c.F) * 2);
  void* hq = buf.zeros(layout + "hq", static_cast<size_t>(rows * c.F));
  void* h_scales = buf.zeros(layout + "h_scales", static_cast<size_t>(rows * f_blocks) * 4);
  void* out = buf.zeros(layout + "out", static_cast<size_t>(rows * c.H) * 2);
  const void* rows_of = masked ? buf.copy("counts", counts.data(), counts.size() * 4)
                               : buf.copy("offsets", offsets.data(), offsets.size() * 4);
  if (a == nullptr || a_scales == nullptr || w13 == nullptr || w13_scales == nullptr ||
      w2 == nullptr || w2_scales == nullptr || h == nullptr || hq == nullptr ||
      h_scales == nullptr || out == nullptr || rows_of == nullptr) {
    state.SkipWithError("device allocation failed");
    return;
  }
  ck::GroupedGemmFP8Args gate_up;
  gate_up.a = a;
  gate_up.a_scales = static_cast<const float*>(a_scales);
  gate_up.offsets = static_cast<const int32_t*>(rows_of);
  gate_up.b = w13;
  gate_up.b_scales = static_cast<const float*>(w13_scales);
  gate_up.c = h;
  gate_up.M = rows;
  gate_up.N = 2 * c.F;
  gate_up.K = c.H;
  gate_up.E = c.E;
  gate_up.max_m = masked ? c.max_m : 0;
  gate_up.activation = tileops::MoEActivation::silu_and_mul;
  ck::TokenGroupQuantArgs quant_h;
  quant_h.x = h;
  quant_h.q = hq;
  quant_h.scales = static_cast<float*>(h_scales);
  quant_h.rows = rows;
  quant_h.cols = c.F;
  ck::GroupedGemmFP8Args down = gate_up;
  down.a = hq;
  down.a_scales = static_cast<const float*>(h_scales);
  down.b = w2;
  down.b_scales = static_cast<const float*>(w2_scales);
  down.c = out;
  down.N = c.H;
  down.K = c.F;
  down.activation = tileops::MoEActivation::none;
  const auto gate_up_cfg = ck::grouped_gemm_fp8_default_config(gate_up);
  const auto down_cfg = ck::grouped_gemm_fp8_default_config(down);
  cudaStream_t stream = gpu().stream;
  const auto step = [&] {
    ck::launch_grouped_gemm_fp8(gate_up, gate_up_cfg, stream);
    ck::launch_token_group_quant_fp8(quant_h, stream);
    ck::launch_grouped_gemm_fp8(down, down_cfg, stream);
  };

  cudaGraphExec_t exec = nullptr;
  if (mode != Mode::eager) {
    cudaGraph_t graph = nullptr;
    cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    if (err == cudaSuccess) {
      try {
        step();
      } catch (const std::exception& e) {
        cudaStreamEndCapture(stream, &graph);
        state.SkipWithError(e.what());
        return;
      }
      err = cudaStreamEndCapture(stream, &graph);
    }
    if (err == cudaSuccess) err = cudaGraphInstantiate(&exec, graph, 0);
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (err != cudaSuccess) {
      state.SkipWithError(tileops::bench::cuda_error(err, "capturing the step").c_str());
      return;
    }
  }
  state.SetLabel("rows " + std::to_string(routed) + ", gate_up " + gate_up_cfg.str() + ", down " +
                 down_cfg.str());
  const double bytes = weight_bytes(c, counts);
  const double seconds = tileops::bench::time_launches(state, 0.0, 0, [&] {
    if (exec != nullptr) {
      cudaGraphLaunch(exec, stream);
    } else {
      step();
    }
  });
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (seconds > 0) {
    const double per_step = seconds / static_cast<double>(state.iterations());
    state.counters["weight_TBps"] = bytes / per_step * 1e-12;
    state.counters["of_bound"] = bytes / kHbmBytesPerSecond / per_step;
  }
}

void register_all() {
  const DecodeCase cases[] = {
      {"dsv3_ep8_t64", 512, 8, 256, 32, 128},
      {"dsv3_t64", 64, 8, 256, 256, 64},
  };
  for (const DecodeCase& c : cases) {
    const int reps = tileops::bench::repetitions(51);
    for (const auto& [mode, name] :
         {std::pair{Mode::graph, "graph"}, std::pair{Mode::eager, "eager"},
          std::pair{Mode::contiguous, "contiguous"}}) {
      const std::string full = std::string("fp8_moe_decode/") + c.label + "/" + name;
      tileops::bench::finish(benchmark::RegisterBenchmark(full.c_str(), bench_decode, c, mode),
                             reps);
    }
  }
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace

int main(int argc, char** argv) {
#if !TILEOPS_WITH_CUDA
  (void)argc;
  (void)argv;
  std::printf("bench_moe_fp8_decode: built without CUDA, nothing to measure\n");
  return 0;
#else
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("bench_moe_fp8_decode: no CUDA device, nothing to measure\n");
    return 0;
  }
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
#endif
}
