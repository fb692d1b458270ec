// Kinds of manifest expressions (docs/design/manifest.md, "Expressions"): what a value is at build
// time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tgen {

struct Kind {
  enum class Tag : std::uint8_t {
    error,   // an expression that failed to check
    int_,    // Int (int64)
    dim,     // Dim: a non-negative Int (an axis length)
    float_,  // Float (double)
    bool_,   // Bool
    seq,     // Seq[Int]: a Shape or a list param (shape == true for a Shape)
    dtype,   // DType (values: the allowed spellings)
    enum_,   // a string literal set (values)
    str,     // an open string
    none,    // the literal None
    maybe,   // Maybe[inner]: an `X | None` param
    tuple,   // a tuple literal of non-int elements (only the right side of `in`)
    tensor,  // a tensor name (only inside present() and bytes())
  };

  Tag tag = Tag::error;
  bool shape = false;                 // seq: a Shape index (its elements are Dims)
  std::vector<std::string> values;    // enum_: the literals; dtype: the allowed dtypes
  std::shared_ptr<const Kind> inner;  // maybe: the payload
  std::vector<Kind> elems;            // tuple: the element kinds

  static Kind error() { return Kind{}; }
  static Kind of(Tag t) {
    Kind k;
    k.tag = t;
    return k;
  }
  static Kind int_() { return of(Tag::int_); }
  static Kind dim() { return of(Tag::dim); }
  static Kind float_() { return of(Tag::float_); }
  static Kind bool_() { return of(Tag::bool_); }
  static Kind seq(bool is_shape = false) {
    Kind k = of(Tag::seq);
    k.shape = is_shape;
    return k;
  }
  static Kind dtype(std::vector<std::string> allowed) {
    Kind k = of(Tag::dtype);
    k.values = std::move(allowed);
    return k;
  }
  static Kind enum_(std::vector<std::string> literals) {
    Kind k = of(Tag::enum_);
    k.values = std::move(literals);
    return k;
  }
  static Kind maybe(Kind payload) {
    Kind k = of(Tag::maybe);
    k.inner = std::make_shared<const Kind>(std::move(payload));
    return k;
  }

  bool is(Tag t) const { return tag == t; }
  bool is_error() const { return tag == Tag::error; }
  bool is_int() const { return tag == Tag::int_ || tag == Tag::dim; }
  bool is_number() const { return is_int() || tag == Tag::float_; }
  bool is_stringy() const { return tag == Tag::enum_ || tag == Tag::str; }

  /// "Int", "Dim", "Shape", "Seq[Int]", "DType[float16 | bfloat16]", "'a' | 'b'", "Maybe[Float]"
  std::string str() const;
};

}  // namespace tgen
