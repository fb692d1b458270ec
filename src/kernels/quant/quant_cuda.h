// CUDA kernels of the quantization family, with a plain launch API (internal header: no CUDA
// headers here; the stream is passed as void* and is a cudaStream_t; nullptr is the legacy
// default stream).
//
// - launch_token_group_quant_fp8: per-token-group FP8 (e4m3fn) quantization with float32 scales.
//
// The launcher raises SignatureError for arguments the kernels cannot take and UsageError when the
// CUDA runtime reports an error. An empty problem launches nothing.
#pragma once

#include <cstdint>

#include "tileops/core/dtype.h"

namespace tileops::cuda_kernels {

// Per-token-group FP8 quantization, bit for bit what the CPU implementation writes
// (manifest/quant.yaml, PerTokenGroupQuantFP8FwdOp). Group i (i < rows * cols / group_size) is
// the group_size consecutive elements x[i * group_size ...] (a row holds cols / group_size
// groups), with amax its largest |x| in float32 (NaN if any x is NaN):
//   scales[i] = float(max(double(amax), eps) / 448)   (double division, one rounding);
//               a NaN amax gives the quiet NaN 0x7fc00000
//   q[j]      = e4m3fn(clamp(float(x[j]) / scales[i], -448, 448)), round to nearest even;
//               a NaN quotient gives the code 0x7f
// Fast path: 16-byte loads, a group spread over 1..32 lanes of a warp, one, two or four vectors a
// lane (group_size / (16 / sizeof(T)) a power of two up to 128); other group sizes or pointers
// not aligned to the vectors take a one-warp-per-group scalar kernel with the same values.
struct TokenGroupQuantArgs {
  const void* x = nullptr;  ///< [rows, cols] contiguous, dtype
  void* q = nullptr;        ///< [rows, cols] contiguous float8_e4m3fn codes
  float* scales = nullptr;  ///< [rows, cols / group_size] contiguous
  int64_t rows = 0, cols = 0, group_size = 128;
  double eps = 1e-10;
  DType dtype = DType::bfloat16;  ///< float32, float16 or bfloat16
};
void launch_token_group_quant_fp8(const TokenGroupQuantArgs& args, void* stream);

}  // namespace tileops::cuda_kernels
