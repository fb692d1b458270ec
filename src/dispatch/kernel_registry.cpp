// Kernel types registered by backends (register_kernel_type), the interfaces a kernel table
// implements, and the device-facts cache.
#include <algorithm>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "tileops/core/cuda.h"
#include "tileops/core/error.h"
#include "tileops/dispatch/kernel.h"

namespace tileops {
namespace {

struct KernelTypeRegistry {
  std::mutex mutex;
  std::map<std::string, std::vector<ImplementationInfo>, std::less<>> by_op;
};

KernelTypeRegistry& kernel_types() {
  static KernelTypeRegistry registry;
  return registry;
}

}  // namespace

std::vector<InterfaceInfo> interfaces_of(const std::vector<ImplementationInfo>& table) {
  std::vector<InterfaceInfo> out;
  for (const auto& impl : table) {
    const bool seen = std::any_of(out.begin(), out.end(), [&](const InterfaceInfo& i) {
      return i.type == impl.interface_type;
    });
    if (!seen) out.push_back({impl.interface_name, impl.interface_type, impl.request_type});
  }
  return out;
}

void register_kernel_type(std::string op, ImplementationInfo implementation) {
  auto& registry = kernel_types();
  std::lock_guard lock(registry.mutex);
  auto& list = registry.by_op[op];
  const bool duplicate = std::any_of(list.begin(), list.end(), [&](const auto& existing) {
    return existing.key == implementation.key;
  });
  if (duplicate) {
    throw BackendError(fmt::format("register_kernel_type: {} already has a registered kernel type "
                                   "'{}'",
                                   op, implementation.key));
  }
  if (implementation.source == "in-tree") implementation.source = "backend";
  list.push_back(std::move(implementation));
}

std::vector<ImplementationInfo> registered_kernel_types(std::string_view op) {
  auto& registry = kernel_types();
  std::lock_guard lock(registry.mutex);
  const auto it = registry.by_op.find(op);
  return it == registry.by_op.end() ? std::vector<ImplementationInfo>{} : it->second;
}

namespace detail {

void reset_kernel_types_for_tests() {
  auto& registry = kernel_types();
  std::lock_guard lock(registry.mutex);
  registry.by_op.clear();
}

DeviceFacts device_facts(const Device& device) {
  if (!device.is_cuda()) return DeviceFacts{};
  const auto& props = cuda_device_properties(device.index);
  return DeviceFacts{props.major * 10 + props.minor, props.sm_count,
                     props.shared_mem_per_block_optin};
}

}  // namespace detail
}  // namespace tileops
