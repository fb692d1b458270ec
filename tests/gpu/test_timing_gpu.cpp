// GPU tests of the timer's L2 flush by a kernel (src/perf/flush_cuda.cu) and of the CUDA timer
// with each flush. Skipped without CUDA or without a device.
#include <gtest/gtest.h>

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpu/kernel_test_util.h"
#include "perf/flush.h"
#include "tileops/core/cuda.h"
#include "tileops/perf/timing.h"
#endif

namespace {

#if !TILEOPS_WITH_CUDA

TEST(TimingGpu, RequiresCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

// Every byte of [offset, offset + bytes) is written, with the value asked for, and no byte around
// it: unaligned starts and ends, fewer than 16 bytes, and more than the kernel's grid covers in
// one step of its loop.
TEST(TimingGpu, FillKernelWritesExactlyItsBytes) {
  SKIP_WITHOUT_GPU();
  constexpr std::size_t kBuffer = (std::size_t{2048} * 512 * 16) * 2 + 4096;
  unsigned char* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, kBuffer));
  std::vector<unsigned char> host(kBuffer);
  struct Case {
    std::size_t offset;
    std::size_t bytes;
    unsigned char value;
  };
  const Case cases[] = {{0, 0, 0x11},
                        {0, 1, 0x22},
                        {3, 5, 0x33},
                        {1, 15, 0x44},
                        {16, 16, 0x55},
                        {7, 4000, 0x66},
                        {5, kBuffer - 100, 0x77},
                        {0, kBuffer, 0x88}};
  for (const Case& c : cases) {
    CUDA_OK(cudaMemset(dev, 0xA5, kBuffer));
    tileops::perf::detail::fill_bytes_kernel(dev + c.offset, c.bytes, c.value, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(host.data(), dev, kBuffer, cudaMemcpyDeviceToHost));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < kBuffer; ++i) {
      const bool inside = i >= c.offset && i < c.offset + c.bytes;
      wrong += host[i] != (inside ? c.value : 0xA5);
    }
    EXPECT_EQ(wrong, 0u) << "offset " << c.offset << ", " << c.bytes << " bytes";
  }
  CUDA_OK(cudaFree(dev));
}

// The CUDA timer with either flush times every iteration and names its flush.
TEST(TimingGpu, EventTimerWithEachFlush) {
  SKIP_WITHOUT_GPU();
  float* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, 1 << 20));
  for (const auto flush : {tileops::perf::L2Flush::memset, tileops::perf::L2Flush::kernel}) {
    tileops::perf::TimingOptions o;
    o.warmup_ms = 1;
    o.budget_ms = 2;
    o.min_iters = 5;
    o.max_iters = 20;
    o.flush_method = flush;
    const tileops::perf::TimingResult r = tileops::perf::time_op(
        [&] {
          cudaMemsetAsync(dev, 0, 1 << 20,
                          static_cast<cudaStream_t>(tileops::cuda_current_stream(0)));
        },
        tileops::Device::cuda(0), o);
    EXPECT_GE(r.iterations, 5);
    EXPECT_EQ(r.samples_s.size(), static_cast<std::size_t>(r.iterations));
    EXPECT_TRUE(std::isfinite(r.median_s) && r.median_s > 0) << r.median_s;
    EXPECT_EQ(r.method, "cuda events, L2 flushed (" + tileops::perf::to_string(flush) + ")");
  }
  CUDA_OK(cudaFree(dev));
}

#endif

}  // namespace
