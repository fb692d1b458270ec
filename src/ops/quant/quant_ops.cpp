// PerTokenGroupQuantFP8FwdOp: hands contiguous tensors to the token-group quantization interface
// (a CPU implementation and, in CUDA builds, a Hopper kernel writing the same bits).
// Then its double-precision reference: amax and the scale in double
// (the scale rounded once to float32, as the op hands it over), the quotient rounded to float32
// as the manifest defines it, then to the nearest float8_e4m3fn value found among all finite
// codes decoded here from the format's definition (not through tileops/core/half.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/quant/token_group_quant_impls.h"
#include "ops/quant/e4m3_reference.h"
#include "tileops/base/reference.h"
#include "tileops/core/value.h"
#include "tileops/ops/quant.h"

namespace tileops {

std::vector<ImplementationInfo> gen::PerTokenGroupQuantFP8FwdOpKernels::kernel_types() {
  std::vector<ImplementationInfo> table;
  table.push_back(
      implementation<TokenGroupQuantCpu>("token_group_quant_fp8_cpu", "TokenGroupQuantCpu"));
#if TILEOPS_WITH_CUDA
  table.push_back(
      implementation<TokenGroupQuantCuda>("token_group_quant_fp8_cuda", "TokenGroupQuantCuda"));
#endif
  return table;
}

void PerTokenGroupQuantFP8FwdOp::forward(const Indices& call, const Tensor& x, const Tensor& q,
                                         const Tensor& scales) {
  TokenGroupQuantCall spec;
  spec.device = call.device;
  spec.rows = call.M;
  spec.cols = call.K;
  spec.group_size = params().group_size;
  spec.dtype = call.T;
  auto& kernel = kernel_for<TokenGroupQuantInterface>(spec);
  if (x.numel() == 0) return;
  kernel.forward(x.contiguous(), q, scales, params().eps);
}

TILEOPS_REGISTER_OP(PerTokenGroupQuantFP8FwdOp)

// ---- the double-precision reference ---------------------------------------------------------

namespace {

using reference_fp8::e4m3_value;

/// v (finite, |v| <= 448) to the nearest e4m3fn value; a tie goes to the even code. The
/// non-negative finite codes 0..126 increase with their value, so a binary search finds the
/// neighbours (the bench checks 29M values at a time).
double round_to_e4m3(double v) {
  static const std::vector<double> magnitudes = [] {
    std::vector<double> m;
    for (int c = 0; c < 127; ++c) m.push_back(e4m3_value(c));
    return m;
  }();
  const double a = std::fabs(v);
  const auto above = std::lower_bound(magnitudes.begin(), magnitudes.end(), a);
  auto code = above - magnitudes.begin();
  if (above != magnitudes.begin() && (above == magnitudes.end() || *above != a)) {
    const auto below = code - 1;
    const double down = a - magnitudes[below];
    const double up = above == magnitudes.end() ? down + 1 : *above - a;
    if (down < up || (down == up && below % 2 == 0)) code = below;
  }
  // Keep the sign, of a zero too (the op writes -0 for a small negative value).
  return std::copysign(magnitudes[code], v);
}

std::vector<Tensor> token_group_quant_reference(std::span<const Tensor> in, const ParamMap& p) {
  const Tensor& x = in[0];
  const std::int64_t rows = x.size(0);
  const std::int64_t cols = x.size(1);
  const std::int64_t group = std::get<std::int64_t>(p.at("group_size"));
  const double eps = std::get<double>(p.at("eps"));
  const std::vector<double> xv = x.to(Device::cpu()).to_vector();
  const std::int64_t groups = cols / group;
  Tensor q = Tensor::empty({rows, cols}, DType::float32);
  Tensor scales = Tensor::empty({rows, groups}, DType::float32);
  float* qp = q.data<float>();
  float* sp = scales.data<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::int64_t at = r * cols + g * group;
      double amax = 0;
      for (std::int64_t j = 0; j < group; ++j) {
        const double a = std::fabs(xv[at + j]);
        amax = std::isnan(a) || std::isnan(amax) ? std::numeric_limits<double>::quiet_NaN()
                                                 : std::max(amax, a);
      }
      const double scale = static_cast<float>(std::isnan(amax) ? amax : std::max(amax, eps) / 448);
      sp[r * groups + g] = static_cast<float>(scale);
      for (std::int64_t j = 0; j < group; ++j) {
        const double v = static_cast<float>(xv[at + j] / scale);
        qp[at + j] = std::isnan(v)
                         ? std::numeric_limits<float>::quiet_NaN()
                         : static_cast<float>(round_to_e4m3(std::clamp(v, -448.0, 448.0)));
      }
    }
  }
  return {q.to(DType::float8_e4m3fn), scales};
}

/// The row-sampled reference (`tileops bench` checks the cases too large for the whole one with
/// it): a row's groups read that row alone, so the sampled rows of x give the sampled rows of q
/// and scales, as the whole reference computes them.
std::vector<Tensor> token_group_quant_sampled(std::span<const Tensor> in, const ParamMap& p,
                                              std::span<const std::int64_t> rows) {
  const Tensor x = gather_rows(in[0], rows);
  return token_group_quant_reference(std::span<const Tensor>(&x, 1), p);
}

}  // namespace

TILEOPS_REGISTER_REFERENCE(PerTokenGroupQuantFP8FwdOp, token_group_quant_reference)
TILEOPS_REGISTER_SAMPLED_REFERENCE(PerTokenGroupQuantFP8FwdOp, token_group_quant_sampled)

}  // namespace tileops
