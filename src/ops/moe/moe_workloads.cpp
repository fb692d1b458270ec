// Inputs of the MoE workload cases (tileops bench): ids distinct per token, offsets of uniform
// routing, inverse indices that are a permutation, weights of variance 1/fan-in so that
// float16 stays in range. Everything is drawn from the case's seed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "tileops/base/reference.h"
#include "tileops/ops/moe.h"

namespace tileops {
namespace {

const InstantiatedCase::InputSpec& spec(const InstantiatedCase& c, std::size_t i) {
  return *c.inputs.at(i);
}

Tensor activations(const InstantiatedCase& c, std::size_t i, std::uint64_t seed, Device device) {
  return Tensor::randn(spec(c, i).shape, spec(c, i).dtype, seed + i, device);
}

/// Expert weights [E, N, K]: uniform with the variance of randn / sqrt(K) (uniform in
/// [-sqrt(3 / K), sqrt(3 / K))). Uniform, as its values cost a fraction of normal ones, and the
/// weights are gigabytes. FP8 weights are e4m3 values in [-2, 2), scaled by fp8_scales.
Tensor weights(const InstantiatedCase& c, std::size_t i, std::uint64_t seed, Device device) {
  const auto& s = spec(c, i);
  if (s.dtype == DType::float8_e4m3fn)
    return Tensor::rand(s.shape, s.dtype, seed + i, device, -2.0, 2.0);
  const double fan_in = static_cast<double>(std::max<std::int64_t>(1, s.shape.back()));
  const double bound = std::sqrt(3.0 / fan_in);
  return Tensor::rand(s.shape, s.dtype, seed + i, device, -bound, bound);
}

/// Block scales of the FP8 weights of input `weight` (scales input i, when given): [0.5, 1) /
/// sqrt(K), so that the dequantized weights have about the variance of the bf16 ones.
Tensor fp8_scales(const InstantiatedCase& c, std::size_t i, std::size_t weight, std::uint64_t seed,
                  Device device) {
  if (i >= c.inputs.size() || !c.inputs[i].has_value()) return Tensor();
  const double k = static_cast<double>(std::max<std::int64_t>(1, spec(c, weight).shape.back()));
  return Tensor::rand(spec(c, i).shape, DType::float32, seed + i, device, 0.5 / std::sqrt(k),
                      1.0 / std::sqrt(k));
}

/// [tokens, top_k] int32 ids, distinct per token, uniform in [0, experts).
Tensor distinct_ids(std::int64_t tokens, std::int64_t top_k, std::int64_t experts,
                    std::uint64_t seed, Device device) {
  std::mt19937_64 rng(seed);
  Tensor ids = Tensor::empty({tokens, top_k}, DType::int32);
  auto* p = ids.data<std::int32_t>();
  std::vector<std::int32_t> pool(static_cast<std::size_t>(experts));
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::iota(pool.begin(), pool.end(), 0);
    for (std::int64_t k = 0; k < top_k && k < experts; ++k) {  // partial Fisher-Yates
      std::uniform_int_distribution<std::int64_t> pick(k, experts - 1);
      std::swap(pool[k], pool[pick(rng)]);
      p[t * top_k + k] = pool[k];
    }
  }
  return ids.to(device);
}

/// Uniform routing offsets [E + 1]: expert e owns rows [e*M/E, (e+1)*M/E).
Tensor uniform_offsets(std::int64_t rows, std::int64_t experts, Device device) {
  Tensor off = Tensor::empty({experts + 1}, DType::int32);
  for (std::int64_t e = 0; e <= experts; ++e) {
    off.data<std::int32_t>()[e] =
        static_cast<std::int32_t>(e * rows / std::max<std::int64_t>(1, experts));
  }
  return off.to(device);
}

/// Routing weights [tokens, top_k] in [0, 1).
Tensor routing_weights(const InstantiatedCase& c, std::size_t i, std::uint64_t seed,
                       Device device) {
  return Tensor::rand(spec(c, i).shape, DType::float32, seed + i, device, 0.0, 1.0);
}

/// Distinct ids per token (and, with a map, the first num_experts of the global experts local).
std::vector<Tensor> pre_permute_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                       Device device) {
  const std::int64_t experts = std::get<std::int64_t>(c.params.at("num_experts"));
  const auto& ids = spec(c, 1).shape;
  const bool mapped = c.inputs.size() > 2 && c.inputs[2].has_value();
  const std::int64_t global = mapped ? spec(c, 2).shape[0] : experts;
  Tensor map;
  if (mapped) {  // this rank holds the first `experts` of the global experts
    map = Tensor::empty({global}, DType::int32);
    for (std::int64_t g = 0; g < global; ++g) {
      map.data<std::int32_t>()[g] = g < experts ? static_cast<std::int32_t>(g) : -1;
    }
    map = map.to(device);
  }
  return {activations(c, 0, seed, device), distinct_ids(ids[0], ids[1], global, seed + 1, device),
          map};
}

/// As MoEPrePermuteFwdOp's: distinct ids per token (a map keeps the first num_experts local).
std::vector<Tensor> pre_permute_quant_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                             Device device) {
  return pre_permute_inputs(c, seed, device);
}

/// Ids that give every (global) expert exactly max_m rows where M * K = G * max_m (so the
/// whole output is written and checked), else distinct ids per token as the contiguous op's.
std::vector<Tensor> pre_permute_quant_masked_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                                    Device device) {
  std::vector<Tensor> inputs = pre_permute_inputs(c, seed, device);
  const std::int64_t experts = std::get<std::int64_t>(c.params.at("num_experts"));
  const std::int64_t max_m = std::get<std::int64_t>(c.params.at("max_m"));
  const auto& ids = spec(c, 1).shape;
  const bool mapped = c.inputs.size() > 2 && c.inputs[2].has_value();
  const std::int64_t global = mapped ? spec(c, 2).shape[0] : experts;
  if (ids[0] * ids[1] != global * max_m || ids[1] > global) return inputs;
  // Pair p = t * K + k goes to global expert p mod G: distinct per token (K <= G), and every
  // expert gets M * K / G = max_m rows, so no row of the layout is left unwritten.
  Tensor balanced = Tensor::empty({ids[0], ids[1]}, DType::int32);
  for (std::int64_t p = 0; p < ids[0] * ids[1]; ++p) {
    balanced.data<std::int32_t>()[p] = static_cast<std::int32_t>(p % global);
  }
  inputs[1] = balanced.to(device);
  return inputs;
}

/// Uniform routing: expert e owns rows [e*M/E, (e+1)*M/E).
std::vector<Tensor> grouped_gemm_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                        Device device) {
  const std::int64_t rows = spec(c, 0).shape[0];
  const std::int64_t experts = spec(c, 2).shape[0];
  return {activations(c, 0, seed, device), uniform_offsets(rows, experts, device),
          weights(c, 2, seed, device)};
}

// e4m3 values in [-2, 2), activation scales in [0.5, 1) and weight scales in [0.5, 1) / sqrt(K):
// the outputs have the magnitude of the bf16 op's, far from bf16's limits. Uniform routing.
std::vector<Tensor> grouped_gemm_fp8_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                            Device device) {
  const std::int64_t rows = spec(c, 0).shape[0];
  const std::int64_t experts = spec(c, 3).shape[0];
  const double k = static_cast<double>(std::max<std::int64_t>(1, spec(c, 0).shape[1]));
  const auto uniform = [&](std::size_t i, double lo, double hi) {
    return Tensor::rand(spec(c, i).shape, spec(c, i).dtype, seed + i, device, lo, hi);
  };
  return {uniform(0, -2.0, 2.0), uniform(1, 0.5, 1.0), uniform_offsets(rows, experts, device),
          uniform(3, -2.0, 2.0), uniform(4, 0.5 / std::sqrt(k), 1.0 / std::sqrt(k))};
}

/// max_m / 8 rows per expert, values and scales as MoEGroupedGemmFP8FwdOp's.
std::vector<Tensor> grouped_gemm_fp8_masked_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                                   Device device) {
  const auto& a = spec(c, 0).shape;  // [E, max_m, K]
  const double k = static_cast<double>(std::max<std::int64_t>(1, a[2]));
  const auto uniform = [&](std::size_t i, double lo, double hi) {
    return Tensor::rand(spec(c, i).shape, spec(c, i).dtype, seed + i, device, lo, hi);
  };
  Tensor counts = Tensor::empty({a[0]}, DType::int32);
  for (std::int64_t e = 0; e < a[0]; ++e) {
    counts.data<std::int32_t>()[e] = static_cast<std::int32_t>(a[1] / 8);
  }
  return {uniform(0, -2.0, 2.0), uniform(1, 0.5, 1.0), counts.to(device), uniform(3, -2.0, 2.0),
          uniform(4, 0.5 / std::sqrt(k), 1.0 / std::sqrt(k))};
}

/// inverse is a permutation of the expert rows.
std::vector<Tensor> post_permute_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                        Device device) {
  const std::int64_t rows = spec(c, 0).shape[0];
  const auto& pairs = spec(c, 2).shape;
  std::vector<std::int32_t> perm(static_cast<std::size_t>(rows));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(seed + 2));
  Tensor inverse = Tensor::empty(pairs, DType::int32);
  for (std::int64_t i = 0; i < pairs[0] * pairs[1]; ++i) {
    inverse.data<std::int32_t>()[i] = i < rows ? perm[i] : -1;  // more pairs than rows: dropped
  }
  return {activations(c, 0, seed, device), routing_weights(c, 1, seed, device), inverse.to(device)};
}

std::vector<Tensor> expert_mlp_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                      Device device) {
  const std::int64_t rows = spec(c, 0).shape[0];
  const std::int64_t experts = spec(c, 2).shape[0];
  return {activations(c, 0, seed, device), uniform_offsets(rows, experts, device),
          weights(c, 2, seed, device), weights(c, 3, seed, device)};
}

/// Uniform routing offsets; e4m3 weights of variance 1/fan-in with their block scales.
std::vector<Tensor> expert_mlp_fp8_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                          Device device) {
  const std::int64_t rows = spec(c, 0).shape[0];
  const std::int64_t experts = spec(c, 2).shape[0];
  // e4m3 x (pre-quantized rows): values in [-2, 2) with activation scales in [0.5, 1).
  const bool quantized = spec(c, 0).dtype == DType::float8_e4m3fn;
  const Tensor x =
      quantized ? Tensor::rand(spec(c, 0).shape, DType::float8_e4m3fn, seed, device, -2.0, 2.0)
                : activations(c, 0, seed, device);
  const Tensor x_scales =
      quantized ? Tensor::rand(spec(c, 6).shape, DType::float32, seed + 6, device, 0.5, 1.0)
                : Tensor();
  return {x,
          uniform_offsets(rows, experts, device),
          weights(c, 2, seed, device),
          weights(c, 3, seed, device),
          fp8_scales(c, 4, 2, seed, device),
          fp8_scales(c, 5, 3, seed, device),
          x_scales};
}

/// Two rows per expert (64 tokens of top-8 over 256 experts), at most max_m; weights as
/// MoEExpertMLPFP8FwdOp's.
std::vector<Tensor> expert_mlp_fp8_masked_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                                 Device device) {
  const auto& x = spec(c, 0).shape;  // [E, max_m, H]
  Tensor counts = Tensor::empty({x[0]}, DType::int32);
  for (std::int64_t e = 0; e < x[0]; ++e) {
    counts.data<std::int32_t>()[e] = static_cast<std::int32_t>(std::min<std::int64_t>(2, x[1]));
  }
  return {Tensor::rand(x, DType::float8_e4m3fn, seed, device, -2.0, 2.0),
          Tensor::rand(spec(c, 1).shape, DType::float32, seed + 1, device, 0.5, 1.0),
          counts.to(device),
          weights(c, 3, seed, device),
          weights(c, 4, seed, device),
          fp8_scales(c, 5, 3, seed, device),
          fp8_scales(c, 6, 4, seed, device)};
}

std::vector<Tensor> fused_experts_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                         Device device) {
  const auto& ids = spec(c, 2).shape;
  const std::int64_t experts = spec(c, 3).shape[0];
  return {activations(c, 0, seed, device),
          routing_weights(c, 1, seed, device),
          distinct_ids(ids[0], ids[1], experts, seed + 2, device),
          weights(c, 3, seed, device),
          weights(c, 4, seed, device),
          Tensor(),
          fp8_scales(c, 6, 3, seed, device),
          fp8_scales(c, 7, 4, seed, device)};
}

std::vector<Tensor> fused_moe_inputs(const InstantiatedCase& c, std::uint64_t seed, Device device) {
  const bool biased = c.inputs.size() > 4 && c.inputs[4].has_value();
  return {activations(c, 0, seed, device),
          activations(c, 1, seed, device),
          weights(c, 2, seed, device),
          weights(c, 3, seed, device),
          biased ? Tensor::rand(spec(c, 4).shape, DType::float32, seed + 4, device, 0.0, 0.1)
                 : Tensor(),
          fp8_scales(c, 5, 2, seed, device),
          fp8_scales(c, 6, 3, seed, device)};
}

}  // namespace

TILEOPS_REGISTER_WORKLOAD_INPUTS(MoEPrePermuteFwdOp, pre_permute_inputs)
TILEOPS_REGISTER_WORKLOAD_INPUTS(MoEPrePermuteQuantFP8FwdOp, pre_permute_quant_inputs)
TILEOPS_REGISTER_WORKLOAD_INPUTS(MoEPrePermuteQuantFP8MaskedFwdOp, pre_permute_quant_masked_inputs)
TILEOPS_REGISTER_WORKLOAD_INPUTS(MoEGroupedGemmFwdOp, grouped_gemm_inputs)
TILEOPS_REGISTER_WORKLOAD_INPUTS(MoEGroupedGemmFP8FwdOp, grouped_gemm_fp8_inputs)
TILEOPS_REGISTER_WORKLOAD_INPUTS(MoEGroupedGemmFP8MaskedFwdOp, grouped_gemm_fp8_masked_inputs)
TILEOPS_REGISTER_WORKLOAD_INPUTS(MoEPostPermuteFwdOp, post_permute_inputs)
TILEOPS_REGISTER_WORKLOAD_INPUTS(MoEExpertMLPFwdOp, expert_mlp_inputs)
TILEOPS_REGISTER_WORKLOAD_INPUTS(MoEExpertMLPFP8FwdOp, expert_mlp_fp8_inputs)
TILEOPS_REGISTER_WORKLOAD_INPUTS(MoEExpertMLPFP8MaskedFwdOp, expert_mlp_fp8_masked_inputs)
TILEOPS_REGISTER_WORKLOAD_INPUTS(FusedMoEExpertsFwdOp, fused_experts_inputs)
TILEOPS_REGISTER_WORKLOAD_INPUTS(FusedMoEFwdOp, fused_moe_inputs)

}  // namespace tileops
