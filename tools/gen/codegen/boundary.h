// The compile boundary of an op (the PyTorch custom operators that make it one node under
// torch.compile): which ops get one, their names and their schema strings. Computed from the
// manifest alone, so the C++ schema data, the torch extension and the Python package agree.
#pragma once

#include <string>
#include <vector>

#include "manifest/model.h"

namespace tgen {

/// One custom operator: one effect branch of an op.
struct CompileOp {
  std::string name;    ///< "norm_rms_norm_fwd_out" (without the "tileops::" namespace)
  std::string schema;  ///< "(str key, Tensor x, Tensor weight, Tensor(a!) out) -> ()"
  bool out = false;    ///< the branch that fills the `buffer: out` output
};

/// The name of the operators' first argument, the op instance's key: "key", or "instance_key"
/// when an input is named key (the KV-cache write's `key`), so that argument names stay distinct.
std::string instance_key_argument(const OpDecl& op);

/// True when the op gets a compile boundary: it has a call-time tensor input and no composition.
bool has_compile_boundary(const OpDecl& op);

/// snake_case of a class name without its "Op" suffix; the mixed-case acronyms MoE and RoPE
/// are one word ("MoETopKRoutingFwdOp" -> "moe_top_k_routing_fwd").
std::string snake_name(const std::string& class_name);

/// The custom operators of the op, one per effect branch (empty without a boundary): the
/// allocating branch first, then the `_out` branch when an output is `buffer: out`.
std::vector<CompileOp> compile_ops(const OpDecl& op);

}  // namespace tgen
