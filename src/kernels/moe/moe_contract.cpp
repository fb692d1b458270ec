// The call specs of the MoE family: hash and text, and the activation names.
#include "tileops/kernel/moe.h"

#include <fmt/format.h>

#include "tileops/core/error.h"

namespace tileops {

namespace {

template <class... V>
std::size_t hash_of(const Device& device, const V&... values) {
  std::size_t seed = std::hash<Device>{}(device);
  (hash_combine(seed, std::hash<V>{}(values)), ...);
  return seed;
}

std::string_view activation_name(MoEActivation a) {
  switch (a) {
    case MoEActivation::none:
      return "none";
    case MoEActivation::silu_and_mul:
      return "silu_and_mul";
    case MoEActivation::gelu_and_mul:
      return "gelu_and_mul";
  }
  return "?";
}

}  // namespace

MoEActivation moe_activation(std::string_view name) {
  if (name == "none") return MoEActivation::none;
  if (name == "silu_and_mul") return MoEActivation::silu_and_mul;
  if (name == "gelu_and_mul") return MoEActivation::gelu_and_mul;
  throw SignatureError(fmt::format(
      "unknown MoE activation '{}' (expected none, silu_and_mul or gelu_and_mul)", name));
}

std::size_t MoERoutingCall::hash() const {
  return hash_of(device, tokens, experts, top_k, static_cast<int>(logits_dtype), sigmoid,
                 renormalize, has_bias, n_group, topk_group);
}
// The text is a tuning-database key: it keeps the spelling recorded before the type was renamed.
std::string MoERoutingCall::str() const {
  return fmt::format(
      "MoeRoutingCall(tokens={}, experts={}, top_k={}, logits={}, scoring={}, renormalize={}, "
      "bias={}, n_group={}, topk_group={}, device={})",
      tokens, experts, top_k, dtype_name(logits_dtype), sigmoid ? "sigmoid" : "softmax",
      renormalize, has_bias, n_group, topk_group, device.str());
}

std::size_t MoEPermuteCall::hash() const {
  return hash_of(device, tokens, hidden, top_k, num_experts, rows, static_cast<int>(dtype),
                 has_map);
}
// The text is a tuning-database key: it keeps the spelling recorded before the type was renamed.
std::string MoEPermuteCall::str() const {
  return fmt::format(
      "MoePermuteCall(tokens={}, hidden={}, top_k={}, num_experts={}, rows={}, dtype={}, map={}, "
      "device={})",
      tokens, hidden, top_k, num_experts, rows, dtype_name(dtype), has_map, device.str());
}

std::size_t GroupedGemmCall::hash() const {
  return hash_of(device, rows, n, k, experts, static_cast<int>(dtype),
                 static_cast<int>(activation));
}
std::string GroupedGemmCall::str() const {
  return fmt::format(
      "GroupedGemmCall(rows={}, n={}, k={}, experts={}, dtype={}, activation={}, device={})", rows,
      n, k, experts, dtype_name(dtype), activation_name(activation), device.str());
}

}  // namespace tileops
