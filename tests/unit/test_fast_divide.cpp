// FastDivide (src/kernels/common/fast_divide.h) against the / and % operators: small, prime,
// power-of-two and largest divisors, numerators at the edges of each quotient and of the 32-bit
// range, and random ones.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/common/fast_divide.h"

namespace tileops {
namespace {

void expect_divides(std::uint32_t d, const std::vector<std::uint32_t>& numerators) {
  const kernels::FastDivide div(d);
  for (const std::uint32_t n : numerators) {
    const std::uint32_t q = div.quotient(n);
    ASSERT_EQ(q, n / d) << n << " / " << d;
    ASSERT_EQ(div.remainder(n, q), n % d) << n << " % " << d;
  }
}

std::vector<std::uint32_t> numerators_for(std::uint32_t d, std::mt19937& rng) {
  std::vector<std::uint32_t> n{0u, 1u, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu};
  // Both sides of the first quotients' edges and of the last ones below 2^32.
  for (std::uint64_t q = 0; q < 4; ++q) {
    for (const std::uint64_t edge : {q * d, (q + 1) * d - 1})
      n.push_back(static_cast<std::uint32_t>(edge));
  }
  const std::uint64_t top = (std::uint64_t{0xffffffffu} / d) * d;
  for (std::uint64_t v : {top, top - 1, top - d, top - d + 1}) {
    if (v <= 0xffffffffu) n.push_back(static_cast<std::uint32_t>(v));
  }
  for (int i = 0; i < 64; ++i) n.push_back(static_cast<std::uint32_t>(rng()));
  return n;
}

TEST(FastDivide, EqualsIntegerDivision) {
  std::mt19937 rng(7);
  std::vector<std::uint32_t> divisors;
  for (std::uint32_t d = 1; d <= 1024; ++d) divisors.push_back(d);
  for (int k = 11; k < 32; ++k) {
    const std::uint32_t p = std::uint32_t{1} << k;
    divisors.insert(divisors.end(), {p - 1, p, p + 1});
  }
  divisors.insert(divisors.end(), {7168u / 128u, 2047u * 128u, 65537u, 1000003u, 0x7fffffffu,
                                   0xfffffffbu, 0xfffffffeu, 0xffffffffu});
  for (int i = 0; i < 2000; ++i) divisors.push_back(1u + static_cast<std::uint32_t>(rng() >> 1));
  for (const std::uint32_t d : divisors) expect_divides(d, numerators_for(d, rng));
}

}  // namespace
}  // namespace tileops
