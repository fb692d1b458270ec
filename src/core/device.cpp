#include "tileops/core/device.h"

#include <charconv>
#include <string>

#include "tileops/core/error.h"

namespace tileops {

Device Device::cuda(int index) {
  if (index < 0) {
    throw SignatureError("Device::cuda: device index must be >= 0, got " + std::to_string(index));
  }
  return Device{Type::cuda, index};
}

std::string Device::str() const {
  if (is_cpu()) return "cpu";
  return "cuda:" + std::to_string(index);
}

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  constexpr std::string_view prefix = "cuda:";
  if (text.size() > prefix.size() && text.substr(0, prefix.size()) == prefix) {
    const std::string_view digits = text.substr(prefix.size());
    int index = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc{} && end == digits.data() + digits.size() && digits.front() != '-' &&
        digits.front() != '+') {
      return cuda(index);
    }
  }
  throw SignatureError("Device::parse: cannot parse '" + std::string(text) +
                       "' as a device (expected \"cpu\", \"cuda\" or \"cuda:<index>\")");
}

}  // namespace tileops
