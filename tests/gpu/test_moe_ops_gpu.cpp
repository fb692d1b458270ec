// The MoE ops through the whole Op path on CUDA, against the double-precision references (and
// the CPU implementation for the exact outputs): routing, pre-permute, grouped GEMM with each
// activation, post-permute, the quantizing pre-permute (bit for bit the CPU's, fused kernel and
// unfused fallback), and the fused MoE layer (bf16 against the layer's reference, FP8 stage by
// stage) on shapes with experts that receive no tokens, one token and all tokens; group-limited
// routing and the per-token-group FP8 quantization (the quant family) against the CPU
// implementation. Outputs are poisoned before each call. Skipped without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <tuple>

#include "gpu/fp8_gemm_check.h"
#include "gpu/gpu_op_test_util.h"
#include "kernels/moe/moe_permute_impls.h"
#include "ops/moe_test_inputs.h"
#include "tileops/ops/moe.h"
#include "tileops/ops/quant.h"

namespace tileops {
namespace {

using gpu_test::expect_close;
using gpu_test::kGpu;
using gpu_test::poisoned;
using namespace moe_test;  // NOLINT: the tests' inputs

std::vector<Tensor> reference(const char* op, const std::vector<Tensor>& in, const ParamMap& p) {
  return (*find_reference(op))(in, p);
}

TEST(GpuMoEOps, RoutingMatchesTheCpuImplementation) {
  SKIP_WITHOUT_GPU();
  for (const std::string scoring : {"softmax", "sigmoid"}) {
    for (const auto& [tokens, experts, top_k] : std::vector<std::tuple<int, int, int>>{
             {1, 256, 8}, {37, 128, 8}, {5, 7, 3}, {300, 64, 6}}) {
      const MoETopKRoutingFwdOp::Params p{
          .top_k = top_k, .scoring = scoring, .renormalize = true, .routed_scaling_factor = 2.5};
      MoETopKRoutingFwdOp cpu_op(p);
      MoETopKRoutingFwdOp gpu_op(p);
      const Tensor logits = Tensor::randn({tokens, experts}, DType::bfloat16, 3);
      const Tensor bias = scoring == "sigmoid"
                              ? Tensor::rand({experts}, DType::float32, 4, Device::cpu(), 0.0, 0.1)
                              : Tensor();
      const auto [w, ids] = gpu_op(logits.to(kGpu), bias.defined() ? bias.to(kGpu) : bias);
      const auto [cw, cids] = cpu_op(logits, bias);
      const std::string what = scoring + " " + logits.str();
      EXPECT_EQ(ids.to(Device::cpu()).to_vector(), cids.to_vector()) << what;
      expect_close(w, cw, what);
    }
  }
}

TEST(GpuMoEOps, GroupedRoutingMatchesTheCpuImplementation) {
  SKIP_WITHOUT_GPU();
  // DeepSeek-V3's rule (8 groups, 4 kept, sigmoid + bias) and one without a bias (largest-member
  // group score), through the Op path: the ids of the CPU implementation exactly.
  for (const bool with_bias : {true, false}) {
    for (const int tokens : {1, 64, 333}) {
      const MoETopKRoutingFwdOp::Params p{.top_k = 8,
                                          .scoring = "sigmoid",
                                          .renormalize = true,
                                          .routed_scaling_factor = 2.5,
                                          .n_group = 8,
                                          .topk_group = 4};
      MoETopKRoutingFwdOp cpu_op(p);
      MoETopKRoutingFwdOp gpu_op(p);
      const Tensor logits = Tensor::randn({tokens, 256}, DType::bfloat16, 7 + tokens);
      const Tensor bias =
          with_bias ? Tensor::rand({256}, DType::float32, 8, Device::cpu(), 0.0, 0.1) : Tensor();
      const auto [w, ids] = gpu_op(logits.to(kGpu), with_bias ? bias.to(kGpu) : bias);
      const auto [cw, cids] = cpu_op(logits, bias);
      const std::string what = (with_bias ? "bias " : "no bias ") + logits.str();
      EXPECT_EQ(ids.to(Device::cpu()).to_vector(), cids.to_vector()) << what;
      expect_close(w, cw, what);
    }
  }
}

TEST(GpuMoEOps, TokenGroupQuantMatchesTheCpuImplementationBitForBit) {
  SKIP_WITHOUT_GPU();
  // Through the Op path (kernel table, contiguous copies, output allocation): the codes and the
  // scales of the CPU implementation, bit for bit, and the double reference's values.
  for (const DType dtype : {DType::bfloat16, DType::float32, DType::float16}) {
    for (const auto& [rows, cols, group] : std::vector<std::tuple<int, int, int>>{
             {4, 256, 128}, {33, 7168, 128}, {5, 96, 32}, {3, 21, 7}, {0, 256, 128}}) {
      PerTokenGroupQuantFP8FwdOp op({.group_size = group});
      const Tensor x = Tensor::randn({rows, cols}, dtype, 9 + rows);
      const auto [q, scales] = op(x.to(kGpu));
      const auto [cq, cscales] = op(x);
      const std::string what = std::string(dtype_name(dtype)) + " " + x.str();
      ASSERT_EQ(q.dtype(), DType::float8_e4m3fn) << what;
      const Tensor hq = q.to(Device::cpu());
      const Tensor hs = scales.to(Device::cpu());
      ASSERT_EQ(hq.nbytes(), cq.nbytes()) << what;
      ASSERT_EQ(hs.nbytes(), cscales.nbytes()) << what;
      if (cq.nbytes() == 0) continue;
      EXPECT_EQ(0, std::memcmp(hq.data_ptr(), cq.data_ptr(), cq.nbytes())) << what << ": q";
      EXPECT_EQ(0, std::memcmp(hs.data_ptr(), cscales.data_ptr(), cscales.nbytes()))
          << what << ": scales";
      const auto ref = reference("PerTokenGroupQuantFP8FwdOp", {x}, op.param_values());
      EXPECT_EQ(hq.to_vector(), ref[0].to_vector()) << what << ": q against the reference";
      EXPECT_EQ(hs.to_vector(), ref[1].to_vector()) << what << ": scales against the reference";
    }
  }
}

TEST(GpuMoEOps, PermutesMatchTheCpuImplementationExactly) {
  SKIP_WITHOUT_GPU();
  for (const auto& [tokens, top_k, experts, mapped] : std::vector<std::tuple<int, int, int, bool>>{
           {1, 1, 4, false}, {33, 8, 256, false}, {512, 8, 32, true}, {0, 2, 4, false}}) {
    const std::int64_t global = mapped ? 256 : experts;
    Tensor map;
    if (mapped) {
      map = Tensor::empty({global}, DType::int32);
      for (std::int64_t g = 0; g < global; ++g) map.set_at({g}, g % 8 == 0 ? g / 8 : -1);
    }
    MoEPrePermuteFwdOp cpu_op({.num_experts = experts});
    MoEPrePermuteFwdOp gpu_op({.num_experts = experts});
    const Tensor x = Tensor::randn({tokens, 136}, DType::bfloat16, 5);
    const Tensor ids = distinct_ids(tokens, top_k, global, 6);
    const auto [xp, off, inv] =
        gpu_op(x.to(kGpu), ids.to(kGpu), map.defined() ? map.to(kGpu) : map);
    const auto [cxp, coff, cinv] = cpu_op(x, ids, map);
    EXPECT_EQ(off.to(Device::cpu()).to_vector(), coff.to_vector());
    EXPECT_EQ(inv.to(Device::cpu()).to_vector(), cinv.to_vector());
    EXPECT_EQ(xp.to(Device::cpu()).to_vector(), cxp.to_vector());
    // Post-permute of those rows back: against the CPU implementation.
    MoEPostPermuteFwdOp post({.scale = 0.5});
    const Tensor w = Tensor::rand({tokens, top_k}, DType::float32, 7, Device::cpu(), 0.0, 1.0);
    const Tensor out = poisoned({tokens, 136}, DType::bfloat16);
    post(xp, w.to(kGpu), inv, out);
    MoEPostPermuteFwdOp cpu_post({.scale = 0.5});
    expect_close(out, cpu_post(cxp, w, cinv), "post-permute");
  }
}

/// The kernel `op` last ran, as its implementation class (nullptr: another one).
template <class Impl>
const Impl* ran(Op& op) {
  for (Kernel* k : op.iter_kernels()) {
    if (const auto* impl = dynamic_cast<const Impl*>(k)) return impl;
  }
  return nullptr;
}

TEST(GpuMoEOps, PrePermuteQuantMatchesTheCpuImplementationBitForBit) {
  SKIP_WITHOUT_GPU();
  // Through the Op path: codes, scales, offsets and inverse of the CPU implementation (the
  // pre-permute then the quantization), bit for bit. The fused kernel serves the group sizes
  // its vector layout takes; the others (96 / 8 = 12, 3) take the unfused pair of kernels.
  struct Case {
    int tokens, top_k, experts, hidden, group;
    bool mapped, fused;
  };
  for (const DType dtype : {DType::bfloat16, DType::float16, DType::float32}) {
    const bool f32 = dtype == DType::float32;
    for (const Case& c : std::vector<Case>{{1, 1, 4, 128, 128, false, true},
                                           {600, 8, 256, 7168, 128, false, true},  // tokens first
                                           {200, 8, 32, 7168, 128, true, true},
                                           {33, 8, 256, 1024, f32 ? 8 : 16, false, true},
                                           {7, 3, 5, 192, 96, false, false},
                                           {5, 2, 3, 30, 3, true, false},
                                           {0, 2, 4, 256, 128, false, true}}) {
      const std::int64_t global = c.mapped ? 2 * c.experts : c.experts;
      Tensor map;
      if (c.mapped) {  // this rank holds the even global experts
        map = Tensor::empty({global}, DType::int32);
        for (std::int64_t g = 0; g < global; ++g) map.set_at({g}, g % 2 == 0 ? g / 2 : -1);
      }
      const MoEPrePermuteQuantFP8FwdOp::Params p{.num_experts = c.experts, .group_size = c.group};
      MoEPrePermuteQuantFP8FwdOp cpu_op(p);
      MoEPrePermuteQuantFP8FwdOp gpu_op(p);
      const Tensor x = Tensor::randn({c.tokens, c.hidden}, dtype, 3 + c.tokens);
      const Tensor ids = distinct_ids(c.tokens, c.top_k, global, 4 + c.tokens);
      const auto [q, scales, off, inv] =
          gpu_op(x.to(kGpu), ids.to(kGpu), map.defined() ? map.to(kGpu) : map);
      const auto [cq, cscales, coff, cinv] = cpu_op(x, ids, map);
      const std::string what = std::string(dtype_name(dtype)) + " " + x.str() +
                               " k=" + std::to_string(c.top_k) + " g=" + std::to_string(c.group);
#if TILEOPS_WITH_CUDA  // the implementation classes exist in CUDA builds only
      EXPECT_EQ(ran<MoEPrePermuteQuantCuda>(gpu_op) != nullptr, c.fused) << what;
      EXPECT_EQ(ran<MoEPrePermuteQuantUnfusedCuda>(gpu_op) != nullptr, !c.fused) << what;
#endif
      EXPECT_EQ(off.to(Device::cpu()).to_vector(), coff.to_vector()) << what;
      EXPECT_EQ(inv.to(Device::cpu()).to_vector(), cinv.to_vector()) << what;
      const Tensor hq = q.to(Device::cpu());
      const Tensor hs = scales.to(Device::cpu());
      ASSERT_EQ(hq.nbytes(), cq.nbytes()) << what;
      ASSERT_EQ(hs.nbytes(), cscales.nbytes()) << what;
      if (cq.nbytes() == 0) continue;
      EXPECT_EQ(0, std::memcmp(hq.data_ptr(), cq.data_ptr(), cq.nbytes())) << what << ": q";
      EXPECT_EQ(0, std::memcmp(hs.data_ptr(), cscales.data_ptr(), cscales.nbytes()))
          << what << ": scales";
    }
  }
  // x at an address that is not a whole vector (one bfloat16 in): copied, then the fused kernel.
  const Tensor flat = Tensor::randn({1 + 9 * 256}, DType::bfloat16, 8);
  const Tensor x = flat.to(kGpu).slice(0, 1, 1 + 9 * 256).reshape({9, 256});
  const Tensor ids = distinct_ids(9, 4, 16, 9);
  MoEPrePermuteQuantFP8FwdOp gpu_op({.num_experts = 16});
  MoEPrePermuteQuantFP8FwdOp cpu_op({.num_experts = 16});
  const auto [q, scales, off, inv] = gpu_op(x, ids.to(kGpu));
  const auto [cq, cscales, coff, cinv] = cpu_op(x.to(Device::cpu()), ids);
#if TILEOPS_WITH_CUDA
  EXPECT_NE(ran<MoEPrePermuteQuantCuda>(gpu_op), nullptr);
#endif
  const Tensor hq = q.to(Device::cpu());
  const Tensor hs = scales.to(Device::cpu());
  EXPECT_EQ(0, std::memcmp(hq.data_ptr(), cq.data_ptr(), cq.nbytes())) << "unaligned x: q";
  EXPECT_EQ(0, std::memcmp(hs.data_ptr(), cscales.data_ptr(), cscales.nbytes()))
      << "unaligned x: scales";
}

TEST(GpuMoEOps, GroupedGemmMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::vector<std::int32_t>> counts = {
      {0, 1, 130, 0, 64}, {257}, {3, 3, 3, 3, 3, 3, 3, 3}, {0, 0, 0}};
  for (const std::string act : {"none", "silu_and_mul", "gelu_and_mul"}) {
    for (const DType dtype : {DType::bfloat16, DType::float16}) {
      for (const auto& c : counts) {
        for (const std::int64_t k : {64, 200, 37}) {
          const auto experts = static_cast<std::int64_t>(c.size());
          const std::int64_t rows = std::accumulate(c.begin(), c.end(), 0) + 5;
          MoEGroupedGemmFwdOp op({.activation = act});
          const Tensor a = Tensor::randn({rows, k}, dtype, 8);
          const Tensor off = offsets_of(c);
          const Tensor b = weight({experts, 96, k}, dtype, 9);
          const Tensor out = poisoned({rows, act == "none" ? 96 : 48}, dtype);
          op(a.to(kGpu), off.to(kGpu), b.to(kGpu), out);
          expect_close(out, reference("MoEGroupedGemmFwdOp", {a, off, b}, op.param_values())[0],
                       act + " " + std::string(dtype_name(dtype)) + " K=" + std::to_string(k) +
                           " rows=" + std::to_string(rows) + " " + op.kernel_config().value_or(""));
        }
      }
    }
  }
}

TEST(GpuMoEOps, FusedMoEMatchesTheReferenceAndTunes) {
  SKIP_WITHOUT_GPU();
  for (const std::int64_t tokens : {1, 16, 200}) {
    FusedMoEFwdOp op(
        {.top_k = 8, .scoring = "sigmoid", .renormalize = true, .routed_scaling_factor = 2.5});
    if (tokens == 200) op.request_tune();
    const std::int64_t experts = 32;
    const Tensor x = Tensor::randn({tokens, 256}, DType::bfloat16, 1);
    const Tensor logits = Tensor::randn({tokens, experts}, DType::float32, 2);
    const Tensor w13 = weight({experts, 2 * 128, 256}, DType::bfloat16, 3);
    const Tensor w2 = weight({experts, 256, 128}, DType::bfloat16, 4);
    const Tensor bias = Tensor::rand({experts}, DType::float32, 5, Device::cpu(), 0.0, 0.1);
    const Tensor out = poisoned({tokens, 256}, DType::bfloat16);
    op(x.to(kGpu), logits.to(kGpu), w13.to(kGpu), w2.to(kGpu), bias.to(kGpu), Tensor(), Tensor(),
       out);
    expect_close(out, reference("FusedMoEFwdOp", {x, logits, w13, w2, bias}, op.param_values())[0],
                 "tokens=" + std::to_string(tokens));
    if (tokens == 200) {
      for (const Kernel* k : op.iter_kernels()) {
        EXPECT_TRUE(k->tune_requested());
      }
    }
  }
}

// Stage by stage, each stage against its reference fed the stage's own inputs, and the layer bit
// for bit those stages: a whole-layer reference re-quantizes its own h, and where h lies within
// the GEMM's error of an e4m3 rounding boundary the two quantizations differ by a step of up to
// 1/8 of the value; the interval bound that allows for every such flip (tests/ops/
// fp8_moe_bound.h) is far wider than |y| with the tensor core's accumulation (docs/design/moe.md).
// Routing ids and both quantizations are exact; the GEMMs are inside the derived per-element
// bound (E_cuda, tests/ops/grouped_gemm_fp8_tolerance.h); the post-permute within bfloat16's.
TEST(GpuMoEOps, FusedMoEWithFP8ExpertsMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  const MoETopKRoutingFwdOp::Params routing_params{
      .top_k = 8, .scoring = "sigmoid", .renormalize = true, .routed_scaling_factor = 2.5};
  for (const std::int64_t tokens : {1, 16, 200}) {
    const std::string what = "FP8 tokens=" + std::to_string(tokens);
    FusedMoEFwdOp op({.top_k = routing_params.top_k,
                      .scoring = routing_params.scoring,
                      .renormalize = routing_params.renormalize,
                      .routed_scaling_factor = routing_params.routed_scaling_factor});
    const std::int64_t experts = 32;
    const Tensor x = Tensor::randn({tokens, 256}, DType::bfloat16, 1).to(kGpu);
    const Tensor logits = Tensor::randn({tokens, experts}, DType::float32, 2).to(kGpu);
    const Tensor w13 = Tensor::randn({experts, 2 * 128, 256}, DType::float8_e4m3fn, 3).to(kGpu);
    const Tensor w2 = Tensor::randn({experts, 256, 128}, DType::float8_e4m3fn, 4).to(kGpu);
    const Tensor s13 =
        Tensor::rand({experts, 2, 2}, DType::float32, 5, Device::cpu(), 0.03, 0.06).to(kGpu);
    const Tensor s2 =
        Tensor::rand({experts, 2, 1}, DType::float32, 6, Device::cpu(), 0.05, 0.09).to(kGpu);
    const Tensor bias =
        Tensor::rand({experts}, DType::float32, 7, Device::cpu(), 0.0, 0.1).to(kGpu);
    const Tensor out = poisoned({tokens, 256}, DType::bfloat16);
    op(x, logits, w13, w2, bias, s13, s2, out);

    // The stages by hand on the GPU (inputs there, so each runs its CUDA kernel): the layer's bits.
    MoETopKRoutingFwdOp routing(routing_params);
    MoEPrePermuteQuantFP8FwdOp pre_quant({.num_experts = experts});
    MoEGroupedGemmFP8FwdOp gate_up({.activation = "silu_and_mul"});
    PerTokenGroupQuantFP8FwdOp quant({.group_size = 128});
    MoEGroupedGemmFP8FwdOp down(MoEGroupedGemmFP8FwdOp::Params{});
    MoEPostPermuteFwdOp post(MoEPostPermuteFwdOp::Params{});
    const auto [tw, tid] = routing(logits, bias);
    const auto [xq, xs, offsets, inverse] = pre_quant(x, tid);
    const Tensor h = gate_up(xq, xs, offsets, w13, s13);
    const auto [hq, hs] = quant(h);
    const Tensor d = down(hq, hs, offsets, w2, s2);
    const Tensor y = post(d, tw, inverse);
    EXPECT_EQ(out.to(Device::cpu()).to_vector(), y.to(Device::cpu()).to_vector()) << what;

    // Each stage against its reference on the stage's own inputs.
    const auto host = [](const Tensor& t) { return t.to(Device::cpu()); };
    const auto routed =
        reference("MoETopKRoutingFwdOp", {host(logits), host(bias)}, routing.param_values());
    EXPECT_EQ(host(tid).to_vector(), routed[1].to_vector()) << what;
    expect_close(tw, routed[0], what + " routing weights");
    const auto permuted = reference("MoEPrePermuteQuantFP8FwdOp", {host(x), host(tid), Tensor()},
                                    pre_quant.param_values());
    const Tensor got_pre[] = {xq, xs, offsets, inverse};
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(host(got_pre[i]).to_vector(), permuted[i].to_vector()) << what << " pre " << i;
    }
    fp8_gemm_check::check(
        fp8_gemm_check::problem_of(what + " gate_up", "silu_and_mul", xq, xs, offsets, w13, s13),
        host(h).to_vector(), what + " gate_up");
    const auto quantized = reference("PerTokenGroupQuantFP8FwdOp", {host(h)}, quant.param_values());
    EXPECT_EQ(host(hq).to_vector(), quantized[0].to_vector()) << what << " h quantized";
    EXPECT_EQ(host(hs).to_vector(), quantized[1].to_vector()) << what << " h scales";
    fp8_gemm_check::check(
        fp8_gemm_check::problem_of(what + " down", "none", hq, hs, offsets, w2, s2),
        host(d).to_vector(), what + " down");
    expect_close(y,
                 reference("MoEPostPermuteFwdOp", {host(d), host(tw), host(inverse)},
                           post.param_values())[0],
                 what + " post-permute");
  }
}

}  // namespace
}  // namespace tileops
