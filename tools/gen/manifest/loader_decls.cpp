// The declarations of a signature: params (types, defaults, construction-time tensors),
// input and output tensors, and type families.
#include <algorithm>

#include "manifest/file_loader.h"
#include "manifest/types.h"

namespace tgen::loading {

void FileLoader::load_param(OpDecl& op, const MapEntry& p) {
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
        error(d.default_line, "param '" + p.key + "': a construction-time tensor takes no default");
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

void FileLoader::load_tensor(OpDecl& op, const MapEntry& t, bool output) {
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

void FileLoader::load_family(OpDecl& op, const MapEntry& f) {
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

}  // namespace tgen::loading
