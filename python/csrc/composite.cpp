// The eager calls of the Python composites (tileops/_op.py, CompositeOp). The Python object owns
// an instance of the C++ composite: a call opens that instance's call (signature check, target
// selection: Op::open_call), the Python wiring calls the held stages' custom operators, whose
// calls file their records under the stages through this thread's call stack, and the call is
// closed (result check, record) or aborted (undone as a failed C++ call is). Tracing runs none
// of this: traced, the stages' operators are the graph's nodes.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "boundary.h"
#include "interop.h"
#include "tileops/base/op.h"
#include "tileops/core/error.h"

namespace tileops::torch_ext {

namespace {

struct OpenComposite {
  std::string key;
  std::shared_ptr<Op> op;  // alive while its call is open
  // The tensors the call knows (present inputs, then its outputs) and their views in the call.
  std::vector<Tensor> passed;
  std::vector<tileops::Tensor> views;
  std::unique_ptr<Op::OpenCall> call;
};

// This thread's open composite calls, innermost last (nested composites open in turn).
thread_local std::vector<OpenComposite> t_open;

bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.data_ptr() != b.data_ptr() || a.scalar_type() != b.scalar_type()) return false;
  const auto as = a.sizes();
  const auto bs = b.sizes();
  const auto at = a.strides();
  const auto bt = b.strides();
  return std::equal(as.begin(), as.end(), bs.begin(), bs.end()) &&
         std::equal(at.begin(), at.end(), bt.begin(), bt.end());
}

}  // namespace

std::tuple<std::vector<Tensor>, bool> open_composite(
    const std::string& key, const std::vector<std::optional<Tensor>>& inputs,
    const std::optional<Tensor>& out) {
  try {
    OpenComposite open{key, find(key), {}, {}, nullptr};
    const Op& op = *open.op;
    if (op.op_class().delegate_types.empty()) {
      throw UsageError("tileops: " + key + " is no composite: it has no open call");
    }
    std::vector<tileops::Tensor> ins;
    ins.reserve(inputs.size());
    for (const auto& t : inputs) {
      ins.push_back(t ? wrap(*t) : tileops::Tensor());
      if (t) {
        open.passed.push_back(*t);
        open.views.push_back(ins.back());
      }
    }
    std::vector<tileops::Tensor> outs;
    for (const auto& o : op.schema().outputs) {
      if (o.buffer_out) outs.push_back(out ? wrap(*out) : tileops::Tensor());
    }
    std::vector<Tensor> outputs = run_on_torch(op, ins, out, true, [&] {
      open.call = open.op->open_call(ins, outs);
      return open.call->outputs();
    });
    const bool is_open = !open.call->complete();
    if (is_open) {
      // The body gives back the outputs it was handed: known by their torch tensors.
      for (std::size_t i = 0; i < outputs.size(); ++i) {
        open.passed.push_back(outputs[i]);
        open.views.push_back(open.call->outputs()[i]);
      }
      t_open.push_back(std::move(open));
    }
    return {std::move(outputs), is_open};
  } catch (const Error&) {
    rethrow_tagged();
  }
}

void close_composite(const std::string& key, const std::vector<Tensor>& outputs) {
  try {
    if (t_open.empty() || t_open.back().key != key) {
      throw UsageError("tileops: " + key +
                       ": close of a call that is not this thread's innermost open composite call");
    }
    // Taken off the stack first: a failed close destroys it, which undoes the call.
    const OpenComposite open = std::move(t_open.back());
    t_open.pop_back();
    std::vector<tileops::Tensor> results;
    results.reserve(outputs.size());
    for (const Tensor& t : outputs) {
      // A tensor the call knows is given back as its view: the outputs it handed out (the
      // caller's `out` among them) are recognised, and an input returned as an output is one.
      const auto same = std::find_if(open.passed.begin(), open.passed.end(),
                                     [&](const Tensor& p) { return same_tensor(p, t); });
      results.push_back(same == open.passed.end() ? wrap(t)
                                                  : open.views[same - open.passed.begin()]);
    }
    open.call->close(std::move(results));
  } catch (const Error&) {
    rethrow_tagged();
  }
}

void abort_composite(const std::string& key) {
  // Innermost first, down to `key`'s call; nothing when that call is not open (its open failed,
  // or its close ran and undid it).
  const bool is_open = std::any_of(t_open.begin(), t_open.end(),
                                   [&](const OpenComposite& o) { return o.key == key; });
  while (is_open && !t_open.empty()) {
    const bool last = t_open.back().key == key;
    t_open.pop_back();
    if (last) break;
  }
}

std::string hold_delegate(const std::string& key, const std::string& stage,
                          const std::string& identity, const std::string& op_name,
                          const std::vector<std::string>& param_names,
                          const std::vector<std::string>& param_values,
                          const std::vector<std::optional<Tensor>>& tensors,
                          const std::string& given) {
  try {
    const std::shared_ptr<Op> op = find(key);
    std::optional<std::string> id;
    if (identity.starts_with("s:")) {
      id = identity.substr(2);
    } else if (identity != "n:") {
      throw UsageError("tileops: bad identity encoding '" + identity + "'");
    }
    Op& held = op->delegate_for(stage, std::move(id), op_name,
                                decode_params(param_names, param_values, tensors),
                                given.empty() ? nullptr : find(given));
    return register_held(op, held);
  } catch (const Error&) {
    rethrow_tagged();
  }
}

}  // namespace tileops::torch_ext
