// A small op written directly on the Op base class (as a generated base would be), with a
// configurable implementation table, for the base-class tests. ToyScaleFwdOp: y = scale * x,
// x float32 or float16 [N], y like x (`buffer: out`).
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tileops/base/op.h"
#include "tileops/core/error.h"
#include "tileops/core/tensor.h"

namespace toy {

using namespace tileops;

struct ToyCall : CallSpec {
  std::int64_t n = 0;
  DType dtype = DType::float32;
  friend bool operator==(const ToyCall&, const ToyCall&) = default;
  std::size_t hash() const {
    std::size_t seed = std::hash<std::int64_t>{}(n);
    hash_combine(seed, static_cast<std::size_t>(dtype));
    hash_combine(seed, std::hash<Device>{}(device));
    return seed;
  }
  std::string str() const { return fmt::format("ToyCall(n={}, {})", n, dtype_name(dtype)); }
};

class ToyInterface {
 public:
  static constexpr std::string_view name = "toy_scale";
  using Request = ToyCall;
  virtual ~ToyInterface() = default;
  virtual void forward(const Tensor& x, const Tensor& y, double scale) = 0;
};

/// Counts builds, so tests can check that an identity is built once.
inline std::atomic<int> g_builds{0};
/// Launches on a kernel object that had already been destroyed (a use after free the tests can
/// see without a sanitizer, as long as the freed memory still dispatches).
inline std::atomic<int> g_dead_launches{0};

/// The kernel objects alive now, so that a launch can tell whether its kernel was destroyed.
class LiveKernels {
 public:
  static void add(const void* k) {
    std::lock_guard lock(mutex());
    set().insert(k);
  }
  static void remove(const void* k) {
    std::lock_guard lock(mutex());
    set().erase(k);
  }
  static bool contains(const void* k) {
    std::lock_guard lock(mutex());
    return set().count(k) != 0;
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::set<const void*>& set() {
    static std::set<const void*> s;
    return s;
  }
};

/// A CPU implementation; `Tag` makes distinct classes with their own declarations.
template <int Tag>
class ToyKernel : public Kernel, public ToyInterface {
 public:
  using Interface = ToyInterface;
  static inline std::vector<Device::Type> device_list{Device::Type::cpu};
  static inline std::optional<std::vector<int>> archs;
  static inline std::function<std::optional<std::string>(const ToyCall&)> refuse;
  static inline std::vector<std::string> preferred;
  static inline bool is_general = false;
  static inline bool tunable = false;
  static std::vector<Device::Type> devices() { return device_list; }
  static std::optional<std::vector<int>> supported_archs() { return archs; }
  static std::optional<std::string> refusal(const ToyCall& c) {
    return refuse ? refuse(c) : std::nullopt;
  }
  static std::vector<std::string> preferred_over() { return preferred; }
  static EntryPlan entry_for(const ToyCall& c) {
    // Identity: the dtype only (n varies per call without rebuilding).
    return EntryPlan{std::string(dtype_name(c.dtype)), [c] {
                       ++g_builds;
                       return std::static_pointer_cast<Kernel>(std::make_shared<ToyKernel>(c));
                     }};
  }
  explicit ToyKernel(const ToyCall& c) : call(c) { LiveKernels::add(this); }
  ~ToyKernel() override { LiveKernels::remove(this); }
  std::string config() const override { return tunable ? fmt::format("tag={}", Tag) : ""; }
  std::vector<std::string> tuning_space() const override {
    return tunable ? std::vector<std::string>{"a", "b"} : std::vector<std::string>{};
  }
  void forward(const Tensor& x, const Tensor& y, double scale) override {
    if (!LiveKernels::contains(this)) ++g_dead_launches;
    ++launches;
    const auto xv = x.to_vector();
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      y.set_at({i}, xv[static_cast<std::size_t>(i)] * scale);
    }
  }
  ToyCall call;
  std::atomic<int> launches{0};
  std::atomic<int> tune_calls{0};

 protected:
  void on_tune_requested() override { ++tune_calls; }
};

/// Resets the declarations of ToyKernel<Tag> to a plain CPU, non-general implementation.
template <int Tag>
void reset_kernel() {
  ToyKernel<Tag>::device_list = {Device::Type::cpu};
  ToyKernel<Tag>::archs.reset();
  ToyKernel<Tag>::refuse = nullptr;
  ToyKernel<Tag>::preferred.clear();
  ToyKernel<Tag>::is_general = false;
  ToyKernel<Tag>::tunable = false;
}

/// The manifest entry of the toy op, as tileops-gen would emit it.
const OpSchema& toy_schema();

struct ToyParams {
  double scale = 1.0;
};

/// The op. `Table` supplies `static std::vector<ImplementationInfo> kernel_types()`.
template <class Table>
class ToyScaleFwdOp : public Op {
 public:
  using Params = ToyParams;
  static const OpSchema& schema_data() { return toy_schema(); }
  static Params params_from_map(const ParamMap& m) {
    Params p;
    if (auto it = m.find("scale"); it != m.end()) p.scale = value_as_double(it->second, "scale");
    return p;
  }
  static std::vector<InterfaceInfo> interfaces() { return {interface<ToyInterface>()}; }
  static std::vector<ImplementationInfo> kernel_types() { return Table::kernel_types(); }

  explicit ToyScaleFwdOp(Params params, Target target = {})
      : Op(op_class_of<ToyScaleFwdOp>(), std::move(target)), params_(params) {
    construct(&check_params, &params_, ParamMap{{"scale", params_.scale}});
  }

  Tensor operator()(const Tensor& x, const Tensor& out = Tensor()) {
    const Tensor* in[] = {&x};
    const Tensor* outs[] = {&out};
    return run_call(CallArgs{in, outs})[0];
  }

  using Op::key_for;  // exposed for the selection tests
  ToyInterface& kernel_for_call(const ToyCall& c) { return kernel_for<ToyInterface>(c); }
  std::function<void()> before_kernel;  // lets a test make forward fail

 private:
  static void check_params(const void* p) {
    const auto& params = *static_cast<const Params*>(p);
    if (!(params.scale == params.scale)) {
      throw SignatureError("ToyScaleFwdOp: parameter 'scale' must be a number, got nan");
    }
  }
  SignatureCall check_call(const CallArgs& a) const override;
  void run_forward(const SignatureCall& c, const CallArgs& a, std::span<const Tensor> o) override {
    const Tensor& x = *a.inputs[0];
    ToyCall spec;
    spec.device = c.device;
    spec.n = x.numel();
    spec.dtype = x.dtype();
    auto& kernel = kernel_for<ToyInterface>(spec);
    if (before_kernel) before_kernel();
    kernel.forward(x, o[0], params_.scale);
  }
  Params params_;
};

/// The toy op with one general CPU implementation (ToyKernel<1>): the lifecycle and concurrency
/// tests' op.
struct General {
  static std::vector<ImplementationInfo> kernel_types() {
    auto info = implementation<ToyKernel<1>>("general", "ToyKernel1");
    info.general = true;
    return {info};
  }
};
using Op1 = ToyScaleFwdOp<General>;

/// The hand-written signature check of the toy op (what tileops-gen would generate).
SignatureCall toy_check_call(const CallArgs& a);

template <class Table>
SignatureCall ToyScaleFwdOp<Table>::check_call(const CallArgs& a) const {
  return toy_check_call(a);
}

}  // namespace toy
