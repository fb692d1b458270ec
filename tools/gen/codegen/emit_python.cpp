// The Python side of the compile boundary, emitted from the manifest: a JSON description of
// every op (the package builds its op classes, fakes and docs from it), a typed Python module
// of op classes with docstrings, its .pyi stub, and the C++ registrations of the custom
// operators for the torch extension (one typed function per effect branch).
#include <string>
#include <vector>

#include "codegen/boundary.h"
#include "codegen/codegen.h"
#include "core/float_repr.h"
#include "core/json_text.h"

namespace tgen {

namespace {

std::string json_value(const EValue& v) {
  if (v.is<NoneValue>()) return "null";
  if (v.is<bool>()) return v.as<bool>() ? "true" : "false";
  if (v.is<std::int64_t>()) return std::to_string(v.as<std::int64_t>());
  if (v.is<double>()) return tileops::float_repr(v.as<double>());
  if (v.is<std::string>()) return tileops::json_string(v.as<std::string>());
  if (v.is<DTypeValue>()) return tileops::json_string(v.as<DTypeValue>().name);
  if (v.is<Seq>()) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.as<Seq>().size(); ++i)
      out += (i ? ", " : "") + std::to_string(v.as<Seq>()[i]);
    return out + "]";
  }
  std::string out = "[";
  const auto& items = v.as<TupleValue>().items;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + json_value(items[i]);
  return out + "]";
}

std::string json_bool(bool b) {
  return b ? "true" : "false";
}

std::string op_json(const OpDecl& op) {
  std::string o = "  {\"name\": " + tileops::json_string(op.name) +
                  ", \"family\": " + tileops::json_string(op.family) +
                  ", \"status\": " + tileops::json_string(op.status) +
                  ", \"ref_api\": " + tileops::json_string(op.ref_api) +
                  ",\n   \"doc\": " + tileops::json_string(op.doc) +
                  ",\n   \"composite\": " + json_bool(op.has_composition) + ",\n";
  o += "   \"compile_ops\": [";
  const auto cops = compile_ops(op);
  for (std::size_t i = 0; i < cops.size(); ++i) {
    o += std::string(i ? ", " : "") +
         "{\"name\": " + tileops::json_string("tileops::" + cops[i].name) +
         ", \"schema\": " + tileops::json_string(cops[i].schema) +
         ", \"out\": " + json_bool(cops[i].out) + "}";
  }
  o += "],\n   \"forall\": [";
  for (std::size_t i = 0; i < op.forall.size(); ++i) {
    o += std::string(i ? ", " : "") + "{\"name\": " + tileops::json_string(op.forall[i].name) +
         ", \"kind\": " + tileops::json_string(op.forall[i].kind_text) + "}";
  }
  o += "],\n   \"params\": [";
  for (std::size_t i = 0; i < op.params.size(); ++i) {
    const auto& p = op.params[i];
    o += std::string(i ? ",\n     " : "") + "{\"name\": " + tileops::json_string(p.name) +
         ", \"type\": " + tileops::json_string(p.type.text) +
         ", \"has_default\": " + json_bool(p.has_default) +
         ", \"default\": " + (p.has_default ? json_value(p.default_value) : "null") +
         ", \"kw_only\": " + json_bool(p.kw_only) + ", \"is_tensor\": " + json_bool(p.is_tensor) +
         ", \"dtype\": " + tileops::json_string(p.dtype) +
         ", \"shape\": " + tileops::json_string(p.shape.text) +
         ", \"optional\": " + json_bool(p.optional) + ", \"doc\": " + tileops::json_string(p.doc) +
         "}";
  }
  for (const bool out : {false, true}) {
    o += out ? "],\n   \"outputs\": [" : "],\n   \"inputs\": [";
    const auto& ts = out ? op.outputs : op.inputs;
    for (std::size_t i = 0; i < ts.size(); ++i) {
      const auto& t = ts[i];
      o += std::string(i ? ",\n     " : "") + "{\"name\": " + tileops::json_string(t.name) +
           ", \"dtype\": " + tileops::json_string(t.dtype) +
           ", \"shape\": " + tileops::json_string(t.shape.text) +
           ", \"optional\": " + json_bool(t.optional) + ", \"mutated\": " + json_bool(t.mutated) +
           ", \"buffer_out\": " + json_bool(t.buffer_out) + "}";
    }
  }
  o += "],\n   \"lets\": [";
  for (std::size_t i = 0; i < op.lets.size(); ++i) {
    o += std::string(i ? ", " : "") + "[" + tileops::json_string(op.lets[i].name) + ", " +
         tileops::json_string(op.lets[i].expr.text) + "]";
  }
  o += "],\n   \"types\": [";
  for (std::size_t i = 0; i < op.families.size(); ++i) {
    const auto& f = op.families[i];
    o += std::string(i ? ", " : "") + "{\"name\": " + tileops::json_string(f.name) +
         ", \"formals\": [";
    for (std::size_t j = 0; j < f.formals.size(); ++j)
      o += std::string(j ? ", " : "") + tileops::json_string(f.formals[j].name);
    o += "], \"match\": " + tileops::json_string(f.match) + ", \"cases\": [";
    for (std::size_t j = 0; j < f.cases.size(); ++j) {
      o += std::string(j ? ", " : "") + "[" + json_value(f.cases[j].when) + ", " +
           tileops::json_string(f.cases[j].is.text) + "]";
    }
    o += "]}";
  }
  // The rules and dtype combinations: the Python composites check their calls with them
  // (python/tileops/_shapes.py, check_rules), as the generated C++ check does.
  o += "],\n   \"shape_rules\": [";
  for (std::size_t i = 0; i < op.shape_rules.size(); ++i) {
    o += std::string(i ? ", " : "") + tileops::json_string(op.shape_rules[i].text);
  }
  o += "],\n   \"dtype_combos\": [";
  for (std::size_t i = 0; i < op.dtype_combos.size(); ++i) {
    o += std::string(i ? ", " : "") + "{";
    const auto& cells = op.dtype_combos[i].cells;
    for (std::size_t j = 0; j < cells.size(); ++j) {
      o += std::string(j ? ", " : "") + tileops::json_string(cells[j].first) + ": " +
           tileops::json_string(cells[j].second);
    }
    o += "}";
  }
  o += "],\n   \"stages\": [";
  for (std::size_t i = 0; i < op.stages.size(); ++i) {
    o += std::string(i ? ", " : "") + "{\"name\": " + tileops::json_string(op.stages[i].name) +
         ", \"op\": " + tileops::json_string(op.stages[i].op) + "}";
  }
  return o + "]}";
}

// ---- Python module and stub ------------------------------------------------------------------

std::string py_param_type(const ParamDecl& p) {
  using T = ParamType::Tag;
  const ParamType* t = &p.type;
  bool optional = false;
  if (t->tag == T::optional) {
    optional = true;
    t = t->inner.get();
  }
  std::string s;
  switch (t->tag) {
    case T::int_:
      s = "int";
      break;
    case T::float_:
      s = "float";
      break;
    case T::bool_:
      s = "bool";
      break;
    case T::int_list:
      s = "Sequence[int]";
      break;
    case T::tensor:
      s = "torch.Tensor";
      break;
    case T::dtype:
      s = "torch.dtype";
      break;
    case T::enum_: {
      s = "Literal[";
      for (std::size_t i = 0; i < t->values.size(); ++i)
        s += (i ? ", " : "") + std::string("'") + t->values[i] + "'";
      s += "]";
      break;
    }
    default:
      s = "str";
  }
  if (p.is_tensor) s = "torch.Tensor";
  if (optional || (p.is_tensor && p.optional)) s += " | None";
  return s;
}

std::string py_default(const EValue& v) {
  if (v.is<NoneValue>()) return "None";
  if (v.is<bool>()) return v.as<bool>() ? "True" : "False";
  if (v.is<std::string>()) return "'" + v.as<std::string>() + "'";
  if (v.is<DTypeValue>()) return "'" + v.as<DTypeValue>().name + "'";
  return json_value(v);
}

std::string indent_doc(const std::string& doc, const std::string& pad) {
  std::string out;
  std::size_t start = 0;
  while (start <= doc.size()) {
    const std::size_t end = doc.find('\n', start);
    const std::string line =
        doc.substr(start, end == std::string::npos ? std::string::npos : end - start);
    out += line.empty() ? "\n" : pad + line + "\n";
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::string py_class(const OpDecl& op, bool stub) {
  const bool boundary = has_compile_boundary(op);
  std::string c = "class " + op.name + "(" + (boundary ? "BoundaryOp" : "CompositeOp") + "):\n";
  std::string doc = op.doc;
  std::string pdoc;
  for (const auto& p : op.params) {
    if (!p.doc.empty()) pdoc += "  " + p.name + ": " + p.doc + "\n";
  }
  std::string text = doc + (pdoc.empty() ? "" : "\nParameters:\n" + pdoc) +
                     (op.ref_api.empty() ? "" : "\nReference: " + op.ref_api + "\n");
  for (std::size_t at = text.find("\"\"\""); at != std::string::npos; at = text.find("\"\"\"", at))
    text.replace(at, 3, "'''");
  c += "    \"\"\"\n" + indent_doc(text, "    ") + "    \"\"\"\n\n";
  c += "    compile_op_names: ClassVar[tuple[str, ...]] = (";
  for (const auto& co : compile_ops(op)) c += "'tileops::" + co.name + "', ";
  c += ")\n\n";
  // Constructor: positional parameters first, then keyword-only ones (manifest order).
  std::string sig = "self";
  bool star = false;
  for (const bool kw : {false, true}) {
    for (const auto& p : op.params) {
      if (p.kw_only != kw) continue;
      if (kw && !star) {
        sig += ", *";
        star = true;
      }
      sig += ", " + p.name + ": " + py_param_type(p);
      if (p.has_default)
        sig += " = " + py_default(p.default_value);
      else if (p.is_tensor && p.optional)
        sig += " = None";
    }
  }
  if (!star) sig += ", *";
  sig += ", target: str | None = None";
  std::string names = "";
  for (const auto& p : op.params) names += "'" + p.name + "': " + p.name + ", ";
  c += "    def __init__(" + sig + ") -> None:";
  c += stub ? " ...\n" : "\n        super().__init__({" + names + "}, target=target)\n";
  std::string call = "self";
  std::string args;
  // Optional inputs default to None only after the last required one (Python's rule).
  std::size_t last_required = 0;
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    if (!op.inputs[i].optional) last_required = i + 1;
  }
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    const auto& in = op.inputs[i];
    call += ", " + in.name + ": torch.Tensor" +
            (in.optional ? (i >= last_required ? " | None = None" : " | None") : "");
    args += in.name + ", ";
  }
  bool has_out = false;
  for (const auto& o : op.outputs) has_out = has_out || o.buffer_out;
  if (has_out) call += ", *, out: torch.Tensor | None = None";
  const std::string ret = op.outputs.empty() ? "None"
                          : op.outputs.size() == 1
                              ? "torch.Tensor"
                              : "tuple[" + std::string([&] {
                                  std::string r;
                                  for (std::size_t i = 0; i < op.outputs.size(); ++i)
                                    r += (i ? ", " : "") + std::string("torch.Tensor");
                                  return r;
                                }()) +
                                    "]";
  c += "\n    def __call__(" + call + ") -> " + ret + ":";
  c += stub ? " ...\n"
            : "\n        return self._invoke((" + args + "), " + (has_out ? "out" : "None") + ")\n";
  return c;
}

std::string py_module(const std::vector<const OpInfo*>& ops, bool stub) {
  std::string m =
      "# Generated by tileops-gen from the manifest. Do not edit.\n"
      "\"\"\"The tileops op classes, one per manifest entry, mirroring the C++ classes.\"\"\"\n"
      "from __future__ import annotations\n\n"
      "from collections.abc import Sequence\n"
      "from typing import ClassVar, Literal\n\n"
      "import torch\n\n"
      "from tileops._op import BoundaryOp, CompositeOp\n\n"
      "__all__ = [";
  for (const OpInfo* o : ops) m += "'" + o->decl->name + "', ";
  m += "]\n";
  for (const OpInfo* o : ops) m += "\n\n" + py_class(*o->decl, stub);
  return m;
}

// ---- torch extension registrations --------------------------------------------------------------

std::string registrations(const std::vector<const OpInfo*>& ops) {
  std::string r =
      "// Generated by tileops-gen from the manifest. Do not edit.\n"
      "// One typed function per custom operator (effect branch); each hands its tensors to the\n"
      "// generic boundary entry. Included by the torch extension's registration source.\n\n";
  std::string defs, impls;
  for (const OpInfo* info : ops) {
    const OpDecl& op = *info->decl;
    for (const auto& co : compile_ops(op)) {
      const std::string fn = "boundary_" + co.name;
      const std::string key = instance_key_argument(op);
      std::string params = "std::string " + key;
      std::string ins = "{";
      for (std::size_t i = 0; i < op.inputs.size(); ++i) {
        const auto& in = op.inputs[i];
        params +=
            std::string(", ") + (in.optional ? "std::optional<Tensor> " : "Tensor ") + in.name;
        ins += (i ? ", " : "") +
               (in.optional ? "opt(" + in.name + ")" : "std::optional<Tensor>(" + in.name + ")");
      }
      ins += "}";
      std::size_t n_ret = op.outputs.size() - (co.out ? 1 : 0);
      if (co.out) params += ", Tensor out";
      std::string ret_type = n_ret == 0 ? "void" : n_ret == 1 ? "Tensor" : "std::tuple<";
      if (n_ret > 1) {
        for (std::size_t i = 0; i < n_ret; ++i) ret_type += (i ? ", " : "") + std::string("Tensor");
        ret_type += ">";
      }
      r += "static " + ret_type + " " + fn + "(" + params + ") {\n";
      r += "  std::vector<Tensor> r = run_boundary(" + key + ", " + ins + ", " +
           (co.out ? "std::optional<Tensor>(out)" : "std::nullopt") + ", " + std::to_string(n_ret) +
           ");\n";
      if (n_ret == 0) {
        r += "  (void)r;\n";
      } else if (n_ret == 1) {
        r += "  return r[0];\n";
      } else {
        r += "  return {";
        for (std::size_t i = 0; i < n_ret; ++i)
          r += (i ? ", " : "") + std::string("r[") + std::to_string(i) + "]";
        r += "};\n";
      }
      r += "}\n\n";
      defs += "  m.def(\"" + co.name + co.schema + "\");\\\n";
      impls += "  m.impl(\"" + co.name + "\", TORCH_BOX(&" + fn + "));\\\n";
    }
  }
  r += "#define TILEOPS_BOUNDARY_DEFS(m) \\\n" + defs + "\n";
  r += "#define TILEOPS_BOUNDARY_IMPLS(m) \\\n" + impls + "\n";
  return r;
}

}  // namespace

std::vector<GeneratedFile> generate_python(const std::vector<const OpInfo*>& ops) {
  std::string json = "[\n";
  for (std::size_t i = 0; i < ops.size(); ++i) json += (i ? ",\n" : "") + op_json(*ops[i]->decl);
  json += "\n]\n";
  std::vector<const OpInfo*> boundary;
  for (const OpInfo* o : ops) {
    if (has_compile_boundary(*o->decl)) boundary.push_back(o);
  }
  return {{"python/tileops/_manifest.json", json},
          {"python/tileops/ops.py", py_module(ops, false)},
          {"python/tileops/ops.pyi", py_module(ops, true)},
          {"python/boundary_ops.inc", registrations(boundary)}};
}

}  // namespace tgen
