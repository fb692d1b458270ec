// Internal: the state behind the target registry, shared with the plugin loader (which records
// a plugin's registrations so that a failed plugin is rolled back whole).
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tileops/target/target.h"

namespace tileops::detail {

struct Registrations {
  std::vector<std::string> detectors;
  std::vector<std::pair<std::string, std::string>> builders;
};

struct RegistryState {
  std::mutex mutex;
  std::map<std::string, Detector, std::less<>> detectors;
  std::map<std::pair<std::string, std::string>, KernelBuilder> builders;  // (op, target)
  Target default_target;
  std::vector<std::string> load_failures;
  Registrations* recording = nullptr;  // set while a plugin loads
};

RegistryState& registry_state();

}  // namespace tileops::detail
