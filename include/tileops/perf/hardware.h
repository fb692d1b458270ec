// Hardware profiles: the peak copy bandwidth and compute rates a roofline is measured against
// (docs/perf/README.md). A profile is either a datasheet (the H200), a measurement saved by
// `tileops calibrate`, or, for a device with neither, a quick probe run at first use.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "tileops/core/device.h"

namespace tileops::perf {

struct HardwareProfile {
  /// "NVIDIA H200", "cpu (16 threads)".
  std::string name;
  /// Peak sustainable memory bandwidth (device memory for a GPU, DRAM for the CPU), bytes/s,
  /// counting bytes read plus bytes written.
  double mem_bandwidth_bytes_per_s = 0;
  /// Peak arithmetic rate by roof key: "cuda_core.fp32", "tensor_core.bf16", "cpu.fp32", ...
  std::map<std::string, double, std::less<>> flops_per_s;
  /// Where the figures come from: "datasheet", "measured 2026-01-31 (...)", "probe at first use".
  std::string source;

  /// The peak for `roof_key`. Dtype suffixes are normalised ("tensor_core.bfloat16" is
  /// "tensor_core.bf16"). A profile with a "cpu.*" entry prices every key on the CPU: the key's
  /// own "cpu.<dtype>" entry when present, else "cpu.fp32" (the CPU kernels compute in fp32).
  /// nullopt when the profile has no figure for the key.
  std::optional<double> peak_flops(std::string_view roof_key) const;

  friend bool operator==(const HardwareProfile&, const HardwareProfile&) = default;
};

/// "tensor_core.bfloat16" -> "tensor_core.bf16"; keys already in short form are unchanged.
std::string normalize_roof_key(std::string_view roof_key);

/// The profile of `device`, computed once per device and process (thread-safe):
///   1. a profile saved by `tileops calibrate` for this device (see saved_profile_key), unless
///      the file is unreadable or corrupt (then a warning on stderr and it is ignored);
///   2. else a datasheet profile when the GPU is one we know (the H200);
///   3. else a quick probe (CPU: ~0.1 s of memcpy and FMA loops; GPU: device copies and an FMA
///      kernel), not saved.
/// UsageError for a CUDA device in a build or on a machine without CUDA.
const HardwareProfile& profile_for(Device device);

/// The NVIDIA H200 SXM datasheet: 4.8 TB/s HBM3e; dense tensor-core and CUDA-core peaks.
HardwareProfile h200_datasheet_profile();

/// How thoroughly to measure.
enum class ProbeEffort { quick, careful };

/// Measures the CPU: multi-threaded memcpy bandwidth and a multi-threaded fp32 FMA loop.
HardwareProfile measure_cpu_profile(ProbeEffort effort);
/// Measures a CUDA device: device-to-device copy bandwidth and an fp32 FMA kernel; for a GPU
/// with a datasheet, its tensor-core figures are kept from the datasheet (not measured).
/// UsageError without CUDA.
HardwareProfile measure_cuda_profile(int device, ProbeEffort effort);

/// The directory profiles are saved in: $XDG_CACHE_HOME/tileops, else $HOME/.cache/tileops,
/// else ./.tileops-cache.
std::filesystem::path profile_cache_dir();
/// The key a device's saved profile is filed under: "cpu", or "cuda-<GPU name>" with every
/// character outside [A-Za-z0-9._-] replaced by '_' ("cuda-NVIDIA_H200").
std::string saved_profile_key(Device device);
/// profile_cache_dir() / ("hardware-" + key + ".json").
std::filesystem::path saved_profile_path(std::string_view key);

/// The profile as a small JSON document (one object; see docs/perf/README.md).
std::string profile_to_json(const HardwareProfile& profile);
/// Parses profile_to_json's format; nullopt with `error` set when the text is not a valid
/// profile (malformed JSON, missing or non-positive bandwidth, wrong types).
std::optional<HardwareProfile> profile_from_json(std::string_view text, std::string* error);

/// Writes the profile to `path` (creating directories; written to a temporary file and renamed).
/// UsageError when the file cannot be written.
void save_profile(const HardwareProfile& profile, const std::filesystem::path& path);
/// Reads a profile file: nullopt when the file does not exist (no warning); nullopt with
/// `warning` set when it exists but cannot be read or parsed.
std::optional<HardwareProfile> load_profile(const std::filesystem::path& path,
                                            std::string* warning);
/// The saved profile filed under `key`, or nullopt; a corrupt file is ignored with a warning
/// printed on stderr ("tileops: warning: ignoring hardware profile <path>: <why>").
std::optional<HardwareProfile> load_saved_profile(std::string_view key);

}  // namespace tileops::perf
