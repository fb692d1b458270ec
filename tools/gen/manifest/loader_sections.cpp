// The roofline, workload rows and composition of an entry.
#include <algorithm>

#include "manifest/file_loader.h"
#include "manifest/types.h"

namespace tgen::loading {

namespace {

/// A hardware-profile key: "<unit>.<format>", lowercase letters, digits and underscores.
bool peak_key(const std::string& s) {
  const auto dot = s.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == s.size() || s.find('.', dot + 1) != s.npos)
    return false;
  for (const char ch : s) {
    if (ch != '.' && ch != '_' && !(ch >= 'a' && ch <= 'z') && !(ch >= '0' && ch <= '9'))
      return false;
  }
  return true;
}

}  // namespace

void FileLoader::load_peak(OpDecl& op, const MapEntry& p) {
  op.has_peak = true;
  op.peak.line = value_line(p);
  const auto key_of = [&](const MapEntry& e, std::string& out) {
    const auto v = scalar_string(e.value);
    if (!v || !peak_key(*v)) {
      error(value_line(e), "roofline.peak: '" + node_text(e.value) +
                               "' is not a hardware-profile key such as tensor_core.bf16");
      return;
    }
    out = *v;
  };
  if (!p.value.IsMap()) {
    key_of(p, op.peak.key);
    return;
  }
  const auto es = entries(p.value, "roofline.peak", {});
  for (const auto& e : es) {
    if (e.key == "index") {
      op.peak.index = scalar_string(e.value).value_or("");
      if (op.peak.index.empty()) error(value_line(e), "roofline.peak index must be a name");
    } else if (e.key == "default") {
      key_of(e, op.peak.key);
    } else {
      op.peak.by_dtype.emplace_back(e.key, "");
      key_of(e, op.peak.by_dtype.back().second);
    }
  }
  if (op.peak.index.empty() || !find(es, "default")) {
    error(op.peak.line,
          "roofline.peak by dtype needs 'index' (a DType index) and 'default' (the key before any "
          "call and for the other dtypes)");
  }
}

void FileLoader::load_roofline(OpDecl& op, const MapEntry& r) {
  const auto es = entries(r.value, "roofline", {"flops", "bytes", "peak"});
  const MapEntry* flops = find(es, "flops");
  if (!flops) {
    error(r.line, "roofline is missing required field 'flops'");
    op.complete = false;
    return;
  }
  bool ok = true;
  op.flops = expression(flops->value, value_line(*flops), "roofline.flops", ok);
  if (const MapEntry* bytes = find(es, "bytes")) {
    op.has_bytes = true;
    op.bytes = expression(bytes->value, value_line(*bytes), "roofline.bytes", ok);
  }
  if (const MapEntry* peak = find(es, "peak")) load_peak(op, *peak);
  if (!ok) op.complete = false;
}

void FileLoader::load_workloads(OpDecl& op, const MapEntry& w) {
  if (!w.value.IsSequence() || w.value.size() == 0) {
    error(value_line(w), "workloads must be a list with at least one row");
    op.complete = false;
    return;
  }
  for (const auto& r : w.value) {
    WorkloadDecl row;
    row.line = line_of(r);
    if (!r.IsMap()) {
      error(row.line, "a workload row must be a mapping");
      op.complete = false;
      continue;
    }
    for (const auto& e : entries(r, "a workload row", {})) {
      if (e.key == "label") {
        auto s = scalar_string(e.value, true);
        row.label_line = value_line(e);
        if (!s) {
          error(row.label_line, "label must be a string");
        } else {
          row.label = *s;
          if (!valid_label(row.label)) {
            error(row.label_line,
                  "label '" + row.label + "' must be 1-24 characters of [A-Za-z0-9._-]");
          }
        }
      } else if (e.key == "some") {
        if (!e.value.IsSequence()) {
          error(value_line(e), "some must be a list of optional input names");
          continue;
        }
        for (const auto& s : e.value) {
          auto name = scalar_string(s);
          if (!name) {
            error(line_of(s), "some must be a list of optional input names");
            continue;
          }
          row.some.emplace_back(*name, line_of(s));
        }
      } else if (e.key == "dtype_cases") {
        row.has_dtype_cases = true;
        if (!e.value.IsSequence() || e.value.size() == 0) {
          error(value_line(e),
                "dtype_cases must be a non-empty list of assignments such as {T: float16}");
          continue;
        }
        for (const auto& c : e.value) {
          DTypeRow dc;
          dc.line = line_of(c);
          if (!c.IsMap()) {
            error(dc.line, "a dtype case must be a mapping such as {T: float16}");
            continue;
          }
          for (const auto& cell : entries(c, "a dtype case", {})) {
            auto s = scalar_string(cell.value);
            if (!s) {
              error(value_line(cell),
                    "dtype case value of '" + cell.key + "' must be a dtype name");
              continue;
            }
            dc.cells.emplace_back(cell.key, *s);
          }
          row.dtype_cases.push_back(std::move(dc));
        }
      } else {
        row.values.push_back(RowEntry{e.key, value_line(e), e.value});
      }
    }
    if (row.label_line == 0) error(row.line, "a workload row needs a label");
    op.workloads.push_back(std::move(row));
  }
}

void FileLoader::load_composition(OpDecl& op, const MapEntry& c) {
  op.has_composition = true;
  op.composition_line = c.line;
  if (!require_map(c, "composition")) return;
  const auto es = entries(c.value, "composition", {"kind", "stages"});
  const MapEntry* kind = find(es, "kind");
  if (!kind) {
    error(c.line, "composition is missing required field 'kind' (kind: composite)");
  } else if (scalar_string(kind->value).value_or("") != "composite") {
    error(value_line(*kind),
          "composition kind must be 'composite', got '" + node_text(kind->value) + "'");
  }
  const MapEntry* stages = find(es, "stages");
  if (!stages || !stages->value.IsSequence() || stages->value.size() == 0) {
    error(stages ? value_line(*stages) : c.line, "composition stages must be a non-empty list");
    return;
  }
  for (const auto& s : stages->value) {
    StageDecl st;
    st.line = line_of(s);
    if (!s.IsMap()) {
      error(st.line, "a composition stage must be a mapping {name, op | kernel, optional}");
      continue;
    }
    const auto ses = entries(s, "a composition stage", {"name", "op", "kernel", "optional"});
    for (const auto& e : ses) {
      if (e.key == "optional") {
        if (auto b = flag(e, "stage optional")) st.optional = *b;
        continue;
      }
      auto v = scalar_string(e.value);
      if (!v) {
        error(value_line(e), "stage " + e.key + " must be a name");
        continue;
      }
      if (e.key == "name") st.name = *v;
      if (e.key == "op") st.op = *v;
      if (e.key == "kernel") st.kernel = *v;
    }
    if (!find(ses, "name")) error(st.line, "a composition stage needs a name");
    const bool has_op = find(ses, "op") != nullptr;
    const bool has_kernel = find(ses, "kernel") != nullptr;
    if (has_op == has_kernel) {
      error(st.line,
            "composition stage '" + st.name + "' must have exactly one of 'op' and 'kernel'");
    }
    op.stages.push_back(std::move(st));
  }
  for (std::size_t i = 0; i < op.stages.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (!op.stages[i].name.empty() && op.stages[i].name == op.stages[j].name) {
        error(op.stages[i].line, "duplicate composition stage name '" + op.stages[i].name +
                                     "' (first at line " + std::to_string(op.stages[j].line) + ")");
      }
    }
  }
}

}  // namespace tgen::loading
