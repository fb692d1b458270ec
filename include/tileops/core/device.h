// Where a tensor lives: the host (cpu) or a CUDA device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace tileops {

struct Device {
  enum class Type : std::uint8_t { cpu, cuda };

  Type type = Type::cpu;
  int index = 0;  // always 0 for cpu

  static constexpr Device cpu() noexcept { return Device{}; }
  /// A CUDA device; SignatureError for a negative index. Whether the device exists is checked
  /// where memory is allocated (UsageError), not here.
  static Device cuda(int index = 0);

  constexpr bool is_cpu() const noexcept { return type == Type::cpu; }
  constexpr bool is_cuda() const noexcept { return type == Type::cuda; }

  /// "cpu", "cuda:0", "cuda:1", ...
  std::string str() const;

  /// Parses "cpu", "cuda" (device 0) or "cuda:<n>"; SignatureError for anything else
  /// (including "cpu:0", "cuda:", "cuda:-1", "cuda:01x", surrounding spaces).
  static Device parse(std::string_view text);

  friend constexpr bool operator==(const Device&, const Device&) = default;
};

}  // namespace tileops

template <>
struct std::hash<tileops::Device> {
  std::size_t operator()(const tileops::Device& d) const noexcept {
    return std::hash<int>{}(d.index * 2 + static_cast<int>(d.type));
  }
};
