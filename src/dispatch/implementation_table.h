// Internal: the contracts of an implementation table (docs/design/op-base.md, "Kernel selection").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tileops/dispatch/kernel.h"

namespace tileops::detail {

/// Checks the table against the op's interfaces: each implementation belongs to a declared
/// interface, keys are unique, at most one `general` per interface, `preferred_over` names only
/// other keys of the same interface and never comes from the general one, and the preferences
/// have no cycle. Returns one message per broken contract.
std::vector<std::string> check_implementation_table(std::string_view op,
                                                    const std::vector<InterfaceInfo>& interfaces,
                                                    const std::vector<ImplementationInfo>& table);

/// For each implementation (by position in `members`), the positions it is preferred over,
/// transitively. `members` are the implementations of one interface.
std::vector<std::vector<bool>> preference_closure(
    const std::vector<const ImplementationInfo*>& members);

}  // namespace tileops::detail
