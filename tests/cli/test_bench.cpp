// `tileops bench` on the CPU: small workloads pass, cases too large for the CPU are SKIPPED
// without allocating, cases over the time estimate are SKIPPED unless --all-cases, sampled checks
// pass and catch wrong rows, the table fits 160 columns, the summary agrees with the case rows,
// and bad options are usage errors.
// Every run times for 1 ms after no warm-up, so the program stays fast on a 2-core machine.
#include <gmock/gmock-matchers.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cli/cli_test.h"

namespace tileops::cli_test {
namespace {

using testing::HasSubstr;

/// `bench` with `args` and the short timing options.
std::vector<std::string> bench(std::vector<std::string> args) {
  args.insert(args.begin(), "bench");
  for (const char* a : {"--device", "cpu", "--budget-ms", "1", "--warmup-ms", "0"}) {
    args.emplace_back(a);
  }
  return args;
}

/// The (op, case id) pairs a --workload filter selects, in the order the command runs them:
/// ops in the order given, each op's cases in manifest order.
std::vector<std::pair<std::string, std::string>> selected_cases(
    const std::vector<std::string>& ops, const std::set<std::string>& filter) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& name : ops) {
    const ManifestOp& op = find_op(CliTest::manifest(), name);
    for (const auto& w : op.workloads) {
      ManifestOp one_row = op;
      one_row.workloads = {w};
      for (const auto& id : one_row.case_ids()) {
        if (filter.contains(w.label) || filter.contains(id)) out.emplace_back(name, id);
      }
    }
  }
  return out;
}

/// The summary counts what the rows show.
void expect_summary_matches_rows(const BenchSummary& s, const std::vector<BenchRow>& rows) {
  const auto count = [&](const std::string& result) {
    return static_cast<int>(std::count_if(rows.begin(), rows.end(),
                                          [&](const BenchRow& r) { return r.result == result; }));
  };
  EXPECT_EQ(s.cases, static_cast<int>(rows.size()));
  EXPECT_EQ(s.passed, count("PASS"));
  EXPECT_EQ(s.failed, count("FAIL"));
  EXPECT_EQ(s.errors, count("ERROR"));
  EXPECT_EQ(s.skipped, count("SKIPPED"));
  EXPECT_EQ(s.unchecked, count("UNCHECKED") + count("NOREF"));
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_F(CliTest, BenchSmallWorkloadsPassAgainstTheReference) {
  const std::vector<std::string> ops{"RMSNormFwdOp", "FusedAddRMSNormFwdOp", "LongRoPEFwdOp",
                                     "MoETopKRoutingFwdOp"};
  const std::set<std::string> labels{"llama3-8b-decode", "phi3-mini-decode32",
                                     "deepseek-v3-decode"};
  std::vector<std::string> args = ops;
  for (const auto& label : labels) args.insert(args.end(), {"--workload", label});
  const CommandResult r = tileops(bench(args));
  ASSERT_EQ(r.exit_code, 0) << r;

  const auto expected = selected_cases(ops, labels);
  ASSERT_EQ(expected.size(), 4u);  // one decode row of each op, one dtype case each
  const std::vector<BenchRow> rows = bench_rows(r.out);
  ASSERT_EQ(rows.size(), expected.size()) << r;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].op, expected[i].first);
    EXPECT_EQ(rows[i].case_id, expected[i].second);
    EXPECT_EQ(rows[i].result, "PASS") << rows[i].op << " " << rows[i].case_id;
    EXPECT_NE(rows[i].median, "-");  // timed
  }
  const auto summary = bench_summary(r.out);
  ASSERT_TRUE(summary) << r;
  expect_summary_matches_rows(*summary, rows);
  EXPECT_EQ(summary->passed, 4);
  EXPECT_THAT(r.out, HasSubstr("# tileops " TILEOPS_EXPECTED_VERSION " bench on cpu\n"));
  // One progress line per case on stderr, numbered.
  for (std::size_t k = 1; k <= expected.size(); ++k) {
    EXPECT_THAT(r.err,
                HasSubstr("tileops bench: [" + std::to_string(k) + "/4] " + expected[k - 1].first +
                          " " + expected[k - 1].second + " on cpu: "));
  }
}

TEST_F(CliTest, BenchChecksTheAttentionWriteAndMergeAgainstTheirReferences) {
  // The KV-cache write is checked on the caches it mutates (inputs restored before the checked
  // call), the merge on out and lse with -inf entries (workload_inputs).
  const CommandResult r = tileops(bench(
      {"KVCacheWriteFwdOp", "AttentionMergeStatesFwdOp", "--workload", "llama3-8b-decode64"}));
  ASSERT_EQ(r.exit_code, 0) << r;
  const std::vector<BenchRow> rows = bench_rows(r.out);
  ASSERT_EQ(rows.size(), 2u) << r;
  EXPECT_EQ(rows[0].case_id, "llama3-8b-decode64-bfloat16");
  for (const BenchRow& row : rows) EXPECT_EQ(row.result, "PASS") << row.op << "\n" << r;
  EXPECT_THAT(r.out,
              HasSubstr("\n2 cases: 2 passed, 0 failed, 0 errors, 0 unchecked, 0 skipped\n"));
}

TEST_F(CliTest, BenchChecksThePagedAttentionAgainstItsReference) {
  // A decoding query over 4096 keys in 256 shuffled pages of 16 (workload_inputs), checked
  // against the whole reference.
  const CommandResult r =
      tileops(bench({"GroupedQueryAttentionPagedFwdOp", "--workload", "decode-1x4k-page16"}));
  ASSERT_EQ(r.exit_code, 0) << r;
  const std::vector<BenchRow> rows = bench_rows(r.out);
  ASSERT_EQ(rows.size(), 1u) << r;
  EXPECT_EQ(rows[0].case_id, "decode-1x4k-page16-bfloat16");
  EXPECT_EQ(rows[0].result, "PASS") << r;
  EXPECT_THAT(r.out,
              HasSubstr("\n1 cases: 1 passed, 0 failed, 0 errors, 0 unchecked, 0 skipped\n"));
}

TEST_F(CliTest, BenchSkipsCasesOverTheEstimateButKeepsEachOpsCheapest) {
  // With a budget below any estimate, the cheaper decode case runs, the other is SKIPPED with its
  // estimate; --all-cases runs both.
  const std::vector<std::string> args{"RMSNormFwdOp", "--workload",         "llama3-8b-decode",
                                      "--workload",   "llama3-405b-decode", "--max-case-s",
                                      "0.000000001"};
  const CommandResult r = tileops(bench(args));
  ASSERT_EQ(r.exit_code, 0) << r;
  const std::vector<BenchRow> rows = bench_rows(r.out);
  ASSERT_EQ(rows.size(), 2u) << r;
  EXPECT_EQ(rows[0].case_id, "llama3-8b-decode-bfloat16");
  EXPECT_EQ(rows[0].result, "PASS");
  EXPECT_EQ(rows[1].case_id, "llama3-405b-decode-bfloat16");
  EXPECT_EQ(rows[1].result, "SKIPPED");
  EXPECT_EQ(rows[1].median, "-");
  EXPECT_THAT(r.out, testing::ContainsRegex(
                         "\nSKIPPED RMSNormFwdOp llama3-405b-decode-bfloat16: estimated [0-9.]+ "
                         "[mu]?s a call \\([0-9.]+ [mu]?s roofline bound at 25% efficiency\\) > "
                         "--max-case-s 1e-09; --all-cases runs it\n"));
  // Progress lines name the elapsed and the remaining time.
  EXPECT_THAT(r.err, testing::ContainsRegex("\\[2/2\\] RMSNormFwdOp llama3-405b-decode-bfloat16 "
                                            "on cpu: - SKIPPED .*; elapsed [0-9]+ s, ~0 s left"));

  std::vector<std::string> all = args;
  all.emplace_back("--all-cases");
  const CommandResult every = tileops(bench(all));
  ASSERT_EQ(every.exit_code, 0) << every;
  const std::vector<BenchRow> ran = bench_rows(every.out);
  ASSERT_EQ(ran.size(), 2u) << every;
  EXPECT_EQ(ran[0].result, "PASS");
  EXPECT_EQ(ran[1].result, "PASS");
}

TEST_F(CliTest, BenchSampledCheckOnRowsDrawnBySeed) {
  // 64 rows of 8192; --sample-rows 5 checks 5 of them with the sampled reference.
  const CommandResult r =
      tileops(bench({"RMSNormFwdOp", "--workload", "llama3-70b-decode64", "--sample-rows", "5"}));
  ASSERT_EQ(r.exit_code, 0) << r;
  const std::vector<BenchRow> rows = bench_rows(r.out);
  ASSERT_EQ(rows.size(), 1u) << r;
  EXPECT_EQ(rows[0].result, "PASS");
  EXPECT_THAT(r.out, HasSubstr("  5 rows  ")) << r;  // the check column
}

TEST_F(CliTest, BenchTableFitsA160ColumnTerminalAndJsonKeepsEverything) {
  const std::string json = (cache_.path() / "narrow.json").string();
  const CommandResult r =
      tileops(bench({"FusedAddRMSNormFwdOp", "LongRoPEFwdOp", "MoETopKRoutingFwdOp", "--workload",
                     "llama3-405b-decode", "--workload", "phi3-mini-decode32", "--workload",
                     "deepseek-v3-decode", "--json", json}));
  ASSERT_EQ(r.exit_code, 0) << r;
  ASSERT_EQ(bench_rows(r.out).size(), 3u) << r;
  for (const auto& line : lines_of(r.out)) {
    if (line.starts_with("#")) continue;  // the header comments name the profile
    EXPECT_LE(line.size(), 160u) << line;
  }
  const std::string doc = read_file(json);
  for (const char* field : {"\"config\": ", "\"entries\": ", "\"estimate_s\": ",
                            "\"check\": \"full\"", "\"min_s\": ", "\"p90_s\": "}) {
    EXPECT_THAT(doc, HasSubstr(field));
  }
}

TEST_F(CliTest, BenchTableOfTheLongestNamesFits160Columns) {
  // The longest op name and a longest case id as the narrow table shows them (dtypes
  // abbreviated) share a table; the grouped-routing layer is skipped for its inputs' size on the
  // CPU but keeps its row.
  const std::string op = "MoEPrePermuteQuantFP8MaskedFwdOp";
  const std::string case_id = "dsv3-grouped-512t-float32-bfloat16-bfloat16";
  const auto shown = [](std::string id) {
    for (const auto& [whole, brief] :
         std::vector<std::pair<std::string, std::string>>{{"float8_e4m3fn", "e4m3"},
                                                          {"bfloat16", "bf16"},
                                                          {"float16", "f16"},
                                                          {"float32", "f32"},
                                                          {"int32", "i32"},
                                                          {"int64", "i64"}}) {
      for (auto at = id.find(whole); at != std::string::npos; at = id.find(whole, at + 1)) {
        id.replace(at, whole.size(), brief);
      }
    }
    return id;
  };
  for (const auto& m : manifest()) {
    EXPECT_LE(m.name.size(), op.size()) << m.name << ": a longer op name; bench it here";
    for (const auto& id : m.case_ids()) {
      EXPECT_LE(shown(id).size(), shown(case_id).size()) << id << ": a longer case; bench it here";
    }
  }
  const CommandResult r = tileops(bench({op, "FusedMoEFwdOp", "--workload", "dsv3-64t",
                                         "--workload", "dsv3-grouped-512t", "--no-check"}));
  ASSERT_EQ(r.exit_code, 0) << r;
  std::vector<std::string> cases;
  for (const BenchRow& row : bench_rows(r.out)) cases.push_back(row.op + " " + row.case_id);
  std::sort(cases.begin(), cases.end());
  EXPECT_EQ(cases,
            (std::vector<std::string>{"FusedMoEFwdOp " + case_id, op + " dsv3-64t-bfloat16"}))
      << r;
  EXPECT_THAT(r.out, HasSubstr("# target BUILTIN for every case")) << r;
  for (const auto& line : lines_of(r.out)) {
    if (line.starts_with("#")) continue;
    EXPECT_LE(line.size(), 160u) << line;
  }
}

TEST_F(CliTest, BenchSkipsCpuCasesOverOnePointFiveGigabytesWithoutFailing) {
  // glm5-up-1024 (bf16): a [262144, 6144] + b [256, 4096, 6144] + offsets int32 [257]
  //   = 16,106,128,388 bytes, over the 1.5 GB CPU limit; the decode RMSNorm case is small.
  const std::filesystem::path json = cache_.path() / "bench.json";
  const CommandResult r =
      tileops(bench({"RMSNormFwdOp", "MoEGroupedGemmFwdOp", "--workload", "llama3-8b-decode",
                     "--workload", "glm5-up-1024", "--json", json.string()}));
  ASSERT_EQ(r.exit_code, 0) << r;  // a SKIPPED case is no failure
  // Skipped before anything is allocated: the child never came near the 16 GB of inputs.
  EXPECT_LT(r.max_rss_kb, 1'500'000) << r;

  const std::vector<BenchRow> rows = bench_rows(r.out);
  ASSERT_EQ(rows.size(), 2u) << r;
  EXPECT_EQ(rows[0].result, "PASS");
  EXPECT_EQ(rows[1].op, "MoEGroupedGemmFwdOp");
  EXPECT_EQ(rows[1].case_id, "glm5-up-1024-bfloat16");
  EXPECT_EQ(rows[1].median, "-");  // not timed
  EXPECT_EQ(rows[1].result, "SKIPPED");
  EXPECT_THAT(r.out, HasSubstr("\nSKIPPED MoEGroupedGemmFwdOp glm5-up-1024-bfloat16: inputs of "
                               "16.1 GB: too large for a CPU bench\n"));
  const auto summary = bench_summary(r.out);
  ASSERT_TRUE(summary) << r;
  expect_summary_matches_rows(*summary, rows);
  EXPECT_THAT(r.out,
              HasSubstr("\n2 cases: 1 passed, 0 failed, 0 errors, 0 unchecked, 1 skipped\n"));

  // --json writes the same results beside the table.
  const std::string doc = read_file(json);
  EXPECT_THAT(doc, HasSubstr("\"summary\": {\"cases\": 2, \"passed\": 1, \"failed\": 0, "
                             "\"errors\": 0, \"unchecked\": 0, \"skipped\": 1}"));
  EXPECT_THAT(doc, HasSubstr("\"case\": \"glm5-up-1024-bfloat16\""));
  EXPECT_THAT(doc, HasSubstr("\"result\": \"SKIPPED\", \"message\": \"inputs of 16.1 GB"));
}

TEST_F(CliTest, BenchSkipsEveryLargeMoEWorkloadOnTheCpu) {
  // Input bytes of each case (bf16 activations and weights, fp32 logits/weights, int32 ids):
  //   e128-n16k-1024      a [131072,5120] + b [128,16384,5120] + offsets [129]    22.8 GB
  //   dsv3-gate-up-512t   a [4096,7168] + b [256,4096,7168] + offsets [257]       15.1 GB
  //   dsv3-down-4096t     a [32768,2048] + b [256,7168,2048] + offsets [257]      7.65 GB
  //   dsv3-512t (MLP)     x [4096,7168] + w13 [256,4096,7168] + w2 [256,7168,2048] 22.6 GB
  //   dsv3-512t, dsv3-4096t of the fused ops: the same w13 and w2 dominate        22.6 GB
  //   FP8 experts: w13 [256,4096,7168] + w2 [256,7168,2048] e4m3 (11.27 GB), their scales
  //   [256,32,56] + [256,56,16] float32 (2.7 MB) and x [M,7168] bf16 (58.7 MB at 4096 tokens,
  //   7.3 MB at 512 for the fused ops; the MLP's x is [4096,7168])                 11.3 GB
  const std::vector<std::pair<std::string, std::string>> expected{
      {"MoEGroupedGemmFwdOp e128-n16k-1024-bfloat16", "22.8"},
      {"MoEGroupedGemmFwdOp dsv3-gate-up-512t-bfloat16", "15.1"},
      {"MoEGroupedGemmFwdOp dsv3-down-4096t-bfloat16", "7.65"},
      {"MoEExpertMLPFwdOp dsv3-512t-bfloat16", "22.6"},
      {"FusedMoEExpertsFwdOp dsv3-512t-bfloat16-bfloat16", "22.6"},
      {"FusedMoEFwdOp dsv3-512t-float32-bfloat16-bfloat16", "22.6"},
      {"FusedMoEFwdOp dsv3-4096t-float32-bfloat16-bfloat16", "22.6"},
      {"MoEExpertMLPFP8FwdOp dsv3-fp8-512t-bfloat16", "11.3"},
      {"FusedMoEExpertsFwdOp dsv3-fp8-512t-bfloat16-float8_e4m3fn", "11.3"},
      {"FusedMoEFwdOp dsv3-fp8-4096t-float32-bfloat16-float8_e4m3fn", "11.3"},
      {"FusedMoEFwdOp dsv3-fp8-512t-float32-bfloat16-float8_e4m3fn", "11.3"},
  };
  const CommandResult r = tileops(bench(
      {"MoEGroupedGemmFwdOp", "MoEExpertMLPFwdOp", "MoEExpertMLPFP8FwdOp", "FusedMoEExpertsFwdOp",
       "FusedMoEFwdOp",       "--workload",        "e128-n16k-1024",       "--workload",
       "dsv3-gate-up-512t",   "--workload",        "dsv3-down-4096t",      "--workload",
       "dsv3-512t",           "--workload",        "dsv3-4096t",           "--workload",
       "dsv3-fp8-512t",       "--workload",        "dsv3-fp8-4096t",       "--quiet"}));
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.err, "");  // --quiet: no progress lines
  EXPECT_LT(r.max_rss_kb, 1'500'000) << r;
  for (const auto& [which, gigabytes] : expected) {
    EXPECT_THAT(r.out, HasSubstr("\nSKIPPED " + which + ": inputs of " + gigabytes +
                                 " GB: too large for a CPU bench\n"));
  }
  const std::vector<BenchRow> rows = bench_rows(r.out);
  EXPECT_EQ(rows.size(), expected.size()) << r;
  EXPECT_THAT(r.out,
              HasSubstr("\n11 cases: 0 passed, 0 failed, 0 errors, 0 unchecked, 11 skipped\n"));
}

TEST_F(CliTest, BenchNoCheckByCaseIdWritesUncheckedCsvWithTheRoofline) {
  // Selected by case id, not label. RMSNormFwdOp, S=[1], normalized_shape=[16384], bf16:
  //   flops = 4 * 1 * 16384 + 2 * 1 = 65538 (manifest formula);
  //   bytes = x, weight and y of 16384 bf16 each = 3 * 32768 = 98304 (every tensor once).
  const CommandResult r =
      tileops(bench({"RMSNormFwdOp", "--workload", "llama3-405b-decode-bfloat16", "--no-check",
                     "--format", "csv"}));
  ASSERT_EQ(r.exit_code, 0) << r;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 2u) << r;
  const auto header = csv_fields(lines[0]);
  const auto row = csv_fields(lines[1]);
  ASSERT_EQ(header.size(), row.size()) << r;
  std::map<std::string, std::string> field;
  for (std::size_t i = 0; i < header.size(); ++i) field[header[i]] = row[i];
  EXPECT_EQ(field["op"], "RMSNormFwdOp");
  EXPECT_EQ(field["case"], "llama3-405b-decode-bfloat16");
  EXPECT_EQ(field["device"], "cpu");
  EXPECT_EQ(field["result"], "UNCHECKED");
  EXPECT_EQ(field["flops"], "65538");
  EXPECT_EQ(field["bytes"], "98304");
  EXPECT_GT(std::stod(field["median_s"]), 0.0);
  EXPECT_GE(std::stoi(field["iterations"]), 3);  // the CPU's minimum of timed calls
  // Not a table: the summary goes to stderr.
  EXPECT_THAT(r.err, HasSubstr("1 cases: 0 passed, 0 failed, 0 errors, 1 unchecked, 0 skipped"));
}

TEST_F(CliTest, BenchBadOptionsAreUsageErrors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"bench"}, "tileops: error: name the ops to benchmark, or pass --all"},
      {{"bench", "RMSNormFwdOp", "--all"}, "tileops: error: give op names or --all, not both"},
      {{"bench", "NoSuchThingOp"}, "tileops: error: unknown op 'NoSuchThingOp'"},
      {{"bench", "RMSNormFwdOp", "--device", "gpu"},
       "tileops: error: --device 'gpu': expected cpu, cuda or cuda:<n>"},
      {{"bench", "RMSNormFwdOp", "--device", "cuda:"}, "--device 'cuda:': expected cpu, cuda"},
      // Without CUDA: built without it; with CUDA: not that many devices.
      {{"bench", "RMSNormFwdOp", "--device", "cuda:99"}, "tileops: error: --device cuda:99: "},
      {{"bench", "RMSNormFwdOp", "--workload", "no-such-workload"},
       "tileops: error: --workload no-such-workload: no case of the selected ops matches"},
      {{"bench", "RMSNormFwdOp", "--target", "no-such-target"},
       "tileops: error: --target no-such-target: no such target is registered"},
      {{"bench", "RMSNormFwdOp", "--budget-ms", "0"},
       "--budget-ms: expected a positive number, got '0'"},
      {{"bench", "RMSNormFwdOp", "--max-iters", "-1"}, "--max-iters: expected a positive number"},
      {{"bench", "RMSNormFwdOp", "--format", "xml"}, "--format"},
      {{"bench", "RMSNormFwdOp", "--flush", "fill"}, "--flush: fill not in {memset,kernel}"},
  };
  for (const auto& [args, message] : cases) {
    const CommandResult r = tileops(args);
    SCOPED_TRACE(testing::PrintToString(args));
    EXPECT_EQ(r.exit_code, kExitUsage) << r;
    EXPECT_EQ(r.out, "") << r;  // refused before any case ran
    EXPECT_THAT(r.err, HasSubstr(message)) << r;
  }
}

// --tune puts each op in tuned mode. The CPU kernels have no tuning space, so the cases pass
// exactly as without it; the table header and the JSON say that the run was tuned, and a run
// without the flag says it was not.
TEST_F(CliTest, BenchTuneIsRecordedAndCpuCasesStillPass) {
  const std::string tuned_json = (cache_.path() / "tuned.json").string();
  const CommandResult tuned = tileops(
      bench({"RMSNormFwdOp", "--workload", "llama3-8b-decode", "--tune", "--json", tuned_json}));
  ASSERT_EQ(tuned.exit_code, 0) << tuned;
  EXPECT_THAT(tuned.out, HasSubstr("# tuned mode: request_tune() before each op's first call\n"))
      << tuned;
  const std::vector<BenchRow> rows = bench_rows(tuned.out);
  ASSERT_EQ(rows.size(), 1u) << tuned;
  EXPECT_EQ(rows[0].result, "PASS") << tuned;
  EXPECT_THAT(read_file(tuned_json), HasSubstr("\"tune\": true,"));
  EXPECT_THAT(read_file(tuned_json), HasSubstr("\"flush\": \"memset\","));

  const std::string plain_json = (cache_.path() / "plain.json").string();
  const CommandResult plain =
      tileops(bench({"RMSNormFwdOp", "--workload", "llama3-8b-decode", "--json", plain_json}));
  ASSERT_EQ(plain.exit_code, 0) << plain;
  EXPECT_EQ(plain.out.find("# tuned mode"), std::string::npos) << plain;
  EXPECT_THAT(read_file(plain_json), HasSubstr("\"tune\": false,"));
}

TEST_F(CliTest, BenchUnwritableJsonIsAUsageError) {
  const std::string path = (cache_.path() / "no-such-dir" / "out.json").string();
  const CommandResult r =
      tileops(bench({"MoEGroupedGemmFwdOp", "--workload", "glm5-up-1024", "--json", path}));
  EXPECT_EQ(r.exit_code, kExitUsage) << r;
  EXPECT_THAT(r.err, HasSubstr("tileops: error: --json " + path + ": cannot be written")) << r;
  // Refused before any case runs: no progress line, no table.
  EXPECT_EQ(r.err.find("[1/"), std::string::npos) << r;
  EXPECT_TRUE(r.out.empty()) << r;
}

// The plugin of tests/plugin registers target "plugged", which serves RMSNormFwdOp by writing 7s.
class CliPluginTest : public CliTest {
 protected:
  CommandResult with_plugin(const std::vector<std::string>& args) const {
    return tileops(args, {{"TILEOPS_BACKENDS", TILEOPS_PLUGIN_OK_PATH}});
  }
};

TEST_F(CliPluginTest, ListAndDescribeShowPluginTargets) {
  // Before the fix in tools/cli/main.cpp plugins were loaded only when an op was built, so
  // `list` and `describe` showed no targets and `bench --target plugged` was refused.
  const CommandResult list = with_plugin({"list", "--format", "csv"});
  ASSERT_EQ(list.exit_code, 0) << list;
  EXPECT_THAT(lines_of(list.out), testing::Contains(testing::StartsWith("RMSNormFwdOp,norm,")));
  const auto lines = lines_of(list.out);
  for (std::size_t i = 1; i < lines.size(); ++i) {  // after the header
    const auto fields = csv_fields(lines[i]);
    if (fields.size() != 6) continue;
    if (fields[0] == "RMSNormFwdOp") {
      EXPECT_EQ(fields[4], "plugged");
    } else {
      EXPECT_EQ(fields[4], "-") << fields[0];  // the plugin serves no other op
    }
  }
  const CommandResult describe = with_plugin({"describe", "RMSNormFwdOp"});
  ASSERT_EQ(describe.exit_code, 0) << describe;
  EXPECT_THAT(describe.out, HasSubstr("\n  targets: plugged\n"));
}

TEST_F(CliPluginTest, BenchWrongResultsFailWithExitCodeOne) {
  const CommandResult r =
      with_plugin(bench({"RMSNormFwdOp", "--workload", "llama3-8b-decode", "--target", "plugged"}));
  EXPECT_EQ(r.exit_code, kExitFailure) << r;
  const std::vector<BenchRow> rows = bench_rows(r.out);
  ASSERT_EQ(rows.size(), 1u) << r;
  EXPECT_EQ(rows[0].target, "plugged");
  EXPECT_EQ(rows[0].result, "FAIL");
  // bf16 tolerance 1.6e-2 (docs/perf/README.md); 7s are far from a normalised random row.
  EXPECT_THAT(r.out, HasSubstr("\nFAIL RMSNormFwdOp llama3-8b-decode-bfloat16: y: max error "));
  EXPECT_THAT(r.out, HasSubstr(" > tolerance 0.016\n"));
  EXPECT_THAT(r.out,
              HasSubstr("\n1 cases: 0 passed, 1 failed, 0 errors, 0 unchecked, 0 skipped\n"));
}

TEST_F(CliPluginTest, BenchSampledCheckCatchesWrongRows) {
  const CommandResult r = with_plugin(bench({"RMSNormFwdOp", "--workload", "llama3-70b-decode64",
                                             "--target", "plugged", "--sample-rows", "3"}));
  EXPECT_EQ(r.exit_code, kExitFailure) << r;
  const std::vector<BenchRow> rows = bench_rows(r.out);
  ASSERT_EQ(rows.size(), 1u) << r;
  EXPECT_EQ(rows[0].result, "FAIL");
  EXPECT_THAT(r.out, HasSubstr(" > tolerance 0.016 (on 3 rows sampled with seed 0)\n")) << r;
}

}  // namespace
}  // namespace tileops::cli_test
