#if TILEOPS_WITH_CUDA

#include "kernels/rope/long_rope_cuda_adapter.h"

#include <fmt/format.h>

#include "kernels/cuda_tuning.h"
#include "tileops/core/cuda.h"

namespace tileops {

std::optional<std::string> LongRopeCuda::refusal(const LongRopeCall& call) {
  if (call.dtype != DType::float32 && call.dtype != DType::float16 &&
      call.dtype != DType::bfloat16) {
    return "dtype " + std::string(dtype_name(call.dtype)) + " is not float32, float16 or bfloat16";
  }
  return std::nullopt;
}

std::string LongRopeCuda::config() const {
  std::lock_guard lock(mutex_);
  const auto it = configs_.find(last_shape_);
  if (it == configs_.end()) return {};
  return it->second.config.str() + (it->second.tuned ? " (tuned)" : "");
}

std::vector<std::string> LongRopeCuda::tuning_space() const {
  Shape shape;
  {
    std::lock_guard lock(mutex_);
    shape = last_shape_;
  }
  std::vector<std::string> out;
  const auto [batch, seq, heads] = shape;
  for (const auto& c : cuda_kernels::long_rope_tuning_space(batch, seq, heads, call_.half_dim,
                                                            call_.dtype, call_.device.index)) {
    out.push_back(c.str());
  }
  return out;
}

void LongRopeCuda::forward(const Tensor& x, const Tensor* positions, const Tensor& inv_freq,
                           const Tensor& y, std::int64_t batch, std::int64_t seq,
                           std::int64_t heads, double attention_scaling) {
  cuda_kernels::LongRopeArgs args;
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
  void* stream = cuda_current_stream(call_.device.index);
  const Shape shape{batch, seq, heads};
  cuda_kernels::LongRopeConfig config;
  {
    std::lock_guard lock(mutex_);
    last_shape_ = shape;
    auto it = configs_.find(shape);
    if (it == configs_.end()) {
      it = configs_
               .emplace(shape, Chosen{cuda_kernels::long_rope_default_config(
                                          batch, seq, heads, call_.half_dim, call_.dtype,
                                          call_.device.index),
                                      false})
               .first;
    }
    if (tune_requested() && !it->second.tuned) {
      const auto space = cuda_kernels::long_rope_tuning_space(batch, seq, heads, call_.half_dim,
                                                              call_.dtype, call_.device.index);
      std::vector<std::string> names;
      for (const auto& c : space) names.push_back(c.str());
      // Tuning launches write y (never x unless y is x, where repeated rotation is harmless to
      // timing); the final launch below writes the real result from the caller's x. In place,
      // tune on a scratch output so x keeps its values.
      cuda_kernels::LongRopeArgs trial = args;
      Tensor scratch;
      if (args.y == args.x) {
        scratch = Tensor::empty(y.sizes(), y.dtype(), y.device());
        trial.y = scratch.data_ptr();
      }
      const std::string key =
          tuning_key("long_rope", fmt::format("{}|b{} s{} h{}", call_.str(), batch, seq, heads));
      const std::size_t best = tune_by_timing(
          key, names, call_.device.index, stream,
          [&](std::size_t i) { cuda_kernels::launch_long_rope(trial, space[i], stream); });
      it->second = Chosen{space[best], true};
    }
    config = it->second.config;
  }
  cuda_kernels::launch_long_rope(args, config, stream);
}

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
