// The C++ emitter: the text it produces for typical expressions, and (through the fixture
// compiled from emit_cases.h) agreement of the emitted C++ with the evaluator on every case,
// which also checks the runtime helpers' Python semantics.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "emit_cases.h"
#include "expr/emit_cpp.h"
#include "manifest_test_util.h"
#include "tileops/base/expr_runtime.h"
#include "tileops/core/dtype.h"
#include "tileops/core/error.h"

namespace tileops {
using Sizes = std::vector<std::int64_t>;
}
#include "emitted_cases.inc"

namespace {

class Names : public tgen::CppNames {
 public:
  std::string value(const std::string& name, bool payload) override {
    return payload ? "(*p." + name + ")" : "v_" + name;
  }
  std::string present(const std::string& name) override { return "has_" + name; }
  std::string bytes(const std::string& name) override { return "bytes_" + name; }
};

std::string emit(const std::string& src) {
  tgen::ExprError err;
  tgen::ExprPtr e = tgen_test::checked(src, err, true);
  if (!e) return "error: " + err.message;
  Names names;
  return tgen::emit_cpp(*e, names);
}

TEST(ExprEmit, Text) {
  EXPECT_EQ(emit("D + 1"), "ex::add(v_D, std::int64_t{1})");
  EXPECT_EQ(emit("n // 2 - -1"), "ex::sub(ex::floordiv(v_n, std::int64_t{2}), std::int64_t{-1})");
  EXPECT_EQ(emit("f * D"), "(v_f * static_cast<double>(v_D))");
  EXPECT_EQ(emit("S[-1]"), "ex::at(v_S, std::int64_t{-1})");
  EXPECT_EQ(emit("S[1:]"), "ex::slice(v_S, std::int64_t{1}, std::nullopt)");
  EXPECT_EQ(emit("prod(S) * len(lst)"), "ex::mul(ex::prod(v_S), ex::len(v_lst))");
  EXPECT_EQ(emit("max(D, f)"), "ex::max_of(static_cast<double>(v_D), v_f)");
  EXPECT_EQ(emit("max(S)"), "ex::max_seq(v_S)");
  EXPECT_EQ(emit("T == float16"), "(v_T == ::tileops::DType::float16)");
  EXPECT_EQ(emit("mode == 'sd'"), "(std::string_view(v_mode) == std::string_view{\"sd\"})");
  EXPECT_EQ(emit("mode in ('sd', 'bshd')"),
            "ex::in(std::string_view(v_mode), {std::string_view{\"sd\"}, "
            "std::string_view{\"bshd\"}})");
  EXPECT_EQ(emit("D if present(o) else 0"), "(has_o ? v_D : std::int64_t{0})");
  EXPECT_EQ(emit("opt if present(opt) else 1.0"), "(has_opt ? (*p.opt) : 1.0)");
  EXPECT_EQ(emit("bytes(x) + 1"), "ex::add(bytes_x, std::int64_t{1})");
  EXPECT_EQ(emit("not b and D >= 2"), "((!v_b) && (v_D >= std::int64_t{2}))");
  EXPECT_EQ(emit("category(T) == 'int'"),
            "(std::string_view(ex::category_of(v_T)) == std::string_view{\"int\"})");
  EXPECT_EQ(emit("ceil_div(D, bits(T))"), "ex::ceil_div(v_D, ex::bits_of(v_T))");
  EXPECT_EQ(emit("[D, 2]"), "::tileops::Sizes{v_D, std::int64_t{2}}");
  EXPECT_EQ(emit("1.0e-6"), "1e-06");
  EXPECT_EQ(emit("10000.0"), "10000.0");
}

TEST(ExprEmit, CompiledCasesAgreeWithTheEvaluator) {
  const std::vector<std::string> got = run_emitted_cases();
  const std::size_t n = sizeof(tgen_test::kEmitCases) / sizeof(tgen_test::kEmitCases[0]);
  ASSERT_EQ(got.size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    const char* src = tgen_test::kEmitCases[i];
    std::string want;
    try {
      want = tgen::repr(tgen_test::eval_src(src));
    } catch (const tgen::EvalError&) {
      want = "error";
    }
    EXPECT_EQ(got[i], want) << src;
  }
}

}  // namespace
