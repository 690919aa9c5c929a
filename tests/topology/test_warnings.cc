// Warnings of the fixture boxes, each with a fix.
#include "fixture_util.h"

namespace lanes::topo::testing {
namespace {

TEST(TopoWarnings, ConsumerX8X8WarnsWidthOnly) {
  Topology t = loadFixture("consumer_2x4090_x8x8.json");
  EXPECT_EQ(countWarnings(t, WarningKind::LinkBelowMax), 2);  // each GPU at x8 of x16
  EXPECT_EQ(countWarnings(t, WarningKind::ChipsetLanes), 0);
  EXPECT_EQ(countWarnings(t, WarningKind::SmallBar1), 0);
  for (const Warning& w : findWarnings(t)) EXPECT_FALSE(w.fix.empty());
}

TEST(TopoWarnings, SwitchBoxAcsIommuAndBar1) {
  Topology t = loadFixture("switch_4x4090.json");
  EXPECT_EQ(countWarnings(t, WarningKind::AcsRedirect), 1);
  EXPECT_EQ(countWarnings(t, WarningKind::IommuTranslating), 1);
  EXPECT_EQ(countWarnings(t, WarningKind::SmallBar1), 4);
  EXPECT_EQ(countWarnings(t, WarningKind::LinkBelowMax), 0);
  for (const Warning& w : findWarnings(t)) {
    if (w.kind == WarningKind::AcsRedirect) {
      EXPECT_NE(w.fix.find("setpci -s 0000:02:00.0"), std::string::npos);
    }
  }
}

TEST(TopoWarnings, DegradedBoxX4AndChipset) {
  Topology t = loadFixture("degraded_x4_chipset.json");
  std::vector<Warning> w = findWarnings(t);
  EXPECT_EQ(countWarnings(t, WarningKind::ChipsetLanes), 1);
  int gpuLinks = 0;
  for (const Warning& x : w) {
    if (x.kind != WarningKind::LinkBelowMax || x.subject.rfind("GPU", 0) != 0) continue;
    ++gpuLinks;
    EXPECT_NE(x.text.find("x4 of"), std::string::npos) << x.text;
  }
  EXPECT_EQ(gpuLinks, 2);
}

TEST(TopoWarnings, NicOnOtherSocket) {
  Topology t = loadFixture("dual_socket_8x4090.json");
  EXPECT_EQ(countWarnings(t, WarningKind::NicNumaMismatch), 4);  // GPUs 4-7 have no local NIC
  Topology both = loadFixture("two_switches_per_socket_8gpu.json");
  EXPECT_EQ(countWarnings(both, WarningKind::NicNumaMismatch), 0);
}

TEST(TopoWarnings, H200Clean) {
  Topology t = loadFixture("h200_single.json");
  EXPECT_TRUE(findWarnings(t).empty());
}

TEST(TopoWarnings, BrokenP2pProbe) {
  Topology t = loadFixture("h200_single.json");
  t.probes.pairs.push_back({0, 1, true, true, false, 0, "pattern mismatch at byte 4096"});
  ASSERT_EQ(countWarnings(t, WarningKind::P2pBroken), 1);
  t.probes.pairs[0].correct = true;
  EXPECT_EQ(countWarnings(t, WarningKind::P2pBroken), 0);
}

}  // namespace
}  // namespace lanes::topo::testing
