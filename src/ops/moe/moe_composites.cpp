// The composite ops of the MoE family: the expert MLP (two grouped GEMMs), its FP8 form
// (quantize, FP8 grouped GEMM, twice) and its masked FP8 form, the fused experts (pre-permute per
// expert count, quantizing for FP8 weights, the MLP the weights' dtype selects, the masked decode
// path by shape, post-permute; the MLPs held at construction) and the fused MoE layer (routing,
// then the experts between a prepare and a finalize step).
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <tuple>

#include "tileops/ops/moe.h"

namespace tileops {

// ---- MoEExpertMLPFwdOp ---------------------------------------------------------------------

MoEExpertMLPFwdOp::MoEExpertMLPFwdOp(Params params, Target target)
    : MoEExpertMLPFwdOpBase(std::move(params), std::move(target)) {
  gate_up_ = &delegate_for<MoEGroupedGemmFwdOp>("gate_up", std::nullopt, nullptr,
                                                {.activation = this->params().activation});
  down_ = &delegate_for<MoEGroupedGemmFwdOp>("down", std::nullopt, nullptr, {.activation = "none"});
}

void MoEExpertMLPFwdOp::forward(const Indices&, const Tensor& x, const Tensor& expert_offsets,
                                const Tensor& w13, const Tensor& w2, const Tensor& y) {
  const Tensor h = (*gate_up_)(x, expert_offsets, w13);
  (*down_)(h, expert_offsets, w2, y);
}

// ---- MoEExpertMLPFP8FwdOp ------------------------------------------------------------------

namespace {

// DeepSeek-V3's block: 1 x 128 activation groups, 128 x 128 weight blocks (manifest/moe.yaml).
constexpr std::int64_t kFP8Block = 128;

}  // namespace

MoEExpertMLPFP8FwdOp::MoEExpertMLPFP8FwdOp(Params params, Target target)
    : MoEExpertMLPFP8FwdOpBase(std::move(params), std::move(target)) {
  quantize_x_ = &delegate_for<PerTokenGroupQuantFP8FwdOp>("quantize_x", std::nullopt, nullptr,
                                                          {.group_size = kFP8Block});
  gate_up_ = &delegate_for<MoEGroupedGemmFP8FwdOp>(
      "gate_up", std::nullopt, nullptr,
      {.activation = this->params().activation, .block_n = kFP8Block, .block_k = kFP8Block});
  quantize_h_ = &delegate_for<PerTokenGroupQuantFP8FwdOp>("quantize_h", std::nullopt, nullptr,
                                                          {.group_size = kFP8Block});
  down_ = &delegate_for<MoEGroupedGemmFP8FwdOp>(
      "down", std::nullopt, nullptr,
      {.activation = "none", .block_n = kFP8Block, .block_k = kFP8Block});
}

void MoEExpertMLPFP8FwdOp::forward(const Indices&, const Tensor& x, const Tensor& expert_offsets,
                                   const Tensor& w13, const Tensor& w2, const Tensor& w13_scales,
                                   const Tensor& w2_scales, const Tensor& x_scales,
                                   const Tensor& y) {
  // e4m3 x arrives quantized with its scales (the signature tied them to its dtype).
  const auto [xq, xs] =
      x.dtype() == DType::float8_e4m3fn ? std::tuple{x, x_scales} : (*quantize_x_)(x);
  const Tensor h = (*gate_up_)(xq, xs, expert_offsets, w13, w13_scales);
  const auto [hq, hs] = (*quantize_h_)(h);
  (*down_)(hq, hs, expert_offsets, w2, w2_scales, y);
}

// ---- MoEExpertMLPFP8MaskedFwdOp ------------------------------------------------------------

MoEExpertMLPFP8MaskedFwdOp::MoEExpertMLPFP8MaskedFwdOp(Params params, Target target)
    : MoEExpertMLPFP8MaskedFwdOpBase(std::move(params), std::move(target)) {
  gate_up_ = &delegate_for<MoEGroupedGemmFP8MaskedFwdOp>(
      "gate_up", std::nullopt, nullptr,
      {.activation = this->params().activation, .block_n = kFP8Block, .block_k = kFP8Block});
  quantize_h_ = &delegate_for<PerTokenGroupQuantFP8FwdOp>("quantize_h", std::nullopt, nullptr,
                                                          {.group_size = kFP8Block});
  down_ = &delegate_for<MoEGroupedGemmFP8MaskedFwdOp>(
      "down", std::nullopt, nullptr,
      {.activation = "none", .block_n = kFP8Block, .block_k = kFP8Block});
}

void MoEExpertMLPFP8MaskedFwdOp::forward(const Indices& call, const Tensor& x,
                                         const Tensor& x_scales, const Tensor& counts,
                                         const Tensor& w13, const Tensor& w2,
                                         const Tensor& w13_scales, const Tensor& w2_scales,
                                         const Tensor& y) {
  const std::int64_t experts = call.E;
  const std::int64_t max_m = call.max_m;
  const std::int64_t f = call.F;
  const Tensor h = (*gate_up_)(x, x_scales, counts, w13, w13_scales);  // [E, max_m, F]
  // The quantization reads every row of h, the zeros past the counts included (a masked
  // quantization would skip them; docs/design/moe.md says what that costs).
  const auto [hq, hs] = (*quantize_h_)(h.reshape({experts * max_m, f}));
  (*down_)(hq.reshape({experts, max_m, f}), hs.reshape({experts, max_m, hs.size(1)}), counts, w2,
           w2_scales, y);
}

// ---- FusedMoEExpertsFwdOp ------------------------------------------------------------------

FusedMoEExpertsFwdOp::FusedMoEExpertsFwdOp(Params params, Target target)
    : FusedMoEExpertsFwdOpBase(std::move(params), std::move(target)) {
  const std::string& activation = this->params().activation;
  mlp_ = &delegate_for<MoEExpertMLPFwdOp>("mlp", std::nullopt, nullptr, {.activation = activation});
  // The FP8 MLPs' parameters are settled here too, whatever weights the calls bring (the
  // pre-permutes' depend on the call's expert count).
  mlp_fp8_ = &delegate_for<MoEExpertMLPFP8FwdOp>("mlp_fp8", std::nullopt, nullptr,
                                                 {.activation = activation});
  mlp_fp8_masked_ = &delegate_for<MoEExpertMLPFP8MaskedFwdOp>("mlp_fp8_masked", std::nullopt,
                                                              nullptr, {.activation = activation});
  post_permute_ = &delegate_for<MoEPostPermuteFwdOp>("post_permute", std::nullopt, nullptr, {});
}

void FusedMoEExpertsFwdOp::forward(const Indices& call, const Tensor& x, const Tensor& topk_weights,
                                   const Tensor& topk_ids, const Tensor& w13, const Tensor& w2,
                                   const Tensor& expert_map, const Tensor& w13_scales,
                                   const Tensor& w2_scales, const Tensor& y) {
  // The expert count is known only now: one pre-permute sub-op per count (identity "E=<n>").
  const std::int64_t experts = call.E;
  const std::string identity = fmt::format("E={}", experts);
  // The weights' dtype selects the MLP (the signature tied the scales to it). FP8 rows are
  // quantized as they are gathered: the bfloat16 copy of the M*K rows is never written.
  const bool fp8 = call.W == DType::float8_e4m3fn;
  const std::int64_t pairs = call.M * call.K;
  const std::int64_t masked_rows = params().masked_max_rows;
  if (fp8 && masked_rows > 0 && pairs <= masked_rows * experts) {
    // The masked decode path, chosen by shape only (a CUDA graph replays one route). max_m = M:
    // ids distinct per token give no expert more than M rows, so the layout cannot overflow.
    const std::int64_t max_m = std::max<std::int64_t>(1, call.M);
    auto& pre_permute_masked = delegate_for<MoEPrePermuteQuantFP8MaskedFwdOp>(
        "pre_permute_quant_masked", fmt::format("E={},max_m={}", experts, max_m), nullptr,
        {.num_experts = experts, .max_m = max_m, .group_size = kFP8Block});
    const auto [a, a_scales, counts, inverse] = pre_permute_masked(x, topk_ids, expert_map);
    const Tensor h = (*mlp_fp8_masked_)(a, a_scales, counts, w13, w2, w13_scales, w2_scales);
    // inverse points into the layout viewed as rows; rows past the counts are never read.
    (*post_permute_)(h.reshape({experts * max_m, call.H}), topk_weights, inverse, y);
    return;
  }
  if (fp8) {
    auto& pre_permute_quant = delegate_for<MoEPrePermuteQuantFP8FwdOp>(
        "pre_permute_quant", identity, nullptr, {.num_experts = experts, .group_size = kFP8Block});
    const auto [xq, xs, offsets, inverse] = pre_permute_quant(x, topk_ids, expert_map);
    const Tensor h = (*mlp_fp8_)(xq, offsets, w13, w2, w13_scales, w2_scales, xs);
    (*post_permute_)(h, topk_weights, inverse, y);
    return;
  }
  auto& pre_permute =
      delegate_for<MoEPrePermuteFwdOp>("pre_permute", identity, nullptr, {.num_experts = experts});
  const auto [permuted, offsets, inverse] = pre_permute(x, topk_ids, expert_map);
  const Tensor h = (*mlp_)(permuted, offsets, w13, w2);
  (*post_permute_)(h, topk_weights, inverse, y);
}

// ---- SingleDevicePrepareFinalize -----------------------------------------------------------

MoEPreparedTokens SingleDevicePrepareFinalize::prepare(const Tensor& x, const Tensor& topk_weights,
                                                       const Tensor& topk_ids) {
  return {x, topk_weights, topk_ids, Tensor()};
}

void SingleDevicePrepareFinalize::finalize(const Tensor& expert_output, const Tensor& y) {
  y.copy_(expert_output);
}

// ---- FusedMoEFwdOp -------------------------------------------------------------------------

FusedMoEFwdOp::Params FusedMoEFwdOp::settle(Params params, const FusedMoEExpertsFwdOp* experts,
                                            const MoEPrepareFinalize* prepare_finalize) {
  if (prepare_finalize != nullptr && experts == nullptr) {
    throw UsageError(fmt::format(
        "FusedMoEFwdOp: prepare_finalize '{}' was injected without experts; the experts must "
        "match the token format the prepare step hands over, so inject both",
        prepare_finalize->name()));
  }
  if (experts != nullptr) {
    const std::string& decided = experts->params().activation;
    if (params.activation && *params.activation != decided) {
      throw UsageError(fmt::format(
          "FusedMoEFwdOp: activation '{}' disagrees with the injected experts' activation '{}'",
          *params.activation, decided));
    }
    params.activation = decided;
    const std::int64_t rows = experts->params().masked_max_rows;
    if (params.masked_max_rows != 0 && params.masked_max_rows != rows) {
      throw UsageError(fmt::format(
          "FusedMoEFwdOp: masked_max_rows {} disagrees with the injected experts' masked_max_rows "
          "{}",
          params.masked_max_rows, rows));
    }
    params.masked_max_rows = rows;
  } else if (!params.activation) {
    params.activation = "silu_and_mul";
  }
  return params;
}

FusedMoEFwdOp::FusedMoEFwdOp(Params params, Target target,
                             std::shared_ptr<FusedMoEExpertsFwdOp> experts,
                             std::shared_ptr<MoEPrepareFinalize> prepare_finalize)
    : FusedMoEFwdOpBase(settle(std::move(params), experts.get(), prepare_finalize.get()),
                        std::move(target)),
      prepare_finalize_(prepare_finalize ? std::move(prepare_finalize)
                                         : std::make_shared<SingleDevicePrepareFinalize>()) {
  const Params& p = this->params();
  routing_ = &delegate_for<MoETopKRoutingFwdOp>("routing", std::nullopt, nullptr,
                                                {.top_k = p.top_k,
                                                 .scoring = p.scoring,
                                                 .renormalize = p.renormalize,
                                                 .routed_scaling_factor = p.routed_scaling_factor,
                                                 .n_group = p.n_group,
                                                 .topk_group = p.topk_group});
  experts_ = &delegate_for<FusedMoEExpertsFwdOp>(
      "experts", std::nullopt, std::move(experts),
      {.activation = *p.activation, .masked_max_rows = p.masked_max_rows});
}

std::vector<std::string> FusedMoEFwdOp::injected_parameters() {
  return {"prepare_finalize", "experts"};
}

std::unique_ptr<FusedMoEFwdOp> FusedMoEFwdOp::from_params(const ParamMap& params, Target target) {
  std::shared_ptr<FusedMoEExpertsFwdOp> experts;
  std::shared_ptr<MoEPrepareFinalize> prepare_finalize;
  if (const auto it = params.find("experts"); it != params.end()) {
    experts = injected_as<FusedMoEExpertsFwdOp>(it->second, "FusedMoEFwdOp", "experts",
                                                "FusedMoEExpertsFwdOp");
  }
  if (const auto it = params.find("prepare_finalize"); it != params.end()) {
    prepare_finalize = injected_as<MoEPrepareFinalize>(it->second, "FusedMoEFwdOp",
                                                       "prepare_finalize", "MoEPrepareFinalize");
  }
  return std::make_unique<FusedMoEFwdOp>(
      params_from_map(manifest_params(params, injected_parameters())), std::move(target),
      std::move(experts), std::move(prepare_finalize));
}

void FusedMoEFwdOp::forward(const Indices&, const Tensor& x, const Tensor& router_logits,
                            const Tensor& w13, const Tensor& w2, const Tensor& correction_bias,
                            const Tensor& w13_scales, const Tensor& w2_scales, const Tensor& y) {
  const auto [topk_weights, topk_ids] = (*routing_)(router_logits, correction_bias);
  const MoEPreparedTokens tokens = prepare_finalize_->prepare(x, topk_weights, topk_ids);
  const Tensor expert_output = (*experts_)(tokens.x, tokens.topk_weights, tokens.topk_ids, w13, w2,
                                           tokens.expert_map, w13_scales, w2_scales);
  prepare_finalize_->finalize(expert_output, y);
}

TILEOPS_REGISTER_OP(MoEExpertMLPFwdOp)
TILEOPS_REGISTER_OP(MoEExpertMLPFP8FwdOp)
TILEOPS_REGISTER_OP(MoEExpertMLPFP8MaskedFwdOp)
TILEOPS_REGISTER_OP(FusedMoEExpertsFwdOp)
TILEOPS_REGISTER_OP(FusedMoEFwdOp)

}  // namespace tileops
