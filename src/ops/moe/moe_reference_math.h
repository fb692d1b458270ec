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

namespace tileops::moe_reference {

inline double silu(double g) {
  return g / (1.0 + std::exp(-g));
}

inline double gelu_tanh(double g) {
  const double sqrt_2_over_pi = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * g * (1.0 + std::tanh(sqrt_2_over_pi * (g + 0.044715 * g * g * g)));
}

/// The routing of one token: its top_k weights and expert ids from its `experts` logits.
/// `bias` (empty or one per expert) shifts the choice, not the weights; equal choice scores
/// keep the smaller id first.
inline void route_token(const double* logits, const std::vector<double>& bias, std::int64_t experts,
                        std::int64_t top_k, bool sigmoid, bool renormalize, double scale,
                        double* weights, std::int64_t* ids) {
  std::vector<double> s(static_cast<std::size_t>(experts));
  if (sigmoid) {
    for (std::int64_t e = 0; e < experts; ++e) s[e] = 1.0 / (1.0 + std::exp(-logits[e]));
  } else {
    const double peak = *std::max_element(logits, logits + experts);
    double sum = 0;
    for (std::int64_t e = 0; e < experts; ++e) sum += s[e] = std::exp(logits[e] - peak);
    for (auto& v : s) v /= sum;
  }
  std::vector<double> c(static_cast<std::size_t>(experts));
  for (std::int64_t e = 0; e < experts; ++e) c[e] = s[e] + (bias.empty() ? 0.0 : bias[e]);
  std::vector<std::int64_t> order(static_cast<std::size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return c[a] > c[b]; });
  double total = 0;
  for (std::int64_t k = 0; k < top_k; ++k) total += s[order[k]];
  for (std::int64_t k = 0; k < top_k; ++k) {
    weights[k] = s[order[k]] / (renormalize ? total : 1.0) * scale;
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
