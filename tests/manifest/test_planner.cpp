// The solve-order planner, in process: the order it fixes (not declaration order), affine and
// splice solving, construction-time tensors, and running a plan over concrete shapes.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "diag.h"
#include "manifest/loader.h"
#include "manifest/planner.h"
#include "manifest/validator.h"
#include "manifest/workloads.h"
#include "manifest_test_util.h"

namespace {

struct Loaded {
  tgen::Manifest manifest;
  std::vector<tgen::OpInfo> infos;
  tgen::Diagnostics diags;
  std::string errors() const {
    std::string out;
    for (const auto& d : diags.sorted()) out += std::to_string(d.line) + ": " + d.message + "\n";
    return out;
  }
};

// Loads `yaml` (the ops of family `fam`) from a scratch folder.
std::unique_ptr<Loaded> load(const std::string& fam, const std::string& yaml) {
  auto l = std::make_unique<Loaded>();
  const std::string dir = tgen_test::scratch_dir("planner/" + fam);
  const std::string file = dir + "/" + fam + ".yaml";
  tgen_test::write_file(file, yaml);
  l->manifest = tgen::load_manifest({file}, "planner/", l->diags);
  l->infos = tgen::validate(l->manifest, l->diags);
  return l;
}

// "kind:tensor:name" per step, e.g. "axis_solve:b:M".
std::vector<std::string> steps(const tgen::Plan& plan) {
  std::vector<std::string> out;
  for (const auto& s : plan.steps) {
    static const char* names[] = {"dtype_solve",  "dtype_check",  "rank",
                                  "splice_solve", "splice_check", "axis_solve",
                                  "axis_affine",  "axis_check",   "let"};
    std::string t = s.tensor >= 0 ? plan.tensors[static_cast<std::size_t>(s.tensor)].name : "-";
    out.push_back(std::string(names[static_cast<int>(s.k)]) + ":" + t + ":" + s.name);
  }
  return out;
}

std::size_t index_of(const std::vector<std::string>& v, const std::string& s) {
  return static_cast<std::size_t>(std::find(v.begin(), v.end(), s) - v.begin());
}

bool runs(const tgen::OpInfo& info, const std::vector<tgen::Seq>& shapes,
          const std::vector<std::string>& dtypes, tgen::MapEnv& env, std::string& why) {
  return tgen::run_plan(info, info.combos.at(0).plan, shapes, dtypes, env, why);
}

TEST(Planner, OrderFollowsDependenciesNotDeclarations) {
  auto l = load("order", R"Y(Op1:
  family: order
  status: spec-only
  signature:
    forall: {M: Dim, N: Dim, T: "DType[float32]"}
    inputs:
      a: {dtype: T, shape: "[M * N + 1]"}
      b: {dtype: T, shape: "[M]"}
      c: {dtype: T, shape: "[N]"}
    outputs:
      y: {dtype: T, shape: "[M, N]"}
  roofline: {flops: "M * N"}
  workloads:
    - {M: 2, N: 3, dtype_cases: [{T: float32}], label: w}
)Y");
  ASSERT_TRUE(l->diags.empty()) << l->errors();
  const tgen::OpInfo& info = l->infos.at(0);
  ASSERT_TRUE(info.ok);
  const auto s = steps(info.combos.at(0).plan);
  // T is solved from the first input, then checked; M from b, N from c, and a's axis is
  // checked once both are known.
  EXPECT_EQ(s.front(), "dtype_solve:a:T");
  EXPECT_LT(index_of(s, "axis_solve:b:M"), index_of(s, "axis_check:a:"));
  EXPECT_LT(index_of(s, "axis_solve:c:N"), index_of(s, "axis_check:a:"));
  EXPECT_LT(index_of(s, "axis_check:a:"), s.size());

  tgen::MapEnv env;
  std::string why;
  EXPECT_TRUE(runs(info, {{7}, {2}, {3}}, {"float32", "float32", "float32"}, env, why)) << why;
  EXPECT_EQ(tgen::repr(*env.lookup("M")), "2");
  EXPECT_EQ(tgen::repr(*env.lookup("N")), "3");
  tgen::MapEnv env2;
  EXPECT_FALSE(runs(info, {{6}, {2}, {3}}, {"float32", "float32", "float32"}, env2, why));
  EXPECT_NE(why.find("'a' has shape [6], axis 0 should be M * N + 1 = 7"), std::string::npos)
      << why;
}

TEST(Planner, AffineAxesSolveExactly) {
  auto l = load("affine", R"Y(Op1:
  family: affine
  status: spec-only
  signature:
    forall: {D: Dim}
    inputs:
      x: {dtype: float32, shape: "[2 * D + 1]"}
      z: {dtype: float32, shape: "[3 - D + 2 * D]"}
    outputs:
      y: {dtype: float32, shape: "[D]"}
  roofline: {flops: "D"}
  workloads:
    - {D: 4, label: w}
)Y");
  ASSERT_TRUE(l->diags.empty()) << l->errors();
  const tgen::OpInfo& info = l->infos.at(0);
  const tgen::Plan& plan = info.combos.at(0).plan;
  const auto s = steps(plan);
  EXPECT_EQ(s,
            (std::vector<std::string>{"dtype_check:x:float32", "dtype_check:z:float32",
                                      "rank:x:", "axis_affine:x:D", "rank:z:", "axis_check:z:"}));
  const auto& affine = plan.steps[3];
  EXPECT_EQ(tgen::to_source(*affine.a), "2");
  EXPECT_EQ(tgen::to_source(*affine.e), "1");

  tgen::MapEnv env;
  std::string why;
  EXPECT_TRUE(runs(info, {{9}, {7}}, {"float32", "float32"}, env, why)) << why;
  EXPECT_EQ(tgen::repr(*env.lookup("D")), "4");
  tgen::MapEnv odd;
  EXPECT_FALSE(runs(info, {{8}, {7}}, {"float32", "float32"}, odd, why));
  EXPECT_NE(why.find("has no whole solution for D"), std::string::npos) << why;
  tgen::MapEnv negative;
  EXPECT_FALSE(runs(info, {{0}, {3}}, {"float32", "float32"}, negative, why));
}

TEST(Planner, LinearCoefficientsCanBeKnownNames) {
  tgen::ExprError err;
  tgen::ExprPtr e = tgen_test::checked("M * (D + 1) - k", err);
  ASSERT_TRUE(e) << err.message;
  tgen::ExprPtr a, rest;
  ASSERT_TRUE(tgen::linear_in(*e, "D", a, rest));
  EXPECT_EQ(tgen::to_source(*a), "M");
  EXPECT_EQ(tgen::to_source(*rest), "M + -k");
  tgen::ExprPtr nonlinear = tgen_test::checked("D * D", err);
  EXPECT_FALSE(tgen::linear_in(*nonlinear, "D", a, rest));
  tgen::ExprPtr floor = tgen_test::checked("D // 2", err);
  EXPECT_FALSE(tgen::linear_in(*floor, "D", a, rest));
}

TEST(Planner, SplicesWaitUntilTheOthersAreKnown) {
  auto l = load("splices", R"Y(Op1:
  family: splices
  status: spec-only
  signature:
    forall: {A: Shape, B: Shape, K: Dim}
    inputs:
      x: {dtype: float32, shape: "[*A, K, *B]"}
      w: {dtype: float32, shape: "[K, *B]"}
    outputs:
      y: {dtype: float32, shape: "[*A, *B]"}
  roofline: {flops: "prod(A) * prod(B) * K"}
  workloads:
    - {A: [2, 3], B: [5], K: 4, label: w}
)Y");
  ASSERT_TRUE(l->diags.empty()) << l->errors();
  const tgen::OpInfo& info = l->infos.at(0);
  const auto s = steps(info.combos.at(0).plan);
  // x has two unknown splices: it waits for w, which solves K and B.
  EXPECT_LT(index_of(s, "splice_solve:w:B"), index_of(s, "rank:x:"));
  EXPECT_LT(index_of(s, "rank:x:"), index_of(s, "splice_solve:x:A"));
  tgen::MapEnv env;
  std::string why;
  EXPECT_TRUE(runs(info, {{2, 3, 4, 5}, {4, 5}}, {"float32", "float32"}, env, why)) << why;
  EXPECT_EQ(tgen::repr(*env.lookup("A")), "[2, 3]");
  EXPECT_EQ(tgen::repr(*env.lookup("B")), "[5]");
  tgen::MapEnv bad;
  EXPECT_FALSE(runs(info, {{2, 3, 4, 6}, {4, 5}}, {"float32", "float32"}, bad, why));
}

TEST(Planner, ConstructionTimeTensorsSolveFirst) {
  auto l = load("ctor", R"Y(Op1:
  family: ctor
  status: spec-only
  signature:
    forall: {R: Dim, S: Dim, T: "DType[float16 | float32]"}
    params:
      factors: {type: torch.Tensor, dtype: float32, shape: "[R]"}
    inputs:
      x: {dtype: T, shape: "[S, 2 * R]"}
    outputs:
      y: {dtype: T, shape: "[S, 2 * R]"}
    shape_rules:
      - "R >= 1"
      - "S >= R"
  roofline: {flops: "S * R"}
  workloads:
    - {S: 8, R: 4, dtype_cases: [{T: float16}], label: w}
)Y");
  ASSERT_TRUE(l->diags.empty()) << l->errors();
  const tgen::OpInfo& info = l->infos.at(0);
  // At construction R is solved from the tensor; "R >= 1" is checked there, "S >= R" per call.
  EXPECT_EQ(steps(info.ctor_plan),
            (std::vector<std::string>{"dtype_check:factors:float32",
                                      "rank:factors:", "axis_solve:factors:R"}));
  EXPECT_EQ(info.rule_at_construction, (std::vector<bool>{true, false}));
  const tgen::Combo& c = info.combos.at(0);
  EXPECT_EQ(c.rules.at(0), nullptr);
  ASSERT_NE(c.rules.at(1), nullptr);
  const auto s = steps(c.plan);
  EXPECT_LT(index_of(s, "axis_solve:factors:R"), index_of(s, "axis_check:x:"));
  EXPECT_EQ(index_of(s, "axis_affine:x:R"), s.size());  // checked, not solved again
}

TEST(Planner, OptionalInputsMakeCombinations) {
  auto l = load("optional", R"Y(Op1:
  family: optional
  status: spec-only
  signature:
    forall: {N: Dim, T: "DType[float32]", P: "DType[int32 | int64]"}
    inputs:
      x: {dtype: T, shape: "[N]"}
      idx: {dtype: P, shape: "[N]", optional: true}
    outputs:
      y: {dtype: T, shape: "[N]"}
    let:
      idx_bits: "bits(P) if present(idx) else 0"
  roofline: {flops: "N if present(idx) else 0"}
  workloads:
    - {N: 8, dtype_cases: [{T: float32}], label: without}
    - {N: 8, some: [idx], dtype_cases: [{T: float32, P: int64}], label: with}
)Y");
  ASSERT_TRUE(l->diags.empty()) << l->errors();
  const tgen::OpInfo& info = l->infos.at(0);
  ASSERT_EQ(info.combos.size(), 2u);
  EXPECT_EQ(info.combos[0].description, "idx present");
  EXPECT_EQ(info.combos[1].description, "idx absent");
  EXPECT_TRUE(info.combos[0].plan.known.count("P"));
  EXPECT_FALSE(info.combos[1].plan.known.count("P"));
  // Lets and the roofline are folded per branch: P is read only where idx is present.
  EXPECT_EQ(tgen::to_source(*info.combos[0].lets.at("idx_bits")), "bits(P)");
  EXPECT_EQ(tgen::to_source(*info.combos[1].lets.at("idx_bits")), "0");
  EXPECT_TRUE(info.combos[1].plan.known.count("idx_bits"));
  EXPECT_EQ(tgen::to_source(*info.combos[0].flops), "N");
  EXPECT_EQ(tgen::to_source(*info.combos[1].flops), "0");
  ASSERT_EQ(info.rows.size(), 2u);
  EXPECT_EQ(info.rows[1].dtype_cases.at(0).size(), 2u);
}

TEST(Planner, OutputDtypeFromAnAbsentOptionalIsUnsolvable) {
  auto l = load("unsolved", R"Y(Op1:
  family: unsolved
  status: spec-only
  signature:
    forall: {N: Dim, P: "DType[int32 | int64]"}
    inputs:
      x: {dtype: float32, shape: "[N]"}
      idx: {dtype: P, shape: "[N]", optional: true}
    outputs:
      y: {dtype: P, shape: "[N]"}
  roofline: {flops: "N"}
  workloads:
    - {N: 8, some: [idx], dtype_cases: [{P: int64}], label: w}
)Y");
  EXPECT_EQ(l->errors(), "5: index 'P' cannot be solved from any input (when idx absent)\n");
}

}  // namespace
