// Probes on a real GPU (label gpu): H2D/D2H figures and copy curves are
// plausible, P2P pairs (with 2+ GPUs) carry the pattern intact, the host probe
// measured before is kept, and the cache round-trips.
#include <gtest/gtest.h>

#include <cstdlib>

#include "topology/discovery.h"
#include "topology/probe.h"
#include "topology/report.h"

namespace lanes::topo {
namespace {

TEST(TopoProbeGpu, BandwidthAndP2p) {
  Topology t = systemTopology();
  int visible = 0;
  for (const Gpu& g : t.gpus) visible += g.cudaIndex >= 0 ? 1 : 0;
  if (visible == 0) GTEST_SKIP() << "no GPU visible to CUDA";
  ProbeOptions o;
  o.bytes = size_t{64} << 20;
  o.repetitions = 3;
  t.probes.host.hopLatencyUs = 1.5;  // as lanes-topo measures it before
  Status s = runProbes(o, &t);
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_EQ(t.probes.gpus.size(), static_cast<size_t>(visible));
  EXPECT_EQ(t.probes.host.hopLatencyUs, 1.5);
  for (const GpuProbe& g : t.probes.gpus) {
    EXPECT_GT(g.h2d, 1.0);
    EXPECT_GT(g.d2h, 1.0);
    EXPECT_GT(g.bidir, 1.0);
    EXPECT_LT(g.h2d, 200.0);  // above any PCIe link: the timing is wrong
    ASSERT_TRUE(g.curvesMeasured());
    // Small copies pay a fixed cost that large ones spread.
    EXPECT_LT(g.h2dCurve.front(), g.h2dCurve.back());
    EXPECT_LT(g.d2hCurve.front(), g.d2hCurve.back());
    EXPECT_LT(g.h2dCurve.back(), 200.0);
    // Within the GPU, device memory: faster than its link for large copies.
    ASSERT_EQ(g.d2dCurve.size(), g.h2dCurve.size());
    EXPECT_LT(g.d2dCurve.front(), g.d2dCurve.back());
    EXPECT_GT(g.d2dCurve.back(), g.h2dCurve.back());
  }
  for (const PairProbe& p : t.probes.pairs) {
    if (p.advertised) {
      EXPECT_TRUE(p.correct) << "GPU" << p.a << "->GPU" << p.b << ": " << p.error;
    }
  }
  std::string path = ::testing::TempDir() + "/lanes_topo_cache.json";
  ASSERT_TRUE(saveCachedProbes(path, t).isOk());
  Topology again = t;
  again.probes = Probes{};
  ASSERT_TRUE(loadCachedProbes(path, &again));
  // The cache keeps GB/s to the precision it prints (4 decimals).
  EXPECT_NEAR(again.probes.gpus[0].h2d, t.probes.gpus[0].h2d, 1e-3);
  std::printf("%s", formatReport(t).c_str());
}

// The first-use probe's GPU part: one GPU alone, no pairs, the others left alone.
TEST(TopoProbeGpu, OneDeviceAlone) {
  Topology t = systemTopology();
  int device = -1;
  for (const Gpu& g : t.gpus)
    if (g.cudaIndex >= 0 && (device < 0 || g.cudaIndex > device)) device = g.cudaIndex;
  if (device < 0) GTEST_SKIP() << "no GPU visible to CUDA";
  ProbeOptions o;
  o.bytes = size_t{64} << 20;
  o.repetitions = 1;
  o.onlyCudaDevice = device;  // the last one: not what an unrestricted probe starts with
  Status s = runProbes(o, &t);
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_EQ(t.probes.gpus.size(), 1u);
  EXPECT_EQ(t.gpus[static_cast<size_t>(t.probes.gpus[0].gpu)].cudaIndex, device);
  EXPECT_TRUE(t.probes.gpus[0].curvesMeasured());
  EXPECT_TRUE(t.probes.pairs.empty());
  EXPECT_EQ(t.probes.allH2d, 0);  // not measured for one GPU of several
  EXPECT_EQ(formatReport(t).find("all GPUs at once"), std::string::npos);

  o.onlyCudaDevice = device + 1000;
  s = runProbes(o, &t);
  EXPECT_EQ(s.code(), lanesInvalidUsage);
  EXPECT_NE(s.message().find("is not in the topology"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace lanes::topo
