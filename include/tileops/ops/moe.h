// The mixture-of-experts family (manifest/moe.yaml): routing, pre-permute, grouped GEMM and
// post-permute as kernel ops; the expert MLP, the fused experts and the fused MoE layer as
// composite ops made of them. The exact semantics of every op are in its manifest entry.
//
//   tileops::FusedMoEFwdOp moe({.top_k = 8, .scoring = "sigmoid", .renormalize = true,
//                               .routed_scaling_factor = 2.5});
//   tileops::Tensor y = moe(x, router_logits, w13, w2, correction_bias);
//   // FP8 experts (float8_e4m3fn weights, 128 x 128 block scales), selected by w13's dtype:
//   tileops::Tensor y8 = moe(x, router_logits, w13_fp8, w2_fp8, correction_bias, w13_scales,
//                            w2_scales);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tileops/base/op.h"
#include "tileops/base/schema.h"
#include "tileops/gen/moe.h"
#include "tileops/kernel/moe.h"
#include "tileops/ops/quant.h"

namespace tileops {

// ---- kernel ops ----------------------------------------------------------------------------

/// Top-k routing: (topk_weights, topk_ids) = op(router_logits, correction_bias).
class MoETopKRoutingFwdOp final : public gen::MoETopKRoutingFwdOpBase<MoETopKRoutingFwdOp> {
 public:
  using MoETopKRoutingFwdOpBase::MoETopKRoutingFwdOpBase;
  void forward(const Indices& call, const Tensor& logits, const Tensor& correction_bias,
               const Tensor& topk_weights, const Tensor& topk_ids);
};

/// (permuted_x, expert_offsets, inverse) = op(x, topk_ids, expert_map).
class MoEPrePermuteFwdOp final : public gen::MoEPrePermuteFwdOpBase<MoEPrePermuteFwdOp> {
 public:
  using MoEPrePermuteFwdOpBase::MoEPrePermuteFwdOpBase;
  void forward(const Indices& call, const Tensor& x, const Tensor& topk_ids,
               const Tensor& expert_map, const Tensor& permuted_x, const Tensor& expert_offsets,
               const Tensor& inverse);
};

/// (permuted_q, permuted_scales, expert_offsets, inverse) = op(x, topk_ids, expert_map): the
/// pre-permute's rows quantized to FP8 as they are gathered (the bf16 copy is never written).
class MoEPrePermuteQuantFP8FwdOp final
    : public gen::MoEPrePermuteQuantFP8FwdOpBase<MoEPrePermuteQuantFP8FwdOp> {
 public:
  using MoEPrePermuteQuantFP8FwdOpBase::MoEPrePermuteQuantFP8FwdOpBase;
  void forward(const Indices& call, const Tensor& x, const Tensor& topk_ids,
               const Tensor& expert_map, const Tensor& permuted_q, const Tensor& permuted_scales,
               const Tensor& expert_offsets, const Tensor& inverse);
};

/// (a, a_scales, counts, inverse) = op(x, topk_ids, expert_map): the quantizing pre-permute's
/// rows, bit for bit, in the masked layout [num_experts, max_m, H] (rows past the counts are not
/// written); inverse points into that layout viewed [num_experts * max_m, H].
class MoEPrePermuteQuantFP8MaskedFwdOp final
    : public gen::MoEPrePermuteQuantFP8MaskedFwdOpBase<MoEPrePermuteQuantFP8MaskedFwdOp> {
 public:
  using MoEPrePermuteQuantFP8MaskedFwdOpBase::MoEPrePermuteQuantFP8MaskedFwdOpBase;
  void forward(const Indices& call, const Tensor& x, const Tensor& topk_ids,
               const Tensor& expert_map, const Tensor& a, const Tensor& a_scales,
               const Tensor& counts, const Tensor& inverse);
};

/// c = op(a, expert_offsets, b): each expert's rows times its weight, transposed.
class MoEGroupedGemmFwdOp final : public gen::MoEGroupedGemmFwdOpBase<MoEGroupedGemmFwdOp> {
 public:
  using MoEGroupedGemmFwdOpBase::MoEGroupedGemmFwdOpBase;
  void forward(const Indices& call, const Tensor& a, const Tensor& expert_offsets, const Tensor& b,
               const Tensor& c);
};

/// c = op(a, a_scales, expert_offsets, b, b_scales): the FP8 block-scaled grouped GEMM. On CUDA,
/// the Hopper kernel serves 128 x 128 weight blocks (a gated N / 2 a multiple of 64); other
/// blocks run on the CPU, a CUDA call with them raises DispatchError naming the reason.
class MoEGroupedGemmFP8FwdOp final
    : public gen::MoEGroupedGemmFP8FwdOpBase<MoEGroupedGemmFP8FwdOp> {
 public:
  using MoEGroupedGemmFP8FwdOpBase::MoEGroupedGemmFP8FwdOpBase;
  void forward(const Indices& call, const Tensor& a, const Tensor& a_scales,
               const Tensor& expert_offsets, const Tensor& b, const Tensor& b_scales,
               const Tensor& c);
};

/// c = op(a, a_scales, counts, b, b_scales): the FP8 grouped GEMM on the masked layout, with the
/// contiguous one's Hopper kernel and the same refusals.
class MoEGroupedGemmFP8MaskedFwdOp final
    : public gen::MoEGroupedGemmFP8MaskedFwdOpBase<MoEGroupedGemmFP8MaskedFwdOp> {
 public:
  using MoEGroupedGemmFP8MaskedFwdOpBase::MoEGroupedGemmFP8MaskedFwdOpBase;
  void forward(const Indices& call, const Tensor& a, const Tensor& a_scales, const Tensor& counts,
               const Tensor& b, const Tensor& b_scales, const Tensor& c);
};

/// y = op(expert_out, topk_weights, inverse).
class MoEPostPermuteFwdOp final : public gen::MoEPostPermuteFwdOpBase<MoEPostPermuteFwdOp> {
 public:
  using MoEPostPermuteFwdOpBase::MoEPostPermuteFwdOpBase;
  void forward(const Indices& call, const Tensor& expert_out, const Tensor& topk_weights,
               const Tensor& inverse, const Tensor& y);
};

// ---- composite ops -------------------------------------------------------------------------

/// The experts' MLP: stages gate_up (grouped GEMM fusing the activation) and down. Both sub-ops
/// are settled at construction.
class MoEExpertMLPFwdOp final : public gen::MoEExpertMLPFwdOpBase<MoEExpertMLPFwdOp> {
 public:
  explicit MoEExpertMLPFwdOp(Params params, Target target = {});
  void forward(const Indices& call, const Tensor& x, const Tensor& expert_offsets,
               const Tensor& w13, const Tensor& w2, const Tensor& y);

 private:
  MoEGroupedGemmFwdOp* gate_up_ = nullptr;
  MoEGroupedGemmFwdOp* down_ = nullptr;
};

/// The experts' MLP with FP8 block-scaled weights: stages quantize_x (bfloat16 x only; e4m3 x
/// comes with its x_scales), gate_up (FP8 grouped GEMM fusing the activation), quantize_h and
/// down, all settled at construction.
class MoEExpertMLPFP8FwdOp final : public gen::MoEExpertMLPFP8FwdOpBase<MoEExpertMLPFP8FwdOp> {
 public:
  explicit MoEExpertMLPFP8FwdOp(Params params, Target target = {});
  void forward(const Indices& call, const Tensor& x, const Tensor& expert_offsets,
               const Tensor& w13, const Tensor& w2, const Tensor& w13_scales,
               const Tensor& w2_scales, const Tensor& x_scales, const Tensor& y);

 private:
  PerTokenGroupQuantFP8FwdOp* quantize_x_ = nullptr;
  MoEGroupedGemmFP8FwdOp* gate_up_ = nullptr;
  PerTokenGroupQuantFP8FwdOp* quantize_h_ = nullptr;
  MoEGroupedGemmFP8FwdOp* down_ = nullptr;
};

/// The FP8 experts' MLP on the masked layout: stages gate_up (masked FP8 grouped GEMM fusing the
/// activation), quantize_h (on h viewed [E * max_m, F]) and down, all settled at construction.
class MoEExpertMLPFP8MaskedFwdOp final
    : public gen::MoEExpertMLPFP8MaskedFwdOpBase<MoEExpertMLPFP8MaskedFwdOp> {
 public:
  explicit MoEExpertMLPFP8MaskedFwdOp(Params params, Target target = {});
  void forward(const Indices& call, const Tensor& x, const Tensor& x_scales, const Tensor& counts,
               const Tensor& w13, const Tensor& w2, const Tensor& w13_scales,
               const Tensor& w2_scales, const Tensor& y);

 private:
  MoEGroupedGemmFP8MaskedFwdOp* gate_up_ = nullptr;
  PerTokenGroupQuantFP8FwdOp* quantize_h_ = nullptr;
  MoEGroupedGemmFP8MaskedFwdOp* down_ = nullptr;
};

/// The routed experts for given ids and weights: stages pre_permute or, with FP8 weights,
/// pre_permute_quant (one sub-op per expert count seen at call time), mlp (weights of x's dtype)
/// or mlp_fp8 (float8_e4m3fn weights with block scales, on the rows pre_permute_quant
/// quantized), and post_permute. With FP8 weights and masked_max_rows > 0, calls of at most that
/// many rows per expert on average take pre_permute_quant_masked (one sub-op per expert and token
/// count) and mlp_fp8_masked instead. The three MLPs and post_permute are settled at
/// construction, whatever weights the calls bring.
class FusedMoEExpertsFwdOp final : public gen::FusedMoEExpertsFwdOpBase<FusedMoEExpertsFwdOp> {
 public:
  explicit FusedMoEExpertsFwdOp(Params params, Target target = {});
  void forward(const Indices& call, const Tensor& x, const Tensor& topk_weights,
               const Tensor& topk_ids, const Tensor& w13, const Tensor& w2,
               const Tensor& expert_map, const Tensor& w13_scales, const Tensor& w2_scales,
               const Tensor& y);

 private:
  MoEExpertMLPFwdOp* mlp_ = nullptr;
  MoEExpertMLPFP8FwdOp* mlp_fp8_ = nullptr;
  MoEExpertMLPFP8MaskedFwdOp* mlp_fp8_masked_ = nullptr;
  MoEPostPermuteFwdOp* post_permute_ = nullptr;
};

/// The tokens an expert stage receives, as a prepare step hands them over.
struct MoEPreparedTokens {
  Tensor x;             ///< [M', H]
  Tensor topk_weights;  ///< [M', K] float32
  Tensor topk_ids;      ///< [M', K] int32 (global expert ids)
  Tensor expert_map;    ///< [E_global] int32 (global -> local, -1 elsewhere), or undefined
};

/// Token dispatch before the experts and combine after them. The default passes the tokens
/// through (one device); an expert-parallel implementation exchanges tokens between ranks in
/// prepare and sends the results back in finalize.
class MoEPrepareFinalize {
 public:
  virtual ~MoEPrepareFinalize() = default;
  virtual std::string name() const = 0;
  virtual MoEPreparedTokens prepare(const Tensor& x, const Tensor& topk_weights,
                                    const Tensor& topk_ids) = 0;
  /// Writes the combined result of `expert_output` (rows as prepare handed them out) into y.
  virtual void finalize(const Tensor& expert_output, const Tensor& y) = 0;
};

/// One device: prepare hands the tokens over unchanged, finalize copies the result.
class SingleDevicePrepareFinalize final : public MoEPrepareFinalize {
 public:
  std::string name() const override { return "single_device"; }
  MoEPreparedTokens prepare(const Tensor& x, const Tensor& topk_weights,
                            const Tensor& topk_ids) override;
  void finalize(const Tensor& expert_output, const Tensor& y) override;
};

/// A MoE layer: stages routing and experts, with a prepare/finalize step around the experts.
/// `experts` and `prepare_finalize` may be injected (kept with their own target);
/// prepare_finalize without experts is a UsageError, and an injected experts decides
/// `activation` (a different explicit value is a UsageError).
class FusedMoEFwdOp final : public gen::FusedMoEFwdOpBase<FusedMoEFwdOp> {
 public:
  explicit FusedMoEFwdOp(Params params, Target target = {},
                         std::shared_ptr<FusedMoEExpertsFwdOp> experts = nullptr,
                         std::shared_ptr<MoEPrepareFinalize> prepare_finalize = nullptr);
  static std::vector<std::string> injected_parameters();
  /// The dynamic path (make_op): the manifest parameters, and `experts` and `prepare_finalize` as
  /// `injected<FusedMoEExpertsFwdOp>` / `injected<MoEPrepareFinalize>` values (or None).
  static std::unique_ptr<FusedMoEFwdOp> from_params(const ParamMap& params, Target target);
  const MoEPrepareFinalize& prepare_finalize() const { return *prepare_finalize_; }
  void forward(const Indices& call, const Tensor& x, const Tensor& router_logits, const Tensor& w13,
               const Tensor& w2, const Tensor& correction_bias, const Tensor& w13_scales,
               const Tensor& w2_scales, const Tensor& y);

 private:
  static Params settle(Params params, const FusedMoEExpertsFwdOp* experts,
                       const MoEPrepareFinalize* prepare_finalize);
  MoETopKRoutingFwdOp* routing_ = nullptr;
  FusedMoEExpertsFwdOp* experts_ = nullptr;
  std::shared_ptr<MoEPrepareFinalize> prepare_finalize_;
};

}  // namespace tileops
