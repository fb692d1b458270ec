// `tileops list` and `tileops describe`, checked against the manifest files.
#include <gmock/gmock-matchers.h>

#include <algorithm>
#include <map>
#include <regex>

#include "cli/cli_test.h"

namespace tileops::cli_test {
namespace {

using testing::HasSubstr;

std::vector<std::string> manifest_names() {
  std::vector<std::string> names;
  for (const auto& op : CliTest::manifest()) names.push_back(op.name);
  return names;
}

TEST_F(CliTest, ManifestScanFindsTheKnownOps) {
  // Guards the scanner the other tests rely on: the ops the README names are found.
  const auto names = manifest_names();
  for (const char* op :
       {"RMSNormFwdOp", "FusedAddRMSNormFwdOp", "LongRoPEFwdOp", "MoETopKRoutingFwdOp",
        "MoEPrePermuteFwdOp", "MoEGroupedGemmFwdOp", "MoEExpertMLPFwdOp", "MoEPostPermuteFwdOp",
        "FusedMoEExpertsFwdOp", "FusedMoEFwdOp", "MoEExpertMLPFP8FwdOp"}) {
    EXPECT_THAT(names, testing::Contains(op));
  }
  const ManifestOp& rope = find_op(manifest(), "LongRoPEFwdOp");
  EXPECT_EQ(rope.inputs, (std::vector<std::string>{"x", "positions"}));
  EXPECT_EQ(rope.case_ids().size(), 6u);  // 5 rows, the first with two dtype cases
  EXPECT_EQ(rope.case_ids()[4], "phi3-mini-decode32-bfloat16-int64");
}

TEST_F(CliTest, ListCsvHasEveryManifestOpWithItsFamilyStatusAndCaseCount) {
  const CommandResult r = tileops({"list", "--format", "csv"});
  ASSERT_EQ(r.exit_code, 0) << r;
  const auto lines = lines_of(r.out);
  ASSERT_FALSE(lines.empty()) << r;
  EXPECT_EQ(lines[0], "op,family,status,devices,targets,workload_cases");
  std::map<std::string, std::vector<std::string>> rows;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const auto fields = csv_fields(lines[i]);
    ASSERT_EQ(fields.size(), 6u) << lines[i];
    rows[fields[0]] = fields;
  }
  std::vector<std::string> listed;
  for (const auto& [name, fields] : rows) listed.push_back(name);
  EXPECT_EQ(listed, manifest_names());
  for (const auto& op : manifest()) {
    if (!rows.contains(op.name)) continue;
    const auto& fields = rows[op.name];
    EXPECT_EQ(fields[1], op.family) << op.name;
    EXPECT_EQ(fields[2], op.status) << op.name;
    EXPECT_EQ(fields[5], std::to_string(op.case_ids().size())) << op.name;
    // Every op runs on the CPU (README), so every implemented op lists it.
    if (op.status == "implemented") {
      EXPECT_THAT(fields[3], HasSubstr("cpu")) << op.name;
    }
  }
}

TEST_F(CliTest, ListTableAndJsonShowTheSameOps) {
  const auto names = manifest_names();
  const CommandResult table = tileops({"list"});
  ASSERT_EQ(table.exit_code, 0) << table;
  std::vector<std::string> first_words;
  for (const auto& line : lines_of(table.out)) {
    const auto words = words_of(line);
    if (!words.empty() && std::find(names.begin(), names.end(), words[0]) != names.end()) {
      first_words.push_back(words[0]);
    }
  }
  EXPECT_EQ(first_words, names);  // one row per op, sorted by name
  // Built with += : GCC 12 warns falsely (-Wrestrict) about "literal" + std::to_string(...).
  std::string count_line = "\n";
  count_line += std::to_string(names.size());
  count_line += " ops, ";
  EXPECT_THAT(table.out, HasSubstr(count_line));

  const CommandResult json = tileops({"list", "--format", "json"});
  ASSERT_EQ(json.exit_code, 0) << json;
  for (const auto& name : names) {
    EXPECT_THAT(json.out, HasSubstr("{\"op\": \"" + name + "\", ")) << name;
  }
}

/// The names in the first column of the "  <title>:" section of a describe block.
std::vector<std::string> section_names(const std::vector<std::string>& block,
                                       const std::string& title) {
  std::vector<std::string> names;
  const auto start = std::find(block.begin(), block.end(), "  " + title + ":");
  if (start == block.end()) return names;
  for (auto it = start + 1; it != block.end() && it->starts_with("    "); ++it) {
    names.push_back(words_of(*it).front());
  }
  return names;
}

TEST_F(CliTest, DescribeEveryOpShowsItsManifestEntry) {
  const auto names = manifest_names();
  std::vector<std::string> args{"describe"};
  args.insert(args.end(), names.begin(), names.end());
  const CommandResult all = tileops(args);
  ASSERT_EQ(all.exit_code, 0) << all;
  EXPECT_EQ(all.err, "");

  // The ops' blocks are separated by a line of 80 '='.
  std::vector<std::vector<std::string>> blocks(1);
  for (const auto& line : lines_of(all.out)) {
    if (line == std::string(80, '=')) {
      blocks.emplace_back();
    } else {
      blocks.back().push_back(line);
    }
  }
  ASSERT_EQ(blocks.size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto& block = blocks[i];
    while (!block.empty() && block.front().empty()) block.erase(block.begin());
    const ManifestOp& op = find_op(manifest(), names[i]);
    SCOPED_TRACE(op.name);
    ASSERT_FALSE(block.empty());
    EXPECT_EQ(block[0], op.name);
    const auto has = [&](const std::string& line) {
      return std::find(block.begin(), block.end(), line) != block.end();
    };
    EXPECT_TRUE(has("  family: " + op.family + "   status: " + op.status));
    EXPECT_TRUE(has("  source: " + op.file + ":" + std::to_string(op.line)));
    EXPECT_TRUE(has("  flops: " + op.flops));
    EXPECT_EQ(section_names(block, "params"), op.params);
    EXPECT_EQ(section_names(block, "inputs"), op.inputs);
    EXPECT_EQ(section_names(block, "outputs"), op.outputs);
    const auto ids = op.case_ids();
    EXPECT_TRUE(has("Workloads (" + std::to_string(op.workloads.size()) + " rows, " +
                    std::to_string(ids.size()) + " cases)"));
    for (const auto& id : ids) {
      const bool shown = std::any_of(block.begin(), block.end(), [&](const std::string& line) {
        return line.starts_with("    case " + id) &&
               (line.size() == 9 + id.size() || line[9 + id.size()] == ' ');
      });
      EXPECT_TRUE(shown) << "case " << id;
    }
  }
}

TEST_F(CliTest, DescribeShowsParamDefaultsAndShapes) {
  // Facts of manifest/norm.yaml's RMSNormFwdOp entry.
  const CommandResult r = tileops({"describe", "RMSNormFwdOp"});
  ASSERT_EQ(r.exit_code, 0) << r;
  const auto matches = [&](const char* pattern) {
    return std::regex_search(r.out, std::regex(pattern, std::regex::multiline));
  };
  EXPECT_TRUE(matches(R"(^    normalized_shape +list\[int\] +\(required\)$)")) << r;
  EXPECT_TRUE(matches(R"(^    eps +float += 1e-0?6 +kw_only$)")) << r;  // eps: 1.0e-6
  EXPECT_TRUE(matches(R"(^    x +T +\[\*S, \*normalized_shape\]$)")) << r;
  EXPECT_TRUE(matches(R"(^    weight +T +\[\*normalized_shape\]$)")) << r;
  EXPECT_TRUE(matches(R"(^    y +T +\[\*S, \*normalized_shape\] +buffer: out$)")) << r;
  EXPECT_TRUE(matches(R"(^  llama3-8b-decode: S=\[1\] normalized_shape=\[4096\]$)")) << r;
  EXPECT_TRUE(matches(R"(^  ref_api: torch\.nn\.functional\.rms_norm$)")) << r;
}

TEST_F(CliTest, DescribeShowsTheFP8SignatureOfTheFusedMoE) {
  // Facts of manifest/moe.yaml's FusedMoEFwdOp entry: the weights' dtype W, its combinations
  // with T, the optional block scales and the rules tying them to W.
  const CommandResult r = tileops({"describe", "FusedMoEFwdOp", "MoEExpertMLPFP8FwdOp"});
  ASSERT_EQ(r.exit_code, 0) << r;
  const auto matches = [&](const char* pattern) {
    return std::regex_search(r.out, std::regex(pattern, std::regex::multiline));
  };
  EXPECT_TRUE(matches(R"(^    W +DType\[float16 \| bfloat16 \| float8_e4m3fn\]$)")) << r;
  EXPECT_TRUE(matches(R"(^    w13 +W +\[E, 2 \* F, H\]$)")) << r;
  EXPECT_TRUE(matches(
      R"(^    w13_scales +float32 +\[E, ceil_div\(2 \* F, 128\), ceil_div\(H, 128\)\] +optional$)"))
      << r;
  EXPECT_TRUE(matches(
      R"(^    w2_scales +float32 +\[E, ceil_div\(H, 128\), ceil_div\(F, 128\)\] +optional$)"))
      << r;
  EXPECT_TRUE(matches(R"(^    T=bfloat16 W=float8_e4m3fn$)")) << r;
  EXPECT_TRUE(
      matches(R"(^    W != float8_e4m3fn or \(present\(w13_scales\) and present\(w2_scales\)\)$)"))
      << r;
  EXPECT_TRUE(matches(R"(^    case dsv3-fp8-4096t-float32-bfloat16-float8_e4m3fn\b)")) << r;
  // The FP8 MLP's stages.
  EXPECT_TRUE(matches(R"(quantize_x.*PerTokenGroupQuantFP8FwdOp)")) << r;
  EXPECT_TRUE(matches(R"(down.*MoEGroupedGemmFP8FwdOp)")) << r;
}

TEST_F(CliTest, DescribeUnknownOpIsAUsageErrorNamingIt) {
  const CommandResult r = tileops({"describe", "NoSuchThingOp"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("tileops: error: unknown op 'NoSuchThingOp'")) << r;

  // A near miss suggests the op; a bad name among good ones prints nothing at all.
  const CommandResult near = tileops({"describe", "RMSNormFwd"});
  EXPECT_EQ(near.exit_code, kExitUsage) << near;
  EXPECT_THAT(near.err, HasSubstr("did you mean RMSNormFwdOp")) << near;
  const CommandResult mixed = tileops({"describe", "RMSNormFwdOp", "NoSuchThingOp"});
  EXPECT_EQ(mixed.exit_code, kExitUsage) << mixed;
  EXPECT_EQ(mixed.out, "");

  const CommandResult none = tileops({"describe"});
  EXPECT_EQ(none.exit_code, kExitUsage) << none;
}

}  // namespace
}  // namespace tileops::cli_test
