// The CUDA implementation of the token-group quantization interface: hands the call's tensors to
// the plain launcher (quant_cuda.h) on the device's current stream.
#if TILEOPS_WITH_CUDA

#include <cstdint>

#include "kernels/quant/quant_cuda.h"
#include "kernels/quant/token_group_quant_impls.h"
#include "tileops/core/cuda.h"

namespace tileops {

void TokenGroupQuantCuda::forward(const Tensor& x, const Tensor& q, const Tensor& scales,
                                  double eps) {
  cuda_kernels::TokenGroupQuantArgs args;
  args.x = x.data_ptr();
  args.q = q.data_ptr();
  args.scales = scales.data<float>();
  args.rows = call_.rows;
  args.cols = call_.cols;
  args.group_size = call_.group_size;
  args.eps = eps;
  args.dtype = call_.dtype;
  cuda_kernels::launch_token_group_quant_fp8(args, cuda_current_stream(call_.device.index));
}

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
