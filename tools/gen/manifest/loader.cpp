#include "manifest/loader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "manifest/types.h"
#include "manifest/yaml_util.h"

namespace tgen {

namespace {

class FileLoader {
 public:
  FileLoader(std::string path, std::vector<std::string> lines, std::string source_prefix,
             Diagnostics& diags)
      : path_(std::move(path)),
        lines_(std::move(lines)),
        prefix_(std::move(source_prefix)),
        diags_(diags) {
    family_ = std::filesystem::path(path_).stem().string();
  }

  void load(const YAML::Node& root, Manifest& m) {
    if (!root.IsDefined() || root.IsNull() || !root.IsMap() || root.size() == 0) {
      error(root.IsDefined() && !root.IsNull() ? line_of(root) : 1,
            "a manifest file must be a non-empty mapping of op names to entries");
      return;
    }
    for (const auto& e : map_entries(root, "the manifest file", {}, diags_, path_)) {
      auto op = std::make_unique<OpDecl>();
      op->name = e.key;
      op->file = path_;
      op->file_family = family_;
      op->line = e.line;
      op->source =
          prefix_ + std::filesystem::path(path_).filename().string() + ":" + std::to_string(e.line);
      op->doc = comment_doc(lines_, e.line, true);
      load_op(*op, e.value);
      m.ops.push_back(std::move(op));
    }
  }

 private:
  void error(int line, std::string msg) { diags_.error(path_, line, std::move(msg)); }

  std::vector<MapEntry> entries(const YAML::Node& n, const std::string& what,
                                const std::vector<std::string_view>& allowed) {
    return map_entries(n, what, allowed, diags_, path_);
  }

  const MapEntry* find(const std::vector<MapEntry>& es, std::string_view key) {
    for (const auto& e : es) {
      if (e.key == key) return &e;
    }
    return nullptr;
  }

  // Line of a value, or of its key when the value is null (yaml-cpp marks empty values late).
  static int value_line(const MapEntry& e) { return e.value.IsNull() ? e.line : line_of(e.value); }

  bool require_map(const MapEntry& e, const std::string& what) {
    if (e.value.IsMap()) return true;
    error(value_line(e), what + " must be a mapping");
    return false;
  }

  std::optional<bool> flag(const MapEntry& e, const std::string& what) {
    auto b = scalar_bool(e.value);
    if (!b) error(value_line(e), what + " must be true or false, got '" + node_text(e.value) + "'");
    return b;
  }

  ExprSrc expression(const YAML::Node& n, int line, const std::string& where, bool& ok) {
    ExprSrc src;
    src.line = line;
    src.where = where;
    auto text = scalar_string(n, true);
    if (!text) {
      error(line, where + " must be an expression string, got '" + node_text(n) + "'");
      ok = false;
      return src;
    }
    src.text = *text;
    ExprError err;
    src.ast = parse_expr(src.text, err);
    if (!src.ast) {
      error(line, expr_message(where, src.text, err.col, err.message));
      ok = false;
    }
    return src;
  }

  ShapeSrc shape(const YAML::Node& n, int line, const std::string& where, bool& ok) {
    ShapeSrc s;
    s.line = line;
    s.where = where;
    auto text = scalar_string(n, false);
    if (!text) {
      error(line,
            where + " must be a shape string such as \"[M, *S]\", got '" + node_text(n) + "'");
      ok = false;
      return s;
    }
    s.text = *text;
    ExprError err;
    s.ok = parse_shape(s.text, s.ast, err);
    if (!s.ok) {
      error(line, expr_message(where, s.text, err.col, err.message));
      ok = false;
    }
    return s;
  }

  void load_op(OpDecl& op, const YAML::Node& n) {
    if (!n.IsMap()) {
      error(op.line, "op '" + op.name + "' must be a mapping of fields");
      op.complete = false;
      return;
    }
    const auto es = entries(
        n, "op '" + op.name + "'",
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

  static bool valid_label(const std::string& s) {
    if (s.empty() || s.size() > 24) return false;
    for (char c : s) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
      if (!ok) return false;
    }
    return true;
  }

  static bool dotted_name(const std::string& s) {
    if (s.empty() || s.front() == '.' || s.back() == '.' || s.find("..") != std::string::npos) {
      return false;
    }
    for (char c : s) {
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '_' || c == '.')) {
        return false;
      }
    }
    return !(s[0] >= '0' && s[0] <= '9');
  }

  void load_signature(OpDecl& op, const YAML::Node& n) {
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
          error(value_line(e),
                "dtype_combos must be a non-empty list of rows such as {T: float16}");
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

  void load_param(OpDecl& op, const MapEntry& p) {
    ParamDecl d;
    d.name = p.key;
    d.line = p.line;
    d.doc = comment_doc(lines_, p.line, true);
    if (!p.value.IsMap()) {
      error(value_line(p), "param '" + p.key + "' must be a mapping with a 'type'");
      op.complete = false;
      return;
    }
    const auto es = entries(p.value, "param '" + p.key + "'",
                            {"type", "default", "kw_only", "dtype", "shape", "optional"});
    const MapEntry* type = find(es, "type");
    if (!type) {
      error(p.line, "param '" + p.key + "' is missing required field 'type'");
      op.complete = false;
      return;
    }
    auto text = scalar_string(type->value);
    std::string why;
    if (!text) {
      error(value_line(*type), "param '" + p.key + "': type must be a string");
      op.complete = false;
      return;
    }
    if (!parse_param_type(*text, d.type, why)) {
      error(value_line(*type), "param '" + p.key + "': " + why);
      op.complete = false;
      return;
    }
    d.type_ok = true;
    d.is_tensor = d.type.tag == ParamType::Tag::tensor;
    for (const auto& e : es) {
      if (e.key == "default") {
        d.default_line = value_line(e);
        if (d.is_tensor) {
          error(d.default_line,
                "param '" + p.key + "': a construction-time tensor takes no default");
          continue;
        }
        auto v = value_of_type(e.value, d.type, why);
        if (!v) {
          error(d.default_line, "param '" + p.key + "': default '" + node_text(e.value) +
                                    "' does not fit type '" + d.type.text + "': " + why);
          op.complete = false;  // rows would report the default as missing
          continue;
        }
        d.has_default = true;
        d.default_value = std::move(*v);
      } else if (e.key == "kw_only") {
        if (auto b = flag(e, "param '" + p.key + "': kw_only")) d.kw_only = *b;
      } else if (e.key == "dtype" || e.key == "shape" || e.key == "optional") {
        if (!d.is_tensor) {
          error(e.line, "param '" + p.key + "': '" + e.key +
                            "' is only for a construction-time tensor (type: torch.Tensor)");
          continue;
        }
        if (e.key == "dtype") {
          auto s = scalar_string(e.value);
          if (!s) {
            error(value_line(e), "param '" + p.key + "': dtype must be a name");
            op.complete = false;
          } else {
            d.dtype = *s;
            d.dtype_line = value_line(e);
          }
        } else if (e.key == "shape") {
          bool ok = true;
          d.shape = shape(e.value, value_line(e), "shape of param '" + p.key + "'", ok);
          if (!ok) op.complete = false;
        } else if (auto b = flag(e, "param '" + p.key + "': optional")) {
          d.optional = *b;
        }
      }
    }
    if (d.is_tensor) {
      for (const char* req : {"dtype", "shape"}) {
        if (!find(es, req)) {
          error(p.line,
                "construction-time tensor '" + p.key + "' is missing required field '" + req + "'");
          op.complete = false;
        }
      }
    }
    op.params.push_back(std::move(d));
  }

  void load_tensor(OpDecl& op, const MapEntry& t, bool output) {
    const std::string what = std::string(output ? "output" : "input") + " '" + t.key + "'";
    if (!t.value.IsMap()) {
      error(value_line(t), what + " must be a mapping with dtype and shape");
      op.complete = false;
      return;
    }
    TensorDecl d;
    d.name = t.key;
    d.line = t.line;
    d.output = output;
    const auto es =
        output ? entries(t.value, what, {"dtype", "shape", "buffer"})
               : entries(t.value, what, {"dtype", "shape", "optional", "mutated", "contiguous"});
    for (const char* req : {"dtype", "shape"}) {
      if (!find(es, req)) {
        error(t.line, what + " is missing required field '" + req + "'");
        op.complete = false;
      }
    }
    for (const auto& e : es) {
      if (e.key == "dtype") {
        auto s = scalar_string(e.value);
        if (!s) {
          error(value_line(e),
                what + ": dtype must be a name (a DType index, a dtype param or a dtype)");
          op.complete = false;
        } else {
          d.dtype = *s;
          d.dtype_line = value_line(e);
        }
      } else if (e.key == "shape") {
        bool ok = true;
        d.shape = shape(e.value, value_line(e), "shape of " + what, ok);
        if (!ok) op.complete = false;
      } else if (e.key == "optional") {
        if (auto b = flag(e, what + ": optional")) d.optional = *b;
      } else if (e.key == "mutated") {
        if (auto b = flag(e, what + ": mutated")) d.mutated = *b;
      } else if (e.key == "contiguous") {
        if (auto b = flag(e, what + ": contiguous")) d.contiguous = *b;
      } else if (e.key == "buffer") {
        auto s = scalar_string(e.value);
        if (!s || *s != "out") {
          error(value_line(e), what + ": buffer must be 'out', got '" + node_text(e.value) + "'");
        } else {
          d.buffer_out = true;
        }
      }
    }
    (output ? op.outputs : op.inputs).push_back(std::move(d));
  }

  void load_family(OpDecl& op, const MapEntry& f) {
    FamilyDecl fam;
    fam.name = f.key;
    fam.line = f.line;
    const std::string what = "type family '" + f.key + "'";
    if (!f.value.IsMap()) {
      error(value_line(f), what + " must be a mapping with params, match and cases");
      op.complete = false;
      return;
    }
    const auto es = entries(f.value, what, {"params", "match", "cases"});
    for (const char* req : {"params", "match", "cases"}) {
      if (!find(es, req)) {
        error(f.line, what + " is missing required field '" + req + "'");
        op.complete = false;
        op.families.push_back(std::move(fam));
        return;
      }
    }
    bool ok = true;
    for (const auto& e : es) {
      if (e.key == "params") {
        if (!require_map(e, what + ": params")) {
          ok = false;
          continue;
        }
        for (const auto& p : entries(e.value, what + " params", {})) {
          FamilyFormal formal;
          formal.name = p.key;
          formal.line = p.line;
          auto text = scalar_string(p.value);
          ParamType pt;
          std::string why;
          if (text && *text == "Dim") {
            formal.kind = Kind::dim();
          } else if (text && (*text == "Bool" || *text == "bool")) {
            formal.kind = Kind::bool_();
          } else if (text && parse_param_type(*text, pt, why) && pt.tag == ParamType::Tag::enum_) {
            formal.kind = Kind::enum_(pt.values);
          } else {
            error(value_line(p), what + ": parameter '" + p.key +
                                     "' must be Dim, bool or a union of string literals, got '" +
                                     node_text(p.value) + "'");
            ok = false;
            continue;
          }
          formal.type_text = *text;
          fam.formals.push_back(std::move(formal));
        }
      } else if (e.key == "match") {
        auto s = scalar_string(e.value);
        if (!s) {
          error(value_line(e), what + ": match must name one of its parameters");
          ok = false;
        } else {
          fam.match = *s;
          fam.match_line = value_line(e);
        }
      } else if (e.key == "cases") {
        if (!e.value.IsSequence() || e.value.size() == 0) {
          error(value_line(e), what + ": cases must be a non-empty list of {when, is}");
          ok = false;
          continue;
        }
        int i = 0;
        for (const auto& c : e.value) {
          FamilyCase fc;
          fc.line = line_of(c);
          if (!c.IsMap()) {
            error(fc.line, what + ": a case must be a mapping {when: <value>, is: <shape>}");
            ok = false;
            continue;
          }
          const auto ces = entries(c, what + " case", {"when", "is"});
          const MapEntry* when = find(ces, "when");
          const MapEntry* is = find(ces, "is");
          if (!when || !is) {
            error(fc.line, what + ": a case needs both 'when' and 'is'");
            ok = false;
            continue;
          }
          if (auto b = scalar_bool(when->value)) {
            fc.when = EValue(*b);
          } else if (auto s = scalar_string(when->value)) {
            std::string v = *s;
            if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) {
              v = v.substr(1, v.size() - 2);
            }
            fc.when = EValue(v);
          } else {
            error(value_line(*when), what + ": 'when' must be a literal of the match parameter");
            ok = false;
            continue;
          }
          bool sok = true;
          fc.is = shape(is->value, value_line(*is), what + " case " + std::to_string(i), sok);
          if (!sok) ok = false;
          ++i;
          fam.cases.push_back(std::move(fc));
        }
      }
    }
    fam.ok = ok;
    if (!ok) op.complete = false;
    op.families.push_back(std::move(fam));
  }

  void load_roofline(OpDecl& op, const MapEntry& r) {
    const auto es = entries(r.value, "roofline", {"flops", "bytes"});
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
    if (!ok) op.complete = false;
  }

  void load_workloads(OpDecl& op, const MapEntry& w) {
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

  void load_composition(OpDecl& op, const MapEntry& c) {
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
                                       "' (first at line " + std::to_string(op.stages[j].line) +
                                       ")");
        }
      }
    }
  }

  std::string path_;
  std::vector<std::string> lines_;
  std::string prefix_;
  Diagnostics& diags_;
  std::string family_;
};

}  // namespace

Manifest load_manifest(const std::vector<std::string>& files_in, const std::string& source_prefix,
                       Diagnostics& diags) {
  Manifest m;
  std::vector<std::string> files = files_in;
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      diags.error(path, 1, "cannot read the file");
      continue;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    std::vector<std::string> lines;
    {
      std::string line;
      std::istringstream ls(text);
      while (std::getline(ls, line)) lines.push_back(line);
    }
    m.families.push_back(std::filesystem::path(path).stem().string());
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      diags.error(path, static_cast<int>(e.mark.line) + 1, "YAML syntax error: " + e.msg);
      continue;
    }
    m.documents.push_back(root);
    FileLoader(path, std::move(lines), source_prefix, diags).load(root, m);
  }
  std::sort(m.families.begin(), m.families.end());
  // Duplicate op names across (and within) files.
  for (std::size_t i = 0; i < m.ops.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (m.ops[i]->name == m.ops[j]->name && m.ops[i]->file != m.ops[j]->file) {
        diags.error(m.ops[i]->file, m.ops[i]->line,
                    "duplicate op '" + m.ops[i]->name + "' (also declared at " + m.ops[j]->file +
                        ":" + std::to_string(m.ops[j]->line) + ")");
        m.ops[i]->complete = false;
        break;
      }
    }
  }
  return m;
}

}  // namespace tgen
