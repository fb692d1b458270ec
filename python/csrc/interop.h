// What the extension's parts share: boundary.cpp (torch tensors, streams and allocation),
// instances.cpp (the live instances and their introspection) and composite.cpp (the eager calls
// of the Python composites). Internal to the extension.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <torch/csrc/stable/tensor.h>

#include "tileops/base/op.h"
#include "tileops/core/tensor.h"
#include "tileops/core/value.h"

namespace tileops::torch_ext {

using Tensor = torch::stable::Tensor;

/// A tileops view of the torch tensor, no copy; the torch handle keeps the memory alive.
tileops::Tensor wrap(const Tensor& t);

/// Runs `body` (a call of `op` on `inputs`) on torch's current CUDA stream of the first present
/// input's device, with torch's allocator behind every storage tileops allocates meanwhile, for
/// this thread. Returns the torch tensors of the outputs `body` returns (manifest order); a
/// `buffer: out` output the caller passed as `out` is `out` itself when `out_returned`, else
/// left out.
std::vector<Tensor> run_on_torch(const Op& op, std::span<const tileops::Tensor> inputs,
                                 const std::optional<Tensor>& out, bool out_returned,
                                 const std::function<std::vector<tileops::Tensor>()>& body);

/// The live instance registered under `key` (constructed from Python, or held by one);
/// UsageError when there is none.
std::shared_ptr<Op> find(const std::string& key);

/// Registers `sub`, a sub-op `parent` holds, under its instance key (kept alive through `parent`;
/// released with the instance that owns `parent`) and returns the key.
std::string register_held(const std::shared_ptr<Op>& parent, Op& sub);

/// Parameters encoded as construct() takes them ("i:3", "f:1e-06", "b:1", "s:bshd", "l:1,2",
/// "n:", "t:<k>" = tensors[k]).
ParamMap decode_params(const std::vector<std::string>& names,
                       const std::vector<std::string>& values,
                       const std::vector<std::optional<Tensor>>& tensors);

/// Rethrows the tileops::Error being handled as an exception whose message starts with
/// "tileops.<ErrorClass>: " (the stable ABI carries an exception's text only).
[[noreturn]] void rethrow_tagged();

}  // namespace tileops::torch_ext
