// The NCCL transport's host-side pieces that need no GPU: the unique id's text form, the
// launcher environment's checks, and what a build without NCCL answers. The transport itself is
// tested on a GPU (tests/gpu/test_moe_expert_parallel_gpu.cpp) and across GPUs by `tileops
// ep-check` under scripts/ep-launch.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "ops/ops_test_util.h"
#include "tileops/ops/moe_nccl.h"

namespace tileops {
namespace {

using testing::HasSubstr;
using testing_util::message_of;

TEST(NcclUniqueId, HexRoundTripsEveryByte) {
  NcclUniqueId id;
  for (std::size_t i = 0; i < id.bytes.size(); ++i) id.bytes[i] = static_cast<std::byte>(i * 2 + 1);
  const std::string text = id.hex();
  ASSERT_EQ(text.size(), 256u);
  EXPECT_EQ(text.substr(0, 6), "010305");
  EXPECT_EQ(text.substr(254), "ff");
  EXPECT_EQ(NcclUniqueId::from_hex(text).bytes, id.bytes);
  std::string upper = text;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(NcclUniqueId::from_hex(upper).bytes, id.bytes);
}

TEST(NcclUniqueId, MalformedTextIsAUsageError) {
  EXPECT_THROW(NcclUniqueId::from_hex("abc"), UsageError);
  EXPECT_THAT(message_of([] { NcclUniqueId::from_hex(std::string(255, '0')); }),
              HasSubstr("expected 256 hex digits, got 255"));
  EXPECT_THAT(message_of([] { NcclUniqueId::from_hex(std::string(255, '0') + "g"); }),
              HasSubstr("'g' is not a hex digit"));
}

/// Removes the launcher's variables after each test.
class LauncherEnvironment : public testing::Test {
 protected:
  void TearDown() override {
    for (const char* name : {"WORLD_SIZE", "RANK", "LOCAL_RANK", "TILEOPS_EP_UNIQUE_ID",
                             "TILEOPS_EP_ID_FILE", "TILEOPS_EP_TIMEOUT_S"}) {
      unsetenv(name);
    }
  }
};

TEST_F(LauncherEnvironment, MissingOrMalformedVariablesAreNamed) {
  unsetenv("WORLD_SIZE");
  EXPECT_THAT(message_of([] { make_nccl_transport_from_env(); }),
              HasSubstr("WORLD_SIZE is not set"));
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "2", 1);
  EXPECT_THAT(message_of([] { make_nccl_transport_from_env(); }),
              HasSubstr("RANK='2' is not an integer in [0, 1]"));
  setenv("RANK", "1", 1);
  setenv("LOCAL_RANK", "x1", 1);
  EXPECT_THAT(message_of([] { make_nccl_transport_from_env(); }),
              HasSubstr("LOCAL_RANK='x1' is not an integer"));
  setenv("LOCAL_RANK", "1", 1);
  EXPECT_THAT(message_of([] { make_nccl_transport_from_env(); }),
              HasSubstr("neither TILEOPS_EP_ID_FILE"));
  setenv("TILEOPS_EP_UNIQUE_ID", "zz", 1);
  EXPECT_THAT(message_of([] { make_nccl_transport_from_env(); }),
              HasSubstr("expected 256 hex digits"));
}

TEST_F(LauncherEnvironment, ARankWaitsForRankZerosIdFileWithinTheTimeout) {
  const auto file =
      std::filesystem::temp_directory_path() / ("tileops-ep-id-" + std::to_string(::getpid()));
  std::filesystem::remove(file);
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "1", 1);
  setenv("LOCAL_RANK", "0", 1);
  setenv("TILEOPS_EP_ID_FILE", file.c_str(), 1);
  setenv("TILEOPS_EP_TIMEOUT_S", "1", 1);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(make_nccl_transport_from_env(), ExpertParallelCommError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_THAT(message_of([] { make_nccl_transport_from_env(); }),
              HasSubstr("rank 0 did not publish its NCCL id in"));
  // Published later by "rank 0" (another thread here): the waiting rank reads it and goes on to
  // connect, which this machine's build then refuses (no NCCL or no GPU), past the file.
  NcclUniqueId id;
  id.bytes[0] = std::byte{0x5a};
  std::thread publisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ofstream(file.string() + ".tmp") << id.hex() << "\n";
    std::filesystem::rename(file.string() + ".tmp", file);
  });
  const std::string message = message_of([] { make_nccl_transport_from_env(); });
  publisher.join();
  std::filesystem::remove(file);
  EXPECT_THAT(message, testing::Not(HasSubstr("did not publish")));
  EXPECT_THAT(message,
              testing::AnyOf(HasSubstr("built without NCCL"), HasSubstr("does not exist")));
}

TEST(NcclTransport, ABuildWithoutNcclSaysSo) {
  if (nccl_available()) GTEST_SKIP() << "this build has NCCL (tested on the GPU)";
  EXPECT_THROW(nccl_unique_id(), OpNotAvailableError);
  EXPECT_THAT(message_of([] { make_nccl_transport(NcclUniqueId{}, {}); }),
              HasSubstr("built without NCCL"));
}

TEST(NcclTransport, OptionsOutOfRangeAreUsageErrors) {
  if (!nccl_available()) GTEST_SKIP() << "built without NCCL";
  EXPECT_THAT(message_of([] { make_nccl_transport(NcclUniqueId{}, {.world_size = 2, .rank = 2}); }),
              HasSubstr("rank 2 of world size 2 is out of range"));
  EXPECT_THAT(message_of([] { make_nccl_transport(NcclUniqueId{}, {.device = 4096}); }),
              HasSubstr("cuda:4096 does not exist"));
}

}  // namespace
}  // namespace tileops
