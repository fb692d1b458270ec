// The kernel contract of the quantization family: the call spec and the interface every
// per-token-group FP8 implementation serves. Kernel code includes this header, never the op one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tileops/core/tensor.h"
#include "tileops/dispatch/kernel.h"

namespace tileops {

/// `rows` x `cols` activations of `dtype`, one scale per `group_size` columns.
struct TokenGroupQuantCall : CallSpec {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t group_size = 128;
  DType dtype = DType::bfloat16;
  friend bool operator==(const TokenGroupQuantCall&, const TokenGroupQuantCall&) = default;
  std::size_t hash() const { return hash_fields(device, rows, cols, group_size, dtype); }
  std::string str() const {
    return spec_text("TokenGroupQuantCall", device,
                     {{"rows", spec_field(rows)},
                      {"cols", spec_field(cols)},
                      {"group_size", spec_field(group_size)},
                      {"dtype", spec_field(dtype_name(dtype))}});
  }
};

/// x [rows, cols] contiguous; q [rows, cols] float8_e4m3fn; scales [rows, cols / group_size]
/// float32 (manifest/quant.yaml, PerTokenGroupQuantFP8FwdOp, defines the values).
class TokenGroupQuantInterface {
 public:
  static constexpr std::string_view name = "token_group_quant_fp8";
  using Request = TokenGroupQuantCall;
  virtual ~TokenGroupQuantInterface() = default;
  virtual void forward(const Tensor& x, const Tensor& q, const Tensor& scales, double eps) = 0;
};

}  // namespace tileops
