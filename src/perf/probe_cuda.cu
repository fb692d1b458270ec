// GPU measurements for hardware profiles: device copy bandwidth and an fp32 FMA kernel.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda_internal.h"
#include "perf/probe.h"
#include "tileops/core/cuda.h"

namespace tileops::perf::detail {
namespace {

void check(cudaError_t code, const char* what) {
  check_cuda(static_cast<int>(code), what);
}

constexpr int kFmaLanes = 8;
constexpr int kFmaIterations = 4096;

__global__ void fma_kernel(float* out, float mul, float add) {
  float acc[kFmaLanes];
#pragma unroll
  for (int j = 0; j < kFmaLanes; ++j) acc[j] = threadIdx.x * 1e-3f + j;
  for (int i = 0; i < kFmaIterations; ++i) {
#pragma unroll
    for (int j = 0; j < kFmaLanes; ++j) acc[j] = fmaf(acc[j], mul, add);
  }
  float sum = 0;
#pragma unroll
  for (int j = 0; j < kFmaLanes; ++j) sum += acc[j];
  if (sum == 1234.5f) out[blockIdx.x] = sum;  // keeps the loop; never true in practice
}

/// Owns two events.
struct EventPair {
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  EventPair() {
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  double seconds() const {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return static_cast<double>(ms) * 1e-3;
  }
};

/// Frees a device allocation at scope exit.
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { check(cudaMalloc(&ptr, bytes), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

}  // namespace

double measure_cuda_copy_bandwidth(int device, std::size_t bytes, int reps) {
  tileops::detail::CudaDeviceGuard guard(device);
  cudaStream_t stream = tileops::detail::stream_of(device);
  DeviceBuffer src(bytes);
  DeviceBuffer dst(bytes);
  check(cudaMemsetAsync(src.ptr, 1, bytes, stream), "cudaMemsetAsync");
  check(cudaMemsetAsync(dst.ptr, 0, bytes, stream), "cudaMemsetAsync");
  EventPair ev;
  double best = 0;
  for (int r = 0; r < reps + 1; ++r) {  // the first copy warms up
    check(cudaEventRecord(ev.start, stream), "cudaEventRecord");
    check(cudaMemcpyAsync(dst.ptr, src.ptr, bytes, cudaMemcpyDeviceToDevice, stream),
          "cudaMemcpyAsync");
    check(cudaEventRecord(ev.stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(ev.stop), "cudaEventSynchronize");
    const double s = ev.seconds();
    if (r > 0 && s > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / s);
  }
  return best;
}

double measure_cuda_fp32_rate(int device, int reps) {
  tileops::detail::CudaDeviceGuard guard(device);
  cudaStream_t stream = tileops::detail::stream_of(device);
  const int sms = std::max(1, cuda_device_properties(device).sm_count);
  constexpr int kThreads = 256;
  const int blocks = sms * 64;
  DeviceBuffer out(static_cast<std::size_t>(blocks) * sizeof(float));
  EventPair ev;
  double best = 0;
  for (int r = 0; r < reps + 1; ++r) {
    check(cudaEventRecord(ev.start, stream), "cudaEventRecord");
    fma_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<float*>(out.ptr), 0.999999f, 1e-7f);
    check(cudaGetLastError(), "fma_kernel launch");
    check(cudaEventRecord(ev.stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(ev.stop), "cudaEventSynchronize");
    const double s = ev.seconds();
    const double flops = 2.0 * kFmaLanes * kFmaIterations * static_cast<double>(blocks) * kThreads;
    if (r > 0 && s > 0) best = std::max(best, flops / s);
  }
  return best;
}

}  // namespace tileops::perf::detail
