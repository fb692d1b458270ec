// Expert parallelism on one GPU: the NCCL transport with a world of one (the most one H200 can
// host: NCCL refuses two ranks on one device), whose prepare/finalize packs and combines on the
// device. A world of one sends every token once to itself, so the layer must equal the
// single-device FusedMoE bit for bit; the device packing must also equal the host packing of the
// in-process group on the same inputs. Several GPUs: `tileops ep-check` (scripts/ep-launch.sh).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <span>

#include "comm/loopback_transport.h"
#include "gpu/gpu_op_test_util.h"
#include "ops/ops_test_util.h"
#include "tileops/ops/moe.h"
#include "tileops/ops/moe_nccl.h"

namespace tileops {
namespace {

using gpu_test::kGpu;
using testing::HasSubstr;
using testing_util::message_of;

#define SKIP_WITHOUT_NCCL_GPU() \
  SKIP_WITHOUT_GPU();           \
  if (!nccl_available()) GTEST_SKIP() << "built without NCCL"

std::shared_ptr<ExpertParallelTransport> world_of_one() {
  return make_nccl_transport(nccl_unique_id(), {.world_size = 1, .rank = 0, .device = 0});
}

Tensor weights(Sizes sizes, DType dtype, std::uint64_t seed) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(sizes.back()));
  return Tensor::rand(std::move(sizes), dtype, seed, kGpu, -bound, bound);
}

TEST(ExpertParallelGpu, WorldOfOneOverNcclEqualsTheSingleDeviceFusedMoE) {
  SKIP_WITHOUT_NCCL_GPU();
  const auto transport = world_of_one();
  EXPECT_EQ(transport->device(), kGpu);
  for (const DType dtype : {DType::bfloat16, DType::float16}) {
    const std::int64_t tokens = 77, experts = 16, hidden = 256, ffn = 128, top_k = 4;
    const Tensor x = Tensor::randn({tokens, hidden}, dtype, 1, kGpu);
    const Tensor logits = Tensor::randn({tokens, experts}, DType::float32, 2, kGpu);
    const Tensor w13 = weights({experts, 2 * ffn, hidden}, dtype, 3);
    const Tensor w2 = weights({experts, hidden, ffn}, dtype, 4);
    const FusedMoEFwdOp::Params params{.top_k = top_k, .renormalize = true};
    FusedMoEFwdOp single(params);
    const Tensor ref = single(x, logits, w13, w2);
    auto pf = std::make_shared<ExpertParallelPrepareFinalize>(
        transport, ExpertParallelConfig{experts, top_k, hidden, dtype});
    FusedMoEFwdOp ep(params, {},
                     std::make_shared<FusedMoEExpertsFwdOp>(FusedMoEExpertsFwdOp::Params{}), pf);
    for (int call = 0; call < 2; ++call) {  // the second call reuses the group
      const Tensor y = ep(x, logits, w13, w2);
      EXPECT_EQ(y.device(), kGpu);
      EXPECT_EQ(max_relative_error(y, ref), 0.0) << dtype_name(dtype) << " call " << call;
    }
  }
}

TEST(ExpertParallelGpu, DevicePackingEqualsTheHostPacking) {
  SKIP_WITHOUT_NCCL_GPU();
  // Rows, ids and weights through prepare, then arbitrary partials through finalize: the GPU
  // transport (device kernels) and the in-process group (host loops) must agree exactly.
  const std::int64_t tokens = 33, experts = 8, hidden = 24, top_k = 3;  // 48-byte rows
  const Tensor x = Tensor::randn({tokens, hidden}, DType::float32, 5);
  const Tensor w = Tensor::rand({tokens, top_k}, DType::float32, 6);
  const Tensor ids = Tensor::rand({tokens, top_k}, DType::int32, 7, Device::cpu(), 0, experts);
  const ExpertParallelConfig config{experts, top_k, hidden, DType::float32};
  LoopbackGroup group(1, std::chrono::seconds(10));
  ExpertParallelPrepareFinalize host(group.transport(0), config);
  ExpertParallelPrepareFinalize device(world_of_one(), config);
  const MoEPreparedTokens a = host.prepare(x, w, ids);
  const MoEPreparedTokens b = device.prepare(x.to(kGpu), w.to(kGpu), ids.to(kGpu));
  ASSERT_EQ(b.x.device(), kGpu);
  EXPECT_EQ(max_relative_error(b.x.to(Device::cpu()), a.x), 0.0);
  EXPECT_EQ(max_relative_error(b.topk_weights.to(Device::cpu()), a.topk_weights), 0.0);
  const Tensor ids_a = a.topk_ids, ids_b = b.topk_ids.to(Device::cpu());
  for (std::int64_t i = 0; i < ids_a.numel(); ++i) {
    ASSERT_EQ(ids_a.data<std::int32_t>()[i], ids_b.data<std::int32_t>()[i]) << i;
  }
  const Tensor partial = Tensor::randn({a.x.size(0), hidden}, DType::float32, 8);
  const Tensor y_host = Tensor::empty({tokens, hidden}, DType::float32);
  const Tensor y_device = Tensor::empty({tokens, hidden}, DType::float32, kGpu);
  host.finalize(partial, y_host);
  device.finalize(partial.to(kGpu), y_device);
  EXPECT_EQ(max_relative_error(y_device.to(Device::cpu()), y_host), 0.0);
}

TEST(ExpertParallelGpu, ByteCountsBeyondTheBuffersAreRefused) {
  SKIP_WITHOUT_NCCL_GPU();
  const auto transport = world_of_one();
  const Tensor send = Tensor::rand({64}, DType::uint8, 9, kGpu, 0, 256);
  const Tensor recv = Tensor::zeros({64}, DType::uint8, kGpu);
  const std::span<const std::byte> out{static_cast<const std::byte*>(send.data_ptr()), 64};
  const std::span<std::byte> in{static_cast<std::byte*>(recv.data_ptr()), 64};
  const std::vector<std::int64_t> too_many = {65};
  EXPECT_THAT(message_of([&] { transport->all_to_all(out, too_many, in, too_many); }),
              HasSubstr("exceed the buffers"));
  // The refusal happens before anything is enqueued: the group stays usable and a world of one
  // copies to itself.
  const std::vector<std::int64_t> fine = {64};
  transport->all_to_all(out, fine, in, fine);
  const Tensor a = send.to(Device::cpu()), b = recv.to(Device::cpu());
  for (std::int64_t i = 0; i < 64; ++i) {
    ASSERT_EQ(a.data<std::uint8_t>()[i], b.data<std::uint8_t>()[i]) << i;
  }
}

}  // namespace
}  // namespace tileops
