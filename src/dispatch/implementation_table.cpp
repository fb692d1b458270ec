#include "dispatch/implementation_table.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

namespace tileops::detail {

std::vector<std::string> check_implementation_table(std::string_view op,
                                                    const std::vector<InterfaceInfo>& interfaces,
                                                    const std::vector<ImplementationInfo>& table) {
  std::vector<std::string> problems;
  std::map<std::string, const ImplementationInfo*> by_key;
  for (const auto& impl : table) {
    if (!by_key.emplace(impl.key, &impl).second) {
      problems.push_back(fmt::format("{}: kernel key '{}' is declared twice", op, impl.key));
    }
    const bool declared = std::any_of(interfaces.begin(), interfaces.end(), [&](const auto& i) {
      return i.type == impl.interface_type;
    });
    if (!declared) {
      problems.push_back(fmt::format(
          "{}: implementation '{}' ({}) implements interface '{}', which {} does not declare", op,
          impl.key, impl.class_name, impl.interface_name, op));
    }
    if (impl.devices.empty()) {
      problems.push_back(fmt::format("{}: implementation '{}' declares no device", op, impl.key));
    }
  }
  for (const auto& iface : interfaces) {
    std::vector<const ImplementationInfo*> members;
    for (const auto& impl : table) {
      if (impl.interface_type == iface.type) members.push_back(&impl);
    }
    const auto generals = std::count_if(members.begin(), members.end(),
                                        [](const auto* m) { return m->general; });
    if (generals > 1) {
      problems.push_back(fmt::format("{}: interface '{}' has {} general implementations; at most one "
                                     "is allowed",
                                     op, iface.name, generals));
    }
    for (const auto* m : members) {
      if (m->general && !m->preferred_over.empty()) {
        problems.push_back(fmt::format(
            "{}: the general implementation '{}' may not declare preferred_over", op, m->key));
      }
      for (const auto& other : m->preferred_over) {
        const auto it = by_key.find(other);
        if (other == m->key) {
          problems.push_back(
              fmt::format("{}: implementation '{}' is preferred over itself", op, m->key));
        } else if (it == by_key.end() || it->second->interface_type != iface.type) {
          problems.push_back(fmt::format(
              "{}: implementation '{}' is preferred over '{}', which is not an implementation of "
              "interface '{}'",
              op, m->key, other, iface.name));
        }
      }
    }
    const auto closure = preference_closure(members);
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (closure[i][i]) {
        problems.push_back(fmt::format(
            "{}: preferred_over of interface '{}' has a cycle through '{}'", op, iface.name,
            members[i]->key));
        break;
      }
    }
  }
  return problems;
}

std::vector<std::vector<bool>> preference_closure(
    const std::vector<const ImplementationInfo*>& members) {
  const std::size_t n = members.size();
  std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
  for (std::size_t i = 0; i < n; ++i) {
    for (const auto& other : members[i]->preferred_over) {
      for (std::size_t j = 0; j < n; ++j) {
        if (members[j]->key == other) reach[i][j] = true;
      }
    }
  }
  for (std::size_t k = 0; k < n; ++k) {
    for (std::size_t i = 0; i < n; ++i) {
      if (!reach[i][k]) continue;
      for (std::size_t j = 0; j < n; ++j) {
        if (reach[k][j]) reach[i][j] = true;
      }
    }
  }
  return reach;
}

}  // namespace tileops::detail
