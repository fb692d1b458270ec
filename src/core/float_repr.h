// Python's repr of a float: the shortest text that reads back the same value, fixed-point when
// the exponent is in [-4, 16) ("10000.0", "2.5", "0.0001"), scientific otherwise ("1e-06").
// One implementation for the library's messages and tileops-gen's emitted text.
#pragma once

#include <string>

namespace tileops {

std::string float_repr(double v);

}  // namespace tileops
