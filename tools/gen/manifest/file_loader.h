// Internal to the loader: the reader of one manifest file, split by section over
// manifest/loader*.cpp (YAML structure and expressions; entries and signatures; params,
// tensors and type families; roofline, workloads and composition).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "diag.h"
#include "manifest/model.h"
#include "manifest/yaml_util.h"

namespace tgen::loading {

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

  // Loads one file's entries into `m` (loader.cpp).
  void load(const YAML::Node& root, Manifest& m);

 private:
  void error(int line, std::string msg) { diags_.error(path_, line, std::move(msg)); }
  std::vector<MapEntry> entries(const YAML::Node& n, const std::string& what,
                                const std::vector<std::string_view>& allowed) {
    return map_entries(n, what, allowed, diags_, path_);
  }
  // ---- YAML structure, expressions and shapes (loader.cpp) ----
  const MapEntry* find(const std::vector<MapEntry>& es, std::string_view key);
  // Line of a value, or of its key when the value is null (yaml-cpp marks empty values late).
  static int value_line(const MapEntry& e) { return e.value.IsNull() ? e.line : line_of(e.value); }
  bool require_map(const MapEntry& e, const std::string& what);
  std::optional<bool> flag(const MapEntry& e, const std::string& what);
  ExprSrc expression(const YAML::Node& n, int line, const std::string& where, bool& ok);
  ShapeSrc shape(const YAML::Node& n, int line, const std::string& where, bool& ok);

  // ---- the entry and its signature (loader_entry.cpp) ----
  void load_op(OpDecl& op, const YAML::Node& n);
  static bool valid_label(const std::string& s);
  static bool dotted_name(const std::string& s);
  void load_signature(OpDecl& op, const YAML::Node& n);

  // ---- params, tensors, type families (loader_decls.cpp) ----
  void load_param(OpDecl& op, const MapEntry& p);
  void load_tensor(OpDecl& op, const MapEntry& t, bool output);
  void load_family(OpDecl& op, const MapEntry& f);

  // ---- roofline, workloads, composition (loader_sections.cpp) ----
  void load_roofline(OpDecl& op, const MapEntry& r);
  void load_peak(OpDecl& op, const MapEntry& p);
  void load_workloads(OpDecl& op, const MapEntry& w);
  void load_composition(OpDecl& op, const MapEntry& c);

  std::string path_;
  std::vector<std::string> lines_;
  std::string prefix_;
  Diagnostics& diags_;
  std::string family_;
};

}  // namespace tgen::loading
