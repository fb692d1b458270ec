// The kernel contract of the position-encoding family: the call spec and the interface every
// LongRoPE implementation serves. Kernel code includes this header, never the op header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tileops/core/tensor.h"
#include "tileops/dispatch/kernel.h"

namespace tileops {

/// The call spec of the LongRoPE kernels. x is [batch, seq, heads, 2 * half_dim] (the 'sd'
/// layout is batch = heads = 1).
struct LongRoPECall : CallSpec {
  DType dtype = DType::float32;
  bool has_positions = false;
  DType positions_dtype = DType::int64;
  std::int64_t half_dim = 0;
  friend bool operator==(const LongRoPECall&, const LongRoPECall&) = default;
  std::size_t hash() const {
    return hash_fields(device, dtype, has_positions, positions_dtype, half_dim);
  }
  /// A tuning-database key: it keeps the spelling recorded before the type was renamed.
  std::string str() const {
    return spec_text(
        "LongRopeCall", device,
        {{"dtype", spec_field(dtype_name(dtype))},
         {"positions", has_positions ? spec_field(dtype_name(positions_dtype)) : "none"},
         {"half_dim", spec_field(half_dim)}});
  }
};

/// The kernel interface of LongRoPE. Contract: x and y contiguous [batch, seq, heads, 2R] of
/// `dtype` on `device` (y may be x: in place); positions nullptr or contiguous [batch, seq] of
/// positions_dtype; inv_freq [R] float64 on `device`; attention_scaling multiplies cos and sin.
class LongRoPEInterface {
 public:
  static constexpr std::string_view name = "long_rope";
  using Request = LongRoPECall;
  virtual ~LongRoPEInterface() = default;
  virtual void forward(const Tensor& x, const Tensor* positions, const Tensor& inv_freq,
                       const Tensor& y, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                       double attention_scaling) = 0;
};

}  // namespace tileops
