// How long a waiting engine spins before it yields its core: long only while
// every thread that moves this host's bytes has a core of its own.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "base/deadline.h"

namespace lanes {
namespace {

TEST(SpinBudget, CountsTheTcpWorkersOfTheTwoPeersAStepTalksTo) {
  EXPECT_EQ(threadsMovingBytes(1, 0, 2), 1);  // shared memory only: the engine
  EXPECT_EQ(threadsMovingBytes(4, 0, 2), 4);
  EXPECT_EQ(threadsMovingBytes(1, 1, 2), 3);  // one host across: engine + 2 workers
  EXPECT_EQ(threadsMovingBytes(1, 7, 2), 5);  // a ring's step: two peers at once
  // Eight ranks on a host: eight engines, and the workers of the two ranks
  // at the host's edge of the ring.
  EXPECT_EQ(threadsMovingBytes(8, 3, 4), 8 + 2 * 2 * 4);
}

TEST(SpinBudget, SpinsLongOnlyWhileTheThreadsFitOnTheCores) {
  if (std::getenv("LANES_SPIN_ITERATIONS") != nullptr)
    GTEST_SKIP() << "LANES_SPIN_ITERATIONS is set in this test's environment and overrides it";
  const int cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_EQ(spinLimitFor(cores), 4000u);
  EXPECT_EQ(spinLimitFor(cores + 1), 64u);
  // Two namespace hosts on a machine of two cores: each host's engine and
  // its two workers outnumber the cores, so its engine spins briefly.
  EXPECT_EQ(spinLimitFor(threadsMovingBytes(1, 1, cores)), 64u);
}

TEST(SpinBudget, AnEngineReadingSocketsSpinsLessWhereThreadsOutnumberCores) {
  if (std::getenv("LANES_SPIN_ITERATIONS") != nullptr)
    GTEST_SKIP() << "LANES_SPIN_ITERATIONS is set in this test's environment and overrides it";
  const int cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_EQ(spinLimitFor(cores + 1, /*pollingSyscalls=*/true), 8u);
  // With a core for every thread, spinning costs no one else's time.
  EXPECT_EQ(spinLimitFor(cores, /*pollingSyscalls=*/true), 4000u);
}

}  // namespace
}  // namespace lanes
