// The check of an FP8 block-scaled grouped GEMM's output on CUDA against the double-precision
// reference, element by element within the bound of tests/ops/grouped_gemm_fp8_tolerance.h
// (E_cuda): the problem's host operands (e4m3 codes, float scales, the layout), the reference
// row, and the check, shared by the kernel tests and the FP8 layer's stage-wise test.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ops/grouped_gemm_fp8_tolerance.h"
#include "ops/quant/e4m3_reference.h"
#include "tileops/core/tensor.h"

namespace tileops::fp8_gemm_check {

namespace tol = fp8_gemm_tolerance;

/// One problem: host operands (e4m3 codes, float scales) and the layout.
struct Problem {
  std::string name;
  std::int64_t E = 0, N = 0, K = 0, M = 0;
  std::int64_t max_m = 0;  // > 0: masked (M = E * max_m), `offsets` are the counts
  std::vector<std::int32_t> offsets;
  std::string act = "none";
  std::vector<std::uint8_t> a, b;
  std::vector<float> as, bs;

  std::int64_t kblocks() const { return K / 128; }
  std::int64_t nblocks() const { return (N + 127) / 128; }
  std::int64_t n_out() const { return act == "none" ? N : N / 2; }
  /// (first row, rows) of each expert, the offsets made safe as the kernel documents.
  std::vector<std::pair<std::int64_t, std::int64_t> > groups() const {
    std::vector<std::pair<std::int64_t, std::int64_t> > g;
    if (max_m > 0) {
      for (std::int64_t e = 0; e < E; ++e)
        g.emplace_back(e * max_m, std::clamp<std::int64_t>(offsets[e], 0, max_m));
      return g;
    }
    std::int64_t prev = 0;
    std::vector<std::int64_t> o;
    for (const std::int32_t v : offsets) {
      prev = std::max(prev, std::clamp<std::int64_t>(v, 0, M));
      o.push_back(prev);
    }
    for (std::int64_t e = 0; e < E; ++e) g.emplace_back(o[e], o[e + 1] - o[e]);
    return g;
  }
};

/// The problem of one MoEGroupedGemmFP8FwdOp call (contiguous layout) from its inputs, copied
/// to the host: a [M, K] e4m3, a_scales [M, K / 128], offsets [E + 1], b [E, N, K] e4m3,
/// b_scales [E, ceil(N / 128), K / 128].
inline Problem problem_of(std::string name, std::string act, const Tensor& a,
                          const Tensor& a_scales, const Tensor& offsets, const Tensor& b,
                          const Tensor& b_scales) {
  const auto host = [](const Tensor& t) { return t.to(Device::cpu()).contiguous(); };
  const auto bytes = [](const Tensor& t, auto& out) {
    out.resize(static_cast<std::size_t>(t.numel()));
    std::memcpy(out.data(), t.data_ptr(), static_cast<std::size_t>(t.nbytes()));
  };
  Problem p;
  p.name = std::move(name);
  p.act = std::move(act);
  p.E = b.size(0);
  p.N = b.size(1);
  p.K = b.size(2);
  p.M = a.size(0);
  bytes(host(a), p.a);
  bytes(host(a_scales), p.as);
  bytes(host(offsets), p.offsets);
  bytes(host(b), p.b);
  bytes(host(b_scales), p.bs);
  return p;
}

/// A random problem: codes of magnitude 2^-4 .. 7.5 with either sign (one in 16 a zero) and
/// scales 2^i [1, 2), i in [-8, 8], so that a scale applied to the wrong block misses by far more
/// than the bound. max_m > 0: the masked layout (M = E * max_m, `offsets` the counts).
inline Problem make_problem(std::string name, std::int64_t E, std::int64_t N, std::int64_t K,
                            std::int64_t M, std::vector<std::int32_t> offsets, std::string act,
                            std::int64_t max_m, unsigned seed) {
  Problem p;
  p.name = std::move(name);
  p.E = E;
  p.N = N;
  p.K = K;
  p.M = max_m > 0 ? E * max_m : M;
  p.max_m = max_m;
  p.offsets = std::move(offsets);
  p.act = std::move(act);
  std::mt19937 rng(seed);
  // Codes of magnitude 2^-4 .. 7.5 with either sign, and one in 16 a zero.
  const auto code = [&] {
    const unsigned r = rng();
    if ((r & 15u) == 0) return std::uint8_t{0};
    return static_cast<std::uint8_t>(((r >> 4) & 0x80u) | ((3 + (r >> 8) % 7) << 3) |
                                     ((r >> 16) & 7u));
  };
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(-8, 8);
  const auto scale = [&] { return static_cast<float>(std::ldexp(mantissa(rng), exponent(rng))); };
  p.a.resize(static_cast<std::size_t>(p.M * K));
  p.b.resize(static_cast<std::size_t>(E * N * K));
  p.as.resize(static_cast<std::size_t>(p.M * p.kblocks()));
  p.bs.resize(static_cast<std::size_t>(E * p.nblocks() * p.kblocks()));
  for (auto& v : p.a) v = code();
  for (auto& v : p.b) v = code();
  for (auto& v : p.as) v = scale();
  for (auto& v : p.bs) v = scale();
  return p;
}

inline double silu(double g) {
  return g / (1.0 + std::exp(-g));
}
inline double gelu_tanh(double g) {
  return 0.5 * g * (1.0 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
}

/// Row r of expert e in double: S and A per weight row j (the manifest's terms (a s_a)(b s_b)).
inline void reference_row(const Problem& p, const double* lut, std::int64_t e, std::int64_t r,
                          std::vector<double>& sum, std::vector<double>& abs) {
  sum.assign(static_cast<std::size_t>(p.N), 0.0);
  abs.assign(static_cast<std::size_t>(p.N), 0.0);
  const std::int64_t kb = p.kblocks();
  std::vector<double> ad(static_cast<std::size_t>(p.K));
  for (std::int64_t k = 0; k < p.K; ++k)
    ad[k] = lut[p.a[r * p.K + k]] * static_cast<double>(p.as[r * kb + k / 128]);
  for (std::int64_t j = 0; j < p.N; ++j) {
    const std::uint8_t* brow = p.b.data() + (e * p.N + j) * p.K;
    const float* bsr = p.bs.data() + (e * p.nblocks() + j / 128) * kb;
    double s = 0;
    double m = 0;
    for (std::int64_t k = 0; k < p.K; ++k) {
      const double t = ad[k] * (lut[brow[k]] * static_cast<double>(bsr[k / 128]));
      s += t;
      m += std::fabs(t);
    }
    sum[j] = s;
    abs[j] = m;
  }
}

/// Checks `got` against the reference on every row_sample-th row of each expert (and its first
/// and last), and every row outside the groups for +0. Returns the largest |c - r| / A seen.
inline double check(const Problem& p, const std::vector<double>& got, const std::string& what,
                    std::int64_t row_sample = 1) {
  double lut[256];
  for (int c = 0; c < 256; ++c) lut[c] = reference_fp8::e4m3_value(c);
  const std::int64_t n_out = p.n_out();
  std::vector<std::pair<std::int64_t, std::int64_t> > rows;  // (expert, row)
  std::vector<bool> grouped(static_cast<std::size_t>(p.M), false);
  const auto g = p.groups();
  for (std::int64_t e = 0; e < p.E; ++e) {
    for (std::int64_t i = 0; i < g[e].second; ++i) {
      grouped[g[e].first + i] = true;
      if (i % row_sample == 0 || i == g[e].second - 1) rows.emplace_back(e, g[e].first + i);
    }
  }
  for (std::int64_t r = 0; r < p.M; ++r) {
    if (grouped[r]) continue;
    for (std::int64_t j = 0; j < n_out; ++j) {
      const double v = got[r * n_out + j];
      if (!(v == 0.0 && !std::signbit(v))) {
        ADD_FAILURE() << what << ": row " << r << " outside the groups holds " << v << " at " << j;
        return 0;
      }
    }
  }
  const unsigned workers = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<int> failures(workers, 0);
  std::vector<double> worst(workers, 0.0);
  std::vector<std::string> first_failure(workers);
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      std::vector<double> sum, abs;
      for (std::size_t i = w; i < rows.size(); i += workers) {
        const auto [e, r] = rows[i];
        reference_row(p, lut, e, r, sum, abs);
        for (std::int64_t j = 0; j < n_out; ++j) {
          double ref = sum[j];
          double bound = 0;
          double scale = abs[j];
          if (p.act == "none") {
            bound = tol::bound_none(ref, tol::cuda_accumulation(p.K, abs[j]));
          } else {
            const double gte = sum[j];
            const double up = sum[j + n_out];
            ref = (p.act == "silu_and_mul" ? silu(gte) : gelu_tanh(gte)) * up;
            bound =
                tol::bound_gated(ref, abs[j], abs[j + n_out], tol::cuda_accumulation(p.K, abs[j]),
                                 tol::cuda_accumulation(p.K, abs[j + n_out]));
            scale = abs[j] * abs[j + n_out];
          }
          const double v = got[r * n_out + j];
          bool ok;
          if (std::isnan(ref)) {
            ok = std::isnan(v);
          } else if (std::isinf(ref)) {
            ok = v == ref;
          } else {
            ok = std::fabs(v - ref) <= bound;
            if (ok && scale > 0) worst[w] = std::max(worst[w], std::fabs(v - ref) / scale);
          }
          if (!ok && failures[w]++ == 0) {
            first_failure[w] = "c[" + std::to_string(r) + ", " + std::to_string(j) +
                               "] = " + std::to_string(v) + ", reference " + std::to_string(ref) +
                               ", bound " + std::to_string(bound);
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  double largest = 0;
  for (unsigned w = 0; w < workers; ++w) {
    EXPECT_EQ(failures[w], 0) << what << ": " << first_failure[w];
    largest = std::max(largest, worst[w]);
  }
  return largest;
}

}  // namespace tileops::fp8_gemm_check
