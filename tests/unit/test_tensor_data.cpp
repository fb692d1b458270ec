// The tensor runtime on the CPU: fills, random factories, copies and conversions, element
// access, and the errors of bad use. Tensor basics and storage: test_tensor.cpp.
#include <gmock/gmock-matchers.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "tileops/core.h"
#include "unit/core_test_helpers.h"

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tileops::Device;
using tileops::DType;
using tileops::Sizes;
using tileops::Tensor;
using tileops::testing_helpers::error_message;
using SigErr = tileops::SignatureError;

constexpr DType kAllDTypes[] = {DType::float32,       DType::float16, DType::bfloat16,
                                DType::float8_e4m3fn, DType::int8,    DType::int16,
                                DType::int32,         DType::int64,   DType::uint8,
                                DType::bool_,         DType::float64, DType::float8_e5m2};

TEST(Factories, ZerosFullArange) {
  for (const DType dtype : kAllDTypes) {
    const Tensor z = Tensor::zeros({3, 2}, dtype);
    for (double v : z.to_vector()) EXPECT_EQ(v, 0.0) << tileops::dtype_name(dtype);
    const Tensor f = Tensor::full({5}, 1.0, dtype);
    for (double v : f.to_vector()) EXPECT_EQ(v, 1.0) << tileops::dtype_name(dtype);
  }
  EXPECT_THAT(Tensor::arange(5, DType::int64).to_vector(), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THAT(Tensor::arange(4, DType::bfloat16).to_vector(), ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(Tensor::arange(0, DType::float32).numel(), 0);
  EXPECT_THAT(error_message<SigErr>([] { Tensor::arange(-1, DType::float32); }),
              HasSubstr("Tensor.arange: n must be >= 0, got -1"));
  EXPECT_THAT(error_message<SigErr>([] { Tensor::arange(300, DType::int8); }), HasSubstr("128"));
}

TEST(Factories, FillRoundsFloatsAndChecksIntegers) {
  EXPECT_EQ(Tensor::full({}, 0.1, DType::float16).item(),
            static_cast<double>(tileops::half_to_float(tileops::float_to_half(0.1f))));
  EXPECT_EQ(Tensor::full({}, 1000.0, DType::float8_e4m3fn).to_vector().size(), 1u);
  EXPECT_TRUE(std::isnan(Tensor::full({}, 1000.0, DType::float8_e4m3fn).item()));
  EXPECT_EQ(Tensor::full({}, 57344.0, DType::float8_e5m2).item(), 57344.0);
  EXPECT_EQ(Tensor::full({}, 61440.0, DType::float8_e5m2).item(), INFINITY);  // not saturated
  EXPECT_EQ(Tensor::full({}, -1e6, DType::float8_e5m2).item(), -INFINITY);
  EXPECT_EQ(Tensor::full({}, 1e6, DType::float16).item(), INFINITY);
  EXPECT_EQ(Tensor::full({}, -128, DType::int8).item(), -128.0);
  EXPECT_EQ(Tensor::full({}, 255, DType::uint8).item(), 255.0);
  EXPECT_EQ(Tensor::full({}, 9007199254740992.0, DType::int64).item(), 9007199254740992.0);
  EXPECT_EQ(Tensor::full({}, 5.0, DType::bool_).item(), 1.0);
  EXPECT_EQ(Tensor::full({}, 0.0, DType::bool_).item(), 0.0);
  const std::string m = error_message<SigErr>([] { Tensor::full({2}, 0.5, DType::int32); });
  EXPECT_THAT(m, HasSubstr("Tensor.full: value 0.500000 is not representable in int32"));
  EXPECT_THAT(error_message<SigErr>([] { Tensor::full({2}, 256, DType::uint8); }),
              HasSubstr("not representable in uint8"));
  EXPECT_THAT(error_message<SigErr>([] { Tensor::full({2}, -1, DType::uint8); }),
              HasSubstr("uint8"));
  EXPECT_THAT(error_message<SigErr>([] { Tensor::full({2}, NAN, DType::int64); }),
              HasSubstr("int64"));
  EXPECT_THAT(error_message<SigErr>([] { Tensor::full({2}, 0x1p63, DType::int64); }),
              HasSubstr("int64"));
  Tensor t = Tensor::zeros({2}, DType::int16);
  EXPECT_THAT(error_message<SigErr>([&] { t.fill_(40000); }),
              HasSubstr("Tensor.fill_: value 40000.000000 is not representable in int16"));
}

TEST(Factories, FillOfAStridedView) {
  Tensor t = Tensor::zeros({4, 5}, DType::float16);
  t.slice(1, 1, 5, 2).fill_(3.0);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 5; ++j) {
      EXPECT_EQ(t.item_at({i, j}), (j == 1 || j == 3) ? 3.0 : 0.0) << i << "," << j;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// rand / randn

TEST(Random, RandIsDeterministicAndUniform) {
  const Tensor a = Tensor::rand({100000}, DType::float32, 7);
  const Tensor b = Tensor::rand({100000}, DType::float32, 7);
  const Tensor c = Tensor::rand({100000}, DType::float32, 8);
  const auto va = a.to_vector();
  EXPECT_EQ(va, b.to_vector());
  EXPECT_NE(va, c.to_vector());
  double sum = 0;
  double sq = 0;
  for (double v : va) {
    ASSERT_GE(v, 0.0);
    ASSERT_LT(v, 1.0);
    sum += v;
    sq += v * v;
  }
  const double mean = sum / static_cast<double>(va.size());
  const double var = sq / static_cast<double>(va.size()) - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_NEAR(var, 1.0 / 12.0, 0.002);
  // Values depend only on (seed, index): a smaller tensor is a prefix, shapes do not matter.
  const auto small = Tensor::rand({2, 5}, DType::float32, 7).to_vector();
  EXPECT_EQ(small, std::vector<double>(va.begin(), va.begin() + 10));
}

TEST(Random, KnownValues) {
  // Pinned, so that a change of generator (or a platform difference) is noticed: the values
  // come from splitmix64 and basic IEEE arithmetic only.
  const auto u = Tensor::rand({3}, DType::float32, 42).to_vector();
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(static_cast<float>(u[0]), 0.74156487f);
  EXPECT_EQ(static_cast<float>(u[1]), 0.159910396f);
  EXPECT_EQ(static_cast<float>(u[2]), 0.27860114f);
  const auto n = Tensor::randn({4}, DType::float32, 42).to_vector();
  ASSERT_EQ(n.size(), 4u);
  EXPECT_EQ(static_cast<float>(n[0]), -1.10889626f);
  EXPECT_EQ(static_cast<float>(n[1]), -0.541438699f);
  EXPECT_EQ(static_cast<float>(n[2]), -0.982688963f);
  EXPECT_EQ(static_cast<float>(n[3]), -0.210473537f);
  EXPECT_THAT(Tensor::rand({4}, DType::int64, 42, Device::cpu(), -5, 5).to_vector(),
              ElementsAre(2, -4, -3, -2));
}

TEST(Random, RandRangeAndDtypes) {
  const auto v = Tensor::rand({20000}, DType::bfloat16, 3, Device::cpu(), -2.0, 3.0).to_vector();
  double sum = 0;
  for (double x : v) {
    ASSERT_GE(x, -2.0);
    ASSERT_LE(x, 3.0);  // rounding to bfloat16 may reach hi
    sum += x;
  }
  EXPECT_NEAR(sum / static_cast<double>(v.size()), 0.5, 0.05);
  const auto ints = Tensor::rand({20000}, DType::int32, 3, Device::cpu(), 0, 8).to_vector();
  std::vector<int> counts(8, 0);
  for (double x : ints) {
    ASSERT_EQ(x, std::floor(x));
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 8.0);
    ++counts[static_cast<std::size_t>(x)];
  }
  for (int c : counts) EXPECT_NEAR(c, 2500, 250);
  EXPECT_THAT(error_message<SigErr>([] { Tensor::rand({2}, DType::bool_, 1); }),
              HasSubstr("bool is not supported"));
  EXPECT_THAT(
      error_message<SigErr>([] { Tensor::rand({2}, DType::int32, 1, Device::cpu(), 0, 0.5); }),
      HasSubstr("must be integers"));
  EXPECT_THAT(
      error_message<SigErr>([] { Tensor::rand({2}, DType::int8, 1, Device::cpu(), 0, 1000); }),
      HasSubstr("int8"));
  EXPECT_THAT(
      error_message<SigErr>([] { Tensor::rand({2}, DType::float32, 1, Device::cpu(), 1, 0); }),
      HasSubstr("lo <= hi"));
}

TEST(Random, LargeTensorsFilledByThreadsExtendSmallOnes) {
  // 9M elements are filled by several threads where there are several cores (chunks of about
  // n / threads from an even index); 4.5M + 100 by one thread. The prefix must agree across every
  // chunk boundary, for randn (pairs) and rand.
  const std::int64_t large = 9'000'001;
  const std::int64_t small = 4'500'100;
  const auto big = Tensor::randn({large}, DType::float32, 5).to_vector();
  const auto one = Tensor::randn({small}, DType::float32, 5).to_vector();
  EXPECT_TRUE(std::equal(one.begin(), one.end(), big.begin()));
  const auto ubig = Tensor::rand({large}, DType::bfloat16, 6).to_vector();
  const auto uone = Tensor::rand({small}, DType::bfloat16, 6).to_vector();
  EXPECT_TRUE(std::equal(uone.begin(), uone.end(), ubig.begin()));
}

TEST(Random, RandnMoments) {
  const Tensor a = Tensor::randn({200001}, DType::float32, 11, Device::cpu(), 1.5, 2.0);
  const auto v = a.to_vector();
  EXPECT_EQ(v, Tensor::randn({200001}, DType::float32, 11, Device::cpu(), 1.5, 2.0).to_vector());
  EXPECT_NE(v, Tensor::randn({200001}, DType::float32, 12, Device::cpu(), 1.5, 2.0).to_vector());
  double sum = 0;
  double sq = 0;
  int beyond_3sigma = 0;
  for (double x : v) {
    sum += x;
    sq += x * x;
    if (std::fabs(x - 1.5) > 6.0) ++beyond_3sigma;
  }
  const double n = static_cast<double>(v.size());
  const double mean = sum / n;
  const double std = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 1.5, 0.02);
  EXPECT_NEAR(std, 2.0, 0.02);
  EXPECT_NEAR(beyond_3sigma / n, 0.0027, 0.0008);
  // Other float dtypes get the same values, rounded.
  const auto h = Tensor::randn({8}, DType::float16, 11, Device::cpu(), 1.5, 2.0).to_vector();
  for (std::size_t i = 0; i < h.size(); ++i) {
    EXPECT_EQ(h[i], static_cast<double>(
                        tileops::half_to_float(tileops::float_to_half(static_cast<float>(v[i])))));
  }
  EXPECT_THAT(error_message<SigErr>([] { Tensor::randn({2}, DType::int32, 1); }),
              HasSubstr("Tensor.randn: needs a float dtype, got int32"));
  EXPECT_THAT(
      error_message<SigErr>([] { Tensor::randn({2}, DType::float32, 1, Device::cpu(), 0, -1); }),
      HasSubstr("std >= 0"));
}

// ---------------------------------------------------------------------------------------------
// copy_, clone, contiguous, to

TEST(Copy, SameDtypeStridedCopies) {
  const Tensor src = Tensor::arange(24, DType::float32).view({2, 3, 4});
  Tensor dst = Tensor::zeros({4, 3, 2}, DType::float32);
  dst.copy_(src.permute({2, 1, 0}));
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      for (int64_t k = 0; k < 2; ++k) {
        EXPECT_EQ(dst.item_at({i, j, k}), static_cast<double>(k * 12 + j * 4 + i));
      }
    }
  }
  // Into a strided destination.
  Tensor big = Tensor::zeros({4, 6}, DType::int64);
  big.slice(1, 0, 6, 2).copy_(Tensor::arange(12, DType::int64).view({4, 3}));
  EXPECT_THAT(big.select(0, 1).to_vector(), ElementsAre(3, 0, 4, 0, 5, 0));
}

TEST(Copy, ConversionRules) {
  const Tensor f = Tensor::arange(6, DType::float32).view({2, 3});
  for (const DType to : {DType::float16, DType::bfloat16, DType::float8_e4m3fn, DType::float8_e5m2,
                         DType::float32}) {
    EXPECT_THAT(f.to(to).to_vector(), ElementsAre(0, 1, 2, 3, 4, 5));
  }
  const Tensor i = Tensor::arange(6, DType::int32);
  EXPECT_THAT(i.to(DType::float32).to_vector(), ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(i.to(DType::int8).to_vector(), ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(i.to(DType::int64).to_vector(), ElementsAre(0, 1, 2, 3, 4, 5));
  const Tensor b = Tensor::full({2}, 1, DType::bool_);
  EXPECT_THAT(b.to(DType::bfloat16).to_vector(), ElementsAre(1, 1));
  // int -> int wraps modulo 2^bits.
  EXPECT_EQ(Tensor::full({}, 300, DType::int32).to(DType::uint8).item(), 44.0);
  EXPECT_EQ(Tensor::full({}, -1, DType::int64).to(DType::uint8).item(), 255.0);
  // float -> float rounds.
  EXPECT_EQ(Tensor::full({}, 1.0 + 1.0 / 512, DType::float32).to(DType::bfloat16).item(), 1.0);
  // to() of the same dtype is the tensor itself.
  EXPECT_TRUE(f.to(DType::float32).shares_storage_with(f));
  // Forbidden conversions name both dtypes.
  const std::string m = error_message<SigErr>([&] { (void)f.to(DType::int32); });
  EXPECT_THAT(m, HasSubstr("Tensor.to: cannot convert float32 to int32"));
  Tensor ib = Tensor::zeros({2, 3}, DType::bool_);
  EXPECT_THAT(error_message<SigErr>([&] { ib.copy_(f); }),
              HasSubstr("Tensor.copy_: cannot convert float32 to bool"));
  Tensor ii = Tensor::zeros({2}, DType::int32);
  EXPECT_THAT(error_message<SigErr>([&] { ii.copy_(b); }),
              HasSubstr("cannot convert bool to int32"));
  EXPECT_THAT(error_message<SigErr>([&] { (void)i.to(DType::bool_); }),
              HasSubstr("cannot convert int32 to bool"));
}

TEST(Copy, Float8E5M2RoundTripsThroughFloat32) {
  // Every code as float32 (NaN codes left out), and their negatives, round-trip exactly.
  std::vector<float> codes;
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7c) == 0x7c && (b & 0x3) != 0) continue;
    codes.push_back(tileops::fp8e5m2_to_float(static_cast<std::uint8_t>(b)));
  }
  const auto n = static_cast<std::int64_t>(codes.size());
  const Tensor f = Tensor::from_blob(codes.data(), {n}, DType::float32, Device::cpu());
  const Tensor q = f.to(DType::float8_e5m2);
  EXPECT_EQ(q.dtype(), DType::float8_e5m2);
  EXPECT_EQ(q.to(DType::float32).to_vector(), f.to_vector());
  EXPECT_EQ(q.to(DType::float64).to_vector(), f.to_vector());
  EXPECT_EQ(q.to(DType::float16).to(DType::float32).to_vector(), f.to_vector());  // a subset
  // Rounding (ties to even, overflow to inf), through copy_ into a strided destination.
  const std::vector<double> in = {1.125, 1.375, 9, 11, 57344, 61439, 61440, -1e9, 0x1p-17};
  Tensor src = Tensor::zeros({static_cast<std::int64_t>(in.size())}, DType::float32);
  for (std::size_t i = 0; i < in.size(); ++i) src.set_at({static_cast<std::int64_t>(i)}, in[i]);
  Tensor dst = Tensor::zeros({static_cast<std::int64_t>(in.size()), 2}, DType::float8_e5m2);
  dst.select(1, 1).copy_(src);
  EXPECT_THAT(dst.select(1, 1).to_vector(),
              ElementsAre(1, 1.5, 8, 12, 57344, 57344, INFINITY, -INFINITY, 0));
  EXPECT_THAT(dst.select(1, 0).to_vector(), ::testing::Each(0.0));
  // e5m2 -> e4m3fn: 57344 is past e4m3's range (NaN); 0.5 is exact in both.
  const Tensor e4 = Tensor::full({2}, 57344.0, DType::float8_e5m2).to(DType::float8_e4m3fn);
  EXPECT_TRUE(std::isnan(e4.item_at({0})));
  EXPECT_EQ(Tensor::full({}, 0.5, DType::float8_e5m2).to(DType::float8_e4m3fn).item(), 0.5);
}

TEST(Random, Float8E5M2HoldsRoundedDraws) {
  // rand/randn draw in double and round once to float32, then to e5m2: each element is the
  // rounding of the float32 draw of the same seed.
  const Tensor r32 = Tensor::rand({1000}, DType::float32, 9, Device::cpu(), -3.0, 3.0);
  const Tensor r8 = Tensor::rand({1000}, DType::float8_e5m2, 9, Device::cpu(), -3.0, 3.0);
  EXPECT_EQ(r8.to_vector(), r32.to(DType::float8_e5m2).to_vector());
  const Tensor n32 = Tensor::randn({1000}, DType::float32, 9);
  const Tensor n8 = Tensor::randn({1000}, DType::float8_e5m2, 9);
  EXPECT_EQ(n8.to_vector(), n32.to(DType::float8_e5m2).to_vector());
  for (double v : r8.to_vector()) {
    ASSERT_GE(v, -3.0);
    ASSERT_LE(v, 3.0);
  }
}

TEST(Copy, SizesMustMatch) {
  Tensor dst = Tensor::zeros({2, 3}, DType::float32);
  const Tensor src = Tensor::zeros({3, 2}, DType::float32);
  const std::string m = error_message<SigErr>([&] { dst.copy_(src); });
  EXPECT_THAT(m, HasSubstr("Tensor.copy_: sizes differ"));
  EXPECT_THAT(m, HasSubstr("destination Tensor[2, 3] float32 cpu"));
  EXPECT_THAT(m, HasSubstr("source Tensor[3, 2] float32 cpu"));
}

TEST(Copy, OverlappingSourceAndDestination) {
  Tensor t = Tensor::arange(9, DType::float32).view({3, 3});
  t.copy_(t.transpose(0, 1));  // in-place transpose through a staging copy
  EXPECT_THAT(t.to_vector(), ElementsAre(0, 3, 6, 1, 4, 7, 2, 5, 8));
  Tensor u = Tensor::arange(6, DType::int32);
  u.slice(0, 1, 6).copy_(u.slice(0, 0, 5));  // shift right by one
  EXPECT_THAT(u.to_vector(), ElementsAre(0, 0, 1, 2, 3, 4));
  u.copy_(u);  // no-op
  EXPECT_THAT(u.to_vector(), ElementsAre(0, 0, 1, 2, 3, 4));
}

TEST(Copy, CloneContiguousTo) {
  const Tensor t = Tensor::arange(6, DType::int16).view({2, 3});
  EXPECT_TRUE(t.contiguous().shares_storage_with(t));
  const Tensor tt = t.transpose(0, 1);
  EXPECT_FALSE(tt.is_contiguous());
  const Tensor c = tt.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(c.shares_storage_with(t));
  EXPECT_THAT(c.to_vector(), ElementsAre(0, 3, 1, 4, 2, 5));
  EXPECT_EQ(c.strides(), (Sizes{2, 1}));
  Tensor k = t.clone();
  EXPECT_FALSE(k.shares_storage_with(t));
  k.fill_(9);
  EXPECT_EQ(t.item_at({0, 0}), 0.0);
  EXPECT_TRUE(t.to(Device::cpu()).shares_storage_with(t));
}

TEST(Copy, CudaWithoutDeviceIsAUsageError) {
  if (tileops::cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_THROW(Tensor::empty({2}, DType::float32, Device::cuda(0)), tileops::UsageError);
  EXPECT_THROW(Tensor::zeros({2}, DType::float32).to(Device::cuda(0)), tileops::UsageError);
  EXPECT_THROW(Tensor::rand({2}, DType::float32, 1, Device::cuda()), tileops::UsageError);
}

// ---------------------------------------------------------------------------------------------
// Element access

TEST(ElementAccess, ItemAtSetAtAndErrors) {
  Tensor t = Tensor::zeros({2, 3}, DType::float32);
  t.set_at({1, 2}, 4.5);
  t.set_at({-2, -1}, 1.25);
  EXPECT_EQ(t.item_at({1, 2}), 4.5);
  EXPECT_EQ(t.item_at({0, 2}), 1.25);
  const std::vector<int64_t> index{1, -1};
  EXPECT_EQ(t.item_at(std::span<const int64_t>(index)), 4.5);
  t.set_at(std::span<const int64_t>(index), 2.0);
  EXPECT_EQ(t.item_at({1, 2}), 2.0);
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.item_at({1}); }),
              HasSubstr("Tensor.item_at: index [1] has 1 entries but the tensor "
                        "Tensor[2, 3] float32 cpu has 2 dimensions"));
  EXPECT_THAT(error_message<SigErr>([&] {
                (void)t.item_at({0, 3});
              }),
              HasSubstr("index 3 is out of range for dimension 1 of size 3 (index [0, 3], "
                        "sizes [2, 3])"));
  EXPECT_THAT(error_message<SigErr>([&] {
                t.set_at({-3, 0}, 1.0);
              }),
              HasSubstr("Tensor.set_at: index -3 is out of range for dimension 0"));
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.item(); }),
              HasSubstr("Tensor.item: the tensor Tensor[2, 3] float32 cpu has 6 elements, not 1"));
  Tensor i8 = Tensor::zeros({2}, DType::int8);
  EXPECT_THAT(error_message<SigErr>([&] { i8.set_at({0}, 1000); }),
              HasSubstr("Tensor.set_at: value 1000.000000 is not representable in int8"));
  EXPECT_EQ(Tensor::full({1, 1, 1}, 3, DType::int64).item(), 3.0);
}

TEST(ElementAccess, ToVectorAllDtypesAndStrides) {
  for (const DType dtype : kAllDTypes) {
    if (dtype == DType::bool_) continue;
    const Tensor t = Tensor::arange(12, dtype).view({3, 4});
    if (dtype == DType::float8_e5m2) {  // steps of 2 in [8, 16): 9 and 11 round to even
      EXPECT_THAT(t.transpose(0, 1).slice(0, 1, 4, 2).to_vector(), ElementsAre(1, 5, 8, 3, 7, 12));
      continue;
    }
    EXPECT_THAT(t.transpose(0, 1).slice(0, 1, 4, 2).to_vector(), ElementsAre(1, 5, 9, 3, 7, 11))
        << tileops::dtype_name(dtype);
  }
  Tensor b = Tensor::zeros({3}, DType::bool_);
  b.set_at({1}, 1);
  EXPECT_THAT(b.to_vector(), ElementsAre(0, 1, 0));
}

}  // namespace
