// LANES_STAGE_SHARED_STREAMS (src/exec/stage_stream_policy.h): which thread
// ranks of one GPU share one set of the host-staged path's internal streams.
#include <gtest/gtest.h>

#include "exec/stage_stream_policy.h"

namespace lanes {
namespace {

TEST(StageStreamPolicy, ParsesAutoOneAndZero) {
  EXPECT_EQ(parseSharedStreamsMode(nullptr), SharedStreamsMode::Auto);
  EXPECT_EQ(parseSharedStreamsMode(""), SharedStreamsMode::Auto);
  EXPECT_EQ(parseSharedStreamsMode("auto"), SharedStreamsMode::Auto);
  EXPECT_EQ(parseSharedStreamsMode("1"), SharedStreamsMode::Always);
  EXPECT_EQ(parseSharedStreamsMode("0"), SharedStreamsMode::Never);
  for (const char* bad : {"AUTO", "yes", "true", "2", " 1"})
    EXPECT_EQ(parseSharedStreamsMode(bad), SharedStreamsMode::Invalid) << bad;
}

TEST(StageStreamPolicy, AutoSharesOnlyHostSlots) {
  EXPECT_TRUE(shareStageStreams(SharedStreamsMode::Auto, /*p2pSlots=*/false, 4));
  EXPECT_FALSE(shareStageStreams(SharedStreamsMode::Auto, /*p2pSlots=*/true, 4));
  // A bad value behaves as auto (after the caller's warning).
  EXPECT_TRUE(shareStageStreams(SharedStreamsMode::Invalid, false, 2));
  EXPECT_FALSE(shareStageStreams(SharedStreamsMode::Invalid, true, 2));
}

TEST(StageStreamPolicy, OneAndZeroOverrideTheSlots) {
  EXPECT_TRUE(shareStageStreams(SharedStreamsMode::Always, true, 2));
  EXPECT_TRUE(shareStageStreams(SharedStreamsMode::Always, false, 8));
  EXPECT_FALSE(shareStageStreams(SharedStreamsMode::Never, false, 8));
  EXPECT_FALSE(shareStageStreams(SharedStreamsMode::Never, true, 8));
}

TEST(StageStreamPolicy, ARankAloneOnItsGpuKeepsItsOwnSet) {
  for (auto mode : {SharedStreamsMode::Auto, SharedStreamsMode::Always, SharedStreamsMode::Never})
    for (bool p2p : {false, true}) {
      EXPECT_FALSE(shareStageStreams(mode, p2p, 1));
      EXPECT_FALSE(shareStageStreams(mode, p2p, 0));
    }
}

}  // namespace
}  // namespace lanes
