// Internal: the double-precision pieces the MoE references share (whole-tensor references in
// moe_reference.cpp, row-sampled ones in moe_sampled_reference.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/moe/moe_routing_order.h"
#include "tileops/core/value.h"
#include "tileops/kernel/moe.h"

namespace tileops::moe_reference {

inline double silu(double g) {
  return g / (1.0 + std::exp(-g));
}

inline double gelu_tanh(double g) {
  const double sqrt_2_over_pi = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * g * (1.0 + std::tanh(sqrt_2_over_pi * (g + 0.044715 * g * g * g)));
}

/// The parameters of routing (MoETopKRoutingFwdOp's, manifest/moe.yaml).
struct RouteRule {
  std::int64_t top_k = 1;
  MoEScoring scoring = MoEScoring::softmax;
  bool renormalize = false;
  double scale = 1.0;
  std::int64_t n_group = 1;
  std::int64_t topk_group = 1;
};

/// The routing parameters of MoETopKRoutingFwdOp (and the MoE layers, which share their names).
inline RouteRule route_rule(const ParamMap& p) {
  return {.top_k = std::get<std::int64_t>(p.at("top_k")),
          .scoring = moe_scoring(std::get<std::string>(p.at("scoring"))),
          .renormalize = std::get<bool>(p.at("renormalize")),
          .scale = std::get<double>(p.at("routed_scaling_factor")),
          .n_group = std::get<std::int64_t>(p.at("n_group")),
          .topk_group = std::get<std::int64_t>(p.at("topk_group"))};
}

/// Whether each expert's group is among the rule's kept groups, from the choice scores `c`.
/// A group scores the sum of its two largest c with a bias, its largest c without; equal
/// scores keep the smaller group index.
inline std::vector<bool> kept_experts(const std::vector<double>& c, bool has_bias,
                                      const RouteRule& rule) {
  const auto experts = static_cast<std::int64_t>(c.size());
  std::vector<bool> kept(c.size(), true);
  if (rule.n_group == 1) return kept;
  const std::int64_t size = experts / rule.n_group;
  std::vector<double> score(static_cast<std::size_t>(rule.n_group));
  for (std::int64_t g = 0; g < rule.n_group; ++g) {
    std::vector<double> members(c.begin() + g * size, c.begin() + (g + 1) * size);
    std::sort(members.begin(), members.end(), moe_routing::ranks_before<double>);
    score[g] = has_bias ? members[0] + members[1] : members[0];
  }
  std::vector<std::int64_t> groups(static_cast<std::size_t>(rule.n_group));
  std::iota(groups.begin(), groups.end(), 0);
  std::stable_sort(groups.begin(), groups.end(), [&](std::int64_t a, std::int64_t b) {
    return moe_routing::ranks_before(score[a], score[b]);
  });
  std::vector<bool> group_kept(static_cast<std::size_t>(rule.n_group), false);
  for (std::int64_t i = 0; i < rule.topk_group; ++i) group_kept[groups[i]] = true;
  for (std::int64_t e = 0; e < experts; ++e) kept[e] = group_kept[e / size];
  return kept;
}

/// The routing of one token: its top_k weights and expert ids from its `experts` logits.
/// `bias` (empty or one per expert) shifts the choice, not the weights; equal choice scores
/// keep the smaller id first.
inline void route_token(const double* logits, const std::vector<double>& bias, std::int64_t experts,
                        const RouteRule& rule, double* weights, std::int64_t* ids) {
  std::vector<double> s(static_cast<std::size_t>(experts));
  if (rule.scoring == MoEScoring::sigmoid) {
    for (std::int64_t e = 0; e < experts; ++e) s[e] = 1.0 / (1.0 + std::exp(-logits[e]));
  } else {
    const double peak = *std::max_element(logits, logits + experts);
    double sum = 0;
    for (std::int64_t e = 0; e < experts; ++e) sum += s[e] = std::exp(logits[e] - peak);
    for (auto& v : s) v /= sum;
  }
  std::vector<double> c(static_cast<std::size_t>(experts));
  for (std::int64_t e = 0; e < experts; ++e) c[e] = s[e] + (bias.empty() ? 0.0 : bias[e]);
  const std::vector<bool> kept = kept_experts(c, !bias.empty(), rule);
  std::vector<std::int64_t> order;
  for (std::int64_t e = 0; e < experts; ++e) {
    if (kept[e]) order.push_back(e);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return moe_routing::ranks_before(c[a], c[b]);
  });
  double total = 0;
  for (std::int64_t k = 0; k < rule.top_k; ++k) total += s[order[k]];
  for (std::int64_t k = 0; k < rule.top_k; ++k) {
    weights[k] = s[order[k]] / (rule.renormalize ? total : 1.0) * rule.scale;
    ids[k] = order[k];
  }
}

/// One row of a grouped GEMM with its expert's weights `b` [n, k]: `n` accumulators, then the
/// activation ("none", "silu_and_mul", "gelu_and_mul") halving them when gated.
inline std::vector<double> gemm_row(const double* a, const double* b, std::int64_t n,
                                    std::int64_t k, const std::string& act) {
  std::vector<double> acc(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j) {
    double s = 0;
    for (std::int64_t i = 0; i < k; ++i) s += a[i] * b[j * k + i];
    acc[j] = s;
  }
  if (act == "none") return acc;
  const std::int64_t n_out = n / 2;
  std::vector<double> c(static_cast<std::size_t>(n_out));
  for (std::int64_t j = 0; j < n_out; ++j) {
    c[j] = (act == "silu_and_mul" ? silu(acc[j]) : gelu_tanh(acc[j])) * acc[j + n_out];
  }
  return c;
}

}  // namespace tileops::moe_reference
