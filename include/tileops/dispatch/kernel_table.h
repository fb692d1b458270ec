// The kernel table of one op instance: its implementations by interface, their preferences,
// selection and the entries it built (the binding group's caches). Kept apart from Op as
// oneDNN keeps its implementation list apart from the primitive; Op holds one and
// Op::kernel_for forwards to it (docs/design/op-base.md, "Kernel selection").
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <typeindex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tileops/core/error.h"
#include "tileops/dispatch/kernel.h"

namespace tileops {

/// An entry the table handed out: shared ownership (callers keep it alive while they run it)
/// and the entry seen as interface `Iface`.
template <class Iface>
struct KernelHandle {
  std::shared_ptr<Kernel> owner;
  Iface* entry = nullptr;
};

class KernelTable {
 public:
  /// Called once for every entry the table builds, right after building (tuned mode hooks in).
  using OnBuilt = std::function<void(Kernel&)>;

  KernelTable() = default;
  KernelTable(const KernelTable&) = delete;
  KernelTable& operator=(const KernelTable&) = delete;

  /// Installs `implementations` for the op named `op` and checks the table's contracts against
  /// `interfaces` (which must outlive the table): DispatchError listing every broken one.
  /// `on_built` is called for every entry built from then on.
  void install(std::string_view op, const std::vector<InterfaceInfo>& interfaces,
               std::vector<ImplementationInfo> implementations, OnBuilt on_built);

  /// The entry of `Iface` serving `call`: one shared-lock lookup on a hit; on a miss selects one
  /// implementation (device type, architecture, refusal, general, preferred_over), builds its
  /// entry once per (implementation, identity) and caches it under (interface, call).
  template <class Iface>
  KernelHandle<Iface> get(const typename Iface::Request& call);

  /// The key of the implementation that would serve `call`; builds nothing. Accepts explicit
  /// device facts in `call.facts`.
  template <class Iface>
  std::string key_for(const typename Iface::Request& call) const;

  /// Drops every cache (the binding group's undo). Entries still referenced by running calls
  /// live until those calls end.
  void reset();

  /// Every built entry (each once, in building order per interface).
  std::vector<std::shared_ptr<Kernel>> built() const;
  /// The entries built for `interface`, keyed "key[identity]".
  std::vector<std::string> built_entries(std::string_view interface) const;

 private:
  struct CacheBase {
    virtual ~CacheBase() = default;
  };
  template <class Request>
  struct Cache : CacheBase {
    struct Hash {
      std::size_t operator()(const Request& r) const { return r.hash(); }
    };
    std::unordered_map<Request, std::pair<std::shared_ptr<Kernel>, void*>, Hash> by_call;
  };
  struct Slot {
    const InterfaceInfo* info = nullptr;
    std::vector<const ImplementationInfo*> implementations;
    std::vector<std::vector<bool>> preferred;  // transitive preferred_over, by position
    std::unique_ptr<CacheBase> cache;
    std::vector<std::pair<std::string, std::shared_ptr<Kernel>>> built;
  };

  const Slot& slot_for(std::type_index iface) const;
  Slot& slot_for(std::type_index iface) {
    return const_cast<Slot&>(std::as_const(*this).slot_for(iface));
  }
  const ImplementationInfo& select(const Slot& slot, const void* call, const CallSpec& base,
                                   const DeviceFacts& facts, const std::string& call_str) const;
  std::shared_ptr<Kernel> build(Slot& slot, const ImplementationInfo& impl, const void* call);
  [[noreturn]] void fail_call_spec(const std::string& why) const;
  [[noreturn]] void fail_not_an_entry(const ImplementationInfo& impl,
                                      std::string_view interface) const;

  std::string op_;
  std::vector<ImplementationInfo> installed_;
  std::vector<Slot> slots_;
  OnBuilt on_built_;
  mutable std::shared_mutex mutex_;  // guards every slot's cache and built list
};

// ---- template definitions ------------------------------------------------------------------

template <class Iface>
KernelHandle<Iface> KernelTable::get(const typename Iface::Request& call) {
  using Request = typename Iface::Request;
  Slot& slot = slot_for(typeid(Iface));
  {
    std::shared_lock lock(mutex_);
    if (slot.cache) {
      const auto& by_call = static_cast<Cache<Request>*>(slot.cache.get())->by_call;
      if (const auto it = by_call.find(call); it != by_call.end()) {
        return {it->second.first, static_cast<Iface*>(it->second.second)};
      }
    }
  }
  if (call.facts) fail_call_spec("the call spec states device facts; only key_for accepts them");
  const std::string call_str = call.str();
  std::unique_lock lock(mutex_);
  if (!slot.cache) slot.cache = std::make_unique<Cache<Request>>();
  auto& by_call = static_cast<Cache<Request>*>(slot.cache.get())->by_call;
  if (const auto it = by_call.find(call); it != by_call.end()) {
    return {it->second.first, static_cast<Iface*>(it->second.second)};
  }
  const DeviceFacts facts = detail::device_facts(call.device);
  const ImplementationInfo& impl = select(slot, &call, call, facts, call_str);
  std::shared_ptr<Kernel> entry = build(slot, impl, &call);
  auto* iface = dynamic_cast<Iface*>(entry.get());
  if (iface == nullptr) fail_not_an_entry(impl, Iface::name);
  by_call.emplace(call, std::make_pair(entry, static_cast<void*>(iface)));
  return {std::move(entry), iface};
}

template <class Iface>
std::string KernelTable::key_for(const typename Iface::Request& call) const {
  const Slot& slot = slot_for(typeid(Iface));
  const DeviceFacts facts = call.facts ? *call.facts : detail::device_facts(call.device);
  return select(slot, &call, call, facts, call.str()).key;
}

}  // namespace tileops
