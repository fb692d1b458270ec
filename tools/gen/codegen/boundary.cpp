// Names and schemas of the compile boundary (digest §6): `tileops::<family>_<snake name>`, the
// family written once when the snake name already starts with it; a branch writing an input
// appends `_writes_<input>`, the branch filling `buffer: out` appends `_out`. The first argument
// is the instance key, `str key` (renamed when an input is named key).
#include "codegen/boundary.h"

#include <cctype>

namespace tgen {

bool has_compile_boundary(const OpDecl& op) {
  return !op.has_composition && !op.inputs.empty();
}

std::string snake_name(const std::string& class_name) {
  std::string name = class_name;
  if (name.size() > 2 && name.ends_with("Op")) name.resize(name.size() - 2);
  // Mixed-case acronyms would otherwise split into "mo_e" and "ro_pe".
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"MoE", "Moe"}, {"RoPE", "Rope"}}) {
    for (std::size_t at = name.find(from); at != std::string::npos; at = name.find(from, at)) {
      name.replace(at, from.size(), to);
    }
  }
  std::string out;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char ch = name[i];
    if (std::isupper(static_cast<unsigned char>(ch)) && i > 0) {
      const char prev = name[i - 1];
      const bool next_lower =
          i + 1 < name.size() && std::islower(static_cast<unsigned char>(name[i + 1]));
      if (std::islower(static_cast<unsigned char>(prev)) ||
          std::isdigit(static_cast<unsigned char>(prev)) ||
          (std::isupper(static_cast<unsigned char>(prev)) && next_lower)) {
        out += '_';
      }
    }
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  return out;
}

std::string instance_key_argument(const OpDecl& op) {
  std::string name = "key";
  const auto taken = [&](const std::string& n) {
    for (const auto& in : op.inputs) {
      if (in.name == n) return true;
    }
    return false;
  };
  if (taken(name)) name = "instance_key";
  while (taken(name)) name += "_";
  return name;
}

std::vector<CompileOp> compile_ops(const OpDecl& op) {
  if (!has_compile_boundary(op)) return {};
  std::string base = snake_name(op.name);
  if (!(base == op.family || base.starts_with(op.family + "_"))) base = op.family + "_" + base;
  for (const auto& in : op.inputs) {
    if (in.mutated) base += "_writes_" + in.name;
  }
  const TensorDecl* buffer = nullptr;
  for (const auto& o : op.outputs) {
    if (o.buffer_out) buffer = &o;
  }
  std::vector<CompileOp> ops;
  for (const bool out : {false, true}) {
    if (out && buffer == nullptr) break;
    std::string args = "str " + instance_key_argument(op);
    char alias = 'a';
    for (const auto& in : op.inputs) {
      std::string type = "Tensor";
      if (in.mutated) type += std::string("(") + alias++ + "!)";
      if (in.optional) type += "?";
      args += ", " + type + " " + in.name;
    }
    if (out) args += std::string(", Tensor(") + alias++ + "!) out";
    std::vector<std::string> returns;
    for (const auto& o : op.outputs) {
      if (!(out && &o == buffer)) returns.push_back("Tensor " + o.name);
    }
    std::string ret;
    if (returns.size() == 1) {
      ret = "Tensor";
    } else {
      ret = "(";
      for (std::size_t i = 0; i < returns.size(); ++i)
        ret += (i ? ", " : "") + std::string("Tensor");
      ret += ")";
    }
    ops.push_back({base + (out ? "_out" : ""), "(" + args + ") -> " + ret, out});
  }
  return ops;
}

}  // namespace tgen
