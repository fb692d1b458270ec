// The CUDA runtime as tileops uses it: availability, per-device streams, device properties and
// error checking. This header includes no CUDA header (streams are `void*`, i.e. cudaStream_t);
// it compiles and links in builds without CUDA, where the functions that cannot answer throw
// UsageError("tileops was built without CUDA").
#pragma once

#include <cstdint>
#include <string>

namespace tileops {

/// True when tileops was built with CUDA and at least one device is usable. Never throws; the
/// answer is computed once per process.
bool cuda_available() noexcept;

/// Number of usable CUDA devices (0 without CUDA or without a driver/device). Never throws;
/// computed once per process.
int cuda_device_count() noexcept;

/// The stream tileops uses on `device` (a cudaStream_t) on the calling thread: the one of the
/// innermost live ScopedCudaStream of this thread for `device`, else the one set by
/// set_cuda_stream (process-wide), else the legacy default stream (nullptr). Lock-free.
/// UsageError for a device index that does not exist, or without CUDA.
void* cuda_current_stream(int device);

/// Sets the stream tileops uses on `device` from now on, for every thread (thread-safe). The
/// stream must outlive the memory allocated on it (CUDA tensors free their memory on the stream
/// they were allocated on). nullptr restores the legacy default stream.
void set_cuda_stream(int device, void* stream);

/// While alive, tileops uses `stream` on `device` on this thread only (other threads, and the
/// process-wide setting, are unaffected); the previous thread setting comes back on destruction.
/// For a host framework that hands tileops its own current stream per call (the PyTorch
/// extension), so that threads on different streams do not race on one setting.
/// UsageError for a device index that does not exist, or without CUDA.
class ScopedCudaStream {
 public:
  ScopedCudaStream(int device, void* stream);
  ~ScopedCudaStream();
  ScopedCudaStream(const ScopedCudaStream&) = delete;
  ScopedCudaStream& operator=(const ScopedCudaStream&) = delete;

 private:
  int device_;
  void* previous_;
  bool previous_set_;
};

/// Waits for all work on `device` (cudaDeviceSynchronize on it); UsageError on failure.
void cuda_synchronize(int device);

/// Device memory held by tileops' allocator on one device: `reserved` bytes taken from the
/// driver, of which `used` back live tensors; the rest is cached for the next allocations.
struct CudaMemoryStats {
  std::int64_t reserved = 0;
  std::int64_t used = 0;
};

/// tileops allocates CUDA tensors from a memory pool of its own per device (stream-ordered,
/// cudaMallocFromPoolAsync) that keeps freed memory for reuse instead of returning it to the
/// driver at every synchronisation: mapping fresh memory for the temporaries of a large op costs
/// more than its kernels take on small inputs (docs/design/op-base.md, "Device memory"). The
/// cache is returned by cuda_release_cached_memory, and when an allocation fails (the pool is
/// trimmed and the allocation tried once more before OutOfMemoryError). Tensors whose storage a
/// host framework provides (the PyTorch extension) do not use the pool.
/// UsageError for a device index that does not exist, or without CUDA.
CudaMemoryStats cuda_memory_stats(int device);

/// Waits for all work on `device`, then returns the memory tileops' pool caches (not the memory
/// of live tensors) to the driver. UsageError for a device index that does not exist, or
/// without CUDA.
void cuda_release_cached_memory(int device);

struct CudaDeviceProperties {
  std::string name;
  int major = 0;
  int minor = 0;
  int sm_count = 0;
  std::int64_t shared_mem_per_block_optin = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t total_memory = 0;
};

/// Properties of `device`, read once per device on first use (thread-safe) and cached for the
/// life of the process. Meant for kernels on their first build, never for op construction.
const CudaDeviceProperties& cuda_device_properties(int device);

/// Throws UsageError("<what>: CUDA error <n> (<name>): <description>") unless `code` (a
/// cudaError_t) is cudaSuccess (0), after clearing the runtime's last (non-sticky) error.
void check_cuda(int code, const char* what);

/// The largest CUDA device index tileops tracks streams for, plus one.
inline constexpr int kMaxCudaDevices = 64;

}  // namespace tileops
