// The generic entry of the compile boundary, on the LibTorch stable ABI: every custom operator
// the manifest generates (python/boundary_ops.inc, emitted by tileops-gen) hands its instance
// key and tensors to run_boundary, which runs the op's whole call (signature check, target
// resolution, undo on failure, forward) on torch's tensors without copying them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <torch/csrc/stable/tensor.h>

namespace tileops::torch_ext {

using Tensor = torch::stable::Tensor;

/// Runs the instance registered under `key` on `inputs` (manifest order; nullopt = an absent
/// optional input) and, for the `_out` branch, the caller's `out`. Returns the outputs the
/// schema returns (every output but the filled buffer), `n_returns` of them, allocated by
/// torch's allocator on the inputs' device and on torch's current CUDA stream. tileops errors
/// come back as exceptions whose message starts with "tileops.<ErrorClass>: ".
std::vector<Tensor> run_boundary(const std::string& key, std::vector<std::optional<Tensor>> inputs,
                                 std::optional<Tensor> out, std::size_t n_returns);

/// Constructs an op by manifest name from encoded parameters ("i:3", "f:1e-06", "b:1",
/// "s:bshd", "l:1,2", "n:", "t:<k>" = tensors[k]) and registers it; returns its instance key.
std::string construct(const std::string& name, const std::vector<std::string>& param_names,
                      const std::vector<std::string>& param_values,
                      const std::vector<std::optional<Tensor>>& tensors);

/// Introspection of a registered instance, as lines of text: "last_call" (with its stages'
/// records), "roofline", "request_tune", "kernel_config", "iter_kernels", "serving_target",
/// "params" (name=encoded value), "held_delegates" (their keys, registered),
/// "built_entries:<interface>", "release" (of an instance constructed from Python, with the
/// held sub-ops registered below it).
std::vector<std::string> query(const std::string& key, const std::string& what);

/// Opens an eager call of the composite registered under `key` (Op::open_call) on `inputs`
/// (manifest order; nullopt = absent) and `out`. Returns the outputs (manifest order; `out`
/// itself for the buffer it fills, the others from torch's allocator) and whether the call is
/// open: then the caller runs the stages, which write those outputs, and closes or aborts it on
/// this thread. A call that needed no body is complete: the outputs are its results.
std::tuple<std::vector<Tensor>, bool> open_composite(
    const std::string& key, const std::vector<std::optional<Tensor>>& inputs,
    const std::optional<Tensor>& out);

/// Closes this thread's innermost open call, `key`'s, on the outputs the stages wrote (manifest
/// order; those open_composite returned): checked, the stages filed, recorded. A failed close
/// undoes the call.
void close_composite(const std::string& key, const std::vector<Tensor>& outputs);

/// Undoes `key`'s open call on this thread (and any opened after it) as a failed call is undone;
/// nothing when it is not open.
void abort_composite(const std::string& key);

/// Op::delegate_for of the instance under `key` by class name: the sub-op held for `stage` and
/// `identity` ("n:" none, "s:<text>"), built from the encoded parameters (as construct takes
/// them) or `given` (an instance key; empty for none). Registers it and returns its key.
std::string hold_delegate(const std::string& key, const std::string& stage,
                          const std::string& identity, const std::string& op_name,
                          const std::vector<std::string>& param_names,
                          const std::vector<std::string>& param_values,
                          const std::vector<std::optional<Tensor>>& tensors,
                          const std::string& given);

/// The C++ caller's path, for tests that compare it with the boundary bit for bit: copies the
/// inputs into tensors tileops allocates, runs the op on tileops' own stream setting (the
/// legacy default stream) and allocator, and copies the outputs into new torch tensors, followed
/// by the inputs the call wrote (its copies of them, in manifest order).
std::vector<Tensor> call_native(const std::string& key,
                                const std::vector<std::optional<Tensor>>& inputs);

/// `opt(t)`: the optional tensor as it reaches run_boundary (used by the generated code).
inline std::optional<Tensor> opt(const std::optional<Tensor>& t) {
  return t;
}

}  // namespace tileops::torch_ext
