// The attention ops: host side (the call specs filled, the kernels called on contiguous tensors)
// and then their double-precision references (tests and `tileops bench` check against them),
// the varlen one also sampled by query rows for the cases too large for the whole reference.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <variant>

#include "kernels/attention/attention_impls.h"
#if TILEOPS_WITH_CUDA
#include "kernels/attention/attention_varlen_cuda_impls.h"
#endif
#include "ops/write_contiguous.h"
#include "tileops/base/reference.h"
#include "tileops/core/value.h"
#include "tileops/ops/attention.h"

namespace tileops {

// ---- GroupedQueryAttentionVarlenFwdOp ---------------------------------------------------------

std::vector<ImplementationInfo> gen::GroupedQueryAttentionVarlenFwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table;
  table.push_back(implementation<AttentionVarlenCpu>("attention_varlen_cpu", "AttentionVarlenCpu"));
#if TILEOPS_WITH_CUDA
  table.push_back(
      implementation<AttentionVarlenCuda>("attention_varlen_cuda", "AttentionVarlenCuda"));
#endif
  return table;
}

AttentionScores GroupedQueryAttentionVarlenFwdOp::scores_for(std::int64_t head_dim) const {
  AttentionScores scores;
  scores.softmax_scale = static_cast<float>(
      params().softmax_scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim))));
  scores.causal = params().causal;
  scores.window_left = params().window_left;
  scores.softcap = static_cast<float>(params().softcap);
  return scores;
}

void GroupedQueryAttentionVarlenFwdOp::forward(const Indices& call, const Tensor& q,
                                               const Tensor& k, const Tensor& v,
                                               const Tensor& cu_seqlens_q,
                                               const Tensor& cu_seqlens_k, const Tensor& out,
                                               const Tensor& lse) {
  AttentionVarlenCall spec;
  spec.device = call.device;
  spec.dtype = call.T;
  spec.heads_q = call.Hq;
  spec.heads_kv = call.Hkv;
  spec.head_dim = call.D;
  const AttentionScores scores = scores_for(spec.head_dim);
  spec.causal = scores.causal;
  spec.windowed = scores.window_left >= 0;
  spec.softcapped = scores.softcap > 0.0f;
  auto& kernel = kernel_for<AttentionVarlenInterface>(spec);
  const Tensor q_c = q.contiguous();
  const Tensor k_c = k.contiguous();
  const Tensor v_c = v.contiguous();
  const Tensor cu_q = cu_seqlens_q.contiguous();
  const Tensor cu_k = cu_seqlens_k.contiguous();
  detail::write_contiguous(
      out, [&](const Tensor& o) { kernel.forward(q_c, k_c, v_c, cu_q, cu_k, o, lse, scores); });
}

TILEOPS_REGISTER_OP(GroupedQueryAttentionVarlenFwdOp)

// ---- KVCacheWriteFwdOp --------------------------------------------------------------------------

std::vector<ImplementationInfo> gen::KVCacheWriteFwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table;
  table.push_back(implementation<KVCacheWriteCpu>("kv_cache_write_cpu", "KVCacheWriteCpu"));
#if TILEOPS_WITH_CUDA
  table.push_back(implementation<KVCacheWriteCuda>("kv_cache_write_cuda", "KVCacheWriteCuda"));
#endif
  return table;
}

void KVCacheWriteFwdOp::forward(const Indices& call, const Tensor& key, const Tensor& value,
                                const Tensor& k_cache, const Tensor& v_cache,
                                const Tensor& slot_mapping) {
  KVCacheWriteCall spec;
  spec.device = call.device;
  spec.dtype = call.KV;
  spec.heads_kv = call.Hkv;
  spec.head_dim = call.D;
  spec.page_size = call.page_size;
  auto& kernel = kernel_for<KVCacheWriteInterface>(spec);
  // The caches are contiguous (declared so); key and value are often views of a fused
  // projection's output.
  kernel.forward(key.contiguous(), value.contiguous(), k_cache, v_cache, slot_mapping.contiguous());
}

TILEOPS_REGISTER_OP(KVCacheWriteFwdOp)

// ---- AttentionMergeStatesFwdOp ------------------------------------------------------------------

std::vector<ImplementationInfo> gen::AttentionMergeStatesFwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table;
  table.push_back(implementation<AttentionMergeStatesCpu>("attention_merge_states_cpu",
                                                          "AttentionMergeStatesCpu"));
#if TILEOPS_WITH_CUDA
  table.push_back(implementation<AttentionMergeStatesCuda>("attention_merge_states_cuda",
                                                           "AttentionMergeStatesCuda"));
#endif
  return table;
}

void AttentionMergeStatesFwdOp::forward(const Indices& call, const Tensor& out_a,
                                        const Tensor& lse_a, const Tensor& out_b,
                                        const Tensor& lse_b, const Tensor& out, const Tensor& lse) {
  AttentionMergeCall spec;
  spec.device = call.device;
  spec.dtype = call.X;
  spec.heads = call.H;
  spec.head_dim = call.D;
  auto& kernel = kernel_for<AttentionMergeInterface>(spec);
  const Tensor a = out_a.contiguous();
  const Tensor b = out_b.contiguous();
  const Tensor la = lse_a.contiguous();
  const Tensor lb = lse_b.contiguous();
  detail::write_contiguous(out, [&](const Tensor& o) { kernel.forward(a, la, b, lb, o, lse); });
}

TILEOPS_REGISTER_OP(AttentionMergeStatesFwdOp)

// ---- the double-precision references ----------------------------------------------------------

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

std::vector<std::int64_t> cu_entries(const Tensor& cu, std::int64_t total, const char* name) {
  const std::vector<double> values = cu.to(Device::cpu()).to_vector();
  std::vector<std::int64_t> out(values.begin(), values.end());
  for (std::size_t e = 0; e < out.size(); ++e) {
    if ((e == 0 && out[0] != 0) || (e > 0 && out[e] < out[e - 1]) || out[e] > total ||
        (e + 1 == out.size() && out[e] != total)) {
      throw SignatureError(
          fmt::format("attention reference: {}[{}] = {} is not a valid offset", name, e, out[e]));
    }
  }
  return out;
}

/// The inputs of the varlen reference: parameters, offsets, and the keys and values of each
/// sequence as doubles, read on first use (a sampled check reads only its rows' sequences).
class VarlenReference {
 public:
  VarlenReference(std::span<const Tensor> inputs, const ParamMap& params)
      : q_(inputs[0]), k_(inputs[1].to(Device::cpu())), v_(inputs[2].to(Device::cpu())) {
    heads_q_ = q_.size(1);
    heads_kv_ = k_.size(1);
    dim_ = q_.size(2);
    cu_q_ = cu_entries(inputs[3], q_.size(0), "cu_seqlens_q");
    cu_k_ = cu_entries(inputs[4], k_.size(0), "cu_seqlens_k");
    causal_ = std::get<bool>(params.at("causal"));
    const Value& scale = params.at("softmax_scale");
    scale_ = std::holds_alternative<double>(scale) ? std::get<double>(scale)
                                                   : 1.0 / std::sqrt(static_cast<double>(dim_));
    window_left_ = std::get<std::int64_t>(params.at("window_left"));
    softcap_ = std::get<double>(params.at("softcap"));
  }

  std::int64_t heads_q() const { return heads_q_; }
  std::int64_t dim() const { return dim_; }

  /// Query token t (its row of q as doubles, [heads_q, dim]) over its sequence's keys: writes
  /// out [heads_q, dim] and lse [heads_q].
  void row(std::int64_t t, const std::vector<double>& q_row, double* out, double* lse) {
    const auto b = static_cast<std::size_t>(std::upper_bound(cu_q_.begin(), cu_q_.end(), t) -
                                            cu_q_.begin() - 1);
    const std::int64_t sq = cu_q_[b + 1] - cu_q_[b];
    const std::int64_t sk = cu_k_[b + 1] - cu_k_[b];
    const std::int64_t i = t - cu_q_[b];
    const auto& [keys, values] = sequence(b);
    std::vector<double> s(static_cast<std::size_t>(sk));
    for (std::int64_t h = 0; h < heads_q_; ++h) {
      const std::int64_t g = h / (heads_q_ / heads_kv_);
      double m = kNegInf;
      for (std::int64_t j = 0; j < sk; ++j) {
        const bool visible =
            (!causal_ || j <= i + sk - sq) && (window_left_ < 0 || j >= i + sk - sq - window_left_);
        if (!visible) {
          s[j] = kNegInf;
          continue;
        }
        double dot = 0;
        for (std::int64_t d = 0; d < dim_; ++d)
          dot += q_row[h * dim_ + d] * keys[(j * heads_kv_ + g) * dim_ + d];
        double score = scale_ * dot;
        if (softcap_ > 0) score = softcap_ * std::tanh(score / softcap_);
        s[j] = score;
        m = std::max(m, score);
      }
      double* o = out + h * dim_;
      std::fill_n(o, dim_, 0.0);
      if (m == kNegInf) {
        lse[h] = kNegInf;
        continue;
      }
      double sum = 0;
      for (std::int64_t j = 0; j < sk; ++j) sum += std::exp(s[j] - m);
      lse[h] = m + std::log(sum);
      for (std::int64_t j = 0; j < sk; ++j) {
        const double p = std::exp(s[j] - lse[h]);
        if (p == 0) continue;
        for (std::int64_t d = 0; d < dim_; ++d) o[d] += p * values[(j * heads_kv_ + g) * dim_ + d];
      }
    }
  }

  /// out [rows, heads_q, dim] and lse [heads_q, rows] of the query tokens `rows`.
  std::vector<Tensor> rows(std::span<const std::int64_t> rows) {
    const auto n = static_cast<std::int64_t>(rows.size());
    Tensor out = Tensor::empty({n, heads_q_, dim_}, DType::float32);
    Tensor lse = Tensor::empty({heads_q_, n}, DType::float32);
    std::vector<double> o(static_cast<std::size_t>(heads_q_ * dim_));
    std::vector<double> l(static_cast<std::size_t>(heads_q_));
    for (std::int64_t r = 0; r < n; ++r) {
      const std::int64_t t = rows[r];
      row(t, q_.slice(0, t, t + 1).to(Device::cpu()).to_vector(), o.data(), l.data());
      for (std::int64_t e = 0; e < heads_q_ * dim_; ++e)
        out.data<float>()[r * heads_q_ * dim_ + e] = static_cast<float>(o[e]);
      for (std::int64_t h = 0; h < heads_q_; ++h)
        lse.data<float>()[h * n + r] = static_cast<float>(l[h]);
    }
    return {out, lse};
  }

 private:
  using Rows = std::pair<std::vector<double>, std::vector<double>>;
  const Rows& sequence(std::size_t b) {
    auto [it, inserted] = sequences_.try_emplace(b);
    if (inserted) {
      it->second.first = k_.slice(0, cu_k_[b], cu_k_[b + 1]).to_vector();
      it->second.second = v_.slice(0, cu_k_[b], cu_k_[b + 1]).to_vector();
    }
    return it->second;
  }

  Tensor q_, k_, v_;
  std::int64_t heads_q_ = 0, heads_kv_ = 1, dim_ = 0;
  std::vector<std::int64_t> cu_q_, cu_k_;
  bool causal_ = true;
  double scale_ = 1.0;
  std::int64_t window_left_ = -1;
  double softcap_ = 0.0;
  std::map<std::size_t, Rows> sequences_;
};

std::vector<Tensor> attention_varlen_reference(std::span<const Tensor> inputs,
                                               const ParamMap& params) {
  VarlenReference reference(inputs, params);
  std::vector<std::int64_t> all(static_cast<std::size_t>(inputs[0].size(0)));
  for (std::size_t t = 0; t < all.size(); ++t) all[t] = static_cast<std::int64_t>(t);
  return reference.rows(all);
}

std::vector<Tensor> attention_varlen_sampled_reference(std::span<const Tensor> inputs,
                                                       const ParamMap& params,
                                                       std::span<const std::int64_t> rows) {
  return VarlenReference(inputs, params).rows(rows);
}

std::vector<Tensor> kv_cache_write_reference(std::span<const Tensor> inputs, const ParamMap&) {
  const std::vector<double> key = inputs[0].to(Device::cpu()).to_vector();
  const std::vector<double> value = inputs[1].to(Device::cpu()).to_vector();
  Tensor k_cache = inputs[2].to(Device::cpu()).to(DType::float32).contiguous().clone();
  Tensor v_cache = inputs[3].to(Device::cpu()).to(DType::float32).contiguous().clone();
  const std::vector<double> slots = inputs[4].to(Device::cpu()).to_vector();
  const std::int64_t row = inputs[0].size(1) * inputs[0].size(2);
  const std::int64_t capacity = k_cache.size(0) * k_cache.size(1);
  for (std::size_t t = 0; t < slots.size(); ++t) {
    const auto slot = static_cast<std::int64_t>(slots[t]);
    if (slot < 0) continue;
    if (slot >= capacity) {
      throw SignatureError(
          fmt::format("KVCacheWriteFwdOp reference: slot_mapping[{}] = {} is "
                      "outside the cache's {} slots",
                      t, slot, capacity));
    }
    for (std::int64_t e = 0; e < row; ++e) {
      const auto src = static_cast<std::size_t>(static_cast<std::int64_t>(t) * row + e);
      k_cache.data<float>()[slot * row + e] = static_cast<float>(key[src]);
      v_cache.data<float>()[slot * row + e] = static_cast<float>(value[src]);
    }
  }
  return {k_cache, v_cache};
}

std::vector<Tensor> attention_merge_reference(std::span<const Tensor> inputs, const ParamMap&) {
  const std::vector<double> a = inputs[0].to(Device::cpu()).to_vector();
  const std::vector<double> la = inputs[1].to(Device::cpu()).to_vector();
  const std::vector<double> b = inputs[2].to(Device::cpu()).to_vector();
  const std::vector<double> lb = inputs[3].to(Device::cpu()).to_vector();
  const std::int64_t tokens = inputs[0].size(0);
  const std::int64_t heads = inputs[0].size(1);
  const std::int64_t dim = inputs[0].size(2);
  Tensor out = Tensor::empty({tokens, heads, dim}, DType::float32);
  Tensor lse = Tensor::empty({heads, tokens}, DType::float32);
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t at = h * tokens + t;
      const double m = std::max(la[at], lb[at]);
      const double merged =
          m == kNegInf ? kNegInf : m + std::log(std::exp(la[at] - m) + std::exp(lb[at] - m));
      lse.data<float>()[at] = static_cast<float>(merged);
      const double fa = m == kNegInf ? 0.0 : std::exp(la[at] - merged);
      const double fb = m == kNegInf ? 0.0 : std::exp(lb[at] - merged);
      for (std::int64_t d = 0; d < dim; ++d) {
        const std::int64_t e = (t * heads + h) * dim + d;
        out.data<float>()[e] = static_cast<float>(a[e] * fa + b[e] * fb);
      }
    }
  }
  return {out, lse};
}

}  // namespace

TILEOPS_REGISTER_REFERENCE(GroupedQueryAttentionVarlenFwdOp, attention_varlen_reference)
// The query tokens index out along dimension 0 and lse [Hq, Tq] along dimension 1.
TILEOPS_REGISTER_SAMPLED_REFERENCE(GroupedQueryAttentionVarlenFwdOp,
                                   attention_varlen_sampled_reference, {0, 1})
TILEOPS_REGISTER_REFERENCE(KVCacheWriteFwdOp, kv_cache_write_reference)
TILEOPS_REGISTER_REFERENCE(AttentionMergeStatesFwdOp, attention_merge_reference)

}  // namespace tileops
