// Targets: execution policies that replace an op's in-tree kernels (a backend), and the
// registry backends use to join. See docs/design/targets.md.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tileops/core/device.h"
#include "tileops/core/dtype.h"
#include "tileops/core/tensor.h"
#include "tileops/core/value.h"

namespace tileops {

/// The execution policy an op is constructed with: unset (the process default, then detection
/// from the call's device), `Target::builtin()` (the in-tree kernels), or a registered name.
class Target {
 public:
  Target() = default;
  /// A named target; "BUILTIN" names the in-tree kernels.
  Target(std::string name);  // NOLINT(google-explicit-constructor): reads like a keyword argument
  Target(const char* name) : Target(std::string(name)) {}  // NOLINT
  static Target builtin();
  bool is_set() const { return kind_ != Kind::unset; }
  bool is_builtin() const { return kind_ == Kind::builtin; }
  /// The name ("BUILTIN" for the in-tree kernels); empty when unset.
  const std::string& name() const { return name_; }
  friend bool operator==(const Target&, const Target&) = default;

 private:
  enum class Kind { unset, builtin, named };
  Kind kind_ = Kind::unset;
  std::string name_;
};

/// The name `serving_target()` reports for the in-tree kernels.
inline constexpr std::string_view kBuiltinTargetName = "BUILTIN";

/// What a target builder learns of one input: its device, dtype and shape.
struct TensorSpec {
  Device device;
  DType dtype = DType::float32;
  Sizes shape;
  friend bool operator==(const TensorSpec&, const TensorSpec&) = default;
};

/// A kernel a target builds for an op. Called with the inputs (manifest order; an undefined
/// Tensor for an omitted optional input; all on the call device, non-written inputs contiguous)
/// and one entry per `buffer: out` output (undefined when the caller passed none). Returns one
/// tensor per manifest output, in order (a passed `out` must be returned as is).
///
/// A target kernel may define a tuning hook: `Op::request_tune()` calls it once for each built
/// target kernel that has one (and for target kernels built later, right after building), and
/// warns once per instance about a kernel without one.
class TargetKernel {
 public:
  using Run = std::function<std::vector<Tensor>(std::span<const Tensor> inputs,
                                                std::span<const Tensor> outs)>;

  TargetKernel() = default;
  /// A kernel without a tuning hook, from any callable `Run` accepts.
  template <class F>
  requires(std::is_constructible_v<Run, F> && !std::is_same_v<std::remove_cvref_t<F>, TargetKernel>)
      TargetKernel(F&& run)  // NOLINT(google-explicit-constructor): builders return a lambda
      : run_(std::forward<F>(run)) {}
  /// A kernel with a tuning hook (called at most once per kernel the op holds).
  TargetKernel(Run run, std::function<void()> request_tune)
      : run_(std::move(run)), request_tune_(std::move(request_tune)) {}

  explicit operator bool() const { return static_cast<bool>(run_); }
  std::vector<Tensor> operator()(std::span<const Tensor> inputs,
                                 std::span<const Tensor> outs) const {
    return run_(inputs, outs);
  }
  /// Whether the kernel defines a tuning hook.
  bool tunable() const { return static_cast<bool>(request_tune_); }
  /// Calls the tuning hook; does nothing when there is none.
  void request_tune() const {
    if (request_tune_) request_tune_();
  }

 private:
  Run run_;
  std::function<void()> request_tune_;
};

/// Builds the kernel of one op for one (device, input dtypes and shapes): one TensorSpec per
/// manifest input (nullopt for an absent optional input) and the manifest parameters by name,
/// defaults included. Throws to refuse; must not return an empty function.
using KernelBuilder = std::function<TargetKernel(std::span<const std::optional<TensorSpec>> inputs,
                                                 const ParamMap& params)>;

/// Claims a device for a target: one predicate, never throws.
using Detector = std::function<bool(const Device&)>;

/// Registers `target`'s detector. A second detector for the same target is a BackendError.
void register_detector(std::string target, Detector detect);
/// Registers `target`'s builder for the op named `op`. The same (op, target) twice is a
/// BackendError.
void register_kernel_builder(std::string op, std::string target, KernelBuilder build);
/// Sets the process default target (an unset Target clears it). Unknown names are checked when
/// an op selects its target.
void set_default_target(Target target);
Target default_target();
/// Targets with a detector or a builder; with `op`, only the targets with a builder for it.
std::vector<std::string> registered_targets(std::optional<std::string_view> op = std::nullopt);
/// Backend plugins that failed to load, one line each ("path: reason").
std::vector<std::string> load_failures();

/// Loads the backend plugins named in TILEOPS_BACKENDS (':'-separated shared libraries, loaded
/// in sorted order, each all or nothing). Runs once per process; op construction calls it.
void load_backends();

namespace detail {
/// Looks up what op selection needs; the registry's lock is held only inside these.
const KernelBuilder* find_kernel_builder(std::string_view op, std::string_view target);
bool target_registered(std::string_view target);
/// Names of the targets whose detector claims `device`.
std::vector<std::string> detect_targets(const Device& device);
/// Removes every registration (tests only).
void reset_registry_for_tests();
}  // namespace detail

}  // namespace tileops
