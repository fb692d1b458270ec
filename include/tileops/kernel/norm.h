// The kernel contract of the normalization family: the call spec and the interface every RMSNorm
// implementation (in-tree or a backend's kernel type) serves. Kernel code includes this header,
// never the op header (docs/design/op-base.md, "Kernel selection").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tileops/core/tensor.h"
#include "tileops/dispatch/kernel.h"

namespace tileops {

/// The call spec of the RMSNorm kernels: rows × cols with one weight of cols, plain or with the
/// fused residual add.
struct RMSNormCall : CallSpec {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  DType dtype = DType::float32;
  bool fused_add = false;
  friend bool operator==(const RMSNormCall&, const RMSNormCall&) = default;
  std::size_t hash() const { return hash_fields(device, rows, cols, dtype, fused_add); }
  /// A tuning-database key: it keeps the spelling recorded before the type was renamed.
  std::string str() const {
    return spec_text("RmsNormCall", device,
                     {{"rows", spec_field(rows)},
                      {"cols", spec_field(cols)},
                      {"dtype", spec_field(dtype_name(dtype))},
                      {"fused_add", spec_field(fused_add)}});
  }
};

/// The kernel interface both norm ops call. Contract:
///  - x: [rows, cols], dtype `dtype`, inner stride 1 (rows may be strided), on `device`;
///  - residual: nullptr for plain RMSNorm; else [rows, cols] like x, read and written in place
///    (residual <- T(x + residual), then normalized);
///  - weight: [cols], contiguous; y: [rows, cols], inner stride 1; y may be x (same memory).
class RMSNormInterface {
 public:
  static constexpr std::string_view name = "rms_norm";
  using Request = RMSNormCall;
  virtual ~RMSNormInterface() = default;
  virtual void forward(const Tensor& x, const Tensor* residual, const Tensor& weight,
                       const Tensor& y, double eps) = 0;
};

}  // namespace tileops
