// KVCacheWriteFwdOp and AttentionMergeStatesFwdOp on the CPU: against their references and in
// closed form (the rows land at their slots and nowhere else; a side with lse -inf contributes
// nothing), the bench's workload inputs, and every error by type and message.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "ops/attention_test_util.h"
#include "ops/ops_test_util.h"
#include "tileops/base/op_class.h"
#include "tileops/ops/attention.h"

namespace tileops {
namespace {

using attention_test::int64_values;
using testing::HasSubstr;
using testing_util::expect_close;
using testing_util::message_of;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// Same shape and the same values (of any dtype, compared exactly).
bool same(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.to_vector() == b.to_vector();
}

// ---- KVCacheWriteFwdOp ------------------------------------------------------------------------

TEST(KVCacheWrite, RowsLandAtTheirSlotsAndPaddingIsSkipped) {
  const std::int64_t tokens = 6, hkv = 2, dim = 8, blocks = 4, page = 3;
  for (const DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
    const Tensor key = Tensor::randn({tokens, hkv, dim}, dtype, 1);
    const Tensor value = Tensor::randn({tokens, hkv, dim}, dtype, 2);
    const Tensor k_cache = Tensor::randn({blocks, page, hkv, dim}, dtype, 3);
    const Tensor v_cache = Tensor::randn({blocks, page, hkv, dim}, dtype, 4);
    const Tensor k_before = k_cache.clone();
    const Tensor v_before = v_cache.clone();
    // Pages out of order, a partial page, padding (-1 and any negative slot).
    const std::vector<std::int64_t> slots{7, 8, -1, 0, 11, -5};
    const Tensor slot_mapping = int64_values(slots);
    KVCacheWriteFwdOp op;
    const std::vector<Tensor> ref = testing_util::run_reference(
        "KVCacheWriteFwdOp", {key, value, k_cache, v_cache, slot_mapping}, op.param_values());
    op(key, value, k_cache, v_cache, slot_mapping);
    expect_close(k_cache, ref[0], std::string(dtype_name(dtype)) + " k_cache");
    expect_close(v_cache, ref[1], "v_cache");
    // In closed form: row slot of the cache viewed [slots, Hkv * D] is the token's row, the rows
    // no token names are unchanged, bit for bit.
    const auto rows = [&](const Tensor& t) { return t.reshape({-1, hkv * dim}); };
    std::vector<bool> written(static_cast<std::size_t>(blocks * page));
    for (std::size_t t = 0; t < slots.size(); ++t) {
      if (slots[t] < 0) continue;
      written[static_cast<std::size_t>(slots[t])] = true;
      const auto tt = static_cast<std::int64_t>(t);
      EXPECT_TRUE(
          same(rows(k_cache).slice(0, slots[t], slots[t] + 1), rows(key).slice(0, tt, tt + 1)));
      EXPECT_TRUE(
          same(rows(v_cache).slice(0, slots[t], slots[t] + 1), rows(value).slice(0, tt, tt + 1)));
    }
    for (std::int64_t s = 0; s < blocks * page; ++s) {
      if (written[static_cast<std::size_t>(s)]) continue;
      EXPECT_TRUE(same(rows(k_cache).slice(0, s, s + 1), rows(k_before).slice(0, s, s + 1)));
      EXPECT_TRUE(same(rows(v_cache).slice(0, s, s + 1), rows(v_before).slice(0, s, s + 1)));
    }
  }
}

TEST(KVCacheWrite, ASlotOutsideTheCacheIsNamedAndNothingIsWritten) {
  const Tensor key = Tensor::randn({3, 1, 4}, DType::bfloat16, 1);
  const Tensor k_cache = Tensor::zeros({2, 4, 1, 4}, DType::bfloat16);
  const Tensor v_cache = Tensor::zeros({2, 4, 1, 4}, DType::bfloat16);
  KVCacheWriteFwdOp op;
  const Tensor slots = int64_values({0, 8, 3});
  EXPECT_THROW(op(key, key, k_cache, v_cache, slots), SignatureError);
  EXPECT_EQ(message_of([&] { op(key, key, k_cache, v_cache, slots); }),
            "KVCacheWriteFwdOp: slot_mapping[1] = 8 is outside the cache's 8 slots (num_blocks 2 "
            "x page_size 4; a negative slot is skipped)");
  EXPECT_TRUE(same(k_cache, Tensor::zeros({2, 4, 1, 4}, DType::bfloat16)));  // slot 0 not written
  EXPECT_NO_THROW(op(key, key, k_cache, v_cache, int64_values({0, 7, -1})));
}

TEST(KVCacheWrite, SignatureRulesByTypeAndMessage) {
  const Tensor key = Tensor::randn({3, 2, 4}, DType::float16, 1);
  const Tensor cache = Tensor::zeros({2, 4, 2, 4}, DType::float16);
  const Tensor slots = int64_values({0, 1, 2});
  KVCacheWriteFwdOp op;
  // slot_mapping int64, one per token
  EXPECT_THAT(message_of([&] { op(key, key, cache, cache.clone(), slots.to(DType::int32)); }),
              HasSubstr("slot_mapping"));
  EXPECT_THAT(message_of([&] {
                op(key, key, cache, cache.clone(), int64_values({0, 1}));
              }),
              HasSubstr("slot_mapping"));
  // caches of the keys' heads, head dim and dtype
  EXPECT_THAT(message_of([&] {
                op(key, key, Tensor::zeros({2, 4, 1, 4}, DType::float16), cache.clone(), slots);
              }),
              HasSubstr("k_cache"));
  EXPECT_THAT(message_of([&] { op(key, key, cache, cache.to(DType::bfloat16), slots); }),
              HasSubstr("v_cache"));
  EXPECT_THAT(message_of([&] { op(key, key.to(DType::float32), cache, cache.clone(), slots); }),
              HasSubstr("value"));
  // caches written in place must be contiguous
  const Tensor wide = Tensor::zeros({2, 4, 2, 8}, DType::float16);
  EXPECT_THROW(op(key, key, wide.slice(3, 0, 4), cache.clone(), slots), SignatureError);
  EXPECT_THAT(message_of([&] { op(key, key, wide.slice(3, 0, 4), cache.clone(), slots); }),
              HasSubstr("must be contiguous"));
  // key and value may be views (a fused projection's output)
  const Tensor kv = Tensor::randn({3, 4, 4}, DType::float16, 2);
  const Tensor k_cache = cache.clone();
  EXPECT_NO_THROW(op(kv.slice(1, 0, 2), kv.slice(1, 2, 4), k_cache, cache.clone(), slots));
  EXPECT_TRUE(same(k_cache.reshape({8, 2, 4}).slice(0, 0, 3), kv.slice(1, 0, 2)));
}

TEST(KVCacheWrite, RooflineCountsTheRowsWritten) {
  KVCacheWriteFwdOp op;
  const Tensor key = Tensor::randn({5, 2, 8}, DType::bfloat16, 1);
  op(key, key, Tensor::zeros({16, 4, 2, 8}, DType::bfloat16),
     Tensor::zeros({16, 4, 2, 8}, DType::bfloat16), int64_values({0, 1, 2, 3, 4}));
  const Roofline r = op.eval_roofline();
  EXPECT_EQ(r.flops, 0.0);
  // key and value read, their rows written, slot_mapping read: not the whole caches
  EXPECT_EQ(r.bytes, 2.0 * (2 * 5 * 2 * 8 * 2) + 5 * 8);
}

// ---- AttentionMergeStatesFwdOp ----------------------------------------------------------------

TEST(AttentionMergeStates, MatchesTheReferenceForEveryDType) {
  const std::int64_t tokens = 9, heads = 3, dim = 20;
  for (const DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
    const Tensor a = Tensor::randn({tokens, heads, dim}, dtype, 1);
    const Tensor b = Tensor::randn({tokens, heads, dim}, dtype, 2);
    Tensor la = Tensor::randn({heads, tokens}, DType::float32, 3, Device::cpu(), 4.0, 3.0);
    Tensor lb = Tensor::randn({heads, tokens}, DType::float32, 4, Device::cpu(), 4.0, 3.0);
    la.data<float>()[2] = kNegInf;  // only b
    lb.data<float>()[5] = kNegInf;  // only a
    la.data<float>()[7] = kNegInf;  // neither
    lb.data<float>()[7] = kNegInf;
    la.data<float>()[10] = 80.0f;  // far apart: b's weight underflows
    lb.data<float>()[10] = -20.0f;
    AttentionMergeStatesFwdOp op;
    const auto [out, lse] = op(a, la, b, lb);
    const std::vector<Tensor> ref =
        testing_util::run_reference("AttentionMergeStatesFwdOp", {a, la, b, lb}, op.param_values());
    expect_close(out, ref[0], std::string(dtype_name(dtype)) + " out");
    expect_close(lse, ref[1], "lse");
    // In closed form: entry (head 0, token 2) is b's state exactly, (0, 5) a's, (0, 7) none.
    EXPECT_EQ(lse.data<float>()[2], lb.data<float>()[2]);
    EXPECT_TRUE(same(out.slice(0, 2, 3).slice(1, 0, 1), b.slice(0, 2, 3).slice(1, 0, 1)));
    EXPECT_EQ(lse.data<float>()[5], la.data<float>()[5]);
    EXPECT_TRUE(same(out.slice(0, 5, 6).slice(1, 0, 1), a.slice(0, 5, 6).slice(1, 0, 1)));
    EXPECT_EQ(lse.data<float>()[7], kNegInf);
    EXPECT_TRUE(same(out.slice(0, 7, 8).slice(1, 0, 1), Tensor::zeros({1, 1, dim}, dtype)));
    // (head 1, token 1): lse = log(e^80 + e^-20) = 80 in float32, out = a's row.
    EXPECT_FLOAT_EQ(lse.data<float>()[10], 80.0f);
  }
}

TEST(AttentionMergeStates, SignatureRulesByTypeAndMessage) {
  const Tensor a = Tensor::randn({4, 2, 8}, DType::bfloat16, 1);
  const Tensor l = Tensor::randn({2, 4}, DType::float32, 2);
  AttentionMergeStatesFwdOp op;
  EXPECT_NO_THROW(op(a, l, a, l));
  // lse is [H, T] float32
  EXPECT_THAT(message_of([&] { op(a, l.transpose(0, 1).contiguous(), a, l); }), HasSubstr("lse_a"));
  EXPECT_THAT(message_of([&] { op(a, l, a, l.to(DType::bfloat16)); }), HasSubstr("lse_b"));
  EXPECT_THAT(message_of([&] { op(a, l, a.to(DType::float16), l); }), HasSubstr("out_b"));
  EXPECT_THROW(op(a, l, a, l, Tensor::empty({4, 2, 8}, DType::float16)), SignatureError);
  // out may be a strided buffer
  const Tensor wide = Tensor::zeros({4, 2, 16}, DType::bfloat16);
  const auto [out, lse] = op(a, l, a, l, wide.slice(2, 8, 16));
  const std::vector<Tensor> ref =
      testing_util::run_reference("AttentionMergeStatesFwdOp", {a, l, a, l}, op.param_values());
  expect_close(wide.slice(2, 8, 16), ref[0], "strided out");
  EXPECT_TRUE(same(wide.slice(2, 0, 8), Tensor::zeros({4, 2, 8}, DType::bfloat16)));
}

// ---- the bench's inputs -----------------------------------------------------------------------

TEST(AttentionFamily, WorkloadInputsAreValidInputs) {
  using Spec = InstantiatedCase::InputSpec;
  const auto spec = [](DType d, Sizes s) { return std::optional<Spec>(Spec{d, std::move(s)}); };
  const auto run_case = [](const char* name, const InstantiatedCase& inst) {
    const OpClass* op_class = find_op_class(name);
    EXPECT_NE(op_class, nullptr);
    const WorkloadInputsFn* workload_inputs = find_workload_inputs(name);
    EXPECT_NE(workload_inputs, nullptr);
    const std::vector<Tensor> inputs = (*workload_inputs)(inst, 7, Device::cpu());
    EXPECT_EQ(inputs.size(), inst.inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i)
      EXPECT_EQ(inputs[i].sizes(), inst.inputs[i]->shape);
    // The CPU implementation checks offsets and slots; the bench's check must pass.
    const std::unique_ptr<Op> op = make_op(name, inst.params);
    std::vector<Tensor> pristine;
    for (const Tensor& t : inputs) pristine.push_back(t.clone());
    const std::vector<Tensor> got = op->call(inputs);
    const std::vector<Tensor> ref = (*find_reference(name))(pristine, op->param_values());
    std::vector<Tensor> written = got;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (op_class->schema->inputs[i].mutated) written.push_back(inputs[i]);
    }
    EXPECT_EQ(written.size(), ref.size()) << name;
    for (std::size_t k = 0; k < written.size() && k < ref.size(); ++k)
      expect_close(written[k], ref[k], std::string(name) + " written tensor " + std::to_string(k));
    return inputs;
  };
  // 11 query and 13 key tokens in 3 sequences: lengths 3, 4, 4 and 4, 4, 5.
  const auto varlen = run_case(
      "GroupedQueryAttentionVarlenFwdOp",
      {{{"causal", true},
        {"softmax_scale", NoneValue{}},
        {"window_left", std::int64_t{-1}},
        {"softcap", 0.0}},
       {spec(DType::bfloat16, {11, 4, 16}), spec(DType::bfloat16, {13, 2, 16}),
        spec(DType::bfloat16, {13, 2, 16}), spec(DType::int32, {4}), spec(DType::int32, {4})}});
  EXPECT_EQ(varlen[3].to_vector(), (std::vector<double>{0, 3, 7, 11}));
  EXPECT_EQ(varlen[4].to_vector(), (std::vector<double>{0, 4, 8, 13}));
  // 10 tokens into pages of 4: pages 0..2 of the permuted blocks, distinct slots.
  const auto write = run_case(
      "KVCacheWriteFwdOp", {{},
                            {spec(DType::float16, {10, 2, 8}), spec(DType::float16, {10, 2, 8}),
                             spec(DType::float16, {5, 4, 2, 8}), spec(DType::float16, {5, 4, 2, 8}),
                             spec(DType::int64, {10})}});
  std::vector<double> slots = write[4].to_vector();
  for (std::size_t t = 0; t < slots.size(); ++t) {
    EXPECT_GE(slots[t], 0);
    EXPECT_LT(slots[t], 20);
    EXPECT_EQ(static_cast<std::int64_t>(slots[t]) % 4, static_cast<std::int64_t>(t % 4));
  }
  std::sort(slots.begin(), slots.end());
  EXPECT_EQ(std::adjacent_find(slots.begin(), slots.end()), slots.end());
  // States with -inf on either side.
  const auto merge = run_case("AttentionMergeStatesFwdOp",
                              {{},
                               {spec(DType::bfloat16, {40, 2, 8}), spec(DType::float32, {2, 40}),
                                spec(DType::bfloat16, {40, 2, 8}), spec(DType::float32, {2, 40})}});
  EXPECT_EQ(merge[1].data<float>()[0], kNegInf);
  EXPECT_EQ(merge[3].data<float>()[13], kNegInf);
}

}  // namespace
}  // namespace tileops
