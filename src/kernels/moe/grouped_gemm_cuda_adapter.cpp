// The CUDA implementation of the grouped GEMM interface (grouped_gemm_impls.h): the call spec and
// tensors become GroupedGemmArgs; the configuration is the kernel's default per call spec, or in
// tuned mode the fastest of its tuning space on the call's real arguments.
#if TILEOPS_WITH_CUDA

#include "kernels/moe/grouped_gemm_impls.h"

#include <cstdint>
#include <string>
#include <vector>

#include "tileops/core/cuda.h"

namespace tileops {

namespace ck = cuda_kernels;

ck::GroupedGemmArgs GroupedGemmCuda::shape_args() const {
  auto args = ck::grouped_gemm_shape<ck::GroupedGemmArgs>(call_);
  args.dtype = call_.dtype;
  return args;
}

GroupedGemmCuda::GroupedGemmCuda(const GroupedGemmCall& call) : call_(call) {
  configs_.preset(0, ck::grouped_gemm_default_config(shape_args(), call.device.index));
}

std::string GroupedGemmCuda::config() const {
  return configs_.describe();
}

std::vector<std::string> GroupedGemmCuda::tuning_space() const {
  std::vector<std::string> out;
  for (const auto& c : ck::grouped_gemm_tuning_space(shape_args(), call_.device.index)) {
    out.push_back(c.str());
  }
  return out;
}

void GroupedGemmCuda::forward(const Tensor& a, const Tensor& offsets, const Tensor& b,
                              const Tensor& c) {
  ck::GroupedGemmArgs args = shape_args();
  args.a = a.data_ptr();
  args.expert_offsets = offsets.data<std::int32_t>();
  args.b = b.data_ptr();
  args.c = c.data_ptr();
  const int device = call_.device.index;
  void* stream = cuda_current_stream(device);
  const auto config = configs_.choose(
      0, tune_requested(), [&] { return ck::grouped_gemm_default_config(args, device); },
      [&] {
        // Every candidate writes the same c (the call's own output): harmless.
        return tune_among("moe_grouped_gemm", call_.str(),
                          ck::grouped_gemm_tuning_space(args, device), device, stream,
                          [&](const auto& cfg) { ck::launch_grouped_gemm(args, cfg, stream); });
      });
  ck::launch_grouped_gemm(args, config, stream);
}

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
