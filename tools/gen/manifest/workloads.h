// Workload rows: typing of row values, used indices per branch, dtype cases, case ids, and
// instantiation (shapes non-negative, the solve plan re-solves the row, rules hold, roofline
// evaluates).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "diag.h"
#include "expr/eval.h"
#include "manifest/analysis.h"

namespace tgen {

/// An environment over a map of values and tensor facts.
class MapEnv : public EvalEnv {
 public:
  const EValue* lookup(std::string_view name) const override {
    auto it = values.find(name);
    return it == values.end() ? nullptr : &it->second;
  }
  std::optional<bool> tensor_present(std::string_view name) const override {
    auto it = present.find(name);
    if (it == present.end()) return std::nullopt;
    return it->second;
  }
  std::optional<std::int64_t> tensor_bytes(std::string_view name) const override {
    auto it = bytes.find(name);
    if (it == bytes.end()) return std::nullopt;
    return it->second;
  }
  std::map<std::string, EValue, std::less<>> values;
  std::map<std::string, bool, std::less<>> present;
  std::map<std::string, std::int64_t, std::less<>> bytes;
};

/// Checks and types every workload row of an analysed op (fills info.rows).
void check_workloads(OpInfo& info, Diagnostics& diags);

/// Runs a plan over concrete tensor shapes and dtypes (per plan tensor), solving into `env`.
/// False with `why` when a check fails.
bool run_plan(const OpInfo& info, const Plan& plan, const std::vector<Seq>& shapes,
              const std::vector<std::string>& dtypes, MapEnv& env, std::string& why);

/// The combination a row selects (by discriminant values and presence); null when none.
const Combo* find_combo(const OpInfo& info,
                        const std::map<std::string, EValue, std::less<>>& params,
                        const std::vector<bool>& input_present,
                        const std::vector<bool>& ctor_present);

/// The symbols (indices, params, lets) an expression reads.
void collect_used(const OpInfo& info, const Expr& e, std::set<std::string>& used);

}  // namespace tgen
