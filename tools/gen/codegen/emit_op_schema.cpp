// The static OpSchema of an op and its parameter maps (Params to ParamMap and back).
#include "codegen/boundary.h"
#include "codegen/op_emitter.h"

namespace tgen::op_emit {

void OpEmitter::schema(Code& c) {
  c.open("const ::tileops::OpSchema& " + name_ + "_schema()");
  c.open("static const ::tileops::OpSchema schema = []");
  c.line("::tileops::OpSchema s;");
  c.line("s.name = " + q(name_) + ";");
  c.line("s.family = " + q(op_.family) + ";");
  c.line("s.status = " + q(op_.status) + ";");
  c.line("s.ref_api = " + q(op_.ref_api) + ";");
  c.line("s.doc = " + q(op_.doc) + ";");
  c.line("s.source = " + q(op_.source) + ";");
  c.open("s.indices =");
  for (const auto& s : info_.slots) c.line("{" + q(s.name) + ", " + q(s.kind_text) + "},");
  c.close(";");
  c.open("s.params =");
  for (const auto& p : op_.params) {
    std::string l = "{.name = " + q(p.name) + ", .type = " + q(p.type.text);
    if (p.has_default)
      l += ", .has_default = true, .default_value = " + value_as_value(p.default_value);
    if (p.kw_only) l += ", .kw_only = true";
    if (p.is_tensor) {
      l += ", .is_tensor = true, .tensor_dtype = " + q(p.dtype) +
           ", .tensor_shape = " + q(p.shape.text);
      if (p.optional) l += ", .optional = true";
    }
    if (!p.doc.empty()) l += ", .doc = " + q(p.doc);
    c.line(l + "},");
  }
  c.close(";");
  for (const bool out : {false, true}) {
    c.open(out ? "s.outputs =" : "s.inputs =");
    for (const auto& t : out ? op_.outputs : op_.inputs) {
      std::string l =
          "{.name = " + q(t.name) + ", .dtype = " + q(t.dtype) + ", .shape = " + q(t.shape.text);
      if (t.optional) l += ", .optional = true";
      if (t.mutated) l += ", .mutated = true";
      if (t.contiguous) l += ", .contiguous = true";
      if (t.buffer_out) l += ", .buffer_out = true";
      c.line(l + "},");
    }
    c.close(";");
  }
  c.open("s.lets =");
  for (const auto& l : op_.lets) c.line("{" + q(l.name) + ", " + q(l.expr.text) + "},");
  c.close(";");
  c.open("s.shape_rules =");
  for (const auto& r : op_.shape_rules) c.line(q(r.text) + ",");
  c.close(";");
  c.open("s.dtype_combos =");
  for (const auto& row : op_.dtype_combos) {
    std::vector<std::string> cells;
    for (const auto& [k, v] : row.cells) cells.push_back("{" + q(k) + ", " + cpp_dtype(v) + "}");
    c.line("{" + join(cells, ", ") + "},");
  }
  c.close(";");
  c.line("s.roofline_flops = " + q(op_.flops.text) + ";");
  c.line("s.roofline_bytes = " + q(op_.has_bytes ? op_.bytes.text : "") + ";");
  c.open("s.workloads =");
  for (const auto& row : info_.rows) {
    std::vector<std::string> values, some, cases;
    for (const auto& [k, v] : row.values)
      values.push_back("{" + q(k) + ", " + value_as_value(v) + "}");
    for (const auto& s : row.some) some.push_back(q(s));
    for (const auto& dc : row.dtype_cases) {
      std::vector<std::string> cells;
      for (const auto& [k, v] : dc) cells.push_back("{" + q(k) + ", " + cpp_dtype(v) + "}");
      cases.push_back("{" + join(cells, ", ") + "}");
    }
    c.line("{.label = " + q(row.label) + ",");
    c.line(" .values = {" + join(values, ", ") + "},");
    c.line(" .some = {" + join(some, ", ") + "},");
    c.line(" .dtype_cases = {" + join(cases, ", ") + "}},");
  }
  c.close(";");
  c.open("s.composition =");
  for (const auto& st : op_.stages) {
    std::string l = "{.name = " + q(st.name);
    if (!st.op.empty()) l += ", .op = " + q(st.op);
    if (!st.kernel.empty()) l += ", .kernel = " + q(st.kernel);
    if (st.optional) l += ", .optional = true";
    c.line(l + "},");
  }
  c.close(";");
  c.open("s.compile_op_names =");
  for (const auto& co : compile_ops(op_)) c.line(q("tileops::" + co.name) + ",");
  c.close(";");
  c.open("s.compile_op_schemas =");
  for (const auto& co : compile_ops(op_)) c.line(q(co.schema) + ",");
  c.close(";");
  c.line("s.eval_roofline = &" + name_ + "_eval_roofline;");
  if (op_.has_peak) c.line("s.roof_key = &" + name_ + "_roof_key;");
  c.line("s.instantiate = &" + name_ + "_instantiate;");
  c.line("return s;");
  c.close("();");
  c.line("return schema;");
  c.close();
  c.line();
}

void OpEmitter::param_values(Code& c) {
  c.open("::tileops::ParamMap " + name_ + "_param_values(const " + name_ + "Params& p)");
  c.line("::tileops::ParamMap m;");
  if (op_.params.empty()) c.line("(void)p;");  // an op without parameters
  for (const auto& p : op_.params) {
    std::string v;
    if (p.is_tensor) {
      v = "p." + p.name + ".defined() ? ::tileops::Value(p." + p.name +
          ") : ::tileops::Value(::tileops::NoneValue{})";
    } else if (p.type.tag == ParamType::Tag::optional) {
      v = "p." + p.name + " ? ::tileops::Value(*p." + p.name +
          ") : ::tileops::Value(::tileops::NoneValue{})";
    } else {
      v = "::tileops::Value(p." + p.name + ")";
    }
    c.line("m.emplace(" + q(p.name) + ", " + v + ");");
  }
  c.line("return m;");
  c.close();
  c.line();
}

void OpEmitter::params_from_map(Code& c) {
  c.open(name_ + "Params " + name_ + "_params_from_map(const ::tileops::ParamMap& m)");
  c.line("[[maybe_unused]] static constexpr std::string_view kOp = " + q(name_) + ";");
  std::vector<std::string> names;
  for (const auto& p : op_.params) names.push_back(p.name);
  if (names.empty()) {
    c.open("if (!m.empty())");
    c.line("ex::fail_param(kOp, m.begin()->first, \"is unknown (the op takes no parameters)\");");
    c.close();
  } else {
    std::vector<std::string> lits;
    for (const auto& n : names) lits.push_back(q(n));
    c.line("static constexpr std::string_view kNames[] = {" + join(lits, ", ") + "};");
    c.open("for (const auto& [name, value] : m)");
    c.line("bool known = false;");
    c.line("for (std::string_view n : kNames) known = known || n == name;");
    c.line("if (!known) ex::fail_param(kOp, name, " +
           q("is unknown (parameters: " + join(names, ", ") + ")") + ");");
    c.close();
  }
  c.line(name_ + "Params p;");
  for (const auto& p : op_.params) {
    c.open("if (auto it = m.find(" + q(p.name) + "); it != m.end())");
    const std::string tt = q(p.type.text);
    if (p.is_tensor) {
      c.open("if (!std::holds_alternative<::tileops::NoneValue>(it->second))");
      c.line("p." + p.name + " = ex::value_to<::tileops::Tensor>(it->second, kOp, " + q(p.name) +
             ", " + tt + ");");
      c.close();
    } else if (p.type.tag == ParamType::Tag::optional) {
      c.open("if (std::holds_alternative<::tileops::NoneValue>(it->second))");
      c.line("p." + p.name + " = std::nullopt;");
      c.dedent();
      c.line("} else {");
      c.indent();
      c.line("p." + p.name + " = ex::value_to<" + field_type(*p.type.inner) +
             ">(it->second, kOp, " + q(p.name) + ", " + tt + ");");
      c.close();
    } else {
      c.line("p." + p.name + " = ex::value_to<" + field_type(p.type) + ">(it->second, kOp, " +
             q(p.name) + ", " + tt + ");");
    }
    if (!p.has_default && !p.is_tensor) {
      c.dedent();
      c.line("} else {");
      c.indent();
      c.line("ex::fail_param(kOp, " + q(p.name) + ", \"is required (it has no default)\");");
    }
    c.close();
  }
  c.line("return p;");
  c.close();
  c.line();
}

}  // namespace tgen::op_emit
