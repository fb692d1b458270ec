// A small builder of indented C++ text.
#pragma once

#include <string>
#include <string_view>

namespace tgen {

class Code {
 public:
  void line(std::string_view s = {}) {
    if (!s.empty()) out_.append(static_cast<std::size_t>(indent_) * 2, ' ');
    out_.append(s);
    out_ += '\n';
  }
  void open(std::string_view s) {
    line(s.empty() ? std::string("{") : std::string(s) + " {");
    ++indent_;
  }
  void close(std::string_view suffix = {}) {
    --indent_;
    line("}" + std::string(suffix));
  }
  void indent() { ++indent_; }
  void dedent() { --indent_; }
  void raw(std::string_view s) { out_.append(s); }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
  int indent_ = 0;
};

}  // namespace tgen
