// The double-precision references of the attention ops (tests and `tileops bench` check against
// them): the varlen and the paged attention (one reference over any key layout, also sampled by
// query rows for the cases too large for the whole reference), the KV-cache write and the merge.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <span>
#include <utility>
#include <variant>
#include <vector>

#include "tileops/base/reference.h"
#include "tileops/core/value.h"
#include "tileops/ops/attention.h"

namespace tileops {

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

/// The attention reference over any key layout: parameters, query offsets, and the keys and
/// values of each sequence as doubles ([sk, heads_kv, dim] each), read on first use through
/// `load` (a sampled check reads only its rows' sequences).
class AttentionReference {
 public:
  using Rows = std::pair<std::vector<double>, std::vector<double>>;
  using Load = std::function<Rows(std::size_t b)>;

  AttentionReference(const Tensor& q, const Tensor& cu_seqlens_q, std::int64_t heads_kv,
                     const ParamMap& params, Load load)
      : q_(q), heads_kv_(heads_kv), load_(std::move(load)) {
    heads_q_ = q_.size(1);
    dim_ = q_.size(2);
    cu_q_ = cu_entries(cu_seqlens_q, q_.size(0), "cu_seqlens_q");
    causal_ = std::get<bool>(params.at("causal"));
    const Value& scale = params.at("softmax_scale");
    scale_ = std::holds_alternative<double>(scale) ? std::get<double>(scale)
                                                   : 1.0 / std::sqrt(static_cast<double>(dim_));
    window_left_ = std::get<std::int64_t>(params.at("window_left"));
    softcap_ = std::get<double>(params.at("softcap"));
  }

  /// Query token t (its row of q as doubles, [heads_q, dim]) over its sequence's keys: writes
  /// out [heads_q, dim] and lse [heads_q].
  void row(std::int64_t t, const std::vector<double>& q_row, double* out, double* lse) {
    const auto b = static_cast<std::size_t>(std::upper_bound(cu_q_.begin(), cu_q_.end(), t) -
                                            cu_q_.begin() - 1);
    const std::int64_t sq = cu_q_[b + 1] - cu_q_[b];
    const std::int64_t i = t - cu_q_[b];
    const auto& [keys, values] = sequence(b);
    const auto sk = static_cast<std::int64_t>(keys.size()) / (heads_kv_ * dim_);
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

  /// Every query token's rows.
  std::vector<Tensor> all() {
    std::vector<std::int64_t> tokens(static_cast<std::size_t>(q_.size(0)));
    for (std::size_t t = 0; t < tokens.size(); ++t) tokens[t] = static_cast<std::int64_t>(t);
    return rows(tokens);
  }

 private:
  const Rows& sequence(std::size_t b) {
    auto [it, inserted] = sequences_.try_emplace(b);
    if (inserted) it->second = load_(b);
    return it->second;
  }

  Tensor q_;
  std::int64_t heads_q_ = 0, heads_kv_ = 1, dim_ = 0;
  Load load_;
  std::vector<std::int64_t> cu_q_;
  bool causal_ = true;
  double scale_ = 1.0;
  std::int64_t window_left_ = -1;
  double softcap_ = 0.0;
  std::map<std::size_t, Rows> sequences_;
};

/// The varlen reference: sequence b's keys are rows cu_seqlens_k[b] .. cu_seqlens_k[b + 1] of k.
AttentionReference varlen_reference(std::span<const Tensor> inputs, const ParamMap& params) {
  const Tensor k = inputs[1].to(Device::cpu());
  const Tensor v = inputs[2].to(Device::cpu());
  const std::vector<std::int64_t> cu_k = cu_entries(inputs[4], k.size(0), "cu_seqlens_k");
  return AttentionReference(inputs[0], inputs[3], k.size(1), params, [k, v, cu_k](std::size_t b) {
    return AttentionReference::Rows{k.slice(0, cu_k[b], cu_k[b + 1]).to_vector(),
                                    v.slice(0, cu_k[b], cu_k[b + 1]).to_vector()};
  });
}

/// The paged reference: key j of sequence b is row j % page_size of page block_table[b][j /
/// page_size]; seqused_k and the used block ids are checked (SignatureError).
AttentionReference paged_reference(std::span<const Tensor> inputs, const ParamMap& params) {
  const Tensor k_cache = inputs[1].to(Device::cpu());
  const Tensor v_cache = inputs[2].to(Device::cpu());
  const std::vector<double> used = inputs[4].to(Device::cpu()).to_vector();
  const std::vector<double> table = inputs[5].to(Device::cpu()).to_vector();
  const std::int64_t blocks = k_cache.size(0);
  const std::int64_t page = k_cache.size(1);
  const std::int64_t width = inputs[5].size(1);
  for (std::size_t b = 0; b < used.size(); ++b) {
    const auto sk = static_cast<std::int64_t>(used[b]);
    if (sk < 0 || sk > width * page) {
      throw SignatureError(fmt::format(
          "GroupedQueryAttentionPagedFwdOp reference: seqused_k[{}] = {} is outside [0, {}]", b, sk,
          width * page));
    }
    for (std::int64_t p = 0; p * page < sk; ++p) {
      const double id = table[b * static_cast<std::size_t>(width) + static_cast<std::size_t>(p)];
      if (id < 0 || id >= static_cast<double>(blocks)) {
        throw SignatureError(fmt::format(
            "GroupedQueryAttentionPagedFwdOp reference: block_table[{}][{}] = {} is not a block", b,
            p, id));
      }
    }
  }
  return AttentionReference(
      inputs[0], inputs[3], k_cache.size(2), params,
      [k_cache, v_cache, used, table, page, width](std::size_t b) {
        const auto sk = static_cast<std::int64_t>(used[b]);
        const std::int64_t row = k_cache.size(2) * k_cache.size(3);
        AttentionReference::Rows rows;
        for (std::int64_t p = 0; p * page < sk; ++p) {
          const auto id = static_cast<std::int64_t>(
              table[b * static_cast<std::size_t>(width) + static_cast<std::size_t>(p)]);
          const std::int64_t n = std::min(page, sk - p * page) * row;  // the page's used rows
          const std::vector<double> k = k_cache.select(0, id).to_vector();
          const std::vector<double> v = v_cache.select(0, id).to_vector();
          rows.first.insert(rows.first.end(), k.begin(), k.begin() + n);
          rows.second.insert(rows.second.end(), v.begin(), v.begin() + n);
        }
        return rows;
      });
}

std::vector<Tensor> attention_varlen_reference(std::span<const Tensor> inputs,
                                               const ParamMap& params) {
  return varlen_reference(inputs, params).all();
}

std::vector<Tensor> attention_varlen_sampled_reference(std::span<const Tensor> inputs,
                                                       const ParamMap& params,
                                                       std::span<const std::int64_t> rows) {
  return varlen_reference(inputs, params).rows(rows);
}

std::vector<Tensor> attention_paged_reference(std::span<const Tensor> inputs,
                                              const ParamMap& params) {
  return paged_reference(inputs, params).all();
}

std::vector<Tensor> attention_paged_sampled_reference(std::span<const Tensor> inputs,
                                                      const ParamMap& params,
                                                      std::span<const std::int64_t> rows) {
  return paged_reference(inputs, params).rows(rows);
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
TILEOPS_REGISTER_REFERENCE(GroupedQueryAttentionPagedFwdOp, attention_paged_reference)
TILEOPS_REGISTER_SAMPLED_REFERENCE(GroupedQueryAttentionPagedFwdOp,
                                   attention_paged_sampled_reference, {0, 1})
TILEOPS_REGISTER_REFERENCE(KVCacheWriteFwdOp, kv_cache_write_reference)
TILEOPS_REGISTER_REFERENCE(AttentionMergeStatesFwdOp, attention_merge_reference)

}  // namespace tileops
