// The target registry: detectors, kernel builders, the process default target.
#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "target/registry_state.h"
#include "tileops/core/error.h"
#include "tileops/target/target.h"

namespace tileops {

Target::Target(std::string name) : kind_(Kind::named), name_(std::move(name)) {
  if (name_ == kBuiltinTargetName) kind_ = Kind::builtin;
  if (name_.empty()) kind_ = Kind::unset;
}

Target Target::builtin() { return Target(std::string(kBuiltinTargetName)); }

namespace detail {

RegistryState& registry_state() {
  static RegistryState state;
  return state;
}

}  // namespace detail

using detail::registry_state;

void register_detector(std::string target, Detector detect) {
  if (target.empty() || target == kBuiltinTargetName) {
    throw BackendError(fmt::format("register_detector: '{}' cannot name a target", target));
  }
  if (!detect) throw BackendError(fmt::format("register_detector: empty detector for '{}'", target));
  auto& state = registry_state();
  std::lock_guard lock(state.mutex);
  if (state.detectors.count(target) != 0) {
    throw BackendError(fmt::format("register_detector: target '{}' already has a detector", target));
  }
  state.detectors.emplace(target, std::move(detect));
  if (state.recording) state.recording->detectors.push_back(target);
}

void register_kernel_builder(std::string op, std::string target, KernelBuilder build) {
  if (target.empty() || target == kBuiltinTargetName) {
    throw BackendError(fmt::format("register_kernel_builder: '{}' cannot name a target", target));
  }
  if (!build) {
    throw BackendError(fmt::format("register_kernel_builder: empty builder for {} on '{}'", op, target));
  }
  auto& state = registry_state();
  std::lock_guard lock(state.mutex);
  auto key = std::make_pair(op, target);
  if (state.builders.count(key) != 0) {
    throw BackendError(fmt::format(
        "register_kernel_builder: target '{}' already registered a builder for {}", target, op));
  }
  state.builders.emplace(key, std::move(build));
  if (state.recording) state.recording->builders.push_back(std::move(key));
}

void set_default_target(Target target) {
  auto& state = registry_state();
  std::lock_guard lock(state.mutex);
  state.default_target = std::move(target);
}

Target default_target() {
  auto& state = registry_state();
  std::lock_guard lock(state.mutex);
  return state.default_target;
}

std::vector<std::string> registered_targets(std::optional<std::string_view> op) {
  auto& state = registry_state();
  std::lock_guard lock(state.mutex);
  std::set<std::string> names;
  for (const auto& [key, builder] : state.builders) {
    if (!op || key.first == *op) names.insert(key.second);
  }
  if (!op) {
    for (const auto& [name, detect] : state.detectors) names.insert(name);
  }
  return {names.begin(), names.end()};
}

std::vector<std::string> load_failures() {
  auto& state = registry_state();
  std::lock_guard lock(state.mutex);
  return state.load_failures;
}

namespace detail {

const KernelBuilder* find_kernel_builder(std::string_view op, std::string_view target) {
  auto& state = registry_state();
  std::lock_guard lock(state.mutex);
  const auto it = state.builders.find(std::make_pair(std::string(op), std::string(target)));
  // std::map nodes are stable: the pointer stays valid until the registration is removed.
  return it == state.builders.end() ? nullptr : &it->second;
}

bool target_registered(std::string_view target) {
  auto& state = registry_state();
  std::lock_guard lock(state.mutex);
  if (state.detectors.count(std::string(target)) != 0) return true;
  return std::any_of(state.builders.begin(), state.builders.end(),
                     [&](const auto& entry) { return entry.first.second == target; });
}

std::vector<std::string> detect_targets(const Device& device) {
  std::vector<std::pair<std::string, Detector>> detectors;
  {
    auto& state = registry_state();
    std::lock_guard lock(state.mutex);
    detectors.assign(state.detectors.begin(), state.detectors.end());
  }
  std::vector<std::string> claims;
  for (const auto& [name, detect] : detectors) {
    bool claimed = false;
    try {
      claimed = detect(device);
    } catch (...) {
      claimed = false;  // a detector never raises; one that does claims nothing
    }
    if (claimed) claims.push_back(name);
  }
  return claims;
}

void reset_registry_for_tests() {
  auto& state = registry_state();
  std::lock_guard lock(state.mutex);
  state.detectors.clear();
  state.builders.clear();
  state.default_target = Target();
  state.load_failures.clear();
}

}  // namespace detail
}  // namespace tileops
