// The fixed symbol table and values of the expression tests (also used by the emitter
// fixture generator, emit_fixture/gen_fixture.cpp).
#pragma once

#include <map>
#include <string>

#include "expr/checker.h"
#include "expr/eval.h"
#include "expr/parser.h"

namespace tgen_test {

/// A symbol table for expression tests:
///   D, M, N: Dim; S: Shape; T: DType[float16 | bfloat16]; n: int param; f: float param;
///   b: bool param; lst: list[int] param; mode: 'sd' | 'bshd'; opt: float | None;
///   x: input; o: optional input; y: output; rf: construction-time tensor; k: let (Int).
class TestSymbols : public tgen::SymbolTable {
 public:
  TestSymbols();
  const tgen::Symbol* find(std::string_view name) const override;

 private:
  std::map<std::string, tgen::Symbol, std::less<>> map_;
};

/// Parses and checks; returns the checked AST, or null with `err`.
tgen::ExprPtr checked(const std::string& src, tgen::ExprError& err, bool roofline = false);

/// Evaluates a source expression in a fixed environment (D=8, M=3, N=5, S=[2, 3, 4],
/// T=float16, n=-7, f=2.5, b=true, lst=[1, 2, 3], mode='bshd', opt=None, o absent, k=10).
tgen::EValue eval_src(const std::string& src);

}  // namespace tgen_test
