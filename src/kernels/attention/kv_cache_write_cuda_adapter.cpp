#if TILEOPS_WITH_CUDA

#include "kernels/attention/attention_impls.h"
#include "kernels/attention/kv_cache_write_cuda.h"
#include "tileops/core/cuda.h"

namespace tileops {

KVCacheWriteCuda::KVCacheWriteCuda(const KVCacheWriteCall& call)
    : call_(call),
      config_(cuda_kernels::kv_cache_write_config(
          call.heads_kv * call.head_dim * static_cast<std::int64_t>(element_size(call.dtype)))) {}

void KVCacheWriteCuda::forward(const Tensor& key, const Tensor& value, const Tensor& k_cache,
                               const Tensor& v_cache, const Tensor& slot_mapping) {
  cuda_kernels::KVCacheWriteArgs args;
  args.key = key.data_ptr();
  args.value = value.data_ptr();
  args.k_cache = k_cache.data_ptr();
  args.v_cache = v_cache.data_ptr();
  args.slot_mapping = static_cast<const std::int64_t*>(slot_mapping.data_ptr());
  args.tokens = key.size(0);
  args.row_elems = call_.heads_kv * call_.head_dim;
  args.slots = k_cache.size(0) * k_cache.size(1);
  args.dtype = call_.dtype;
  cuda_kernels::launch_kv_cache_write(args, cuda_current_stream(call_.device.index));
}

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
