// Internal to the validator: the per-op validation class, split by rule group over
// manifest/validator*.cpp, and the evaluation helpers those files share.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "diag.h"
#include "expr/eval.h"
#include "manifest/analysis.h"
#include "manifest/model.h"

namespace tgen::validation {

// Each branch and presence combination becomes one block of straight-line code in the generated
// signature check (docs/design/manifest.md, Solve order); the bound keeps that code small.
constexpr std::size_t kMaxCombos = 256;

// The partial environment of a combination: discriminant values and tensor presence.
class ComboEnv : public EvalEnv {
 public:
  ComboEnv(const OpDecl& op, const Combo& c) : op_(op), c_(c) {}
  const EValue* lookup(std::string_view name) const override {
    for (const auto& [n, v] : c_.discr) {
      if (n == name) return &v;
    }
    return nullptr;
  }
  std::optional<bool> tensor_present(std::string_view name) const override {
    for (std::size_t i = 0; i < op_.inputs.size(); ++i) {
      if (op_.inputs[i].name == name) return c_.input_present[i];
    }
    for (std::size_t i = 0; i < op_.params.size(); ++i) {
      if (op_.params[i].name == name && op_.params[i].is_tensor) return c_.ctor_present[i];
    }
    return std::nullopt;
  }

 private:
  const OpDecl& op_;
  const Combo& c_;
};

class FormalSymbols : public SymbolTable {
 public:
  explicit FormalSymbols(const FamilyDecl& f) {
    for (const auto& formal : f.formals) {
      Symbol s;
      s.cat = Symbol::Cat::formal;
      s.kind = formal.kind;
      map_.emplace(formal.name, s);
    }
  }
  const Symbol* find(std::string_view name) const override {
    auto it = map_.find(std::string(name));
    return it == map_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::string, Symbol> map_;
};

// Substitutes names by expressions (type-family formals by arguments), simultaneously.
ExprPtr substitute(const Expr& e, const std::map<std::string, const Expr*>& subst);

class OpValidator {
 public:
  OpValidator(OpDecl& op, const Manifest& m, Diagnostics& diags) : op_(op), m_(m), diags_(diags) {
    info_.decl = &op;
  }
  OpInfo run();

 private:
  void error(int line, std::string msg) { diags_.error(op_.file, line, std::move(msg)); }
  void expr_error(const ExprSrc& src, const ExprError& err) {
    error(src.line, expr_message(src.where, src.text, err.col, err.message));
  }

  // ---- names, lets, dtypes (validator_names.cpp) ----
  bool names();
  void symbols();

  void lets();

  DTypeRef dtype_ref(const std::string& name, int line, const std::string& what);
  void dtype_refs();

  // ---- type families and shapes (validator_shapes.cpp) ----
  const FamilyDecl* family(const std::string& name) const;
  const FamilyFormal* formal(const FamilyDecl& f, const std::string& name) const;
  void families();
  // Checks one axis of a shape in `syms`; reports errors with the shape's column.
  bool check_axis_item(ShapeItem& item, const ShapeSrc& src, const SymbolTable& syms);

  // Records the params used as a whole axis or splice: the construction check then requires
  // them non-negative (a negative size would only fail later, at a call).
  void note_params(const ShapeAst& ast);
  void check_shape(ShapeSrc& src, const std::string& tensor, bool ctor);
  void shapes();
  void tensor_flags();

  // ---- rules, dtype_combos, roofline, composition, unused indices (validator_rules.cpp) ----
  void rules();
  void combos_table();
  void roofline();
  void peak();
  void composition();
  void read_names(const Expr& e, std::set<std::string>& out);
  // A forall index that no shape, dtype, let, rule or roofline reads is an error: it could
  // never be solved or used, and is usually a typo.
  void unused_indices();

  // ---- index slots and the construction check (validator_slots.cpp) ----
  void slots();
  std::set<std::string> base_known(bool call) const;
  std::vector<ShapeItem> clone_items(const ShapeAst& ast) const;
  void construction();

  // ---- branch / presence combinations and their plans (validator_combos.cpp) ----
  std::vector<ShapeItem> expand(const ShapeSrc& src, const Combo& c, const ComboEnv& env,
                                std::string& decl);
  std::string describe(const Combo& c) const;
  int index_line(const std::string& name) const;
  void unsolvable(const std::string& name, const Combo& c, std::size_t ncombos);
  bool combos();
  void build_combo(Combo& c, std::size_t ncombos);

  OpDecl& op_;
  const Manifest& m_;
  Diagnostics& diags_;
  OpInfo info_;
  std::set<std::string> used_families_;
  std::map<std::string, std::pair<std::string, std::string>>
      discriminant_;  // family → (arg, tensor)
  std::set<std::string> read_names_;
  std::set<std::string> reported_unsolvable_;
};

}  // namespace tgen::validation
