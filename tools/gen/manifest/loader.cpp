// Loads manifest/*.yaml into the model (see loader.h): reading the files, the YAML structure
// helpers and the parsing of expressions and shapes; the sections are manifest/loader_*.cpp.
#include "manifest/loader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "manifest/file_loader.h"

namespace tgen {

namespace loading {

void FileLoader::load(const YAML::Node& root, Manifest& m) {
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

const MapEntry* FileLoader::find(const std::vector<MapEntry>& es, std::string_view key) {
  for (const auto& e : es) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

bool FileLoader::require_map(const MapEntry& e, const std::string& what) {
  if (e.value.IsMap()) return true;
  error(value_line(e), what + " must be a mapping");
  return false;
}

std::optional<bool> FileLoader::flag(const MapEntry& e, const std::string& what) {
  auto b = scalar_bool(e.value);
  if (!b) error(value_line(e), what + " must be true or false, got '" + node_text(e.value) + "'");
  return b;
}

ExprSrc FileLoader::expression(const YAML::Node& n, int line, const std::string& where, bool& ok) {
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

ShapeSrc FileLoader::shape(const YAML::Node& n, int line, const std::string& where, bool& ok) {
  ShapeSrc s;
  s.line = line;
  s.where = where;
  auto text = scalar_string(n, false);
  if (!text) {
    error(line, where + " must be a shape string such as \"[M, *S]\", got '" + node_text(n) + "'");
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

}  // namespace loading

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
    loading::FileLoader(path, std::move(lines), source_prefix, diags).load(root, m);
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
