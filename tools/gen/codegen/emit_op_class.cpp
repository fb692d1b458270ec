// The per-op part of the family header: the Params struct, the traits struct TypedOp reads
// and the generated base class (include/tileops/base/typed_op.h holds the fixed part).
#include "codegen/op_emitter.h"

namespace tgen::op_emit {

void OpEmitter::doc_comment(Code& c, const std::string& doc, const std::string& prefix) {
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

void OpEmitter::params_struct(Code& c) {
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
    if (p.is_tensor) note += " " + p.dtype + " " + p.shape.text + (p.optional ? ", optional" : "");
    if (p.kw_only) note += ", kw_only";
    c.line(l + "  " + note);
  }
  c.close(";");
  c.line();
}

std::set<std::string> OpEmitter::solved_on_every_branch() {
  std::set<std::string> every;
  bool first = true;
  for (const auto& cb : info_.combos) {
    std::set<std::string> known;
    for (const auto& p : op_.params) known.insert(p.name);
    Code scratch;  // the steps as check_call emits them, for what they solve
    steps(scratch, cb.plan, known);
    if (first) {
      every = known;
      first = false;
    } else {
      std::set<std::string> both;
      for (const auto& n : every) {
        if (known.count(n)) both.insert(n);
      }
      every = std::move(both);
    }
  }
  return every;
}

void OpEmitter::indices_struct(Code& c) {
  const std::set<std::string> solved = solved_on_every_branch();
  c.line("/// The solved indices of a call of " + name_ +
         ", typed, as its forward reads them (the forall");
  c.line(
      "/// indices, then the lets; optional where a branch leaves one unsolved), with the call's");
  c.line("/// record and device. Converts to the record.");
  c.open("struct " + name_ + "Indices");
  c.line("const ::tileops::SignatureCall& record;");
  c.line("const ::tileops::Device& device;");
  std::vector<std::string> inits = {"record(c)", "device(c.device)"};
  for (std::size_t k = 0; k < info_.slots.size(); ++k) {
    const IndexSlot& s = info_.slots[k];
    if (s.src == IndexSlot::Src::param) continue;
    const Kind& kind = s.kind.is(Tag::maybe) ? *s.kind.inner : s.kind;
    const bool optional = s.kind.is(Tag::maybe) || !solved.count(s.name);
    const std::string type = slot_type(kind);
    // Shapes and strings stay in the record: a reference (a pointer when optional).
    const bool by_ref = kind.is(Tag::seq) || kind.is_stringy();
    const std::string at = "c.indices[" + std::to_string(k) + "]";
    std::string field;
    std::string init;
    if (by_ref && optional) {
      field = "const " + type + "*";
      init = "std::get_if<" + type + ">(&" + at + ")";
    } else if (by_ref) {
      field = "const " + type + "&";
      init = "std::get<" + type + ">(" + at + ")";
    } else if (optional) {
      field = "std::optional<" + type + ">";
      init = "::tileops::detail::optional_index<" + type + ">(" + at + ")";
    } else {
      field = type;
      init = "std::get<" + type + ">(" + at + ")";
    }
    const std::string member = s.name == "record" || s.name == "device" ? s.name + "_" : s.name;
    c.line(field + " " + member + ";  // " + s.kind_text);
    inits.push_back(member + "(" + init + ")");
  }
  c.line("explicit " + name_ + "Indices(const ::tileops::SignatureCall& c)");
  for (std::size_t i = 0; i < inits.size(); ++i) {
    c.line(std::string(i == 0 ? "    : " : "      ") + inits[i] +
           (i + 1 < inits.size() ? "," : " {}"));
  }
  c.line("operator const ::tileops::SignatureCall&() const { return record; }");
  c.close(";");
  c.line();
}

const TensorDecl* OpEmitter::buffer_output(int* index) const {
  for (std::size_t i = 0; i < op_.outputs.size(); ++i) {
    if (op_.outputs[i].buffer_out) {
      if (index) *index = static_cast<int>(i);
      return &op_.outputs[i];
    }
  }
  return nullptr;
}

void OpEmitter::dtype_override(Code& c) {
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

void OpEmitter::traits_struct(Code& c) {
  int buf_index = -1;
  const bool buf = buffer_output(&buf_index) != nullptr;
  c.line("/// What TypedOp needs of " + name_ + " (include/tileops/base/typed_op.h).");
  c.open("struct " + name_ + "Traits");
  c.line("using Params = " + name_ + "Params;");
  c.line("static constexpr std::size_t num_inputs = " + std::to_string(op_.inputs.size()) + ";");
  c.line("static constexpr std::size_t num_outputs = " + std::to_string(op_.outputs.size()) + ";");
  c.line(std::string("static constexpr bool has_out_buffer = ") + (buf ? "true" : "false") + ";");
  for (const char* f : {"schema", "check_params", "param_values", "params_from_map", "check_call"})
    c.line("static constexpr auto " + std::string(f) + " = &detail::" + name_ + "_" + f + ";");
  c.close(";");
  c.line();
}

void OpEmitter::base_class(Code& c) {
  const std::string typed = "::tileops::TypedOp<" + name_ + "Traits, Derived>";
  // A kernel op (no composition) has a kernel table, which its source defines.
  const bool kernel_op = !op_.has_composition;
  if (kernel_op) {
    c.line("/// The in-tree implementations of " + name_ +
           ", defined in the op's source (an op class may");
    c.line("/// declare its own kernel_types() instead).");
    c.open("struct " + name_ + "Kernels");
    c.line("static std::vector<::tileops::ImplementationInfo> kernel_types();");
    c.close(";");
    c.line();
  }
  c.line("/// The generated base of " + name_ + ": the typed call on top of TypedOp (parameters,");
  c.line("/// construction, signature check). The op class derives as `class " + name_ +
         " final : public gen::" + name_ + "Base<" + name_ + ">`");
  c.line("/// and defines forward(const Indices&, inputs..., outputs...).");
  c.line("template <class Derived>");
  c.open("class " + name_ + "Base : public " + typed +
         (kernel_op ? ", public " + name_ + "Kernels" : ""));
  c.dedent();
  c.line(" public:");
  c.indent();
  c.line("using " + typed + "::TypedOp;");
  c.line("/// What forward receives first: the call's solved indices, typed.");
  c.line("using Indices = " + name_ + "Indices;");
  c.line();
  std::vector<std::string> stages;
  for (const auto& s : op_.stages) {
    if (!s.op.empty()) stages.push_back("{" + q(s.name) + ", " + q(s.op) + "}");
  }
  if (!stages.empty()) {
    c.line("/// The composition's stages that hold a sub-op (stage -> sub-op class, stage order):");
    c.line("/// what delegate_for may hold there.");
    c.open("static std::vector<::tileops::DelegateType> delegate_types()");
    c.line("return {" + join(stages, ", ") + "};");
    c.close();
    c.line();
  }
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
  std::vector<std::string> fargs = {name_ + "Indices(c)"};
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

}  // namespace tgen::op_emit
