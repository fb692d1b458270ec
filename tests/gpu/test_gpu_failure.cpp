// Failure and concurrency on the GPU, through the whole Op path: a call whose output cannot be
// allocated raises OutOfMemoryError, leaves the device's free memory as it found it and the op
// usable; many threads calling one op instance, on the default stream and on streams of their
// own choosing, get the CPU implementation's results. Skipped without a GPU.
#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>
#endif
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gpu/gpu_op_test_util.h"
#include "tileops/core/cuda.h"
#include "tileops/core/error.h"
#include "tileops/ops/norm.h"

namespace tileops {
namespace {

using gpu_test::expect_close;
using gpu_test::kGpu;

#if !TILEOPS_WITH_CUDA

TEST(GpuFailure, RequiresCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

/// Free device memory once every pool has given back what it holds.
std::size_t free_device_bytes() {
  cudaDeviceSynchronize();
  cudaMemPool_t pool = nullptr;
  if (cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess) cudaMemPoolTrimTo(pool, 0);
  cuda_release_cached_memory(0);
  std::size_t free = 0, total = 0;
  cudaMemGetInfo(&free, &total);
  return free;
}

TEST(GpuFailure, OutputPastTheFreeMemoryRaisesLeaksNothingAndTheOpKeepsWorking) {
  SKIP_WITHOUT_GPU();
  constexpr std::int64_t kCols = 8192;
  RMSNormFwdOp op({.normalized_shape = {kCols}});
  RMSNormFwdOp cpu_op({.normalized_shape = {kCols}});
  const Tensor w = Tensor::randn({kCols}, DType::bfloat16, 2);
  const Tensor w_gpu = w.to(kGpu);
  const Tensor small = Tensor::randn({8, kCols}, DType::bfloat16, 3);
  expect_close(op(small.to(kGpu), w_gpu), cpu_op(small, w), "before");

  // An input of 1 GiB, then everything but 256 MiB taken by the test: the 1 GiB output cannot be
  // allocated. (Device-wide: ctest runs this test alone, tests/CMakeLists.txt.)
  const std::int64_t rows = (std::int64_t{1} << 30) / (kCols * 2);
  const Tensor big = Tensor::randn({rows, kCols}, DType::bfloat16, 4, kGpu);
  const std::size_t free_before = free_device_bytes();
  ASSERT_GT(free_before, std::size_t{1} << 29);
  void* hog = nullptr;
  ASSERT_EQ(cudaMalloc(&hog, free_before - (std::size_t{256} << 20)), cudaSuccess);
  const std::size_t free_with_hog = free_device_bytes();
  try {
    op(big, w_gpu);
    ADD_FAILURE() << "a 1 GiB output fitted in " << free_with_hog << " free bytes";
  } catch (const OutOfMemoryError& e) {
    EXPECT_THAT(e.what(),
                testing::HasSubstr("cudaMallocFromPoolAsync of 1073741824 bytes on cuda:0"));
    EXPECT_THAT(e.what(), testing::HasSubstr("out of device memory"));
  }
  // The failed call holds nothing (the driver's own bookkeeping moves by pages, not more). Free
  // memory is device-wide: another process may free some meanwhile, never a leak of ours, so
  // only a drop is checked.
  constexpr double kPages = 4 << 20;
  EXPECT_GE(static_cast<double>(free_device_bytes()) + kPages, static_cast<double>(free_with_hog));
  ASSERT_EQ(cudaFree(hog), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // no sticky error left behind
  EXPECT_GE(static_cast<double>(free_device_bytes()) + kPages, static_cast<double>(free_before));

  // The same instance serves the large call now that memory is free, and small calls again.
  const Tensor y = op(big, w_gpu);
  const std::int64_t probe[] = {0, rows / 2, rows - 1};
  const Tensor big_rows = gather_rows(big, probe);
  expect_close(gather_rows(y, probe), cpu_op(big_rows, w), "after, large");
  expect_close(op(small.to(kGpu), w_gpu), cpu_op(small, w), "after, small");
}

/// Every thread calls `op` `calls` times on its own input; each result must be the CPU's.
void call_from_threads(RMSNormFwdOp& op, int threads, int calls, const std::string& what) {
  RMSNormFwdOp cpu_op({.normalized_shape = {1024}});
  const Tensor w = Tensor::randn({1024}, DType::bfloat16, 1);
  const Tensor w_gpu = w.to(kGpu);
  std::vector<Tensor> inputs;
  std::vector<Tensor> expected;
  for (int t = 0; t < threads; ++t) {
    inputs.push_back(Tensor::randn({64 + t, 1024}, DType::bfloat16, 10 + t));
    expected.push_back(cpu_op(inputs.back(), w));
  }
  std::vector<std::vector<Tensor> > got(threads);
  std::atomic<int> errors = 0;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        const Tensor x = inputs[t].to(kGpu);
        for (int c = 0; c < calls; ++c) got[t].push_back(op(x, w_gpu).to(Device::cpu()));
      } catch (const std::exception&) {
        ++errors;
      }
    });
  }
  for (auto& th : pool) th.join();
  ASSERT_EQ(errors.load(), 0) << what;
  for (int t = 0; t < threads; ++t) {
    ASSERT_EQ(static_cast<int>(got[t].size()), calls) << what;
    for (int c = 0; c < calls; ++c) {
      expect_close(got[t][c], expected[t], what + ", thread " + std::to_string(t));
    }
  }
}

TEST(GpuConcurrency, ManyThreadsCallOneOpInstanceOnTheDefaultStream) {
  SKIP_WITHOUT_GPU();
  RMSNormFwdOp op({.normalized_shape = {1024}});
  call_from_threads(op, 8, 20, "default stream");
}

TEST(GpuConcurrency, ManyThreadsCallOneOpInstanceOnEachOfSeveralStreams) {
  SKIP_WITHOUT_GPU();
  RMSNormFwdOp op({.normalized_shape = {1024}});
  std::vector<cudaStream_t> streams(3);
  for (auto& s : streams)
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  for (std::size_t i = 0; i < streams.size(); ++i) {
    set_cuda_stream(0, streams[i]);
    call_from_threads(op, 8, 10, "stream " + std::to_string(i));
    cudaStreamSynchronize(streams[i]);
  }
  set_cuda_stream(0, nullptr);
  for (auto& s : streams) cudaStreamDestroy(s);
}

#endif

}  // namespace
}  // namespace tileops
