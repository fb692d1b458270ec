#if TILEOPS_WITH_CUDA

#include "kernels/attention/attention_varlen_cuda_impls.h"

#include <fmt/format.h>

#include "tileops/core/cuda.h"

namespace tileops {

std::optional<std::string> AttentionVarlenCuda::refusal(const AttentionVarlenCall& call) {
  if (call.dtype != DType::float16 && call.dtype != DType::bfloat16)
    return "dtype " + std::string(dtype_name(call.dtype)) + " is not float16 or bfloat16";
  if (call.head_dim != 64 && call.head_dim != 128 && call.head_dim != 256)
    return "head_dim " + std::to_string(call.head_dim) + " is not 64, 128 or 256";
  if (call.heads_q <= 0 || call.heads_kv <= 0 || call.heads_q % call.heads_kv != 0)
    return "heads_q " + std::to_string(call.heads_q) + " is not a positive multiple of heads_kv " +
           std::to_string(call.heads_kv);
  return std::nullopt;
}

std::string AttentionVarlenCuda::config() const {
  return configs_.describe();
}

std::vector<std::string> AttentionVarlenCuda::tuning_space() const {
  std::vector<std::string> out;
  for (const auto& c : cuda_kernels::attention_varlen_tuning_space(call_, call_.device.index))
    out.push_back(c.str());
  return out;
}

void AttentionVarlenCuda::forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& cu_seqlens_q, const Tensor& cu_seqlens_k,
                                  const Tensor& out, const Tensor& lse,
                                  const AttentionScores& scores) {
  cuda_kernels::AttentionVarlenArgs args;
  args.q = q.data_ptr();
  args.k = k.data_ptr();
  args.v = v.data_ptr();
  args.out = out.data_ptr();
  args.lse = static_cast<float*>(lse.data_ptr());
  args.cu_seqlens_q = static_cast<const std::int32_t*>(cu_seqlens_q.data_ptr());
  args.cu_seqlens_k = static_cast<const std::int32_t*>(cu_seqlens_k.data_ptr());
  args.total_q = q.size(0);
  args.total_k = k.size(0);
  args.batch = cu_seqlens_q.size(0) - 1;
  args.heads_q = call_.heads_q;
  args.heads_kv = call_.heads_kv;
  args.head_dim = call_.head_dim;
  args.dtype = call_.dtype;
  args.scores = scores;
  // The kernel's tile counter: this call's own (stream-ordered, freed after the kernel).
  const Tensor counter = Tensor::empty({1}, DType::int32, call_.device);
  args.workspace = static_cast<std::int32_t*>(counter.data_ptr());
  const int device = call_.device.index;
  void* stream = cuda_current_stream(device);
  const auto config = configs_.choose(
      Shape{args.total_q, args.total_k, args.batch}, tune_requested(),
      [&] { return cuda_kernels::attention_varlen_default_config(call_, device); },
      [&] {
        // The candidates write out and lse, which the launch below overwrites.
        return tune_among(
            "attention_varlen",
            fmt::format("{}|tq{} tk{} b{}", call_.str(), args.total_q, args.total_k, args.batch),
            cuda_kernels::attention_varlen_tuning_space(call_, device), device, stream,
            [&](const auto& c) { cuda_kernels::launch_attention_varlen(args, c, stream); });
      });
  cuda_kernels::launch_attention_varlen(args, config, stream);
}

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
