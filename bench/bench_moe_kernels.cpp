// Google Benchmark program for the CUDA kernels of the MoE family (src/kernels/moe): the grouped
// GEMM (bf16; plain and with fused silu_and_mul), pre-permute (the bf16 row copy, and the FP8
// quantization fused into the gather or the tokens quantized first), post-permute and top-k
// routing.
//
// Timing as bench_cuda_kernels: each repetition times one launch with CUDA events (manual time);
// before it, outside the timed region, the L2 is flushed by writing a 256 MB buffer with
// cudaMemsetAsync; the aggregates over the repetitions (median, mean, min, max, stddev) are
// reported. Grouped GEMM cases report TFLOP/s = 2 M N K / time (N: all B rows, gate and up
// together) as the counter "TFLOPs" (per repetition, so its median is the median's rate); the
// others report bytes_per_second over the fewest bytes each kernel must move.
// Shapes (uniform routing, offsets e * rows_per_expert):
//   E=256, 1024 rows/expert, N=4096, K=6144;  E=128, 1024 rows/expert, N=16384, K=5120
//   DeepSeek-V3 experts (E=256, H=7168, F=2048): gate_up N=4096 K=7168 silu_and_mul, down N=7168
//     K=2048, with 16 (512 tokens x 8 / 256) and 128 (4096 tokens x 8 / 256) rows per expert
//   Qwen3-30B-A3B (E=128, H=2048, F=768, top-8, 4096 tokens: 256 rows per expert): gate_up
//     N=1536 K=2048 silu_and_mul, down N=2048 K=768
//   the DeepSeek-V3 4096-token shapes again with ragged rows per expert (random routing, "random")
// By default each GEMM shape runs the default configuration, its twin with the other epilogue
// (",tma_store=1" or not) and the first configuration of the other tensor-core variant (wgmma /
// mma); the two large shapes (e256_*, e128_*) also run every thread-block-cluster configuration of
// their tuning space (names ending in ",cluster_m=2"). Environment:
//   TILEOPS_BENCH_REPS=N    repetitions (default 21 for the GEMMs over 10 TFLOP, else 51)
//   TILEOPS_BENCH_TUNE=1    every configuration of each GEMM shape's tuning space
//   TILEOPS_BENCH_FLUSH=none  no L2 flush
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
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cuda_bench_setup.h"
#include "kernels/moe/grouped_gemm_cuda.h"
#include "kernels/moe/moe_permute_cuda.h"
#include "kernels/moe/moe_permute_rank.h"
#include "kernels/moe/moe_routing_cuda.h"
#include "moe_bench_util.h"
#include "tileops/core/dtype.h"
#endif

namespace {

#if TILEOPS_WITH_CUDA

using tileops::DType;
using tileops::MoEActivation;
using tileops::MoEScoring;
namespace ck = tileops::cuda_kernels;

using tileops::bench::CaseBuffers;
using tileops::bench::cuda_error;
using tileops::bench::finish;
using tileops::bench::Gpu;
using tileops::bench::gpu;
using tileops::bench::kFlushBytes;
using tileops::bench::mix;
using tileops::bench::repetitions;
using tileops::bench::time_launches;

// ---------------------------------------------------------------------------------------------
// Grouped GEMM

struct GemmCase {
  const char* label;
  int64_t E, rows_per_expert, N, K;
  MoEActivation act;
  bool clusters = false;  ///< also time the cluster_m > 1 configurations by default
  /// Rows drawn per expert as by random routing (each of the E * rows_per_expert rows to a
  /// uniformly random expert, a fixed seed) instead of exactly rows_per_expert; times every
  /// wgmma configuration without clusters (which tile height wastes least on ragged experts).
  bool random_rows = false;
};

// Expert offsets of the case: uniform, or (random_rows) the prefix sums of a seeded multinomial.
std::vector<int32_t> gemm_offsets(const GemmCase& c) {
  std::vector<int64_t> counts(static_cast<size_t>(c.E), c.rows_per_expert);
  if (c.random_rows) {
    std::fill(counts.begin(), counts.end(), 0);
    std::mt19937_64 rng(20261129);
    std::uniform_int_distribution<int64_t> pick(0, c.E - 1);
    for (int64_t r = 0; r < c.E * c.rows_per_expert; ++r) ++counts[static_cast<size_t>(pick(rng))];
  }
  std::vector<int32_t> offsets(static_cast<size_t>(c.E + 1), 0);
  for (int64_t e = 0; e < c.E; ++e)
    offsets[static_cast<size_t>(e + 1)] =
        offsets[static_cast<size_t>(e)] + static_cast<int32_t>(counts[static_cast<size_t>(e)]);
  return offsets;
}

double gemm_flops(const GemmCase& c) {
  return 2.0 * static_cast<double>(c.E * c.rows_per_expert) * static_cast<double>(c.N) *
         static_cast<double>(c.K);
}

ck::GroupedGemmArgs gemm_shape(const GemmCase& c) {
  ck::GroupedGemmArgs a;
  a.M = c.E * c.rows_per_expert;
  a.N = c.N;
  a.K = c.K;
  a.E = c.E;
  a.activation = c.act;
  a.dtype = DType::bfloat16;
  return a;
}

void bench_gemm(benchmark::State& state, GemmCase c, ck::GroupedGemmConfig cfg) {
  const std::string key = std::string("gemm/") + c.label;
  CaseBuffers& buf = CaseBuffers::get(key);
  ck::GroupedGemmArgs a = gemm_shape(c);
  const int64_t n_out = c.act == MoEActivation::none ? c.N : c.N / 2;
  const std::vector<int32_t> offsets = gemm_offsets(c);
  a.a = buf.random("a", static_cast<size_t>(a.M * c.K) * 2, DType::bfloat16, 0.05f, 1.0f);
  a.b = buf.random("b", static_cast<size_t>(c.E * c.N * c.K) * 2, DType::bfloat16, 0.05f, 1.0f);
  a.c = buf.zeros("c", static_cast<size_t>(a.M * n_out) * 2);
  a.expert_offsets =
      static_cast<const int32_t*>(buf.copy("offsets", offsets.data(), offsets.size() * 4));
  if (a.a == nullptr || a.b == nullptr || a.c == nullptr || a.expert_offsets == nullptr) {
    state.SkipWithError("device allocation failed");
    return;
  }
  state.SetLabel(cfg.str());
  time_launches(state, gemm_flops(c), 0, [&] { ck::launch_grouped_gemm(a, cfg, gpu().stream); });
}

// ---------------------------------------------------------------------------------------------
// Permute, combine, routing

struct PermCase {
  const char* label;
  int64_t T, K, E, H;
};

// Top-k ids with k distinct experts per token, spread evenly (token t: (t * 7 + k * E / K) % E).
std::vector<int32_t> spread_ids(const PermCase& c) {
  std::vector<int32_t> ids(static_cast<size_t>(c.T * c.K));
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t k = 0; k < c.K; ++k)
      ids[static_cast<size_t>(t * c.K + k)] = static_cast<int32_t>((t * 7 + k * (c.E / c.K)) % c.E);
  return ids;
}

// The pre-permute's row copy (ranked by one block, or by many as the ops run it), or its FP8
// quantization (128-column groups): fused into the gather, or the tokens quantized first and their
// codes and scales gathered.
enum class PrePermuteMode { copy_one_block, copy, fp8_fused, fp8_tokens_first };

void bench_pre_permute(benchmark::State& state, PermCase c, PrePermuteMode mode) {
  CaseBuffers& buf = CaseBuffers::get(std::string("perm/") + c.label);
  const std::vector<int32_t> ids = spread_ids(c);
  const int64_t pairs = c.T * c.K;
  const int64_t groups = c.H / 128;
  ck::PrePermuteArgs a;
  a.x = buf.random("x", static_cast<size_t>(c.T * c.H) * 2, DType::bfloat16, 0.05f, 2.0f);
  a.x_row_stride = c.H;
  a.topk_ids = static_cast<const int32_t*>(buf.copy("ids", ids.data(), ids.size() * 4));
  a.expert_offsets = static_cast<int32_t*>(buf.zeros("offsets", static_cast<size_t>(c.E + 1) * 4));
  a.inverse = static_cast<int32_t*>(buf.zeros("inverse", ids.size() * 4));
  int64_t bytes = c.T * c.H * 2 + pairs * 8;
  if (mode != PrePermuteMode::copy_one_block) {
    a.rank_scratch = static_cast<int32_t*>(
        buf.zeros("rank_scratch", static_cast<size_t>(ck::moe_rank_scratch_ints(pairs, c.E)) * 4));
  }
  if (mode == PrePermuteMode::copy || mode == PrePermuteMode::copy_one_block) {
    a.permuted = buf.zeros("permuted", static_cast<size_t>(pairs * c.H) * 2);
    bytes += pairs * c.H * 2;
  } else {
    a.permuted_q = buf.zeros("permuted_q", static_cast<size_t>(pairs * c.H));
    a.permuted_scales =
        static_cast<float*>(buf.zeros("permuted_scales", static_cast<size_t>(pairs * groups) * 4));
    bytes += pairs * (c.H + groups * 4);
    if (mode == PrePermuteMode::fp8_tokens_first) {
      a.token_q = buf.zeros("token_q", static_cast<size_t>(c.T * c.H));
      a.token_scales =
          static_cast<float*>(buf.zeros("token_scales", static_cast<size_t>(c.T * groups) * 4));
    }
  }
  if (!a.x || !a.topk_ids || !a.expert_offsets || !a.inverse ||
      (a.permuted_q == nullptr ? !a.permuted : !a.permuted_scales) ||
      (mode == PrePermuteMode::fp8_tokens_first && (!a.token_q || !a.token_scales))) {
    state.SkipWithError("device allocation failed");
    return;
  }
  a.tokens = c.T;
  a.hidden = c.H;
  a.top_k = c.K;
  a.num_experts = c.E;
  a.dtype = DType::bfloat16;
  time_launches(state, 0, bytes, [&] { ck::launch_moe_pre_permute(a, gpu().stream); });
}

void bench_post_permute(benchmark::State& state, PermCase c) {
  CaseBuffers& buf = CaseBuffers::get(std::string("combine/") + c.label);
  std::vector<int32_t> inv(static_cast<size_t>(c.T * c.K));
  for (size_t i = 0; i < inv.size(); ++i)  // a scattered permutation of the rows
    inv[i] = static_cast<int32_t>((i * 2654435761ull) % inv.size());
  ck::PostPermuteArgs a;
  a.expert_out = buf.random("expert_out", static_cast<size_t>(c.T * c.K * c.H) * 2, DType::bfloat16,
                            0.05f, 2.0f);
  a.rows = c.T * c.K;
  a.topk_weights = static_cast<const float*>(
      buf.random("weights", static_cast<size_t>(c.T * c.K) * 4, DType::float32, 0.05f, 1.0f));
  a.inverse = static_cast<const int32_t*>(buf.copy("inverse", inv.data(), inv.size() * 4));
  a.out = buf.zeros("out", static_cast<size_t>(c.T * c.H) * 2);
  if (!a.expert_out || !a.topk_weights || !a.inverse || !a.out) {
    state.SkipWithError("device allocation failed");
    return;
  }
  a.tokens = c.T;
  a.hidden = c.H;
  a.top_k = c.K;
  a.dtype = DType::bfloat16;
  const int64_t bytes = c.T * c.K * c.H * 2 + c.T * c.H * 2 + c.T * c.K * 8;
  time_launches(state, 0, bytes, [&] { ck::launch_moe_post_permute(a, gpu().stream); });
}

struct RouteCase {
  const char* label;
  int64_t T, E, K;
  MoEScoring scoring;
  bool bias;
  bool renormalize;
  float scaling;
  DType dtype;
};

void bench_routing(benchmark::State& state, RouteCase c) {
  CaseBuffers& buf = CaseBuffers::get(std::string("route/") + c.label);
  const size_t es = tileops::element_size(c.dtype);
  ck::TopKRoutingArgs a;
  a.logits = buf.random("logits", static_cast<size_t>(c.T * c.E) * es, c.dtype, 0.01f, 4.0f);
  a.correction_bias = c.bias
                          ? static_cast<const float*>(buf.random(
                                "bias", static_cast<size_t>(c.E) * 4, DType::float32, 0.001f, 0.1f))
                          : nullptr;
  a.topk_weights = static_cast<float*>(buf.zeros("weights", static_cast<size_t>(c.T * c.K) * 4));
  a.topk_ids = static_cast<int32_t*>(buf.zeros("ids", static_cast<size_t>(c.T * c.K) * 4));
  if (!a.logits || (c.bias && !a.correction_bias) || !a.topk_weights || !a.topk_ids) {
    state.SkipWithError("device allocation failed");
    return;
  }
  a.tokens = c.T;
  a.num_experts = c.E;
  a.top_k = c.K;
  a.scoring = c.scoring;
  a.renormalize = c.renormalize;
  a.routed_scaling_factor = c.scaling;
  a.logits_dtype = c.dtype;
  const int64_t bytes = c.T * c.E * static_cast<int64_t>(es) + c.T * c.K * 8;
  time_launches(state, 0, bytes, [&] { ck::launch_moe_topk_routing(a, gpu().stream); });
}

void register_all(bool tune) {
  int device = 0;
  cudaGetDevice(&device);
  using A = MoEActivation;
  const GemmCase gemm_cases[] = {
      {"e256_r1024_n4096_k6144", 256, 1024, 4096, 6144, A::none, true},
      {"e128_r1024_n16384_k5120", 128, 1024, 16384, 5120, A::none, true},
      {"dsv3_gate_up_r16_n4096_k7168_silu", 256, 16, 4096, 7168, A::silu_and_mul},
      {"dsv3_down_r16_n7168_k2048", 256, 16, 7168, 2048, A::none},
      {"dsv3_gate_up_r128_n4096_k7168_silu", 256, 128, 4096, 7168, A::silu_and_mul},
      {"dsv3_down_r128_n7168_k2048", 256, 128, 7168, 2048, A::none},
      {"qwen3_30b_gate_up_r256_n1536_k2048_silu", 128, 256, 1536, 2048, A::silu_and_mul},
      {"qwen3_30b_down_r256_n2048_k768", 128, 256, 2048, 768, A::none},
      {"dsv3_gate_up_r128random_n4096_k7168_silu", 256, 128, 4096, 7168, A::silu_and_mul, false,
       true},
      {"dsv3_down_r128random_n7168_k2048", 256, 128, 7168, 2048, A::none, false, true},
  };
  for (const GemmCase& c : gemm_cases) {
    const ck::GroupedGemmArgs shape = gemm_shape(c);
    const double flops = gemm_flops(c);
    const int reps = repetitions(flops > 1e13 ? 21 : 51);
    std::vector<ck::GroupedGemmConfig> configs;
    const auto space = ck::grouped_gemm_tuning_space(shape, device);
    const auto add = [&](const ck::GroupedGemmConfig& g) {
      if (std::find(configs.begin(), configs.end(), g) == configs.end()) configs.push_back(g);
    };
    add(space.front());
    for (const auto& g : space) {
      if (g.variant != space.front().variant && g.variant != ck::GroupedGemmVariant::simt) {
        add(g);
        break;
      }
    }
    // The default's twin with the other epilogue (TMA store or stores from registers).
    for (const auto& g : space) {
      ck::GroupedGemmConfig twin = g;
      twin.tma_store = !g.tma_store;
      if (twin == space.front()) add(g);
    }
    if (c.clusters) {
      for (const auto& g : space)
        if (g.cluster_m > 1) add(g);
    }
    if (c.random_rows) {
      for (const auto& g : space)
        if (g.variant == ck::GroupedGemmVariant::wgmma && g.cluster_m == 1) add(g);
    }
    if (tune) {
      for (const auto& g : space)
        if (g.variant != ck::GroupedGemmVariant::simt || flops < 5e11) add(g);
    }
    for (const auto& cfg : configs) {
      const std::string name = std::string("grouped_gemm/bf16/") + c.label + "/" + cfg.str();
      finish(benchmark::RegisterBenchmark(name.c_str(), bench_gemm, c, cfg), reps);
    }
  }
  const PermCase perm_cases[] = {
      {"dsv3_t4096_k8_e256_h7168", 4096, 8, 256, 7168},
      {"dsv3_t512_k8_e256_h7168", 512, 8, 256, 7168},
      {"qwen3_30b_t4096_k8_e128_h2048", 4096, 8, 128, 2048},
  };
  for (const PermCase& c : perm_cases) {
    for (const auto& [mode, name] :
         {std::pair{PrePermuteMode::copy_one_block, "bf16_one_block"},
          std::pair{PrePermuteMode::copy, "bf16"},
          std::pair{PrePermuteMode::fp8_fused, "fp8_fused"},
          std::pair{PrePermuteMode::fp8_tokens_first, "fp8_tokens_first"}}) {
      finish(benchmark::RegisterBenchmark(
                 (std::string("moe_pre_permute/") + name + "/" + c.label).c_str(),
                 bench_pre_permute, c, mode),
             repetitions(51));
    }
    finish(benchmark::RegisterBenchmark((std::string("moe_post_permute/bf16/") + c.label).c_str(),
                                        bench_post_permute, c),
           repetitions(51));
  }
  const RouteCase route_cases[] = {
      {"dsv3_t4096_e256_k8_sigmoid_bias", 4096, 256, 8, MoEScoring::sigmoid, true, true, 2.5f,
       DType::float32},
      {"qwen3_30b_t4096_e128_k8_softmax", 4096, 128, 8, MoEScoring::softmax, false, true, 1.0f,
       DType::bfloat16},
      {"dsv3_t64_e256_k8_sigmoid_bias", 64, 256, 8, MoEScoring::sigmoid, true, true, 2.5f,
       DType::float32},
  };
  for (const RouteCase& c : route_cases)
    finish(benchmark::RegisterBenchmark((std::string("moe_topk_routing/") + c.label).c_str(),
                                        bench_routing, c),
           repetitions(51));
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace

int main(int argc, char** argv) {
#if !TILEOPS_WITH_CUDA
  (void)argc;
  (void)argv;
  std::printf("bench_moe_kernels: built without CUDA, nothing to measure\n");
  return 0;
#else
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("bench_moe_kernels: no CUDA device, nothing to measure\n");
    return 0;
  }
  const char* tune = std::getenv("TILEOPS_BENCH_TUNE");
  register_all(tune != nullptr && tune[0] != '\0' && tune[0] != '0');
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
#endif
}
