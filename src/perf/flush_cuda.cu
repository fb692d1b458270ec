// The timers' L2 flush by a kernel (see flush.h): a grid-stride loop of 16-byte stores.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda_internal.h"
#include "perf/flush.h"

namespace tileops::perf::detail {
namespace {

// Bytes [0, head) and [tail, tail + tail_bytes) one at a time (fewer than 16 each), the vectors
// between them 16 bytes at a time.
__global__ void fill_bytes(unsigned char* base, std::size_t head, uint4* vectors, std::size_t count,
                           unsigned char* tail, std::size_t tail_bytes, unsigned char value) {
  const uint32_t word = 0x01010101u * value;
  const uint4 v = make_uint4(word, word, word, word);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::size_t i = first; i < count; i += stride) vectors[i] = v;
  if (first < head) base[first] = value;
  if (first < tail_bytes) tail[first] = value;
}

}  // namespace

void fill_bytes_kernel(void* ptr, std::size_t bytes, unsigned char value, void* stream) {
  if (bytes == 0) return;
  auto* base = static_cast<unsigned char*>(ptr);
  const std::size_t lead = (16 - reinterpret_cast<std::uintptr_t>(base) % 16) % 16;
  const std::size_t head = std::min(lead, bytes);
  auto* aligned = base + head;
  const std::size_t count = (bytes - head) / 16;
  unsigned char* tail = aligned + count * 16;
  const std::size_t tail_bytes = bytes - head - count * 16;
  constexpr int kThreads = 512;
  // Enough blocks to fill an H200 several times over; the loop covers the rest.
  const auto blocks = static_cast<unsigned>(
      std::clamp<std::size_t>((count + kThreads - 1) / kThreads, 1, std::size_t{2048}));
  fill_bytes<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      base, head, reinterpret_cast<uint4*>(aligned), count, tail, tail_bytes, value);
  check_cuda(static_cast<int>(cudaGetLastError()), "fill_bytes kernel launch");
}

}  // namespace tileops::perf::detail
