// Seeded random factories: rand and randn.
//
// Determinism: element i of rand(seed) and the pair (2k, 2k+1) of randn(seed) depend only on
// (seed, i) / (seed, k), through splitmix64 and IEEE basic arithmetic (+ - * / sqrt and an own
// logarithm, no libm transcendental), so the values are the same on every platform and do not
// depend on the sizes (a larger tensor extends a smaller one of the same seed) nor on how many
// threads fill a large tensor.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core/element_convert.h"
#include "core/tensor_internal.h"
#include "tileops/core/error.h"
#include "tileops/core/tensor.h"

namespace tileops {

namespace {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;

constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The i-th output of splitmix64 seeded with `seed`.
constexpr std::uint64_t splitmix_at(std::uint64_t seed, std::uint64_t i) noexcept {
  return mix64(seed + (i + 1) * kGolden);
}

// Uniform in [0, 1) with 53 random bits.
constexpr double uniform01(std::uint64_t bits) noexcept {
  return static_cast<double>(bits >> 11) * 0x1p-53;
}

// Natural logarithm of x > 0 from frexp (exact) and the atanh series (basic arithmetic only).
double portable_log(double x) noexcept {
  int e = 0;
  double m = std::frexp(x, &e);  // x = m * 2^e, m in [0.5, 1)
  if (m < 0.70710678118654752440) {
    m *= 2.0;
    e -= 1;
  }                                        // m in [sqrt(1/2), sqrt(2))
  const double s = (m - 1.0) / (m + 1.0);  // |s| <= 0.1716
  const double s2 = s * s;
  double term = s;
  double sum = s;
  for (int k = 3; k <= 31; k += 2) {
    term *= s2;
    sum += term / k;
  }
  return 2.0 * sum + static_cast<double>(e) * 0.69314718055994530942;
}

// Two independent standard normal values for pair k (Marsaglia's polar method on a private
// splitmix64 stream, so the pair does not depend on the others).
void normal_pair(std::uint64_t seed, std::uint64_t k, double& z0, double& z1) noexcept {
  const std::uint64_t stream = mix64(seed ^ mix64(k * 2 + 1));
  for (std::uint64_t j = 0;; j += 2) {
    const double u = 2.0 * uniform01(splitmix_at(stream, j)) - 1.0;
    const double v = 2.0 * uniform01(splitmix_at(stream, j + 1)) - 1.0;
    const double s = u * u + v * v;
    if (s > 0.0 && s < 1.0) {
      const double f = std::sqrt(-2.0 * portable_log(s) / s);
      z0 = u * f;
      z1 = v * f;
      return;
    }
  }
}

// Fills a new contiguous host tensor with value(i) (a double) converted to the dtype, then
// moves it to `device`. `make_value_at()` returns a fresh value function (it may cache state);
// large tensors are filled by several threads, each over a range starting at an even index with
// its own value function, so the values do not depend on the split.
template <class MakeValueAt>
Tensor generate(Sizes sizes, DType dtype, Device device, MakeValueAt make_value_at) {
  Tensor host = Tensor::empty(std::move(sizes), dtype, Device::cpu());
  const auto n = static_cast<std::uint64_t>(host.numel());
  detail::visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto* p = static_cast<T*>(host.data_ptr());
    const auto fill = [&](std::uint64_t begin, std::uint64_t end) {
      auto value_at = make_value_at();
      for (std::uint64_t i = begin; i < end; ++i) {
        const double v = value_at(i);
        if constexpr (detail::kIsFloatStorage<T>) {
          p[i] = detail::from_f64<T>(v);
        } else if constexpr (std::is_integral_v<T>) {
          p[i] = static_cast<T>(v);
        }
      }
    };
    constexpr std::uint64_t kPerThread = std::uint64_t{1} << 22;
    const std::uint64_t threads =
        std::min<std::uint64_t>(std::max(1u, std::thread::hardware_concurrency()), n / kPerThread);
    if (threads <= 1) {
      fill(0, n);
      return;
    }
    const std::uint64_t chunk = (n / threads + 1) & ~std::uint64_t{1};  // even
    std::vector<std::thread> pool;
    for (std::uint64_t t = 1; t < threads; ++t) {
      pool.emplace_back(fill, std::min(n, t * chunk), std::min(n, (t + 1) * chunk));
    }
    fill(0, std::min(n, chunk));
    for (auto& th : pool) th.join();
  });
  return host.to(device);
}

std::string num(double v) {
  return std::to_string(v);
}

}  // namespace

Tensor Tensor::rand(Sizes sizes, DType dtype, std::uint64_t seed, Device device, double lo,
                    double hi) {
  if (!(std::isfinite(lo) && std::isfinite(hi) && lo <= hi)) {
    throw SignatureError("Tensor.rand: need finite lo <= hi, got lo " + num(lo) + ", hi " +
                         num(hi));
  }
  if (dtype == DType::bool_) {
    throw SignatureError(
        "Tensor.rand: bool is not supported (draw an integer dtype in [0, 2) and convert)");
  }
  if (is_floating(dtype)) {
    return generate(std::move(sizes), dtype, device, [&] {
      return [&](std::uint64_t i) { return lo + (hi - lo) * uniform01(splitmix_at(seed, i)); };
    });
  }
  // Integers uniform in [lo, hi).
  if (std::trunc(lo) != lo || std::trunc(hi) != hi || !(lo < hi) || hi - lo > 0x1p53) {
    throw SignatureError("Tensor.rand: for " + std::string(dtype_name(dtype)) +
                         ", lo and hi must be integers with lo < hi and hi - lo <= 2^53, got lo " +
                         num(lo) + ", hi " + num(hi));
  }
  unsigned char scratch[8];
  detail::encode_scalar(lo, dtype, scratch, "Tensor.rand (lo)");
  detail::encode_scalar(hi - 1, dtype, scratch, "Tensor.rand (hi - 1)");
  return generate(std::move(sizes), dtype, device, [&] {
    return [&](std::uint64_t i) {
      const double v = lo + std::floor(uniform01(splitmix_at(seed, i)) * (hi - lo));
      return v < hi ? v : hi - 1;
    };
  });
}

Tensor Tensor::randn(Sizes sizes, DType dtype, std::uint64_t seed, Device device, double mean,
                     double std) {
  if (!is_floating(dtype)) {
    throw SignatureError("Tensor.randn: needs a float dtype, got " +
                         std::string(dtype_name(dtype)));
  }
  if (!(std::isfinite(mean) && std::isfinite(std) && std >= 0.0)) {
    throw SignatureError("Tensor.randn: need a finite mean and a finite std >= 0, got mean " +
                         num(mean) + ", std " + num(std));
  }
  // Pairs are generated once each: each value function caches the last pair.
  return generate(std::move(sizes), dtype, device, [&] {
    return [&, cached_pair = ~0ull, z = std::array<double, 2>{}](std::uint64_t i) mutable {
      const std::uint64_t pair = i / 2;
      if (pair != cached_pair) {
        normal_pair(seed, pair, z[0], z[1]);
        cached_pair = pair;
      }
      return mean + std * z[i % 2];
    };
  });
}

}  // namespace tileops
