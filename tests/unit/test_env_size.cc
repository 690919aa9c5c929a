// envSize (src/core/env.h): size variables read the way every LANES_*_BYTES
// variable is documented in docs/env.md — suffixes, the fallback when unset
// or empty, and the fallback (with a warning) when the value is not a size.
#include <gtest/gtest.h>

#include "base/env.h"
#include "tests/common/scoped_env.h"

namespace lanes {
namespace {

using test::ScopedEnv;

constexpr const char* kName = "LANES_TEST_ENV_SIZE";

TEST(EnvSize, ReadsSuffixedSizes) {
  {
    ScopedEnv v(kName, "256K");
    EXPECT_EQ(envSize(kName, 7), 256u * 1024);
  }
  {
    ScopedEnv v(kName, "2M");
    EXPECT_EQ(envSize(kName, 7), 2u * 1024 * 1024);
  }
  {
    ScopedEnv v(kName, "8");
    EXPECT_EQ(envSize(kName, 7), 8u);
  }
}

TEST(EnvSize, UnsetEmptyOrMalformedGiveTheFallback) {
  EXPECT_EQ(envSize(kName, 7), 7u);
  {
    ScopedEnv v(kName, "");
    EXPECT_EQ(envSize(kName, 7), 7u);
  }
  {
    ScopedEnv v(kName, "lots");
    EXPECT_EQ(envSize(kName, 7), 7u);
  }
}

}  // namespace
}  // namespace lanes
