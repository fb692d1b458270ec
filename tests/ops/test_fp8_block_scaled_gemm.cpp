// FP8BlockScaledGemmFwdOp on the CPU: hand-computed values, the double-precision reference on
// shapes with odd M and N not a multiple of 128 (the row-by-row and OpenBLAS paths, a weight in
// more than one panel, other block sizes), bit-for-bit equality with MoEGroupedGemmFP8FwdOp over
// one expert (the same kernel family), the scale layouts accepted (DeepGEMM's transposed,
// TMA-aligned a_scales) and strided outputs, the defined results of 0 / NaN / inf scales, and
// the shape rules by type and message.
//
// Tolerance, per output element: tests/ops/grouped_gemm_fp8_tolerance.h (E_cpu).
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/grouped_gemm_fp8_tolerance.h"
#include "ops/ops_test_util.h"
#include "tileops/ops/gemm.h"
#include "tileops/ops/moe.h"

namespace tileops {
namespace {

using testing::HasSubstr;
using testing_util::floats;
using testing_util::message_of;
using testing_util::run_reference;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor e4m3(const std::vector<double>& v, Sizes sizes) {
  return floats(v, std::move(sizes)).to(DType::float8_e4m3fn);
}

/// One call's operands: a [m, k], a_scales [m, k / block_k], b [n, k], b_scales
/// [ceil(n / block_n), k / block_k]; values uniform, scales 2^i [1, 2) with i in [-8, 8] per
/// block, so that a scale applied to the wrong block misses by far more than the tolerance.
struct Operands {
  std::int64_t m, n, k, block_n, block_k;
  std::vector<double> a, a_scales, b, b_scales;

  std::int64_t kblocks() const { return k / block_k; }
  std::int64_t nblocks() const { return (n + block_n - 1) / block_n; }
  std::vector<Tensor> inputs() const {
    return {e4m3(a, {m, k}), floats(a_scales, {m, kblocks()}), e4m3(b, {n, k}),
            floats(b_scales, {nblocks(), kblocks()})};
  }
};

Operands random_operands(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t block_n,
                         std::int64_t block_k, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> value(-4.0, 4.0);
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(-8, 8);
  Operands o{m, n, k, block_n, block_k, {}, {}, {}, {}};
  const auto fill = [&](std::vector<double>& v, std::int64_t count, bool scale) {
    v.resize(static_cast<std::size_t>(count));
    for (auto& x : v) x = scale ? std::ldexp(mantissa(rng), exponent(rng)) : value(rng);
  };
  fill(o.a, m * k, false);
  fill(o.a_scales, m * o.kblocks(), true);
  fill(o.b, n * k, false);
  fill(o.b_scales, o.nblocks() * o.kblocks(), true);
  return o;
}

FP8BlockScaledGemmFwdOp op_for(const Operands& o) {
  return FP8BlockScaledGemmFwdOp({.block_n = o.block_n, .block_k = o.block_k});
}

TEST(FP8BlockScaledGemm, HandComputedValues) {
  // One row, two K blocks: a all 1 with scales {1, 2}; weight rows all 1 and all 0.5, scales
  // {3, 5}: c = 128 * 1 * 3 + 128 * 2 * 5 = 1664 and half of it, both exact in bfloat16.
  const Tensor a = e4m3(std::vector<double>(256, 1.0), {1, 256});
  std::vector<double> bv(512, 1.0);
  std::fill(bv.begin() + 256, bv.end(), 0.5);
  const Tensor b = e4m3(bv, {2, 256});
  FP8BlockScaledGemmFwdOp op(FP8BlockScaledGemmFwdOp::Params{});
  const Tensor c = op(a, floats({1, 2}, {1, 2}), b, floats({3, 5}, {1, 2}));
  EXPECT_EQ(c.dtype(), DType::bfloat16);
  EXPECT_EQ(c.sizes(), (Sizes{1, 2}));
  EXPECT_EQ(c.to_vector(), (std::vector<double>{1664, 832}));
  // A zero weight scale drops its block: 128 * 1 * 3 and half of it.
  EXPECT_EQ(op(a, floats({1, 2}, {1, 2}), b, floats({3, 0}, {1, 2})).to_vector(),
            (std::vector<double>{384, 192}));
}

TEST(FP8BlockScaledGemm, MatchesReferenceOnShapes) {
  struct Shape {
    std::int64_t m, n, k, block_n, block_k;
  };
  const std::vector<Shape> shapes = {
      {1, 128, 128, 128, 128},     // one row, one block
      {7, 200, 384, 128, 128},     // odd M (row by row), N = 200: a partial last weight block
      {37, 130, 256, 128, 128},    // odd M past 16 rows (OpenBLAS), N = 128 + 2
      {19, 1, 128, 128, 128},      // a single output column
      {20, 300, 16384, 128, 128},  // 16 MB float32 panels: 256 weight rows, then 44
      {5, 96, 192, 32, 64},        // other block sizes (the CPU serves them)
      {0, 128, 128, 128, 128},     // no rows
      {3, 128, 0, 128, 128},       // K = 0: every element an empty sum
  };
  unsigned seed = 1;
  for (const Shape& s : shapes) {
    const std::string what = "M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) +
                             " K=" + std::to_string(s.k) + " blocks " + std::to_string(s.block_n) +
                             "x" + std::to_string(s.block_k);
    const Operands o = random_operands(s.m, s.n, s.k, s.block_n, s.block_k, seed++);
    const std::vector<Tensor> in = o.inputs();
    FP8BlockScaledGemmFwdOp op = op_for(o);
    const Tensor c = op(in[0], in[1], in[2], in[3]);
    ASSERT_EQ(c.sizes(), (Sizes{s.m, s.n})) << what;
    ASSERT_EQ(c.dtype(), DType::bfloat16) << what;
    const std::vector<double> got = c.to_vector();
    const std::vector<double> ref =
        run_reference("FP8BlockScaledGemmFwdOp", in, op.param_values())[0].to_vector();
    ASSERT_EQ(ref.size(), got.size()) << what;
    const std::vector<double> a8 = in[0].to_vector();
    const std::vector<double> b8 = in[2].to_vector();
    int failures = 0;
    for (std::int64_t r = 0; r < s.m; ++r) {
      for (std::int64_t j = 0; j < s.n && failures < 10; ++j) {
        double abs = 0;  // sum_k |t_k|, from the e4m3 values the op reads
        for (std::int64_t i = 0; i < s.k; ++i) {
          abs += std::fabs(a8[r * s.k + i] * o.a_scales[r * o.kblocks() + i / s.block_k] *
                           b8[j * s.k + i] *
                           o.b_scales[(j / s.block_n) * o.kblocks() + i / s.block_k]);
        }
        namespace tol = fp8_gemm_tolerance;
        const double rv = ref[r * s.n + j];
        const double bound = tol::bound_none(rv, tol::cpu_accumulation(s.k, abs));
        if (!(std::fabs(got[r * s.n + j] - rv) <= bound)) {
          ++failures;
          ADD_FAILURE() << what << " c[" << r << ", " << j << "] = " << got[r * s.n + j]
                        << ", reference " << rv << ", bound " << bound;
        }
        if (s.k == 0) {
          EXPECT_EQ(got[r * s.n + j], 0.0) << what;
        }
      }
    }
  }
}

TEST(FP8BlockScaledGemm, EqualsTheGroupedGemmOfOneExpertBitForBit) {
  // The same kernel family: one expert owning every row of MoEGroupedGemmFP8FwdOp.
  for (const std::int64_t m : {3, 40}) {
    const Operands o = random_operands(m, 200, 256, 128, 128, 7);
    const std::vector<Tensor> in = o.inputs();
    const Tensor dense = op_for(o)(in[0], in[1], in[2], in[3]);
    Tensor offsets = Tensor::empty({2}, DType::int32);
    offsets.data<std::int32_t>()[0] = 0;
    offsets.data<std::int32_t>()[1] = static_cast<std::int32_t>(m);
    MoEGroupedGemmFP8FwdOp grouped(MoEGroupedGemmFP8FwdOp::Params{});
    const Tensor c = grouped(in[0], in[1], offsets, in[2].unsqueeze(0), in[3].unsqueeze(0));
    EXPECT_EQ(dense.to_vector(), c.to_vector()) << "M = " << m;
  }
}

TEST(FP8BlockScaledGemm, AcceptsTransposedTmaAlignedScalesAndStridedOut) {
  // DeepGEMM's activation scales (get_col_major_tma_aligned_tensor): the storage of a row-major
  // [K / 128, align(M, 4)] tensor, seen as its [M, K / 128] transpose with strides (1, 8).
  const Operands o = random_operands(5, 200, 384, 128, 128, 11);
  const std::vector<Tensor> in = o.inputs();
  FP8BlockScaledGemmFwdOp op = op_for(o);
  const std::vector<double> want = op(in[0], in[1], in[2], in[3]).to_vector();
  const std::int64_t aligned_m = 8;
  Tensor storage = Tensor::full({o.kblocks(), aligned_m}, kNaN, DType::float32);
  for (std::int64_t r = 0; r < o.m; ++r) {
    for (std::int64_t kb = 0; kb < o.kblocks(); ++kb) {
      storage.data<float>()[kb * aligned_m + r] = in[1].data<float>()[r * o.kblocks() + kb];
    }
  }
  const Tensor a_scales_t = storage.slice(1, 0, o.m).transpose(0, 1);
  ASSERT_FALSE(a_scales_t.is_contiguous());
  ASSERT_EQ(a_scales_t.sizes(), (Sizes{o.m, o.kblocks()}));
  EXPECT_EQ(op(in[0], a_scales_t, in[2], in[3]).to_vector(), want);
  // Weight scales given column-major too, and a strided `out` (every other column of a buffer).
  const Tensor b_scales_t = in[3].transpose(0, 1).contiguous().transpose(0, 1);
  ASSERT_FALSE(b_scales_t.is_contiguous());
  const Tensor buffer = Tensor::full({o.m, 2 * o.n}, kNaN, DType::bfloat16);
  const Tensor out = buffer.slice(1, 0, 2 * o.n, 2);
  op(in[0], a_scales_t, in[2], b_scales_t, out);
  EXPECT_EQ(out.to_vector(), want);
  for (std::int64_t j = 1; j < 2 * o.n; j += 2) {
    ASSERT_TRUE(std::isnan(buffer.item_at({0, j}))) << "column " << j << " outside out written";
  }
}

TEST(FP8BlockScaledGemm, NonFiniteScalesGiveTheirDefinedResults) {
  // a and b all 1, M = 2, N = K = 256 (2 x 2 blocks), scales 1: c = 256, except where a NaN
  // scale reaches (row 1: NaN everywhere; columns 128-255: NaN) and an infinite one
  // (row 0, K block 1: +inf; with a zero a value in that block, inf * 0 = NaN).
  Operands o{2, 256, 256, 128, 128, {}, {}, {}, {}};
  o.a.assign(2 * 256, 1.0);
  o.a_scales.assign(2 * 2, 1.0);
  o.b.assign(256 * 256, 1.0);
  o.b_scales.assign(2 * 2, 1.0);
  o.a_scales[1 * 2 + 0] = kNaN;
  o.b_scales[1 * 2 + 1] = kNaN;  // columns 128-255, K block 1
  o.a_scales[0 * 2 + 1] = std::numeric_limits<double>::infinity();
  const std::vector<Tensor> in = o.inputs();
  const std::vector<double> c = op_for(o)(in[0], in[1], in[2], in[3]).to_vector();
  for (std::int64_t j = 0; j < 256; ++j) {
    EXPECT_TRUE(std::isnan(c[256 + j])) << "row 1, column " << j;
    if (j < 128) {
      EXPECT_EQ(c[j], std::numeric_limits<double>::infinity()) << "row 0, column " << j;
    } else {
      EXPECT_TRUE(std::isnan(c[j])) << "row 0, column " << j;
    }
  }
  o.a_scales[1 * 2 + 0] = 1.0;
  o.b_scales[1 * 2 + 1] = 1.0;
  o.a[0 * 256 + 200] = 0.0;  // row 0, K block 1: inf * 0
  const std::vector<Tensor> in2 = o.inputs();
  const std::vector<double> c2 = op_for(o)(in2[0], in2[1], in2[2], in2[3]).to_vector();
  for (std::int64_t j = 0; j < 256; ++j) {
    EXPECT_TRUE(std::isnan(c2[j])) << "row 0, column " << j;
    EXPECT_EQ(c2[256 + j], 256.0) << "row 1, column " << j;
  }
}

TEST(FP8BlockScaledGemm, ShapeRulesAreSignatureErrors) {
  FP8BlockScaledGemmFwdOp op(FP8BlockScaledGemmFwdOp::Params{});
  const Tensor a = Tensor::zeros({4, 256}, DType::float8_e4m3fn);
  const Tensor as = Tensor::zeros({4, 2}, DType::float32);
  const Tensor b = Tensor::zeros({200, 256}, DType::float8_e4m3fn);
  const Tensor bs = Tensor::zeros({2, 2}, DType::float32);
  EXPECT_NO_THROW(op(a, as, b, bs));
  // K = 200 is not a multiple of block_k = 128 (the scales' shapes match K // block_k = 1).
  EXPECT_THAT(
      message_of([&] {
        op(Tensor::zeros({4, 200}, DType::float8_e4m3fn), Tensor::zeros({4, 1}, DType::float32),
           Tensor::zeros({200, 200}, DType::float8_e4m3fn), Tensor::zeros({2, 1}, DType::float32));
      }),
      HasSubstr("FP8BlockScaledGemmFwdOp: shape rule 'K % block_k == 0' does not hold"));
  // b_scales of one weight block where N = 200 needs ceil_div(200, 128) = 2.
  EXPECT_THROW(op(a, as, b, Tensor::zeros({1, 2}, DType::float32)), SignatureError);
  EXPECT_THAT(
      message_of([&] {
        op(a, as, b, Tensor::zeros({1, 2}, DType::float32));
      }),
      HasSubstr("FP8BlockScaledGemmFwdOp: input 'b_scales' declared [ceil_div(N, block_n), "
                "K // block_k]: axis 0 must be 2 (ceil_div(N, block_n)), got shape [1, 2]"));
  // a_scales of the wrong width; a's and b's K differ; bfloat16 in place of e4m3.
  EXPECT_THAT(
      message_of([&] {
        op(a, Tensor::zeros({4, 1}, DType::float32), b, bs);
      }),
      HasSubstr("input 'a_scales' declared [M, K // block_k]: axis 1 must be 2 (K // block_k), "
                "got shape [4, 1]"));
  EXPECT_THROW(op(a, as, Tensor::zeros({200, 384}, DType::float8_e4m3fn), bs), SignatureError);
  EXPECT_THAT(message_of([&] {
                op(a, as, Tensor::zeros({200, 384}, DType::float8_e4m3fn), bs);
              }),
              HasSubstr("input 'b' declared [N, K]: axis 1 must be 256 (K), got shape [200, 384]"));
  EXPECT_THROW(op(Tensor::zeros({4, 256}, DType::bfloat16), as, b, bs), SignatureError);
  EXPECT_THAT(message_of([&] {
                op(Tensor::zeros({4, 256}, DType::bfloat16), as, b, bs);
              }),
              HasSubstr("input 'a' declared dtype float8_e4m3fn: must be float8_e4m3fn "
                        "(float8_e4m3fn), got bfloat16"));
  EXPECT_THROW(op(a, as.to(DType::bfloat16), b, bs), SignatureError);
  // An `out` of the wrong shape or dtype.
  EXPECT_THROW(op(a, as, b, bs, Tensor::zeros({4, 128}, DType::bfloat16)), SignatureError);
  EXPECT_THAT(message_of([&] {
                op(a, as, b, bs, Tensor::zeros({4, 128}, DType::bfloat16));
              }),
              HasSubstr("out (output 'c') must have shape [4, 200], got [4, 128]"));
  EXPECT_THROW(op(a, as, b, bs, Tensor::zeros({4, 200}, DType::float32)), SignatureError);
  // Block sizes below 1.
  EXPECT_THAT(message_of([] { FP8BlockScaledGemmFwdOp({.block_k = 0}); }),
              HasSubstr("shape rule 'block_k >= 1' does not hold"));
  EXPECT_THAT(message_of([] { FP8BlockScaledGemmFwdOp({.block_n = 0}); }),
              HasSubstr("shape rule 'block_n >= 1' does not hold"));
}

}  // namespace
}  // namespace tileops
