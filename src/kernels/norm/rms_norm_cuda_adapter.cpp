#if TILEOPS_WITH_CUDA

#include "kernels/norm/rms_norm_impls.h"

#include <algorithm>
#include <vector>

#include "tileops/core/cuda.h"

namespace tileops {

std::optional<std::string> RMSNormCuda::refusal(const RMSNormCall& call) {
  if (call.dtype != DType::float32 && call.dtype != DType::float16 &&
      call.dtype != DType::bfloat16) {
    return "dtype " + std::string(dtype_name(call.dtype)) + " is not float32, float16 or bfloat16";
  }
  return std::nullopt;
}

RMSNormCuda::RMSNormCuda(const RMSNormCall& call)
    : call_(call),
      fallback_(cuda_kernels::rms_norm_fallback_config(call.rows, call.cols, call.dtype,
                                                       call.fused_add, call.device.index)) {
  configs_.preset(0, default_config());
}

cuda_kernels::RMSNormConfig RMSNormCuda::default_config() const {
  return cuda_kernels::rms_norm_default_config(call_.rows, call_.cols, call_.dtype, call_.fused_add,
                                               call_.device.index);
}

std::string RMSNormCuda::config() const {
  std::string out = configs_.describe();
  std::lock_guard lock(mutex_);
  if (last_call_fallback_) out += "; the last call ran " + fallback_.str() + ": " + last_refusal_;
  return out;
}

std::vector<std::string> RMSNormCuda::tuning_space() const {
  std::vector<std::string> out;
  for (const auto& c : cuda_kernels::rms_norm_tuning_space(call_.rows, call_.cols, call_.dtype,
                                                           call_.fused_add, call_.device.index)) {
    out.push_back(c.str());
  }
  return out;
}

cuda_kernels::RMSNormConfig RMSNormCuda::tune(const cuda_kernels::RMSNormArgs& args,
                                              void* stream) const {
  // The candidates that serve these arguments: the staged ones only on 16-byte aligned pointers
  // and row strides (the database key says which set was timed).
  std::vector<cuda_kernels::RMSNormConfig> space;
  bool staged_refused = false;
  for (const auto& c : cuda_kernels::rms_norm_tuning_space(call_.rows, call_.cols, call_.dtype,
                                                           call_.fused_add, call_.device.index)) {
    if (cuda_kernels::rms_norm_staged_refusal(args, c).empty()) {
      space.push_back(c);
    } else {
      staged_refused = true;
    }
  }
  // Tuning launches write y repeatedly (harmless) and, in fused mode, would add x into the
  // residual repeatedly: tune on a scratch copy of the residual.
  cuda_kernels::RMSNormArgs trial = args;
  Tensor scratch;
  if (args.residual != nullptr) {
    scratch = Tensor::empty({args.rows, args.residual_row_stride}, call_.dtype, call_.device);
    trial.residual = scratch.data_ptr();
  }
  return tune_among("rms_norm", call_.str() + (staged_refused ? " unaligned" : ""), space,
                    call_.device.index, stream,
                    [&](const auto& c) { cuda_kernels::launch_rms_norm(trial, c, stream); });
}

void RMSNormCuda::forward(const Tensor& x, const Tensor* residual, const Tensor& weight,
                          const Tensor& y, double eps) {
  cuda_kernels::RMSNormArgs args;
  args.x = x.data_ptr();
  args.x_row_stride = x.stride(0);
  args.residual = residual != nullptr ? residual->data_ptr() : nullptr;
  args.residual_row_stride = residual != nullptr ? residual->stride(0) : 0;
  args.weight = weight.data_ptr();
  args.y = y.data_ptr();
  args.y_row_stride = y.stride(0);
  args.rows = x.size(0);
  args.cols = x.size(1);
  args.eps = static_cast<float>(eps);
  args.dtype = call_.dtype;
  void* stream = cuda_current_stream(call_.device.index);
  cuda_kernels::RMSNormConfig config = configs_.choose(
      0, tune_requested(), [&] { return default_config(); }, [&] { return tune(args, stream); });
  // A staged configuration serves only aligned pointers and row strides: these arguments may not
  // be (a view one element in, a padded row). config() says when the fallback ran.
  std::string why = cuda_kernels::rms_norm_staged_refusal(args, config);
  const bool fallback = !why.empty();
  {
    std::lock_guard lock(mutex_);
    last_call_fallback_ = fallback;
    if (fallback) last_refusal_ = std::move(why);
  }
  if (fallback) config = fallback_;
  cuda_kernels::launch_rms_norm(args, config, stream);
}

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
