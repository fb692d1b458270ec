#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "tileops/core/cuda.h"
#include "tileops/core/error.h"

#if TILEOPS_WITH_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda_internal.h"
#endif

namespace tileops {

namespace {

[[noreturn, maybe_unused]] void throw_without_cuda(const char* what) {
  throw UsageError(std::string(what) + ": tileops was built without CUDA");
}

}  // namespace

#if TILEOPS_WITH_CUDA

namespace detail {

void check_device_index(int device, const char* what) {
  const int count = cuda_device_count();
  if (device < 0 || device >= count) {
    throw UsageError(std::string(what) + ": CUDA device " + std::to_string(device) +
                     " does not exist (" + std::to_string(count) + " device" +
                     (count == 1 ? "" : "s") + " available)");
  }
}

}  // namespace detail

using detail::check_device_index;

namespace {

int query_device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the error so later calls do not see it
    return 0;
  }
  return count < kMaxCudaDevices ? count : kMaxCudaDevices;
}

std::array<std::atomic<void*>, kMaxCudaDevices> g_streams{};

// ScopedCudaStream's per-thread settings: one device at a time in practice, so one slot.
struct ThreadStream {
  int device = -1;
  void* stream = nullptr;
};
thread_local ThreadStream t_stream;

struct PropertiesSlot {
  std::once_flag once;
  std::unique_ptr<CudaDeviceProperties> properties;
};
std::array<PropertiesSlot, kMaxCudaDevices> g_properties;

}  // namespace

int cuda_device_count() noexcept {
  static const int count = query_device_count();
  return count;
}

bool cuda_available() noexcept {
  return cuda_device_count() > 0;
}

void* cuda_current_stream(int device) {
  if (static_cast<unsigned>(device) >= static_cast<unsigned>(cuda_device_count())) {
    check_device_index(device, "cuda_current_stream");
  }
  if (t_stream.device == device) return t_stream.stream;
  return g_streams[static_cast<std::size_t>(device)].load(std::memory_order_acquire);
}

ScopedCudaStream::ScopedCudaStream(int device, void* stream)
    : device_(device), previous_(t_stream.stream), previous_set_(t_stream.device >= 0) {
  check_device_index(device, "ScopedCudaStream");
  if (previous_set_ && t_stream.device != device) {
    throw UsageError("ScopedCudaStream: this thread already has a stream for CUDA device " +
                     std::to_string(t_stream.device) + "; nest scopes of one device only");
  }
  t_stream = {device, stream};
}

ScopedCudaStream::~ScopedCudaStream() {
  t_stream = previous_set_ ? ThreadStream{device_, previous_} : ThreadStream{};
}

void set_cuda_stream(int device, void* stream) {
  check_device_index(device, "set_cuda_stream");
  g_streams[static_cast<std::size_t>(device)].store(stream, std::memory_order_release);
}

void cuda_synchronize(int device) {
  check_device_index(device, "cuda_synchronize");
  detail::CudaDeviceGuard guard(device);
  check_cuda(cudaDeviceSynchronize(), "cuda_synchronize: cudaDeviceSynchronize");
}

const CudaDeviceProperties& cuda_device_properties(int device) {
  check_device_index(device, "cuda_device_properties");
  PropertiesSlot& slot = g_properties[static_cast<std::size_t>(device)];
  std::call_once(slot.once, [&] {
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, device), "cuda_device_properties");
    auto p = std::make_unique<CudaDeviceProperties>();
    p->name = prop.name;
    p->major = prop.major;
    p->minor = prop.minor;
    p->sm_count = prop.multiProcessorCount;
    p->shared_mem_per_block_optin = static_cast<std::int64_t>(prop.sharedMemPerBlockOptin);
    p->l2_bytes = prop.l2CacheSize;
    p->total_memory = static_cast<std::int64_t>(prop.totalGlobalMem);
    slot.properties = std::move(p);
  });
  return *slot.properties;
}

void check_cuda(int code, const char* what) {
  if (code == cudaSuccess) return;
  cudaGetLastError();
  const auto error = static_cast<cudaError_t>(code);
  throw UsageError(std::string(what) + ": CUDA error " + std::to_string(code) + " (" +
                   cudaGetErrorName(error) + "): " + cudaGetErrorString(error));
}

#else  // !TILEOPS_WITH_CUDA

int cuda_device_count() noexcept {
  return 0;
}

bool cuda_available() noexcept {
  return false;
}

void* cuda_current_stream(int) {
  throw_without_cuda("cuda_current_stream");
}

ScopedCudaStream::ScopedCudaStream(int, void*)
    : device_(-1), previous_(nullptr), previous_set_(false) {
  throw_without_cuda("ScopedCudaStream");
}

ScopedCudaStream::~ScopedCudaStream() = default;

void set_cuda_stream(int, void*) {
  throw_without_cuda("set_cuda_stream");
}

void cuda_synchronize(int) {
  throw_without_cuda("cuda_synchronize");
}

const CudaDeviceProperties& cuda_device_properties(int) {
  throw_without_cuda("cuda_device_properties");
}

void check_cuda(int code, const char* what) {
  if (code == 0) return;
  throw UsageError(std::string(what) + ": CUDA error " + std::to_string(code) +
                   " (tileops was built without CUDA)");
}

#endif

}  // namespace tileops
