// Double-precision references of the MoE family (tests and `tileops bench` check against them).
// The composite references round their intermediate results to the activation dtype exactly
// where the ops' sub-ops hand over tensors of that dtype (the expert MLP's h and y), so they
// check the composition, not a different algorithm. The FP8 expert MLP is the registered
// references of its sub-ops run in its order (quantization, FP8 grouped GEMM, twice), each
// handed what the op hands over (e4m3 codes and float32 scales, h and y in bfloat16).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <variant>
#include <vector>

#include "ops/moe/moe_reference_math.h"
#include "tileops/base/reference.h"
#include "tileops/core/value.h"
#include "tileops/gen/quant.h"

namespace tileops {
namespace {

using Values = std::vector<double>;

Values values_of(const Tensor& t) {
  return t.defined() ? t.to(Device::cpu()).to_vector() : Values{};
}

/// A float32 CPU tensor of `sizes` holding `v` (each value rounded once to float32).
Tensor tensor_of(const Values& v, Sizes sizes) {
  Tensor t = Tensor::empty(std::move(sizes), DType::float32);
  float* p = t.data<float>();
  for (std::size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
  return t;
}

/// Each value rounded to what `dtype` holds.
Values round_to(const Values& v, DType dtype) {
  const auto n = static_cast<std::int64_t>(v.size());
  return tensor_of(v, {n}).to(dtype).to_vector();
}

std::string text_param(const ParamMap& p, const char* name) {
  return std::get<std::string>(p.at(name));
}

struct Routing {
  Values weights;                 // [M, K]
  std::vector<std::int64_t> ids;  // [M, K]
};

Routing route(const Values& logits, const Values& bias, std::int64_t tokens, std::int64_t experts,
              const moe_reference::RouteRule& rule) {
  const std::int64_t top_k = rule.top_k;
  Routing r;
  r.weights.resize(static_cast<std::size_t>(tokens * top_k));
  r.ids.resize(static_cast<std::size_t>(tokens * top_k));
  for (std::int64_t t = 0; t < tokens; ++t) {
    moe_reference::route_token(logits.data() + t * experts, bias, experts, rule,
                               r.weights.data() + t * top_k, r.ids.data() + t * top_k);
  }
  return r;
}

struct Permuted {
  std::vector<std::int64_t> source;   // token of each kept row, in order
  std::vector<std::int64_t> offsets;  // [E + 1]
  std::vector<std::int64_t> inverse;  // [M, K]
};

Permuted permute(const std::vector<std::int64_t>& ids, const Values& map, std::int64_t top_k,
                 std::int64_t experts) {
  Permuted p;
  const auto pairs = static_cast<std::int64_t>(ids.size());
  std::vector<std::int64_t> local(ids.size());
  for (std::int64_t i = 0; i < pairs; ++i) {
    local[i] = map.empty() ? ids[i] : static_cast<std::int64_t>(map[ids[i]]);
  }
  p.offsets.assign(static_cast<std::size_t>(experts) + 1, 0);
  p.inverse.assign(ids.size(), -1);
  for (std::int64_t e = 0; e < experts; ++e) {
    p.offsets[e] = static_cast<std::int64_t>(p.source.size());
    for (std::int64_t i = 0; i < pairs; ++i) {
      if (local[i] != e) continue;
      p.inverse[i] = static_cast<std::int64_t>(p.source.size());
      p.source.push_back(i / top_k);
    }
  }
  p.offsets[experts] = static_cast<std::int64_t>(p.source.size());
  return p;
}

/// c[rows, n_out] of the grouped GEMM (rows outside the groups are 0).
Values grouped_gemm(const Values& a, const std::vector<std::int64_t>& offsets, const Values& b,
                    std::int64_t rows, std::int64_t n, std::int64_t k, const std::string& act) {
  const std::int64_t experts = static_cast<std::int64_t>(offsets.size()) - 1;
  const std::int64_t n_out = act == "none" ? n : n / 2;
  Values c(static_cast<std::size_t>(rows * n_out), 0.0);
  for (std::int64_t e = 0; e < experts; ++e) {
    for (std::int64_t r = offsets[e]; r < offsets[e + 1]; ++r) {
      const Values row = moe_reference::gemm_row(a.data() + r * k, b.data() + e * n * k, n, k, act);
      std::copy(row.begin(), row.end(), c.begin() + r * n_out);
    }
  }
  return c;
}

/// Input i, or undefined when the caller passed fewer (absent trailing optional inputs).
Tensor input_or_none(std::span<const Tensor> in, std::size_t i) {
  return i < in.size() ? in[i] : Tensor();
}

std::vector<std::int64_t> as_ints(const Values& v) {
  return {v.begin(), v.end()};
}

/// y [rows, H] of the expert MLP, h and y rounded to `dtype` as the sub-ops hand them over.
Values expert_mlp(const Values& x, const std::vector<std::int64_t>& offsets, const Tensor& w13,
                  const Tensor& w2, std::int64_t rows, const std::string& act, DType dtype) {
  const std::int64_t hidden = w2.size(1);
  const std::int64_t f = w2.size(2);
  const Values h =
      round_to(grouped_gemm(x, offsets, values_of(w13), rows, 2 * f, hidden, act), dtype);
  return round_to(grouped_gemm(h, offsets, values_of(w2), rows, hidden, f, "none"), dtype);
}

/// The registered reference of `op` (the FP8 MLP composes its sub-ops' references).
std::vector<Tensor> reference_of(const char* op, std::vector<Tensor> inputs,
                                 const ParamMap& params) {
  const ReferenceFn* fn = find_reference(op);
  if (fn == nullptr) throw UsageError(std::string("no reference registered for ") + op);
  return (*fn)(inputs, params);
}

/// The FP8 weights of one expert MLP, as MoEExpertMLPFP8FwdOp takes them.
struct FP8Weights {
  Tensor w13, w2, w13_scales, w2_scales;
};

/// y [rows, H] of MoEExpertMLPFP8FwdOp on bfloat16 rows `x`: quantize (1 x 128), the FP8 GEMM
/// with the activation, h to bfloat16, quantize, the FP8 GEMM, y to bfloat16. e4m3 rows `x`
/// come quantized with their `x_scales`: the first quantization is theirs.
Tensor expert_mlp_fp8(const Tensor& x, const Tensor& offsets, const FP8Weights& w,
                      const std::string& act, const Tensor& x_scales = Tensor()) {
  constexpr std::int64_t block = 128;  // manifest/moe.yaml: MoEExpertMLPFP8FwdOp
  const ParamMap quant{{"group_size", block}, {"eps", gen::PerTokenGroupQuantFP8FwdOpParams{}.eps}};
  const auto gemm = [&](const std::string& activation) {
    return ParamMap{{"activation", activation}, {"block_n", block}, {"block_k", block}};
  };
  const auto xq = x.dtype() == DType::float8_e4m3fn
                      ? std::vector<Tensor>{x, x_scales}
                      : reference_of("PerTokenGroupQuantFP8FwdOp", {x.to(DType::bfloat16)}, quant);
  const Tensor h = reference_of("MoEGroupedGemmFP8FwdOp",
                                {xq[0], xq[1], offsets, w.w13, w.w13_scales}, gemm(act))[0]
                       .to(DType::bfloat16);
  const auto hq = reference_of("PerTokenGroupQuantFP8FwdOp", {h}, quant);
  return reference_of("MoEGroupedGemmFP8FwdOp", {hq[0], hq[1], offsets, w.w2, w.w2_scales},
                      gemm("none"))[0]
      .to(DType::bfloat16);
}

/// An int32 CPU tensor of `v`.
Tensor int32_of(const std::vector<std::int64_t>& v) {
  Tensor t = Tensor::empty({static_cast<std::int64_t>(v.size())}, DType::int32);
  for (std::size_t i = 0; i < v.size(); ++i)
    t.data<std::int32_t>()[i] = static_cast<std::int32_t>(v[i]);
  return t;
}

Values post_permute(const Values& expert_out, const Values& weights,
                    const std::vector<std::int64_t>& inverse, std::int64_t tokens,
                    std::int64_t top_k, std::int64_t hidden, double scale) {
  Values y(static_cast<std::size_t>(tokens * hidden), 0.0);
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t k = 0; k < top_k; ++k) {
      const std::int64_t r = inverse[t * top_k + k];
      if (r < 0) continue;
      for (std::int64_t h = 0; h < hidden; ++h) {
        y[t * hidden + h] += weights[t * top_k + k] * expert_out[r * hidden + h];
      }
    }
  }
  for (auto& v : y) v *= scale;
  return y;
}

/// The fused experts' y for ids (global) and weights; FP8 weights (with their scales in `fp8`)
/// select the FP8 MLP, as the op does.
Values fused_experts(const Tensor& x, const Values& weights, const std::vector<std::int64_t>& ids,
                     const Tensor& w13, const Tensor& w2, const Values& map, std::int64_t top_k,
                     const std::string& act, const FP8Weights& fp8) {
  const std::int64_t tokens = x.size(0);
  const std::int64_t hidden = x.size(1);
  const Permuted p = permute(ids, map, top_k, w13.size(0));
  const Values xv = values_of(x);
  const auto rows = tokens * top_k;
  Values xp(static_cast<std::size_t>(rows * hidden), 0.0);
  for (std::size_t i = 0; i < p.source.size(); ++i) {
    std::copy_n(xv.begin() + p.source[i] * hidden, hidden,
                xp.begin() + static_cast<std::int64_t>(i) * hidden);
  }
  const Values h = w13.dtype() == DType::float8_e4m3fn
                       ? expert_mlp_fp8(tensor_of(xp, {rows, hidden}), int32_of(p.offsets),
                                        {w13, w2, fp8.w13_scales, fp8.w2_scales}, act)
                             .to_vector()
                       : expert_mlp(xp, p.offsets, w13, w2, rows, act, x.dtype());
  return post_permute(h, weights, p.inverse, tokens, top_k, hidden, 1.0);
}

std::vector<Tensor> routing_reference(std::span<const Tensor> in, const ParamMap& p) {
  const std::int64_t tokens = in[0].size(0);
  const std::int64_t experts = in[0].size(1);
  const std::int64_t top_k = std::get<std::int64_t>(p.at("top_k"));
  const Routing r =
      route(values_of(in[0]), values_of(in[1]), tokens, experts, moe_reference::route_rule(p));
  return {tensor_of(r.weights, {tokens, top_k}),
          tensor_of(Values(r.ids.begin(), r.ids.end()), {tokens, top_k})};
}

std::vector<Tensor> pre_permute_reference(std::span<const Tensor> in, const ParamMap& p) {
  const std::int64_t tokens = in[0].size(0);
  const std::int64_t hidden = in[0].size(1);
  const std::int64_t top_k = in[1].size(1);
  const std::int64_t experts = std::get<std::int64_t>(p.at("num_experts"));
  const Permuted perm = permute(as_ints(values_of(in[1])), values_of(in[2]), top_k, experts);
  const Values xv = values_of(in[0]);
  Values xp(static_cast<std::size_t>(tokens * top_k * hidden), 0.0);
  for (std::size_t i = 0; i < perm.source.size(); ++i) {
    std::copy_n(xv.begin() + perm.source[i] * hidden, hidden,
                xp.begin() + static_cast<std::int64_t>(i) * hidden);
  }
  return {tensor_of(xp, {tokens * top_k, hidden}),
          tensor_of(Values(perm.offsets.begin(), perm.offsets.end()), {experts + 1}),
          tensor_of(Values(perm.inverse.begin(), perm.inverse.end()), {tokens, top_k})};
}

/// The pre-permute's reference, then the quantization's reference of its rows (float32 holds
/// the rows of x exactly, so the quantization sees x's values).
std::vector<Tensor> pre_permute_quant_reference(std::span<const Tensor> in, const ParamMap& p) {
  const std::vector<Tensor> permuted = pre_permute_reference(in, p);
  const ParamMap quant{{"group_size", p.at("group_size")}, {"eps", p.at("eps")}};
  const std::vector<Tensor> q = reference_of("PerTokenGroupQuantFP8FwdOp", {permuted[0]}, quant);
  return {q[0], q[1], permuted[1], permuted[2]};
}

/// The contiguous op's reference, each expert's rows moved to its block (rows past the counts:
/// 0, where the op leaves them unwritten), inverse to e * max_m + rank; counts above max_m are
/// refused as the CPU implementation refuses them.
std::vector<Tensor> pre_permute_quant_masked_reference(std::span<const Tensor> in,
                                                       const ParamMap& p) {
  const std::vector<Tensor> c = pre_permute_quant_reference(in, p);
  const std::int64_t experts = std::get<std::int64_t>(p.at("num_experts"));
  const std::int64_t max_m = std::get<std::int64_t>(p.at("max_m"));
  const std::int64_t hidden = c[0].size(1);
  const std::int64_t groups = c[1].size(1);
  const std::vector<std::int64_t> offsets = as_ints(c[2].to_vector());
  Tensor a = Tensor::zeros({experts, max_m, hidden}, DType::float8_e4m3fn);
  Tensor a_scales = Tensor::zeros({experts, max_m, groups}, DType::float32);
  Values counts(static_cast<std::size_t>(experts));
  for (std::int64_t e = 0; e < experts; ++e) {
    const std::int64_t count = offsets[e + 1] - offsets[e];
    if (count > max_m) {
      throw SignatureError("MoEPrePermuteQuantFP8MaskedFwdOp reference: a count exceeds max_m");
    }
    counts[e] = static_cast<double>(count);
    if (count == 0) continue;
    std::copy_n(static_cast<const std::uint8_t*>(c[0].data_ptr()) + offsets[e] * hidden,
                count * hidden, static_cast<std::uint8_t*>(a.data_ptr()) + e * max_m * hidden);
    std::copy_n(c[1].data<float>() + offsets[e] * groups, count * groups,
                a_scales.data<float>() + e * max_m * groups);
  }
  Values inverse = c[3].to_vector();
  for (double& r : inverse) {
    if (r < 0) continue;
    const auto rank = static_cast<std::int64_t>(r);
    const auto e = std::upper_bound(offsets.begin(), offsets.end(), rank) - offsets.begin() - 1;
    r = static_cast<double>(e * max_m + rank - offsets[e]);
  }
  return {a, a_scales, tensor_of(counts, {experts}), tensor_of(inverse, c[3].sizes())};
}

std::vector<Tensor> grouped_gemm_reference(std::span<const Tensor> in, const ParamMap& p) {
  const std::int64_t rows = in[0].size(0);
  const std::int64_t k = in[0].size(1);
  const std::int64_t n = in[2].size(1);
  const std::string act = text_param(p, "activation");
  const Values c =
      grouped_gemm(values_of(in[0]), as_ints(values_of(in[1])), values_of(in[2]), rows, n, k, act);
  return {tensor_of(c, {rows, act == "none" ? n : n / 2})};
}

std::vector<Tensor> expert_mlp_reference(std::span<const Tensor> in, const ParamMap& p) {
  const std::int64_t rows = in[0].size(0);
  const Values y = expert_mlp(values_of(in[0]), as_ints(values_of(in[1])), in[2], in[3], rows,
                              text_param(p, "activation"), in[0].dtype());
  return {tensor_of(y, {rows, in[0].size(1)})};
}

std::vector<Tensor> expert_mlp_fp8_reference(std::span<const Tensor> in, const ParamMap& p) {
  return {expert_mlp_fp8(in[0], in[1], {in[2], in[3], in[4], in[5]}, text_param(p, "activation"),
                         input_or_none(in, 6))
              .to(DType::float32)};
}

/// The sub-ops' references in order, as MoEExpertMLPFP8MaskedFwdOp runs them: the masked GEMM
/// (rows past the counts 0), h rounded to bf16, the quantization of every row, the masked GEMM.
std::vector<Tensor> expert_mlp_fp8_masked_reference(std::span<const Tensor> in, const ParamMap& p) {
  constexpr std::int64_t block = 128;  // manifest/moe.yaml: MoEExpertMLPFP8MaskedFwdOp
  const ParamMap quant{{"group_size", block}, {"eps", gen::PerTokenGroupQuantFP8FwdOpParams{}.eps}};
  const auto gemm = [&](const std::string& activation) {
    return ParamMap{{"activation", activation}, {"block_n", block}, {"block_k", block}};
  };
  const std::int64_t experts = in[0].size(0);
  const std::int64_t max_m = in[0].size(1);
  const Tensor h = reference_of("MoEGroupedGemmFP8MaskedFwdOp", {in[0], in[1], in[2], in[3], in[5]},
                                gemm(text_param(p, "activation")))[0]
                       .to(DType::bfloat16);
  const std::int64_t f = h.size(2);
  const auto hq =
      reference_of("PerTokenGroupQuantFP8FwdOp", {h.reshape({experts * max_m, f})}, quant);
  const Tensor y =
      reference_of("MoEGroupedGemmFP8MaskedFwdOp",
                   {hq[0].reshape({experts, max_m, f}),
                    hq[1].reshape({experts, max_m, hq[1].size(1)}), in[2], in[4], in[6]},
                   gemm("none"))[0];
  return {y.to(DType::bfloat16).to(DType::float32)};
}

std::vector<Tensor> post_permute_reference(std::span<const Tensor> in, const ParamMap& p) {
  const std::int64_t tokens = in[1].size(0);
  const std::int64_t top_k = in[1].size(1);
  const std::int64_t hidden = in[0].size(1);
  const Values y = post_permute(values_of(in[0]), values_of(in[1]), as_ints(values_of(in[2])),
                                tokens, top_k, hidden, std::get<double>(p.at("scale")));
  return {tensor_of(y, {tokens, hidden})};
}

std::vector<Tensor> fused_experts_reference(std::span<const Tensor> in, const ParamMap& p) {
  const std::int64_t top_k = in[2].size(1);
  const Values y =
      fused_experts(in[0], values_of(in[1]), as_ints(values_of(in[2])), in[3], in[4],
                    values_of(input_or_none(in, 5)), top_k, text_param(p, "activation"),
                    {{}, {}, input_or_none(in, 6), input_or_none(in, 7)});
  return {tensor_of(y, {in[0].size(0), in[0].size(1)})};
}

std::vector<Tensor> fused_moe_reference(std::span<const Tensor> in, const ParamMap& p) {
  const std::int64_t tokens = in[0].size(0);
  const std::int64_t experts = in[1].size(1);
  const std::int64_t top_k = std::get<std::int64_t>(p.at("top_k"));
  const Routing r = route(values_of(in[1]), values_of(input_or_none(in, 4)), tokens, experts,
                          moe_reference::route_rule(p));
  // The routing weights reach the experts as float32.
  const Values weights = round_to(r.weights, DType::float32);
  const auto& act = p.at("activation");
  const std::string activation =
      std::holds_alternative<std::string>(act) ? std::get<std::string>(act) : "silu_and_mul";
  const Values y = fused_experts(in[0], weights, r.ids, in[2], in[3], {}, top_k, activation,
                                 {{}, {}, input_or_none(in, 5), input_or_none(in, 6)});
  return {tensor_of(y, {tokens, in[0].size(1)})};
}

}  // namespace

TILEOPS_REGISTER_REFERENCE(MoETopKRoutingFwdOp, routing_reference)
TILEOPS_REGISTER_REFERENCE(MoEPrePermuteFwdOp, pre_permute_reference)
TILEOPS_REGISTER_REFERENCE(MoEPrePermuteQuantFP8FwdOp, pre_permute_quant_reference)
TILEOPS_REGISTER_REFERENCE(MoEPrePermuteQuantFP8MaskedFwdOp, pre_permute_quant_masked_reference)
TILEOPS_REGISTER_REFERENCE(MoEGroupedGemmFwdOp, grouped_gemm_reference)
TILEOPS_REGISTER_REFERENCE(MoEExpertMLPFwdOp, expert_mlp_reference)
TILEOPS_REGISTER_REFERENCE(MoEExpertMLPFP8FwdOp, expert_mlp_fp8_reference)
TILEOPS_REGISTER_REFERENCE(MoEExpertMLPFP8MaskedFwdOp, expert_mlp_fp8_masked_reference)
TILEOPS_REGISTER_REFERENCE(MoEPostPermuteFwdOp, post_permute_reference)
TILEOPS_REGISTER_REFERENCE(FusedMoEExpertsFwdOp, fused_experts_reference)
TILEOPS_REGISTER_REFERENCE(FusedMoEFwdOp, fused_moe_reference)

}  // namespace tileops
