// tileops-gen: the manifest compiler and validator (a build step).
//
//   tileops-gen --manifest <dir> --out <dir> [--stamp <file>] [--source-prefix <text>] [--check]
//               [--python-out <dir>]
//
// Reads every <dir>/*.yaml (one file per family), validates the whole manifest and, when no
// diagnostic was found, writes <out>/include/tileops/gen/<family>.h, <out>/src/<family>.cpp and
// <out>/src/manifest_registry.cpp (each only when its contents change); with --python-out <dir>
// also the Python package's generated files and the torch extension's registrations under
// <dir>/python/. Diagnostics go to stderr
// as `file:line: message`, sorted by file and line; any diagnostic makes the exit status 1.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "codegen/writer.h"
#include "diag.h"
#include "manifest/loader.h"
#include "manifest/validator.h"

namespace {

int usage(const char* why) {
  std::cerr << "tileops-gen: " << why << "\n"
            << "usage: tileops-gen --manifest <dir> --out <dir> [--stamp <file>] "
               "[--source-prefix <text>] [--check] [--python-out <dir>]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::string manifest_dir, out_dir, stamp, prefix, python_dir;
  bool check_only = false, have_prefix = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string& into) {
      if (i + 1 >= argc) return false;
      into = argv[++i];
      return true;
    };
    if (arg == "--manifest") {
      if (!value(manifest_dir)) return usage("--manifest needs a folder");
    } else if (arg == "--out") {
      if (!value(out_dir)) return usage("--out needs a folder");
    } else if (arg == "--stamp") {
      if (!value(stamp)) return usage("--stamp needs a file");
    } else if (arg == "--source-prefix") {
      if (!value(prefix)) return usage("--source-prefix needs a value");
      have_prefix = true;
    } else if (arg == "--python-out") {
      if (!value(python_dir)) return usage("--python-out needs a folder");
    } else if (arg == "--check") {
      check_only = true;
    } else {
      return usage(("unknown argument '" + arg + "'").c_str());
    }
  }
  if (manifest_dir.empty()) return usage("--manifest is required");
  if (out_dir.empty() && !check_only) return usage("--out is required (or --check)");

  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(manifest_dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".yaml") files.push_back(e.path().string());
  }
  if (ec) {
    std::cerr << manifest_dir << ":1: cannot read the manifest folder: " << ec.message() << "\n";
    return 1;
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::cerr << manifest_dir << ":1: no manifest files (*.yaml)\n";
    return 1;
  }
  if (!have_prefix) {
    const fs::path dir = fs::path(manifest_dir).lexically_normal();
    std::string base = dir.filename().string();
    if (base.empty()) base = dir.parent_path().filename().string();
    prefix = base + "/";
  }

  tgen::Diagnostics diags;
  tgen::Manifest manifest = tgen::load_manifest(files, prefix, diags);
  std::vector<tgen::OpInfo> infos = tgen::validate(manifest, diags);
  if (!diags.empty()) {
    diags.print(std::cerr);
    std::cerr << "tileops-gen: " << diags.size() << " error" << (diags.size() == 1 ? "" : "s")
              << " in the manifest\n";
    return 1;
  }
  if (check_only) return 0;
  try {
    for (const auto& f : tgen::generate(manifest, infos)) {
      tgen::write_if_changed((fs::path(out_dir) / f.path).string(), f.content);
    }
    if (!python_dir.empty()) {
      std::vector<const tgen::OpInfo*> sorted;
      for (const auto& info : infos) sorted.push_back(&info);
      std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
        return a->decl->name < b->decl->name;
      });
      for (const auto& f : tgen::generate_python(sorted)) {
        tgen::write_if_changed((fs::path(python_dir) / f.path).string(), f.content);
      }
    }
    if (!stamp.empty()) {
      if (fs::path(stamp).has_parent_path()) fs::create_directories(fs::path(stamp).parent_path());
      std::ofstream(stamp, std::ios::trunc) << "tileops-gen ran\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "tileops-gen: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
