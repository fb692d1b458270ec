#include "tileops/op/reference.h"

#include <cmath>
#include <limits>
#include <map>
#include <mutex>

#include "tileops/core/error.h"

namespace tileops {
namespace {

struct ReferenceRegistry {
  std::mutex mutex;
  std::map<std::string, ReferenceFn, std::less<>> by_op;
};

ReferenceRegistry& references() {
  static ReferenceRegistry registry;
  return registry;
}

}  // namespace

void register_reference(std::string op, ReferenceFn fn) {
  auto& registry = references();
  std::lock_guard lock(registry.mutex);
  registry.by_op[std::move(op)] = std::move(fn);
}

const ReferenceFn* find_reference(std::string_view op) {
  auto& registry = references();
  std::lock_guard lock(registry.mutex);
  const auto it = registry.by_op.find(op);
  return it == registry.by_op.end() ? nullptr : &it->second;
}

double tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return 1e-5;
    case DType::float16:
      return 1e-3;
    case DType::bfloat16:
      return 1.6e-2;
    case DType::float8_e4m3fn:
      return 1.25e-1;
    case DType::float64:
      return 1e-12;
    default:
      return 0.0;
  }
}

double max_relative_error(const Tensor& got, const Tensor& ref) {
  if (got.sizes() != ref.sizes()) return std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> g = got.to(Device::cpu()).to_vector();
  const std::vector<double> r = ref.to(Device::cpu()).to_vector();
  double worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(r[i])) {
      if (!std::isnan(g[i])) return std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    if (std::isnan(g[i])) return std::numeric_limits<double>::quiet_NaN();
    if (std::isinf(r[i]) || std::isinf(g[i])) {
      if (g[i] != r[i]) return std::numeric_limits<double>::infinity();
      continue;
    }
    worst = std::max(worst, std::abs(g[i] - r[i]) / (1.0 + std::abs(r[i])));
  }
  return worst;
}

}  // namespace tileops
