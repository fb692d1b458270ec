// Writes a generated file only when its contents change, so that builds stay incremental.
#pragma once

#include <string>

namespace tgen {

/// Writes `content` to `path` (creating folders) unless the file already holds exactly it.
/// Returns true when the file was written; throws std::runtime_error on I/O failure.
bool write_if_changed(const std::string& path, const std::string& content);

}  // namespace tgen
