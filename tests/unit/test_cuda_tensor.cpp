// CUDA tensors: allocation, copies across devices and within a device (strided, converting),
// fills, streams and device properties. Skipped where no CUDA device is usable.
#include <gmock/gmock-matchers.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
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

#define REQUIRE_CUDA() \
  if (!tileops::cuda_available()) GTEST_SKIP() << "no CUDA device"

const Device kGpu = Device{Device::Type::cuda, 0};

TEST(CudaTensor, PropertiesAndStreams) {
  REQUIRE_CUDA();
  const auto& p = tileops::cuda_device_properties(0);
  EXPECT_FALSE(p.name.empty());
  EXPECT_GE(p.major, 1);
  EXPECT_GT(p.sm_count, 0);
  EXPECT_GT(p.total_memory, 0);
  EXPECT_GT(p.l2_bytes, 0);
  EXPECT_GT(p.shared_mem_per_block_optin, 0);
  EXPECT_EQ(&p, &tileops::cuda_device_properties(0));  // cached
  EXPECT_EQ(tileops::cuda_current_stream(0), nullptr);
  const int count = tileops::cuda_device_count();
  EXPECT_THAT(error_message<tileops::UsageError>([&] { tileops::cuda_current_stream(count); }),
              HasSubstr("does not exist"));
  EXPECT_THROW(tileops::cuda_device_properties(-1), tileops::UsageError);
  EXPECT_NO_THROW(tileops::cuda_synchronize(0));
}

TEST(CudaTensor, AllocateAndRoundTrip) {
  REQUIRE_CUDA();
  for (const DType dtype : {DType::float32, DType::bfloat16, DType::float16, DType::float8_e4m3fn,
                            DType::float8_e5m2, DType::int64, DType::uint8}) {
    // 200 values: exact in every dtype listed (the float8 dtypes round some, identically).
    const Tensor expected =
        Tensor::arange(200, tileops::is_floating(dtype) ? DType::float32 : DType::int64).to(dtype);
    const Tensor dev = expected.to(kGpu);
    EXPECT_EQ(dev.device(), kGpu);
    EXPECT_EQ(dev.dtype(), dtype);
    EXPECT_TRUE(dev.is_contiguous());
    EXPECT_NE(dev.data_ptr(), nullptr);
    EXPECT_EQ(dev.storage()->device(), kGpu);
    EXPECT_EQ(dev.to(Device::cpu()).to_vector(), expected.to_vector())
        << tileops::dtype_name(dtype);
  }
  const Tensor empty = Tensor::empty({0, 5}, DType::float32, kGpu);
  EXPECT_EQ(empty.to(Device::cpu()).numel(), 0);
}

TEST(CudaTensor, ThePoolKeepsFreedMemoryUntilReleased) {
  REQUIRE_CUDA();
  constexpr std::int64_t kBytes = std::int64_t{64} << 20;
  tileops::cuda_release_cached_memory(0);
  const tileops::CudaMemoryStats before = tileops::cuda_memory_stats(0);
  {
    const Tensor t = Tensor::empty({kBytes}, DType::uint8, kGpu);
    const tileops::CudaMemoryStats live = tileops::cuda_memory_stats(0);
    EXPECT_GE(live.used, before.used + kBytes);
    EXPECT_GE(live.reserved, live.used);
  }
  tileops::cuda_synchronize(0);  // the driver's default pool would return the memory here
  const tileops::CudaMemoryStats cached = tileops::cuda_memory_stats(0);
  EXPECT_EQ(cached.used, before.used);
  EXPECT_GE(cached.reserved, before.used + kBytes);
  {
    const Tensor again = Tensor::empty({kBytes}, DType::uint8, kGpu);  // served from the cache
    EXPECT_EQ(tileops::cuda_memory_stats(0).reserved, cached.reserved);
  }
  tileops::cuda_release_cached_memory(0);
  const tileops::CudaMemoryStats released = tileops::cuda_memory_stats(0);
  EXPECT_EQ(released.used, before.used);
  EXPECT_LT(released.reserved, cached.reserved);
  EXPECT_LE(released.reserved, before.reserved);
  EXPECT_THAT(error_message<tileops::UsageError>(
                  [] { tileops::cuda_memory_stats(tileops::cuda_device_count()); }),
              HasSubstr("does not exist"));
}

TEST(CudaTensor, ElementAccessIsCpuOnly) {
  REQUIRE_CUDA();
  const Tensor dev = Tensor::zeros({2}, DType::float32, kGpu);
  EXPECT_THAT(error_message<tileops::SignatureError>([&] { (void)dev.item_at({0}); }),
              HasSubstr("not on the CPU"));
  EXPECT_THROW((void)dev.to_vector(), tileops::SignatureError);
  EXPECT_THROW((void)dev.item(), tileops::SignatureError);
}

TEST(CudaTensor, FactoriesOnDevice) {
  REQUIRE_CUDA();
  EXPECT_THAT(Tensor::zeros({4}, DType::bfloat16, kGpu).to(Device::cpu()).to_vector(),
              ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(Tensor::full({3}, 2.5, DType::float16, kGpu).to(Device::cpu()).to_vector(),
              ElementsAre(2.5, 2.5, 2.5));
  EXPECT_THAT(Tensor::full({3}, -7, DType::int32, kGpu).to(Device::cpu()).to_vector(),
              ElementsAre(-7, -7, -7));
  EXPECT_THAT(Tensor::arange(4, DType::int64, kGpu).to(Device::cpu()).to_vector(),
              ElementsAre(0, 1, 2, 3));
  // Random values are generated on the CPU: identical on every device.
  EXPECT_EQ(Tensor::randn({257}, DType::float32, 5, kGpu).to(Device::cpu()).to_vector(),
            Tensor::randn({257}, DType::float32, 5).to_vector());
  EXPECT_EQ(Tensor::rand({33}, DType::bfloat16, 5, kGpu).to(Device::cpu()).to_vector(),
            Tensor::rand({33}, DType::bfloat16, 5).to_vector());
}

TEST(CudaTensor, StridedCopiesOnDevice) {
  REQUIRE_CUDA();
  const Tensor host = Tensor::arange(2 * 3 * 4, DType::float32).view({2, 3, 4});
  const Tensor dev = host.to(kGpu);
  // contiguous() of a permuted view runs the strided kernel.
  const Tensor perm = dev.permute({2, 0, 1}).contiguous();
  EXPECT_EQ(perm.to(Device::cpu()).to_vector(), host.permute({2, 0, 1}).contiguous().to_vector());
  // Strided destination on the device.
  Tensor big = Tensor::zeros({4, 6}, DType::int32, kGpu);
  big.slice(1, 0, 6, 2).copy_(Tensor::arange(12, DType::int32).view({4, 3}).to(kGpu));
  EXPECT_THAT(big.to(Device::cpu()).select(0, 1).to_vector(), ElementsAre(3, 0, 4, 0, 5, 0));
  // Converting copies on the device.
  const Tensor bf = dev.to(DType::bfloat16);
  EXPECT_EQ(bf.device(), kGpu);
  EXPECT_EQ(bf.to(Device::cpu()).to_vector(), host.to(DType::bfloat16).to_vector());
  const Tensor f8 = dev.transpose(0, 2).to(DType::float8_e4m3fn);
  EXPECT_EQ(f8.to(Device::cpu()).to_vector(),
            host.transpose(0, 2).to(DType::float8_e4m3fn).to_vector());
  const Tensor e5 = dev.transpose(0, 2).to(DType::float8_e5m2);
  EXPECT_EQ(e5.to(Device::cpu()).to_vector(),
            host.transpose(0, 2).to(DType::float8_e5m2).to_vector());
  EXPECT_EQ(e5.to(DType::float32).to(Device::cpu()).to_vector(),
            host.transpose(0, 2).to(DType::float8_e5m2).to(DType::float32).to_vector());
  EXPECT_THAT(Tensor::arange(5, DType::int64, kGpu).to(DType::int8).to(Device::cpu()).to_vector(),
              ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THROW((void)dev.to(DType::int32), tileops::SignatureError);
}

TEST(CudaTensor, CopiesBetweenHostAndDeviceWithStridesAndConversions) {
  REQUIRE_CUDA();
  const Tensor host = Tensor::randn({8, 16}, DType::float32, 3);
  // Host strided -> device contiguous with conversion.
  Tensor dev = Tensor::empty({16, 8}, DType::bfloat16, kGpu);
  dev.copy_(host.transpose(0, 1));
  EXPECT_EQ(dev.to(Device::cpu()).to_vector(),
            host.transpose(0, 1).to(DType::bfloat16).to_vector());
  // Device strided -> host strided.
  Tensor out = Tensor::zeros({16, 16}, DType::float32);
  out.slice(1, 0, 16, 2).copy_(dev);
  const Tensor expected = host.transpose(0, 1).to(DType::bfloat16).to(DType::float32);
  EXPECT_EQ(out.slice(1, 0, 16, 2).to_vector(), expected.to_vector());
  EXPECT_EQ(out.slice(1, 1, 16, 2).to_vector(), std::vector<double>(16 * 8, 0.0));
  // Fill of a strided device view.
  dev.slice(0, 0, 16, 4).fill_(1.5);
  const auto back = dev.to(Device::cpu());
  for (int64_t i = 0; i < 16; ++i) {
    EXPECT_EQ(back.item_at({i, 3}) == 1.5, i % 4 == 0) << i;
  }
}

TEST(CudaTensor, NonDefaultStream) {
  REQUIRE_CUDA();
  // The library allocates and copies on the stream set for the device.
  void* before = tileops::cuda_current_stream(0);
  // Use the per-thread default stream handle (cudaStreamPerThread == 0x2) to avoid creating one.
  void* per_thread = reinterpret_cast<void*>(0x2);
  tileops::set_cuda_stream(0, per_thread);
  EXPECT_EQ(tileops::cuda_current_stream(0), per_thread);
  {
    const Tensor t = Tensor::arange(100, DType::float32, kGpu);
    EXPECT_EQ(t.to(DType::float16).to(Device::cpu()).item_at({99}), 99.0);
  }
  tileops::set_cuda_stream(0, before);
  tileops::cuda_synchronize(0);
}

TEST(CudaTensor, ScopedStreamsArePerThreadAndNest) {
  REQUIRE_CUDA();
  void* const process = tileops::cuda_current_stream(0);
  void* const a = reinterpret_cast<void*>(0x2);  // cudaStreamPerThread: no stream to create
  void* const b = reinterpret_cast<void*>(0x1);  // cudaStreamLegacy
  std::atomic<int> inside{0};
  std::thread other;
  {
    const tileops::ScopedCudaStream outer(0, a);
    EXPECT_EQ(tileops::cuda_current_stream(0), a);
    other = std::thread([&] {
      EXPECT_EQ(tileops::cuda_current_stream(0), process);  // not this thread's scope
      const tileops::ScopedCudaStream mine(0, b);
      EXPECT_EQ(tileops::cuda_current_stream(0), b);
      inside = 1;
      while (inside.load() != 2) std::this_thread::yield();
    });
    while (inside.load() != 1) std::this_thread::yield();
    EXPECT_EQ(tileops::cuda_current_stream(0), a);  // the other thread's scope is its own
    {
      const tileops::ScopedCudaStream inner(0, nullptr);
      EXPECT_EQ(tileops::cuda_current_stream(0), nullptr);
      const Tensor t = Tensor::arange(100, DType::float32, kGpu);  // allocated on the legacy stream
      EXPECT_EQ(t.to(Device::cpu()).item_at({99}), 99.0);
    }
    EXPECT_EQ(tileops::cuda_current_stream(0), a);
    inside = 2;
    other.join();
  }
  EXPECT_EQ(tileops::cuda_current_stream(0), process);
  EXPECT_THROW(tileops::ScopedCudaStream(tileops::cuda_device_count(), a), tileops::UsageError);
}

TEST(CudaTensor, CopiesBetweenDevices) {
  REQUIRE_CUDA();
  if (tileops::cuda_device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  const Tensor a = Tensor::arange(64, DType::float32, Device::cuda(0)).view({8, 8});
  const Tensor b = a.transpose(0, 1).to(Device::cuda(1));
  EXPECT_EQ(b.device(), Device::cuda(1));
  EXPECT_EQ(b.to(Device::cpu()).to_vector(),
            Tensor::arange(64, DType::float32).view({8, 8}).transpose(0, 1).to_vector());
  Tensor c = Tensor::zeros({8, 8}, DType::bfloat16, Device::cuda(1));
  c.copy_(a);
  EXPECT_EQ(c.to(Device::cpu()).to_vector(), Tensor::arange(64, DType::float32).to_vector());
}

TEST(CudaTensor, DlpackOnDevice) {
  REQUIRE_CUDA();
#if TILEOPS_WITH_DLPACK
  const Tensor t = Tensor::arange(12, DType::int32, kGpu).view({3, 4}).transpose(0, 1);
  const Tensor back = tileops::from_dlpack(tileops::to_dlpack(t));
  EXPECT_EQ(back.device(), kGpu);
  EXPECT_EQ(back.data_ptr(), t.data_ptr());
  EXPECT_EQ(back.to(Device::cpu()).to_vector(), t.to(Device::cpu()).to_vector());
#endif
}

}  // namespace
