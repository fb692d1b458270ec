// The CUDA KV-cache write's launcher refuses bad arguments before it touches a device, and names
// the copy path a row size takes (the bulk copies or the unit copies), so these tests run in any
// CUDA build, with or without a GPU. No pointer below is dereferenced.
#if TILEOPS_WITH_CUDA

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "kernels/attention/kv_cache_write_cuda.h"
#include "tileops/core/error.h"

namespace tileops {
namespace {

using cuda_kernels::KVCacheWriteArgs;
using testing::HasSubstr;

/// 16-byte aligned storage standing in for device buffers (never read or written).
alignas(16) unsigned char g_storage[64];

/// A valid call: 4 tokens of 8 x 128 bfloat16 rows into 32 slots.
KVCacheWriteArgs valid_args() {
  KVCacheWriteArgs a;
  a.key = g_storage;
  a.value = g_storage;
  a.k_cache = g_storage;
  a.v_cache = g_storage;
  a.slot_mapping = reinterpret_cast<const std::int64_t*>(g_storage);
  a.tokens = 4;
  a.row_elems = 8 * 128;
  a.slots = 32;
  a.dtype = DType::bfloat16;
  return a;
}

std::string signature_error_of(const KVCacheWriteArgs& a) {
  try {
    cuda_kernels::launch_kv_cache_write(a, nullptr);
  } catch (const SignatureError& e) {
    return e.what();
  }
  return "no SignatureError";
}

TEST(KVCacheWriteLaunchArgs, BadArgumentsAreSignatureErrorsNamingTheRule) {
  KVCacheWriteArgs a = valid_args();
  a.tokens = -1;
  EXPECT_THAT(signature_error_of(a), HasSubstr("negative shape"));
  a = valid_args();
  a.value = nullptr;
  EXPECT_THAT(signature_error_of(a), HasSubstr("a tensor's data pointer is null"));
  a = valid_args();
  a.slot_mapping = reinterpret_cast<const std::int64_t*>(g_storage + 4);
  EXPECT_THAT(signature_error_of(a), HasSubstr("slot_mapping is not aligned to 8 bytes"));
  a = valid_args();
  a.key = g_storage + 1;  // rows of bytes at an odd address: not even 2-byte copies
  EXPECT_THAT(signature_error_of(a), HasSubstr("rows are not 2-byte aligned"));
}

TEST(KVCacheWriteLaunchArgs, NothingToCopyIsNoLaunch) {
  // Returns before any check of the pointers and before looking for a device.
  KVCacheWriteArgs a = valid_args();
  a.tokens = 0;
  a.key = nullptr;
  EXPECT_NO_THROW(cuda_kernels::launch_kv_cache_write(a, nullptr));
  a = valid_args();
  a.row_elems = 0;
  EXPECT_NO_THROW(cuda_kernels::launch_kv_cache_write(a, nullptr));
}

TEST(KVCacheWriteLaunchArgs, ConfigNamesTheCopyPathOfTheRows) {
  // Rows of a multiple of 16 bytes up to 64 KB: bulk copies below 4 MiB of keys, 4 tokens per
  // block up to 8 KB rows, one above; longer rows and other sizes: the unit copies only.
  EXPECT_EQ(cuda_kernels::kv_cache_write_config(2048),
            "bulk copies below 4 MiB of keys (32 threads, tokens_per_block=4, 16-byte aligned "
            "tensors), else threads=256 items_per_thread=4 copy_bytes=16");
  EXPECT_THAT(cuda_kernels::kv_cache_write_config(16384), HasSubstr("tokens_per_block=1,"));
  EXPECT_EQ(cuda_kernels::kv_cache_write_config(81920),
            "threads=256 items_per_thread=4 copy_bytes=16");
  EXPECT_EQ(cuda_kernels::kv_cache_write_config(24), "threads=256 items_per_thread=4 copy_bytes=8");
  EXPECT_EQ(cuda_kernels::kv_cache_write_config(14), "threads=256 items_per_thread=4 copy_bytes=2");
}

}  // namespace
}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
