// The CUDA KV-cache write (vLLM's reshape_and_cache_flash) behind a plain launch API (internal
// header: no CUDA headers here; the stream is passed as void* and is a cudaStream_t).
//
// Token t's key row (row_elems = heads_kv * head_dim elements) goes to row slot_mapping[t] of the
// key cache viewed [slots, row_elems], its value row likewise: the cache's [num_blocks, page_size]
// rows are numbered block * page_size + offset, which is the slot. A slot < 0 or >= slots is
// skipped: the kernel never writes outside the caches, and slot_mapping is never read on the host.
#pragma once

#include <cstdint>
#include <string>

#include "tileops/core/dtype.h"

namespace tileops::cuda_kernels {

struct KVCacheWriteArgs {
  const void* key = nullptr;                   ///< [tokens, row_elems], contiguous
  const void* value = nullptr;                 ///< [tokens, row_elems], contiguous
  void* k_cache = nullptr;                     ///< [slots, row_elems], contiguous
  void* v_cache = nullptr;                     ///< [slots, row_elems], contiguous
  const std::int64_t* slot_mapping = nullptr;  ///< [tokens] on the device
  std::int64_t tokens = 0;
  std::int64_t row_elems = 0;
  std::int64_t slots = 0;  ///< num_blocks * page_size
  DType dtype = DType::bfloat16;
};

/// The launch shape for rows of `row_bytes` bytes: for rows of a multiple of 16 bytes up to 64 KB,
/// bulk copies for calls of less than 4 MiB of keys and 16-byte units above ("bulk copies below 4
/// MiB of keys (32 threads, tokens_per_block=4, 16-byte aligned tensors), else threads=256
/// items_per_thread=4 copy_bytes=16"); other rows "threads=256 items_per_thread=4 copy_bytes=N"
/// (N: the widest of 16, 8, 4, 2 dividing the row). Tensors not 16-byte aligned take the unit
/// copies at launch, with the widest unit every pointer is aligned to.
std::string kv_cache_write_config(std::int64_t row_bytes);

/// Launches the copy on `stream` (nullptr: the legacy default stream) on the current device.
/// Nothing is launched for no tokens or empty rows. Raises SignatureError for arguments the
/// kernel cannot take, UsageError when the CUDA runtime reports an error.
void launch_kv_cache_write(const KVCacheWriteArgs& args, void* stream);

}  // namespace tileops::cuda_kernels
