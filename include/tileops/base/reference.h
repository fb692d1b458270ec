// Reference implementations: simple, double-precision versions of each op, used by the tests
// and by `tileops bench` to check results; and the workload inputs of the ops whose inputs must
// hold valid values. Each family registers them next to its op classes.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tileops/base/schema.h"
#include "tileops/core/device.h"
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

/// Computes, like ReferenceFn, what a call writes, but for the rows `rows` (indices along
/// dimension 0, sorted, distinct) of every written tensor only: tensor k of the result is
/// `gather_rows(written_k, rows)` as the reference computes it. For cases too large for the
/// whole reference: the cost is that of the sampled rows (an MoE layer's sampled tokens read only
/// the weights of the experts they are routed to).
using SampledReferenceFn = std::function<std::vector<Tensor>(
    std::span<const Tensor> inputs, const ParamMap& params, std::span<const std::int64_t> rows)>;

void register_sampled_reference(std::string op, SampledReferenceFn fn);
/// As above, for an op whose written tensors are not all indexed by the rows along dimension 0:
/// `row_dims[k]` is the dimension of written tensor k that the rows index, and tensor k of the
/// result is `gather_rows(written_k, rows, row_dims[k])` (attention's lse [heads, tokens] is
/// indexed by the query tokens, dimension 1, as its out [tokens, heads, dim] is by dimension 0).
void register_sampled_reference(std::string op, SampledReferenceFn fn, std::vector<int> row_dims);
/// nullptr when the op has no sampled reference.
const SampledReferenceFn* find_sampled_reference(std::string_view op);
/// The dimension the sampled rows index in written tensor `k` of `op` (0 unless registered).
int sampled_reference_row_dim(std::string_view op, std::size_t k);

/// `count` distinct indices of [0, rows) (all of them when count >= rows), sorted, drawn by
/// `seed`: the same seed gives the same rows.
std::vector<std::int64_t> sample_rows(std::int64_t rows, std::int64_t count, std::uint64_t seed);

/// A contiguous CPU tensor of t's slices `rows` along dimension 0, in that order: shape
/// [rows.size(), t.sizes()[1:]...], t's dtype. `t` may live on any device (only the
/// selected slices are copied to the host).
Tensor gather_rows(const Tensor& t, std::span<const std::int64_t> rows);
/// The slices `rows` of t along dimension `dim`, in that order, as a contiguous CPU tensor: shape
/// t's with dimension `dim` replaced by rows.size().
Tensor gather_rows(const Tensor& t, std::span<const std::int64_t> rows, std::int64_t dim);

/// Inputs of a workload case in manifest order (undefined for an absent optional input), for an
/// op whose inputs must hold valid values (offsets, distinct ids, permutations): what `tileops
/// bench` and the tests give its workloads. An op without one gets drawn inputs (floats randn,
/// integers uniform).
using WorkloadInputsFn = std::function<std::vector<Tensor>(const InstantiatedCase& c,
                                                           std::uint64_t seed, Device device)>;

void register_workload_inputs(std::string op, WorkloadInputsFn fn);
/// nullptr when the op has no workload inputs of its own.
const WorkloadInputsFn* find_workload_inputs(std::string_view op);

#define TILEOPS_REGISTER_REFERENCE(OpName, fn)                  \
  namespace {                                                   \
  [[maybe_unused]] const bool tileops_reference_##OpName = [] { \
    ::tileops::register_reference(#OpName, fn);                 \
    return true;                                                \
  }();                                                          \
  }

/// TILEOPS_REGISTER_SAMPLED_REFERENCE(Op, fn) or (Op, fn, {row dims of the written tensors}).
#define TILEOPS_REGISTER_SAMPLED_REFERENCE(OpName, ...)                 \
  namespace {                                                           \
  [[maybe_unused]] const bool tileops_sampled_reference_##OpName = [] { \
    ::tileops::register_sampled_reference(#OpName, __VA_ARGS__);        \
    return true;                                                        \
  }();                                                                  \
  }

#define TILEOPS_REGISTER_WORKLOAD_INPUTS(OpName, fn)                  \
  namespace {                                                         \
  [[maybe_unused]] const bool tileops_workload_inputs_##OpName = [] { \
    ::tileops::register_workload_inputs(#OpName, fn);                 \
    return true;                                                      \
  }();                                                                \
  }

}  // namespace tileops
