// Internal: tuning of CUDA kernels by timing their candidate configurations on the call's real
// arguments, with a persistent tuning database so a configuration is timed once per GPU,
// driver, library version and kernel identity.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tileops {

/// "<kernel>|<identity>": the kernel part of a tuning-database key (the GPU, driver and library
/// version are added by tune_by_timing).
std::string tuning_key(std::string_view kernel, std::string_view identity);

/// Returns the position of the fastest candidate. Looks the key up in the tuning database first;
/// otherwise times each candidate (`launch(i)` enqueues candidate i on `stream`) with CUDA events
/// (warm-up, then the median of several runs), records the winner and saves the database.
std::size_t tune_by_timing(const std::string& key, const std::vector<std::string>& candidates,
                           int device, void* stream,
                           const std::function<void(std::size_t)>& launch);

namespace tuning_db {
/// The database file: $TILEOPS_TUNING_DB, else $XDG_CACHE_HOME/tileops/tuning.tsv, else
/// ~/.cache/tileops/tuning.tsv.
std::string path();
/// The stored winner for a full key, if any. A corrupt file is ignored with a warning.
std::optional<std::string> lookup(const std::string& full_key);
/// Stores a winner and rewrites the file atomically (temporary file + rename).
void store(const std::string& full_key, const std::string& config);
}  // namespace tuning_db

}  // namespace tileops
