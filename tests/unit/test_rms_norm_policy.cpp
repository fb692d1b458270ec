// The RMSNorm CUDA kernels' default policy (rms_norm_policy.cpp), on the CPU: the decision for a
// table of shapes, written from the decision tree the policy had before it became a table of
// rules (rms_norm_cuda.cu before the split), so that the split changed no default.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/norm/rms_norm_cuda.h"
#include "tileops/core/error.h"

namespace {

using tileops::DType;
namespace ck = tileops::cuda_kernels;

constexpr ck::RMSNormDevice kH200{.major = 9, .sm_count = 132};
constexpr ck::RMSNormDevice kSm80{.major = 8, .sm_count = 108};

struct Case {
  int64_t rows;
  int64_t cols;
  DType dtype;
  bool fused;
  ck::RMSNormDevice device;
  const char* want;  // the configuration's name (its tuning-database value)
};

// Names, shortened: every name starts with threads, rows_per_block, vec_bytes, vecs_per_thread,
// weight_in_registers, blocks_per_sm.
std::string name(int threads, int rpb, int nv, bool wreg, int per_sm, const std::string& extra) {
  return "threads=" + std::to_string(threads) + ",rows_per_block=" + std::to_string(rpb) +
         ",vec_bytes=16,vecs_per_thread=" + std::to_string(nv) +
         ",weight_in_registers=" + (wreg ? "true" : "false") +
         ",blocks_per_sm=" + std::to_string(per_sm) + extra;
}

TEST(RMSNormPolicy, DefaultsAsBeforeTheSplit) {
  const DType bf16 = DType::bfloat16;
  const DType fp16 = DType::float16;
  const DType fp32 = DType::float32;
  const std::vector<std::pair<Case, std::string>> cases = {
      // Small rows: 8-32 threads a row, several rows a block, the weight in registers.
      {{16, 64, bf16, false, kH200, ""}, name(128, 16, 1, true, 0, "")},
      {{1, 1024, bf16, true, kH200, ""}, name(32, 1, 4, true, 0, "")},
      // Rows of exactly 512, 1024 or 2048 vectors on sm_90: re-reading, by rows and fusion.
      {{2048, 4096, bf16, false, kH200, ""}, name(256, 1, 2, false, 0, ",reread=true")},
      {{1, 4096, bf16, false, kH200, ""}, name(512, 1, 1, false, 0, ",reread=true")},
      {{1, 4096, bf16, true, kH200, ""}, name(512, 1, 1, false, 0, ",reread=true")},
      {{0, 4096, bf16, false, kH200, ""}, name(512, 1, 1, false, 0, ",reread=true")},
      {{64, 8192, bf16, false, kH200, ""}, name(512, 1, 2, false, 0, ",reread=true")},
      {{64, 8192, bf16, true, kH200, ""}, name(512, 1, 2, false, 0, ",reread=true")},
      {{2048, 8192, bf16, false, kH200, ""}, name(256, 1, 4, false, 0, ",grid=all,reread=true")},
      {{2048, 8192, bf16, true, kH200, ""}, name(512, 1, 2, false, 0, ",grid=all,reread=true")},
      {{1, 16384, bf16, true, kH200, ""}, name(1024, 1, 2, false, 0, ",reread=true")},
      {{2048, 16384, fp16, false, kH200, ""}, name(512, 1, 4, false, 0, ",grid=all,reread=true")},
      {{2048, 16384, bf16, true, kH200, ""}, name(1024, 1, 2, false, 0, ",grid=all,reread=true")},
      {{2048, 4096, fp32, true, kH200, ""}, name(512, 1, 2, false, 0, ",grid=all,reread=true")},
      {{100, 4096, fp32, false, kH200, ""}, name(512, 1, 2, false, 0, ",reread=true")},
      // ...but many plain fp32 rows of 4096: register-resident 256 x 4, weight in registers.
      {{2048, 4096, fp32, false, kH200, ""}, name(256, 1, 4, true, 0, "")},
      // ...and many fused rows of 512 vectors: high-occupancy streaming, 1 vector, L2 hints.
      {{2048, 4096, bf16, true, kH200, ""},
       name(256, 1, 0, false, 0, ",grid=all,cache_hint=1,streaming_unroll=1")},
      // Fused, many rows over 8 KB: 2 vectors in flight, 512 threads, no hint.
      {{2048, 12288, bf16, true, kH200, ""},
       name(512, 1, 0, false, 0, ",grid=all,streaming_unroll=2")},
      // Plain, many rows of at least 16 KB: staged, two blocks a multiprocessor.
      {{2048, 12288, bf16, false, kH200, ""}, name(512, 1, 0, false, 2, ",staged_rows=3")},
      {{2048, 16000, bf16, false, kH200, ""}, name(512, 1, 0, false, 2, ",staged_rows=2")},
      // Up to 512 vectors: 4 vectors a thread, weight in registers, two rows in flight.
      {{2048, 2048, bf16, false, kH200, ""}, name(128, 2, 4, true, 0, ",rows_in_flight=2")},
      {{2048, 2048, bf16, true, kH200, ""}, name(128, 2, 4, true, 0, ",rows_in_flight=2")},
      {{2048, 3001, fp16, false, kH200, ""}, name(96, 1, 4, true, 0, ",rows_in_flight=2")},
      {{2048, 4096, bf16, false, kSm80, ""}, name(128, 1, 4, true, 0, ",rows_in_flight=2")},
      // Up to 1024 vectors, not exact: 4 vectors a thread, one row in flight.
      {{2048, 6000, bf16, false, kH200, ""}, name(192, 1, 4, true, 0, "")},
      // Fewer rows than multiprocessors, long rows: many threads, weight in registers.
      {{1, 12288, bf16, false, kH200, ""}, name(384, 1, 4, true, 0, "")},
      // Many rows of up to 4096 vectors: 8 vectors a thread, a block per row.
      {{2048, 12288, bf16, false, kSm80, ""}, name(192, 1, 8, false, 0, ",grid=all")},
      // Rows too long for registers or stages: streaming.
      {{2048, 65536, bf16, false, kH200, ""}, name(256, 1, 0, false, 0, "")},
  };
  for (const auto& [c, want] : cases) {
    const std::string where = std::to_string(c.rows) + "x" + std::to_string(c.cols) + " " +
                              std::string(tileops::dtype_name(c.dtype)) +
                              (c.fused ? " fused" : "") + " sm" + std::to_string(c.device.major);
    EXPECT_EQ(ck::rms_norm_default_config(c.rows, c.cols, c.dtype, c.fused, c.device).str(), want)
        << where;
  }
}

// The fallback is the default wherever that is not staged; else what the tree chose next.
TEST(RMSNormPolicy, FallbackIsNeverStaged) {
  EXPECT_EQ(ck::rms_norm_fallback_config(2048, 12288, DType::bfloat16, false, kH200).str(),
            name(192, 1, 8, false, 0, ",grid=all"));
  EXPECT_EQ(ck::rms_norm_fallback_config(2048, 16000, DType::bfloat16, false, kH200).str(),
            name(256, 1, 8, false, 0, ",grid=all"));
  EXPECT_EQ(ck::rms_norm_fallback_config(2048, 4096, DType::bfloat16, false, kH200),
            ck::rms_norm_default_config(2048, 4096, DType::bfloat16, false, kH200));
}

TEST(RMSNormPolicy, RefusesOtherDtypes) {
  EXPECT_THROW(ck::rms_norm_default_config(16, 64, DType::int32, false, kH200),
               tileops::SignatureError);
}

// The tuning space: the default first, every member valid and distinct, each family present
// where it serves the shape, and no variant that left the tree.
TEST(RMSNormPolicy, TuningSpace) {
  for (const bool fused : {false, true}) {
    const auto space = ck::rms_norm_tuning_space(2048, 8192, DType::bfloat16, fused, kH200);
    ASSERT_FALSE(space.empty());
    EXPECT_EQ(space.front(),
              ck::rms_norm_default_config(2048, 8192, DType::bfloat16, fused, kH200));
    std::vector<std::string> names;
    for (const auto& c : space) {
      EXPECT_EQ(ck::rms_norm_config_refusal(c, DType::bfloat16, 8192), "") << c.str();
      names.push_back(c.str());
    }
    std::sort(names.begin(), names.end());
    EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
    const auto has = [&](auto pred) { return std::any_of(space.begin(), space.end(), pred); };
    EXPECT_TRUE(has([](const auto& c) { return c.template as<ck::RMSNormStagedConfig>(); }));
    EXPECT_TRUE(has([](const auto& c) { return c.template as<ck::RMSNormRereadConfig>(); }));
    EXPECT_TRUE(has([](const auto& c) {
      const auto* s = c.template as<ck::RMSNormHighOccupancyStreamingConfig>();
      return s != nullptr && s->cache_hint == 3;
    }));
    EXPECT_TRUE(has([](const auto& c) {
      const auto* r = c.template as<ck::RMSNormResidentConfig>();
      return r != nullptr && r->cluster_size == 2;
    }));
    for (const std::string& n : names) {
      EXPECT_EQ(n.find("fused_recompute"), std::string::npos) << n;
      EXPECT_EQ(n.find("vecs_per_thread=16"), std::string::npos) << n;
      const bool streaming = n.find("vecs_per_thread=0") != std::string::npos &&
                             n.find("staged_rows") == std::string::npos;
      if (!streaming) {
        EXPECT_EQ(n.find("cache_hint"), std::string::npos) << n;  // hints: streaming only
      }
    }
  }
}

// Ranges the per-family types still carry are checked by rms_norm_config_refusal.
TEST(RMSNormPolicy, ConfigRefusals) {
  const DType bf16 = DType::bfloat16;
  const auto refusal = [&](ck::RMSNormConfig c, int64_t cols) {
    return ck::rms_norm_config_refusal(c, bf16, cols);
  };
  EXPECT_EQ(refusal({ck::RMSNormResidentConfig{.threads = 128, .vecs_per_thread = 4}}, 4096), "");
  EXPECT_NE(refusal({ck::RMSNormResidentConfig{.threads = 128, .vecs_per_thread = 16}}, 4096)
                .find("vecs_per_thread must be 1, 2, 4 or 8"),
            std::string::npos);
  EXPECT_NE(refusal({ck::RMSNormResidentConfig{.threads = 128, .vecs_per_thread = 2}}, 4096)
                .find("the row does not fit"),
            std::string::npos);
  EXPECT_NE(refusal({ck::RMSNormResidentConfig{
                        .threads = 256, .vecs_per_thread = 2, .rows_in_flight = 2}},
                    4096)
                .find("no kernel variant"),
            std::string::npos);
  EXPECT_NE(refusal({ck::RMSNormRereadConfig{.threads = 256, .vecs_per_thread = 2}}, 8192)
                .find("reread needs rows of exactly"),
            std::string::npos);
  EXPECT_NE(refusal({ck::RMSNormStagedConfig{.threads = 256, .grid = ck::RMSNormGrid::all}}, 4096)
                .find("grid persistent or balanced"),
            std::string::npos);
  EXPECT_NE(
      refusal({ck::RMSNormHighOccupancyStreamingConfig{.threads = 256, .cache_hint = 4}}, 4096)
          .find("cache_hint must be 0, 1, 2 or 3"),
      std::string::npos);
}

}  // namespace
