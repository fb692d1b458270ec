// Backend plugins named in TILEOPS_BACKENDS: loaded once, in sorted order, all or nothing each.
// Runs as its own program: the environment must be set before the first op is constructed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "tileops/ops/norm.h"
#include "tileops/target/target.h"

namespace tileops {
namespace {

using testing::HasSubstr;

TEST(Plugins, LoadInSortedOrderAllOrNothing) {
  const std::string dir = TILEOPS_PLUGIN_DIR;
  const std::string paths = dir + "/libtileops_plugin_ok.so:" + dir + "/missing_plugin.so:" + dir +
                            "/libtileops_plugin_bad.so";
  ASSERT_EQ(setenv("TILEOPS_BACKENDS", paths.c_str(), 1), 0);
  RMSNormFwdOp op({.normalized_shape = {4}}, Target("plugged"));  // loads the plugins
  const auto failures = load_failures();
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_THAT(failures[0], HasSubstr("libtileops_plugin_bad.so: plugin_bad gave up halfway"));
  EXPECT_THAT(failures[1], HasSubstr("missing_plugin.so"));
  const auto targets = registered_targets();
  EXPECT_THAT(targets, testing::Contains("plugged"));
  EXPECT_THAT(targets, testing::Not(testing::Contains("half_registered")));  // rolled back
  const Tensor y = op(Tensor::randn({2, 4}, DType::float32, 1), Tensor::randn({4}, DType::float32, 2));
  EXPECT_EQ(op.serving_target(), "plugged");
  EXPECT_EQ(y.item_at({1, 3}), 7.0);
  // Loaded once: a later construction does not load again.
  RMSNormFwdOp again({.normalized_shape = {4}});
  EXPECT_EQ(load_failures().size(), 2u);
}

}  // namespace
}  // namespace tileops
