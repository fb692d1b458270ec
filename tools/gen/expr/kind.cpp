#include "expr/kind.h"

namespace tgen {

namespace {
std::string join(const std::vector<std::string>& items, const std::string& sep, bool quote) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    if (quote) out += "'";
    out += items[i];
    if (quote) out += "'";
  }
  return out;
}
}  // namespace

std::string Kind::str() const {
  switch (tag) {
    case Tag::error:
      return "<error>";
    case Tag::int_:
      return "Int";
    case Tag::dim:
      return "Dim";
    case Tag::float_:
      return "Float";
    case Tag::bool_:
      return "Bool";
    case Tag::seq:
      return shape ? "Shape" : "Seq[Int]";
    case Tag::dtype:
      return values.empty() ? "DType" : "DType[" + join(values, " | ", false) + "]";
    case Tag::enum_:
      return join(values, " | ", true);
    case Tag::str:
      return "Str";
    case Tag::none:
      return "None";
    case Tag::maybe:
      return "Maybe[" + (inner ? inner->str() : std::string("?")) + "]";
    case Tag::tuple: {
      std::string out = "Tuple[";
      for (std::size_t i = 0; i < elems.size(); ++i) {
        if (i) out += ", ";
        out += elems[i].str();
      }
      return out + "]";
    }
    case Tag::tensor:
      return "Tensor";
  }
  return "<error>";
}

}  // namespace tgen
