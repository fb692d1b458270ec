// Emission of one op's generated C++ (see codegen.h).
#include <algorithm>
#include <set>

#include "codegen/boundary.h"
#include "codegen/code.h"
#include "codegen/codegen.h"
#include "dtypes.h"
#include "expr/emit_cpp.h"
#include "manifest/types.h"
#include "manifest/workloads.h"

namespace tgen {

namespace {

using Tag = Kind::Tag;

std::string q(std::string_view s) {
  return cpp_string(s);
}

// C++ type of a param field.
std::string field_type(const ParamType& t) {
  using T = ParamType::Tag;
  switch (t.tag) {
    case T::int_:
      return "std::int64_t";
    case T::float_:
      return "double";
    case T::bool_:
      return "bool";
    case T::str:
    case T::enum_:
      return "std::string";
    case T::int_list:
      return "::tileops::Sizes";
    case T::dtype:
      return "::tileops::DType";
    case T::tensor:
      return "::tileops::Tensor";
    case T::optional:
      return "std::optional<" + field_type(*t.inner) + ">";
  }
  return "void";
}

// C++ text of a build-time value as a value of param type `t` (field initialiser).
std::string value_cpp(const EValue& v) {
  if (v.is<NoneValue>()) return "std::nullopt";
  if (v.is<bool>()) return v.as<bool>() ? "true" : "false";
  if (v.is<std::int64_t>()) return "std::int64_t{" + std::to_string(v.as<std::int64_t>()) + "}";
  if (v.is<double>()) return cpp_double(v.as<double>());
  if (v.is<std::string>()) return "std::string(" + q(v.as<std::string>()) + ")";
  if (v.is<DTypeValue>()) return cpp_dtype(v.as<DTypeValue>().name);
  if (v.is<Seq>()) {
    std::string out = "::tileops::Sizes{";
    const Seq& s = v.as<Seq>();
    for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "}";
  }
  return "{}";
}

// A build-time value as a tileops::Value.
std::string value_as_value(const EValue& v) {
  if (v.is<NoneValue>()) return "::tileops::Value(::tileops::NoneValue{})";
  return "::tileops::Value(" + value_cpp(v) + ")";
}

// C++ type a slot's value has inside tileops::Value.
std::string slot_type(const Kind& k) {
  if (k.is(Tag::maybe)) return slot_type(*k.inner);
  if (k.is_stringy()) return "std::string";
  return cpp_type(k);
}

std::string dtype_list(const std::vector<std::string>& dtypes) {
  std::string out = "{";
  for (std::size_t i = 0; i < dtypes.size(); ++i) out += (i ? ", " : "") + cpp_dtype(dtypes[i]);
  return out + "}";
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// ---- name spellings per context ------------------------------------------------------------

// Inside X_check_params / X_check_call: params through `p`, solved indices and lets as locals.
class LocalNames : public CppNames {
 public:
  LocalNames(const OpInfo& info, const std::set<std::string>& known) : info_(info), known_(known) {}
  std::string value(const std::string& name, bool payload) override {
    const Symbol* s = info_.symbols.find(name);
    if (s && s->cat == Symbol::Cat::param) return payload ? "(*p." + name + ")" : "p." + name;
    const std::string local = (s && s->cat == Symbol::Cat::let ? "l_" : "v_") + name;
    if (known_.count(name)) return local;
    return "ex::unsolved<" + slot_type(s ? s->kind : Kind::int_()) + ">(kOp, " + q(name) + ")";
  }
  std::string present(const std::string& name) override {
    const Symbol* s = info_.symbols.find(name);
    if (s && s->cat == Symbol::Cat::input) return "has_" + name;
    if (s && s->cat == Symbol::Cat::ctor_tensor) return "p." + name + ".defined()";
    return "p." + name + ".has_value()";
  }
  std::string bytes(const std::string&) override { return "0.0"; }

 private:
  const OpInfo& info_;
  const std::set<std::string>& known_;
};

// Inside eval_roofline: everything read positionally from call.indices.
class RooflineNames : public CppNames {
 public:
  explicit RooflineNames(const OpInfo& info) : info_(info) {}
  std::string value(const std::string& name, bool) override {
    const IndexSlot* slot = nullptr;
    std::size_t k = 0;
    for (std::size_t i = 0; i < info_.slots.size(); ++i) {
      if (info_.slots[i].name == name) {
        slot = &info_.slots[i];
        k = i;
      }
    }
    if (!slot) return "ex::unsolved<std::int64_t>(kOp, " + q(name) + ")";
    return "ex::index_as<" + slot_type(slot->kind) + ">(c.indices[" + std::to_string(k) +
           "], kOp, " + q(name) + ")";
  }
  std::string present(const std::string& name) override {
    const OpDecl& op = *info_.decl;
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      if (op.inputs[i].name == name) return "c.present[" + std::to_string(i) + "]";
    }
    for (std::size_t i = 0; i < info_.slots.size(); ++i) {
      if (info_.slots[i].name == name) {
        return "!std::holds_alternative<::tileops::NoneValue>(c.indices[" + std::to_string(i) +
               "])";
      }
    }
    return "(c.tensor(" + q(name) + ") != nullptr)";
  }
  std::string bytes(const std::string& name) override {
    return "ex::record_bytes(c.tensor(" + q(name) + "))";
  }

 private:
  const OpInfo& info_;
};

// Inside instantiate: row indices through optionals, lets through lambdas.
class RowNames : public CppNames {
 public:
  explicit RowNames(const OpInfo& info) : info_(info) {}
  std::string value(const std::string& name, bool payload) override {
    const Symbol* s = info_.symbols.find(name);
    if (s && s->cat == Symbol::Cat::param) return payload ? "(*p." + name + ")" : "p." + name;
    if (s && s->cat == Symbol::Cat::let) return "l_" + name + "()";
    return "ex::need(o_" + name + ", kOp, " + q(name) + ")";
  }
  std::string present(const std::string& name) override {
    const Symbol* s = info_.symbols.find(name);
    if (s && s->cat == Symbol::Cat::input) return "has_" + name;
    if (s && s->cat == Symbol::Cat::ctor_tensor) return "p." + name + ".defined()";
    return "p." + name + ".has_value()";
  }
  std::string bytes(const std::string&) override { return "0.0"; }

 private:
  const OpInfo& info_;
};

// ---- the emitter ----------------------------------------------------------------------------

class OpEmitter {
 public:
  explicit OpEmitter(const OpInfo& info) : info_(info), op_(*info.decl), name_(op_.name) {}

  std::string header() {
    Code c;
    params_struct(c);
    c.line("namespace detail {");
    c.line("const ::tileops::OpSchema& " + name_ + "_schema();");
    c.line("void " + name_ + "_check_params(const void* params);");
    c.line("::tileops::ParamMap " + name_ + "_param_values(const " + name_ + "Params& p);");
    c.line(name_ + "Params " + name_ + "_params_from_map(const ::tileops::ParamMap& m);");
    c.line("::tileops::SignatureCall " + name_ + "_check_call(const " + name_ +
           "Params& p, const ::tileops::CallArgs& a);");
    c.line("}  // namespace detail");
    c.line();
    traits_struct(c);
    base_class(c);
    return c.str();
  }

  std::string source() {
    Code c;
    c.line("// ---- " + name_ + " " +
           std::string(60 - std::min<std::size_t>(name_.size(), 50), '-'));
    c.line();
    c.line("namespace {");
    c.line("::tileops::Roofline " + name_ + "_eval_roofline(const ::tileops::SignatureCall& c);");
    c.line("::tileops::InstantiatedCase " + name_ +
           "_instantiate(const ::tileops::WorkloadRow& row, std::size_t dtype_case);");
    c.line("}  // namespace");
    c.line();
    schema(c);
    check_params(c);
    param_values(c);
    params_from_map(c);
    check_call(c);
    c.line("namespace {");
    c.line();
    eval_roofline(c);
    instantiate(c);
    c.line("}  // namespace");
    c.line();
    return c.str();
  }

 private:
  // ---- header ----

  void doc_comment(Code& c, const std::string& doc, const std::string& prefix = "/// ") {
    if (doc.empty()) return;
    std::size_t start = 0;
    while (start <= doc.size()) {
      const auto nl = doc.find('\n', start);
      std::string l = doc.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      while (!l.empty() && l.back() == ' ') l.pop_back();
      c.line(l.empty() ? std::string(prefix.substr(0, prefix.size() - 1)) : prefix + l);
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
  }

  void params_struct(Code& c) {
    doc_comment(c, op_.doc);
    c.line("/// Parameters of " + name_ + " (manifest order; " + op_.source + ").");
    c.open("struct " + name_ + "Params");
    for (const auto& p : op_.params) {
      doc_comment(c, p.doc);
      std::string l = field_type(p.type) + " " + p.name;
      if (p.has_default) {
        l += " = " + value_cpp(p.default_value);
      }
      l += ";";
      std::string note = "// " + p.type.text;
      if (p.is_tensor)
        note += " " + p.dtype + " " + p.shape.text + (p.optional ? ", optional" : "");
      if (p.kw_only) note += ", kw_only";
      c.line(l + "  " + note);
    }
    c.close(";");
    c.line();
  }

  const TensorDecl* buffer_output(int* index = nullptr) const {
    for (std::size_t i = 0; i < op_.outputs.size(); ++i) {
      if (op_.outputs[i].buffer_out) {
        if (index) *index = static_cast<int>(i);
        return &op_.outputs[i];
      }
    }
    return nullptr;
  }

  // Op::dtype() for an op that takes a dtype at construction: the parameter named `dtype`, else
  // the first `torch.dtype` (or `torch.dtype | None`) parameter.
  void dtype_override(Code& c) {
    const auto is_dtype = [](const ParamType& t) {
      return t.tag == ParamType::Tag::dtype ||
             (t.tag == ParamType::Tag::optional && t.inner->tag == ParamType::Tag::dtype);
    };
    const ParamDecl* chosen = nullptr;
    for (const auto& p : op_.params) {
      if (!is_dtype(p.type)) continue;
      if (chosen == nullptr || p.name == "dtype") chosen = &p;
    }
    if (chosen == nullptr) return;
    c.line();
    c.line("/// The `" + chosen->name + "` parameter.");
    c.open("std::optional<::tileops::DType> dtype() const override");
    c.line("return this->params()." + chosen->name + ";");
    c.close();
  }

  // The data TypedOp reads (include/tileops/op/typed_op.h): the counts of the signature and
  // the generated functions of this entry.
  void traits_struct(Code& c) {
    int buf_index = -1;
    const bool buf = buffer_output(&buf_index) != nullptr;
    c.line("/// What TypedOp needs of " + name_ + " (include/tileops/op/typed_op.h).");
    c.open("struct " + name_ + "Traits");
    c.line("using Params = " + name_ + "Params;");
    c.line("static constexpr std::size_t num_inputs = " + std::to_string(op_.inputs.size()) + ";");
    c.line("static constexpr std::size_t num_outputs = " + std::to_string(op_.outputs.size()) +
           ";");
    c.line(std::string("static constexpr bool has_out_buffer = ") + (buf ? "true" : "false") + ";");
    for (const char* f :
         {"schema", "check_params", "param_values", "params_from_map", "check_call"})
      c.line("static constexpr auto " + std::string(f) + " = &detail::" + name_ + "_" + f + ";");
    c.close(";");
    c.line();
  }

  // What differs per op on top of TypedOp: the typed call operator (inputs by name, optional
  // ones defaulted), the dtype() override and the dispatch to Derived::forward. The dispatch
  // stays here, not in TypedOp, so that an op class may keep `forward` private and befriend
  // only its generated base.
  void base_class(Code& c) {
    const std::string typed = "::tileops::TypedOp<" + name_ + "Traits, Derived>";
    c.line("/// The generated base of " + name_ +
           ": the typed call on top of TypedOp (parameters,");
    c.line("/// construction, signature check). The op class derives as `class " + name_ +
           " final : public gen::" + name_ + "Base<" + name_ + ">`");
    c.line("/// and defines forward(const SignatureCall&, inputs..., outputs...).");
    c.line("template <class Derived>");
    c.open("class " + name_ + "Base : public " + typed);
    c.dedent();
    c.line(" public:");
    c.indent();
    c.line("using " + typed + "::TypedOp;");
    c.line();
    // The typed call.
    std::vector<std::string> args, in_ptrs;
    std::string doc = "/// Inputs:";
    for (const auto& t : op_.inputs) {
      args.push_back("const ::tileops::Tensor& " + t.name +
                     (t.optional ? " = ::tileops::Tensor()" : ""));
      in_ptrs.push_back("&" + t.name);
      doc += " " + t.name + " " + t.shape.text + " " + t.dtype + (t.optional ? " (optional)" : "") +
             (t.mutated ? " (mutated)" : "") + ";";
    }
    const TensorDecl* buf = buffer_output();
    if (buf) args.push_back("const ::tileops::Tensor& out = ::tileops::Tensor()");
    std::string ret = op_.outputs.empty()       ? "void"
                      : op_.outputs.size() == 1 ? "::tileops::Tensor"
                                                : "std::tuple<";
    if (op_.outputs.size() > 1) {
      for (std::size_t i = 0; i < op_.outputs.size(); ++i)
        ret += std::string(i ? ", " : "") + "::tileops::Tensor";
      ret += ">";
    }
    doc += " returns";
    for (const auto& o : op_.outputs) doc += " " + o.name + " " + o.shape.text + " " + o.dtype;
    if (op_.outputs.empty()) doc += " nothing";
    if (buf) doc += "; `out` is written when given";
    c.line(doc + ".");
    c.open(ret + " operator()(" + join(args, ", ") + ")");
    c.line("return this->typed_call({" + join(in_ptrs, ", ") + "}" + (buf ? ", &out" : "") + ");");
    c.close();
    dtype_override(c);
    c.line();
    c.dedent();
    c.line(" private:");
    c.indent();
    c.line("void run_forward(const ::tileops::SignatureCall& c, const ::tileops::CallArgs& a,");
    c.line("                 std::span<const ::tileops::Tensor> o) final {");
    c.indent();
    std::vector<std::string> fargs = {"c"};
    for (std::size_t i = 0; i < op_.inputs.size(); ++i)
      fargs.push_back("*a.inputs[" + std::to_string(i) + "]");
    for (std::size_t i = 0; i < op_.outputs.size(); ++i)
      fargs.push_back("o[" + std::to_string(i) + "]");
    if (op_.outputs.empty()) c.line("(void)o;");
    if (op_.inputs.empty()) c.line("(void)a;");
    c.line("static_cast<Derived*>(this)->forward(" + join(fargs, ", ") + ");");
    c.close();
    c.close(";");
    c.line();
  }

  // ---- schema ----

  void schema(Code& c) {
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
    c.line("s.instantiate = &" + name_ + "_instantiate;");
    c.line("return s;");
    c.close("();");
    c.line("return schema;");
    c.close();
    c.line();
  }

  // ---- plan steps (construction and call checks) ----

  struct TensorLocal {
    std::string t, s, n, d;  // tensor, sizes, rank, Decl
  };

  TensorLocal local(const PlanTensor& t) const {
    return TensorLocal{"t_" + t.name, "s_" + t.name, "n_" + t.name, "kD_" + t.name};
  }

  std::string pos_text(const AxisPos& p, const TensorLocal& tl, CppNames& names) {
    std::vector<std::string> parts;
    if (p.k != 0 || p.splices.empty()) parts.push_back(std::to_string(p.k));
    for (const Expr* s : p.splices) parts.push_back("ex::len(" + emit_cpp(*s, names) + ")");
    std::string sum = join(parts, " + ");
    if (!p.from_end) return parts.size() == 1 ? sum : "(" + sum + ")";
    return "(" + tl.n + " - " + (parts.size() == 1 ? sum : "(" + sum + ")") + ")";
  }

  static bool uses_rank(const Plan& plan, int t) {
    for (const auto& s : plan.steps) {
      if (s.tensor != t) continue;
      if (s.pos.from_end || s.end.from_end) return true;
    }
    return false;
  }

  std::string dtype_text(const PlanTensor& t) const {
    return t.ctor ? op_.params[static_cast<std::size_t>(t.index)].dtype
                  : op_.inputs[static_cast<std::size_t>(t.index)].dtype;
  }

  const DTypeRef& dtype_ref(const PlanTensor& t) const {
    return t.ctor ? info_.ctor_dtype[static_cast<std::size_t>(t.index)]
                  : info_.input_dtype[static_cast<std::size_t>(t.index)];
  }

  std::string dtype_value(const DTypeRef& d, CppNames& names) {
    if (d.k == DTypeRef::K::literal) return cpp_dtype(d.name);
    return names.value(d.name, false);
  }

  void let_line(Code& c, const std::string& name, const Expr& e, CppNames& names) {
    const Kind& k = info_.symbols.find(name)->kind;
    if (k.is_stringy()) {
      c.line("[[maybe_unused]] const std::string l_" + name + "(" + emit_cpp(e, names) + ");");
    } else {
      c.line("[[maybe_unused]] const " + cpp_type(k) + " l_" + name + " = " + emit_cpp(e, names) +
             ";");
    }
  }

  // Emits a plan's steps; `known` grows as steps solve names (for the name spelling).
  void steps(Code& c, const Plan& plan, std::set<std::string>& known) {
    LocalNames names(info_, known);
    for (std::size_t t = 0; t < plan.tensors.size(); ++t) {
      const PlanTensor& pt = plan.tensors[t];
      const TensorLocal tl = local(pt);
      c.line("static constexpr ex::Decl " + tl.d + "{kOp, " +
             q(pt.ctor ? "construction-time tensor" : "input") + ", " + q(pt.name) + ", " +
             q(pt.decl_text) + ", " + q(dtype_text(pt)) + "};");
      if (pt.ctor) c.line("const ::tileops::Tensor& " + tl.t + " = p." + pt.name + ";");
      c.line("const ::tileops::Sizes& " + tl.s + " = " + tl.t + ".sizes();");
      if (uses_rank(plan, static_cast<int>(t))) {
        c.line("const std::int64_t " + tl.n + " = ex::len(" + tl.s + ");");
      }
    }
    for (const auto& s : plan.steps) {
      const PlanTensor* pt =
          s.tensor >= 0 ? &plan.tensors[static_cast<std::size_t>(s.tensor)] : nullptr;
      const TensorLocal tl = pt ? local(*pt) : TensorLocal{};
      switch (s.k) {
        case PlanStep::K::dtype_solve: {
          const Symbol* sym = info_.symbols.find(s.name);
          c.line("[[maybe_unused]] const ::tileops::DType v_" + s.name + " = ex::solve_dtype(" +
                 tl.d + ", " + tl.t + ".dtype(), " + q(s.name) + ", " +
                 dtype_list(sym->kind.values) + ");");
          known.insert(s.name);
          break;
        }
        case PlanStep::K::dtype_check: {
          const DTypeRef& d = dtype_ref(*pt);
          std::string what = d.name;
          if (d.k == DTypeRef::K::index) {
            auto it = plan.solved_from.find(d.name);
            if (it != plan.solved_from.end()) what += ", from " + it->second;
          } else if (d.k == DTypeRef::K::param) {
            what = "param " + d.name;
          }
          c.line("ex::check_dtype(" + tl.d + ", " + tl.t + ".dtype(), " + dtype_value(d, names) +
                 ", " + q(what) + ");");
          break;
        }
        case PlanStep::K::rank: {
          std::vector<std::string> parts;
          if (s.fixed != 0 || s.splices.empty()) parts.push_back(std::to_string(s.fixed));
          for (const Expr* sp : s.splices) parts.push_back("ex::len(" + emit_cpp(*sp, names) + ")");
          c.line("ex::check_rank(" + tl.d + ", " + tl.s + ", " + join(parts, " + ") + ", " +
                 (s.at_least ? "true" : "false") + ");");
          break;
        }
        case PlanStep::K::splice_solve:
          c.line("[[maybe_unused]] const ::tileops::Sizes v_" + s.name + " = ex::slice(" + tl.s +
                 ", " + pos_text(s.pos, tl, names) + ", " + pos_text(s.end, tl, names) + ");");
          known.insert(s.name);
          break;
        case PlanStep::K::splice_check:
          c.line("ex::check_splice(" + tl.d + ", " + tl.s + ", " + pos_text(s.pos, tl, names) +
                 ", " + emit_cpp(*s.expr, names) + ", " + q(to_source(*s.expr)) + ");");
          break;
        case PlanStep::K::axis_solve:
          c.line("[[maybe_unused]] const std::int64_t v_" + s.name + " = ex::size_at(" + tl.s +
                 ", " + pos_text(s.pos, tl, names) + ");");
          known.insert(s.name);
          break;
        case PlanStep::K::axis_affine:
          c.line("[[maybe_unused]] const std::int64_t v_" + s.name + " = ex::solve_affine(" + tl.d +
                 ", " + tl.s + ", " + pos_text(s.pos, tl, names) + ", " + emit_cpp(*s.a, names) +
                 ", " + emit_cpp(*s.e, names) + ", " + q(s.name) + ", " + q(to_source(*s.expr)) +
                 ");");
          known.insert(s.name);
          break;
        case PlanStep::K::axis_check:
          c.line("ex::check_axis(" + tl.d + ", " + tl.s + ", " + pos_text(s.pos, tl, names) + ", " +
                 emit_cpp(*s.expr, names) + ", " + q(to_source(*s.expr)) + ");");
          break;
        case PlanStep::K::let:
          let_line(c, s.name, *s.expr, names);
          known.insert(s.name);
          break;
      }
    }
  }

  // The check of one shape rule: the rule text and the values of the names it reads.
  void rule_check(Code& c, const Expr& rule, const std::string& text, CppNames& names) {
    std::vector<std::string> parts;
    for (const auto& n : names_read(rule)) {
      const Symbol* s = info_.symbols.find(n);
      if (!s || s->cat == Symbol::Cat::input || s->cat == Symbol::Cat::output ||
          s->cat == Symbol::Cat::ctor_tensor) {
        continue;
      }
      parts.push_back("std::string(" + q(n + " = ") + ") + ex::repr(" + names.value(n, false) +
                      ")");
    }
    const std::string values = parts.empty() ? "std::string()" : join(parts, " + \", \" + ");
    c.open("if (!" + wrap(emit_cpp(rule, names)) + ")");
    c.line("ex::fail_rule(kOp, " + q(text) + ", " + values + ");");
    c.close();
  }

  static std::string wrap(const std::string& e) { return "(" + e + ")"; }

  // ---- construction check ----

  void check_params(Code& c) {
    c.open("void " + name_ + "_check_params(const void* params)");
    c.line("[[maybe_unused]] static constexpr std::string_view kOp = " + q(name_) + ";");
    c.line("[[maybe_unused]] const auto& p = *static_cast<const " + name_ + "Params*>(params);");
    c.open("try");
    for (const auto& p : op_.params) {
      const ParamType& t = p.type.tag == ParamType::Tag::optional ? *p.type.inner : p.type;
      const std::string v = p.type.tag == ParamType::Tag::optional ? "*p." + p.name : "p." + p.name;
      std::string check;
      if (t.tag == ParamType::Tag::enum_) {
        std::vector<std::string> lits;
        for (const auto& e : t.values) lits.push_back(q(e));
        check = "ex::check_enum(kOp, " + q(p.name) + ", " + v + ", {" + join(lits, ", ") + "});";
      } else if (t.tag == ParamType::Tag::dtype && t.values.size() < all_dtypes().size()) {
        check = "ex::check_dtype_param(kOp, " + q(p.name) + ", " + v + ", " + dtype_list(t.values) +
                ");";
      } else if (t.tag == ParamType::Tag::int_list && t.tuple_len >= 0) {
        check = "ex::check_length(kOp, " + q(p.name) + ", " + v + ", " +
                std::to_string(t.tuple_len) + ");";
      }
      if (!check.empty()) {
        c.line(p.type.tag == ParamType::Tag::optional ? "if (p." + p.name + ") " + check : check);
      }
      if (info_.splice_params.count(p.name) || info_.axis_params.count(p.name)) {
        const std::string nn = "ex::check_nonneg(kOp, " + q(p.name) + ", " + v + ");";
        c.line(p.type.tag == ParamType::Tag::optional ? "if (p." + p.name + ") " + nn : nn);
      }
    }
    for (const auto& p : op_.params) {
      if (!p.is_tensor || p.optional) continue;
      c.open("if (!p." + p.name + ".defined())");
      c.line("ex::fail_param(kOp, " + q(p.name) +
             ", \"is required (a construction-time tensor)\");");
      c.close();
    }
    std::set<std::string> known;
    for (const auto& p : op_.params) known.insert(p.name);
    steps(c, info_.ctor_plan, known);
    for (const auto& [index, plan] : info_.optional_ctor_plans) {
      c.open("if (p." + op_.params[static_cast<std::size_t>(index)].name + ".defined())");
      std::set<std::string> inner = known;
      steps(c, plan, inner);
      c.close();
    }
    LocalNames names(info_, known);
    for (std::size_t i = 0; i < op_.shape_rules.size(); ++i) {
      if (!info_.rule_at_construction[i] || !op_.shape_rules[i].ast) continue;
      rule_check(c, *op_.shape_rules[i].ast, op_.shape_rules[i].text, names);
    }
    c.dedent();
    c.line("} catch (const ::tileops::SignatureError& e) {");
    c.indent();
    c.line("ex::rethrow_for(kOp, e);");
    c.close();
    c.close();
    c.line();
  }

  // ---- parameter maps ----

  void param_values(Code& c) {
    c.open("::tileops::ParamMap " + name_ + "_param_values(const " + name_ + "Params& p)");
    c.line("::tileops::ParamMap m;");
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

  void params_from_map(Code& c) {
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

  // ---- the signature check ----

  std::string combo_condition(const Combo& cb) const {
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

  void shape_build(Code& c, const std::string& var, const std::vector<ShapeItem>& axes,
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
        c.line(var + ".push_back(ex::output_axis(kOp, " + q(output) + ", " + q(decl) +
               ", ex::len(" + var + "), " + emit_cpp(*a.expr, names) + "));");
      }
    }
  }

  void combo_body(Code& c, const Combo& cb) {
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
             ", .dtype = t_" + t.name + ".dtype(), .reads = 1, .writes = " +
             (t.mutated ? "1" : "0") + ", .role = ::tileops::TensorRecord::Role::input});");
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

  void dtype_combos(Code& c, const std::set<std::string>& known, CppNames& names) {
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

  void check_call(Code& c) {
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
      c.line(
          "const bool has_out = !a.outs.empty() && a.outs[0] != nullptr && a.outs[0]->defined();");
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

  // ---- roofline ----

  void eval_roofline(Code& c) {
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

  // ---- workload instantiation ----

  void instantiate(Code& c) {
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

  const OpInfo& info_;
  const OpDecl& op_;
  std::string name_;
};

}  // namespace

std::string emit_op_header(const OpInfo& info) {
  return OpEmitter(info).header();
}
std::string emit_op_source(const OpInfo& info) {
  return OpEmitter(info).source();
}

}  // namespace tgen
