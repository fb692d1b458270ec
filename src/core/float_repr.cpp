#include "core/float_repr.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tileops {

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  const char* e = std::strchr(buf, 'e');
  const int exp = e ? std::atoi(e + 1) : 0;
  if (exp >= -4 && exp < 16) {
    std::snprintf(buf, sizeof buf, "%.*f", std::max(prec - 1 - exp, 1), v);
  }
  return buf;
}

}  // namespace tileops
