// Tests of the perf layer: percentiles, iteration choice, the roofline bound, hardware profile
// files (round trip, corrupt files ignored with a warning).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tileops/core/error.h"
#include "tileops/perf/perf.h"

namespace tileops::perf {
namespace {

TEST(PerfPercentile, MedianOfOddAndEvenSamples) {
  const std::vector<double> odd{5, 1, 3};
  EXPECT_DOUBLE_EQ(percentile(odd, 0.5), 3);
  const std::vector<double> even{4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(percentile(even, 0.5), 2.5);
}

TEST(PerfPercentile, LinearInterpolationLikeNumpy) {
  // numpy.percentile(range(1, 11), 90) == 9.1
  std::vector<double> s;
  for (int i = 10; i >= 1; --i) s.push_back(i);
  EXPECT_NEAR(percentile(s, 0.9), 9.1, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(s, 0.0), 1);
  EXPECT_DOUBLE_EQ(percentile(s, 1.0), 10);
  EXPECT_NEAR(percentile(s, 0.25), 3.25, 1e-12);
}

TEST(PerfPercentile, EmptyAndSingle) {
  EXPECT_TRUE(std::isnan(percentile(std::vector<double>{}, 0.5)));
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{7.0}, 0.9), 7.0);
}

TEST(PerfSummarize, Statistics) {
  const TimingResult r = summarize({3e-6, 1e-6, 2e-6, 10e-6, 4e-6}, "test");
  EXPECT_EQ(r.iterations, 5);
  EXPECT_DOUBLE_EQ(r.median_s, 3e-6);
  EXPECT_DOUBLE_EQ(r.min_s, 1e-6);
  EXPECT_NEAR(r.p90_s, 7.6e-6, 1e-18);  // between 4 and 10 at 0.6
  EXPECT_NEAR(r.mean_s, 4e-6, 1e-18);
  EXPECT_EQ(r.method, "test");
  EXPECT_EQ(r.samples_s.size(), 5u);
}

TEST(PerfIterations, ClampedBudgetOverCost) {
  TimingOptions o;  // 100 ms budget, [10, 200]
  EXPECT_EQ(choose_iterations(1e-3, o), 100);
  EXPECT_EQ(choose_iterations(1e-6, o), 200);
  EXPECT_EQ(choose_iterations(1.0, o), 10);
  EXPECT_EQ(choose_iterations(0.0, o), 200);
  o.min_iters = 3;
  o.max_iters = 5;
  EXPECT_EQ(choose_iterations(0.025, o), 4);
}

TEST(PerfTiming, CpuTimerCountsIterations) {
  TimingOptions o;
  o.warmup_ms = 1;
  o.budget_ms = 5;
  o.min_iters = 4;
  o.max_iters = 50;
  int calls = 0;
  const TimingResult r = time_op(
      [&] {
        ++calls;
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      },
      Device::cpu(), o);
  EXPECT_GE(r.iterations, 4);
  EXPECT_LE(r.iterations, 50);
  EXPECT_EQ(r.samples_s.size(), static_cast<std::size_t>(r.iterations));
  EXPECT_GE(calls, r.iterations + 4);  // first call + 3 calibration calls
  EXPECT_GE(r.min_s, 400e-6);
  EXPECT_LE(r.min_s, r.median_s);
  EXPECT_LE(r.median_s, r.p90_s);
  EXPECT_EQ(r.method, "cpu wall clock");
}

TEST(PerfTiming, L2FlushNames) {
  EXPECT_EQ(to_string(L2Flush::memset), "memset");
  EXPECT_EQ(to_string(L2Flush::kernel), "kernel");
  EXPECT_EQ(parse_l2_flush("memset"), L2Flush::memset);
  EXPECT_EQ(parse_l2_flush("kernel"), L2Flush::kernel);
  EXPECT_EQ(TimingOptions{}.flush_method, L2Flush::memset);
  try {
    parse_l2_flush("fill");
    ADD_FAILURE() << "parse_l2_flush accepted 'fill'";
  } catch (const tileops::UsageError& e) {
    EXPECT_STREQ(e.what(), "unknown L2 flush 'fill': expected memset or kernel");
  }
}

HardwareProfile test_profile() {
  HardwareProfile p;
  p.name = "test \"gpu\"\\1";
  p.mem_bandwidth_bytes_per_s = 2e12;           // 2 TB/s
  p.flops_per_s["cuda_core.fp32"] = 50e12;      // 50 TFLOP/s
  p.flops_per_s["tensor_core.bf16"] = 1000e12;  // 1 PFLOP/s
  p.source = "measured 2026-01-01 (unit test)\n";
  return p;
}

TEST(PerfRoofline, MemoryBound) {
  // 4 GB moved at 2 TB/s = 2 ms; 1 GFLOP at 50 TFLOP/s = 20 us -> bound 2 ms.
  const Roofline r{1e9, 4e9};
  EXPECT_DOUBLE_EQ(roofline_seconds(r, "cuda_core.fp32", test_profile()), 2e-3);
  EXPECT_DOUBLE_EQ(roofline_fraction(r, "cuda_core.fp32", test_profile(), 4e-3), 0.5);
}

TEST(PerfRoofline, ComputeBound) {
  // 2e15 flops at 1 PFLOP/s = 2 s; 2e9 bytes at 2 TB/s = 1 ms -> bound 2 s.
  const Roofline r{2e15, 2e9};
  EXPECT_DOUBLE_EQ(roofline_seconds(r, "tensor_core.bf16", test_profile()), 2.0);
  EXPECT_DOUBLE_EQ(roofline_fraction(r, "tensor_core.bf16", test_profile(), 2.5), 0.8);
  // The long dtype spelling is the same key.
  EXPECT_DOUBLE_EQ(roofline_fraction(r, "tensor_core.bfloat16", test_profile(), 2.5), 0.8);
}

TEST(PerfRoofline, MissingPeakOrBadTimeIsNaN) {
  const Roofline r{1e9, 1e9};
  EXPECT_TRUE(std::isnan(roofline_fraction(r, "tensor_core.fp8", test_profile(), 1.0)));
  EXPECT_TRUE(std::isnan(roofline_fraction(r, "cuda_core.fp32", test_profile(), 0.0)));
  // No flops: the missing peak does not matter.
  EXPECT_DOUBLE_EQ(roofline_fraction(Roofline{0, 2e9}, "tensor_core.fp8", test_profile(), 2e-3),
                   0.5);
}

TEST(PerfRoofline, CpuProfilePricesEveryKeyAtItsFp32Rate) {
  HardwareProfile cpu;
  cpu.name = "cpu";
  cpu.mem_bandwidth_bytes_per_s = 10e9;
  cpu.flops_per_s["cpu.fp32"] = 100e9;
  EXPECT_EQ(cpu.peak_flops("cuda_core.fp32"), 100e9);
  EXPECT_EQ(cpu.peak_flops("tensor_core.bf16"), 100e9);
  // 1e11 flops at 100 GFLOP/s = 1 s, 1e9 bytes at 10 GB/s = 0.1 s.
  EXPECT_DOUBLE_EQ(roofline_fraction(Roofline{1e11, 1e9}, "tensor_core.bf16", cpu, 4.0), 0.25);
}

TEST(PerfProfile, H200Datasheet) {
  const HardwareProfile p = h200_datasheet_profile();
  EXPECT_EQ(p.mem_bandwidth_bytes_per_s, 4.8e12);
  ASSERT_TRUE(p.peak_flops("tensor_core.bf16"));
  EXPECT_NEAR(*p.peak_flops("tensor_core.bf16"), 989.4e12, 1e9);
  EXPECT_TRUE(p.peak_flops("cuda_core.fp32"));
  EXPECT_EQ(p.source, "datasheet");
}

/// Points XDG_CACHE_HOME at a fresh directory for the test's life.
class TempCacheDir {
 public:
  TempCacheDir() {
    const char* old = std::getenv("XDG_CACHE_HOME");
    if (old != nullptr) old_ = old;
    dir_ =
        std::filesystem::temp_directory_path() /
        ("tileops-test-perf-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "-" + std::to_string(reinterpret_cast<std::uintptr_t>(this)));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    ::setenv("XDG_CACHE_HOME", dir_.c_str(), 1);
  }
  ~TempCacheDir() {
    if (old_) {
      ::setenv("XDG_CACHE_HOME", old_->c_str(), 1);
    } else {
      ::unsetenv("XDG_CACHE_HOME");
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::optional<std::string> old_;
  std::filesystem::path dir_;
};

TEST(PerfProfile, SaveLoadRoundTrip) {
  TempCacheDir cache;
  EXPECT_EQ(profile_cache_dir(), cache.dir() / "tileops");
  const auto path = saved_profile_path("cuda-Test_GPU");
  EXPECT_EQ(path, cache.dir() / "tileops" / "hardware-cuda-Test_GPU.json");
  const HardwareProfile p = test_profile();
  save_profile(p, path);
  std::string warning;
  const auto loaded = load_profile(path, &warning);
  ASSERT_TRUE(loaded) << warning;
  EXPECT_EQ(*loaded, p);
  const auto by_key = load_saved_profile("cuda-Test_GPU");
  ASSERT_TRUE(by_key);
  EXPECT_EQ(*by_key, p);
}

TEST(PerfProfile, JsonRoundTripKeepsEveryDigit) {
  HardwareProfile p = h200_datasheet_profile();
  p.mem_bandwidth_bytes_per_s = 4.123456789012345e12;
  std::string error;
  const auto back = profile_from_json(profile_to_json(p), &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(*back, p);
}

TEST(PerfProfile, MissingFileIsNotAWarning) {
  TempCacheDir cache;
  std::string warning;
  EXPECT_FALSE(load_profile(cache.dir() / "nope.json", &warning));
  EXPECT_TRUE(warning.empty());
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(load_saved_profile("cpu"));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(PerfProfile, CorruptFileIsIgnoredWithAWarning) {
  TempCacheDir cache;
  const auto path = saved_profile_path("cpu");
  std::filesystem::create_directories(path.parent_path());
  {
    std::ofstream out(path);
    out << "{\"name\": \"cpu\", \"mem_bandwidth_bytes_per_s\": 1e10, \"flops_per_s\": {";  // cut
  }
  std::string warning;
  EXPECT_FALSE(load_profile(path, &warning));
  EXPECT_NE(warning.find("malformed JSON"), std::string::npos) << warning;

  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(load_saved_profile("cpu"));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("warning"), std::string::npos) << err;
  EXPECT_NE(err.find(path.string()), std::string::npos) << err;
}

TEST(PerfProfile, InvalidValuesAreRejected) {
  std::string error;
  EXPECT_FALSE(profile_from_json("[1, 2]", &error));
  EXPECT_FALSE(profile_from_json(R"({"name": "x"})", &error));
  EXPECT_NE(error.find("mem_bandwidth_bytes_per_s"), std::string::npos) << error;
  EXPECT_FALSE(profile_from_json(R"({"name": "x", "mem_bandwidth_bytes_per_s": -1})", &error));
  EXPECT_FALSE(profile_from_json(
      R"({"name": "x", "mem_bandwidth_bytes_per_s": 1e9, "flops_per_s": {"cpu.fp32": "fast"}})",
      &error));
  EXPECT_NE(error.find("cpu.fp32"), std::string::npos) << error;
  EXPECT_FALSE(
      profile_from_json(R"({"name": "x", "mem_bandwidth_bytes_per_s": 1e9} trailing)", &error));
  const auto ok = profile_from_json(
      R"({"name": "x", "mem_bandwidth_bytes_per_s": 1e9, "future_key": [1, {"a": null}]})", &error);
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ(ok->mem_bandwidth_bytes_per_s, 1e9);
}

TEST(PerfProfile, CpuProfileFromTheCacheOrAProbe) {
  TempCacheDir cache;
  EXPECT_EQ(saved_profile_key(Device::cpu()), "cpu");
  const HardwareProfile& p = profile_for(Device::cpu());
  EXPECT_GT(p.mem_bandwidth_bytes_per_s, 0);
  ASSERT_TRUE(p.peak_flops("cpu.fp32"));
  EXPECT_GT(*p.peak_flops("cpu.fp32"), 0);
  EXPECT_EQ(&p, &profile_for(Device::cpu()));  // computed once
}

TEST(PerfRoofKey, Normalize) {
  EXPECT_EQ(normalize_roof_key("tensor_core.bfloat16"), "tensor_core.bf16");
  EXPECT_EQ(normalize_roof_key("tensor_core.float8_e4m3fn"), "tensor_core.fp8");
  EXPECT_EQ(normalize_roof_key("cuda_core.fp32"), "cuda_core.fp32");
  EXPECT_EQ(normalize_roof_key("plain"), "plain");
}

}  // namespace
}  // namespace tileops::perf
