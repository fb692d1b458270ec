// `tileops describe <Op>`: the manifest entry of an op, as the library holds it, plus what is
// registered for it (class, kernel types, targets, reference).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli.h"
#include "tileops/base/op_class.h"
#include "tileops/base/reference.h"
#include "tileops/target/target.h"

namespace tileops::cli {

CLI::App* add_describe_command(CLI::App& app, DescribeOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "describe",
      "Show an op's manifest entry: signature (indices, params, inputs, outputs, lets, shape "
      "rules, dtype combos), roofline, workloads with case ids, composition, doc comment and "
      "source, and what is registered for it");
  cmd->add_option("op", options.ops, "Op names (as `tileops list` shows them)")->required();
  return cmd;
}

namespace {

std::string device_name(Device::Type t) {
  return t == Device::Type::cpu ? "cpu" : "cuda";
}

std::string dtype_assignment(const std::vector<std::pair<std::string_view, DType>>& combo) {
  std::vector<std::string> parts;
  for (const auto& [name, dtype] : combo) {
    parts.push_back(fmt::format("{}={}", name, dtype_name(dtype)));
  }
  return join(parts, " ");
}

/// Prints `rows` as aligned columns under an indent.
void print_columns(const std::vector<std::vector<std::string>>& rows, std::string_view indent) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line(indent);
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    fmt::print("{}\n", line);
  }
}

std::string tensor_flags(const TensorDecl& t) {
  std::vector<std::string> flags;
  if (t.optional) flags.emplace_back("optional");
  if (t.mutated) flags.emplace_back("mutated");
  if (t.contiguous) flags.emplace_back("contiguous");
  if (t.buffer_out) flags.emplace_back("buffer: out");
  return join(flags, ", ");
}

void describe_one(const OpSchema& s) {
  fmt::print("{}\n", s.name);
  fmt::print("  family: {}   status: {}\n", s.family, s.status);
  if (!s.ref_api.empty()) fmt::print("  ref_api: {}\n", s.ref_api);
  if (!s.source.empty()) fmt::print("  source: {}\n", s.source);
  if (!s.doc.empty()) {
    fmt::print("\n");
    std::string_view doc = s.doc;
    while (!doc.empty()) {
      const auto nl = doc.find('\n');
      const std::string_view line = doc.substr(0, nl);
      fmt::print("  {}\n", line);
      if (nl == std::string_view::npos) break;
      doc.remove_prefix(nl + 1);
    }
  }

  fmt::print("\nSignature\n");
  if (!s.indices.empty()) {
    fmt::print("  indices:\n");
    std::vector<std::vector<std::string>> rows;
    for (const auto& ix : s.indices) rows.push_back({std::string(ix.name), std::string(ix.kind)});
    print_columns(rows, "    ");
  }
  if (!s.params.empty()) {
    fmt::print("  params:\n");
    std::vector<std::vector<std::string>> rows;
    for (const auto& p : s.params) {
      std::vector<std::string> flags;
      if (p.kw_only) flags.emplace_back("kw_only");
      if (p.is_tensor) {
        flags.push_back(fmt::format("tensor {} {}", p.tensor_dtype, p.tensor_shape));
      }
      if (p.optional) flags.emplace_back("optional");
      rows.push_back({std::string(p.name), std::string(p.type),
                      p.has_default ? "= " + value_repr(p.default_value) : "(required)",
                      join(flags, ", "), p.doc.empty() ? "" : "# " + std::string(p.doc)});
    }
    print_columns(rows, "    ");
  }
  auto tensors = [](std::string_view title, const std::vector<TensorDecl>& decls) {
    if (decls.empty()) return;
    fmt::print("  {}:\n", title);
    std::vector<std::vector<std::string>> rows;
    for (const auto& t : decls) {
      rows.push_back(
          {std::string(t.name), std::string(t.dtype), std::string(t.shape), tensor_flags(t)});
    }
    print_columns(rows, "    ");
  };
  tensors("inputs", s.inputs);
  tensors("outputs", s.outputs);
  if (!s.lets.empty()) {
    fmt::print("  lets:\n");
    std::vector<std::vector<std::string>> rows;
    for (const auto& [name, expr] : s.lets)
      rows.push_back({std::string(name), "= " + std::string(expr)});
    print_columns(rows, "    ");
  }
  if (!s.shape_rules.empty()) {
    fmt::print("  shape rules:\n");
    for (const auto& rule : s.shape_rules) fmt::print("    {}\n", rule);
  }
  if (!s.dtype_combos.empty()) {
    fmt::print("  dtype combos:\n");
    for (const auto& combo : s.dtype_combos) fmt::print("    {}\n", dtype_assignment(combo));
  }

  fmt::print("\nRoofline\n");
  fmt::print("  flops: {}\n", s.roofline_flops.empty() ? "-" : s.roofline_flops);
  fmt::print("  bytes: {}\n", s.roofline_bytes.empty()
                                  ? "derived: bytes of every tensor x (reads + writes)"
                                  : s.roofline_bytes);

  const std::vector<WorkloadCase> cases = s.workload_cases();
  fmt::print("\nWorkloads ({} rows, {} cases)\n", s.workloads.size(), cases.size());
  for (const auto& row : s.workloads) {
    std::vector<std::string> values;
    for (const auto& [name, value] : row.values) {
      values.push_back(fmt::format("{}={}", name, value_repr(value)));
    }
    std::vector<std::string> some;
    for (const auto& name : row.some) some.emplace_back(name);
    fmt::print("  {}: {}{}\n", row.label.empty() ? "(no label)" : row.label, join(values, " "),
               some.empty() ? "" : fmt::format("  some=[{}]", join(some, ", ")));
    for (const auto& c : cases) {
      if (c.row == &row) {
        const std::string dtypes = c.dtype_case < row.dtype_cases.size()
                                       ? dtype_assignment(row.dtype_cases[c.dtype_case])
                                       : std::string();
        fmt::print("    case {}{}\n", c.id, dtypes.empty() ? "" : "  (" + dtypes + ")");
      }
    }
  }

  if (!s.composition.empty()) {
    fmt::print("\nComposition\n");
    std::vector<std::vector<std::string>> rows;
    for (const auto& st : s.composition) {
      rows.push_back(
          {std::string(st.name),
           !st.op.empty() ? "op " + std::string(st.op) : "kernel " + std::string(st.kernel),
           st.optional ? "optional" : ""});
    }
    print_columns(rows, "  ");
  }

  fmt::print("\nRegistered\n");
  const OpClass* op_class = find_op_class(s.name);
  if (op_class == nullptr) {
    fmt::print("  op class: none (no C++ class is registered under this name)\n");
  } else {
    fmt::print("  op class: yes\n");
    for (const auto& iface : op_class->interfaces) fmt::print("  interface: {}\n", iface.name);
    std::vector<std::vector<std::string>> rows;
    for (const auto& impl : op_class->kernel_types) {
      std::vector<std::string> devices;
      for (auto d : impl.devices) devices.push_back(device_name(d));
      std::vector<std::string> archs;
      if (impl.supported_archs) {
        for (int a : *impl.supported_archs) archs.push_back(std::to_string(a));
      }
      std::vector<std::string> notes;
      if (impl.general) notes.emplace_back("general");
      if (!impl.preferred_over.empty()) {
        notes.push_back("preferred over " + join(impl.preferred_over, ", "));
      }
      rows.push_back({"kernel type " + impl.key, impl.class_name, "[" + impl.interface_name + "]",
                      join(devices, ","), impl.supported_archs ? "sm " + join(archs, ",") : "",
                      join(notes, "; ")});
    }
    print_columns(rows, "  ");
    for (const auto& d : op_class->delegate_types) {
      fmt::print("  delegate: {} -> {}\n", d.stage, d.op);
    }
    for (const auto& problem : op_class->registration_problems) {
      fmt::print("  registration problem: {}\n", problem);
    }
  }
  const std::vector<std::string> targets = registered_targets(s.name);
  fmt::print("  targets: {}\n", targets.empty() ? "-" : join(targets, ", "));
  for (const auto& impl : registered_kernel_types(s.name)) {
    fmt::print("  backend kernel type: {} ({})\n", impl.key, impl.source);
  }
  fmt::print("  reference: {}\n", find_reference(s.name) != nullptr ? "yes" : "none");
}

}  // namespace

int run_describe(const DescribeOptions& options) {
  std::vector<const OpSchema*> schemas;
  for (const auto& name : options.ops) schemas.push_back(&schema_or_fail(name));
  for (std::size_t i = 0; i < schemas.size(); ++i) {
    if (i) fmt::print("\n{}\n\n", std::string(80, '='));
    describe_one(*schemas[i]);
  }
  return 0;
}

}  // namespace tileops::cli
