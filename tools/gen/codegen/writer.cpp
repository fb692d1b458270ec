#include "codegen/writer.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tgen {

bool write_if_changed(const std::string& path, const std::string& content) {
  namespace fs = std::filesystem;
  {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream ss;
      ss << in.rdbuf();
      if (ss.str() == content) return false;
    }
  }
  const fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + tmp);
    out << content;
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  fs::rename(tmp, p);
  return true;
}

}  // namespace tgen
