// The CPU implementations of the quantizing pre-permute: the CPU pre-permute's row order, each
// token's row quantized once by the CPU per-token-group quantization (a row's codes and scales
// depend on that row only) and gathered in that order, zero rows past the routed ones quantized
// once too: the values of MoEPrePermuteFwdOp followed by PerTokenGroupQuantFP8FwdOp, with
// 1 / top_k of its quantization; the masked layout's moves those rows, bytes unchanged, into the
// experts' blocks.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/moe/moe_permute_impls.h"
#include "kernels/quant/token_group_quant_impls.h"

namespace tileops {

namespace {

// The codes and scales of every row of x, by the CPU per-token-group quantization.
struct QuantizedRows {
  Tensor q;
  Tensor scales;
};

QuantizedRows quantize_rows(const Tensor& x, const MoEPrePermuteQuantCall& call, double eps) {
  const std::int64_t rows = x.size(0);
  QuantizedRows out{
      Tensor::empty({rows, call.hidden}, DType::float8_e4m3fn, call.device),
      Tensor::empty({rows, call.hidden / call.group_size}, DType::float32, call.device)};
  TokenGroupQuantCall quant;
  quant.device = call.device;
  quant.rows = rows;
  quant.cols = call.hidden;
  quant.group_size = call.group_size;
  quant.dtype = call.dtype;
  TokenGroupQuantCpu(quant).forward(x, out.q, out.scales, eps);
  return out;
}

}  // namespace

void MoEPrePermuteQuantCpu::forward(const Tensor& x, const Tensor& ids, const Tensor* map,
                                    const Tensor& q, const Tensor& scales, const Tensor& offsets,
                                    const Tensor& inverse, double eps) {
  MoEPermuteCall permute;
  permute.device = call_.device;
  permute.tokens = call_.tokens;
  permute.hidden = call_.hidden;
  permute.top_k = call_.top_k;
  permute.num_experts = call_.num_experts;
  permute.dtype = call_.dtype;
  permute.has_map = call_.has_map;
  const std::vector<std::int64_t> source =
      pre_permute_rows_cpu(permute, op_name_, ids, map, offsets, inverse);
  const std::int64_t pairs = call_.tokens * call_.top_k;
  if (pairs == 0 || call_.hidden == 0) return;
  const auto routed = static_cast<std::int64_t>(source.size());
  const QuantizedRows tokens = quantize_rows(x, call_, eps);
  const QuantizedRows zero = quantize_rows(
      Tensor::zeros({routed < pairs ? 1 : 0, call_.hidden}, call_.dtype, call_.device), call_, eps);
  const std::int64_t hidden = call_.hidden;
  const std::int64_t groups = hidden / call_.group_size;
  const auto* code_rows = static_cast<const std::uint8_t*>(tokens.q.data_ptr());
  const float* scale_rows = tokens.scales.data<float>();
  const auto* zero_codes = static_cast<const std::uint8_t*>(zero.q.data_ptr());
  const float* zero_scales = zero.scales.data<float>();
  auto* qp = static_cast<std::uint8_t*>(q.data_ptr());
  float* sp = scales.data<float>();
  cpu::parallel_for(pairs, pairs * hidden, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const bool is_routed = r < routed;
      const std::uint8_t* codes = is_routed ? code_rows + source[r] * hidden : zero_codes;
      const float* row_scales = is_routed ? scale_rows + source[r] * groups : zero_scales;
      std::memcpy(qp + r * hidden, codes, static_cast<std::size_t>(hidden));
      std::copy_n(row_scales, groups, sp + r * groups);
    }
  });
}

void MoEPrePermuteQuantMaskedCpu::forward(const Tensor& x, const Tensor& ids, const Tensor* map,
                                          const Tensor& a, const Tensor& a_scales,
                                          const Tensor& counts, const Tensor& inverse, double eps) {
  constexpr std::string_view op = "MoEPrePermuteQuantFP8MaskedFwdOp";
  MoEPrePermuteQuantCall contiguous;
  contiguous.device = call_.device;
  contiguous.tokens = call_.tokens;
  contiguous.hidden = call_.hidden;
  contiguous.top_k = call_.top_k;
  contiguous.num_experts = call_.num_experts;
  contiguous.group_size = call_.group_size;
  contiguous.dtype = call_.dtype;
  contiguous.has_map = call_.has_map;
  const std::int64_t pairs = call_.tokens * call_.top_k;
  const std::int64_t groups = call_.hidden / call_.group_size;
  const std::int64_t experts = call_.num_experts;
  const std::int64_t max_m = call_.max_m;
  const Tensor q = Tensor::empty({pairs, call_.hidden}, DType::float8_e4m3fn, call_.device);
  const Tensor s = Tensor::empty({pairs, groups}, DType::float32, call_.device);
  const Tensor offsets = Tensor::empty({experts + 1}, DType::int32, call_.device);
  // inverse holds the contiguous ranks first; they become masked rows below.
  MoEPrePermuteQuantCpu(contiguous, op).forward(x, ids, map, q, s, offsets, inverse, eps);
  const auto* o = offsets.data<std::int32_t>();
  // Every count is checked before anything of the masked layout is written.
  for (std::int64_t e = 0; e < experts; ++e) {
    const std::int64_t count = o[e + 1] - o[e];
    if (count > max_m) {
      throw SignatureError(fmt::format(
          "{}: expert {} receives {} pairs, more than max_m = {} rows (ids are distinct per token "
          "when max_m >= M)",
          op, e, count, max_m));
    }
  }
  auto* c = counts.data<std::int32_t>();
  for (std::int64_t e = 0; e < experts; ++e) {
    const std::int64_t count = o[e + 1] - o[e];
    c[e] = static_cast<std::int32_t>(count);
    if (count == 0) continue;
    std::memcpy(static_cast<std::uint8_t*>(a.data_ptr()) + e * max_m * call_.hidden,
                static_cast<const std::uint8_t*>(q.data_ptr()) + o[e] * call_.hidden,
                static_cast<std::size_t>(count * call_.hidden));
    std::copy_n(s.data<float>() + o[e] * groups, count * groups,
                a_scales.data<float>() + e * max_m * groups);
  }
  auto* inv = inverse.data<std::int32_t>();
  for (std::int64_t i = 0; i < pairs; ++i) {
    if (inv[i] < 0) continue;
    // The expert of rank r: the last one starting at or before r (empty experts start there too,
    // and upper_bound passes them).
    const auto e = std::upper_bound(o, o + experts + 1, inv[i]) - o - 1;
    inv[i] = static_cast<std::int32_t>(e * max_m + (inv[i] - o[e]));
  }
}

}  // namespace tileops
