// Hardware profiles: datasheets, probes, and profiles saved by `tileops calibrate`.
#include "tileops/perf/hardware.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <system_error>
#include <variant>
#include <vector>

#include "core/json_text.h"
#include "kernels/cpu/parallel.h"
#include "perf/probe.h"
#include "tileops/core/cuda.h"
#include "tileops/core/error.h"

namespace tileops::perf {

// ---- roof keys ------------------------------------------------------------------------------

std::string normalize_roof_key(std::string_view roof_key) {
  static constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
      {"float64", "fp64"},    {"float32", "fp32"}, {"float16", "fp16"},
      {"bfloat16", "bf16"},   {"half", "fp16"},    {"float8_e4m3fn", "fp8"},
      {"float8_e5m2", "fp8"}, {"fp8_e4m3", "fp8"}, {"e4m3", "fp8"},
  };
  const auto dot = roof_key.rfind('.');
  if (dot == std::string_view::npos) return std::string(roof_key);
  const std::string_view suffix = roof_key.substr(dot + 1);
  for (const auto& [from, to] : kAliases) {
    if (suffix == from) return std::string(roof_key.substr(0, dot + 1)) + std::string(to);
  }
  return std::string(roof_key);
}

std::optional<double> HardwareProfile::peak_flops(std::string_view roof_key) const {
  const std::string key = normalize_roof_key(roof_key);
  if (auto it = flops_per_s.find(key); it != flops_per_s.end()) return it->second;
  const bool cpu = std::any_of(flops_per_s.begin(), flops_per_s.end(),
                               [](const auto& kv) { return kv.first.starts_with("cpu."); });
  if (cpu) {
    const auto dot = key.rfind('.');
    if (dot != std::string::npos) {
      if (auto it = flops_per_s.find("cpu." + key.substr(dot + 1)); it != flops_per_s.end()) {
        return it->second;
      }
    }
    if (auto it = flops_per_s.find("cpu.fp32"); it != flops_per_s.end()) return it->second;
  }
  return std::nullopt;
}

// ---- datasheets -----------------------------------------------------------------------------

HardwareProfile h200_datasheet_profile() {
  // NVIDIA H200 SXM (141 GB HBM3e): same GH100 compute as the H100 SXM (132 SMs). Dense figures
  // (no structured sparsity), from the H200 product brief and the H100 architecture whitepaper.
  HardwareProfile p;
  p.name = "NVIDIA H200";
  p.mem_bandwidth_bytes_per_s = 4.8e12;
  p.flops_per_s = {
      {"cuda_core.fp64", 33.5e12},    {"cuda_core.fp32", 66.9e12},
      {"cuda_core.fp16", 133.8e12},   {"cuda_core.bf16", 133.8e12},
      {"tensor_core.fp64", 66.9e12},  {"tensor_core.tf32", 494.7e12},
      {"tensor_core.fp16", 989.4e12}, {"tensor_core.bf16", 989.4e12},
      {"tensor_core.fp8", 1978.9e12}, {"tensor_core.int8", 1978.9e12},
  };
  p.source = "datasheet";
  return p;
}

namespace {

/// A datasheet for a GPU name, when we have one.
std::optional<HardwareProfile> datasheet_for(std::string_view gpu_name) {
  if (gpu_name.find("H200") != std::string_view::npos) return h200_datasheet_profile();
  return std::nullopt;
}

std::string today_utc() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("model name")) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(colon + 1);
        name.erase(0, name.find_first_not_of(" \t"));
        return name;
      }
    }
  }
  return "cpu";
}

}  // namespace

// ---- probes ---------------------------------------------------------------------------------

HardwareProfile measure_cpu_profile(ProbeEffort effort) {
  const bool careful = effort == ProbeEffort::careful;
  HardwareProfile p;
  const auto threads = cpu::cpu_threads();  // those of the kernels' parallel loops
  p.name = fmt::format("{} ({} threads)", cpu_model_name(), threads);
  p.mem_bandwidth_bytes_per_s = detail::measure_cpu_copy_bandwidth(
      careful ? (std::size_t{512} << 20) : (std::size_t{64} << 20), careful ? 10 : 3);
  p.flops_per_s["cpu.fp32"] = detail::measure_cpu_fp32_rate(careful ? 20'000'000L : 1'000'000L);
  p.source = careful ? "measured " + today_utc() + " (tileops calibrate: memcpy, fp32 mul-add loop)"
                     : "probe at first use (memcpy, fp32 mul-add loop; run `tileops calibrate`)";
  return p;
}

HardwareProfile measure_cuda_profile(int device, ProbeEffort effort) {
#if TILEOPS_WITH_CUDA
  const bool careful = effort == ProbeEffort::careful;
  const CudaDeviceProperties& props = cuda_device_properties(device);
  HardwareProfile p = datasheet_for(props.name).value_or(HardwareProfile{});
  const bool has_datasheet = !p.flops_per_s.empty();
  p.name = props.name;
  const std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(
      careful ? (std::int64_t{1} << 30) : (std::int64_t{256} << 20), 8 * props.l2_bytes));
  p.mem_bandwidth_bytes_per_s =
      detail::measure_cuda_copy_bandwidth(device, bytes, careful ? 20 : 3);
  p.flops_per_s["cuda_core.fp32"] = detail::measure_cuda_fp32_rate(device, careful ? 10 : 2);
  const std::string what = "device copy bandwidth, cuda_core.fp32 FMA kernel";
  p.source = (careful ? "measured " + today_utc() : std::string("probe at first use")) + " (" +
             what + (has_datasheet ? "; other peaks from the datasheet)" : ")");
  return p;
#else
  (void)device;
  (void)effort;
  throw UsageError("measure_cuda_profile: tileops was built without CUDA");
#endif
}

// ---- files ----------------------------------------------------------------------------------

std::filesystem::path profile_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    return std::filesystem::path(xdg) / "tileops";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::filesystem::path(home) / ".cache" / "tileops";
  }
  return std::filesystem::path(".tileops-cache");
}

std::string saved_profile_key(Device device) {
  if (device.is_cpu()) return "cpu";
  std::string key = "cuda-" + cuda_device_properties(device.index).name;
  for (char& c : key) {
    const auto u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || c == '.' || c == '_' || c == '-')) c = '_';
  }
  return key;
}

std::filesystem::path saved_profile_path(std::string_view key) {
  return profile_cache_dir() / ("hardware-" + std::string(key) + ".json");
}

namespace {

/// A minimal JSON reader for the profile format: objects, strings, numbers, true/false/null.
/// Arrays are accepted and skipped.
class JsonReader {
 public:
  struct Node;
  using Object = std::vector<std::pair<std::string, std::unique_ptr<Node>>>;
  struct Node {
    std::variant<std::monostate, bool, double, std::string, Object> value;
  };

  explicit JsonReader(std::string_view text) : text_(text) {}

  std::unique_ptr<Node> parse_document() {
    auto node = parse_value(0);
    skip_space();
    if (pos_ != text_.size()) fail("trailing characters");
    return node;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw std::runtime_error(fmt::format("{} at offset {}", what, pos_));
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(fmt::format("expected '{}'", c));
  }

  std::unique_ptr<Node> parse_value(int depth) {
    if (depth > 32) fail("nesting too deep");
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end of input");
    auto node = std::make_unique<Node>();
    const char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      Object obj;
      if (!consume('}')) {
        do {
          skip_space();
          std::string key = parse_string();
          expect(':');
          obj.emplace_back(std::move(key), parse_value(depth + 1));
        } while (consume(','));
        expect('}');
      }
      node->value = std::move(obj);
    } else if (c == '[') {
      ++pos_;
      if (!consume(']')) {
        do {
          parse_value(depth + 1);
        } while (consume(','));
        expect(']');
      }
    } else if (c == '"') {
      node->value = parse_string();
    } else if (text_.substr(pos_).starts_with("true")) {
      pos_ += 4;
      node->value = true;
    } else if (text_.substr(pos_).starts_with("false")) {
      pos_ += 5;
      node->value = false;
    } else if (text_.substr(pos_).starts_with("null")) {
      pos_ += 4;
    } else {
      node->value = parse_number();
    }
    return node;
  }

  std::string parse_string() {
    if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a string");
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          if (pos_ + 4 > text_.size()) fail("bad \\u escape");
          unsigned code = 0;
          const auto r = std::from_chars(text_.data() + pos_, text_.data() + pos_ + 4, code, 16);
          if (r.ec != std::errc() || r.ptr != text_.data() + pos_ + 4) fail("bad \\u escape");
          pos_ += 4;
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
          }
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }

  double parse_number() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isdigit(static_cast<unsigned char>(text_[pos_])) ||
            std::string_view("+-.eE").find(text_[pos_]) != std::string_view::npos)) {
      ++pos_;
    }
    if (start == pos_) fail("unexpected character");
    const std::string token(text_.substr(start, pos_ - start));
    char* end = nullptr;
    const double v = std::strtod(token.c_str(), &end);
    if (end != token.c_str() + token.size()) fail("bad number '" + token + "'");
    return v;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

std::string profile_to_json(const HardwareProfile& profile) {
  std::string out = "{\n";
  out += "  \"format\": \"tileops-hardware-profile-1\",\n";
  out += "  \"name\": " + json_string(profile.name) + ",\n";
  out += "  \"source\": " + json_string(profile.source) + ",\n";
  out += fmt::format("  \"mem_bandwidth_bytes_per_s\": {},\n", profile.mem_bandwidth_bytes_per_s);
  out += "  \"flops_per_s\": {";
  bool first = true;
  for (const auto& [key, value] : profile.flops_per_s) {
    out += fmt::format("{}\n    {}: {}", first ? "" : ",", json_string(key), value);
    first = false;
  }
  out += first ? "}\n" : "\n  }\n";
  out += "}\n";
  return out;
}

std::optional<HardwareProfile> profile_from_json(std::string_view text, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<HardwareProfile> {
    if (error != nullptr) *error = std::move(why);
    return std::nullopt;
  };
  std::unique_ptr<JsonReader::Node> root;
  try {
    root = JsonReader(text).parse_document();
  } catch (const std::exception& e) {
    return fail(std::string("malformed JSON: ") + e.what());
  }
  const auto* obj = std::get_if<JsonReader::Object>(&root->value);
  if (obj == nullptr) return fail("the document is not a JSON object");
  HardwareProfile p;
  bool has_bandwidth = false;
  for (const auto& [key, node] : *obj) {
    if (key == "name" || key == "source" || key == "format") {
      const auto* s = std::get_if<std::string>(&node->value);
      if (s == nullptr) return fail("'" + key + "' is not a string");
      if (key == "name") p.name = *s;
      if (key == "source") p.source = *s;
      if (key == "format" && *s != "tileops-hardware-profile-1") {
        return fail("unknown format '" + *s + "'");
      }
    } else if (key == "mem_bandwidth_bytes_per_s") {
      const auto* d = std::get_if<double>(&node->value);
      if (d == nullptr || !std::isfinite(*d) || !(*d > 0)) {
        return fail("'mem_bandwidth_bytes_per_s' is not a positive number");
      }
      p.mem_bandwidth_bytes_per_s = *d;
      has_bandwidth = true;
    } else if (key == "flops_per_s") {
      const auto* rates = std::get_if<JsonReader::Object>(&node->value);
      if (rates == nullptr) return fail("'flops_per_s' is not an object");
      for (const auto& [roof_key, rate] : *rates) {
        const auto* d = std::get_if<double>(&rate->value);
        if (d == nullptr || !std::isfinite(*d) || !(*d > 0)) {
          return fail("'flops_per_s." + roof_key + "' is not a positive number");
        }
        p.flops_per_s[roof_key] = *d;
      }
    }
    // Unknown keys are ignored (files written by newer versions).
  }
  if (!has_bandwidth) return fail("'mem_bandwidth_bytes_per_s' is missing");
  if (p.name.empty()) return fail("'name' is missing");
  return p;
}

void save_profile(const HardwareProfile& profile, const std::filesystem::path& path) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) {
    throw UsageError(
        fmt::format("cannot create {}: {}", path.parent_path().string(), ec.message()));
  }
  std::filesystem::path tmp = path;
  tmp += fmt::format(".tmp{}", static_cast<long>(::getpid()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << profile_to_json(profile);
    out.close();
    if (!out) throw UsageError(fmt::format("cannot write {}", tmp.string()));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw UsageError(fmt::format("cannot write {}", path.string()));
  }
}

std::optional<HardwareProfile> load_profile(const std::filesystem::path& path,
                                            std::string* warning) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (warning != nullptr) *warning = "cannot be opened";
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string error;
  auto profile = profile_from_json(text.str(), &error);
  if (!profile && warning != nullptr) *warning = error;
  return profile;
}

std::optional<HardwareProfile> load_saved_profile(std::string_view key) {
  const std::filesystem::path path = saved_profile_path(key);
  std::string warning;
  auto profile = load_profile(path, &warning);
  if (!profile && !warning.empty()) {
    std::cerr << "tileops: warning: ignoring hardware profile " << path.string() << ": " << warning
              << "\n";
  }
  return profile;
}

// ---- the profile of a device ----------------------------------------------------------------

const HardwareProfile& profile_for(Device device) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<const HardwareProfile>> profiles;
  if (device.is_cuda() && !cuda_available()) {
    throw UsageError("profile_for(" + device.str() + "): no CUDA device is available" +
#if TILEOPS_WITH_CUDA
                     std::string()
#else
                     std::string(" (tileops was built without CUDA)")
#endif
    );
  }
  std::lock_guard lock(mutex);
  const std::string id = device.str();
  if (auto it = profiles.find(id); it != profiles.end()) return *it->second;
  std::optional<HardwareProfile> profile = load_saved_profile(saved_profile_key(device));
  if (!profile) {
    if (device.is_cpu()) {
      profile = measure_cpu_profile(ProbeEffort::quick);
    } else {
      profile = datasheet_for(cuda_device_properties(device.index).name);
      if (!profile) profile = measure_cuda_profile(device.index, ProbeEffort::quick);
    }
  }
  return *profiles.emplace(id, std::make_unique<const HardwareProfile>(std::move(*profile)))
              .first->second;
}

}  // namespace tileops::perf
