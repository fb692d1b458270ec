// The per-element bound of the FP8 expert composites' tests: for each output element, an interval
// that the op's value and the double-precision reference's value both lie in, derived stage by
// stage as the composite hands tensors over (docs/design/moe.md, "References round where the ops
// hand over tensors"). The comparison's tolerance is the interval's width.
//
// With u = 2^-24, per stage (the same x rows and e4m3 weights reach the op and the reference):
//  - quantize x: the op's q and scales equal its reference's bit for bit (tested in
//    test_per_token_group_quant.cpp), so both GEMMs read the same dequantized x.
//  - gate_up: for gate and up accumulators g, v (exact sums over H terms, absolute sums A_g, A_v),
//    the op's float32 value is within E(A) = 1.01 (H + 3) u A + H 2^-149 (the reference's own
//    double error included), and act(g) v within E_act = 1.2 E_g (A_v + E_v) + (A_g + E_g) E_v +
//    16 u (A_g + E_g)(A_v + E_v); both are derived in test_moe_grouped_gemm_fp8.cpp's head
//    comment. h = bf16(that): rounding is monotone, so the op's h and the reference's lie in
//    [bf16(p - E_act), bf16(p + E_act)] with p = act(g) v in double.
//  - quantize h: a group's amax lies between the largest lower and the largest upper |h| bound,
//    the scale float32(max(amax, eps) / 448) is monotone in amax, and q = e4m3(clamp(h / s)) is
//    monotone in h / s, so q over the box of h and s is bounded by its corners (the float32
//    quotient widened by one float32 step either side, for the double rounding of h / s here);
//    the dequantized q s by the corners of [q] x [s]. Where no rounding boundary falls inside the
//    box (almost every element) the interval is one value: an e4m3 flip is allowed only where a
//    float32 error could cause it.
//  - down: on interval inputs [c - r, c + r], sum_j c_j w_j +- (sum_j r_j |w_j| + E(A') + the
//    double error of the centre), A' = sum_j max|x_j| |w_j|, K = F; y_row = bf16 of it.
//  - post-permute: sum_k w_k y_k over intervals (w_k an interval when the routing weights are the
//    op's own, see routing_weight_error), plus the float32 sum's 1.01 (K + 1) u sum_k |w_k y_k|;
//    then bf16.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/moe/moe_reference_math.h"
#include "ops/quant/e4m3_reference.h"
#include "tileops/core/tensor.h"

namespace tileops::fp8_moe_bound {

constexpr double kU = 0x1p-24;
constexpr std::int64_t kBlock = 128;
constexpr double kEps = 1e-10;  // PerTokenGroupQuantFP8FwdOp's default, as the composite uses it

struct Interval {
  double lo = 0;
  double hi = 0;
  double width() const { return hi - lo; }
  bool contains(double v) const { return lo <= v && v <= hi; }
};

/// v rounded to float32, then to bfloat16 (nearest, ties to even): how both the op (a float32
/// value) and the reference (round_to) hand over a bfloat16 tensor; monotone.
inline double to_bf16(double v) {
  auto bits = std::bit_cast<std::uint32_t>(static_cast<float>(v));
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return std::bit_cast<float>(bits & 0xffff0000u);
}

/// v (|v| <= 448) to the nearest e4m3fn value, ties to the even code.
inline double to_e4m3(double v) {
  static const std::vector<double> magnitudes = [] {
    std::vector<double> m;
    for (int c = 0; c < 127; ++c) m.push_back(reference_fp8::e4m3_value(c));
    return m;
  }();
  const double a = std::fabs(v);
  const auto above = std::lower_bound(magnitudes.begin(), magnitudes.end(), a);
  auto code = above - magnitudes.begin();
  if (above != magnitudes.begin() && (above == magnitudes.end() || *above != a)) {
    const auto below = code - 1;
    const double down = a - magnitudes[below];
    const double up = above == magnitudes.end() ? down + 1 : *above - a;
    if (down < up || (down == up && below % 2 == 0)) code = below;
  }
  return std::copysign(magnitudes[code], v);
}

/// An e4m3 tensor's values times their 128 x 128 block scales, [E, N, K] in double.
inline std::vector<double> dequantized(const Tensor& w, const Tensor& scales) {
  const Tensor host = w.contiguous();
  const auto* codes = static_cast<const std::uint8_t*>(host.data_ptr());
  const std::vector<double> s = scales.to_vector();
  const std::int64_t n = w.size(1);
  const std::int64_t k = w.size(2);
  const std::int64_t nb = (n + kBlock - 1) / kBlock;
  const std::int64_t kb = (k + kBlock - 1) / kBlock;
  std::vector<double> v(static_cast<std::size_t>(w.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto flat = static_cast<std::int64_t>(i);
    const std::int64_t e = flat / (n * k);
    const std::int64_t j = flat / k % n;
    const std::int64_t c = flat % k;
    v[i] = reference_fp8::e4m3_value(codes[i]) * s[(e * nb + j / kBlock) * kb + c / kBlock];
  }
  return v;
}

/// The float32 accumulation error of K terms of absolute sum A (see the head comment).
inline double accumulation(std::int64_t k, double abs) {
  return 1.01 * static_cast<double>(k + 3) * kU * abs + static_cast<double>(k) * 0x1p-149;
}

/// One row of a GEMM on interval inputs x (length k) with weights w (row j at w + j * k), n rows.
inline std::vector<Interval> gemm_rows(const std::vector<Interval>& x, const double* w,
                                       std::int64_t n, std::int64_t k) {
  std::vector<Interval> out(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j) {
    double centre = 0;
    double radius = 0;
    double abs = 0;
    for (std::int64_t i = 0; i < k; ++i) {
      const double wi = w[j * k + i];
      centre += (x[i].lo + x[i].hi) / 2 * wi;
      radius += (x[i].hi - x[i].lo) / 2 * std::fabs(wi);
      abs += std::max(std::fabs(x[i].lo), std::fabs(x[i].hi)) * std::fabs(wi);
    }
    const double err = radius + accumulation(k, abs) + static_cast<double>(k + 2) * 0x1p-53 * abs;
    out[j] = {centre - err, centre + err};
  }
  return out;
}

/// The values a per-token-group quantization (1 x 128, dequantized as q * scale) can hand over
/// for a row whose values lie in `h`.
inline std::vector<Interval> quantized(const std::vector<Interval>& h) {
  std::vector<Interval> out(h.size());
  const auto scale = [](double amax) {
    return static_cast<double>(static_cast<float>(std::max(amax, kEps) / 448));
  };
  const auto q = [](double v, double s, double direction) {
    const float f = std::nextafter(static_cast<float>(v / s), static_cast<float>(direction));
    return to_e4m3(std::clamp(static_cast<double>(f), -448.0, 448.0));
  };
  for (std::size_t g = 0; g < h.size(); g += kBlock) {
    const std::size_t end = std::min(h.size(), g + kBlock);
    double amax_lo = 0;
    double amax_hi = 0;
    for (std::size_t j = g; j < end; ++j) {
      const bool spans_zero = h[j].lo <= 0 && h[j].hi >= 0;
      amax_lo =
          std::max(amax_lo, spans_zero ? 0.0 : std::min(std::fabs(h[j].lo), std::fabs(h[j].hi)));
      amax_hi = std::max(amax_hi, std::max(std::fabs(h[j].lo), std::fabs(h[j].hi)));
    }
    const double s_lo = scale(amax_lo);
    const double s_hi = scale(amax_hi);
    for (std::size_t j = g; j < end; ++j) {
      double q_lo = 448;
      double q_hi = -448;
      for (const double v : {h[j].lo, h[j].hi}) {
        for (const double s : {s_lo, s_hi}) {
          q_lo = std::min(q_lo, q(v, s, -INFINITY));
          q_hi = std::max(q_hi, q(v, s, INFINITY));
        }
      }
      out[j] = {std::min({q_lo * s_lo, q_lo * s_hi}), std::max({q_hi * s_lo, q_hi * s_hi})};
    }
  }
  return out;
}

/// The FP8 experts' weights, dequantized, with their sizes.
struct Experts {
  std::vector<double> w13;  // [E, 2F, H]
  std::vector<double> w2;   // [E, H, F]
  std::int64_t hidden = 0;
  std::int64_t f = 0;
  std::string act;
  Experts(const Tensor& w13_fp8, const Tensor& w13_scales, const Tensor& w2_fp8,
          const Tensor& w2_scales, std::string activation)
      : w13(dequantized(w13_fp8, w13_scales)),
        w2(dequantized(w2_fp8, w2_scales)),
        hidden(w2_fp8.size(1)),
        f(w2_fp8.size(2)),
        act(std::move(activation)) {}
};

/// The interval of each bfloat16 output of the FP8 expert MLP for row `xq` (x quantized and
/// dequantized, as both the op and the reference compute it) and expert e.
inline std::vector<Interval> mlp_row(const std::vector<double>& xq, std::int64_t e,
                                     const Experts& w) {
  const std::int64_t hidden = w.hidden;
  const std::int64_t f = w.f;
  const double* w13 = w.w13.data() + e * 2 * f * hidden;
  std::vector<Interval> h(static_cast<std::size_t>(f));
  for (std::int64_t j = 0; j < f; ++j) {
    double g = 0, v = 0, ag = 0, av = 0;
    for (std::int64_t i = 0; i < hidden; ++i) {
      g += xq[i] * w13[j * hidden + i];
      v += xq[i] * w13[(j + f) * hidden + i];
      ag += std::fabs(xq[i] * w13[j * hidden + i]);
      av += std::fabs(xq[i] * w13[(j + f) * hidden + i]);
    }
    const double eg = accumulation(hidden, ag);
    const double ev = accumulation(hidden, av);
    const double e_act = 1.2 * eg * (av + ev) + (ag + eg) * ev + 16 * kU * (ag + eg) * (av + ev);
    const double act =
        w.act == "silu_and_mul" ? moe_reference::silu(g) : moe_reference::gelu_tanh(g);
    const double p = act * v;
    h[j] = {to_bf16(p - e_act), to_bf16(p + e_act)};
  }
  std::vector<Interval> y = gemm_rows(quantized(h), w.w2.data() + e * hidden * f, hidden, f);
  for (auto& i : y) i = {to_bf16(i.lo), to_bf16(i.hi)};
  return y;
}

/// sum_k w_k y_k, the float32 sum's error, rounded to bfloat16: the post-permute's interval per
/// hidden column. `weights[k]` are intervals; pairs without a row are left out by the caller.
inline std::vector<Interval> combine(const std::vector<Interval>& weights,
                                     const std::vector<std::vector<Interval>>& rows,
                                     std::int64_t hidden) {
  std::vector<Interval> y(static_cast<std::size_t>(hidden));
  for (std::int64_t c = 0; c < hidden; ++c) {
    double lo = 0, hi = 0, abs = 0;
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const Interval& w = weights[k];
      const Interval& r = rows[k][c];
      const double corners[] = {w.lo * r.lo, w.lo * r.hi, w.hi * r.lo, w.hi * r.hi};
      lo += *std::min_element(std::begin(corners), std::end(corners));
      hi += *std::max_element(std::begin(corners), std::end(corners));
      abs += std::max({std::fabs(corners[0]), std::fabs(corners[1]), std::fabs(corners[2]),
                       std::fabs(corners[3])});
    }
    const double err = 1.01 * static_cast<double>(rows.size() + 1) * kU * abs + 0x1p-140;
    y[c] = {to_bf16(lo - err), to_bf16(hi + err)};
  }
  return y;
}

}  // namespace tileops::fp8_moe_bound
