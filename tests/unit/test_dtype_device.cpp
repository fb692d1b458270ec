// dtype names and categories, Device, and the CUDA runtime helpers' behaviour without a GPU.
#include <gmock/gmock-matchers.h>
#include <gtest/gtest.h>

#include <string>
#include <unordered_set>

#include "tileops/core.h"
#include "unit/core_test_helpers.h"

namespace {

using ::testing::HasSubstr;
using tileops::Device;
using tileops::DType;
using tileops::testing_helpers::error_message;

TEST(DType, NamesRoundTrip) {
  const std::pair<DType, const char*> expected[] = {
      {DType::float32, "float32"},   {DType::float16, "float16"},
      {DType::bfloat16, "bfloat16"}, {DType::float8_e4m3fn, "float8_e4m3fn"},
      {DType::int8, "int8"},         {DType::int16, "int16"},
      {DType::int32, "int32"},       {DType::int64, "int64"},
      {DType::uint8, "uint8"},       {DType::bool_, "bool"},
      {DType::float64, "float64"},   {DType::float8_e5m2, "float8_e5m2"},
  };
  ASSERT_EQ(std::size(expected), static_cast<std::size_t>(tileops::kNumDTypes));
  for (const auto& [dtype, name] : expected) {
    EXPECT_EQ(tileops::dtype_name(dtype), name);
    EXPECT_EQ(tileops::dtype_from_name(name), dtype);
  }
}

TEST(DType, UnknownNamesAreRejected) {
  for (const char* name : {"", "float", "half", "bool_", "Float32", "float32 ", "fp8", "int",
                           "float8_e5m2fnuz", "e5m2"}) {
    EXPECT_EQ(tileops::dtype_from_name(name), std::nullopt) << name;
  }
}

TEST(DType, CategoriesAndSizes) {
  EXPECT_EQ(tileops::category_name(tileops::DTypeCategory::float_), "float");
  EXPECT_EQ(tileops::category_name(tileops::DTypeCategory::int_), "int");
  EXPECT_EQ(tileops::category_name(tileops::DTypeCategory::bool_), "bool");
  EXPECT_TRUE(tileops::is_floating(DType::float8_e4m3fn));
  EXPECT_FALSE(tileops::is_floating(DType::uint8));
  EXPECT_EQ(tileops::dtype_category(DType::bool_), tileops::DTypeCategory::bool_);
  EXPECT_EQ(tileops::dtype_category(DType::int64), tileops::DTypeCategory::int_);
  EXPECT_EQ(tileops::element_size(DType::bfloat16), 2u);
  EXPECT_EQ(tileops::element_size(DType::int64), 8u);
  EXPECT_EQ(tileops::element_size(DType::float8_e4m3fn), 1u);
  EXPECT_TRUE(tileops::is_floating(DType::float8_e5m2));
  EXPECT_EQ(tileops::element_size(DType::float8_e5m2), 1u);
  EXPECT_TRUE(tileops::is_floating(DType::float64));
  EXPECT_EQ(tileops::element_size(DType::float64), 8u);
}

TEST(Device, ConstructionAndNames) {
  const Device cpu = Device::cpu();
  EXPECT_TRUE(cpu.is_cpu());
  EXPECT_FALSE(cpu.is_cuda());
  EXPECT_EQ(cpu.str(), "cpu");
  EXPECT_EQ(Device{}, cpu);
  const Device c1 = Device::cuda(1);
  EXPECT_TRUE(c1.is_cuda());
  EXPECT_EQ(c1.index, 1);
  EXPECT_EQ(c1.str(), "cuda:1");
  EXPECT_EQ(Device::cuda().str(), "cuda:0");
  EXPECT_NE(c1, Device::cuda(0));
  EXPECT_NE(Device::cuda(0), cpu);
}

TEST(Device, Parse) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:0"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:17"), Device::cuda(17));
  for (const char* bad :
       {"", "gpu", "CPU", "cpu:0", "cuda:", "cuda:-1", "cuda:+1", "cuda:1x", " cuda", "cuda:1 "}) {
    const std::string message = error_message<tileops::SignatureError>([&] { Device::parse(bad); });
    EXPECT_THAT(message, HasSubstr("Device::parse"));
    std::string quoted(1, '\'');
    quoted.append(bad).push_back('\'');
    EXPECT_THAT(message, HasSubstr(quoted));
  }
}

TEST(Device, NegativeCudaIndexIsRejected) {
  const std::string message = error_message<tileops::SignatureError>([] { Device::cuda(-2); });
  EXPECT_THAT(message, HasSubstr("-2"));
}

TEST(Device, Hash) {
  std::unordered_set<Device> set{Device::cpu(), Device::cuda(0), Device::cuda(1), Device::cpu()};
  EXPECT_EQ(set.size(), 3u);
  EXPECT_EQ(set.count(Device::cuda(1)), 1u);
  EXPECT_NE(std::hash<Device>{}(Device::cpu()), std::hash<Device>{}(Device::cuda(0)));
}

TEST(CudaRuntime, AvailabilityIsConsistent) {
  const bool available = tileops::cuda_available();
  EXPECT_EQ(available, tileops::cuda_available());  // cached, stable
  EXPECT_EQ(available, tileops::cuda_device_count() > 0);
#if !TILEOPS_WITH_CUDA
  EXPECT_FALSE(available);
#endif
}

TEST(CudaRuntime, CheckCuda) {
  EXPECT_NO_THROW(tileops::check_cuda(0, "nothing"));
  const std::string message =
      error_message<tileops::UsageError>([] { tileops::check_cuda(2, "cudaMalloc of x"); });
  EXPECT_THAT(message, HasSubstr("cudaMalloc of x"));
  EXPECT_THAT(message, HasSubstr("CUDA error 2"));
#if TILEOPS_WITH_CUDA
  EXPECT_THAT(message, HasSubstr("cudaErrorMemoryAllocation"));
#endif
}

TEST(CudaRuntime, WithoutADeviceEverythingIsAUsageError) {
  if (tileops::cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  const int count = tileops::cuda_device_count();
  EXPECT_THAT(error_message<tileops::UsageError>([] { tileops::cuda_current_stream(0); }),
              HasSubstr("cuda_current_stream"));
  EXPECT_THAT(error_message<tileops::UsageError>([] { tileops::set_cuda_stream(0, nullptr); }),
              HasSubstr("set_cuda_stream"));
  EXPECT_THAT(error_message<tileops::UsageError>([] { tileops::cuda_synchronize(0); }),
              HasSubstr("cuda_synchronize"));
  EXPECT_THAT(
      error_message<tileops::UsageError>([] { const tileops::ScopedCudaStream s(0, nullptr); }),
      HasSubstr("ScopedCudaStream"));
  EXPECT_THAT(error_message<tileops::UsageError>([] { tileops::cuda_device_properties(0); }),
              HasSubstr("cuda_device_properties"));
  EXPECT_THAT(error_message<tileops::UsageError>([] { tileops::cuda_memory_stats(0); }),
              HasSubstr("cuda_memory_stats"));
  EXPECT_THAT(error_message<tileops::UsageError>([] { tileops::cuda_release_cached_memory(0); }),
              HasSubstr("cuda_release_cached_memory"));
#if TILEOPS_WITH_CUDA
  EXPECT_THAT(error_message<tileops::UsageError>([] { tileops::cuda_synchronize(0); }),
              HasSubstr("does not exist (" + std::to_string(count) + " devices available)"));
#else
  EXPECT_EQ(count, 0);
  EXPECT_THAT(error_message<tileops::UsageError>([] { tileops::cuda_synchronize(0); }),
              HasSubstr("built without CUDA"));
#endif
}

}  // namespace
