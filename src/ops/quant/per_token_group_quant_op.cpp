// PerTokenGroupQuantFP8FwdOp: hands contiguous tensors to the token-group quantization interface.
// Only a CPU implementation exists so far; on CUDA the kernel table reports that no in-tree
// kernel runs there (OpNotAvailableError), as for any op without a kernel on a device.
#include "kernels/quant/token_group_quant_impls.h"
#include "tileops/ops/quant.h"

namespace tileops {

std::vector<InterfaceInfo> PerTokenGroupQuantFP8FwdOp::interfaces() {
  return {interface<TokenGroupQuantInterface>()};
}

std::vector<ImplementationInfo> PerTokenGroupQuantFP8FwdOp::kernel_types() {
  return {implementation<TokenGroupQuantCpu>("token_group_quant_fp8_cpu", "TokenGroupQuantCpu")};
}

void PerTokenGroupQuantFP8FwdOp::forward(const SignatureCall& call, const Tensor& x,
                                         const Tensor& q, const Tensor& scales) {
  TokenGroupQuantCall spec;
  spec.device = call.device;
  spec.rows = x.size(0);
  spec.cols = x.size(1);
  spec.group_size = params().group_size;
  spec.dtype = x.dtype();
  auto& kernel = kernel_for<TokenGroupQuantInterface>(spec);
  if (x.numel() == 0) return;
  kernel.forward(x.contiguous(), q, scales, params().eps);
}

TILEOPS_REGISTER_OP(PerTokenGroupQuantFP8FwdOp)

}  // namespace tileops
