// Emission of one op's generated C++ (see codegen.h): the header and source parts in order, and
// the helpers the emitter's sections share. The sections are codegen/emit_op_*.cpp.
#include "codegen/codegen.h"
#include "codegen/op_emitter.h"

namespace tgen {

namespace op_emit {

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

std::string OpEmitter::header() {
  Code c;
  params_struct(c);
  indices_struct(c);
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

std::string OpEmitter::source() {
  Code c;
  c.line("// ---- " + name_ + " " + std::string(60 - std::min<std::size_t>(name_.size(), 50), '-'));
  c.line();
  c.line("namespace {");
  c.line("::tileops::Roofline " + name_ + "_eval_roofline(const ::tileops::SignatureCall& c);");
  if (op_.has_peak)
    c.line("std::string " + name_ + "_roof_key(const ::tileops::SignatureCall* c);");
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
  roof_key(c);
  instantiate(c);
  c.line("}  // namespace");
  c.line();
  return c.str();
}

}  // namespace op_emit

std::string emit_op_header(const OpInfo& info) {
  return op_emit::OpEmitter(info).header();
}
std::string emit_op_source(const OpInfo& info) {
  return op_emit::OpEmitter(info).source();
}

}  // namespace tgen
