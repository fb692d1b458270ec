// Internal: what every tuned CUDA adapter shares. TunedConfigs keeps the configuration chosen for
// each shape key (the kernel's default the first time a key is seen; in tuned mode, the winner of
// timing its candidates, once) and the text config() reports; tune_among times candidates on the
// call's real arguments through the tuning database (cuda_tuning.h). An adapter keeps only what is
// its kernel's own: the arguments, the default, the candidates and a launch.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/common/cuda_tuning.h"

namespace tileops {

/// The candidate of `space` that runs fastest when `launch(config)` enqueues it on `stream`,
/// looked up in (or recorded into) the tuning database under `kernel` and `identity`.
template <class Config, class Launch>
Config tune_among(std::string_view kernel, std::string_view identity,
                  const std::vector<Config>& space, int device, void* stream, Launch&& launch) {
  std::vector<std::string> names;
  names.reserve(space.size());
  for (const Config& c : space) names.push_back(c.str());
  const std::size_t best = tune_by_timing(tuning_key(kernel, identity), names, device, stream,
                                          [&](std::size_t i) { launch(space[i]); });
  return space.at(best);
}

/// The configuration chosen per shape key. Thread-safe; a key is tuned once, under the lock (calls
/// of other keys wait meanwhile, as tuning times the device anyway).
template <class Key, class Config>
class TunedConfigs {
 public:
  /// The configuration for `key`: `make_default()` the first time; when `tune` is true and the
  /// key is not tuned yet, `tune_now()` (which times the candidates) replaces it.
  template <class MakeDefault, class TuneNow>
  Config choose(const Key& key, bool tune, MakeDefault&& make_default, TuneNow&& tune_now) {
    std::lock_guard lock(mutex_);
    last_ = key;
    auto it = by_key_.find(key);
    if (it == by_key_.end()) it = by_key_.emplace(key, Choice{make_default(), false}).first;
    if (tune && !it->second.tuned) it->second = Choice{tune_now(), true};
    return it->second.config;
  }

  /// Makes `config` the choice for `key` (untuned) and `key` the last one chosen, so that config()
  /// reports the default before the first call.
  void preset(const Key& key, Config config) {
    std::lock_guard lock(mutex_);
    by_key_.insert_or_assign(key, Choice{std::move(config), false});
    last_ = key;
  }

  /// "<config>" or "<config> (tuned)" of the key chosen last; empty before any.
  std::string describe() const {
    std::lock_guard lock(mutex_);
    if (!last_) return {};
    const Choice& c = by_key_.at(*last_);
    return c.config.str() + (c.tuned ? " (tuned)" : "");
  }

  /// The key chosen last, if any.
  std::optional<Key> last_key() const {
    std::lock_guard lock(mutex_);
    return last_;
  }

 private:
  struct Choice {
    Config config;
    bool tuned = false;
  };
  mutable std::mutex mutex_;
  std::map<Key, Choice> by_key_;
  std::optional<Key> last_;
};

}  // namespace tileops
