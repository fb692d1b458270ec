// The CUDA implementations of the pre-permute interfaces (plain, fused quantizing, unfused
// quantizing, masked) and the post-permute interface (moe_permute_impls.h): the call spec and
// tensors become PrePermuteArgs / PostPermuteArgs, with the ranking's and the token-first path's
// scratch from the stream-ordered pool, launched on tileops' current stream.
#if TILEOPS_WITH_CUDA

#include "kernels/moe/moe_permute_impls.h"

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/moe/moe_permute_cuda.h"
#include "kernels/moe/moe_permute_rank.h"
#include "kernels/quant/quant_cuda.h"
#include "tileops/core/cuda.h"

namespace tileops {

namespace ck = cuda_kernels;

namespace {

/// The pre-permute's arguments common to its plain and quantizing calls (Call: MoEPermuteCall or
/// MoEPrePermuteQuantCall); the caller sets where the rows go.
template <class Call>
ck::PrePermuteArgs pre_permute_args(const Call& call, const Tensor& x, const Tensor& ids,
                                    const Tensor* map, const Tensor& offsets,
                                    const Tensor& inverse) {
  ck::PrePermuteArgs args;
  args.x = x.data_ptr();
  args.x_row_stride = call.hidden;
  args.topk_ids = ids.data<std::int32_t>();
  args.expert_map = map != nullptr ? map->data<std::int32_t>() : nullptr;
  args.map_size = map != nullptr ? map->numel() : 0;
  args.expert_offsets = offsets.data<std::int32_t>();
  args.inverse = inverse.data<std::int32_t>();
  args.tokens = call.tokens;
  args.hidden = call.hidden;
  args.top_k = call.top_k;
  args.num_experts = call.num_experts;
  args.dtype = call.dtype;
  return args;
}

/// The multi-block ranking's scratch (PrePermuteArgs::rank_scratch), from the stream-ordered pool
/// where the ranking takes it; the caller holds it until the launch is enqueued.
template <class Call>
Tensor rank_scratch(const Call& call, ck::PrePermuteArgs& args) {
  const std::int64_t ints = ck::moe_rank_scratch_ints(call.tokens * call.top_k, call.num_experts);
  if (ints == 0) return {};
  Tensor scratch = Tensor::empty({ints}, DType::int32, call.device);
  args.rank_scratch = scratch.data<std::int32_t>();
  return scratch;
}

/// The scratch of the quantizing pre-permute's token-first path (PrePermuteArgs::token_q), taken
/// from the stream-ordered pool where the launch takes that path (Call: a quantizing
/// pre-permute's call; args with permuted_q set); the caller holds it until the launch is
/// enqueued.
template <class Call>
std::pair<Tensor, Tensor> token_scratch(const Call& call, ck::PrePermuteArgs& args) {
  if (!ck::moe_pre_permute_wants_token_scratch(args)) return {};
  Tensor q = Tensor::empty({call.tokens, call.hidden}, DType::float8_e4m3fn, call.device);
  Tensor scales =
      Tensor::empty({call.tokens, call.hidden / call.group_size}, DType::float32, call.device);
  args.token_q = q.data_ptr();
  args.token_scales = scales.data<float>();
  return {q, scales};
}

}  // namespace

void MoEPrePermuteCuda::forward(const Tensor& x, const Tensor& ids, const Tensor* map,
                                const Tensor& permuted, const Tensor& offsets,
                                const Tensor& inverse) {
  ck::PrePermuteArgs args = pre_permute_args(call_, x, ids, map, offsets, inverse);
  args.permuted = permuted.data_ptr();
  const Tensor ranking = rank_scratch(call_, args);
  ck::launch_moe_pre_permute(args, cuda_current_stream(call_.device.index));
}

std::optional<std::string> MoEPrePermuteQuantCuda::refusal(const MoEPrePermuteQuantCall& call) {
  return ck::moe_gather_quant_fp8_refusal(call.dtype, call.group_size);
}

void MoEPrePermuteQuantCuda::forward(const Tensor& x, const Tensor& ids, const Tensor* map,
                                     const Tensor& q, const Tensor& scales, const Tensor& offsets,
                                     const Tensor& inverse, double eps) {
  // The kernel reads x in 16-byte vectors: a view at an unaligned address is copied first (its
  // rows are whole vectors when the layout is taken, so only the base address can be off).
  const bool aligned = reinterpret_cast<std::uintptr_t>(x.data_ptr()) % 16 == 0;
  const Tensor source = aligned ? x : Tensor::empty(x.sizes(), x.dtype(), x.device());
  if (!aligned) source.copy_(x);
  ck::PrePermuteArgs args = pre_permute_args(call_, source, ids, map, offsets, inverse);
  // No rows to write (no pair or no column): the ranking alone writes offsets and inverse, and
  // the empty outputs' null pointers never reach the quantization's checks.
  // The tokens' codes and scales, which the launch gathers where pairs share tokens.
  Tensor token_q;
  Tensor token_scales;
  if (q.numel() > 0) {
    args.permuted_q = q.data_ptr();
    args.permuted_scales = scales.data<float>();
    args.quant_group_size = call_.group_size;
    args.quant_eps = eps;
    std::tie(token_q, token_scales) = token_scratch(call_, args);
  }
  const Tensor ranking = rank_scratch(call_, args);
  ck::launch_moe_pre_permute(args, cuda_current_stream(call_.device.index));
}

std::optional<std::string> MoEPrePermuteQuantMaskedCuda::refusal(
    const MoEPrePermuteQuantMaskedCall& call) {
  return ck::moe_gather_quant_fp8_refusal(call.dtype, call.group_size);
}

void MoEPrePermuteQuantMaskedCuda::forward(const Tensor& x, const Tensor& ids, const Tensor* map,
                                           const Tensor& a, const Tensor& a_scales,
                                           const Tensor& counts, const Tensor& inverse,
                                           double eps) {
  const bool aligned = reinterpret_cast<std::uintptr_t>(x.data_ptr()) % 16 == 0;
  const Tensor source = aligned ? x : Tensor::empty(x.sizes(), x.dtype(), x.device());
  if (!aligned) source.copy_(x);
  // The contiguous offsets are the ranking's scratch (from the stream-ordered pool: capturable).
  const Tensor offsets = Tensor::empty({call_.num_experts + 1}, DType::int32, call_.device);
  ck::PrePermuteArgs args = pre_permute_args(call_, source, ids, map, offsets, inverse);
  args.permuted_q = a.data_ptr();
  args.permuted_scales = a_scales.data<float>();
  args.quant_group_size = call_.group_size;
  args.quant_eps = eps;
  args.masked_max_m = call_.max_m;
  args.masked_counts = counts.data<std::int32_t>();
  const auto [token_q, token_scales] = token_scratch(call_, args);
  const Tensor ranking = rank_scratch(call_, args);
  ck::launch_moe_pre_permute(args, cuda_current_stream(call_.device.index));
}

void MoEPrePermuteQuantUnfusedCuda::forward(const Tensor& x, const Tensor& ids, const Tensor* map,
                                            const Tensor& q, const Tensor& scales,
                                            const Tensor& offsets, const Tensor& inverse,
                                            double eps) {
  const Tensor permuted =
      Tensor::empty({call_.tokens * call_.top_k, call_.hidden}, call_.dtype, call_.device);
  ck::PrePermuteArgs args = pre_permute_args(call_, x, ids, map, offsets, inverse);
  args.permuted = permuted.data_ptr();
  void* stream = cuda_current_stream(call_.device.index);
  const Tensor ranking = rank_scratch(call_, args);
  ck::launch_moe_pre_permute(args, stream);
  ck::TokenGroupQuantArgs quant;
  quant.x = permuted.data_ptr();
  quant.q = q.data_ptr();
  quant.scales = scales.data<float>();
  quant.rows = permuted.size(0);
  quant.cols = call_.hidden;
  quant.group_size = call_.group_size;
  quant.eps = eps;
  quant.dtype = call_.dtype;
  ck::launch_token_group_quant_fp8(quant, stream);
}

void MoEPostPermuteCuda::forward(const Tensor& expert_out, const Tensor& weights,
                                 const Tensor& inverse, const Tensor& y, double scale) {
  ck::PostPermuteArgs args;
  args.expert_out = expert_out.data_ptr();
  args.rows = call_.rows;
  args.topk_weights = weights.data<float>();
  args.inverse = inverse.data<std::int32_t>();
  args.out = y.data_ptr();
  args.tokens = call_.tokens;
  args.hidden = call_.hidden;
  args.top_k = call_.top_k;
  args.scale = static_cast<float>(scale);
  args.dtype = call_.dtype;
  ck::launch_moe_post_permute(args, cuda_current_stream(call_.device.index));
}

}  // namespace tileops

#endif  // TILEOPS_WITH_CUDA
