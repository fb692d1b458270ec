// Reference implementations: simple, double-precision versions of each op, used by the tests
// and by `tileops bench` to check results. Each family registers its references next to its
// op classes.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tileops/core/tensor.h"
#include "tileops/core/value.h"

namespace tileops {

/// Computes, on the CPU and in double precision, what a call writes: the outputs in manifest
/// order, then the new values of the mutated inputs in manifest order (float32 CPU tensors
/// holding the double results rounded once).
/// `inputs` are in manifest order (undefined for an absent optional input), any device/strides.
using ReferenceFn =
    std::function<std::vector<Tensor>(std::span<const Tensor> inputs, const ParamMap& params)>;

void register_reference(std::string op, ReferenceFn fn);
/// nullptr when the op has no reference.
const ReferenceFn* find_reference(std::string_view op);

/// Tolerance of a dtype for comparisons with a reference: |got - ref| <= tol * (1 + |ref|).
/// fp32 1e-5, fp16 1e-3, bf16 1.6e-2, fp8 1.25e-1, integers and bool exact (0).
double tolerance_for(DType dtype);

/// Largest |got - ref| / (1 + |ref|) over the elements (NaN when any element is NaN in `got`
/// but not in `ref`, or shapes differ). Both on any device; compared on the CPU.
double max_relative_error(const Tensor& got, const Tensor& ref);

#define TILEOPS_REGISTER_REFERENCE(OpName, fn)                         \
  namespace {                                                          \
  [[maybe_unused]] const bool tileops_reference_##OpName = [] {        \
    ::tileops::register_reference(#OpName, fn);                        \
    return true;                                                       \
  }();                                                                 \
  }

}  // namespace tileops
