// The CPU implementations of the quantizing pre-permute: the CPU pre-permute into a scratch of
// x's dtype, then the CPU per-token-group quantization of all its rows, so that the values are
// those of MoEPrePermuteFwdOp followed by PerTokenGroupQuantFP8FwdOp by construction; the masked
// layout's moves those rows, bytes unchanged, into the experts' blocks.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/moe/moe_permute_impls.h"
#include "kernels/quant/token_group_quant_impls.h"

namespace tileops {

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
  const Tensor permuted =
      Tensor::empty({call_.tokens * call_.top_k, call_.hidden}, call_.dtype, call_.device);
  MoEPrePermuteCpu(permute, op_name_).forward(x, ids, map, permuted, offsets, inverse);
  if (permuted.numel() == 0) return;
  TokenGroupQuantCall quant;
  quant.device = call_.device;
  quant.rows = permuted.size(0);
  quant.cols = call_.hidden;
  quant.group_size = call_.group_size;
  quant.dtype = call_.dtype;
  TokenGroupQuantCpu(quant).forward(permuted, q, scales, eps);
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
