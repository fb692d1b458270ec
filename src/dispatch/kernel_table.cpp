// The kernel table: installation and contract checks, selection of one implementation per
// (interface, call spec) and entry building, the miss path of Op::kernel_for
// (docs/design/op-base.md, "Kernel selection"). Never by declaration order.
#include "tileops/dispatch/kernel_table.h"

#include <algorithm>

#include <fmt/format.h>

#include "dispatch/implementation_table.h"
#include "tileops/target/target.h"

namespace tileops {
namespace {

std::string device_types(const std::vector<Device::Type>& types) {
  std::vector<std::string> names;
  for (auto t : types) names.push_back(t == Device::Type::cpu ? "cpu" : "cuda");
  return fmt::format("[{}]", fmt::join(names, ", "));
}

}  // namespace

void KernelTable::install(std::string_view op, const std::vector<InterfaceInfo>& interfaces,
                          std::vector<ImplementationInfo> implementations, OnBuilt on_built) {
  op_ = std::string(op);
  on_built_ = std::move(on_built);
  installed_ = std::move(implementations);
  const auto problems = detail::check_implementation_table(op_, interfaces, installed_);
  if (!problems.empty()) throw DispatchError(fmt::format("{}", fmt::join(problems, "; ")));
  slots_.clear();
  slots_.resize(interfaces.size());
  for (std::size_t i = 0; i < interfaces.size(); ++i) {
    slots_[i].info = &interfaces[i];
    for (const auto& impl : installed_) {
      if (impl.interface_type == interfaces[i].type) slots_[i].implementations.push_back(&impl);
    }
    slots_[i].preferred = detail::preference_closure(slots_[i].implementations);
  }
}

const KernelTable::Slot& KernelTable::slot_for(std::type_index iface) const {
  for (const auto& slot : slots_) {
    if (slot.info->type == iface) return slot;
  }
  throw OpNotAvailableError(fmt::format(
      "{} declares no such kernel interface: it has no in-tree implementation for it; known "
      "targets for this op: [{}]",
      op_, fmt::join(registered_targets(op_), ", ")));
}

void KernelTable::fail_call_spec(const std::string& why) const {
  throw UsageError(fmt::format("{}: kernel_for: {}", op_, why));
}

void KernelTable::fail_not_an_entry(const ImplementationInfo& impl,
                                    std::string_view interface) const {
  throw DispatchError(
      fmt::format("{}: implementation '{}' built an entry that does not implement interface '{}'",
                  op_, impl.key, interface));
}

const ImplementationInfo& KernelTable::select(const Slot& slot, const void* call,
                                              const CallSpec& base, const DeviceFacts& facts,
                                              const std::string& call_str) const {
  const auto& members = slot.implementations;
  std::vector<std::size_t> survivors;
  std::vector<std::string> reasons;
  bool any_on_device_type = false;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const ImplementationInfo& impl = *members[i];
    const bool on_type =
        std::find(impl.devices.begin(), impl.devices.end(), base.device.type) != impl.devices.end();
    if (!on_type) {
      reasons.push_back(fmt::format("{} ({}: runs on {}, not {})", impl.key, impl.class_name,
                                    device_types(impl.devices), base.device.str()));
      continue;
    }
    any_on_device_type = true;
    if (impl.supported_archs && base.device.is_cuda() &&
        std::find(impl.supported_archs->begin(), impl.supported_archs->end(), facts.arch) ==
            impl.supported_archs->end()) {
      reasons.push_back(fmt::format("{} ({}: supports sm_[{}], not sm_{})", impl.key,
                                    impl.class_name, fmt::join(*impl.supported_archs, ", "),
                                    facts.arch));
      continue;
    }
    if (auto why = impl.refusal(call)) {
      reasons.push_back(fmt::format("{} ({}: {})", impl.key, impl.class_name, *why));
      continue;
    }
    survivors.push_back(i);
  }
  // Winners: survivors that no other survivor dominates.
  std::vector<std::size_t> winners;
  for (const std::size_t k : survivors) {
    const bool dominated = std::any_of(survivors.begin(), survivors.end(), [&](std::size_t o) {
      if (o == k) return false;
      return slot.preferred[o][k] || (members[k]->general && !members[o]->general);
    });
    if (!dominated) winners.push_back(k);
  }
  if (winners.size() == 1) return *members[winners.front()];
  if (!any_on_device_type) {
    throw OpNotAvailableError(
        fmt::format("{}'s in-tree kernels do not run on {}; known targets for this op: [{}]", op_,
                    base.device.str(), fmt::join(registered_targets(op_), ", ")));
  }
  if (winners.empty()) {
    throw DispatchError(fmt::format("{}: no implementation of '{}' serves this call: {}. Call: {}",
                                    op_, slot.info->name, fmt::join(reasons, "; "), call_str));
  }
  std::vector<std::string> keys;
  for (const std::size_t w : winners) keys.push_back(members[w]->key);
  throw DispatchError(fmt::format(
      "{}: dispatch is ambiguous: [{}] all serve this call of '{}', and none is preferred over the "
      "others (declare preferred_over). Call: {}",
      op_, fmt::join(keys, ", "), slot.info->name, call_str));
}

std::shared_ptr<Kernel> KernelTable::build(Slot& slot, const ImplementationInfo& impl,
                                           const void* call) {
  EntryPlan plan = impl.entry_for(call);
  const std::string key = fmt::format("{}[{}]", impl.key, plan.identity);
  for (const auto& [built_key, entry] : slot.built) {
    if (built_key == key) return entry;
  }
  std::shared_ptr<Kernel> entry = plan.factory();
  if (!entry) {
    throw DispatchError(fmt::format("{}: implementation '{}' built no entry", op_, impl.key));
  }
  slot.built.emplace_back(key, entry);
  if (on_built_) on_built_(*entry);
  return entry;
}

void KernelTable::reset() {
  std::unique_lock lock(mutex_);
  for (auto& slot : slots_) {
    slot.cache.reset();
    slot.built.clear();
  }
}

std::vector<std::shared_ptr<Kernel>> KernelTable::built() const {
  std::shared_lock lock(mutex_);
  std::vector<std::shared_ptr<Kernel>> out;
  for (const auto& slot : slots_) {
    for (const auto& [key, entry] : slot.built) out.push_back(entry);
  }
  return out;
}

std::vector<std::string> KernelTable::built_entries(std::string_view interface) const {
  std::shared_lock lock(mutex_);
  std::vector<std::string> out;
  for (const auto& slot : slots_) {
    if (slot.info->name != interface) continue;
    for (const auto& [key, entry] : slot.built) out.push_back(key);
  }
  return out;
}

}  // namespace tileops
