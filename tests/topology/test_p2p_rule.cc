// The planner's P2P rule on the fixtures (planner/p2p_rule.h): GPUs under
// one socket may try P2P; a pair across the CPU link (SYS) only where the
// probe measured it faster than staging through host memory; a pair the
// probe found broken never.
#include <gtest/gtest.h>

#include "fixture_util.h"
#include "planner/p2p_rule.h"

namespace lanes::topo::testing {
namespace {

std::vector<std::string> busesOf(const Topology& t, std::initializer_list<int> gpus) {
  std::vector<std::string> out;
  for (int g : gpus) out.push_back(t.gpus[static_cast<size_t>(g)].busId);
  return out;
}

void probeGpus(Topology* t, double h2d, double d2h) {
  for (size_t g = 0; g < t->gpus.size(); ++g) {
    GpuProbe p;
    p.gpu = static_cast<int>(g);
    p.h2d = h2d;
    p.d2h = d2h;
    t->probes.gpus.push_back(p);
  }
}

PairProbe pair(int a, int b, double gbps, bool correct = true) {
  PairProbe p;
  p.a = a;
  p.b = b;
  p.advertised = p.tested = true;
  p.correct = correct;
  p.gbps = gbps;
  p.error = correct ? "" : "pattern mismatch at byte 4096";
  return p;
}

TEST(P2pRule, OneSocketMayTryAndTheCpuLinkIsRefusedWithTheReason) {
  const Topology t = loadFixture("dual_socket_8x4090.json");
  EXPECT_EQ(p2pRefusalByTopology(t, busesOf(t, {0, 1, 2, 3})), "");
  EXPECT_EQ(p2pRefusalByTopology(t, busesOf(t, {4, 4, 5})), "");  // two ranks on GPU 4
  const std::string why = p2pRefusalByTopology(t, busesOf(t, {0, 1, 4}));
  EXPECT_EQ(why,
            "GPU 0 (0000:11:00.0) and GPU 4 (0000:91:00.0) cross the CPU link (SYS), where P2P "
            "is usually slower than staging through host memory (lanes-topo --probe measures "
            "both); LANES_P2P_DISABLE=0 forces P2P");
  EXPECT_EQ(p2pRefusalByTopology(t, {}), "");
  EXPECT_EQ(p2pRefusalByTopology(t, {"0000:ee:00.0"}), "");  // not in the model: nothing to say
}

TEST(P2pRule, ACrossSocketPairMeasuredFasterIsAllowed) {
  Topology t = loadFixture("dual_socket_8x4090.json");
  probeGpus(&t, 24, 25);
  t.probes.pairs.push_back(pair(0, 4, 12));
  EXPECT_NE(p2pRefusalByTopology(t, busesOf(t, {0, 4}))
                .find("and the probe measured it so (12 against 24 GB/s)"),
            std::string::npos);
  t.probes.pairs.back().gbps = 26;
  EXPECT_EQ(p2pRefusalByTopology(t, busesOf(t, {0, 4})), "");
  EXPECT_NE(p2pRefusalByTopology(t, busesOf(t, {0, 4, 5})), "");  // 0-5 was not measured
}

TEST(P2pRule, APairTheProbeFoundBrokenIsRefusedOnAnyPath) {
  Topology t = loadFixture("switch_4x4090.json");
  EXPECT_EQ(p2pRefusalByTopology(t, busesOf(t, {0, 1, 2, 3})), "");
  t.probes.pairs.push_back(pair(2, 1, 20, false));
  EXPECT_EQ(p2pRefusalByTopology(t, busesOf(t, {0, 1, 2, 3})),
            "the probe found P2P between GPU 1 (0000:04:00.0) and GPU 2 (0000:05:00.0) broken "
            "(pattern mismatch at byte 4096)");
  EXPECT_EQ(p2pRefusalByTopology(t, busesOf(t, {0, 3})), "");
}

// The probe tests each direction of a pair: either one broken refuses the
// pair, and the slower one is what is compared with staging.
TEST(P2pRule, BothDirectionsOfAPairCount) {
  Topology t = loadFixture("switch_4x4090.json");
  t.probes.pairs.push_back(pair(1, 2, 20));
  t.probes.pairs.push_back(pair(2, 1, 20, false));
  EXPECT_NE(p2pRefusalByTopology(t, busesOf(t, {1, 2})).find("broken"), std::string::npos);

  Topology d = loadFixture("dual_socket_8x4090.json");
  probeGpus(&d, 24, 25);
  d.probes.pairs.push_back(pair(0, 4, 30));
  d.probes.pairs.push_back(pair(4, 0, 10));  // the way back is slower than staging
  EXPECT_NE(p2pRefusalByTopology(d, busesOf(d, {0, 4})).find("(10 against 24 GB/s)"),
            std::string::npos);
}

TEST(P2pRule, TwoSwitchesPerSocketCrossOnlyBetweenSockets) {
  const Topology t = loadFixture("two_switches_per_socket_8gpu.json");
  EXPECT_EQ(p2pRefusalByTopology(t, busesOf(t, {0, 1, 2, 3})), "");
  EXPECT_NE(p2pRefusalByTopology(t, busesOf(t, {2, 3, 4})), "");
}

}  // namespace
}  // namespace lanes::topo::testing
