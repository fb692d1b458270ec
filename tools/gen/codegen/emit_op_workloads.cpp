// The roofline of a call record and the instantiation of a workload row (params, random
// construction-time tensors, input specs).
#include "codegen/op_emitter.h"
#include "codegen/op_names.h"

namespace tgen::op_emit {

void OpEmitter::eval_roofline(Code& c) {
  c.open("::tileops::Roofline " + name_ + "_eval_roofline(const ::tileops::SignatureCall& c)");
  c.line("[[maybe_unused]] static constexpr std::string_view kOp = " + q(name_) + ";");
  RooflineNames names(info_);
  c.line("::tileops::Roofline r;");
  if (op_.flops.ast)
    c.line("r.flops = static_cast<double>(" + emit_cpp(*op_.flops.ast, names) + ");");
  if (op_.has_bytes && op_.bytes.ast) {
    c.line("r.bytes = static_cast<double>(" + emit_cpp(*op_.bytes.ast, names) + ");");
  } else {
    c.line("r.bytes = c.traffic_bytes();");
  }
  c.line("return r;");
  c.close();
  c.line();
}

void OpEmitter::roof_key(Code& c) {
  if (!op_.has_peak) return;
  c.open("std::string " + name_ + "_roof_key([[maybe_unused]] const ::tileops::SignatureCall* c)");
  if (!op_.peak.index.empty()) {
    std::size_t k = 0;
    for (std::size_t i = 0; i < info_.slots.size(); ++i) {
      if (info_.slots[i].name == op_.peak.index) k = i;
    }
    c.line("const ::tileops::DType* d =");
    c.line("    c != nullptr ? std::get_if<::tileops::DType>(&c->indices[" + std::to_string(k) +
           "]) : nullptr;");
    for (const auto& [dtype, key] : op_.peak.by_dtype) {
      c.line("if (d != nullptr && *d == " + cpp_dtype(dtype) + ") return " + q(key) + ";");
    }
  }
  c.line("return " + q(op_.peak.key) + ";");
  c.close();
  c.line();
}

void OpEmitter::instantiate(Code& c) {
  c.open("::tileops::InstantiatedCase " + name_ +
         "_instantiate(const ::tileops::WorkloadRow& row, std::size_t dtype_case)");
  c.line("[[maybe_unused]] static constexpr std::string_view kOp = " + q(name_) + ";");
  c.line("::tileops::ParamMap given;");
  std::vector<std::string> param_names;
  for (const auto& p : op_.params) {
    if (!p.is_tensor) param_names.push_back(p.name);
  }
  for (const auto& f : op_.forall) {
    if (f.k == IndexDecl::K::dim) c.line("std::optional<std::int64_t> o_" + f.name + ";");
    if (f.k == IndexDecl::K::shape) c.line("std::optional<::tileops::Sizes> o_" + f.name + ";");
    if (f.k == IndexDecl::K::dtype) c.line("std::optional<::tileops::DType> o_" + f.name + ";");
  }
  c.open("for (const auto& [name, value] : row.values)");
  bool first = true;
  for (const auto& f : op_.forall) {
    if (f.k == IndexDecl::K::dtype) continue;
    const std::string type = f.k == IndexDecl::K::dim ? "std::int64_t" : "::tileops::Sizes";
    c.line(std::string(first ? "if" : "} else if") + " (name == " + q(f.name) + ") {");
    c.indent();
    c.line("o_" + f.name + " = ex::value_to<" + type + ">(value, kOp, " + q(f.name) + ", " +
           q(f.kind_text) + ");");
    c.dedent();
    first = false;
  }
  c.line(std::string(first ? "{" : "} else {"));
  c.indent();
  c.line("given.emplace(std::string(name), value);");
  c.close();
  c.close();
  c.open(
      "if (dtype_case >= row.dtype_cases.size() && !(dtype_case == 0 && "
      "row.dtype_cases.empty()))");
  c.line(
      "ex::fail(std::string(kOp) + \": workload row '\" + std::string(row.label) + \"' has no "
      "dtype case \" + std::to_string(dtype_case));");
  c.close();
  bool any_dtype = false;
  for (const auto& f : op_.forall) any_dtype = any_dtype || f.k == IndexDecl::K::dtype;
  if (any_dtype) {
    c.open("if (dtype_case < row.dtype_cases.size())");
    c.open("for (const auto& [name, dtype] : row.dtype_cases[dtype_case])");
    for (const auto& f : op_.forall) {
      if (f.k == IndexDecl::K::dtype)
        c.line("if (name == " + q(f.name) + ") o_" + f.name + " = dtype;");
    }
    c.close();
    c.close();
  }
  c.line(name_ + "Params p = " + name_ + "_params_from_map(given);");
  for (const auto& t : op_.inputs) {
    if (!t.optional) continue;
    c.line("bool has_" + t.name + " = false;");
  }
  bool any_optional_ctor = false;
  for (const auto& p : op_.params)
    any_optional_ctor = any_optional_ctor || (p.is_tensor && p.optional);
  bool any_optional = any_optional_ctor;
  for (const auto& t : op_.inputs) any_optional = any_optional || t.optional;
  if (any_optional_ctor) {
    for (const auto& p : op_.params) {
      if (p.is_tensor && p.optional) c.line("bool make_" + p.name + " = false;");
    }
  }
  if (any_optional) {
    c.open("for (std::string_view s : row.some)");
    for (const auto& t : op_.inputs) {
      if (t.optional) c.line("if (s == " + q(t.name) + ") has_" + t.name + " = true;");
    }
    for (const auto& p : op_.params) {
      if (p.is_tensor && p.optional)
        c.line("if (s == " + q(p.name) + ") make_" + p.name + " = true;");
    }
    c.close();
  }
  RowNames names(info_);
  for (const auto& n : info_.let_order) {
    for (const auto& l : op_.lets) {
      if (l.name != n || !l.expr.ast) continue;
      c.line("[[maybe_unused]] const auto l_" + n + " = [&]() { return " +
             emit_cpp(*l.expr.ast, names) + "; };");
    }
  }
  // Construction-time tensors: random values in [1, 2), seeded from the label.
  for (std::size_t i = 0; i < op_.params.size(); ++i) {
    const ParamDecl& p = op_.params[i];
    if (!p.is_tensor) continue;
    if (p.optional)
      c.open("if (make_" + p.name + ")");
    else
      c.open("");
    shape_build(c, "shape", info_.ctor_axes[i], "", "", names);
    c.line("p." + p.name + " = ::tileops::Tensor::rand(shape, " +
           dtype_value(info_.ctor_dtype[i], names) + ", ex::seed_from(row.label, " + q(p.name) +
           "), ::tileops::Device::cpu(), 1.0, 2.0);");
    c.close();
  }
  c.line("::tileops::InstantiatedCase ic;");
  c.line("ic.inputs.resize(" + std::to_string(op_.inputs.size()) + ");");
  for (const auto& cb : info_.combos) {
    if (info_.combos.size() == 1) {
      c.open("");
    } else {
      c.open("if (" + combo_condition(cb) + ")");
    }
    for (std::size_t i = 0; i < op_.inputs.size(); ++i) {
      if (!cb.input_present[i]) continue;
      const TensorDecl& t = op_.inputs[i];
      c.open("");
      shape_build(c, "shape", cb.input_axes[i], "", "", names);
      c.line("ic.inputs[" + std::to_string(i) + "] = ::tileops::InstantiatedCase::InputSpec{" +
             dtype_value(info_.input_dtype[i], names) + ", std::move(shape)};");
      c.close();
      (void)t;
    }
    c.close();
  }
  c.line("ic.params = " + name_ + "_param_values(p);");
  c.line("return ic;");
  c.close();
  c.line();
}

}  // namespace tgen::op_emit
