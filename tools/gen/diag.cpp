#include "diag.h"

#include <algorithm>

namespace tgen {

void Diagnostics::error(const std::string& file, int line, std::string message) {
  for (const auto& d : list_) {
    if (d.file == file && d.line == line && d.message == message) return;
  }
  list_.push_back(Diagnostic{file, line, std::move(message)});
}

std::vector<Diagnostic> Diagnostics::sorted() const {
  std::vector<Diagnostic> out = list_;
  std::stable_sort(out.begin(), out.end(), [](const Diagnostic& a, const Diagnostic& b) {
    if (a.file != b.file) return a.file < b.file;
    return a.line < b.line;
  });
  return out;
}

void Diagnostics::print(std::ostream& os) const {
  for (const auto& d : sorted()) os << d.file << ":" << d.line << ": " << d.message << "\n";
}

std::string expr_message(const std::string& where, const std::string& text, int col,
                         const std::string& msg) {
  return where + " \"" + text + "\", column " + std::to_string(col) + ": " + msg;
}

}  // namespace tgen
