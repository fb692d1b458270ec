// Diagnostics: `file:line: message`, collected, deduplicated and printed sorted by file and line.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace tgen {

struct Diagnostic {
  std::string file;
  int line = 0;  // 1-based
  std::string message;
};

class Diagnostics {
 public:
  void error(const std::string& file, int line, std::string message);
  bool empty() const { return list_.empty(); }
  std::size_t size() const { return list_.size(); }
  /// Sorted by file then line (stable: same-line diagnostics keep the order they were found).
  std::vector<Diagnostic> sorted() const;
  void print(std::ostream& os) const;

 private:
  std::vector<Diagnostic> list_;
};

/// Message text for an expression error: `where "text", column N: message`.
std::string expr_message(const std::string& where, const std::string& text, int col,
                         const std::string& msg);

}  // namespace tgen
