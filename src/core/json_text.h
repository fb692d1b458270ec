// A string as a JSON string literal: quotes, backslash escapes, \u00XX for other control
// characters. One implementation for the library (hardware profiles), the `tileops` command's
// JSON output and tileops-gen's emitted manifest description.
#pragma once

#include <string>
#include <string_view>

namespace tileops {

std::string json_string(std::string_view s);

}  // namespace tileops
