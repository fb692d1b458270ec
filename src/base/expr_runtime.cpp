// Runtime helpers of the generated signature checks (see tileops/base/expr_runtime.h).
#include "tileops/base/expr_runtime.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/float_repr.h"

namespace tileops::expr {

namespace {

struct DTypeRow {
  std::string_view name;
  std::int64_t bits;
  std::string_view category;
};

// Kept here (not dtype_name()) so that the generator's tests can link this file alone.
constexpr std::array<DTypeRow, kNumDTypes> kDTypes = {{
    {"float32", 32, "float"},
    {"float16", 16, "float"},
    {"bfloat16", 16, "float"},
    {"float8_e4m3fn", 8, "float"},
    {"int8", 8, "int"},
    {"int16", 16, "int"},
    {"int32", 32, "int"},
    {"int64", 64, "int"},
    {"uint8", 8, "int"},
    {"bool", 8, "bool"},
    {"float64", 64, "float"},
    {"float8_e5m2", 8, "float"},
}};
static_assert(static_cast<int>(DType::float8_e5m2) + 1 == kNumDTypes);

const DTypeRow& row(DType d) {
  const auto i = static_cast<std::size_t>(d);
  if (i >= kDTypes.size()) fail(std::string("invalid dtype value ") + std::to_string(i));
  return kDTypes[i];
}

std::string join_dtypes(std::initializer_list<DType> allowed) {
  std::string out;
  for (DType a : allowed) {
    if (!out.empty()) out += ", ";
    out += dtype_str(a);
  }
  return out;
}

std::string prefix(const Decl& d) {
  return std::string(d.op) + ": " + std::string(d.role) + " '" + std::string(d.tensor) + "'";
}

}  // namespace

void fail(const std::string& message) {
  throw SignatureError(message);
}

void fail_overflow(std::int64_t a, char op, std::int64_t b) {
  fail(std::string("integer overflow in ") + std::to_string(a) + " " + op + " " +
       std::to_string(b));
}

std::int64_t floordiv(std::int64_t a, std::int64_t b) {
  if (b == 0) fail("integer division by zero");
  if (a == INT64_MIN && b == -1) fail("integer overflow in floor division");
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

double floordiv(double a, double b) {
  if (b == 0) fail("float floor division by zero");
  return std::floor(a / b);
}

std::int64_t mod(std::int64_t a, std::int64_t b) {
  if (b == 0) fail("integer modulo by zero");
  if (b == -1) return 0;
  std::int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double mod(double a, double b) {
  if (b == 0) fail("float modulo by zero");
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  if (b <= 0) fail(std::string("ceil_div() by a non-positive divisor ") + std::to_string(b));
  if (a == INT64_MIN) fail("integer overflow in ceil_div()");
  return -floordiv(-a, b);
}

std::int64_t prod(const Seq& s) {
  std::int64_t acc = 1;
  for (std::int64_t x : s) {
    if (__builtin_mul_overflow(acc, x, &acc)) fail("integer overflow in prod(" + repr(s) + ")");
  }
  return acc;
}

std::int64_t sum(const Seq& s) {
  std::int64_t acc = 0;
  for (std::int64_t x : s) {
    if (__builtin_add_overflow(acc, x, &acc)) fail("integer overflow in sum(" + repr(s) + ")");
  }
  return acc;
}

std::int64_t at(const Seq& s, std::int64_t i) {
  const auto n = static_cast<std::int64_t>(s.size());
  if (i < -n || i >= n) {
    fail(std::string("index ") + std::to_string(i) + " out of range for " + repr(s) + " (length " +
         std::to_string(n) + ")");
  }
  return s[static_cast<std::size_t>(i < 0 ? i + n : i)];
}

Seq slice(const Seq& s, std::optional<std::int64_t> lo, std::optional<std::int64_t> hi) {
  const auto n = static_cast<std::int64_t>(s.size());
  auto clamp = [n](std::int64_t i) {
    if (i < 0) i = i + n < 0 ? 0 : i + n;
    return i > n ? n : i;
  };
  const std::int64_t a = lo ? clamp(*lo) : 0;
  const std::int64_t b = hi ? clamp(*hi) : n;
  if (a >= b) return {};
  return Seq(s.begin() + a, s.begin() + b);
}

std::int64_t max_seq(const Seq& s) {
  if (s.empty()) fail("max() of an empty sequence");
  std::int64_t m = s[0];
  for (std::int64_t x : s) m = x > m ? x : m;
  return m;
}

std::int64_t min_seq(const Seq& s) {
  if (s.empty()) fail("min() of an empty sequence");
  std::int64_t m = s[0];
  for (std::int64_t x : s) m = x < m ? x : m;
  return m;
}

std::string_view category_of(DType dtype) {
  return row(dtype).category;
}
std::int64_t bits_of(DType dtype) {
  return row(dtype).bits;
}
std::string_view dtype_str(DType dtype) {
  return row(dtype).name;
}

std::string repr(std::int64_t v) {
  return std::to_string(v);
}

std::string repr(double v) {
  return float_repr(v);
}

std::string repr(bool v) {
  return v ? "True" : "False";
}

std::string repr(const Seq& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(v[i]);
  }
  return out + "]";
}

std::string repr(DType v) {
  return std::string(dtype_str(v));
}

std::string repr(std::string_view v) {
  std::string out;
  out.reserve(v.size() + 2);
  out += '\'';
  out += v;
  out += '\'';
  return out;
}

void fail_arity(std::string_view op, std::size_t inputs, std::size_t want_inputs, std::size_t outs,
                std::size_t want_outs) {
  if (inputs != want_inputs) {
    fail(std::string(op) + ": expected " + std::to_string(want_inputs) + " inputs, got " +
         std::to_string(inputs));
  }
  fail(std::string(op) + ": expected at most " + std::to_string(want_outs) +
       " output buffers, got " + std::to_string(outs));
}

void fail_required(std::string_view op, std::string_view role, std::string_view tensor) {
  fail(std::string(op) + ": " + std::string(role) + " '" + std::string(tensor) + "' is required");
}

void fail_rank(const Decl& d, const Seq& sizes, std::int64_t rank, bool at_least) {
  fail(prefix(d) + " declared " + std::string(d.shape) + ": rank must be " +
       (at_least ? "at least " : "") + std::to_string(rank) + ", got shape " + repr(sizes));
}

void fail_axis(const Decl& d, const Seq& sizes, std::int64_t axis, std::int64_t expected,
               std::string_view what) {
  fail(prefix(d) + " declared " + std::string(d.shape) + ": axis " + std::to_string(axis) +
       " must be " + std::to_string(expected) + " (" + std::string(what) + "), got shape " +
       repr(sizes));
}

void fail_affine(const Decl& d, const Seq& sizes, std::int64_t axis, std::string_view index,
                 std::string_view axis_text) {
  fail(prefix(d) + " declared " + std::string(d.shape) + ": axis " + std::to_string(axis) +
       " must be " + std::string(axis_text) + " for a whole " + std::string(index) +
       " >= 0, got shape " + repr(sizes));
}

void fail_dtype(const Decl& d, DType got, DType expected, std::string_view what) {
  fail(prefix(d) + " declared dtype " + std::string(d.dtype) + ": must be " + repr(expected) +
       " (" + std::string(what) + "), got " + repr(got));
}

void fail_dtype_set(const Decl& d, DType got, std::string_view index,
                    std::initializer_list<DType> allowed) {
  fail(prefix(d) + " declared dtype " + std::string(d.dtype) + ": " + std::string(index) +
       " must be one of " + join_dtypes(allowed) + ", got " + repr(got));
}

void fail_rule(std::string_view op, std::string_view rule, const std::string& values) {
  fail(std::string(op) + ": shape rule '" + std::string(rule) + "' does not hold" +
       (values.empty() ? std::string() : " (" + values + ")"));
}

void fail_combo(std::string_view op, const std::string& assignment, std::string_view allowed) {
  fail(std::string(op) + ": dtype combination " + assignment +
       " is not allowed (dtype_combos: " + std::string(allowed) + ")");
}

void fail_contiguous(std::string_view op, std::string_view tensor) {
  fail(std::string(op) + ": input '" + std::string(tensor) +
       "' must be contiguous (declared contiguous: true)");
}

void fail_device(std::string_view op, std::string_view first, const std::string& first_device,
                 std::string_view tensor, const std::string& device) {
  fail(std::string(op) + ": input '" + std::string(tensor) + "' is on " + device + " but '" +
       std::string(first) + "' is on " + first_device + " (a call runs on one device)");
}

void fail_out(std::string_view op, std::string_view output, std::string_view what,
              const std::string& expected, const std::string& got) {
  fail(std::string(op) + ": out (output '" + std::string(output) + "') must have " +
       std::string(what) + " " + expected + ", got " + got);
}

void fail_output_axis(std::string_view op, std::string_view output, std::string_view shape,
                      std::int64_t axis, std::int64_t value) {
  fail(std::string(op) + ": output '" + std::string(output) + "' declared " + std::string(shape) +
       ": axis " + std::to_string(axis) + " would be " + std::to_string(value) + " (negative)");
}

void fail_param(std::string_view op, std::string_view param, const std::string& why) {
  fail(std::string(op) + ": parameter '" + std::string(param) + "' " + why);
}

void check_splice(const Decl& d, const Seq& sizes, std::int64_t offset, const Seq& expected,
                  std::string_view what) {
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto axis = offset + static_cast<std::int64_t>(i);
    if (sizes[static_cast<std::size_t>(axis)] != expected[i]) {
      fail_axis(d, sizes, axis, expected[i], std::string(what) + "[" + std::to_string(i) + "]");
    }
  }
}

std::int64_t solve_affine(const Decl& d, const Seq& sizes, std::int64_t axis, std::int64_t a,
                          std::int64_t e, std::string_view index, std::string_view axis_text) {
  const std::int64_t size = sizes[static_cast<std::size_t>(axis)];
  std::int64_t rest;
  if (a == 0 || __builtin_sub_overflow(size, e, &rest) || rest % a != 0 || rest / a < 0) {
    fail_affine(d, sizes, axis, index, axis_text);
  }
  return rest / a;
}

void check_enum(std::string_view op, std::string_view param, std::string_view value,
                std::initializer_list<std::string_view> allowed) {
  std::string list;
  for (std::string_view a : allowed) {
    if (a == value) return;
    if (!list.empty()) list += " | ";
    list += repr(a);
  }
  fail_param(op, param, "must be one of " + list + ", got " + repr(value));
}

void check_dtype_param(std::string_view op, std::string_view param, DType value,
                       std::initializer_list<DType> allowed) {
  for (DType a : allowed) {
    if (a == value) return;
  }
  fail_param(op, param, "must be one of " + join_dtypes(allowed) + ", got " + repr(value));
}

void check_nonneg(std::string_view op, std::string_view param, const Seq& value) {
  for (std::int64_t x : value) {
    if (x < 0)
      fail_param(op, param, "is used in a shape: its elements must be >= 0, got " + repr(value));
  }
}

void check_nonneg(std::string_view op, std::string_view param, std::int64_t value) {
  if (value < 0) fail_param(op, param, "is used in a shape: it must be >= 0, got " + repr(value));
}

void check_length(std::string_view op, std::string_view param, const Seq& value, std::size_t n) {
  if (value.size() != n) {
    fail_param(op, param,
               std::string("must have ") + std::to_string(n) + " elements, got " + repr(value));
  }
}

void rethrow_for(std::string_view op, const SignatureError& e) {
  const std::string_view what = e.what();
  if (what.size() > op.size() && what.substr(0, op.size()) == op && what[op.size()] == ':') throw e;
  throw SignatureError(std::string(op) + ": " + std::string(what));
}

std::uint64_t seed_from(std::string_view label, std::string_view name) {
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](std::string_view s) {
    for (char c : s) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ULL;
    }
  };
  mix(label);
  mix("/");
  mix(name);
  return h;
}

}  // namespace tileops::expr
