// The live instances of the extension, by instance key: constructed from Python (owned by the
// Python object, released by it) or held by one of them as a sub-op (kept alive through the
// composite holding it, released with the instance that owns that composite); their
// construction and introspection.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "boundary.h"
#include "interop.h"
#include "tileops/base/op.h"
#include "tileops/base/op_class.h"
#include "tileops/core/error.h"

namespace tileops::torch_ext {

namespace {

struct Entry {
  std::shared_ptr<Op> op;
  bool owned;  // constructed from Python (else a held sub-op, registered by register_held)
};

struct Registry {
  std::shared_mutex mutex;
  std::unordered_map<std::string, Entry> ops;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: ops may outlive static destruction order
  return *r;
}

// Drops the held sub-ops' entries below `op`, down to instances Python owns (an injected
// instance keeps its entry, and its own sub-ops theirs). Called with the registry locked.
void release_held(Registry& r, const Op& op) {
  for (const Op* sub : op.held_delegates()) {
    const auto it = r.ops.find(sub->instance_key());
    if (it == r.ops.end() || it->second.owned) continue;
    r.ops.erase(it);
    release_held(r, *sub);
  }
}

Value decode(const std::string& text, const std::vector<std::optional<Tensor>>& tensors) {
  if (text.size() < 2 || text[1] != ':') throw UsageError("tileops: bad parameter encoding");
  const std::string body = text.substr(2);
  switch (text[0]) {
    case 'i':
      return Value(static_cast<std::int64_t>(std::stoll(body)));
    case 'f':
      return Value(std::stod(body));
    case 'b':
      return Value(body == "1");
    case 's':
      return Value(body);
    case 'n':
      return Value(NoneValue{});
    case 'l': {
      Sizes list;
      for (std::size_t at = 0; at < body.size();) {
        const std::size_t comma = body.find(',', at);
        list.push_back(std::stoll(body.substr(at, comma - at)));
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
      return Value(list);
    }
    case 't': {
      const auto& t = tensors.at(std::stoul(body));
      return t ? Value(wrap(*t)) : Value(NoneValue{});
    }
    default:
      throw UsageError("tileops: bad parameter encoding '" + text + "'");
  }
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// A parameter value as decode() reads it back; a tensor ("t:") and an injected object ("o:")
// are named only (Python keeps its own).
std::string encode(const Value& value) {
  struct Encoder {
    std::string operator()(const NoneValue&) const { return "n:"; }
    std::string operator()(bool v) const { return v ? "b:1" : "b:0"; }
    std::string operator()(std::int64_t v) const { return "i:" + std::to_string(v); }
    std::string operator()(double v) const { return "f:" + number(v); }
    std::string operator()(const std::string& v) const { return "s:" + v; }
    std::string operator()(const Sizes& v) const {
      std::string text = "l:";
      for (std::size_t i = 0; i < v.size(); ++i) text += (i ? "," : "") + std::to_string(v[i]);
      return text;
    }
    std::string operator()(DType v) const { return "d:" + std::string(dtype_name(v)); }
    std::string operator()(const tileops::Tensor&) const { return "t:"; }
    std::string operator()(const InjectedValue&) const { return "o:"; }
  };
  return std::visit(Encoder{}, value);
}

// A call record as lines: "device:", "has_out:", "index:<name>=<value>",
// "tensor:<name>:<role>:<dtype>:<reads>:<writes>:<dims>", "written:<input>", then per stage
// "stage:<name>:<n>" followed by its n records, each between "call:begin" and "call:end".
void write_record(const SignatureCall& call, std::vector<std::string>& lines) {
  lines.push_back("device:" + call.device.str());
  lines.push_back(std::string("has_out:") + (call.has_out ? "1" : "0"));
  const auto& indices = call.schema().indices;
  for (std::size_t i = 0; i < call.indices.size() && i < indices.size(); ++i) {
    lines.push_back("index:" + std::string(indices[i].name) + "=" + value_repr(call.indices[i]));
  }
  for (const auto& t : call.tensors) {
    std::string dims;
    for (std::size_t d = 0; d < t.shape.size(); ++d)
      dims += (d ? "," : "") + std::to_string(t.shape[d]);
    const char* role = t.role == TensorRecord::Role::input    ? "input"
                       : t.role == TensorRecord::Role::output ? "output"
                                                              : "construction";
    lines.push_back("tensor:" + std::string(t.name) + ":" + role + ":" +
                    std::string(dtype_name(t.dtype)) + ":" + std::to_string(t.reads) + ":" +
                    std::to_string(t.writes) + ":" + dims);
  }
  for (const int w : call.written) lines.push_back("written:" + std::to_string(w));
  for (const auto& [stage, records] : call.stages) {
    lines.push_back("stage:" + std::string(stage) + ":" + std::to_string(records.size()));
    for (const SignatureCallPtr& record : records) {
      lines.emplace_back("call:begin");
      write_record(*record, lines);
      lines.emplace_back("call:end");
    }
  }
}

}  // namespace

std::shared_ptr<Op> find(const std::string& key) {
  Registry& r = registry();
  std::shared_lock lock(r.mutex);
  const auto it = r.ops.find(key);
  if (it == r.ops.end()) throw UsageError("tileops: no live op instance has key '" + key + "'");
  return it->second.op;
}

std::string register_held(const std::shared_ptr<Op>& parent, Op& sub) {
  std::string key = sub.instance_key();
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  // Aliasing: the entry keeps the holding composite, and through it `sub`, alive.
  r.ops.try_emplace(key, Entry{std::shared_ptr<Op>(parent, &sub), false});
  return key;
}

ParamMap decode_params(const std::vector<std::string>& names,
                       const std::vector<std::string>& values,
                       const std::vector<std::optional<Tensor>>& tensors) {
  if (names.size() != values.size()) throw UsageError("tileops: bad parameters");
  ParamMap params;
  for (std::size_t i = 0; i < names.size(); ++i)
    params.emplace(names[i], decode(values[i], tensors));
  return params;
}

std::string construct(const std::string& name, const std::vector<std::string>& param_names,
                      const std::vector<std::string>& param_values,
                      const std::vector<std::optional<Tensor>>& tensors) {
  try {
    if (param_names.size() != param_values.size()) throw UsageError("tileops: bad parameters");
    std::vector<std::string> names;
    std::vector<std::string> values;
    std::optional<std::string> target;
    for (std::size_t i = 0; i < param_names.size(); ++i) {
      if (param_names[i] == "target") {
        target = param_values[i].substr(2);
      } else {
        names.push_back(param_names[i]);
        values.push_back(param_values[i]);
      }
    }
    std::shared_ptr<Op> op =
        make_op(name, decode_params(names, values, tensors), target ? Target(*target) : Target());
    std::string key = op->instance_key();
    Registry& r = registry();
    std::unique_lock lock(r.mutex);
    r.ops.emplace(key, Entry{std::move(op), true});
    return key;
  } catch (const Error&) {
    rethrow_tagged();
  }
}

std::vector<std::string> query(const std::string& key, const std::string& what) {
  try {
    if (what == "release") {
      std::shared_ptr<Op> released;  // destroyed after the lock is given back
      Registry& r = registry();
      std::unique_lock lock(r.mutex);
      const auto it = r.ops.find(key);
      if (it == r.ops.end() || !it->second.owned) return {};  // a held sub-op goes with its owner
      released = std::move(it->second.op);
      r.ops.erase(it);
      release_held(r, *released);
      return {};
    }
    const std::shared_ptr<Op> op = find(key);
    if (what == "last_call") {
      std::vector<std::string> lines;
      write_record(*op->last_call(), lines);
      return lines;
    }
    if (what == "roofline") {
      const Roofline r = op->eval_roofline();
      return {number(r.flops), number(r.bytes)};
    }
    if (what == "request_tune") {
      op->request_tune();
      return {};
    }
    if (what == "kernel_config") {
      const auto config = op->kernel_config();
      return config ? std::vector<std::string>{*config} : std::vector<std::string>{};
    }
    if (what == "iter_kernels") {
      std::vector<std::string> lines;
      for (const Kernel* k : op->iter_kernels()) lines.push_back(k->config());
      return lines;
    }
    if (what == "serving_target") {
      const auto t = op->serving_target();
      return t ? std::vector<std::string>{*t} : std::vector<std::string>{};
    }
    if (what == "params") {
      std::vector<std::string> lines;
      for (const auto& [name, value] : op->param_values())
        lines.push_back(name + "=" + encode(value));
      return lines;
    }
    if (what == "held_delegates") {
      std::vector<std::string> keys;
      for (Op* sub : op->held_delegates()) keys.push_back(register_held(op, *sub));
      return keys;
    }
    if (constexpr std::string_view prefix = "built_entries:"; what.starts_with(prefix)) {
      return op->built_entries(std::string_view(what).substr(prefix.size()));
    }
    throw UsageError("tileops: unknown query '" + what + "'");
  } catch (const Error&) {
    rethrow_tagged();
  }
}

}  // namespace tileops::torch_ext
