// How the emitted code spells a manifest name in each generated function (for emit_cpp): as a
// local of the checks, positionally from a call record (roofline), or from a workload row.
#pragma once

#include <set>
#include <string>

#include "codegen/op_emitter.h"
#include "expr/emit_cpp.h"
#include "manifest/analysis.h"

namespace tgen::op_emit {

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

// Inside eval_roofline: everything read positionally from call.indices, lets recomputed.
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
    // A let is recomputed from what it reads (lets are acyclic), so that a record whose lets
    // were never solved, such as the one `tileops bench` estimates a case from, evaluates too.
    if (slot->src == IndexSlot::Src::let) {
      for (const auto& let : info_.decl->lets) {
        if (let.name == name && let.expr.ast) return "(" + emit_cpp(*let.expr.ast, *this) + ")";
      }
    }
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

}  // namespace tgen::op_emit
