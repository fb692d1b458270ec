// One op entry: its fields, labels and dotted names, and the signature block.
#include <algorithm>

#include "manifest/file_loader.h"
#include "manifest/types.h"

namespace tgen::loading {

void FileLoader::load_op(OpDecl& op, const YAML::Node& n) {
  if (!n.IsMap()) {
    error(op.line, "op '" + op.name + "' must be a mapping of fields");
    op.complete = false;
    return;
  }
  const auto es =
      entries(n, "op '" + op.name + "'",
              {"family", "status", "ref_api", "signature", "roofline", "workloads", "composition"});
  for (const char* req : {"family", "status", "signature", "roofline", "workloads"}) {
    if (!find(es, req)) {
      error(op.line, "op '" + op.name + "' is missing required field '" + req + "'");
      if (std::string_view(req) != "family" && std::string_view(req) != "status") {
        op.complete = false;
      }
    }
  }
  for (const auto& e : es) {
    if (e.key == "family") {
      auto s = scalar_string(e.value);
      if (!s) {
        error(value_line(e), "family must be a name");
      } else {
        op.family = *s;
        if (op.family != family_) {
          error(value_line(e), "family '" + op.family + "' does not match the file name '" +
                                   family_ + "' (an op lives in manifest/<family>.yaml)");
        }
      }
    } else if (e.key == "status") {
      auto s = scalar_string(e.value);
      if (!s || (*s != "implemented" && *s != "spec-only")) {
        error(value_line(e),
              "status must be 'implemented' or 'spec-only', got '" + node_text(e.value) + "'");
      } else {
        op.status = *s;
      }
    } else if (e.key == "ref_api") {
      auto s = scalar_string(e.value);
      if (!s || !dotted_name(*s)) {
        error(value_line(e),
              "ref_api must be a dotted name such as torch.nn.functional.rms_norm, "
              "got '" +
                  node_text(e.value) + "'");
      } else {
        op.ref_api = *s;
      }
    } else if (e.key == "signature") {
      if (!require_map(e, "signature")) {
        op.complete = false;
        continue;
      }
      load_signature(op, e.value);
    } else if (e.key == "roofline") {
      if (!require_map(e, "roofline")) {
        op.complete = false;
        continue;
      }
      load_roofline(op, e);
    } else if (e.key == "workloads") {
      load_workloads(op, e);
    } else if (e.key == "composition") {
      load_composition(op, e);
    }
  }
}

bool FileLoader::valid_label(const std::string& s) {
  if (s.empty() || s.size() > 24) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool FileLoader::dotted_name(const std::string& s) {
  if (s.empty() || s.front() == '.' || s.back() == '.' || s.find("..") != std::string::npos) {
    return false;
  }
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.')) {
      return false;
    }
  }
  return !(s[0] >= '0' && s[0] <= '9');
}

void FileLoader::load_signature(OpDecl& op, const YAML::Node& n) {
  const auto es = entries(
      n, "signature",
      {"forall", "params", "inputs", "outputs", "types", "let", "shape_rules", "dtype_combos"});
  for (const auto& e : es) {
    const bool is_null = e.value.IsNull();
    if (e.key == "forall") {
      if (is_null) continue;
      if (!require_map(e, "forall")) {
        op.complete = false;
        continue;
      }
      for (const auto& f : entries(e.value, "forall", {})) {
        IndexDecl idx;
        idx.name = f.key;
        idx.line = f.line;
        auto text = scalar_string(f.value);
        std::string why;
        if (!text) {
          error(value_line(f),
                "forall index '" + f.key + "' needs a kind (Dim, Shape or DType[...])");
          op.complete = false;
        } else if (!parse_index_kind(*text, idx, why)) {
          error(value_line(f), "forall index '" + f.key + "': " + why);
          op.complete = false;
        } else {
          op.forall.push_back(std::move(idx));
        }
      }
    } else if (e.key == "params") {
      if (is_null) continue;
      if (!require_map(e, "params")) {
        op.complete = false;
        continue;
      }
      for (const auto& p : entries(e.value, "params", {})) load_param(op, p);
    } else if (e.key == "inputs" || e.key == "outputs") {
      if (is_null) continue;
      if (!require_map(e, e.key)) {
        op.complete = false;
        continue;
      }
      for (const auto& t : entries(e.value, e.key, {})) load_tensor(op, t, e.key == "outputs");
    } else if (e.key == "types") {
      if (!require_map(e, "types")) {
        op.complete = false;
        continue;
      }
      for (const auto& f : entries(e.value, "types", {})) load_family(op, f);
    } else if (e.key == "let") {
      if (is_null) continue;
      if (!require_map(e, "let")) {
        op.complete = false;
        continue;
      }
      for (const auto& l : entries(e.value, "let", {})) {
        bool ok = true;
        LetDecl d;
        d.name = l.key;
        d.expr = expression(l.value, value_line(l), "let '" + l.key + "'", ok);
        if (!ok) op.complete = false;
        op.lets.push_back(std::move(d));
      }
    } else if (e.key == "shape_rules") {
      if (is_null) continue;
      if (!e.value.IsSequence()) {
        error(value_line(e), "shape_rules must be a list of boolean expressions");
        op.complete = false;
        continue;
      }
      int i = 0;
      for (const auto& r : e.value) {
        bool ok = true;
        op.shape_rules.push_back(
            expression(r, line_of(r), "shape_rules[" + std::to_string(i++) + "]", ok));
        if (!ok) op.complete = false;
      }
    } else if (e.key == "dtype_combos") {
      if (!e.value.IsSequence() || e.value.size() == 0) {
        error(value_line(e), "dtype_combos must be a non-empty list of rows such as {T: float16}");
        op.complete = false;
        continue;
      }
      for (const auto& r : e.value) {
        DTypeRow row;
        row.line = line_of(r);
        if (!r.IsMap() || r.size() == 0) {
          error(row.line, "a dtype_combos row must be a non-empty mapping such as {T: float16}");
          op.complete = false;
          continue;
        }
        for (const auto& c : entries(r, "a dtype_combos row", {})) {
          auto s = scalar_string(c.value);
          if (!s) {
            error(value_line(c), "dtype_combos value of '" + c.key + "' must be a dtype name");
            op.complete = false;
            continue;
          }
          row.cells.emplace_back(c.key, *s);
        }
        op.dtype_combos.push_back(std::move(row));
      }
    }
  }
}

}  // namespace tgen::loading
