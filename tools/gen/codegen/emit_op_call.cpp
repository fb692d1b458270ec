// The signature check of a call: one block per branch and presence combination, each filling
// the SignatureCall record (docs/design/manifest.md, What is generated).
#include <algorithm>

#include "codegen/op_emitter.h"
#include "codegen/op_names.h"

namespace tgen::op_emit {

std::string OpEmitter::combo_condition(const Combo& cb) const {
  std::vector<std::string> parts;
  for (const auto& [n, v] : cb.discr) {
    if (v.is<bool>()) {
      parts.push_back(v.as<bool>() ? "p." + n : "!p." + n);
    } else {
      parts.push_back("p." + n + " == std::string_view{" + q(v.as<std::string>()) + "}");
    }
  }
  for (std::size_t i = 0; i < op_.inputs.size(); ++i) {
    if (op_.inputs[i].optional)
      parts.push_back((cb.input_present[i] ? "has_" : "!has_") + op_.inputs[i].name);
  }
  for (std::size_t i = 0; i < op_.params.size(); ++i) {
    if (op_.params[i].is_tensor && op_.params[i].optional) {
      parts.push_back((cb.ctor_present[i] ? "p." : "!p.") + op_.params[i].name + ".defined()");
    }
  }
  return join(parts, " && ");
}

void OpEmitter::shape_build(Code& c, const std::string& var, const std::vector<ShapeItem>& axes,
                            const std::string& output, const std::string& decl, CppNames& names) {
  c.line("::tileops::Sizes " + var + ";");
  const bool has_splice =
      std::any_of(axes.begin(), axes.end(), [](const ShapeItem& a) { return a.splice; });
  if (axes.size() > 1 && !has_splice) {
    c.line(var + ".reserve(" + std::to_string(axes.size()) + ");");
  }
  for (const auto& a : axes) {
    if (a.splice) {
      c.line("ex::append(" + var + ", " + emit_cpp(*a.expr, names) + ");");
    } else if (output.empty()) {
      c.line(var + ".push_back(" + emit_cpp(*a.expr, names) + ");");
    } else {
      c.line(var + ".push_back(ex::output_axis(kOp, " + q(output) + ", " + q(decl) + ", ex::len(" +
             var + "), " + emit_cpp(*a.expr, names) + "));");
    }
  }
}

void OpEmitter::combo_body(Code& c, const Combo& cb) {
  std::set<std::string> known;
  for (const auto& p : op_.params) known.insert(p.name);
  // (3) dtype and shape unification, lets as soon as computable.
  steps(c, cb.plan, known);
  LocalNames names(info_, known);
  // (4) shape rules (those not checked at construction), then dtype_combos.
  for (std::size_t i = 0; i < cb.rules.size(); ++i) {
    if (cb.rules[i]) rule_check(c, *cb.rules[i], op_.shape_rules[i].text, names);
  }
  if (!op_.dtype_combos.empty()) dtype_combos(c, known, names);
  // (5) contiguity.
  for (std::size_t i = 0; i < op_.inputs.size(); ++i) {
    if (!op_.inputs[i].contiguous || !cb.input_present[i]) continue;
    c.line("if (!t_" + op_.inputs[i].name + ".is_contiguous()) ex::fail_contiguous(kOp, " +
           q(op_.inputs[i].name) + ");");
  }
  // (6) the call device.
  c.line("::tileops::Device device = ::tileops::Device::cpu();");
  c.line("std::string_view device_from;");
  for (std::size_t i = 0; i < op_.inputs.size(); ++i) {
    if (!cb.input_present[i]) continue;
    c.line("ex::join_device(kOp, device, device_from, t_" + op_.inputs[i].name + ", " +
           q(op_.inputs[i].name) + ");");
  }
  bool any_ctor = false;
  for (std::size_t i = 0; i < op_.params.size(); ++i) any_ctor = any_ctor || cb.ctor_present[i];
  if (any_ctor) {
    c.open("if (device_from.empty())");
    for (std::size_t i = 0; i < op_.params.size(); ++i) {
      if (!cb.ctor_present[i]) continue;
      c.line("ex::join_device(kOp, device, device_from, p." + op_.params[i].name + ", " +
             q(op_.params[i].name) + ");");
    }
    c.close();
  }
  // Output inference.
  for (std::size_t i = 0; i < op_.outputs.size(); ++i) {
    const TensorDecl& o = op_.outputs[i];
    shape_build(c, "o_" + o.name, cb.output_axes[i], o.name, cb.output_decl[i], names);
    c.line("const ::tileops::DType od_" + o.name + " = " +
           dtype_value(info_.output_dtype[i], names) + ";");
  }
  // (7) the out buffer.
  int buf_index = -1;
  const TensorDecl* buf = buffer_output(&buf_index);
  if (buf) {
    c.open("if (has_out)");
    c.line("const ::tileops::Tensor& out = *a.outs[0];");
    c.open("if (!(out.sizes() == o_" + buf->name + "))");
    c.line("ex::fail_out(kOp, " + q(buf->name) + ", \"shape\", ex::repr(o_" + buf->name +
           "), ex::repr(out.sizes()));");
    c.close();
    c.open("if (out.dtype() != od_" + buf->name + ")");
    c.line("ex::fail_out(kOp, " + q(buf->name) + ", \"dtype\", ex::repr(od_" + buf->name +
           "), ex::repr(out.dtype()));");
    c.close();
    c.open("if (!(out.device() == device))");
    c.line("ex::fail_out(kOp, " + q(buf->name) +
           ", \"device\", device.str(), out.device().str());");
    c.close();
    c.close();
  }
  // (8) the record.
  c.line("::tileops::SignatureCall call(&" + name_ + "_schema());");
  c.line("call.indices.reserve(" + std::to_string(info_.slots.size()) + ");");
  for (const auto& s : info_.slots) {
    std::string v;
    if (s.src == IndexSlot::Src::param) {
      if (s.kind.is(Tag::maybe)) {
        v = "p." + s.name + " ? ::tileops::Value(*p." + s.name +
            ") : ::tileops::Value(::tileops::NoneValue{})";
      } else {
        v = "::tileops::Value(p." + s.name + ")";
      }
    } else if (!known.count(s.name)) {
      v = "::tileops::NoneValue{}";
    } else {
      const std::string local = (s.src == IndexSlot::Src::let ? "l_" : "v_") + s.name;
      v = s.kind.is_stringy() ? "std::string(" + local + ")" : local;
    }
    c.line("call.indices.emplace_back(" + v + ");  // " + s.name);
  }
  c.line("call.device = device;");
  std::size_t ntensors = op_.outputs.size();
  for (std::size_t i = 0; i < op_.inputs.size(); ++i) ntensors += cb.input_present[i] ? 1 : 0;
  for (std::size_t i = 0; i < op_.params.size(); ++i) ntensors += cb.ctor_present[i] ? 1 : 0;
  c.line("call.tensors.reserve(" + std::to_string(ntensors) + ");");
  for (std::size_t i = 0; i < op_.inputs.size(); ++i) {
    if (!cb.input_present[i]) continue;
    const TensorDecl& t = op_.inputs[i];
    c.line("call.tensors.push_back({.name = " + q(t.name) + ", .shape = s_" + t.name +
           ", .dtype = t_" + t.name + ".dtype(), .reads = 1, .writes = " + (t.mutated ? "1" : "0") +
           ", .role = ::tileops::TensorRecord::Role::input});");
  }
  for (const auto& o : op_.outputs) {
    c.line("call.tensors.push_back({.name = " + q(o.name) + ", .shape = std::move(o_" + o.name +
           "), .dtype = od_" + o.name +
           ", .reads = 0, .writes = 1, .role = ::tileops::TensorRecord::Role::output});");
  }
  for (std::size_t i = 0; i < op_.params.size(); ++i) {
    if (!cb.ctor_present[i]) continue;
    const ParamDecl& p = op_.params[i];
    c.line("call.tensors.push_back({.name = " + q(p.name) + ", .shape = s_" + p.name +
           ", .dtype = p." + p.name +
           ".dtype(), .reads = 1, .writes = 0, .role = "
           "::tileops::TensorRecord::Role::construction});");
  }
  std::vector<std::string> written, present;
  for (std::size_t i = 0; i < op_.inputs.size(); ++i) {
    if (op_.inputs[i].mutated && cb.input_present[i]) written.push_back(std::to_string(i));
    present.push_back(cb.input_present[i] ? "true" : "false");
  }
  if (!written.empty()) c.line("call.written = {" + join(written, ", ") + "};");
  c.line(buf ? "call.has_out = has_out;" : "call.has_out = false;");
  c.line("call.present = {" + join(present, ", ") + "};");
  if (!op_.stages.empty()) {
    std::vector<std::string> st;
    for (const auto& s : op_.stages) st.push_back("{" + q(s.name) + ", {}}");
    c.line("call.stages = {" + join(st, ", ") + "};");
  }
  c.line("return call;");
}

void OpEmitter::dtype_combos(Code& c, const std::set<std::string>& known, CppNames& names) {
  // Columns readable on this branch: known DType indices and dtype params.
  std::vector<std::string> cols;
  for (const auto& [k, v] : op_.dtype_combos.front().cells) {
    const Symbol* s = info_.symbols.find(k);
    if (s->cat == Symbol::Cat::param || known.count(k)) cols.push_back(k);
  }
  if (cols.empty()) return;
  std::vector<std::string> rows, allowed;
  for (const auto& row : op_.dtype_combos) {
    std::vector<std::string> cells, text;
    for (const auto& [k, v] : row.cells) {
      text.push_back(k + ": " + v);
      if (std::find(cols.begin(), cols.end(), k) == cols.end()) continue;
      cells.push_back(names.value(k, false) + " == " + cpp_dtype(v));
    }
    rows.push_back("(" + join(cells, " && ") + ")");
    allowed.push_back("{" + join(text, ", ") + "}");
  }
  std::string got = "std::string(";
  for (std::size_t i = 0; i < cols.size(); ++i) {
    got += q(std::string(i ? ", " : "{") + cols[i] + ": ") + (i ? "" : ")") + " + ex::repr(" +
           names.value(cols[i], false) + ") + ";
  }
  got += "\"}\"";
  c.open("if (!(" + join(rows, " ||\n          ") + "))");
  c.line("ex::fail_combo(kOp, " + got + ", " + q(join(allowed, ", ")) + ");");
  c.close();
}

void OpEmitter::check_call(Code& c) {
  // p is unread when no shape, rule or let reads a parameter.
  c.open("::tileops::SignatureCall " + name_ + "_check_call([[maybe_unused]] const " + name_ +
         "Params& p, const ::tileops::CallArgs& a)");
  c.line("static constexpr std::string_view kOp = " + q(name_) + ";");
  int buf_index = -1;
  const TensorDecl* buf = buffer_output(&buf_index);
  c.open("if (a.inputs.size() != " + std::to_string(op_.inputs.size()) + " || a.outs.size() > " +
         (buf ? "1" : "0") + ")");
  c.line("ex::fail_arity(kOp, a.inputs.size(), " + std::to_string(op_.inputs.size()) +
         ", a.outs.size(), " + (buf ? "1" : "0") + ");");
  c.close();
  c.open("try");
  // (1) presence.
  for (std::size_t i = 0; i < op_.inputs.size(); ++i) {
    const TensorDecl& t = op_.inputs[i];
    c.line("const ::tileops::Tensor& t_" + t.name + " = *a.inputs[" + std::to_string(i) + "];");
    if (t.optional) {
      c.line("const bool has_" + t.name + " = t_" + t.name + ".defined();");
    } else {
      c.line("if (!t_" + t.name + ".defined()) ex::fail_required(kOp, \"input\", " + q(t.name) +
             ");");
    }
  }
  if (buf)
    c.line("const bool has_out = !a.outs.empty() && a.outs[0] != nullptr && a.outs[0]->defined();");
  // (2) the branch, then one block per branch and presence combination.
  if (info_.combos.size() == 1) {
    c.open("");
    combo_body(c, info_.combos[0]);
    c.close();
  } else {
    for (const auto& cb : info_.combos) {
      c.line("// " + cb.description);
      c.open("if (" + combo_condition(cb) + ")");
      combo_body(c, cb);
      c.close();
    }
  }
  c.dedent();
  c.line("} catch (const ::tileops::SignatureError& e) {");
  c.indent();
  c.line("ex::rethrow_for(kOp, e);");
  c.close();
  if (info_.combos.size() != 1) {
    c.line("ex::fail(std::string(kOp) + \": no signature branch matches the parameters\");");
  } else {
    c.line("ex::fail(std::string(kOp) + \": unreachable\");");
  }
  c.close();
  c.line();
}

}  // namespace tgen::op_emit
