// MoEPrePermuteQuantFP8FwdOp on the CPU: bit for bit MoEPrePermuteFwdOp followed by
// PerTokenGroupQuantFP8FwdOp (and their references) on every dtype, with and without an expert
// map, several group sizes, special values and empty inputs; the rows past the kept pairs are the
// quantized zero row; the signature's rules and the ids' checks by error type and message.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "ops/moe_test_inputs.h"
#include "ops/ops_test_util.h"
#include "tileops/ops/moe.h"
#include "tileops/ops/quant.h"

namespace tileops {
namespace {

using testing::HasSubstr;
using testing_util::message_of;
using testing_util::run_reference;
using namespace moe_test;  // NOLINT: the tests' inputs

/// Whether `a` and `b` hold the same bytes (NaN codes and scales compared by their bits).
void expect_same_bytes(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const Tensor ac = a.contiguous();
  const Tensor bc = b.contiguous();
  const auto bytes = static_cast<std::size_t>(a.numel()) * element_size(a.dtype());
  if (bytes == 0) return;  // empty tensors hold no memory: null data pointers
  EXPECT_EQ(std::memcmp(ac.data_ptr(), bc.data_ptr(), bytes), 0) << what;
}

/// The op's four outputs against the two ops it is defined by, run one after the other.
void expect_two_ops(const Tensor& x, const Tensor& ids, const Tensor& map, std::int64_t experts,
                    std::int64_t group, double eps, const std::string& what) {
  MoEPrePermuteQuantFP8FwdOp op({.num_experts = experts, .group_size = group, .eps = eps});
  const auto [q, scales, offsets, inverse] = op(x, ids, map);
  MoEPrePermuteFwdOp pre({.num_experts = experts});
  PerTokenGroupQuantFP8FwdOp quant({.group_size = group, .eps = eps});
  const auto [xp, want_offsets, want_inverse] = pre(x, ids, map);
  const auto [want_q, want_scales] = quant(xp);
  expect_same_bytes(q, want_q, what + " q");
  expect_same_bytes(scales, want_scales, what + " scales");
  expect_same_bytes(offsets, want_offsets, what + " offsets");
  expect_same_bytes(inverse, want_inverse, what + " inverse");
  // The registered reference (double precision) gives the same values.
  const auto ref = run_reference("MoEPrePermuteQuantFP8FwdOp", {x, ids, map}, op.param_values());
  ASSERT_EQ(ref.size(), 4u);
  expect_same_bytes(q, ref[0], what + " reference q");
  expect_same_bytes(scales, ref[1], what + " reference scales");
  EXPECT_EQ(offsets.to_vector(), ref[2].to_vector()) << what;
  EXPECT_EQ(inverse.to_vector(), ref[3].to_vector()) << what;
}

TEST(MoEPrePermuteQuantFP8, IsPrePermuteThenQuantizationBitForBit) {
  for (const DType dtype : {DType::bfloat16, DType::float16, DType::float32}) {
    for (const auto& [tokens, top_k, experts, hidden, group] :
         std::vector<std::tuple<int, int, int, int, int>>{{9, 2, 6, 256, 128},
                                                          {1, 1, 4, 128, 128},
                                                          {16, 4, 4, 96, 32},
                                                          {7, 3, 5, 48, 16},
                                                          {5, 2, 3, 30, 3},
                                                          {0, 2, 3, 64, 64}}) {
      const Tensor x = Tensor::randn({tokens, hidden}, dtype, 3 + tokens);
      const Tensor ids = distinct_ids(tokens, top_k, experts, 5 + tokens);
      expect_two_ops(x, ids, Tensor(), experts, group, 1e-10,
                     x.str() + " k=" + std::to_string(top_k) + " g=" + std::to_string(group));
    }
  }
}

TEST(MoEPrePermuteQuantFP8, ExpertMapDropsPairsAndTheTailIsTheQuantizedZeroRow) {
  // 8 global experts; this rank holds global 4..7 as local 0..3.
  const Tensor map = int_tensor({-1, -1, -1, -1, 0, 1, 2, 3});
  const Tensor x = Tensor::randn({6, 256}, DType::bfloat16, 8);
  const Tensor ids = distinct_ids(6, 3, 8, 9);
  expect_two_ops(x, ids, map, 4, 128, 1e-10, "mapped");
  // A larger eps shows in the tail's scales: float(eps / 448), codes 0.
  MoEPrePermuteQuantFP8FwdOp op({.num_experts = 4, .group_size = 64, .eps = 1e-3});
  const auto [q, scales, offsets, inverse] = op(x, ids, map);
  const auto kept = static_cast<std::int64_t>(offsets.item_at({4}));
  ASSERT_LT(kept, 18);
  const auto* codes = static_cast<const std::uint8_t*>(q.data_ptr());
  const float* s = scales.data<float>();
  for (std::int64_t r = kept; r < 18; ++r) {
    for (std::int64_t j = 0; j < 256; ++j) ASSERT_EQ(codes[r * 256 + j], 0) << r << ", " << j;
    for (std::int64_t g = 0; g < 4; ++g) {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(s[r * 4 + g]),
                std::bit_cast<std::uint32_t>(static_cast<float>(1e-3 / 448)))
          << r << ", " << g;
    }
  }
  expect_two_ops(x, ids, map, 4, 64, 1e-3, "mapped eps 1e-3");
}

TEST(MoEPrePermuteQuantFP8, SpecialValuesAreTheQuantizationsBitForBit) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = Tensor::randn({4, 16}, DType::float32, 11);
  x.set_at({0, 1}, nan);
  x.set_at({1, 9}, inf);
  x.set_at({2, 0}, -inf);
  for (std::int64_t j = 8; j < 16; ++j) x.set_at({3, j}, 0.0);  // a group of zeros
  const Tensor ids = distinct_ids(4, 2, 3, 12);
  expect_two_ops(x, ids, Tensor(), 3, 8, 1e-10, "special values");
  MoEPrePermuteQuantFP8FwdOp op({.num_experts = 3, .group_size = 8});
  const auto [q, scales, offsets, inverse] = op(x, ids);
  // Token 0's first group is NaN wherever it went: the one quiet NaN scale.
  const auto r = static_cast<std::int64_t>(inverse.item_at({0, 0}));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(scales.data<float>()[r * 2]), 0x7fc00000u);
}

TEST(MoEPrePermuteQuantFP8, OutputsHaveTheSignaturesShapesAndDTypes) {
  MoEPrePermuteQuantFP8FwdOp op({.num_experts = 5, .group_size = 32});
  const auto [q, scales, offsets, inverse] =
      op(Tensor::randn({3, 64}, DType::bfloat16, 1), distinct_ids(3, 2, 5, 2));
  EXPECT_EQ(q.dtype(), DType::float8_e4m3fn);
  EXPECT_EQ(q.sizes(), (Sizes{6, 64}));
  EXPECT_EQ(scales.dtype(), DType::float32);
  EXPECT_EQ(scales.sizes(), (Sizes{6, 2}));
  EXPECT_EQ(offsets.dtype(), DType::int32);
  EXPECT_EQ(offsets.sizes(), (Sizes{6}));
  EXPECT_EQ(inverse.sizes(), (Sizes{3, 2}));
  // Empty: no tokens, offsets all 0.
  const auto [q0, s0, o0, i0] =
      op(Tensor::zeros({0, 64}, DType::bfloat16), Tensor::zeros({0, 2}, DType::int32));
  EXPECT_EQ(q0.sizes(), (Sizes{0, 64}));
  EXPECT_EQ(s0.sizes(), (Sizes{0, 2}));
  EXPECT_EQ(o0.to_vector(), (std::vector<double>(6, 0.0)));
}

TEST(MoEPrePermuteQuantFP8, ShapeRulesAndDTypesAreSignatureErrors) {
  MoEPrePermuteQuantFP8FwdOp op({.num_experts = 4});  // group_size 128
  const Tensor ids = distinct_ids(2, 2, 4, 1);
  EXPECT_THAT(message_of([&] {
                op(Tensor::randn({2, 192}, DType::bfloat16, 2), ids);
              }),
              HasSubstr("MoEPrePermuteQuantFP8FwdOp: shape rule 'H % group_size == 0' does not "
                        "hold"));
  EXPECT_THROW(op(Tensor::randn({2, 192}, DType::bfloat16, 2), ids), SignatureError);
  EXPECT_THAT(message_of([] { MoEPrePermuteQuantFP8FwdOp({.num_experts = 4, .group_size = 0}); }),
              HasSubstr("shape rule 'group_size >= 1' does not hold"));
  EXPECT_THAT(message_of([] { MoEPrePermuteQuantFP8FwdOp({.num_experts = 4, .eps = 0.0}); }),
              HasSubstr("shape rule 'eps > 0.0' does not hold"));
  EXPECT_THAT(message_of([] { MoEPrePermuteQuantFP8FwdOp({.num_experts = 0}); }),
              HasSubstr("shape rule 'num_experts >= 1' does not hold"));
  EXPECT_THROW(MoEPrePermuteQuantFP8FwdOp({.num_experts = 0}), SignatureError);
  const Tensor x = Tensor::randn({2, 128}, DType::bfloat16, 3);
  // x of a dtype outside T; ids that are not int32; an expert map that is not int32.
  EXPECT_THAT(message_of([&] {
                op(Tensor::zeros({2, 128}, DType::int32), ids);
              }),
              HasSubstr("MoEPrePermuteQuantFP8FwdOp: input 'x'"));
  EXPECT_THROW(op(Tensor::zeros({2, 128}, DType::float8_e4m3fn), ids), SignatureError);
  EXPECT_THAT(message_of([&] {
                op(x, Tensor::zeros({2, 2}, DType::int64));
              }),
              HasSubstr("MoEPrePermuteQuantFP8FwdOp: input 'topk_ids'"));
  EXPECT_THAT(message_of([&] { op(x, ids, Tensor::zeros({8}, DType::float32)); }),
              HasSubstr("MoEPrePermuteQuantFP8FwdOp: input 'expert_map'"));
  // ids of another token count; x of rank 1.
  EXPECT_THAT(message_of([&] { op(x, distinct_ids(3, 2, 4, 4)); }),
              HasSubstr("MoEPrePermuteQuantFP8FwdOp: input 'topk_ids'"));
  EXPECT_THROW(op(Tensor::randn({128}, DType::bfloat16, 5), ids), SignatureError);
}

TEST(MoEPrePermuteQuantFP8, IdsOutsideTheExpertsAreErrorsNamingTheOp) {
  MoEPrePermuteQuantFP8FwdOp op({.num_experts = 4, .group_size = 8});
  const Tensor x = Tensor::randn({2, 8}, DType::float32, 1);
  EXPECT_THAT(message_of([&] {
                op(x, Tensor::full({2, 1}, 4, DType::int32));
              }),
              HasSubstr("MoEPrePermuteQuantFP8FwdOp: topk_ids[0, 0] = 4 is outside [0, 4) "
                        "(num_experts)"));
  EXPECT_THROW(op(x, Tensor::full({2, 1}, -1, DType::int32)), SignatureError);
  EXPECT_THAT(message_of([&] {
                op(x, Tensor::full({2, 1}, 9, DType::int32), int_tensor({0, 1, 2}));
              }),
              HasSubstr("MoEPrePermuteQuantFP8FwdOp: topk_ids[0, 0] = 9 is outside the expert "
                        "map of 3 experts"));
  EXPECT_THAT(message_of([&] {
                op(x, Tensor::full({2, 1}, 0, DType::int32), int_tensor({7}));
              }),
              HasSubstr("MoEPrePermuteQuantFP8FwdOp: expert_map[0] = 7 is neither -1 nor a local "
                        "expert"));
}

}  // namespace
}  // namespace tileops
