// Runtime helpers for the C++ that tileops-gen emits from the manifest: the primitives of the
// expression language with Python semantics (floor division, negative indices, clamped slices),
// and the checks and messages of the generated signature checks. Nothing here parses a string.
//
// Generated code spells this namespace `ex::`. The helpers that touch tensors, devices and
// parameter values are templates, so that this header needs only dtype.h and error.h.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tileops/core/dtype.h"
#include "tileops/core/error.h"

namespace tileops::expr {

/// A sequence of Ints (a Shape, a list param); the same type as tileops::Sizes.
using Seq = std::vector<std::int64_t>;

/// Throws SignatureError(message).
[[noreturn]] void fail(const std::string& message);
/// Throws SignatureError for an Int overflow in `a op b`.
[[noreturn]] void fail_overflow(std::int64_t a, char op, std::int64_t b);

// ---- arithmetic (Int overflow and division by zero throw SignatureError) ------------------

inline std::int64_t add(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail_overflow(a, '+', b);
  return r;
}
inline std::int64_t sub(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) fail_overflow(a, '-', b);
  return r;
}
inline std::int64_t mul(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail_overflow(a, '*', b);
  return r;
}
inline std::int64_t neg(std::int64_t a) {
  return sub(0, a);
}

/// Python `a // b` (rounds toward negative infinity).
std::int64_t floordiv(std::int64_t a, std::int64_t b);
double floordiv(double a, double b);
/// Python `a % b` (the result takes the divisor's sign).
std::int64_t mod(std::int64_t a, std::int64_t b);
double mod(double a, double b);
/// ceil(a / b) for b > 0; SignatureError for b <= 0.
std::int64_t ceil_div(std::int64_t a, std::int64_t b);

// ---- sequences ---------------------------------------------------------------------------

inline std::int64_t len(const Seq& s) {
  return static_cast<std::int64_t>(s.size());
}
/// Product of the elements (1 for an empty sequence).
std::int64_t prod(const Seq& s);
/// Sum of the elements (0 for an empty sequence).
std::int64_t sum(const Seq& s);
/// Python indexing: `i` may be negative; out of range throws SignatureError.
std::int64_t at(const Seq& s, std::int64_t i);
/// Python slicing `s[lo:hi]` (bounds may be negative or absent; they clamp).
Seq slice(const Seq& s, std::optional<std::int64_t> lo, std::optional<std::int64_t> hi);
/// max/min of a non-empty sequence (SignatureError when empty).
std::int64_t max_seq(const Seq& s);
std::int64_t min_seq(const Seq& s);
inline bool contains(const Seq& s, std::int64_t x) {
  for (std::int64_t v : s) {
    if (v == x) return true;
  }
  return false;
}

template <class T, class... Ts>
T max_of(T a, Ts... rest) {
  ((a = rest > a ? rest : a), ...);
  return a;
}
template <class T, class... Ts>
T min_of(T a, Ts... rest) {
  ((a = rest < a ? rest : a), ...);
  return a;
}
/// `x in (a, b, ...)`.
template <class T>
bool in(const T& x, std::initializer_list<T> items) {
  for (const T& item : items) {
    if (x == item) return true;
  }
  return false;
}

// ---- dtypes ------------------------------------------------------------------------------

/// "float", "int" or "bool".
std::string_view category_of(DType dtype);
/// Bits per element.
std::int64_t bits_of(DType dtype);
/// The manifest spelling ("bfloat16").
std::string_view dtype_str(DType dtype);

// ---- text of values, for messages ----------------------------------------------------------

std::string repr(std::int64_t v);
std::string repr(double v);
std::string repr(bool v);
std::string repr(const Seq& v);
std::string repr(DType v);
std::string repr(std::string_view v);
inline std::string repr(const std::string& v) {
  return repr(std::string_view(v));
}
inline std::string repr(const char* v) {
  return repr(std::string_view(v));
}
template <class T>
std::string repr(const std::optional<T>& v) {
  return v ? repr(*v) : std::string("None");
}
/// "[2, 3]".
inline std::string shape_str(const Seq& s) {
  return repr(s);
}

// ---- signature checks --------------------------------------------------------------------

/// A tensor declaration, for messages: op, role ("input", "output", "construction-time
/// tensor"), name, declared shape and dtype as the manifest writes them.
struct Decl {
  std::string_view op;
  std::string_view role;
  std::string_view tensor;
  std::string_view shape;
  std::string_view dtype;
};

[[noreturn]] void fail_arity(std::string_view op, std::size_t inputs, std::size_t want_inputs,
                             std::size_t outs, std::size_t want_outs);
[[noreturn]] void fail_required(std::string_view op, std::string_view role,
                                std::string_view tensor);
[[noreturn]] void fail_rank(const Decl& d, const Seq& sizes, std::int64_t rank, bool at_least);
[[noreturn]] void fail_axis(const Decl& d, const Seq& sizes, std::int64_t axis,
                            std::int64_t expected, std::string_view what);
[[noreturn]] void fail_affine(const Decl& d, const Seq& sizes, std::int64_t axis,
                              std::string_view index, std::string_view axis_text);
[[noreturn]] void fail_dtype(const Decl& d, DType got, DType expected, std::string_view what);
[[noreturn]] void fail_dtype_set(const Decl& d, DType got, std::string_view index,
                                 std::initializer_list<DType> allowed);
[[noreturn]] void fail_rule(std::string_view op, std::string_view rule, const std::string& values);
[[noreturn]] void fail_combo(std::string_view op, const std::string& assignment,
                             std::string_view allowed);
[[noreturn]] void fail_contiguous(std::string_view op, std::string_view tensor);
[[noreturn]] void fail_device(std::string_view op, std::string_view first,
                              const std::string& first_device, std::string_view tensor,
                              const std::string& device);
[[noreturn]] void fail_out(std::string_view op, std::string_view output, std::string_view what,
                           const std::string& expected, const std::string& got);
[[noreturn]] void fail_output_axis(std::string_view op, std::string_view output,
                                   std::string_view shape, std::int64_t axis, std::int64_t value);
[[noreturn]] void fail_param(std::string_view op, std::string_view param, const std::string& why);

/// rank == `rank` (or >= when `at_least`).
inline void check_rank(const Decl& d, const Seq& sizes, std::int64_t rank, bool at_least) {
  const auto n = static_cast<std::int64_t>(sizes.size());
  if (at_least ? n < rank : n != rank) fail_rank(d, sizes, rank, at_least);
}
/// sizes[axis] == expected; `what` names the declaration ("normalized_shape[0]", "2 * R").
inline void check_axis(const Decl& d, const Seq& sizes, std::int64_t axis, std::int64_t expected,
                       std::string_view what) {
  if (sizes[static_cast<std::size_t>(axis)] != expected) fail_axis(d, sizes, axis, expected, what);
}
/// sizes[offset + i] == expected[i] for every i; `what` is the spliced name.
void check_splice(const Decl& d, const Seq& sizes, std::int64_t offset, const Seq& expected,
                  std::string_view what);
/// Solves M from `a * M + e == sizes[axis]`: exact and non-negative, else SignatureError.
std::int64_t solve_affine(const Decl& d, const Seq& sizes, std::int64_t axis, std::int64_t a,
                          std::int64_t e, std::string_view index, std::string_view axis_text);
inline void check_dtype(const Decl& d, DType got, DType expected, std::string_view what) {
  if (got != expected) fail_dtype(d, got, expected, what);
}
/// A DType index solved from a tensor must be one of its allowed dtypes.
inline DType solve_dtype(const Decl& d, DType got, std::string_view index,
                         std::initializer_list<DType> allowed) {
  for (DType a : allowed) {
    if (a == got) return got;
  }
  fail_dtype_set(d, got, index, allowed);
}
/// An output axis must not be negative.
inline std::int64_t output_axis(std::string_view op, std::string_view output,
                                std::string_view shape, std::int64_t axis, std::int64_t value) {
  if (value < 0) fail_output_axis(op, output, shape, axis, value);
  return value;
}
/// Appends `part` to `shape` (an output shape built from splices and axes).
inline void append(Seq& shape, const Seq& part) {
  shape.insert(shape.end(), part.begin(), part.end());
}

/// The call device: the first present tensor's device, every other must agree.
template <class Device, class Tensor>
void join_device(std::string_view op, Device& device, std::string_view& from, const Tensor& t,
                 std::string_view name) {
  if (from.empty()) {
    device = t.device();
    from = name;
  } else if (!(t.device() == device)) {
    fail_device(op, from, device.str(), name, t.device().str());
  }
}

// ---- parameters ----------------------------------------------------------------------------

void check_enum(std::string_view op, std::string_view param, std::string_view value,
                std::initializer_list<std::string_view> allowed);
void check_dtype_param(std::string_view op, std::string_view param, DType value,
                       std::initializer_list<DType> allowed);
/// Every element of a list param spliced into a shape is >= 0.
void check_nonneg(std::string_view op, std::string_view param, const Seq& value);
void check_nonneg(std::string_view op, std::string_view param, std::int64_t value);
/// A fixed-length tuple param has `n` elements.
void check_length(std::string_view op, std::string_view param, const Seq& value, std::size_t n);

/// A deterministic seed for a workload row's random tensor (FNV-1a of label and name).
std::uint64_t seed_from(std::string_view label, std::string_view name);

/// Rethrows a SignatureError raised inside `op`'s generated checks, naming the op when the
/// message does not already (arithmetic failures: division by zero, overflow, out of range).
[[noreturn]] void rethrow_for(std::string_view op, const SignatureError& e);

/// sizes[i] (i already checked against the rank).
inline std::int64_t size_at(const Seq& sizes, std::int64_t i) {
  return sizes[static_cast<std::size_t>(i)];
}

/// A name read on a branch where it is not solved (the generator rejects such manifests; this
/// keeps generated code total).
template <class T>
T unsolved(std::string_view op, std::string_view name) {
  fail(std::string(op) + ": index '" + std::string(name) + "' is not solved on this call");
}

/// A workload row value the instantiation needs.
template <class T>
const T& need(const std::optional<T>& v, std::string_view op, std::string_view name) {
  if (!v) fail(std::string(op) + ": the workload row does not give '" + std::string(name) + "'");
  return *v;
}

/// An index of a call record (SignatureCall::indices) as `T`.
template <class T, class Value>
const T& index_as(const Value& v, std::string_view op, std::string_view name) {
  if (const T* p = std::get_if<T>(&v)) return *p;
  fail(std::string(op) + ": index '" + std::string(name) + "' is not solved on this call");
}

/// bytes(t) of the roofline: the bytes of a call record's tensor, 0 when absent.
template <class Record>
std::int64_t record_bytes(const Record* r) {
  return r ? static_cast<std::int64_t>(r->bytes()) : 0;
}

/// The name of the alternative a parameter value holds, for messages.
template <class Value>
std::string value_kind(const Value& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) {
          return "bool";
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          return "int";
        } else if constexpr (std::is_same_v<T, double>) {
          return "float";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return "str";
        } else if constexpr (std::is_same_v<T, Seq>) {
          return "list[int]";
        } else if constexpr (std::is_same_v<T, DType>) {
          return "dtype";
        } else if constexpr (requires { x.defined(); }) {
          return "tensor";
        } else if constexpr (requires { x.type_name; }) {
          return "injected object";
        } else {
          return "None";
        }
      },
      v);
}

/// The value of a parameter as `T` (an int is accepted for a float); SignatureError naming the
/// op, the parameter, its manifest type and the alternative received otherwise.
template <class T, class Value>
T value_to(const Value& v, std::string_view op, std::string_view param, std::string_view type) {
  if (const T* p = std::get_if<T>(&v)) return *p;
  if constexpr (std::is_same_v<T, double>) {
    if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  }
  fail_param(op, param, std::string("must be ") + std::string(type) + ", got " + value_kind(v));
}

}  // namespace tileops::expr
