// Registered op classes (the dynamic path) and the registration-time check of a class against
// its manifest entry.
#include <algorithm>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "dispatch/implementation_table.h"
#include "tileops/base/op.h"
#include "tileops/base/op_class.h"
#include "tileops/core/error.h"

namespace tileops {
namespace {

struct OpClassRegistry {
  std::mutex mutex;
  std::map<std::string, const OpClass*, std::less<>> by_name;
};

OpClassRegistry& op_classes() {
  static OpClassRegistry registry;
  return registry;
}

}  // namespace

namespace detail {

std::vector<std::string> check_op_class(const OpClass& c) {
  std::vector<std::string> problems =
      check_implementation_table(c.name, c.interfaces, c.kernel_types);
  const OpSchema& schema = *c.schema;
  // delegate_types against the composition's `op` stages, order included.
  std::vector<const StageInfo*> op_stages;
  for (const auto& stage : schema.composition) {
    if (!stage.op.empty()) op_stages.push_back(&stage);
    if (!stage.kernel.empty()) {
      const bool known = std::any_of(c.kernel_types.begin(), c.kernel_types.end(),
                                     [&](const auto& k) { return k.key == stage.kernel; });
      if (!known) {
        problems.push_back(
            fmt::format("{}: composition stage '{}' names kernel '{}', which is not "
                        "in kernel_types",
                        c.name, stage.name, stage.kernel));
      }
    }
  }
  const auto describe_delegates = [&] {
    std::vector<std::string> items;
    for (const auto& d : c.delegate_types) items.push_back(d.stage + ": " + d.op);
    return fmt::format("[{}]", fmt::join(items, ", "));
  };
  const auto describe_stages = [&] {
    std::vector<std::string> items;
    for (const auto* s : op_stages) items.push_back(fmt::format("{}: {}", s->name, s->op));
    return fmt::format("[{}]", fmt::join(items, ", "));
  };
  bool agree = op_stages.size() == c.delegate_types.size();
  for (std::size_t i = 0; agree && i < op_stages.size(); ++i) {
    agree = op_stages[i]->name == c.delegate_types[i].stage &&
            op_stages[i]->op == c.delegate_types[i].op;
  }
  if (!agree) {
    problems.push_back(
        fmt::format("{}: delegate_types {} disagree with the manifest composition {}", c.name,
                    describe_delegates(), describe_stages()));
  }
  // The compile boundary exists exactly for entries with a call-time tensor input and no
  // composition (a composite traces through to its stages' nodes).
  const bool boundary = !schema.inputs.empty() && schema.composition.empty();
  if (boundary == schema.compile_op_names.empty() ||
      schema.compile_op_names.size() != schema.compile_op_schemas.size()) {
    problems.push_back(
        fmt::format("{}: compile_op_names ({} names) disagree with the boundary "
                    "conditions (call-time tensor input and no composition: {})",
                    c.name, schema.compile_op_names.size(), boundary));
  }
  for (const auto& injected : c.injected_parameters) {
    if (injected == "target" || schema.find_param(injected) != nullptr) {
      problems.push_back(
          fmt::format("{}: injected parameter '{}' collides with a manifest "
                      "parameter or 'target'",
                      c.name, injected));
    }
  }
  return problems;
}

void register_op_class(const OpClass* op_class) {
  auto& registry = op_classes();
  std::lock_guard lock(registry.mutex);
  registry.by_name[op_class->name] = op_class;
}

}  // namespace detail

std::vector<const OpClass*> registered_op_classes() {
  auto& registry = op_classes();
  std::lock_guard lock(registry.mutex);
  std::vector<const OpClass*> out;
  for (const auto& [name, c] : registry.by_name) out.push_back(c);
  return out;
}

const OpClass* find_op_class(std::string_view name) {
  auto& registry = op_classes();
  std::lock_guard lock(registry.mutex);
  const auto it = registry.by_name.find(name);
  return it == registry.by_name.end() ? nullptr : it->second;
}

ParamMap manifest_params(const ParamMap& params, const std::vector<std::string>& injected) {
  ParamMap out;
  for (const auto& [name, value] : params) {
    if (std::find(injected.begin(), injected.end(), name) == injected.end())
      out.emplace(name, value);
  }
  return out;
}

std::unique_ptr<Op> make_op(std::string_view name, const ParamMap& params, Target target) {
  const OpClass* c = find_op_class(name);
  if (c == nullptr) {
    if (find_schema(name) != nullptr) {
      throw OpNotAvailableError(
          fmt::format("{} has a manifest entry but no op class is registered for it", name));
    }
    throw SignatureError(fmt::format("no op named '{}' in the manifest", name));
  }
  for (const auto& [param, value] : params) {
    (void)value;
    const bool injected = std::find(c->injected_parameters.begin(), c->injected_parameters.end(),
                                    param) != c->injected_parameters.end();
    if (!injected && c->schema->find_param(param) == nullptr) {
      std::vector<std::string_view> known;
      for (const auto& p : c->schema->params) known.push_back(p.name);
      for (const auto& p : c->injected_parameters) known.push_back(p);
      throw SignatureError(fmt::format(
          "{}: unknown parameter '{}'; the manifest declares [{}]{}", name, param,
          fmt::join(known, ", "), c->injected_parameters.empty() ? "" : " (with the injected)"));
    }
  }
  return c->factory(params, std::move(target));
}

}  // namespace tileops
