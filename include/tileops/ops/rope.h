// The position-encoding family: LongRoPEFwdOp (manifest/rope.yaml), its kernel interface and
// call spec.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tileops/gen/rope.h"
#include "tileops/kernel/kernel.h"
#include "tileops/op/op.h"

namespace tileops {

/// The call spec of the LongRoPE kernels. x is [batch, seq, heads, 2 * half_dim] (the 'sd'
/// layout is batch = heads = 1).
struct LongRopeCall : CallSpec {
  DType dtype = DType::float32;
  bool has_positions = false;
  DType positions_dtype = DType::int64;
  std::int64_t half_dim = 0;
  friend bool operator==(const LongRopeCall&, const LongRopeCall&) = default;
  std::size_t hash() const;
  std::string str() const;
};

/// The kernel interface of LongRoPE. Contract: x and y contiguous [batch, seq, heads, 2R] of
/// `dtype` on `device` (y may be x: in place); positions nullptr or contiguous [batch, seq] of
/// positions_dtype; inv_freq [R] float64 on `device`; attention_scaling multiplies cos and sin.
class LongRopeInterface {
 public:
  static constexpr std::string_view name = "long_rope";
  using Request = LongRopeCall;
  virtual ~LongRopeInterface() = default;
  virtual void forward(const Tensor& x, const Tensor* positions, const Tensor& inv_freq,
                       const Tensor& y, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                       double attention_scaling) = 0;
};

/// LongRoPE (Phi-3) rotary embedding, neox rotation; see manifest/rope.yaml for the exact
/// definition.
///
///   tileops::LongRoPEFwdOp rope({.rescale_factors = factors, .max_position_embeddings = 131072,
///                                .original_max_position_embeddings = 4096});
///   tileops::Tensor q_rot = rope(q);  // q: [B, S, H, D]
class LongRoPEFwdOp final : public gen::LongRoPEFwdOpBase<LongRoPEFwdOp> {
 public:
  LongRoPEFwdOp(Params params, Target target = {});
  static std::vector<InterfaceInfo> interfaces();
  static std::vector<ImplementationInfo> kernel_types();
  void forward(const SignatureCall& call, const Tensor& x, const Tensor& positions,
               const Tensor& y);

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
