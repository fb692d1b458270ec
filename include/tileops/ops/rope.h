// The position-encoding family: LongRoPEFwdOp (manifest/rope.yaml). Its kernel contract is
// tileops/kernel/rope.h.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tileops/base/op.h"
#include "tileops/gen/rope.h"
#include "tileops/kernel/rope.h"

namespace tileops {

/// LongRoPE (Phi-3) rotary embedding, neox rotation; see manifest/rope.yaml for the exact
/// definition.
///
///   tileops::LongRoPEFwdOp rope({.rescale_factors = factors, .max_position_embeddings = 131072,
///                                .original_max_position_embeddings = 4096});
///   tileops::Tensor q_rot = rope(q);  // q: [B, S, H, D]
class LongRoPEFwdOp final : public gen::LongRoPEFwdOpBase<LongRoPEFwdOp> {
 public:
  LongRoPEFwdOp(Params params, Target target = {});
  void forward(const Indices& call, const Tensor& x, const Tensor& positions, const Tensor& y);

  /// inv_freq[i] = 1 / (rescale_factors[i] * base^(2i / D)): [R] float64 on the CPU.
  const Tensor& inv_freq() const { return inv_freq_; }
  /// The amplitude applied to cos and sin (given, or derived from the context lengths).
  double attention_scaling() const { return attention_scaling_; }

 private:
  const Tensor& inv_freq_on(const Device& device);

  Tensor inv_freq_;  // construction: derived from the parameters
  double attention_scaling_ = 1.0;
  std::mutex device_copies_mutex_;
  std::map<std::string, Tensor> inv_freq_by_device_;  // running: one copy per call device
};

/// The amplitude of LongRoPE when none is given: 1 if max <= original, else
/// sqrt(1 + ln(max / original) / ln(original)).
double long_rope_default_scaling(std::int64_t max_position_embeddings,
                                 std::int64_t original_max_position_embeddings);

}  // namespace tileops
