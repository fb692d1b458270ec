#include "tileops/base/reference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <random>

#include "tileops/core/error.h"

namespace tileops {
namespace {

template <class Fn>
struct Registry {
  std::mutex mutex;
  std::map<std::string, Fn, std::less<>> by_op;

  void add(std::string op, Fn fn) {
    std::lock_guard lock(mutex);
    by_op[std::move(op)] = std::move(fn);
  }
  const Fn* find(std::string_view op) {
    std::lock_guard lock(mutex);
    const auto it = by_op.find(op);
    return it == by_op.end() ? nullptr : &it->second;
  }
};

Registry<ReferenceFn>& references() {
  static Registry<ReferenceFn> registry;
  return registry;
}

Registry<SampledReferenceFn>& sampled_references() {
  static Registry<SampledReferenceFn> registry;
  return registry;
}

Registry<std::vector<int>>& sampled_row_dims() {
  static Registry<std::vector<int>> registry;
  return registry;
}

Registry<WorkloadInputsFn>& workload_inputs() {
  static Registry<WorkloadInputsFn> registry;
  return registry;
}

}  // namespace

void register_reference(std::string op, ReferenceFn fn) {
  references().add(std::move(op), std::move(fn));
}

const ReferenceFn* find_reference(std::string_view op) {
  return references().find(op);
}

void register_sampled_reference(std::string op, SampledReferenceFn fn) {
  sampled_references().add(std::move(op), std::move(fn));
}

void register_sampled_reference(std::string op, SampledReferenceFn fn, std::vector<int> row_dims) {
  sampled_row_dims().add(op, std::move(row_dims));
  sampled_references().add(std::move(op), std::move(fn));
}

const SampledReferenceFn* find_sampled_reference(std::string_view op) {
  return sampled_references().find(op);
}

int sampled_reference_row_dim(std::string_view op, std::size_t k) {
  const std::vector<int>* dims = sampled_row_dims().find(op);
  return dims != nullptr && k < dims->size() ? (*dims)[k] : 0;
}

void register_workload_inputs(std::string op, WorkloadInputsFn fn) {
  workload_inputs().add(std::move(op), std::move(fn));
}

const WorkloadInputsFn* find_workload_inputs(std::string_view op) {
  return workload_inputs().find(op);
}

std::vector<std::int64_t> sample_rows(std::int64_t rows, std::int64_t count, std::uint64_t seed) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(std::max<std::int64_t>(rows, 0)));
  std::iota(all.begin(), all.end(), std::int64_t{0});
  if (count < rows) {
    // A partial Fisher-Yates shuffle: the first `count` entries are a uniform sample.
    std::mt19937_64 random(seed);
    for (std::int64_t i = 0; i < count; ++i) {
      std::uniform_int_distribution<std::int64_t> pick(i, rows - 1);
      std::swap(all[i], all[pick(random)]);
    }
    all.resize(static_cast<std::size_t>(std::max<std::int64_t>(count, 0)));
  }
  std::sort(all.begin(), all.end());
  return all;
}

Tensor gather_rows(const Tensor& t, std::span<const std::int64_t> rows) {
  if (t.dim() == 0) throw SignatureError("gather_rows: the tensor has no dimension 0");
  Sizes sizes = t.sizes();
  sizes[0] = static_cast<std::int64_t>(rows.size());
  Tensor out = Tensor::empty(sizes, t.dtype());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= t.size(0)) {
      throw SignatureError(
          fmt::format("gather_rows: row {} is outside [0, {})", rows[i], t.size(0)));
    }
    const auto at = static_cast<std::int64_t>(i);
    out.slice(0, at, at + 1).copy_(t.slice(0, rows[i], rows[i] + 1));
  }
  return out;
}

Tensor gather_rows(const Tensor& t, std::span<const std::int64_t> rows, std::int64_t dim) {
  if (dim == 0) return gather_rows(t, rows);
  if (dim < 0 || dim >= t.dim()) {
    throw SignatureError(
        fmt::format("gather_rows: dimension {} of a tensor of rank {}", dim, t.dim()));
  }
  return gather_rows(t.transpose(0, dim), rows).transpose(0, dim).contiguous();
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
    case DType::float8_e5m2:  // its epsilon, 2^-2, as e4m3's is 2^-3
      return 2.5e-1;
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
