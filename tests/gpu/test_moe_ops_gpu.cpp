// The MoE ops through the whole Op path on CUDA, against the double-precision references (and
// the CPU implementation for the exact outputs): routing, pre-permute, grouped GEMM with each
// activation, post-permute, and the fused MoE layer (bf16 and FP8 experts) on shapes with experts
// that receive no tokens, one token and all tokens. Outputs are poisoned before each call. Skipped
// without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "gpu/gpu_op_test_util.h"
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

TEST(GpuMoEOps, GroupedRoutingIsRefusedOnCudaNamingTheReason) {
  SKIP_WITHOUT_GPU();
  // No CUDA kernel serves n_group > 1 yet: the call must fail, never route as plain top-k.
  MoETopKRoutingFwdOp op({.top_k = 8,
                          .scoring = "sigmoid",
                          .renormalize = true,
                          .routed_scaling_factor = 2.5,
                          .n_group = 8,
                          .topk_group = 4});
  const Tensor logits = Tensor::randn({4, 256}, DType::float32, 3).to(kGpu);
  const Tensor bias = Tensor::zeros({256}, DType::float32).to(kGpu);
  try {
    op(logits, bias);
    ADD_FAILURE() << "grouped routing ran on CUDA";
  } catch (const DispatchError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("moe_routing_cuda (MoERoutingCuda: group-limited "
                                             "routing (n_group = 8, topk_group = 4) has no CUDA "
                                             "kernel yet"));
  }
  // Plain routing (n_group = 1) still runs there.
  MoETopKRoutingFwdOp plain({.top_k = 8, .scoring = "sigmoid"});
  EXPECT_NO_THROW(plain(logits, bias));
}

TEST(GpuMoEOps, TokenGroupQuantHasNoCudaKernelYet) {
  SKIP_WITHOUT_GPU();
  // Only a CPU implementation exists: a CUDA call fails through the kernel table, naming the op.
  PerTokenGroupQuantFP8FwdOp op(PerTokenGroupQuantFP8FwdOp::Params{});
  const Tensor x = Tensor::randn({4, 256}, DType::bfloat16, 1).to(kGpu);
  try {
    op(x);
    ADD_FAILURE() << "quantization ran on CUDA";
  } catch (const OpNotAvailableError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr(
                              "PerTokenGroupQuantFP8FwdOp's in-tree kernels do not run on cuda"));
  }
}

TEST(GpuMoEOps, FP8GroupedGemmHasNoCudaKernelYet) {
  SKIP_WITHOUT_GPU();
  // Only a CPU implementation exists: a CUDA call fails through the kernel table, naming the op.
  MoEGroupedGemmFP8FwdOp op(MoEGroupedGemmFP8FwdOp::Params{});
  const Tensor a = Tensor::zeros({4, 128}, DType::float8_e4m3fn).to(kGpu);
  const Tensor a_scales = Tensor::zeros({4, 1}, DType::float32).to(kGpu);
  const Tensor offsets = Tensor::zeros({3}, DType::int32).to(kGpu);
  const Tensor b = Tensor::zeros({2, 128, 128}, DType::float8_e4m3fn).to(kGpu);
  const Tensor b_scales = Tensor::zeros({2, 1, 1}, DType::float32).to(kGpu);
  try {
    op(a, a_scales, offsets, b, b_scales);
    ADD_FAILURE() << "the FP8 grouped GEMM ran on CUDA";
  } catch (const OpNotAvailableError& e) {
    EXPECT_THAT(e.what(),
                testing::HasSubstr("MoEGroupedGemmFP8FwdOp's in-tree kernels do not run on cuda"));
  }
}

TEST(GpuMoEOps, FP8MaskedGroupedGemmHasNoCudaKernelYet) {
  SKIP_WITHOUT_GPU();
  MoEGroupedGemmFP8MaskedFwdOp op(MoEGroupedGemmFP8MaskedFwdOp::Params{});
  const Tensor a = Tensor::zeros({2, 4, 128}, DType::float8_e4m3fn).to(kGpu);
  const Tensor a_scales = Tensor::zeros({2, 4, 1}, DType::float32).to(kGpu);
  const Tensor counts = Tensor::zeros({2}, DType::int32).to(kGpu);
  const Tensor b = Tensor::zeros({2, 128, 128}, DType::float8_e4m3fn).to(kGpu);
  const Tensor b_scales = Tensor::zeros({2, 1, 1}, DType::float32).to(kGpu);
  try {
    op(a, a_scales, counts, b, b_scales);
    ADD_FAILURE() << "the masked FP8 grouped GEMM ran on CUDA";
  } catch (const OpNotAvailableError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("MoEGroupedGemmFP8MaskedFwdOp's in-tree kernels do "
                                             "not run on cuda"));
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
    op(x.to(kGpu), logits.to(kGpu), w13.to(kGpu), w2.to(kGpu), bias.to(kGpu), out);
    expect_close(out, reference("FusedMoEFwdOp", {x, logits, w13, w2, bias}, op.param_values())[0],
                 "tokens=" + std::to_string(tokens));
    if (tokens == 200) {
      for (const Kernel* k : op.iter_kernels()) {
        EXPECT_TRUE(k->tune_requested());
      }
    }
  }
}

TEST(GpuMoEOps, FusedMoEWithFP8ExpertsMatchesTheReferenceOnceItsKernelsExist) {
  SKIP_WITHOUT_GPU();
  // The FP8 experts' stages select their own CUDA kernels; until the quantization and FP8
  // grouped GEMM kernels exist, the call names the missing one and this test skips.
  for (const std::int64_t tokens : {1, 16, 200}) {
    FusedMoEFwdOp op(
        {.top_k = 8, .scoring = "sigmoid", .renormalize = true, .routed_scaling_factor = 2.5});
    const std::int64_t experts = 32;
    const Tensor x = Tensor::randn({tokens, 256}, DType::bfloat16, 1);
    const Tensor logits = Tensor::randn({tokens, experts}, DType::float32, 2);
    const Tensor w13 = Tensor::randn({experts, 2 * 128, 256}, DType::float8_e4m3fn, 3);
    const Tensor w2 = Tensor::randn({experts, 256, 128}, DType::float8_e4m3fn, 4);
    const Tensor w13_scales =
        Tensor::rand({experts, 2, 2}, DType::float32, 5, Device::cpu(), 0.03, 0.06);
    const Tensor w2_scales =
        Tensor::rand({experts, 2, 1}, DType::float32, 6, Device::cpu(), 0.05, 0.09);
    const Tensor bias = Tensor::rand({experts}, DType::float32, 7, Device::cpu(), 0.0, 0.1);
    const Tensor out = poisoned({tokens, 256}, DType::bfloat16);
    try {
      op(x.to(kGpu), logits.to(kGpu), w13.to(kGpu), w2.to(kGpu), bias.to(kGpu), w13_scales.to(kGpu),
         w2_scales.to(kGpu), out);
    } catch (const OpNotAvailableError& e) {
      GTEST_SKIP() << "an FP8 stage has no CUDA kernel yet: " << e.what();
    }
    expect_close(out,
                 reference("FusedMoEFwdOp", {x, logits, w13, w2, bias, w13_scales, w2_scales},
                           op.param_values())[0],
                 "FP8 tokens=" + std::to_string(tokens));
  }
}

}  // namespace
}  // namespace tileops
