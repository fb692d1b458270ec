// The Op base class: construction, the seven steps of a call, records, undo.
#include "tileops/base/op.h"

#include <algorithm>
#include <iostream>
#include <set>

#include <fmt/format.h>

#include "base/call_stack.h"

namespace tileops {
namespace {

std::atomic<std::uint64_t> g_instance_counter{0};

std::string join_names(const std::vector<std::string>& names) {
  return fmt::format("[{}]", fmt::join(names, ", "));
}

}  // namespace

Op::Op(const OpClass& op_class, Target target) : class_(&op_class), target_(std::move(target)) {}

Op::~Op() = default;

void Op::construct(void (*check_params)(const void* params), const void* params,
                   ParamMap param_values) {
  if (!class_->registration_problems.empty()) {
    throw ManifestError(fmt::format("{} disagrees with its manifest entry: {}", name(),
                                    fmt::join(class_->registration_problems, "; ")));
  }
  // (1) the backend registry, before anything can depend on it.
  load_backends();
  // (2) parameter values against the manifest.
  check_params(params);
  param_values_ = std::move(param_values);
  // (3) the implementation table: in-tree kernel types merged with backends' ones.
  std::vector<ImplementationInfo> installed = class_->kernel_types;
  for (auto& extra : registered_kernel_types(name())) {
    const bool clash = std::any_of(installed.begin(), installed.end(),
                                   [&](const auto& k) { return k.key == extra.key; });
    if (clash) {
      throw BackendError(
          fmt::format("{}: a backend registered kernel type '{}', which reuses a key the op has",
                      name(), extra.key));
    }
    installed.push_back(std::move(extra));
  }
  kernels_.install(name(), class_->interfaces, std::move(installed),
                   [this](Kernel& kernel) { after_build(kernel); });
  // (4) a unique instance key, never reused in the process.
  instance_key_ = fmt::format("{}#{}", name(), ++g_instance_counter);
  // (5) empty state: the binding and running groups start empty (member initialisers).
}

// ---- the seven steps of a call ----------------------------------------------------------------

std::vector<Tensor> Op::run_call(const CallArgs& args) {
  detail::CallFrame frame;
  frame.op = this;
  detail::CallStackGuard guard(frame);  // (1) begin
  bool bound_here = false;
  try {
    SignatureCall call = check_call(args);  // (2) the generated signature check
    frame.call = &call;
    std::optional<std::vector<Tensor>> outputs = run_without_body(call, args, bound_here);
    if (!outputs) {
      outputs = allocate_outputs(call, args);
      run_forward(call, args, *outputs);  // (5) forward
    }
    return finish_call(std::move(call), args, std::move(*outputs), frame, guard);  // (6), (7)
  } catch (...) {
    if (bound_here) reset_binding();
    throw;
  }
}

std::optional<std::vector<Tensor>> Op::run_without_body(const SignatureCall& call,
                                                        const CallArgs& args, bool& bound_here) {
  if (call.writes_nothing()) {
    return allocate_outputs(call, args);  // (3) nothing to write: results from the signature
  }
  // (4) Select when unresolved; a failed call on another thread may undo the binding between
  // two reads, so the state and the builder are read together and selection is retried.
  BindingSnapshot binding = binding_snapshot();
  while (binding.state == Binding::unresolved) {
    bound_here = select_target(call.device) || bound_here;
    binding = binding_snapshot();
  }
  if (binding.state == Binding::target && binding.builder != nullptr) {
    return run_target_kernel(call, args, *binding.builder);  // (5) the target's kernel
  }
  return std::nullopt;
}

std::vector<Tensor> Op::finish_call(SignatureCall call, const CallArgs& args,
                                    std::vector<Tensor> outputs, detail::CallFrame& frame,
                                    detail::CallStackGuard& guard) {
  check_outputs(call, args, outputs);  // (6)
  file_stages(call, frame.subcalls);   // (7) record
  auto record = std::make_shared<const SignatureCall>(std::move(call));
  frame.call = nullptr;
  {
    std::lock_guard lock(last_call_mutex_);
    last_call_ = record;
  }
  guard.report_to_parent(std::move(record));
  return outputs;
}

std::size_t Op::check_arity(std::size_t n_inputs, std::size_t n_outs) const {
  std::size_t n_buffers = 0;
  for (const auto& o : schema().outputs) n_buffers += o.buffer_out ? 1 : 0;
  if (n_inputs > schema().inputs.size()) {
    throw SignatureError(fmt::format("{}: {} inputs passed, the manifest declares {}", name(),
                                     n_inputs, schema().inputs.size()));
  }
  if (n_outs > n_buffers) {
    throw SignatureError(fmt::format("{}: {} out buffers passed, the manifest declares {}", name(),
                                     n_outs, n_buffers));
  }
  return n_buffers;
}

std::vector<Tensor> Op::call(std::span<const Tensor> inputs, std::span<const Tensor> outs) {
  const std::size_t n_buffers = check_arity(inputs.size(), outs.size());
  static const Tensor kAbsent;
  std::vector<const Tensor*> in(schema().inputs.size(), &kAbsent);
  for (std::size_t i = 0; i < inputs.size(); ++i) in[i] = &inputs[i];
  std::vector<const Tensor*> out(n_buffers, &kAbsent);
  for (std::size_t i = 0; i < outs.size(); ++i) out[i] = &outs[i];
  return run_call(CallArgs{in, out});
}

const SignatureCall& Op::current_call() const {
  const detail::CallFrame* frame = detail::current_frame();
  if (frame == nullptr || frame->op != this || frame->call == nullptr) {
    throw UsageError(fmt::format("{}: current_call() outside the op's forward", name()));
  }
  return *frame->call;
}

std::vector<Tensor> Op::allocate_outputs(const SignatureCall& call, const CallArgs& args) const {
  std::vector<Tensor> outputs;
  const auto& decls = schema().outputs;
  outputs.reserve(decls.size());
  std::size_t buffer = 0;
  std::size_t record = 0;
  for (const auto& decl : decls) {
    while (record < call.tensors.size() &&
           call.tensors[record].role != TensorRecord::Role::output) {
      ++record;
    }
    if (decl.buffer_out && buffer < args.outs.size() && args.outs[buffer]->defined()) {
      outputs.push_back(*args.outs[buffer]);
    } else {
      const TensorRecord& r = call.tensors.at(record);
      outputs.push_back(Tensor::empty(r.shape, r.dtype, call.device));
    }
    if (decl.buffer_out) ++buffer;
    ++record;
  }
  return outputs;
}

void Op::check_outputs(const SignatureCall& call, const CallArgs& args,
                       std::span<const Tensor> outputs) const {
  const auto& decls = schema().outputs;
  if (outputs.size() != decls.size()) {
    throw SignatureError(
        fmt::format("{}: the implementation returned {} outputs, the manifest "
                    "declares {}",
                    name(), outputs.size(), decls.size()));
  }
  std::size_t buffer = 0;
  std::size_t record = 0;
  for (std::size_t i = 0; i < decls.size(); ++i) {
    while (record < call.tensors.size() &&
           call.tensors[record].role != TensorRecord::Role::output) {
      ++record;
    }
    const TensorRecord& r = call.tensors.at(record++);
    const Tensor& t = outputs[i];
    const auto where = [&] { return fmt::format("{}: output '{}'", name(), decls[i].name); };
    if (!t.defined()) throw SignatureError(where() + ": the implementation returned no tensor");
    if (t.sizes() != r.shape || t.dtype() != r.dtype || t.device() != call.device) {
      throw SignatureError(fmt::format("{} declared {} {}: expected {} [{}] on {}, got {}", where(),
                                       decls[i].dtype, decls[i].shape, dtype_name(r.dtype),
                                       fmt::join(r.shape, ", "), call.device.str(), t.str()));
    }
    const bool passed_out =
        decls[i].buffer_out && buffer < args.outs.size() && args.outs[buffer]->defined();
    if (passed_out) {
      const Tensor& out = *args.outs[buffer];
      if (t.data_ptr() != out.data_ptr() || !t.shares_storage_with(out)) {
        throw SignatureError(where() + ": the implementation did not return the caller's `out`");
      }
    } else {
      for (const Tensor* input : args.inputs) {
        if (input->defined() && input->numel() > 0 && t.numel() > 0 &&
            t.shares_storage_with(*input)) {
          throw SignatureError(where() + ": a new output shares storage with an input");
        }
      }
    }
    if (decls[i].buffer_out) ++buffer;
  }
}

void Op::file_stages(SignatureCall& call, std::vector<std::pair<Op*, SignatureCallPtr>>& subcalls) {
  if (subcalls.empty()) return;
  std::lock_guard lock(delegates_mutex_);
  for (auto& [sub, record] : subcalls) {
    const auto held = std::find_if(delegates_.begin(), delegates_.end(),
                                   [&](const auto& d) { return d.op.get() == sub; });
    if (held == delegates_.end()) {
      throw UsageError(
          fmt::format("{}: sub-op {} completed a call inside {} but is not held "
                      "through delegate_for",
                      name(), sub->instance_key(), instance_key()));
    }
    for (auto& [stage, calls] : call.stages) {
      if (stage == held->stage) calls.push_back(std::move(record));
    }
  }
}

// ---- targets ----------------------------------------------------------------------------------

std::optional<std::string> Op::serving_target() const {
  std::shared_lock lock(binding_mutex_);
  if (binding_state_.load() == Binding::unresolved) return std::nullopt;
  return serving_name_;
}

bool Op::select_target(const Device& device) {
  std::unique_lock lock(binding_mutex_);
  if (binding_state_.load() != Binding::unresolved) return false;  // another thread bound it
  const Target chosen = target_.is_set() ? target_ : default_target();
  std::string target_name;
  if (chosen.is_builtin()) {
    target_name = std::string(kBuiltinTargetName);
  } else if (chosen.is_set()) {
    if (!detail::target_registered(chosen.name())) {
      throw UnknownTargetError(
          fmt::format("{}: no backend registered target '{}'; known targets: "
                      "{}",
                      name(), chosen.name(), join_names(registered_targets())));
    }
    target_name = chosen.name();
  } else {
    const auto claims = detail::detect_targets(device);
    if (claims.size() > 1) {
      throw AmbiguousTargetError(
          fmt::format("{}: targets {} all claim device {}; pass target= to "
                      "choose one",
                      name(), join_names(claims), device.str()));
    }
    target_name = claims.empty() ? std::string(kBuiltinTargetName) : claims.front();
  }
  if (target_name == kBuiltinTargetName) {
    serving_name_ = target_name;
    builder_ = nullptr;
    binding_state_.store(Binding::builtin, std::memory_order_release);
    return true;
  }
  const KernelBuilder* builder = detail::find_kernel_builder(name(), target_name);
  const bool has_own_kernels = !class_->interfaces.empty() || !class_->kernel_types.empty();
  if (builder == nullptr && has_own_kernels) {
    throw OpNotAvailableError(fmt::format(
        "target '{}' registers no kernel builder for {}; targets that do: {}. There is no fall "
        "back to the in-tree kernels: construct the op with target=BUILTIN or another target",
        target_name, name(), join_names(registered_targets(name()))));
  }
  // A composite with no kernels of its own and no builder runs its composition.
  serving_name_ = target_name;
  builder_ = builder;
  binding_state_.store(Binding::target, std::memory_order_release);
  return true;
}

Op::BindingSnapshot Op::binding_snapshot() const {
  std::shared_lock lock(binding_mutex_);
  return {binding_state_.load(std::memory_order_acquire), builder_};
}

std::vector<Tensor> Op::run_target_kernel(const SignatureCall& call, const CallArgs& args,
                                          const KernelBuilder& builder) {
  const auto& decls = schema().inputs;
  std::vector<Tensor> inputs;
  inputs.reserve(args.inputs.size());
  std::vector<std::optional<TensorSpec>> specs;
  std::string key = call.device.str();
  for (std::size_t i = 0; i < args.inputs.size(); ++i) {
    const Tensor& t = *args.inputs[i];
    if (!t.defined()) {
      inputs.emplace_back();
      specs.emplace_back(std::nullopt);
      key += "|-";
      continue;
    }
    // Non-written inputs arrive contiguous; written ones keep their storage (the signature
    // checked `contiguous: true` where declared).
    inputs.push_back(decls[i].mutated ? t : t.contiguous());
    specs.push_back(TensorSpec{t.device(), t.dtype(), t.sizes()});
    key += fmt::format("|{}[{}]", dtype_name(t.dtype()), fmt::join(t.sizes(), ","));
  }
  // The kernel is copied out of the cache: an undo on another thread cannot free what runs.
  TargetKernel kernel;
  {
    std::shared_lock lock(binding_mutex_);
    if (const auto it = target_kernels_.find(key); it != target_kernels_.end()) {
      kernel = it->second.kernel;
    }
  }
  if (!kernel) {
    bool warn = false;
    {
      std::unique_lock lock(binding_mutex_);
      if (const auto it = target_kernels_.find(key); it != target_kernels_.end()) {
        kernel = it->second.kernel;
      } else {
        kernel = builder(specs, param_values_);
        if (!kernel) {
          throw OpNotAvailableError(fmt::format("{}: target '{}' built no callable kernel for {}",
                                                name(), serving_name_, key));
        }
        TargetEntry entry{kernel, false};
        if (tune_requested()) {
          entry.tune_sent = kernel.tunable();
          warn = !kernel.tunable();
        }
        // Cached only while the binding that built it stands (an undo may have run meanwhile).
        if (builder_ == &builder) target_kernels_.emplace(key, entry);
        if (entry.tune_sent) kernel.request_tune();
      }
    }
    if (warn) warn_tune_unreachable();
  }
  std::vector<Tensor> outs;
  for (const Tensor* out : args.outs) outs.push_back(*out);
  return kernel(inputs, outs);
}

void Op::reset_binding() {
  {
    std::unique_lock lock(binding_mutex_);
    binding_state_.store(Binding::unresolved, std::memory_order_release);
    serving_name_.clear();
    builder_ = nullptr;
    target_kernels_.clear();
  }
  kernels_.reset();
  for (Op* sub : held_delegates()) sub->reset_binding();
}

// ---- records, roofline ------------------------------------------------------------------------

SignatureCallPtr Op::last_call() const {
  std::lock_guard lock(last_call_mutex_);
  if (!last_call_) throw UsageError(fmt::format("{}: no call has completed yet", name()));
  return last_call_;
}

std::string Op::roof_key() const {
  if (schema().roof_key == nullptr) return "cuda_core.fp32";
  SignatureCallPtr call;
  {
    std::lock_guard lock(last_call_mutex_);
    call = last_call_;
  }
  return schema().roof_key(call.get());
}

Roofline Op::eval_roofline() const {
  const SignatureCallPtr call = last_call();
  if (schema().eval_roofline == nullptr) {
    throw UsageError(fmt::format("{}: the manifest entry has no roofline", name()));
  }
  return schema().eval_roofline(*call);
}

std::optional<double> Op::eval_roofline_read_bytes() const {
  return last_call()->read_bytes();
}

// ---- tuning and enumeration -------------------------------------------------------------------

void Op::warn_tune_unreachable() {
  if (tune_warned_.exchange(true)) return;
  std::string target;
  {
    std::shared_lock lock(binding_mutex_);
    target = serving_name_;
  }
  std::cerr << "tileops: warning: " << instance_key_ << " is served by target '" << target
            << "', which built a kernel that defines no request_tune(); tuning does not reach "
               "it\n";
}

void Op::request_tune() {
  tune_requested_.store(true);
  for (Kernel* kernel : iter_kernels()) kernel->request_tune();
  for (Op* sub : held_delegates()) sub->request_tune();
  // The target's kernels: each hook is called once; a kernel without one is warned about.
  std::vector<TargetKernel> to_tune;
  bool untunable = false;
  {
    std::unique_lock lock(binding_mutex_);
    for (auto& [key, entry] : target_kernels_) {
      if (!entry.kernel.tunable()) {
        untunable = true;
      } else if (!entry.tune_sent) {
        entry.tune_sent = true;
        to_tune.push_back(entry.kernel);
      }
    }
  }
  for (const TargetKernel& kernel : to_tune) kernel.request_tune();
  if (untunable) warn_tune_unreachable();
}

namespace {
void collect_kernel(Kernel* kernel, std::vector<Kernel*>& out, std::set<Kernel*>& seen) {
  if (kernel == nullptr || !seen.insert(kernel).second) return;
  out.push_back(kernel);
  for (Kernel* part : kernel->parts()) collect_kernel(part, out, seen);
}
}  // namespace

std::vector<Kernel*> Op::iter_kernels() const {
  std::vector<Kernel*> out;
  std::set<Kernel*> seen;
  for (const auto& entry : kernels_.built()) collect_kernel(entry.get(), out, seen);
  for (const Op* sub : held_delegates()) {
    for (Kernel* k : sub->iter_kernels()) collect_kernel(k, out, seen);
  }
  return out;
}

std::optional<std::string> Op::kernel_config() const {
  for (const Kernel* kernel : iter_kernels()) {
    std::string config = kernel->config();
    if (!config.empty()) return config;
  }
  return std::nullopt;
}

std::vector<std::string> Op::built_entries(std::string_view interface) const {
  {
    std::shared_lock lock(binding_mutex_);
    if (binding_state_.load() == Binding::target && builder_ != nullptr) {
      std::vector<std::string> out;
      for (const auto& [key, entry] : target_kernels_) out.push_back(key);
      std::sort(out.begin(), out.end());
      return out;
    }
  }
  return kernels_.built_entries(interface);
}

void Op::after_build(Kernel& kernel) {
  if (tune_requested()) {
    std::vector<Kernel*> all;
    std::set<Kernel*> seen;
    collect_kernel(&kernel, all, seen);
    for (Kernel* k : all) k->request_tune();
  }
}

void Op::pin(std::shared_ptr<Kernel> entry) const {
  detail::CallFrame* frame = detail::current_frame();
  if (frame != nullptr && frame->op == this) frame->pinned.push_back(std::move(entry));
}

// ---- composite ops ----------------------------------------------------------------------------

const DelegateType& Op::delegate_type(std::string_view stage) const {
  for (const auto& d : class_->delegate_types) {
    if (d.stage == stage) return d;
  }
  std::vector<std::string> stages;
  for (const auto& d : class_->delegate_types) stages.push_back(d.stage);
  throw UsageError(fmt::format("{}: delegate_for: unknown stage '{}'; delegate_types declares {}",
                               name(), stage, join_names(stages)));
}

Op* Op::find_held(std::string_view stage, const std::optional<std::string>& identity) const {
  std::lock_guard lock(delegates_mutex_);
  for (const auto& d : delegates_) {
    if (d.stage == stage && d.identity == identity) return d.op.get();
  }
  return nullptr;
}

void Op::check_delegate_class(std::string_view stage, std::string_view op_name) const {
  const DelegateType& declared = delegate_type(stage);
  if (op_name != declared.op) {
    throw UsageError(fmt::format("{}: delegate_for: stage '{}' holds {}, got {}", name(), stage,
                                 declared.op, op_name));
  }
}

Op& Op::delegate_for(std::string_view stage, std::optional<std::string> identity,
                     std::string_view op_name, const ParamMap& params, std::shared_ptr<Op> given) {
  check_delegate_class(stage, given ? given->name() : op_name);
  if (Op* held = find_held(stage, identity)) return *held;
  std::shared_ptr<Op> sub = given ? std::move(given) : make_op(op_name, params, inherited_target());
  return hold(stage, std::move(identity), std::move(sub));
}

Op& Op::hold(std::string_view stage, std::optional<std::string> identity, std::shared_ptr<Op> sub) {
  check_delegate_class(stage, sub->name());
  {
    std::lock_guard lock(delegates_mutex_);
    for (const auto& d : delegates_) {
      if (d.stage == stage && d.identity == identity) return *d.op;  // raced: keep the first
      if (d.op == sub) {
        throw UsageError(fmt::format(
            "{}: delegate_for: {} is already held under stage '{}' (identity {}); one instance "
            "is held once",
            name(), sub->instance_key(), d.stage, d.identity.value_or("None")));
      }
    }
    delegates_.push_back(HeldDelegate{std::string(stage), std::move(identity), sub});
  }
  if (tune_requested()) sub->request_tune();
  return *sub;
}

std::vector<Op*> Op::held_delegates() const {
  std::lock_guard lock(delegates_mutex_);
  std::vector<Op*> out;
  for (const auto& declared : class_->delegate_types) {
    for (const auto& d : delegates_) {
      if (d.stage == declared.stage) out.push_back(d.op.get());
    }
  }
  return out;
}

}  // namespace tileops
