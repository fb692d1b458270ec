// Shape rules, dtype_combos, the roofline, the composition and indices nothing reads.
#include <algorithm>

#include "dtypes.h"
#include "manifest/op_validator.h"

namespace tgen::validation {

void OpValidator::rules() {
  for (auto& r : op_.shape_rules) {
    if (!r.ast) continue;
    ExprError err;
    if (!check_expr(*r.ast, info_.symbols, CheckContext{}, err)) {
      expr_error(r, err);
      continue;
    }
    if (!r.ast->kind.is(Kind::Tag::bool_)) {
      error(r.line,
            r.where + " \"" + r.text + "\" must be a boolean expression, got " + r.ast->kind.str());
    }
  }
}

void OpValidator::combos_table() {
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < op_.dtype_combos.size(); ++i) {
    const DTypeRow& row = op_.dtype_combos[i];
    std::vector<std::string> row_keys;
    for (const auto& [k, v] : row.cells) {
      row_keys.push_back(k);
      const Symbol* s = info_.symbols.find(k);
      const bool ok_key = s && s->kind.is(Kind::Tag::dtype) &&
                          (s->cat == Symbol::Cat::index || s->cat == Symbol::Cat::param);
      if (!ok_key) {
        error(row.line, "dtype_combos key '" + k + "' is not a DType index or a dtype param");
        continue;
      }
      if (!find_dtype(v)) {
        error(row.line,
              "dtype_combos: '" + v + "' is not a dtype (valid: " + dtype_spellings() + ")");
      } else if (std::find(s->kind.values.begin(), s->kind.values.end(), v) ==
                 s->kind.values.end()) {
        error(row.line,
              "dtype_combos: " + k + " = " + v + " is outside " + k + "'s " + s->kind.str());
      }
    }
    std::sort(row_keys.begin(), row_keys.end());
    if (i == 0) {
      keys = row_keys;
    } else if (row_keys != keys) {
      auto join = [](const std::vector<std::string>& v) {
        std::string out;
        for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
        return "{" + out + "}";
      };
      error(row.line, "dtype_combos rows must have the same keys: this row has " + join(row_keys) +
                          ", the first has " + join(keys));
    }
    for (std::size_t j = 0; j < i; ++j) {
      auto a = op_.dtype_combos[j].cells;
      auto b = row.cells;
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      if (a == b) {
        error(row.line, "duplicate dtype_combos row (same as line " +
                            std::to_string(op_.dtype_combos[j].line) + ")");
        break;
      }
    }
  }
}

void OpValidator::roofline() {
  CheckContext ctx;
  ctx.roofline = true;
  for (ExprSrc* src : {&op_.flops, op_.has_bytes ? &op_.bytes : nullptr}) {
    if (!src || !src->ast) continue;
    ExprError err;
    if (!check_expr(*src->ast, info_.symbols, ctx, err)) {
      expr_error(*src, err);
      continue;
    }
    if (!src->ast->kind.is_number()) {
      error(src->line,
            src->where + " \"" + src->text + "\" must be a number, got " + src->ast->kind.str());
    }
  }
}

void OpValidator::peak() {
  if (!op_.has_peak || op_.peak.index.empty()) return;
  const IndexDecl* index = nullptr;
  for (const auto& f : op_.forall) {
    if (f.name == op_.peak.index) index = &f;
  }
  if (index == nullptr || index->k != IndexDecl::K::dtype) {
    error(op_.peak.line,
          "roofline.peak index '" + op_.peak.index + "' is not a forall DType index");
    return;
  }
  for (const auto& [dtype, key] : op_.peak.by_dtype) {
    if (std::find(index->dtypes.begin(), index->dtypes.end(), dtype) == index->dtypes.end()) {
      error(op_.peak.line, "roofline.peak: '" + dtype + "' is not a dtype of " + index->name +
                               " (" + index->kind_text + ")");
    }
  }
}

void OpValidator::composition() {
  for (const auto& s : op_.stages) {
    if (s.op.empty()) continue;
    bool found = false;
    for (const auto& o : m_.ops) found = found || o->name == s.op;
    if (!found) {
      error(s.line, "composition stage '" + s.name + "' names op '" + s.op +
                        "', which the manifest does not declare");
    }
  }
}

void OpValidator::read_names(const Expr& e, std::set<std::string>& out) {
  for (const auto& n : names_read(e)) out.insert(n);
}

void OpValidator::unused_indices() {
  std::set<std::string> read;
  auto shape = [&](const ShapeSrc& s) {
    if (!s.ok) return;
    for (const auto& a : s.ast.family_args) read_names(*a, read);
    for (const auto& i : s.ast.items) read_names(*i.expr, read);
  };
  for (const auto& p : op_.params) {
    if (p.is_tensor) {
      shape(p.shape);
      read.insert(p.dtype);
    }
  }
  for (const auto* list : {&op_.inputs, &op_.outputs}) {
    for (const auto& t : *list) {
      shape(t.shape);
      read.insert(t.dtype);
    }
  }
  for (const auto& l : op_.lets) {
    if (l.expr.ast) read_names(*l.expr.ast, read);
  }
  for (const auto& r : op_.shape_rules) {
    if (r.ast) read_names(*r.ast, read);
  }
  if (op_.flops.ast) read_names(*op_.flops.ast, read);
  if (op_.has_bytes && op_.bytes.ast) read_names(*op_.bytes.ast, read);
  if (op_.has_peak && !op_.peak.index.empty()) read.insert(op_.peak.index);
  for (const auto& f : op_.forall) {
    if (!read.count(f.name)) {
      error(f.line, "forall index '" + f.name + "' is never used");
    }
  }
  read_names_ = std::move(read);
}

}  // namespace tgen::validation
