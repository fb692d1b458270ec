// What the validator learns about an op and the code emitter uses: the symbol table, the
// index slots of SignatureCall::indices, the branch/presence combinations with their expanded
// shapes and solve plans, and the typed workload rows.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "expr/checker.h"
#include "expr/eval.h"
#include "manifest/model.h"

namespace tgen {

class OpSymbols : public SymbolTable {
 public:
  const Symbol* find(std::string_view name) const override {
    auto it = map.find(name);
    return it == map.end() ? nullptr : &it->second;
  }
  std::map<std::string, Symbol, std::less<>> map;
};

/// Where a tensor's dtype comes from.
struct DTypeRef {
  enum class K : std::uint8_t { index, param, literal, invalid };
  K k = K::invalid;
  std::string name;
};

/// One position of SignatureCall::indices.
struct IndexSlot {
  enum class Src : std::uint8_t { forall, param, let };
  std::string name;
  std::string kind_text;  // IndexInfo::kind
  Kind kind;
  Src src = Src::forall;
};

/// An axis position inside a tensor's sizes: from the start, k + sum(len(splices)); from the
/// end, rank - (k + sum(len(splices))).
struct AxisPos {
  bool from_end = false;
  int k = 0;
  std::vector<const Expr*> splices;
};

/// One step of a solve plan.
struct PlanStep {
  enum class K : std::uint8_t {
    dtype_solve,   // name := dtype of tensor (in its allowed set)
    dtype_check,   // dtype of tensor == its declared dtype
    rank,          // rank == fixed + sum(len(splices)) (>= when at_least)
    splice_solve,  // name := sizes[pos : end]
    splice_check,  // sizes[pos + i] == expr[i]
    axis_solve,    // name := sizes[pos]
    axis_affine,   // name := (sizes[pos] - e) / a, exact and >= 0
    axis_check,    // sizes[pos] == expr
    let,           // name := its expression
  };
  K k = K::axis_check;
  int tensor = -1;   // index into Combo::tensors
  std::string name;  // solved index or let
  AxisPos pos, end;
  const Expr* expr = nullptr;  // the declared axis / splice
  ExprPtr a, e;                // axis_affine coefficients (checked, Int)
  int fixed = 0;               // rank: the number of single axes
  bool at_least = false;
  std::vector<const Expr*> splices;  // rank: known splices
};

/// A tensor a plan reads: a construction-time tensor or a present input.
struct PlanTensor {
  bool ctor = false;
  int index = 0;  // into OpDecl::params (ctor) or OpDecl::inputs
  std::string name;
  std::string decl_text;  // shape as declared (family applications expanded: "F[..] = [..]")
};

/// A solve plan: the tensors it reads and its steps, and the names known after it.
struct Plan {
  std::vector<PlanTensor> tensors;
  std::vector<PlanStep> steps;
  std::set<std::string> known;
  std::map<std::string, std::string> solved_from;  // index → "input 'x'"
};

/// One combination of type-family branches (by discriminant param values) and tensor presence.
struct Combo {
  std::vector<std::pair<std::string, EValue>> discr;            // discriminant param → value
  std::vector<bool> input_present;                              // per OpDecl::inputs
  std::vector<bool> ctor_present;                               // per OpDecl::params (tensors only)
  std::vector<std::vector<ShapeItem>> input_axes;               // per input (empty when absent)
  std::vector<std::vector<ShapeItem>> ctor_axes;                // per param
  std::vector<std::vector<ShapeItem>> output_axes;              // per output
  std::vector<std::string> input_decl, output_decl, ctor_decl;  // shape text for messages
  std::map<std::string, ExprPtr> lets;  // every let, simplified for this branch
  Plan plan;
  std::vector<ExprPtr> rules;  // per shape rule: simplified (null: checked at
                               // construction or always true here)
  ExprPtr flops, bytes;        // simplified roofline
  std::string description;     // "layout == 'sd', positions absent"
};

/// A workload row, typed.
struct RowInfo {
  std::string label;
  std::vector<std::pair<std::string, EValue>> values;  // row order
  std::vector<std::string> some;
  std::vector<std::vector<std::pair<std::string, std::string>>> dtype_cases;  // forall order
};

struct OpInfo {
  OpDecl* decl = nullptr;
  bool ok = false;  // no semantic error: code can be generated
  OpSymbols symbols;
  std::vector<std::string> let_order;                           // dependencies first
  std::vector<DTypeRef> input_dtype, output_dtype, ctor_dtype;  // ctor_dtype per param
  std::vector<IndexSlot> slots;
  std::vector<std::string> discr_params;  // params that select type-family branches
  std::vector<Combo> combos;
  // Construction check.
  std::vector<std::vector<ShapeItem>> ctor_axes;          // per param (checked)
  std::vector<std::string> ctor_decl;                     // per param: shape text
  Plan ctor_plan;                                         // the required construction-time tensors
  std::vector<std::pair<int, Plan>> optional_ctor_plans;  // param index → its plan
  std::set<std::string> ctor_known;                       // names known at construction
  std::vector<bool> rule_at_construction;                 // per shape rule
  std::set<std::string> splice_params;                    // list params spliced into a shape
  std::set<std::string> axis_params;                      // int params used as a bare axis
  std::vector<RowInfo> rows;
};

}  // namespace tgen
