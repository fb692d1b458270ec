// The CUDA implementations of the FP8 grouped GEMM interfaces (grouped_gemm_fp8_impls.h): the
// call spec and tensors become GroupedGemmFP8Args; the configuration is the kernel's default per
// call spec, or in tuned mode the fastest of its tuning space on the call's real arguments.
#if TILEOPS_WITH_CUDA

#include "kernels/moe/grouped_gemm_fp8_impls.h"

#include <cstdint>

#include "tileops/core/cuda.h"

namespace tileops {

namespace ck = cuda_kernels;

namespace {

ck::GroupedGemmFP8Args shape_args(const GroupedGemmFP8Call& call) {
  auto args = ck::grouped_gemm_shape<ck::GroupedGemmFP8Args>(call);
  args.max_m = call.max_m;
  args.block_n = call.block_n;
  args.block_k = call.block_k;
  return args;
}

}  // namespace

GroupedGemmFP8CudaLaunch::GroupedGemmFP8CudaLaunch(const GroupedGemmFP8Call& call) : call_(call) {
  configs_.preset(0, ck::grouped_gemm_fp8_default_config(shape_args(call)));
}

std::optional<std::string> GroupedGemmFP8CudaLaunch::refusal(const GroupedGemmFP8Call& call) {
  return ck::grouped_gemm_fp8_refusal(shape_args(call));
}

std::vector<std::string> GroupedGemmFP8CudaLaunch::tuning_space() const {
  std::vector<std::string> out;
  for (const auto& c : ck::grouped_gemm_fp8_tuning_space(shape_args(call_))) out.push_back(c.str());
  return out;
}

void GroupedGemmFP8CudaLaunch::run(const Tensor& a, const Tensor& a_scales, const Tensor& offsets,
                                   const Tensor& b, const Tensor& b_scales, const Tensor& c,
                                   bool tune) {
  ck::GroupedGemmFP8Args args = shape_args(call_);
  args.a = a.data_ptr();
  args.a_scales = a_scales.data<float>();
  args.offsets = offsets.data<std::int32_t>();
  args.b = b.data_ptr();
  args.b_scales = b_scales.data<float>();
  args.c = c.data_ptr();
  const int device = call_.device.index;
  void* stream = cuda_current_stream(device);
  const auto config = configs_.choose(
      0, tune, [&] { return ck::grouped_gemm_fp8_default_config(args); },
      [&] {
        // Every candidate writes the same c (the call's own output): harmless.
        return tune_among(call_.max_m > 0 ? "moe_grouped_gemm_fp8_masked" : "moe_grouped_gemm_fp8",
                          call_.str(), ck::grouped_gemm_fp8_tuning_space(args), device, stream,
                          [&](const auto& cfg) { ck::launch_grouped_gemm_fp8(args, cfg, stream); });
      });
  ck::launch_grouped_gemm_fp8(args, config, stream);
}

namespace {

Tensor one_group_offsets(const GroupedGemmFP8Call& call) {
  Tensor offsets = Tensor::empty({2}, DType::int32);
  offsets.data<std::int32_t>()[0] = 0;
  offsets.data<std::int32_t>()[1] = static_cast<std::int32_t>(call.rows);
  return offsets.to(call.device);
}

}  // namespace

FP8BlockScaledGemmCuda::FP8BlockScaledGemmCuda(const GroupedGemmFP8Call& call)
    : launch_(call), offsets_(one_group_offsets(call)) {}

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
