// The static description of an op class: its manifest schema, kernel interfaces and
// implementations, delegate types, injected parameters and the dynamic factory. Built once per
// class at registration (TILEOPS_REGISTER_OP) and checked against the manifest entry there.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <typeindex>
#include <vector>

#include "tileops/base/schema.h"
#include "tileops/core/value.h"
#include "tileops/dispatch/kernel.h"
#include "tileops/target/target.h"

namespace tileops {

class Op;

/// One stage of `delegate_types`: the stage name and the sub-op class held there.
struct DelegateType {
  std::string stage;
  std::string op;  ///< the sub-op's manifest name
};

struct OpClass {
  std::string name;
  const OpSchema* schema = nullptr;
  std::vector<InterfaceInfo> interfaces;
  std::vector<ImplementationInfo> kernel_types;  ///< in-tree, in declaration order
  std::vector<DelegateType> delegate_types;      ///< stage order
  std::vector<std::string> injected_parameters;
  /// Builds an instance from parameters by manifest name (the dynamic path).
  std::function<std::unique_ptr<Op>(const ParamMap& params, Target target)> factory;
  /// Problems found when the class was registered (empty when the class agrees with its entry).
  /// Constructing an instance of a class with problems throws ManifestError listing them.
  std::vector<std::string> registration_problems;
};

namespace detail {
template <class T>
concept HasInterfaces = requires {
  T::interfaces();
};
template <class T>
concept HasKernelTypes = requires {
  T::kernel_types();
};
template <class T>
concept HasDelegateTypes = requires {
  T::delegate_types();
};
/// A class that still declares workload_inputs(case, seed, device): its inputs are registered by
/// name now (op_class_of refuses the class, so that they are not silently dropped).
template <class T>
concept DeclaresWorkloadInputs = requires(const InstantiatedCase& c, std::uint64_t seed, Device d) {
  T::workload_inputs(c, seed, d);
};
template <class T>
concept HasInjected = requires {
  T::injected_parameters();
};
template <class T>
concept HasFactory = requires(const ParamMap& m, Target t) {
  T::from_params(m, t);
};

/// Checks a class against its manifest entry and its implementation table's contracts; returns
/// one message per problem.
std::vector<std::string> check_op_class(const OpClass& op_class);
/// Registers the class under its name for the dynamic path (tileops::make_op).
void register_op_class(const OpClass* op_class);
}  // namespace detail

/// The OpClass of `Derived`, built on first use. `Derived` provides the static members it needs
/// (`kernel_types()`, which the generated base of a kernel op declares, `injected_parameters()`,
/// and `interfaces()` where they are not those of its kernel table); the generated base supplies
/// `schema_data()`, `params_from_map()` and a composite's `delegate_types()`. Workload inputs
/// are registered by name (TILEOPS_REGISTER_WORKLOAD_INPUTS, tileops/base/reference.h).
template <class Derived>
const OpClass& op_class_of() {
  static const OpClass instance = [] {
    OpClass c;
    c.schema = &Derived::schema_data();
    c.name = std::string(c.schema->name);
    if constexpr (detail::HasKernelTypes<Derived>) c.kernel_types = Derived::kernel_types();
    // Without interfaces(), the interfaces the kernel table implements.
    if constexpr (detail::HasInterfaces<Derived>) {
      c.interfaces = Derived::interfaces();
    } else {
      c.interfaces = interfaces_of(c.kernel_types);
    }
    if constexpr (detail::HasDelegateTypes<Derived>) c.delegate_types = Derived::delegate_types();
    if constexpr (detail::HasInjected<Derived>)
      c.injected_parameters = Derived::injected_parameters();
    static_assert(!detail::DeclaresWorkloadInputs<Derived>,
                  "register an op's workload inputs by name: TILEOPS_REGISTER_WORKLOAD_INPUTS "
                  "(tileops/base/reference.h)");
    // The dynamic path hands injected objects only to a class's own from_params.
    static_assert(!detail::HasInjected<Derived> || detail::HasFactory<Derived>,
                  "an op class with injected_parameters() defines from_params(ParamMap, Target)");
    if constexpr (detail::HasFactory<Derived>) {
      c.factory = [](const ParamMap& m, Target t) -> std::unique_ptr<Op> {
        return Derived::from_params(m, std::move(t));
      };
    } else {
      c.factory = [](const ParamMap& m, Target t) -> std::unique_ptr<Op> {
        return std::make_unique<Derived>(Derived::params_from_map(m), std::move(t));
      };
    }
    c.registration_problems = detail::check_op_class(c);
    return c;
  }();
  return instance;
}

/// Registers `Derived` under its manifest name at static-initialisation time.
#define TILEOPS_REGISTER_OP(Derived)                                          \
  namespace {                                                                 \
  [[maybe_unused]] const bool tileops_registered_##Derived = [] {             \
    ::tileops::detail::register_op_class(&::tileops::op_class_of<Derived>()); \
    return true;                                                              \
  }();                                                                        \
  }

/// The manifest parameters of `params`: every entry except those named in `injected` (what a
/// class's from_params passes on to the generated params_from_map).
ParamMap manifest_params(const ParamMap& params, const std::vector<std::string>& injected);

/// Registered op classes, sorted by name.
std::vector<const OpClass*> registered_op_classes();
const OpClass* find_op_class(std::string_view name);

/// The dynamic path: constructs the op named `name` from parameters by manifest name, and from
/// the class's injected parameters (`injected<T>(object)` values). Unknown op names raise
/// OpNotAvailableError (manifest entry without code) or SignatureError (no entry); a parameter
/// that is neither declared nor injected is a SignatureError.
std::unique_ptr<Op> make_op(std::string_view name, const ParamMap& params, Target target = {});

}  // namespace tileops
