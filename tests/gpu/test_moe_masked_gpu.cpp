// The masked decode path on CUDA through the Op path: MoEPrePermuteQuantFP8MaskedFwdOp's counts,
// inverse and kept rows bit for bit the CPU implementation's (and its defined overflow: the true
// count, the pairs past max_m dropped); FusedMoEExpertsFwdOp's masked route bit for bit the
// contiguous route's, and captured whole in a CUDA graph, replayed on new ids and x, equal bit
// for bit to an eager call on them. Skipped without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/cuda_graph_test_util.h"
#include "gpu/gpu_op_test_util.h"
#include "kernels/moe/moe_permute_impls.h"
#include "ops/moe_test_inputs.h"
#include "tileops/core/cuda.h"
#include "tileops/ops/moe.h"

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace tileops {
namespace {

using gpu_test::kGpu;
using gpu_test::poisoned;
using namespace moe_test;  // NOLINT: the tests' inputs

/// Rows [0, count) of expert e of the masked [E, max_m, cols] host tensors a and b are equal.
bool same_rows(const Tensor& a, const Tensor& b, std::int64_t e, std::int64_t count) {
  const std::int64_t row_bytes = a.nbytes() / (a.size(0) * a.size(1));
  const std::int64_t first = e * a.size(1) * row_bytes;
  return std::memcmp(static_cast<const std::uint8_t*>(a.data_ptr()) + first,
                     static_cast<const std::uint8_t*>(b.data_ptr()) + first,
                     static_cast<std::size_t>(count * row_bytes)) == 0;
}

TEST(GpuMoEOps, PrePermuteQuantMaskedMatchesTheCpuImplementationBitForBit) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int tokens, top_k, experts, hidden, group;
    bool mapped;
  };
  for (const DType dtype : {DType::bfloat16, DType::float16, DType::float32}) {
    const bool f32 = dtype == DType::float32;
    for (const Case& c : std::vector<Case>{{1, 1, 4, 128, 128, false},
                                           {64, 8, 256, 7168, 128, false},
                                           {200, 8, 32, 7168, 128, true},
                                           {33, 8, 256, 1024, f32 ? 8 : 16, false},
                                           {1100, 8, 64, 512, 128, true},  // ranked on many blocks
                                           {0, 2, 4, 256, 128, false}}) {
      const std::int64_t global = c.mapped ? 2 * c.experts : c.experts;
      Tensor map;
      if (c.mapped) {  // this rank holds the even global experts
        map = Tensor::empty({global}, DType::int32);
        for (std::int64_t g = 0; g < global; ++g) map.set_at({g}, g % 2 == 0 ? g / 2 : -1);
      }
      const std::int64_t max_m = std::max(1, c.tokens);
      const MoEPrePermuteQuantFP8MaskedFwdOp::Params p{
          .num_experts = c.experts, .max_m = max_m, .group_size = c.group};
      MoEPrePermuteQuantFP8MaskedFwdOp cpu_op(p);
      MoEPrePermuteQuantFP8MaskedFwdOp gpu_op(p);
      const Tensor x = Tensor::randn({c.tokens, c.hidden}, dtype, 3 + c.tokens);
      const Tensor ids = distinct_ids(c.tokens, c.top_k, global, 4 + c.tokens);
      const auto [a, as, counts, inv] =
          gpu_op(x.to(kGpu), ids.to(kGpu), map.defined() ? map.to(kGpu) : map);
      const auto [ca, cas, ccounts, cinv] = cpu_op(x, ids, map);
      const std::string what = std::string(dtype_name(dtype)) + " " + x.str() +
                               " k=" + std::to_string(c.top_k) + " g=" + std::to_string(c.group);
#if TILEOPS_WITH_CUDA
      EXPECT_NE(dynamic_cast<const MoEPrePermuteQuantMaskedCuda*>(gpu_op.iter_kernels().front()),
                nullptr)
          << what;
#endif
      const std::vector<double> n = counts.to(Device::cpu()).to_vector();
      EXPECT_EQ(n, ccounts.to_vector()) << what;
      EXPECT_EQ(inv.to(Device::cpu()).to_vector(), cinv.to_vector()) << what;
      const Tensor ha = a.to(Device::cpu());
      const Tensor has = as.to(Device::cpu());
      for (std::int64_t e = 0; e < c.experts; ++e) {
        const auto count = static_cast<std::int64_t>(n[e]);
        EXPECT_TRUE(same_rows(ha, ca, e, count)) << what << " expert " << e;
        EXPECT_TRUE(same_rows(has, cas, e, count)) << what << " scales of expert " << e;
      }
    }
  }
}

TEST(GpuMoEOps, PrePermuteQuantMaskedOverflowKeepsTheTrueCountAndDropsThePairsPastMaxM) {
  SKIP_WITHOUT_GPU();
  // Four tokens all routed to expert 2 with max_m = 3: the CPU raises; the kernel cannot, so it
  // writes count 4, rows 0..2 (the CPU's rows with room for them) and inverse -1 for the fourth.
  const Tensor x = Tensor::randn({4, 256}, DType::bfloat16, 1);
  const Tensor ids = Tensor::full({4, 1}, 2.0, DType::int32);
  MoEPrePermuteQuantFP8MaskedFwdOp gpu_op({.num_experts = 3, .max_m = 3});
  const auto [a, as, counts, inv] = gpu_op(x.to(kGpu), ids.to(kGpu));
  EXPECT_EQ(counts.to(Device::cpu()).to_vector(), (std::vector<double>{0, 0, 4}));
  EXPECT_EQ(inv.to(Device::cpu()).to_vector(), (std::vector<double>{6, 7, 8, -1}));
  MoEPrePermuteQuantFP8MaskedFwdOp cpu_op({.num_experts = 3, .max_m = 4});
  const auto [ca, cas, ccounts, cinv] = cpu_op(x, ids);
  const Tensor ha = a.to(Device::cpu());
  EXPECT_EQ(std::memcmp(static_cast<const std::uint8_t*>(ha.data_ptr()) + 2 * 3 * 256,
                        static_cast<const std::uint8_t*>(ca.data_ptr()) + 2 * 4 * 256, 3 * 256),
            0);
}

#if TILEOPS_WITH_CUDA  // the helpers of the CUDA-graph test
struct FP8Layer {
  Tensor x, weights, ids, w13, w2, s13, s2;
};

FP8Layer fp8_layer(std::int64_t tokens, std::int64_t top_k, std::int64_t experts,
                   std::uint64_t seed) {
  return {
      Tensor::randn({tokens, 256}, DType::bfloat16, seed).to(kGpu),
      Tensor::rand({tokens, top_k}, DType::float32, seed + 1).to(kGpu),
      distinct_ids(tokens, top_k, experts, seed + 2).to(kGpu),
      Tensor::randn({experts, 256, 256}, DType::float8_e4m3fn, seed + 3).to(kGpu),
      Tensor::randn({experts, 256, 128}, DType::float8_e4m3fn, seed + 4).to(kGpu),
      Tensor::rand({experts, 2, 2}, DType::float32, seed + 5, Device::cpu(), 0.03, 0.06).to(kGpu),
      Tensor::rand({experts, 2, 1}, DType::float32, seed + 6, Device::cpu(), 0.05, 0.09).to(kGpu)};
}

/// How many elements of a and b hold the same bits (both on any device).
std::int64_t equal_elements(const Tensor& a, const Tensor& b) {
  const Tensor ha = a.to(Device::cpu());
  const Tensor hb = b.to(Device::cpu());
  const auto* p = static_cast<const std::uint16_t*>(ha.data_ptr());
  const auto* q = static_cast<const std::uint16_t*>(hb.data_ptr());
  std::int64_t same = 0;
  for (std::int64_t i = 0; i < ha.numel(); ++i) same += p[i] == q[i] ? 1 : 0;
  return same;
}
#endif

TEST(GpuMoEOps, FusedMoEExpertsMaskedRouteMatchesAndReplaysFromACudaGraph) {
  SKIP_WITHOUT_GPU();
#if TILEOPS_WITH_CUDA
  const std::int64_t tokens = 16;
  const std::int64_t experts = 32;
  const FP8Layer l = fp8_layer(tokens, 8, experts, 11);
  FusedMoEExpertsFwdOp contiguous({});
  FusedMoEExpertsFwdOp masked({.masked_max_rows = 4});  // 16 x 8 pairs <= 4 x 32
  const Tensor want = contiguous(l.x, l.weights, l.ids, l.w13, l.w2, Tensor(), l.s13, l.s2);
  const Tensor got = poisoned({tokens, 256}, DType::bfloat16);
  masked(l.x, l.weights, l.ids, l.w13, l.w2, Tensor(), l.s13, l.s2, got);
  EXPECT_EQ(masked.held_delegates().front()->name(), "MoEPrePermuteQuantFP8MaskedFwdOp");
  // The same bits as the contiguous route: both GEMMs compute a row alike (same promotion per K
  // block) and every other stage is exact. The contiguous route is checked stage by stage
  // against the references by FusedMoEWithFP8ExpertsMatchesTheReference.
  EXPECT_EQ(equal_elements(got, want), want.numel()) << "masked against contiguous";

  // The whole masked route captured once, replayed on new ids and x written into its inputs.
  const Tensor replayed = poisoned({tokens, 256}, DType::bfloat16);
  gpu_test::CapturedGraph graph;
  ASSERT_TRUE(graph.capture([&](cudaStream_t) {
    masked(l.x, l.weights, l.ids, l.w13, l.w2, Tensor(), l.s13, l.s2, replayed);
  }));
  cudaStream_t stream = graph.stream();
  const FP8Layer next = fp8_layer(tokens, 8, experts, 21);
  // The new inputs go in on the replay's stream, after the work that made them: a plain
  // cudaMemcpy runs on the legacy stream, which a non-blocking stream does not wait for (and a
  // device-to-device one does not wait for the host either), so the replay could read the old
  // or half-written inputs.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(l.x.data_ptr(), next.x.data_ptr(), l.x.nbytes(),
                            cudaMemcpyDeviceToDevice, stream),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(l.ids.data_ptr(), next.ids.data_ptr(), l.ids.nbytes(),
                            cudaMemcpyDeviceToDevice, stream),
            cudaSuccess);
  ASSERT_TRUE(graph.replay());
  const Tensor eager = masked(next.x, l.weights, next.ids, l.w13, l.w2, Tensor(), l.s13, l.s2);
  EXPECT_EQ(equal_elements(replayed, eager), eager.numel()) << "graph replay against eager";
  // A second replay with the inputs unchanged: the same bits again.
  ASSERT_TRUE(graph.replay());
  EXPECT_EQ(equal_elements(replayed, eager), eager.numel()) << "second replay";
#endif
}

}  // namespace
}  // namespace tileops
