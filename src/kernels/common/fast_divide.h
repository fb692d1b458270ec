// Internal: division of 32-bit unsigned numerators by a divisor fixed at launch, as a multiply and
// a shift (round-up multiplier, Granlund and Montgomery's method), for index arithmetic in
// kernels whose threads would otherwise spend most of their instructions on integer division.
// Host and device code (the host computes the multiplier; tests compare it with `/`).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TILEOPS_FAST_DIVIDE_HD __host__ __device__
#else
#define TILEOPS_FAST_DIVIDE_HD
#endif

namespace tileops::kernels {

/// n / divisor and n % divisor for every n < 2^32, divisor >= 1.
class FastDivide {
 public:
  FastDivide() = default;
  /// divisor >= 1.
  explicit FastDivide(std::uint32_t divisor) : divisor_(divisor) {
    while ((std::uint64_t{1} << shift_) < divisor) ++shift_;
    // floor(2^(32 + shift) / divisor) + 1 - 2^32, below 2^32 since 2^shift < 2 divisor.
    multiplier_ = static_cast<std::uint32_t>(
        ((std::uint64_t{1} << 32) * ((std::uint64_t{1} << shift_) - divisor)) / divisor + 1);
  }

  [[nodiscard]] TILEOPS_FAST_DIVIDE_HD std::uint32_t divisor() const { return divisor_; }

  [[nodiscard]] TILEOPS_FAST_DIVIDE_HD std::uint32_t quotient(std::uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const std::uint64_t high = __umulhi(n, multiplier_);
#else
    const std::uint64_t high = (std::uint64_t{n} * multiplier_) >> 32;
#endif
    return static_cast<std::uint32_t>((high + n) >> shift_);
  }

  [[nodiscard]] TILEOPS_FAST_DIVIDE_HD std::uint32_t remainder(std::uint32_t n,
                                                               std::uint32_t quotient) const {
    return n - quotient * divisor_;
  }

 private:
  std::uint32_t divisor_ = 1;
  std::uint32_t multiplier_ = 0;
  std::uint32_t shift_ = 0;
};

}  // namespace tileops::kernels
