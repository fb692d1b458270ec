// Registers the custom operators of the compile boundary (generated from the manifest into
// boundary_ops.inc) and the extension's utility operators, on the LibTorch stable ABI.
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include "boundary.h"

namespace tileops::torch_ext {
namespace {

#include "boundary_ops.inc"

std::string construct_op(std::string name, std::vector<std::string> param_names,
                         std::vector<std::string> param_values,
                         std::vector<std::optional<Tensor>> tensors) {
  return construct(name, param_names, param_values, tensors);
}

std::vector<Tensor> call_native_op(std::string key, std::vector<std::optional<Tensor>> inputs) {
  return call_native(key, inputs);
}

std::vector<std::string> query_op(std::string key, std::string what) {
  return query(key, what);
}

std::tuple<std::vector<Tensor>, bool> composite_open_op(std::string key,
                                                        std::vector<std::optional<Tensor>> inputs,
                                                        std::optional<Tensor> out) {
  return open_composite(key, inputs, out);
}

void composite_close_op(std::string key, std::vector<Tensor> outputs) {
  close_composite(key, outputs);
}

void composite_abort_op(std::string key) {
  abort_composite(key);
}

std::string delegate_for_op(std::string key, std::string stage, std::string identity,
                            std::string op_name, std::vector<std::string> param_names,
                            std::vector<std::string> param_values,
                            std::vector<std::optional<Tensor>> tensors, std::string given) {
  return hold_delegate(key, stage, identity, op_name, param_names, param_values, tensors, given);
}

// Benchmarks only (bench/torch_boundary_overhead.py): the schemas of norm_rms_norm_fwd and its
// _out branch with nothing behind them, so that the dispatcher's own cost of such a call from
// Python is measured beside ours.
Tensor overhead_floor(std::string /*key*/, Tensor x, Tensor /*weight*/) {
  return torch::stable::empty_like(x);
}

void overhead_floor_out(std::string /*key*/, Tensor /*x*/, Tensor /*weight*/, Tensor /*out*/) {}

}  // namespace
}  // namespace tileops::torch_ext

using namespace tileops::torch_ext;  // NOLINT: the registration macros name the functions bare

STABLE_TORCH_LIBRARY(tileops, m) {
  TILEOPS_BOUNDARY_DEFS(m)
  // Construction and introspection run eagerly, outside any graph.
  m.def("_construct(str name, str[] param_names, str[] param_values, Tensor?[] tensors) -> str");
  m.def("_query(str key, str what) -> str[]");
  // The eager calls of the Python composites and their held sub-ops (composite.cpp).
  m.def("_composite_open(str key, Tensor?[] inputs, Tensor? out) -> (Tensor[], bool)");
  m.def("_composite_close(str key, Tensor[] outputs) -> ()");
  m.def("_composite_abort(str key) -> ()");
  m.def(
      "_delegate_for(str key, str stage, str identity, str op_name, str[] param_names, "
      "str[] param_values, Tensor?[] tensors, str given) -> str");
  // Tests only: the C++ caller's path (tileops' allocator and stream), never traced.
  m.def("_call_native(str key, Tensor?[] inputs) -> Tensor[]");
  // Benchmarks only: the dispatcher's cost of a call with RMSNorm's schemas, nothing behind it.
  m.def("_overhead_floor(str key, Tensor x, Tensor weight) -> Tensor");
  m.def("_overhead_floor_out(str key, Tensor x, Tensor weight, Tensor(a!) out) -> ()");
}

STABLE_TORCH_LIBRARY_IMPL(tileops, CPU, m) {
  TILEOPS_BOUNDARY_IMPLS(m)
  m.impl("_call_native", TORCH_BOX(&call_native_op));
  m.impl("_overhead_floor", TORCH_BOX(&overhead_floor));
  m.impl("_overhead_floor_out", TORCH_BOX(&overhead_floor_out));
}

STABLE_TORCH_LIBRARY_IMPL(tileops, CUDA, m) {
  TILEOPS_BOUNDARY_IMPLS(m)
  m.impl("_call_native", TORCH_BOX(&call_native_op));
  m.impl("_overhead_floor", TORCH_BOX(&overhead_floor));
  m.impl("_overhead_floor_out", TORCH_BOX(&overhead_floor_out));
}

STABLE_TORCH_LIBRARY_IMPL(tileops, CompositeExplicitAutograd, m) {
  m.impl("_construct", TORCH_BOX(&construct_op));
  m.impl("_query", TORCH_BOX(&query_op));
  m.impl("_composite_open", TORCH_BOX(&composite_open_op));
  m.impl("_composite_close", TORCH_BOX(&composite_close_op));
  m.impl("_composite_abort", TORCH_BOX(&composite_abort_op));
  m.impl("_delegate_for", TORCH_BOX(&delegate_for_op));
}
