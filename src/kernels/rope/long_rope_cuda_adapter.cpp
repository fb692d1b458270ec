#if TILEOPS_WITH_CUDA

#include "kernels/rope/long_rope_impls.h"

#include <fmt/format.h>

#include "tileops/core/cuda.h"

namespace tileops {

std::optional<std::string> LongRoPECuda::refusal(const LongRoPECall& call) {
  if (call.dtype != DType::float32 && call.dtype != DType::float16 &&
      call.dtype != DType::bfloat16) {
    return "dtype " + std::string(dtype_name(call.dtype)) + " is not float32, float16 or bfloat16";
  }
  return std::nullopt;
}

std::string LongRoPECuda::config() const {
  return configs_.describe();
}

std::vector<std::string> LongRoPECuda::tuning_space() const {
  const auto [batch, seq, heads] = configs_.last_key().value_or(Shape{0, 0, 0});
  std::vector<std::string> out;
  for (const auto& c : cuda_kernels::long_rope_tuning_space(batch, seq, heads, call_.half_dim,
                                                            call_.dtype, call_.device.index)) {
    out.push_back(c.str());
  }
  return out;
}

void LongRoPECuda::forward(const Tensor& x, const Tensor* positions, const Tensor& inv_freq,
                           const Tensor& y, std::int64_t batch, std::int64_t seq,
                           std::int64_t heads, double attention_scaling) {
  cuda_kernels::LongRoPEArgs args;
  args.x = x.data_ptr();
  args.y = y.data_ptr();
  args.positions = positions != nullptr ? positions->data_ptr() : nullptr;
  args.positions_dtype = call_.positions_dtype;
  args.inv_freq = static_cast<const double*>(inv_freq.data_ptr());  // float64 on the device
  args.batch = batch;
  args.seq = seq;
  args.heads = heads;
  args.half_dim = call_.half_dim;
  args.attention_scaling = static_cast<float>(attention_scaling);
  args.dtype = call_.dtype;
  const int device = call_.device.index;
  void* stream = cuda_current_stream(device);
  const auto config = configs_.choose(
      Shape{batch, seq, heads}, tune_requested(),
      [&] {
        return cuda_kernels::long_rope_default_config(batch, seq, heads, call_.half_dim,
                                                      call_.dtype, device);
      },
      [&] {
        // Tuning launches write y (never x unless y is x, where repeated rotation is harmless to
        // timing); the final launch below writes the real result from the caller's x. In place,
        // tune on a scratch output so x keeps its values.
        cuda_kernels::LongRoPEArgs trial = args;
        Tensor scratch;
        if (args.y == args.x) {
          scratch = Tensor::empty(y.sizes(), y.dtype(), y.device());
          trial.y = scratch.data_ptr();
        }
        return tune_among("long_rope",
                          fmt::format("{}|b{} s{} h{}", call_.str(), batch, seq, heads),
                          cuda_kernels::long_rope_tuning_space(batch, seq, heads, call_.half_dim,
                                                               call_.dtype, device),
                          device, stream,
                          [&](const auto& c) { cuda_kernels::launch_long_rope(trial, c, stream); });
      });
  cuda_kernels::launch_long_rope(args, config, stream);
}

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
