// A backend plugin for the plugin test: target "plugged" serves RMSNormFwdOp by writing 7s.
#include "tileops/target/target.h"

extern "C" void tileops_backend_register() {
  using namespace tileops;
  register_detector("plugged", [](const Device&) { return false; });
  register_kernel_builder(
      "RMSNormFwdOp", "plugged",
      [](std::span<const std::optional<TensorSpec>> inputs, const ParamMap&) {
        const TensorSpec x = *inputs[0];
        return TargetKernel([x](std::span<const Tensor>, std::span<const Tensor> outs) {
          const Tensor y = outs[0].defined() ? outs[0] : Tensor::empty(x.shape, x.dtype, x.device);
          y.fill_(7.0);
          return std::vector<Tensor>{y};
        });
      });
}
