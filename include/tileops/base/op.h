// The Op base class: construction, the seven steps of a call, kernel selection and caching,
// targets, composite sub-ops, call records, roofline, tuning and undo (docs/design/op-base.md).
//
// An op class derives from the base tileops-gen generates from its manifest entry
// (tileops/gen/<family>.h), which derives from Op through TypedOp (tileops/base/typed_op.h) and
// supplies the typed constructor, the typed call operator and the generated signature check. The
// op class writes `forward` and declares its kernel interfaces, implementations and delegate types.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tileops/base/op_class.h"
#include "tileops/base/schema.h"
#include "tileops/base/signature_call.h"
#include "tileops/core/error.h"
#include "tileops/core/tensor.h"
#include "tileops/dispatch/kernel.h"
#include "tileops/dispatch/kernel_table.h"
#include "tileops/target/target.h"

namespace tileops {

namespace detail {
struct CallFrame;
class CallStackGuard;
}  // namespace detail

/// The tensors of one call: the manifest inputs in order (an undefined Tensor for an absent
/// optional input) and one entry per `buffer: out` output (undefined when not passed).
struct CallArgs {
  std::span<const Tensor* const> inputs;
  std::span<const Tensor* const> outs;
};

class Op {
 public:
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;
  virtual ~Op();

  // ---- identity ---------------------------------------------------------------------------
  const OpClass& op_class() const { return *class_; }
  const OpSchema& schema() const { return *class_->schema; }
  std::string_view name() const { return class_->name; }
  /// Unique per instance and never reused in the process ("RMSNormFwdOp#3").
  const std::string& instance_key() const { return instance_key_; }
  /// The target given at construction (unset when none).
  const Target& target() const { return target_; }
  /// The manifest parameters by name, defaults included, as the instance holds them.
  const ParamMap& param_values() const { return param_values_; }

  // ---- calls -------------------------------------------------------------------------------
  /// The dynamic path: inputs in manifest order (undefined Tensor = absent optional), `outs` one
  /// per `buffer: out` output (may be empty). Returns the outputs in manifest order.
  std::vector<Tensor> call(std::span<const Tensor> inputs, std::span<const Tensor> outs = {});

  /// A call whose body runs outside `forward` (the Python composites run their wiring in Python:
  /// docs/design/torch-boundary.md). Declared below the class.
  class OpenCall;
  /// Opens a call on `inputs` and `outs`, as `call` takes them: steps 1 to 4 (frame, signature
  /// check, target selection), then the outputs are allocated as for forward. The caller runs the
  /// body, which writes them and whose sub-op calls on this thread are filed under their stages,
  /// then closes it. A call that needs no body (nothing to write, or a target's kernel serves it)
  /// is complete at once, recorded.
  std::unique_ptr<OpenCall> open_call(std::span<const Tensor> inputs,
                                      std::span<const Tensor> outs = {});

  /// The target this instance selected: nullopt before selection (and after an undone one),
  /// "BUILTIN" for the in-tree kernels, else the target's name.
  std::optional<std::string> serving_target() const;

  // ---- records and roofline ---------------------------------------------------------------
  /// The last completed call. UsageError before any call completed.
  SignatureCallPtr last_call() const;
  /// (flops, bytes) of last_call, from the manifest roofline.
  Roofline eval_roofline() const;
  /// The compute unit pricing the FLOPs ("cuda_core.fp32", "tensor_core.bf16"): the manifest's
  /// roofline.peak for last_call (or before any call), else "cuda_core.fp32".
  virtual std::string roof_key() const;
  /// Read part of the roofline bytes of last_call (bytes minus written bytes).
  virtual std::optional<double> eval_roofline_read_bytes() const;
  /// Value-dependent quantities of last_call that readings are recorded beside (for example how
  /// many experts a MoE call reached): named numbers, not part of (flops, bytes). Default: none.
  virtual std::map<std::string, double> roofline_data_terms() const { return {}; }

  /// The dtype the op was constructed for: the generated base of an op whose manifest declares a
  /// `torch.dtype` parameter returns it; nullopt for every other op.
  virtual std::optional<DType> dtype() const { return std::nullopt; }

  // ---- tuning and enumeration -------------------------------------------------------------
  /// Puts the op and its held sub-ops in tuned mode; every built kernel gets request_tune() now
  /// and every kernel built later right after it is built, a target's kernels included through
  /// their tuning hook (TargetKernel). Warns once (stderr) when a target kernel defines no hook.
  void request_tune();
  bool tune_requested() const { return tune_requested_.load(std::memory_order_relaxed); }
  /// Configuration of the first configured kernel of iter_kernels(), or nullopt.
  std::optional<std::string> kernel_config() const;
  /// Every in-tree kernel built by this op and by its held sub-ops (recursively, each once).
  std::vector<Kernel*> iter_kernels() const;
  /// Entries built for `interface` keyed by "key[identity]"; when a target serves, the target
  /// kernels keyed by device and input specs (interface ignored).
  std::vector<std::string> built_entries(std::string_view interface) const;
  /// Held sub-ops in stage order, then holding order.
  std::vector<Op*> held_delegates() const;

  /// delegate_for by class name, for compositions written outside C++ (the Python composites):
  /// the sub-op of class `op_name` held for (stage, identity), built once by make_op from
  /// `params` with this op's target, or `given` (kept with its own target). The same rules as the
  /// typed form: an unknown stage or a class other than the stage declares (checked before
  /// anything is held) is a UsageError, as is one instance held under two keys.
  Op& delegate_for(std::string_view stage, std::optional<std::string> identity,
                   std::string_view op_name, const ParamMap& params,
                   std::shared_ptr<Op> given = nullptr);

 protected:
  /// Stores the class and the target. The generated base then calls construct().
  Op(const OpClass& op_class, Target target);

  /// Construction steps after the target is stored: (1) load the backend registry, (2) check
  /// the parameter values (`check_params`, generated), (3) install the implementation table and
  /// check its contracts, (4) register the instance, (5) build empty state. Selects and builds
  /// no kernel and reads no device property.
  void construct(void (*check_params)(const void* params), const void* params,
                 ParamMap param_values);

  /// Runs one call through the seven steps; returns the outputs in manifest order.
  std::vector<Tensor> run_call(const CallArgs& args);

  /// The entry of interface `Iface` serving `call`: one lookup on a hit; on a miss selects one
  /// implementation (availability, refusal, general, preferred_over), builds its entry once per
  /// (implementation, identity) and caches it under (interface, call). Called from forward, the
  /// entry is pinned to the running call: it stays valid until that call ends, even if a failed
  /// call on another thread undoes the binding meanwhile. Called outside a call of this op, the
  /// reference is valid until the binding is undone.
  template <class Iface>
  Iface& kernel_for(const typename Iface::Request& call);

  /// The key of the implementation that would serve `call` (nothing is built). Accepts explicit
  /// device facts in `call.facts` (tests use them).
  template <class Iface>
  std::string key_for(const typename Iface::Request& call) const;

  /// Holds the sub-op of `stage` for `identity` (nullopt for sub-ops settled at construction):
  /// built once from `params` with this op's target, or `given` (kept with its own target).
  template <class SubOp>
  SubOp& delegate_for(std::string_view stage, std::optional<std::string> identity,
                      std::shared_ptr<SubOp> given, typename SubOp::Params params = {});

  /// The record of the call now running on this thread (valid inside forward).
  const SignatureCall& current_call() const;

 private:
  // Generated (by the per-op base).
  virtual SignatureCall check_call(const CallArgs& args) const = 0;
  virtual void run_forward(const SignatureCall& call, const CallArgs& args,
                           std::span<const Tensor> outputs) = 0;

  struct HeldDelegate {
    std::string stage;
    std::optional<std::string> identity;
    std::shared_ptr<Op> op;
  };

  void after_build(Kernel& kernel);
  /// Holds `sub` under (stage, identity) and returns the instance held there: `sub`, or the one
  /// another thread held first (then `sub` is dropped).
  Op& hold(std::string_view stage, std::optional<std::string> identity, std::shared_ptr<Op> sub);
  /// Keeps `entry` alive until the end of the call now running on this thread, when that call is
  /// this op's (kernel_for called from forward).
  void pin(std::shared_ptr<Kernel> entry) const;
  Op* find_held(std::string_view stage, const std::optional<std::string>& identity) const;
  const DelegateType& delegate_type(std::string_view stage) const;
  Target inherited_target() const { return target_; }

  // The seven steps' helpers.
  enum class Binding : std::uint8_t { unresolved, builtin, target };
  struct BindingSnapshot {
    Binding state;
    const KernelBuilder* builder;
  };
  struct TargetEntry {
    TargetKernel kernel;
    bool tune_sent = false;  // its tuning hook was called
  };
  BindingSnapshot binding_snapshot() const;
  /// Steps 3 to 5 of a call whose body does not run: the outputs when nothing is written or a
  /// target's kernel serves the call, nullopt when the body must run. Selects the target when
  /// unresolved; sets `bound_here` when this call bound it.
  std::optional<std::vector<Tensor>> run_without_body(const SignatureCall& call,
                                                      const CallArgs& args, bool& bound_here);
  /// Steps 6 and 7: checks the outputs, files the stages, replaces last_call and reports the
  /// record to the enclosing call. Returns the outputs.
  std::vector<Tensor> finish_call(SignatureCall call, const CallArgs& args,
                                  std::vector<Tensor> outputs, detail::CallFrame& frame,
                                  detail::CallStackGuard& guard);
  /// The number of `buffer: out` outputs; SignatureError when more inputs or outs are passed
  /// than the manifest declares.
  std::size_t check_arity(std::size_t n_inputs, std::size_t n_outs) const;
  void check_delegate_class(std::string_view stage, std::string_view op_name) const;
  bool select_target(const Device& device);  // returns true when this call bound the target
  void reset_binding();
  void warn_tune_unreachable();
  std::vector<Tensor> run_target_kernel(const SignatureCall& call, const CallArgs& args,
                                        const KernelBuilder& builder);
  void check_outputs(const SignatureCall& call, const CallArgs& args,
                     std::span<const Tensor> outputs) const;
  std::vector<Tensor> allocate_outputs(const SignatureCall& call, const CallArgs& args) const;
  void file_stages(SignatureCall& call, std::vector<std::pair<Op*, SignatureCallPtr>>& subcalls);

  // ---- construction group (never reset) ----
  const OpClass* class_;
  Target target_;
  ParamMap param_values_;
  std::string instance_key_;
  // Installed at construction (in-tree + backend kernel types); its caches are in the binding
  // group.
  mutable KernelTable kernels_;

  // ---- binding group (reset by reset_binding) ----
  mutable std::shared_mutex binding_mutex_;
  std::atomic<Binding> binding_state_{Binding::unresolved};
  std::string serving_name_;
  const KernelBuilder* builder_ = nullptr;
  std::unordered_map<std::string, TargetEntry> target_kernels_;

  // ---- running group ----
  std::atomic<bool> tune_requested_{false};
  std::atomic<bool> tune_warned_{false};
  mutable std::mutex delegates_mutex_;
  std::vector<HeldDelegate> delegates_;
  mutable std::mutex last_call_mutex_;
  SignatureCallPtr last_call_;
};

/// A call opened by Op::open_call. Close it, or destroy it to undo it as a failed call is undone
/// (last_call unchanged; a target binding this call made is reset, through the held sub-ops).
/// Opened, closed and destroyed on one thread, the innermost call first, as nested calls run.
class Op::OpenCall {
 public:
  OpenCall(const OpenCall&) = delete;
  OpenCall& operator=(const OpenCall&) = delete;
  ~OpenCall();

  /// True when no body runs (or it was closed): the call is recorded.
  bool complete() const noexcept { return complete_; }
  /// The outputs, in manifest order: of a complete call, its results; of an open one, the
  /// tensors the body writes (the caller's `out`, else allocated from the signature).
  const std::vector<Tensor>& outputs() const noexcept { return outputs_; }
  /// The call's record as the signature check made it (valid until closed).
  const SignatureCall& record() const;
  /// Steps 6 and 7 over the body's outputs (manifest order), which must be outputs() (else a
  /// SignatureError): checked as a forward's are, the stages filed, last_call replaced. Returns
  /// them. On failure the call is left to be undone when destroyed. UsageError on a complete
  /// call, or while a call opened after this one on this thread is open.
  std::vector<Tensor> close(std::vector<Tensor> outputs);

 private:
  friend class Op;
  OpenCall(Op& op, std::span<const Tensor> inputs, std::span<const Tensor> outs);
  CallArgs args() const { return CallArgs{inputs_, outs_}; }

  Op& op_;
  std::vector<Tensor> tensors_;  // the inputs, padded to the manifest's count, then the outs
  std::vector<const Tensor*> inputs_;
  std::vector<const Tensor*> outs_;
  std::unique_ptr<detail::CallFrame> frame_;
  std::unique_ptr<detail::CallStackGuard> guard_;
  std::unique_ptr<SignatureCall> call_;
  std::vector<Tensor> outputs_;
  bool bound_here_ = false;
  bool complete_ = false;
};

// ---- template definitions ------------------------------------------------------------------

template <class Iface>
Iface& Op::kernel_for(const typename Iface::Request& call) {
  KernelHandle<Iface> handle = kernels_.get<Iface>(call);
  pin(std::move(handle.owner));
  return *handle.entry;
}

template <class Iface>
std::string Op::key_for(const typename Iface::Request& call) const {
  return kernels_.key_for<Iface>(call);
}

template <class SubOp>
SubOp& Op::delegate_for(std::string_view stage, std::optional<std::string> identity,
                        std::shared_ptr<SubOp> given, typename SubOp::Params params) {
  (void)delegate_type(stage);  // unknown stage → UsageError
  if (Op* held = find_held(stage, identity)) {
    return static_cast<SubOp&>(*held);
  }
  std::shared_ptr<Op> sub = given ? std::static_pointer_cast<Op>(given)
                                  : std::static_pointer_cast<Op>(std::make_shared<SubOp>(
                                        std::move(params), inherited_target()));
  // Another thread may have held (stage, identity) since find_held: use the instance held.
  return static_cast<SubOp&>(hold(stage, std::move(identity), std::move(sub)));
}

}  // namespace tileops
