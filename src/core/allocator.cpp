// Storage: owned host memory (64-byte aligned, one malloc block with the Storage object), owned
// CUDA memory (stream-ordered, from tileops' pool of the device: cuda_memory_pool.cpp), and
// borrowed memory with a release callback. A thread-scoped storage source (storage_source.h)
// replaces the first two when installed.
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>

#include "tileops/core/cuda.h"
#include "tileops/core/error.h"
#include "tileops/core/storage_source.h"
#include "tileops/core/tensor.h"

#if TILEOPS_WITH_CUDA
#include "core/cuda_internal.h"
#endif

namespace tileops {

namespace {

constexpr std::size_t kCpuAlignment = 64;

constexpr std::size_t round_up(std::size_t n) {
  return (n + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
}

}  // namespace

Storage::Storage(void* data, std::size_t nbytes, Device device, Kind kind, void* stream,
                 std::function<void()> on_release) noexcept
    : data_(data),
      nbytes_(nbytes),
      device_(device),
      kind_(kind),
      stream_(stream),
      on_release_(std::move(on_release)) {}

Storage::~Storage() {
#if TILEOPS_WITH_CUDA
  if (kind_ == Kind::cuda && data_ != nullptr) {
    // Errors cannot be reported from a destructor (and at process exit the runtime may already
    // be unloading); they are cleared and ignored.
    int previous = 0;
    const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device_.index &&
                          cudaSetDevice(device_.index) == cudaSuccess;
    if (cudaFreeAsync(data_, static_cast<cudaStream_t>(stream_)) != cudaSuccess) {
      cudaGetLastError();
    }
    if (switched) cudaSetDevice(previous);
  }
#endif
  if (on_release_) {
    try {
      on_release_();
    } catch (...) {  // documented: exceptions from on_release are swallowed
    }
  }
}

void Storage::destroy(Storage* storage) noexcept {
  if (storage->kind_ == Kind::cpu) {  // one malloc block: [Storage | padding | data]
    storage->~Storage();
    std::free(static_cast<void*>(storage));
  } else {
    delete storage;
  }
}

StoragePtr Storage::allocate(const StorageRequest& request) {
  void* source_context = nullptr;
  if (StorageSource source = detail::current_storage_source(source_context)) [[unlikely]] {
    return source(request, source_context);
  }
  const std::size_t nbytes = request.nbytes;
  const Device device = request.device;
  if (device.is_cpu()) {
    // One plain malloc for the Storage object and the data, aligned by hand: aligned operator
    // new (memalign) costs about ten times a malloc in glibc. The data size is rounded up so
    // that vectorised kernels may touch whole 64-byte lines.
    constexpr std::size_t header = sizeof(Storage) + kCpuAlignment - 1;
    if (nbytes > static_cast<std::size_t>(-1) - header - kCpuAlignment) throw std::bad_alloc();
    void* block = std::malloc(header + round_up(nbytes));
    if (block == nullptr) throw std::bad_alloc();
    void* data = nullptr;
    if (nbytes > 0) {
      const auto first = reinterpret_cast<std::uintptr_t>(block) + sizeof(Storage);
      data = reinterpret_cast<void*>(round_up(first));
    }
    return StoragePtr(new (block) Storage(data, nbytes, device, Kind::cpu, nullptr, {}));
  }
#if TILEOPS_WITH_CUDA
  void* stream = cuda_current_stream(device.index);  // checks that the device exists
  void* data = nullptr;
  if (nbytes > 0) {
    detail::CudaDeviceGuard guard(device.index);
    const auto cuda_stream = static_cast<cudaStream_t>(stream);
    cudaMemPool_t pool = detail::memory_pool(device.index);
    cudaError_t status = cudaMallocFromPoolAsync(&data, nbytes, pool, cuda_stream);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (status == cudaErrorMemoryAllocation &&
        cudaStreamIsCapturing(cuda_stream, &capture) == cudaSuccess &&
        capture == cudaStreamCaptureStatusNone) {
      // The pool's cache may hold the memory in blocks of other sizes: return it and try again.
      cudaGetLastError();
      if (cudaStreamSynchronize(cuda_stream) == cudaSuccess &&
          cudaMemPoolTrimTo(pool, 0) == cudaSuccess) {
        status = cudaMallocFromPoolAsync(&data, nbytes, pool, cuda_stream);
      }
    }
    if (status != cudaSuccess) {
      const std::string what = "Storage.allocate: cudaMallocFromPoolAsync of " +
                               std::to_string(nbytes) + " bytes on " + device.str();
      if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError();  // clears the error, so that later calls do not see it
        throw OutOfMemoryError(what + ": out of device memory (" + cudaGetErrorString(status) +
                               ")");
      }
      check_cuda(status, what.c_str());
    }
  }
  try {
    return StoragePtr(new Storage(data, nbytes, device, Kind::cuda, stream, {}));
  } catch (...) {
    if (data != nullptr) {
      detail::CudaDeviceGuard guard(device.index);
      cudaFreeAsync(data, static_cast<cudaStream_t>(stream));
    }
    throw;
  }
#else
  throw UsageError("Storage.allocate: cannot allocate " + std::to_string(nbytes) + " bytes on " +
                   device.str() + ": tileops was built without CUDA");
#endif
}

StoragePtr Storage::borrow(void* data, std::size_t nbytes, Device device,
                           std::function<void()> on_release) {
  Storage* storage = nullptr;
  try {
    storage = new Storage(data, nbytes, device, Kind::borrowed, nullptr, {});
  } catch (...) {  // the callback still runs exactly once
    if (on_release) on_release();
    throw;
  }
  storage->on_release_ = std::move(on_release);
  return StoragePtr(storage);
}

}  // namespace tileops
