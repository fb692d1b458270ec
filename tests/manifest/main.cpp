// Test driver of the manifest compiler's tests. `--update-golden` rewrites
// tests/manifest/golden/expected/ from the generator's current output instead of comparing.
#include <cstring>

#include <gtest/gtest.h>

#include "manifest_test_util.h"

bool g_update_golden = false;

int main(int argc, char** argv) {
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--update-golden") == 0) {
      g_update_golden = true;
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
