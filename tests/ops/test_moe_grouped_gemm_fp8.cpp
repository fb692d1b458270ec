// MoEGroupedGemmFP8FwdOp and its masked layout, MoEGroupedGemmFP8MaskedFwdOp, on the CPU:
// hand-computed values, the double-precision reference on several shapes, the defined results of
// 0, inf and NaN scales, the zero rows past the counts, and the shape rules.
//
// Tolerance, per output element: tests/ops/grouped_gemm_fp8_tolerance.h (E_cpu).
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/grouped_gemm_fp8_tolerance.h"
#include "ops/ops_test_util.h"
#include "tileops/ops/moe.h"

namespace tileops {
namespace {

using testing::HasSubstr;
using testing_util::floats;
using testing_util::message_of;
using testing_util::run_reference;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor ints(const std::vector<std::int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<std::int64_t>(v.size())}, DType::int32);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<std::int32_t>()[i] = v[i];
  return t;
}

/// The operands of one call, float32 where the op reads e4m3 (converted by `inputs`). With
/// max_m > 0 the masked layout: rows = experts * max_m and `offsets` holds the counts.
struct Operands {
  std::int64_t rows, experts, n, k, block_n, block_k;
  std::vector<double> a, a_scales, b, b_scales;
  std::vector<std::int32_t> offsets;
  std::int64_t max_m = 0;

  std::int64_t kblocks() const { return k / block_k; }
  std::int64_t nblocks() const { return (n + block_n - 1) / block_n; }
  std::int64_t first(std::int64_t e) const { return max_m > 0 ? e * max_m : offsets[e]; }
  std::int64_t count(std::int64_t e) const {
    return max_m > 0 ? offsets[e] : offsets[e + 1] - offsets[e];
  }
  std::vector<Tensor> inputs() const {
    const Sizes rows_of_a = max_m > 0 ? Sizes{experts, max_m} : Sizes{rows};
    Sizes a_sizes = rows_of_a;
    a_sizes.push_back(k);
    Sizes a_scale_sizes = rows_of_a;
    a_scale_sizes.push_back(kblocks());
    return {floats(a, a_sizes).to(DType::float8_e4m3fn), floats(a_scales, a_scale_sizes),
            ints(offsets), floats(b, {experts, n, k}).to(DType::float8_e4m3fn),
            floats(b_scales, {experts, nblocks(), kblocks()})};
  }
};

/// Uniform e4m3 values, and scales 2^i * [1, 2) with i in [-8, 8] per block: a scale applied to
/// the wrong block misses the result by far more than the tolerance.
Operands random_operands(std::int64_t experts, std::int64_t n, std::int64_t k, std::int64_t block_n,
                         std::int64_t block_k, const std::vector<std::int32_t>& offsets,
                         std::int64_t rows, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> value(-4.0, 4.0);
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(-8, 8);
  Operands o{rows, experts, n, k, block_n, block_k, {}, {}, {}, {}, offsets};
  const auto fill = [&](std::vector<double>& v, std::int64_t count, bool scale) {
    v.resize(static_cast<std::size_t>(count));
    for (auto& x : v) x = scale ? std::ldexp(mantissa(rng), exponent(rng)) : value(rng);
  };
  fill(o.a, rows * k, false);
  fill(o.a_scales, rows * o.kblocks(), true);
  fill(o.b, experts * n * k, false);
  fill(o.b_scales, experts * o.nblocks() * o.kblocks(), true);
  return o;
}

/// sum_k |t_k| of output column j of row r (expert e), from the e4m3 values the op reads.
double abs_sum(const Operands& o, const std::vector<double>& a8, const std::vector<double>& b8,
               std::int64_t e, std::int64_t r, std::int64_t j) {
  double s = 0;
  for (std::int64_t i = 0; i < o.k; ++i) {
    const double sa = o.a_scales[r * o.kblocks() + i / o.block_k];
    const double sb = o.b_scales[(e * o.nblocks() + j / o.block_n) * o.kblocks() + i / o.block_k];
    s += std::fabs(a8[r * o.k + i] * sa * b8[(e * o.n + j) * o.k + i] * sb);
  }
  return s;
}

/// Checks the op against the reference within the bound of the head comment, and the rows
/// outside the groups for exact zeros.
void expect_matches_reference(const Operands& o, const std::string& act, const std::string& what) {
  const std::vector<Tensor> in = o.inputs();
  const std::int64_t n_out = act == "none" ? o.n : o.n / 2;
  Tensor c;
  std::vector<double> ref;
  if (o.max_m > 0) {
    MoEGroupedGemmFP8MaskedFwdOp op(
        {.activation = act, .block_n = o.block_n, .block_k = o.block_k});
    c = op(in[0], in[1], in[2], in[3], in[4]);
    ASSERT_EQ(c.sizes(), (Sizes{o.experts, o.max_m, n_out})) << what;
    ref = run_reference("MoEGroupedGemmFP8MaskedFwdOp", in, op.param_values())[0].to_vector();
  } else {
    MoEGroupedGemmFP8FwdOp op({.activation = act, .block_n = o.block_n, .block_k = o.block_k});
    c = op(in[0], in[1], in[2], in[3], in[4]);
    ASSERT_EQ(c.sizes(), (Sizes{o.rows, n_out})) << what;
    ref = run_reference("MoEGroupedGemmFP8FwdOp", in, op.param_values())[0].to_vector();
  }
  ASSERT_EQ(c.dtype(), DType::bfloat16) << what;
  const std::vector<double> got = c.to_vector();
  ASSERT_EQ(ref.size(), got.size()) << what;
  const std::vector<double> a8 = in[0].to_vector();
  const std::vector<double> b8 = in[3].to_vector();
  namespace tol = fp8_gemm_tolerance;
  std::vector<bool> grouped(static_cast<std::size_t>(o.rows), false);
  int failures = 0;
  for (std::int64_t e = 0; e < o.experts; ++e) {
    for (std::int64_t r = o.first(e); r < o.first(e) + o.count(e); ++r) {
      grouped[r] = true;
      for (std::int64_t j = 0; j < n_out && failures < 10; ++j) {
        const double rv = ref[r * n_out + j];
        double bound = 0;
        if (act == "none") {
          bound = tol::bound_none(rv, tol::cpu_accumulation(o.k, abs_sum(o, a8, b8, e, r, j)));
        } else {
          const double ag = abs_sum(o, a8, b8, e, r, j);
          const double av = abs_sum(o, a8, b8, e, r, j + n_out);
          bound = tol::bound_gated(rv, ag, av, tol::cpu_accumulation(o.k, ag),
                                   tol::cpu_accumulation(o.k, av));
        }
        const double gv = got[r * n_out + j];
        if (!(std::fabs(gv - rv) <= bound)) {
          ++failures;
          ADD_FAILURE() << what << " c[" << r << ", " << j << "] = " << gv << ", reference " << rv
                        << ", bound " << bound;
        }
      }
    }
  }
  for (std::int64_t r = 0; r < o.rows; ++r) {
    if (grouped[r]) continue;
    for (std::int64_t j = 0; j < n_out; ++j) {
      ASSERT_EQ(got[r * n_out + j], 0.0) << what << " row " << r << " outside the groups";
    }
  }
}

TEST(MoEGroupedGemmFP8, HandComputedValues) {
  // One row, two K blocks: a all 1 with scales {1, 2}; weight rows all 1 and all 0.5, scales
  // {3, 5}: c = 128 * 1 * 3 + 128 * 2 * 5 = 1664 and half of it, both exact in bfloat16.
  const Tensor a = floats(std::vector<double>(256, 1.0), {1, 256}).to(DType::float8_e4m3fn);
  std::vector<double> bv(512, 1.0);
  std::fill(bv.begin() + 256, bv.end(), 0.5);
  const Tensor b = floats(bv, {1, 2, 256}).to(DType::float8_e4m3fn);
  const Tensor a_scales = floats({1, 2}, {1, 2});
  const Tensor off = ints({0, 1});
  MoEGroupedGemmFP8FwdOp op(MoEGroupedGemmFP8FwdOp::Params{});
  EXPECT_EQ(op(a, a_scales, off, b, floats({3, 5}, {1, 1, 2})).to_vector(),
            (std::vector<double>{1664, 832}));
  // A zero weight scale drops its block: 128 * 1 * 3 and half of it.
  EXPECT_EQ(op(a, a_scales, off, b, floats({3, 0}, {1, 1, 2})).to_vector(),
            (std::vector<double>{384, 192}));
  // silu(1664) * 832 = 1664 * 832 = 169 * 2^13 (exp(-1664) is 0 in float32), exact in bfloat16.
  MoEGroupedGemmFP8FwdOp gated({.activation = "silu_and_mul"});
  EXPECT_EQ(gated(a, a_scales, off, b, floats({3, 5}, {1, 1, 2})).to_vector(),
            (std::vector<double>{1384448}));
}

TEST(MoEGroupedGemmFP8, MatchesReferenceOnShapes) {
  struct Shape {
    std::int64_t experts, n, k, block_n, block_k;
    std::vector<std::int32_t> offsets;
    std::int64_t rows;
    std::string act;
  };
  const std::vector<Shape> shapes = {
      // an empty expert, a group of 25 rows (the OpenBLAS path) and two rows past offsets[E]
      {4, 256, 256, 128, 128, {0, 5, 5, 30, 38}, 40, "none"},
      // K = 128, a single block; the second expert empty
      {2, 128, 128, 128, 128, {0, 17, 17}, 17, "none"},
      // N = 200: a partial last weight block; rows before offsets[0]
      {3, 200, 384, 128, 128, {2, 6, 6, 12}, 12, "none"},
      // gated with N = 300 (the up half starts inside a weight block)
      {2, 300, 256, 128, 128, {0, 3, 20}, 20, "silu_and_mul"},
      {2, 64, 192, 32, 64, {0, 4, 10}, 10, "gelu_and_mul"},
      // DeepSeek-V3's down projection's K, a few columns
      {2, 256, 2048, 128, 128, {0, 16, 18}, 18, "silu_and_mul"},
      // no rows at all
      {3, 128, 128, 128, 128, {0, 0, 0, 0}, 0, "none"},
  };
  unsigned seed = 1;
  for (const Shape& s : shapes) {
    const Operands o =
        random_operands(s.experts, s.n, s.k, s.block_n, s.block_k, s.offsets, s.rows, seed++);
    expect_matches_reference(o, s.act,
                             s.act + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k));
  }
}

/// Two experts of 2 and 18 rows (the row-by-row and the OpenBLAS paths), N = K = 256 (2 x 2
/// blocks), every value and scale 1: c = 256.
Operands ones() {
  Operands o{20, 2, 256, 256, 128, 128, {}, {}, {}, {}, {0, 2, 20}};
  o.a.assign(20 * 256, 1.0);
  o.a_scales.assign(20 * 2, 1.0);
  o.b.assign(2 * 256 * 256, 1.0);
  o.b_scales.assign(2 * 2 * 2, 1.0);
  return o;
}

/// c of `o` (activation none); `expect(r, j)` gives each element's defined value.
template <class Expect>
void expect_values(const Operands& o, Expect&& expect, const std::string& what) {
  MoEGroupedGemmFP8FwdOp op(MoEGroupedGemmFP8FwdOp::Params{});
  const std::vector<Tensor> in = o.inputs();
  const std::vector<double> c = op(in[0], in[1], in[2], in[3], in[4]).to_vector();
  for (std::int64_t r = 0; r < o.rows; ++r) {
    for (std::int64_t j = 0; j < o.n; ++j) {
      const double want = expect(r, j);
      const double got = c[r * o.n + j];
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << what << " c[" << r << ", " << j << "] = " << got;
      } else {
        ASSERT_EQ(got, want) << what << " c[" << r << ", " << j << "]";
        ASSERT_EQ(std::signbit(got), std::signbit(want)) << what << " c[" << r << ", " << j << "]";
      }
    }
  }
}

TEST(MoEGroupedGemmFP8, ZeroScalesDropTheirBlocks) {
  Operands o = ones();
  o.a_scales[3 * 2 + 0] = o.a_scales[3 * 2 + 1] = 0.0;  // row 3: every term 0
  o.b_scales[(0 * 2 + 0) * 2 + 1] = 0.0;                // expert 0, columns 0-127, K block 1
  expect_values(
      o,
      [](std::int64_t r, std::int64_t j) {
        if (r == 3) return 0.0;
        return r < 2 && j < 128 ? 128.0 : 256.0;
      },
      "zero scales");
}

TEST(MoEGroupedGemmFP8, NaNScalesPropagateToTheOutputsTheyReach) {
  Operands o = ones();
  o.a_scales[1 * 2 + 0] = kNaN;            // row 1
  o.b_scales[(1 * 2 + 1) * 2 + 0] = kNaN;  // expert 1 (rows 2-19), columns 128-255
  expect_values(
      o,
      [](std::int64_t r, std::int64_t j) { return r == 1 || (r >= 2 && j >= 128) ? kNaN : 256.0; },
      "NaN scales");
}

TEST(MoEGroupedGemmFP8, InfiniteScalesGiveInfOrNaN) {
  Operands o = ones();
  o.a_scales[0 * 2 + 1] = kInf;  // row 0, K block 1: every term +inf
  o.a_scales[2 * 2 + 1] = kInf;  // row 2 too, but a[2, 200] = 0 makes inf * 0 = NaN
  o.a[2 * 256 + 200] = 0.0;
  o.b_scales[(0 * 2 + 0) * 2 + 0] = -kInf;  // expert 0, columns 0-127, K block 0: -inf ...
  // ... so row 1 (scales 1) gets -inf there, and row 0 gets -inf + inf = NaN.
  expect_values(
      o,
      [](std::int64_t r, std::int64_t j) {
        if (r == 0) return j < 128 ? kNaN : kInf;
        if (r == 1) return j < 128 ? -kInf : 256.0;
        if (r == 2) return kNaN;
        return 256.0;
      },
      "infinite scales");
}

TEST(MoEGroupedGemmFP8, ShapeRulesAndOffsetsAreSignatureErrors) {
  MoEGroupedGemmFP8FwdOp op(MoEGroupedGemmFP8FwdOp::Params{});
  const Tensor a = Tensor::zeros({4, 256}, DType::float8_e4m3fn);
  const Tensor as = Tensor::zeros({4, 2}, DType::float32);
  const Tensor b = Tensor::zeros({2, 256, 256}, DType::float8_e4m3fn);
  const Tensor bs = Tensor::zeros({2, 2, 2}, DType::float32);
  // K = 200 is not a multiple of block_k = 128 (the scales' shapes match K // block_k = 1).
  EXPECT_THAT(message_of([&] {
                op(Tensor::zeros({4, 200}, DType::float8_e4m3fn),
                   Tensor::zeros({4, 1}, DType::float32), ints({0, 2, 4}),
                   Tensor::zeros({2, 256, 200}, DType::float8_e4m3fn),
                   Tensor::zeros({2, 2, 1}, DType::float32));
              }),
              HasSubstr("MoEGroupedGemmFP8FwdOp: shape rule 'K % block_k == 0' does not hold"));
  // b_scales of one weight block where N = 256 needs ceil_div(256, 128) = 2.
  EXPECT_THROW(op(a, as, ints({0, 2, 4}), b, Tensor::zeros({2, 1, 2}, DType::float32)),
               SignatureError);
  EXPECT_THAT(message_of([&] {
                op(a, as, ints({0, 2, 4}), b, Tensor::zeros({2, 1, 2}, DType::float32));
              }),
              HasSubstr("b_scales"));
  // a_scales of the wrong width, and bfloat16 in place of e4m3.
  EXPECT_THROW(op(a, Tensor::zeros({4, 1}, DType::float32), ints({0, 2, 4}), b, bs),
               SignatureError);
  EXPECT_THROW(op(Tensor::zeros({4, 256}, DType::bfloat16), as, ints({0, 2, 4}), b, bs),
               SignatureError);
  // Offsets decreasing, past the rows of a.
  EXPECT_THAT(message_of([&] {
                op(a, as, ints({0, 3, 2}), b, bs);
              }),
              HasSubstr("MoEGroupedGemmFP8FwdOp: expert_offsets[2] = 2 breaks"));
  EXPECT_THROW(op(a, as, ints({0, 3, 5}), b, bs), SignatureError);
  // Gated with an odd N; block sizes below 1.
  MoEGroupedGemmFP8FwdOp gated({.activation = "silu_and_mul"});
  EXPECT_THAT(
      message_of([&] {
        gated(a, as, ints({0, 2, 4}), Tensor::zeros({2, 255, 256}, DType::float8_e4m3fn), bs);
      }),
      HasSubstr("shape rule 'activation == 'none' or N % 2 == 0' does not hold"));
  EXPECT_THAT(message_of([] { MoEGroupedGemmFP8FwdOp({.block_k = 0}); }),
              HasSubstr("shape rule 'block_k >= 1' does not hold"));
  EXPECT_THAT(message_of([] { MoEGroupedGemmFP8FwdOp({.block_n = 0}); }),
              HasSubstr("shape rule 'block_n >= 1' does not hold"));
}

// ---- the masked layout ------------------------------------------------------------------------

TEST(MoEGroupedGemmFP8Masked, MatchesReferenceOnShapes) {
  struct Shape {
    std::int64_t experts, max_m, n, k, block_n, block_k;
    std::vector<std::int32_t> counts;
    std::string act;
  };
  const std::vector<Shape> shapes = {
      // no rows, a few (row by row), all max_m, 17 (OpenBLAS)
      {4, 20, 256, 256, 128, 128, {0, 3, 20, 17}, "none"},
      {2, 8, 200, 384, 128, 128, {5, 0}, "silu_and_mul"},
      {3, 6, 64, 192, 32, 64, {6, 1, 2}, "gelu_and_mul"},
      {2, 4, 128, 128, 128, 128, {0, 0}, "none"},
  };
  unsigned seed = 40;
  for (const Shape& s : shapes) {
    Operands o = random_operands(s.experts, s.n, s.k, s.block_n, s.block_k, s.counts,
                                 s.experts * s.max_m, seed++);
    o.max_m = s.max_m;
    expect_matches_reference(o, s.act, "masked " + s.act + " N=" + std::to_string(s.n));
  }
}

TEST(MoEGroupedGemmFP8Masked, RowsPastTheCountsAreWrittenAsZero) {
  Operands o = random_operands(2, 128, 128, 128, 128, {1, 3}, 8, 50);
  o.max_m = 4;
  const std::vector<Tensor> in = o.inputs();
  MoEGroupedGemmFP8MaskedFwdOp op(MoEGroupedGemmFP8MaskedFwdOp::Params{});
  const Tensor out = Tensor::full({2, 4, 128}, kNaN, DType::bfloat16);
  op(in[0], in[1], in[2], in[3], in[4], out);
  for (const auto& [e, r] : std::vector<std::pair<int, int>>{{0, 1}, {0, 2}, {0, 3}, {1, 3}}) {
    for (std::int64_t j = 0; j < 128; ++j) ASSERT_EQ(out.item_at({e, r, j}), 0.0) << e << r << j;
  }
  for (const auto& [e, r] : std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {1, 2}}) {
    EXPECT_TRUE(std::isfinite(out.item_at({e, r, 0}))) << e << r;
  }
}

TEST(MoEGroupedGemmFP8Masked, CountsOutsideMaxMAndShapeRulesAreSignatureErrors) {
  MoEGroupedGemmFP8MaskedFwdOp op(MoEGroupedGemmFP8MaskedFwdOp::Params{});
  const Tensor a = Tensor::zeros({2, 8, 256}, DType::float8_e4m3fn);
  const Tensor as = Tensor::zeros({2, 8, 2}, DType::float32);
  const Tensor b = Tensor::zeros({2, 128, 256}, DType::float8_e4m3fn);
  const Tensor bs = Tensor::zeros({2, 1, 2}, DType::float32);
  EXPECT_THROW(op(a, as, ints({3, 9}), b, bs), SignatureError);
  EXPECT_THAT(message_of([&] {
                op(a, as, ints({3, 9}), b, bs);
              }),
              HasSubstr("MoEGroupedGemmFP8MaskedFwdOp: counts[1] = 9 is outside [0, max_m = 8]"));
  EXPECT_THAT(message_of([&] {
                op(a, as, ints({-1, 0}), b, bs);
              }),
              HasSubstr("counts[0] = -1 is outside [0, max_m = 8]"));
  EXPECT_NO_THROW(op(a, as, ints({8, 0}), b, bs));
  // counts of one expert where a holds two; a_scales of the wrong width
  EXPECT_THROW(op(a, as, ints({3}), b, bs), SignatureError);
  EXPECT_THROW(op(a, Tensor::zeros({2, 8, 1}, DType::float32), ints({3, 3}), b, bs),
               SignatureError);
  EXPECT_THAT(message_of([&] {
                op(Tensor::zeros({2, 8, 200}, DType::float8_e4m3fn),
                   Tensor::zeros({2, 8, 1}, DType::float32), ints({1, 1}),
                   Tensor::zeros({2, 128, 200}, DType::float8_e4m3fn),
                   Tensor::zeros({2, 1, 1}, DType::float32));
              }),
              HasSubstr("MoEGroupedGemmFP8MaskedFwdOp: shape rule 'K % block_k == 0' does not "
                        "hold"));
}

}  // namespace
}  // namespace tileops
