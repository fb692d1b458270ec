#include "cli/manifest_scan.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <stdexcept>

namespace tileops::cli_test {
namespace {

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") + 1 - first);
}

std::string unquote(std::string s) {
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) {
    return s.substr(1, s.size() - 2);
  }
  return s;
}

/// "- {S: [1], ..., dtype_cases: [{T: bfloat16, P: int64}], label: x}" -> label and cases.
ManifestWorkload parse_workload_row(const std::string& row) {
  ManifestWorkload w;
  static const std::regex label_re(R"(label:\s*([A-Za-z0-9_.-]+))");
  if (std::smatch m; std::regex_search(row, m, label_re)) w.label = m[1];
  const auto start = row.find("dtype_cases:");
  if (start == std::string::npos) {
    w.dtype_cases.emplace_back();
    return w;
  }
  const auto open = row.find('[', start);
  const auto close = row.find(']', open);
  const std::string list = row.substr(open + 1, close - open - 1);
  static const std::regex case_re(R"(\{([^}]*)\})");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), case_re);
       it != std::sregex_iterator(); ++it) {
    std::vector<std::string> values;
    const std::string body = (*it)[1];
    std::size_t pos = 0;
    while (pos <= body.size()) {
      const auto comma = std::min(body.find(',', pos), body.size());
      const std::string item = body.substr(pos, comma - pos);
      values.push_back(trim(item.substr(item.find(':') + 1)));
      pos = comma + 1;
    }
    w.dtype_cases.push_back(std::move(values));
  }
  return w;
}

void scan_file(const std::filesystem::path& path, const std::string& shown_path,
               std::vector<ManifestOp>& ops) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  static const std::regex key_re(R"(^( *)([A-Za-z_][A-Za-z0-9_]*):(.*)$)");
  std::string section;     // the current two-space-indented key of the op
  std::string subsection;  // the current four-space-indented key under it
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (trim(line).empty() || trim(line).front() == '#') continue;
    const auto indent = line.find_first_not_of(' ');
    if (indent == 4 && section == "workloads" && line.compare(4, 2, "- ") == 0) {
      ops.back().workloads.push_back(parse_workload_row(line));
      continue;
    }
    std::smatch m;
    if (!std::regex_match(line, m, key_re)) continue;
    const std::string key = m[2];
    const std::string value = trim(m[3]);
    if (indent == 0) {
      ops.push_back(ManifestOp{.name = key, .file = shown_path, .line = number});
      section.clear();
      subsection.clear();
    } else if (ops.empty()) {
      continue;
    } else if (indent == 2) {
      section = key;
      subsection.clear();
      if (key == "family") ops.back().family = value;
      if (key == "status") ops.back().status = value;
    } else if (indent == 4) {
      subsection = key;
      if (section == "roofline" && key == "flops") ops.back().flops = unquote(value);
    } else if (indent == 6 && section == "signature") {
      if (subsection == "params") ops.back().params.push_back(key);
      if (subsection == "inputs") ops.back().inputs.push_back(key);
      if (subsection == "outputs") ops.back().outputs.push_back(key);
    }
  }
}

}  // namespace

std::vector<std::string> ManifestOp::case_ids() const {
  std::vector<std::string> ids;
  for (const auto& w : workloads) {
    for (const auto& values : w.dtype_cases) {
      std::string id = w.label;
      for (const auto& v : values) id += "-" + v;
      ids.push_back(std::move(id));
    }
  }
  return ids;
}

std::vector<ManifestOp> scan_manifest(const std::filesystem::path& source_dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir / "manifest")) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<ManifestOp> ops;
  for (const auto& f : files) scan_file(f, "manifest/" + f.filename().string(), ops);
  std::sort(ops.begin(), ops.end(),
            [](const ManifestOp& a, const ManifestOp& b) { return a.name < b.name; });
  return ops;
}

const ManifestOp& find_op(const std::vector<ManifestOp>& ops, const std::string& name) {
  for (const auto& op : ops) {
    if (op.name == name) return op;
  }
  throw std::out_of_range("no op " + name + " in the manifest");
}

}  // namespace tileops::cli_test
