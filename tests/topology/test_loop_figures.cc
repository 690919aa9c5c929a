// The call, later-step, rooted-call and host-summation figures lanes-topo --probe derives
// from its loops of 8-byte calls (topology/loop_figures.h), noise included.
#include <gtest/gtest.h>

#include "topology/loop_figures.h"

namespace lanes::topo {
namespace {

HostProbe withHop(double hopUs) {
  HostProbe h;
  h.hopLatencyUs = hopUs;
  return h;
}

TEST(LoopFigures, CallStepAndRootedCallFromTheLoops) {
  HostProbe h = withHop(2.0);
  setCallFigures({3.0e-6, 3.5e-6, 1.5e-6}, &h);
  EXPECT_NEAR(h.callUs, 1.0, 1e-9) << "doubling less the hop";
  EXPECT_NEAR(h.stepUs, 0.5, 1e-9) << "ring less doubling";
  EXPECT_NEAR(h.rootedUs, 1.5, 1e-9) << "the broadcast loop";
  EXPECT_EQ(h.hopLatencyUs, 2.0) << "the ping-pong's, untouched";
}

// A ping-pong hop slower than the whole all-reduce leaves a tenth of the
// all-reduce as the call, never zero.
TEST(LoopFigures, AHopSlowerThanTheCallLeavesATenthOfIt) {
  HostProbe h = withHop(5.0);
  setCallFigures({3.0e-6, 3.5e-6, 2.0e-6}, &h);
  EXPECT_NEAR(h.callUs, 0.3, 1e-9);
}

TEST(LoopFigures, TheStepStaysBetweenATenthOfTheHopAndTheHop) {
  HostProbe h = withHop(2.0);
  setCallFigures({3.0e-6, 2.5e-6, 1.5e-6}, &h);  // the ring's loop faster: noise
  EXPECT_NEAR(h.stepUs, 0.2, 1e-9);
  setCallFigures({3.0e-6, 9.0e-6, 1.5e-6}, &h);  // a round that lost its core
  EXPECT_NEAR(h.stepUs, 2.0, 1e-9);
}

TEST(LoopFigures, AHostSummationCallIsItsLoopWhereItRan) {
  HostProbe h = withHop(2.0);
  setCallFigures({3.0e-6, 3.5e-6, 1.5e-6, 2.5e-6}, &h);
  EXPECT_NEAR(h.sumUs, 2.5, 1e-9);
  setCallFigures({3.0e-6, 3.5e-6, 1.5e-6, 0.05e-6}, &h);
  EXPECT_NEAR(h.sumUs, 0.2, 1e-9) << "at least a tenth of the hop";
  setCallFigures({3.0e-6, 3.5e-6, 1.5e-6, 0}, &h);
  EXPECT_EQ(h.sumUs, 0) << "no arena, no loop: not measured";
}

TEST(LoopFigures, ARootedCallIsAtLeastATenthOfTheHop) {
  HostProbe h = withHop(2.0);
  setCallFigures({3.0e-6, 3.5e-6, 0.05e-6}, &h);
  EXPECT_NEAR(h.rootedUs, 0.2, 1e-9);
}

}  // namespace
}  // namespace lanes::topo
