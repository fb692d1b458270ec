// CUDA kernels of the KV-cache write (see kv_cache_write_cuda.h for the semantics).
//
// Calls that move less than kBulkMaxCallBytes of keys, in rows of a multiple of 16 bytes (up to
// kBulkMaxRowBytes) with 16-byte aligned tensors: bulk copies (the TMA engine, cp.async.bulk). A
// block of one warp takes kBulkTokens consecutive tokens (one if their rows are long): lane 0
// issues each token's key and value rows into shared memory at once, one mbarrier per token,
// while the lanes read the tokens' slots; as each token lands, its rows go to their slot's rows
// with bulk stores. Decode steps and short prefills are latency bound, and a few instructions per
// row beat one load and one store per 16 bytes there; from 4 MiB of keys on the unit copies below
// were as fast or faster (docs/design/attention.md).
//
// Other calls: a flat grid over (token, copy unit) with a copy unit of 16 bytes where the rows and
// pointers allow (8, 4 or 2 otherwise): each thread first loads its kItems units of key and value
// with their tokens' slots (3 x kItems loads in flight), then stores those whose slot is inside
// the cache.
#include "kernels/attention/kv_cache_write_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/common/arch.cuh"
#include "kernels/common/fast_divide.h"
#include "kernels/common/mbarrier.cuh"
#include "kernels/common/tma.cuh"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kItems = 4;
// Items (token x unit) of one launch stay below 2^30, so that indices in a launch are 32-bit.
constexpr std::int64_t kMaxItemsPerLaunch = std::int64_t{1} << 30;

struct CopyParams {
  const void* key;
  const void* value;
  void* k_cache;
  void* v_cache;
  const long long* slot_mapping;
  long long slots;
  std::uint32_t items;
  std::uint32_t units_per_row;
  kernels::FastDivide row;  // by units_per_row
};

template <typename U>
__global__ void __launch_bounds__(kThreads) kv_cache_write_kernel(const CopyParams p) {
  const U* key = static_cast<const U*>(p.key);
  const U* value = static_cast<const U*>(p.value);
  U* k_cache = static_cast<U*>(p.k_cache);
  U* v_cache = static_cast<U*>(p.v_cache);
  const std::uint32_t first = blockIdx.x * (kThreads * kItems) + threadIdx.x;
  U k[kItems];
  U v[kItems];
  long long dst[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const std::uint32_t q = first + static_cast<std::uint32_t>(i * kThreads);
    dst[i] = -1;
    if (q < p.items) {
      const std::uint32_t token = p.row.quotient(q);
      const std::uint32_t unit = p.row.remainder(q, token);
      // The rows' loads do not wait for the slot's: a round trip to memory less on each
      // thread's chain (a padding token's row is read and dropped).
      const long long slot = __ldg(p.slot_mapping + token);
      k[i] = __ldcs(key + q);
      v[i] = __ldcs(value + q);
      if (slot >= 0 && slot < p.slots) dst[i] = slot * p.units_per_row + unit;
    }
  }
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (dst[i] >= 0) {
      k_cache[dst[i]] = k[i];
      v_cache[dst[i]] = v[i];
    }
  }
}

// The bulk path: tokens per block, and the longest row it takes (a block's rows fit the shared
// memory: kBulkTokens x 2 rows of up to kBulkShortRowBytes, or one token's two rows).
constexpr int kBulkTokens = 4;
constexpr std::int64_t kBulkShortRowBytes = 8192;
constexpr std::int64_t kBulkMaxRowBytes = 65536;
constexpr std::int64_t kBulkMaxCallBytes = std::int64_t{4} << 20;

struct BulkParams {
  const unsigned char* key;
  const unsigned char* value;
  unsigned char* k_cache;
  unsigned char* v_cache;
  const long long* slot_mapping;
  long long slots;
  long long tokens;
  std::uint32_t row_bytes;
};

template <int TOKENS>
__global__ void __launch_bounds__(32) kv_cache_write_bulk_kernel(const BulkParams p) {
#if TILEOPS_SM90A_BODY
  extern __shared__ __align__(128) unsigned char rows[];
  __shared__ __align__(8) std::uint64_t landed[TOKENS];
  const int lane = static_cast<int>(threadIdx.x);
  const long long t0 = static_cast<long long>(blockIdx.x) * TOKENS;
  const int count = static_cast<int>(p.tokens - t0 < TOKENS ? p.tokens - t0 : TOKENS);
  const std::uint32_t base = mbarrier::smem_u32(rows);
  const std::uint32_t bar0 = mbarrier::smem_u32(landed);
  const std::uint32_t row = p.row_bytes;
  if (lane == 0) {
    for (int i = 0; i < count; ++i) mbarrier::init(bar0 + 8 * i, 1);
    mbarrier::fence_init();
    for (int i = 0; i < count; ++i) {
      const std::uint32_t bar = bar0 + 8 * i;
      const std::uint32_t dst = base + 2 * row * static_cast<std::uint32_t>(i);
      const long long at = (t0 + i) * static_cast<long long>(row);
      mbarrier::arrive_expect_tx(bar, 2 * row);
      mbarrier::bulk_load(dst, p.key + at, row, bar);
      mbarrier::bulk_load(dst + row, p.value + at, row, bar);
    }
  }
  // The slots load while the rows are in flight (a padding token's rows are read and dropped).
  const long long mine = lane < count ? __ldg(p.slot_mapping + t0 + lane) : -1;
  long long slot[TOKENS];
#pragma unroll
  for (int i = 0; i < TOKENS; ++i) slot[i] = __shfl_sync(0xffffffffu, mine, i);
  if (lane != 0) return;
#pragma unroll
  for (int i = 0; i < TOKENS; ++i) {
    if (i >= count) break;
    mbarrier::wait(bar0 + 8 * i, 0);
    if (slot[i] >= 0 && slot[i] < p.slots) {
      const std::uint32_t src = base + 2 * row * static_cast<std::uint32_t>(i);
      hopper::bulk_store(p.k_cache + slot[i] * row, src, row);
      hopper::bulk_store(p.v_cache + slot[i] * row, src + row, row);
    }
  }
  hopper::bulk_commit();
  hopper::bulk_wait_all();  // the shared rows stay until every store has read them
#endif
}

[[noreturn]] void throw_cuda(cudaError_t err, const char* what) {
  throw UsageError(std::string("kv_cache_write (CUDA): ") + what + ": " + cudaGetErrorName(err) +
                   ": " + cudaGetErrorString(err));
}

int widest_unit(std::int64_t row_bytes) {
  for (const int unit : {16, 8, 4, 2}) {
    if (row_bytes % unit == 0) return unit;
  }
  return 1;
}

int aligned_unit(int unit, const void* p) {
  while (unit > 1 && reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(unit) != 0)
    unit /= 2;
  return unit;
}

template <typename U>
void launch_units(const KVCacheWriteArgs& a, std::int64_t units_per_row, cudaStream_t stream) {
  const std::int64_t tokens_per_launch =
      std::max<std::int64_t>(1, kMaxItemsPerLaunch / units_per_row);
  for (std::int64_t t0 = 0; t0 < a.tokens; t0 += tokens_per_launch) {
    const std::int64_t tokens = std::min(tokens_per_launch, a.tokens - t0);
    CopyParams p;
    p.key = static_cast<const U*>(a.key) + t0 * units_per_row;
    p.value = static_cast<const U*>(a.value) + t0 * units_per_row;
    p.k_cache = a.k_cache;
    p.v_cache = a.v_cache;
    p.slot_mapping = reinterpret_cast<const long long*>(a.slot_mapping) + t0;
    p.slots = a.slots;
    p.items = static_cast<std::uint32_t>(tokens * units_per_row);
    p.units_per_row = static_cast<std::uint32_t>(units_per_row);
    p.row = kernels::FastDivide(p.units_per_row);
    const auto blocks = static_cast<unsigned>((tokens * units_per_row + kThreads * kItems - 1) /
                                              (kThreads * kItems));
    kv_cache_write_kernel<U><<<blocks, kThreads, 0, stream>>>(p);
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) throw_cuda(err, "launch");
  }
}

template <int TOKENS>
void launch_bulk(const KVCacheWriteArgs& a, std::int64_t row_bytes, cudaStream_t stream) {
  const auto kernel = kv_cache_write_bulk_kernel<TOKENS>;
  const int smem = static_cast<int>(2 * TOKENS * row_bytes);
  if (const cudaError_t err =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      err != cudaSuccess)
    throw_cuda(err, "cudaFuncSetAttribute (shared memory)");
  BulkParams p;
  p.key = static_cast<const unsigned char*>(a.key);
  p.value = static_cast<const unsigned char*>(a.value);
  p.k_cache = static_cast<unsigned char*>(a.k_cache);
  p.v_cache = static_cast<unsigned char*>(a.v_cache);
  p.slot_mapping = reinterpret_cast<const long long*>(a.slot_mapping);
  p.slots = a.slots;
  p.tokens = a.tokens;
  p.row_bytes = static_cast<std::uint32_t>(row_bytes);
  // (A call below kBulkMaxCallBytes of 16-byte rows has fewer than 2^18 tokens.)
  const std::int64_t blocks = (a.tokens + TOKENS - 1) / TOKENS;
  kernel<<<static_cast<unsigned>(blocks), 32, smem, stream>>>(p);
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) throw_cuda(err, "launch");
}

bool bulk_rows(std::int64_t row_bytes) {
  return row_bytes % 16 == 0 && row_bytes <= kBulkMaxRowBytes;
}

}  // namespace

std::string kv_cache_write_config(std::int64_t row_bytes) {
  if (bulk_rows(row_bytes))
    return "bulk copies below 4 MiB of keys (32 threads, tokens_per_block=" +
           std::to_string(row_bytes <= kBulkShortRowBytes ? kBulkTokens : 1) +
           ", 16-byte aligned tensors), else threads=" + std::to_string(kThreads) +
           " items_per_thread=" + std::to_string(kItems) + " copy_bytes=16";
  return "threads=" + std::to_string(kThreads) + " items_per_thread=" + std::to_string(kItems) +
         " copy_bytes=" + std::to_string(widest_unit(row_bytes));
}

void launch_kv_cache_write(const KVCacheWriteArgs& a, void* stream) {
  if (a.tokens < 0 || a.row_elems < 0 || a.slots < 0)
    throw SignatureError("kv_cache_write (CUDA): negative shape");
  if (a.tokens == 0 || a.row_elems == 0) return;
  if (a.key == nullptr || a.value == nullptr || a.slot_mapping == nullptr ||
      (a.slots > 0 && (a.k_cache == nullptr || a.v_cache == nullptr)))
    throw SignatureError("kv_cache_write (CUDA): a tensor's data pointer is null");
  if (reinterpret_cast<std::uintptr_t>(a.slot_mapping) % 8 != 0)
    throw SignatureError("kv_cache_write (CUDA): slot_mapping is not aligned to 8 bytes");
  const std::int64_t row_bytes = a.row_elems * static_cast<std::int64_t>(element_size(a.dtype));
  int unit = widest_unit(row_bytes);
  for (const void* p :
       {a.key, a.value, static_cast<const void*>(a.k_cache), static_cast<const void*>(a.v_cache)})
    unit = aligned_unit(unit, p);
  if (unit < 2) throw SignatureError("kv_cache_write (CUDA): rows are not 2-byte aligned");
  const std::int64_t units_per_row = row_bytes / unit;
  if (units_per_row > kMaxItemsPerLaunch)
    throw SignatureError("kv_cache_write (CUDA): a row of " + std::to_string(row_bytes) +
                         " bytes is too long");
  const auto st = static_cast<cudaStream_t>(stream);
  if (unit == 16 && bulk_rows(row_bytes) && a.tokens * row_bytes < kBulkMaxCallBytes) {
    return row_bytes <= kBulkShortRowBytes ? launch_bulk<kBulkTokens>(a, row_bytes, st)
                                           : launch_bulk<1>(a, row_bytes, st);
  }
  switch (unit) {
    case 16:
      return launch_units<uint4>(a, units_per_row, st);
    case 8:
      return launch_units<uint2>(a, units_per_row, st);
    case 4:
      return launch_units<unsigned int>(a, units_per_row, st);
    default:
      return launch_units<unsigned short>(a, units_per_row, st);
  }
}

}  // namespace tileops::cuda_kernels
