// Internal: overwriting a device buffer with a kernel, the L2 flush of the GPU timers (not
// installed).
#pragma once

#include <cstddef>

namespace tileops::perf::detail {

#if TILEOPS_WITH_CUDA
/// Enqueues on `stream` (a cudaStream_t) a kernel that writes the byte `value` to every byte of
/// [ptr, ptr + bytes): 16-byte stores over the 16-byte aligned part (cudaMalloc memory is), single
/// bytes over the rest. UsageError when the launch fails.
void fill_bytes_kernel(void* ptr, std::size_t bytes, unsigned char value, void* stream);
#endif

}  // namespace tileops::perf::detail
