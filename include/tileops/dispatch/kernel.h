// Kernels, kernel interfaces, call specs and implementation descriptors: the vocabulary of
// in-tree kernel selection (docs/design/op-base.md). An op declares its interfaces and its
// implementations; Op::kernel_for selects exactly one implementation per call spec and caches
// what it builds.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <vector>

#include "tileops/core/device.h"

namespace tileops {

/// Facts about the device a call runs on. Read from the device only on a cache miss; tests pass
/// them explicitly to key_for.
struct DeviceFacts {
  int arch = 0;  ///< compute capability × 10 (90 for Hopper); 0 for the CPU
  int sm_count = 0;
  std::int64_t smem_budget = 0;  ///< shared memory per block (opt-in), bytes
  friend bool operator==(const DeviceFacts&, const DeviceFacts&) = default;
};

/// Base of every call spec: the immutable, hashable facts of one call that affect selection and
/// building. A derived call spec adds shapes, dtypes and semantic parameters, defaults its
/// operator==, and defines `std::size_t hash() const` and `std::string str() const` inline in its
/// contract header (hash_fields, spec_text).
/// It never states device facts itself; only key_for accepts `facts`.
struct CallSpec {
  Device device;
  std::optional<DeviceFacts> facts;
  friend bool operator==(const CallSpec&, const CallSpec&) = default;
};

/// Combines a value into a running hash.
inline void hash_combine(std::size_t& seed, std::size_t value) noexcept {
  seed ^= value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
}

/// A call spec's hash from its device and fields (integers, bools, enums such as DType): what
/// every `hash()` of a call spec returns, so that a contract defines it in one line.
template <class... Fields>
std::size_t hash_fields(const Device& device, const Fields&... fields) noexcept {
  std::size_t seed = std::hash<Device>{}(device);
  const auto one = [](const auto& v) -> std::size_t {
    using V = std::remove_cvref_t<decltype(v)>;
    if constexpr (std::is_enum_v<V>) {
      return std::hash<std::underlying_type_t<V>>{}(static_cast<std::underlying_type_t<V>>(v));
    } else {
      return std::hash<V>{}(v);
    }
  };
  (hash_combine(seed, one(fields)), ...);
  return seed;
}

/// One field of a call spec's text: integers in decimal, bools as true/false, text as is.
inline std::string spec_field(std::int64_t v) {
  return std::to_string(v);
}
inline std::string spec_field(int v) {
  return std::to_string(v);
}
inline std::string spec_field(bool v) {
  return v ? "true" : "false";
}
inline std::string spec_field(std::string_view v) {
  return std::string(v);
}
inline std::string spec_field(const char* v) {
  return v;
}

/// "Name(key=value, ..., device=cuda:0)": a call spec's text, which is also its tuning-database
/// key, so that a contract defines `str()` in one statement.
inline std::string spec_text(std::string_view name, const Device& device,
                             const std::vector<std::pair<std::string_view, std::string>>& fields) {
  std::string out(name);
  out += '(';
  for (const auto& [key, value] : fields) {
    out.append(key).append("=").append(value).append(", ");
  }
  return out.append("device=").append(device.str()).append(")");
}

/// A built kernel: holds the device program and its configuration. Concrete kernels also derive
/// from the interface they implement.
class Kernel {
 public:
  Kernel() = default;
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;
  virtual ~Kernel() = default;

  /// The configuration in use ("threads=256 vec=16"); empty when the kernel has none.
  virtual std::string config() const { return {}; }
  /// The configurations tuning chooses among; empty when the kernel is not tunable.
  virtual std::vector<std::string> tuning_space() const { return {}; }
  /// Kernels this one is made of (an entry of several kernels); enumeration walks them.
  virtual std::vector<Kernel*> parts() { return {}; }

  /// Puts the kernel in tuned mode: it times its tuning space on the next launch's real shapes
  /// and keeps the best. Idempotent. Kernels without a tuning space ignore it.
  void request_tune() {
    if (!tune_requested_.exchange(true)) on_tune_requested();
  }
  bool tune_requested() const { return tune_requested_.load(std::memory_order_relaxed); }

 protected:
  virtual void on_tune_requested() {}

 private:
  std::atomic<bool> tune_requested_{false};
};

/// What an implementation's entry_for returns: the identity deciding build equality, and the
/// factory that builds the entry the first time the identity appears.
struct EntryPlan {
  std::string identity;
  std::function<std::shared_ptr<Kernel>()> factory;
};

/// A kernel interface as an op declares it: `interface<RMSNormInterface>()`.
struct InterfaceInfo {
  std::string name;
  std::type_index type = typeid(void);
  std::type_index request_type = typeid(void);
};

/// An implementation (kernel type) as the implementation table holds it, type-erased over the
/// call spec (`const void*` points at the interface's Request type).
struct ImplementationInfo {
  std::string key;
  std::string class_name;
  std::string interface_name;
  std::type_index interface_type = typeid(void);
  std::type_index request_type = typeid(void);  ///< the interface's call spec
  std::vector<Device::Type> devices;
  std::optional<std::vector<int>> supported_archs;  ///< nullopt: every architecture
  bool general = false;
  std::vector<std::string> preferred_over;
  std::function<std::optional<std::string>(const void* call)> refusal;
  std::function<EntryPlan(const void* call)> entry_for;
  std::string source;  ///< "in-tree" or the backend that registered it
};

namespace detail {
template <class T>
concept HasDevices = requires {
  T::devices();
};
template <class T>
concept HasArchs = requires {
  T::supported_archs();
};
template <class T>
concept HasRefusal = requires(const typename T::Request& c) {
  T::refusal(c);
};
template <class T>
concept HasGeneral = requires {
  T::general;
};
template <class T>
concept HasPreferred = requires {
  T::preferred_over();
};
template <class T>
concept HasEntryFor = requires(const typename T::Request& c) {
  T::entry_for(c);
};
}  // namespace detail

/// Declares a kernel interface: `Iface::name` (a string view) and `Iface::Request` (the call
/// spec type).
template <class Iface>
InterfaceInfo interface() {
  return InterfaceInfo{std::string(Iface::name), typeid(Iface), typeid(typename Iface::Request)};
}

/// Describes an implementation class `Impl` (derived from Kernel and from exactly one interface,
/// named by `Impl::Interface`) under `key`. Optional static members of Impl, with defaults:
///   devices()          -> std::vector<Device::Type>   {cuda}
///   supported_archs()  -> std::optional<std::vector<int>>  nullopt (all)
///   refusal(call)      -> std::optional<std::string>  nullopt (serves every call)
///   general            -> bool                         false
///   preferred_over()   -> std::vector<std::string>    {}
///   entry_for(call)    -> EntryPlan      identity call.str(), factory make_shared<Impl>(call)
template <class Impl>
ImplementationInfo implementation(std::string key, std::string class_name) {
  using Iface = typename Impl::Interface;
  using Request = typename Iface::Request;
  ImplementationInfo info;
  info.key = std::move(key);
  info.class_name = std::move(class_name);
  info.interface_name = std::string(Iface::name);
  info.interface_type = typeid(Iface);
  info.request_type = typeid(Request);
  if constexpr (detail::HasDevices<Impl>) {
    info.devices = Impl::devices();
  } else {
    info.devices = {Device::Type::cuda};
  }
  if constexpr (detail::HasArchs<Impl>) info.supported_archs = Impl::supported_archs();
  if constexpr (detail::HasGeneral<Impl>) info.general = Impl::general;
  if constexpr (detail::HasPreferred<Impl>) info.preferred_over = Impl::preferred_over();
  info.refusal = [](const void* call) -> std::optional<std::string> {
    if constexpr (detail::HasRefusal<Impl>) {
      return Impl::refusal(*static_cast<const Request*>(call));
    } else {
      (void)call;
      return std::nullopt;
    }
  };
  info.entry_for = [](const void* call) -> EntryPlan {
    const auto& c = *static_cast<const Request*>(call);
    if constexpr (detail::HasEntryFor<Impl>) {
      return Impl::entry_for(c);
    } else {
      return EntryPlan{c.str(),
                       [c] { return std::static_pointer_cast<Kernel>(std::make_shared<Impl>(c)); }};
    }
  };
  info.source = "in-tree";
  return info;
}

/// The interfaces of `table`, each once, in the order its first implementation appears: what an
/// op class that declares no `interfaces()` serves (op_class_of).
std::vector<InterfaceInfo> interfaces_of(const std::vector<ImplementationInfo>& table);

/// Registers an implementation for the op named `op`, merged into the implementation table of
/// every instance constructed afterwards. A key registered twice for one op is a BackendError; a
/// key equal to an in-tree key is rejected when the op is constructed.
void register_kernel_type(std::string op, ImplementationInfo implementation);

/// Kernel types registered by backends for `op`.
std::vector<ImplementationInfo> registered_kernel_types(std::string_view op);

namespace detail {
/// The facts of `device` (read once per device and cached; the CPU has arch 0).
DeviceFacts device_facts(const Device& device);
/// Removes every registered kernel type (tests only).
void reset_kernel_types_for_tests();
}  // namespace detail

}  // namespace tileops
