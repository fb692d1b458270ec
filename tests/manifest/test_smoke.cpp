#include <gtest/gtest.h>

#include "manifest_test_util.h"

TEST(ManifestTool, RealManifestValidates) {
  const auto r =
      tgen_test::run_gen(std::string("--check --manifest '") + TILEOPS_MANIFEST_DIR + "'");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "");
}
