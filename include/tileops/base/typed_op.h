// TypedOp: the fixed part of every generated op base, written once (docs/design/op-base.md).
//
// tileops-gen emits, per manifest entry X (tileops/gen/<family>.h), the parameter struct
// `XParams`, the typed solved indices `XIndices` (what forward receives first), a traits struct
// `XTraits` naming the generated functions of that entry, and `XBase<Derived> : TypedOp<XTraits,
// Derived>` with what differs per op: the typed call operator (named inputs, optional ones
// defaulted), the dispatch to `Derived::forward`, `delegate_types()` of a composite entry (from
// its composition) and, for an entry with a dtype parameter, the `dtype()` override. Everything
// else lives here.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tileops/base/op.h"
#include "tileops/base/op_class.h"
#include "tileops/base/schema.h"
#include "tileops/base/signature_call.h"
#include "tileops/core/tensor.h"
#include "tileops/core/value.h"
#include "tileops/target/target.h"

namespace tileops {

/// What tileops-gen emits per manifest entry for TypedOp: the parameter struct, the counts of
/// the signature and the generated functions (defined in the family's generated source).
template <class T>
concept OpTraits = requires(const typename T::Params& p, const ParamMap& m, const CallArgs& a) {
  typename T::Params;
  { T::num_inputs } -> std::convertible_to<std::size_t>;
  { T::num_outputs } -> std::convertible_to<std::size_t>;
  { T::has_out_buffer } -> std::convertible_to<bool>;
  /// The entry's OpSchema (a static object).
  { T::schema() } -> std::same_as<const OpSchema&>;
  /// The construction check of the parameters (Op::construct's callback; takes a Params*).
  T::check_params(static_cast<const void*>(&p));
  /// The parameters by name, defaults included (the record of the dynamic path and builders).
  { T::param_values(p) } -> std::same_as<ParamMap>;
  /// Parameters from a name-value map: unknown names, wrong types, missing required ones throw.
  { T::params_from_map(m) } -> std::same_as<typename T::Params>;
  /// The signature check of a call: solved indices, records and inferred outputs.
  { T::check_call(p, a) } -> std::same_as<SignatureCall>;
};

namespace detail {
template <std::size_t>
using TensorAt = Tensor;
template <class Is>
struct TensorTuple;
template <std::size_t... I>
struct TensorTuple<std::index_sequence<I...>> {
  using type = std::tuple<TensorAt<I>...>;
};

/// A solved index of a call record as T, or nullopt where the call's branch left it unsolved
/// (the generated `XIndices` read their optional indices through it).
template <class T>
std::optional<T> optional_index(const Value& v) {
  if (const T* p = std::get_if<T>(&v)) return *p;
  return std::nullopt;
}

/// What a typed call returns for `n` outputs: nothing, one Tensor, or a tuple of them.
template <std::size_t n>
using TypedResult = std::conditional_t<
    n == 0, void,
    std::conditional_t<n == 1, Tensor, typename TensorTuple<std::make_index_sequence<n>>::type>>;
}  // namespace detail

/// The base of every generated op base: holds the typed parameters, constructs through
/// Op::construct with the generated parameter check, and answers the signature check with the
/// generated one. `Derived` is the op class (for its OpClass); `Traits` is the generated
/// `XTraits` of its manifest entry.
template <OpTraits Traits, class Derived>
class TypedOp : public Op {
 public:
  using Params = typename Traits::Params;

  /// The manifest entry's schema (read by op_class_of<Derived>).
  static const OpSchema& schema_data() { return Traits::schema(); }
  /// Parameters from a map (the dynamic path, make_op).
  static Params params_from_map(const ParamMap& m) { return Traits::params_from_map(m); }

  /// Checks the parameters and takes the construction steps (docs/design/op-base.md,
  /// Construction); `target` empty leaves the choice to the first call.
  explicit TypedOp(Params params, Target target = {})
      : Op(op_class_of<Derived>(), std::move(target)), params_(std::move(params)) {
    construct(Traits::check_params, &params_, Traits::param_values(params_));
  }

  const Params& params() const { return params_; }

 protected:
  using Result = detail::TypedResult<Traits::num_outputs>;

  /// The body of the generated typed call operator: runs the call on the inputs (manifest
  /// order, an undefined Tensor for an absent optional one) and, for an entry with a
  /// `buffer: out` output, the caller's `out` (possibly undefined: the signature check reads
  /// an undefined one as not passed); returns the outputs as the operator declares them.
  Result typed_call(const std::array<const Tensor*, Traits::num_inputs>& inputs,
                    const Tensor* out = nullptr) {
    // An entry with `buffer: out` always passes one out slot, so CallArgs::outs has the arity
    // the generated signature check expects.
    const std::span<const Tensor* const> outs = Traits::has_out_buffer
                                                    ? std::span<const Tensor* const>(&out, 1)
                                                    : std::span<const Tensor* const>();
    if constexpr (Traits::num_outputs == 0) {
      run_call(CallArgs{inputs, outs});
    } else {
      std::vector<Tensor> r = run_call(CallArgs{inputs, outs});
      if constexpr (Traits::num_outputs == 1) {
        return std::move(r[0]);
      } else {
        return as_tuple(r, std::make_index_sequence<Traits::num_outputs>{});
      }
    }
  }

 private:
  template <std::size_t... I>
  static Result as_tuple(std::vector<Tensor>& r, std::index_sequence<I...>) {
    return Result(std::move(r[I])...);
  }

  SignatureCall check_call(const CallArgs& a) const final { return Traits::check_call(params_, a); }

  Params params_;
};

}  // namespace tileops
