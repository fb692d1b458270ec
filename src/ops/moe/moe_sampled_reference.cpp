// Row-sampled double-precision references of the MoE ops whose whole reference is too costly
// for large cases (`tileops bench` checks those on sampled rows). A sampled row reads only the
// weights of its own experts, converted once per expert; everything else follows the whole
// references of moe_reference.cpp (the same roundings where sub-ops hand over tensors; for FP8
// weights, a row's activations quantized by the quantization op's reference where the op
// quantizes them).
#include <algorithm>
#include <map>
#include <optional>
#include <variant>
#include <vector>

#include "ops/moe/moe_reference_math.h"
#include "ops/quant/e4m3_reference.h"
#include "tileops/base/reference.h"
#include "tileops/core/value.h"
#include "tileops/gen/quant.h"

namespace tileops {
namespace {

using Values = std::vector<double>;
namespace ref = moe_reference;

Values values_of(const Tensor& t) {
  return t.defined() ? t.to(Device::cpu()).to_vector() : Values{};
}

/// Input i, or undefined when the caller passed fewer (absent trailing optional inputs).
Tensor input_or_none(std::span<const Tensor> in, std::size_t i) {
  return i < in.size() ? in[i] : Tensor();
}

Values row_of(const Tensor& t, std::int64_t row) {
  const std::int64_t one[] = {row};
  return gather_rows(t, one).to_vector();
}

/// Each value rounded to what `dtype` holds.
Values round_to(const Values& v, DType dtype) {
  Tensor t = Tensor::empty({static_cast<std::int64_t>(v.size())}, DType::float32);
  float* p = t.data<float>();
  for (std::size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
  return t.to(dtype).to_vector();
}

/// A float32 CPU tensor [rows, cols] of `v`.
Tensor tensor_of(const Values& v, std::int64_t rows, std::int64_t cols) {
  Tensor t = Tensor::empty({rows, cols}, DType::float32);
  float* p = t.data<float>();
  for (std::size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
  return t;
}

// FP8 weights and activations use DeepSeek-V3's 128 (manifest/moe.yaml, MoEExpertMLPFP8FwdOp).
constexpr std::int64_t kFP8Block = 128;

/// The values of e4m3 tensor t, decoded from the format's definition.
Values e4m3_values(const Tensor& t) {
  const Tensor host = t.to(Device::cpu()).contiguous();
  const auto* codes = static_cast<const std::uint8_t*>(host.data_ptr());
  Values v(static_cast<std::size_t>(host.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = reference_fp8::e4m3_value(codes[i]);
  return v;
}

/// The expert weights [E, N, K] of one expert at a time, as doubles (FP8 weights times their
/// 128 x 128 block scales): the sampled rows are visited so that one expert's rows come
/// together, so each expert is converted once.
class ExpertWeights {
 public:
  explicit ExpertWeights(const Tensor& w, const Tensor& scales = Tensor())
      : w_(w), scales_(scales) {}
  const Values& of(std::int64_t e) {
    if (e != expert_) {
      const Tensor we = w_.select(0, e);
      if (w_.dtype() != DType::float8_e4m3fn) {
        values_ = we.to(Device::cpu()).to_vector();
      } else {
        values_ = e4m3_values(we);
        const Values s = scales_.select(0, e).to(Device::cpu()).to_vector();
        const std::int64_t k = we.size(1);
        const std::int64_t kblocks = (k + kFP8Block - 1) / kFP8Block;
        for (std::size_t i = 0; i < values_.size(); ++i) {
          const auto j = static_cast<std::int64_t>(i) / k;
          const auto c = static_cast<std::int64_t>(i) % k;
          values_[i] *= s[(j / kFP8Block) * kblocks + c / kFP8Block];
        }
      }
      expert_ = e;
    }
    return values_;
  }

 private:
  Tensor w_;
  Tensor scales_;
  std::int64_t expert_ = -1;
  Values values_;
};

/// The expert of row r under expert-contiguous offsets; nullopt for a row outside the groups.
std::optional<std::int64_t> expert_of_row(const Values& offsets, std::int64_t r) {
  for (std::size_t e = 0; e + 1 < offsets.size(); ++e) {
    if (offsets[e] <= static_cast<double>(r) && static_cast<double>(r) < offsets[e + 1]) {
      return static_cast<std::int64_t>(e);
    }
  }
  return std::nullopt;
}

/// The expert MLP of one row: h = act(w13_e x) rounded to dtype, y = w2_e h rounded to dtype.
Values mlp_row(const Values& x, const Values& w13, const Values& w2, std::int64_t hidden,
               std::int64_t f, const std::string& act, DType dtype) {
  const Values h = round_to(ref::gemm_row(x.data(), w13.data(), 2 * f, hidden, act), dtype);
  return round_to(ref::gemm_row(h.data(), w2.data(), hidden, f, "none"), dtype);
}

/// A bfloat16 row quantized as the FP8 MLP's quantization op does (its registered reference,
/// 1 x 128 groups), handed back dequantized: q * scale in double.
Values quantized_row(const Values& row) {
  const ParamMap params{{"group_size", kFP8Block},
                        {"eps", gen::PerTokenGroupQuantFP8FwdOpParams{}.eps}};
  const std::vector<Tensor> in{
      tensor_of(row, 1, static_cast<std::int64_t>(row.size())).to(DType::bfloat16)};
  const std::vector<Tensor> q = (*find_reference("PerTokenGroupQuantFP8FwdOp"))(in, params);
  Values v = e4m3_values(q[0]);
  const Values scales = q[1].to_vector();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] *= scales[i / kFP8Block];
  return v;
}

/// The FP8 expert MLP of one bfloat16 row: quantize, gate_up (dequantized weights), h to
/// bfloat16, quantize, down, y to bfloat16. `x_quantized`: x is a row already dequantized from
/// e4m3 and its scales, and is not quantized again.
Values mlp_row_fp8(const Values& x, const Values& w13, const Values& w2, std::int64_t hidden,
                   std::int64_t f, const std::string& act, bool x_quantized = false) {
  const Values xq = x_quantized ? x : quantized_row(x);
  const Values h =
      round_to(ref::gemm_row(xq.data(), w13.data(), 2 * f, hidden, act), DType::bfloat16);
  return round_to(ref::gemm_row(quantized_row(h).data(), w2.data(), hidden, f, "none"),
                  DType::bfloat16);
}

/// Row `row` of e4m3 `x` times its 1 x 128 `scales`, in double.
Values dequantized_row(const Tensor& x, const Tensor& scales, std::int64_t row) {
  const std::int64_t one[] = {row};
  Values v = e4m3_values(gather_rows(x, one));
  const Values s = gather_rows(scales, one).to_vector();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] *= s[i / kFP8Block];
  return v;
}

std::string text_param(const ParamMap& p, const char* name) {
  return std::get<std::string>(p.at(name));
}

std::vector<Tensor> grouped_gemm_rows(std::span<const Tensor> in, const ParamMap& p,
                                      std::span<const std::int64_t> rows) {
  const std::int64_t k = in[0].size(1);
  const std::int64_t n = in[2].size(1);
  const std::string act = text_param(p, "activation");
  const std::int64_t n_out = act == "none" ? n : n / 2;
  const Values offsets = values_of(in[1]);
  ExpertWeights b(in[2]);
  Values c(rows.size() * static_cast<std::size_t>(n_out), 0.0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto e = expert_of_row(offsets, rows[i]);
    if (!e) continue;
    const Values row = ref::gemm_row(row_of(in[0], rows[i]).data(), b.of(*e).data(), n, k, act);
    std::copy(row.begin(), row.end(), c.begin() + static_cast<std::int64_t>(i) * n_out);
  }
  return {tensor_of(c, static_cast<std::int64_t>(rows.size()), n_out)};
}

std::vector<Tensor> expert_mlp_rows(std::span<const Tensor> in, const ParamMap& p,
                                    std::span<const std::int64_t> rows) {
  const std::int64_t hidden = in[0].size(1);
  const std::int64_t f = in[3].size(2);
  const std::string act = text_param(p, "activation");
  const Values offsets = values_of(in[1]);
  ExpertWeights w13(in[2]);
  ExpertWeights w2(in[3]);
  Values y(rows.size() * static_cast<std::size_t>(hidden), 0.0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto e = expert_of_row(offsets, rows[i]);
    if (!e) continue;
    const Values row =
        mlp_row(row_of(in[0], rows[i]), w13.of(*e), w2.of(*e), hidden, f, act, in[0].dtype());
    std::copy(row.begin(), row.end(), y.begin() + static_cast<std::int64_t>(i) * hidden);
  }
  return {tensor_of(y, static_cast<std::int64_t>(rows.size()), hidden)};
}

std::vector<Tensor> expert_mlp_fp8_rows(std::span<const Tensor> in, const ParamMap& p,
                                        std::span<const std::int64_t> rows) {
  const std::int64_t hidden = in[0].size(1);
  const std::int64_t f = in[3].size(2);
  const std::string act = text_param(p, "activation");
  const Values offsets = values_of(in[1]);
  ExpertWeights w13(in[2], in[4]);
  ExpertWeights w2(in[3], in[5]);
  const bool quantized = in[0].dtype() == DType::float8_e4m3fn;
  Values y(rows.size() * static_cast<std::size_t>(hidden), 0.0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto e = expert_of_row(offsets, rows[i]);
    if (!e) continue;
    const Values row =
        quantized ? mlp_row_fp8(dequantized_row(in[0], in[6], rows[i]), w13.of(*e), w2.of(*e),
                                hidden, f, act, true)
                  : mlp_row_fp8(row_of(in[0], rows[i]), w13.of(*e), w2.of(*e), hidden, f, act);
    std::copy(row.begin(), row.end(), y.begin() + static_cast<std::int64_t>(i) * hidden);
  }
  return {tensor_of(y, static_cast<std::int64_t>(rows.size()), hidden)};
}

/// y of the sampled tokens: sum over k of weights[t][k] * mlp_{ids[t][k]}(x[t]) (pairs with a
/// local expert outside [0, E) are served elsewhere), the pairs visited expert by expert.
Tensor experts_rows(const Tensor& x, std::span<const std::int64_t> tokens,
                    const std::vector<Values>& weights,
                    const std::vector<std::vector<std::int64_t>>& local_ids, const Tensor& w13,
                    const Tensor& w2, const std::string& act, const Tensor& w13_scales,
                    const Tensor& w2_scales) {
  const bool fp8 = w13.dtype() == DType::float8_e4m3fn;
  const std::int64_t hidden = x.size(1);
  const std::int64_t f = w2.size(2);
  const std::int64_t experts = w13.size(0);
  std::map<std::int64_t, std::vector<std::pair<std::size_t, std::size_t>>> pairs_of_expert;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    for (std::size_t k = 0; k < local_ids[i].size(); ++k) {
      const std::int64_t e = local_ids[i][k];
      if (e >= 0 && e < experts) pairs_of_expert[e].emplace_back(i, k);
    }
  }
  std::vector<Values> xs(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) xs[i] = row_of(x, tokens[i]);
  // Per sampled token and k, the expert's output (empty: served elsewhere).
  std::vector<std::vector<Values>> out(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) out[i].resize(local_ids[i].size());
  ExpertWeights w13e(w13, w13_scales);
  ExpertWeights w2e(w2, w2_scales);
  for (const auto& [e, pairs] : pairs_of_expert) {
    for (const auto& [i, k] : pairs) {
      out[i][k] = fp8 ? mlp_row_fp8(xs[i], w13e.of(e), w2e.of(e), hidden, f, act)
                      : mlp_row(xs[i], w13e.of(e), w2e.of(e), hidden, f, act, x.dtype());
    }
  }
  Values y(tokens.size() * static_cast<std::size_t>(hidden), 0.0);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    for (std::size_t k = 0; k < out[i].size(); ++k) {
      if (out[i][k].empty()) continue;
      for (std::int64_t h = 0; h < hidden; ++h) {
        y[i * static_cast<std::size_t>(hidden) + h] += weights[i][k] * out[i][k][h];
      }
    }
  }
  return tensor_of(y, static_cast<std::int64_t>(tokens.size()), hidden);
}

std::vector<Tensor> fused_experts_rows(std::span<const Tensor> in, const ParamMap& p,
                                       std::span<const std::int64_t> rows) {
  const Values map = values_of(input_or_none(in, 5));
  std::vector<Values> weights;
  std::vector<std::vector<std::int64_t>> local;
  for (const std::int64_t t : rows) {
    weights.push_back(row_of(in[1], t));
    std::vector<std::int64_t> ids;
    for (const double g : row_of(in[2], t)) {
      const auto id = static_cast<std::int64_t>(g);
      const bool mapped = !map.empty();
      const bool in_map = id >= 0 && id < static_cast<std::int64_t>(map.size());
      ids.push_back(!mapped ? id : in_map ? static_cast<std::int64_t>(map[id]) : -1);
    }
    local.push_back(std::move(ids));
  }
  return {experts_rows(in[0], rows, weights, local, in[3], in[4], text_param(p, "activation"),
                       input_or_none(in, 6), input_or_none(in, 7))};
}

std::vector<Tensor> fused_moe_rows(std::span<const Tensor> in, const ParamMap& p,
                                   std::span<const std::int64_t> rows) {
  const std::int64_t experts = in[1].size(1);
  const std::int64_t top_k = std::get<std::int64_t>(p.at("top_k"));
  const Values bias = values_of(input_or_none(in, 4));
  const ref::RouteRule rule = ref::route_rule(p);
  std::vector<Values> weights;
  std::vector<std::vector<std::int64_t>> ids;
  for (const std::int64_t t : rows) {
    const Values logits = row_of(in[1], t);
    Values w(static_cast<std::size_t>(top_k));
    std::vector<std::int64_t> id(static_cast<std::size_t>(top_k));
    ref::route_token(logits.data(), bias, experts, rule, w.data(), id.data());
    weights.push_back(round_to(w, DType::float32));  // handed to the experts as float32
    ids.push_back(std::move(id));
  }
  const auto& act = p.at("activation");
  const std::string activation =
      std::holds_alternative<std::string>(act) ? std::get<std::string>(act) : "silu_and_mul";
  return {experts_rows(in[0], rows, weights, ids, in[2], in[3], activation, input_or_none(in, 5),
                       input_or_none(in, 6))};
}

/// y[t] = scale * sum_k weights[t, k] * expert_out[inverse[t, k]] for the sampled tokens.
std::vector<Tensor> post_permute_rows(std::span<const Tensor> in, const ParamMap& p,
                                      std::span<const std::int64_t> rows) {
  const std::int64_t hidden = in[0].size(1);
  const std::int64_t expert_rows = in[0].size(0);
  const double scale = std::get<double>(p.at("scale"));
  Values y(rows.size() * static_cast<std::size_t>(hidden), 0.0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Values w = row_of(in[1], rows[i]);
    const Values inverse = row_of(in[2], rows[i]);
    double* yt = y.data() + i * static_cast<std::size_t>(hidden);
    for (std::size_t k = 0; k < inverse.size(); ++k) {
      const auto r = static_cast<std::int64_t>(inverse[k]);
      if (r < 0 || r >= expert_rows) continue;
      const Values e = row_of(in[0], r);
      for (std::int64_t h = 0; h < hidden; ++h) yt[h] += w[k] * e[h];
    }
    for (std::int64_t h = 0; h < hidden; ++h) yt[h] *= scale;
  }
  return {tensor_of(y, static_cast<std::int64_t>(rows.size()), hidden)};
}

}  // namespace

TILEOPS_REGISTER_SAMPLED_REFERENCE(MoEPostPermuteFwdOp, post_permute_rows)
TILEOPS_REGISTER_SAMPLED_REFERENCE(MoEGroupedGemmFwdOp, grouped_gemm_rows)
TILEOPS_REGISTER_SAMPLED_REFERENCE(MoEExpertMLPFwdOp, expert_mlp_rows)
TILEOPS_REGISTER_SAMPLED_REFERENCE(MoEExpertMLPFP8FwdOp, expert_mlp_fp8_rows)
TILEOPS_REGISTER_SAMPLED_REFERENCE(FusedMoEExpertsFwdOp, fused_experts_rows)
TILEOPS_REGISTER_SAMPLED_REFERENCE(FusedMoEFwdOp, fused_moe_rows)

}  // namespace tileops
