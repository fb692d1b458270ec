// Backend plugins: shared libraries named in TILEOPS_BACKENDS (':'-separated), loaded once per
// process in sorted order. A plugin exports `extern "C" void tileops_backend_register()`, which
// makes its registrations; when loading fails, the symbol is missing or registration throws,
// every registration the plugin made is rolled back and the reason is kept in load_failures().
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>

#include <fmt/format.h>

#include "target/registry_state.h"
#include "tileops/target/target.h"

namespace tileops {
namespace {

std::vector<std::string> plugin_paths() {
  const char* env = std::getenv("TILEOPS_BACKENDS");
  std::vector<std::string> paths;
  if (env == nullptr) return paths;
  std::stringstream stream(env);
  std::string item;
  while (std::getline(stream, item, ':')) {
    if (!item.empty()) paths.push_back(item);
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

void roll_back(const detail::Registrations& made) {
  auto& state = detail::registry_state();
  std::lock_guard lock(state.mutex);
  for (const auto& name : made.detectors) state.detectors.erase(name);
  for (const auto& key : made.builders) state.builders.erase(key);
}

void load_plugin(const std::string& path) {
  auto& state = detail::registry_state();
  detail::Registrations made;
  {
    std::lock_guard lock(state.mutex);
    state.recording = &made;
  }
  std::string failure;
  try {
    // RTLD_NODELETE keeps registered callables valid for the life of the process.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle == nullptr) {
      const char* err = dlerror();
      failure = err != nullptr ? err : "dlopen failed";
    } else {
      using RegisterFn = void (*)();
      auto* fn = reinterpret_cast<RegisterFn>(dlsym(handle, "tileops_backend_register"));
      if (fn == nullptr) {
        failure = "the library exports no tileops_backend_register()";
      } else {
        fn();
      }
    }
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "tileops_backend_register() threw a non-standard exception";
  }
  {
    std::lock_guard lock(state.mutex);
    state.recording = nullptr;
  }
  if (!failure.empty()) {
    roll_back(made);
    std::lock_guard lock(state.mutex);
    state.load_failures.push_back(fmt::format("{}: {}", path, failure));
    std::cerr << "tileops: warning: backend plugin " << path << " failed to load (" << failure
              << "); its registrations were rolled back\n";
  }
}

}  // namespace

void load_backends() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const auto& path : plugin_paths()) load_plugin(path);
  });
}

}  // namespace tileops
