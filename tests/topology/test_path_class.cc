// Classification and NUMA mapping of the fixture boxes.
#include "fixture_util.h"

namespace lanes::topo::testing {
namespace {

TEST(TopoPathClass, ConsumerX8X8IsPhb) {
  Topology t = loadFixture("consumer_2x4090_x8x8.json");
  EXPECT_EQ(matrix(t), (std::vector<std::string>{"X PHB", "PHB X"}));
  EXPECT_EQ(t.gpus[0].numa, 0);
}

TEST(TopoPathClass, OneSwitchIsPix) {
  Topology t = loadFixture("switch_4x4090.json");
  ASSERT_EQ(t.gpus.size(), 4u);
  for (size_t a = 0; a < 4; ++a)
    for (size_t b = 0; b < 4; ++b)
      EXPECT_EQ(gpuPath(t, int(a), int(b)), a == b ? PathClass::Self : PathClass::Pix);
}

TEST(TopoPathClass, DualSocketSplitsNodeAndSys) {
  Topology t = loadFixture("dual_socket_8x4090.json");
  ASSERT_EQ(t.gpus.size(), 8u);
  EXPECT_EQ(matrix(t)[0], "X NODE NODE NODE SYS SYS SYS SYS NODE");
  EXPECT_EQ(matrix(t)[5], "SYS SYS SYS SYS NODE X NODE NODE SYS");
  for (int g = 0; g < 8; ++g) EXPECT_EQ(t.gpus[g].numa, g / 4) << "GPU" << g;
  EXPECT_EQ(t.gpus[6].cpus, "32-63");
}

TEST(TopoPathClass, TwoSwitchesPerSocket) {
  Topology t = loadFixture("two_switches_per_socket_8gpu.json");
  ASSERT_EQ(t.gpus.size(), 8u);
  ASSERT_EQ(t.nics.size(), 2u);
  EXPECT_EQ(matrix(t)[0], "X PIX NODE NODE SYS SYS SYS SYS PIX SYS");
  EXPECT_EQ(matrix(t)[3], "NODE NODE PIX X SYS SYS SYS SYS NODE SYS");
  EXPECT_EQ(matrix(t)[7], "SYS SYS SYS SYS NODE NODE PIX X SYS NODE");
}

TEST(TopoPathClass, NestedSwitchesArePxb) {
  // root port -> switch A -> (GPU0, GPU1, switch B -> (GPU2, GPU3))
  Topology t;
  t.addNode(NodeKind::Machine, -1);
  int hb = t.addNode(NodeKind::HostBridge, 0);
  int rp = t.addNode(NodeKind::Bridge, hb);
  int uspA = t.addNode(NodeKind::Bridge, rp);
  auto gpuUnder = [&](int parent) {
    Gpu g;
    g.node = t.addNode(NodeKind::Gpu, t.addNode(NodeKind::Bridge, parent));
    t.gpus.push_back(g);
  };
  gpuUnder(uspA);
  gpuUnder(uspA);
  int uspB = t.addNode(NodeKind::Bridge, t.addNode(NodeKind::Bridge, uspA));
  gpuUnder(uspB);
  gpuUnder(uspB);
  t.resizeMatrices();
  EXPECT_EQ(matrix(t), (std::vector<std::string>{"X PIX PXB PXB", "PIX X PXB PXB", "PXB PXB X PIX",
                                                 "PXB PXB PIX X"}));
}

TEST(TopoPathClass, NvLinkWinsOverPcie) {
  Topology t = loadFixture("consumer_2x4090_x8x8.json");
  t.nvlinks[0][1] = t.nvlinks[1][0] = 4;
  EXPECT_EQ(matrix(t)[0], "X NV4");
}

TEST(TopoPathClass, H200SingleGpu) {
  Topology t = loadFixture("h200_single.json");
  ASSERT_EQ(t.gpus.size(), 1u);
  const PciLink& l = t.nodes[t.gpus[0].node].link;
  EXPECT_EQ(l.curGen, 5);
  EXPECT_EQ(l.curWidth, 16);
  EXPECT_NEAR(l.gbps, 63.0, 0.1);
  EXPECT_EQ(t.gpus[0].busId, "0000:19:00.0");
  EXPECT_EQ(t.gpus[0].numa, 0);
  EXPECT_EQ(t.cores, 16);
  EXPECT_EQ(t.numaCount(), 1);
}

TEST(TopoPathClass, NamesParseBack) {
  for (auto c : {PathClass::Self, PathClass::Pix, PathClass::Pxb, PathClass::Phb, PathClass::Node,
                 PathClass::Sys}) {
    PathClass back;
    int nv = 0;
    ASSERT_TRUE(parsePathName(pathName(c), &back, &nv));
    EXPECT_EQ(back, c);
  }
  PathClass c;
  int nv = 0;
  ASSERT_TRUE(parsePathName("NV12", &c, &nv));
  EXPECT_EQ(c, PathClass::NvLink);
  EXPECT_EQ(nv, 12);
  EXPECT_FALSE(parsePathName("FOO", &c, &nv));
}

}  // namespace
}  // namespace lanes::topo::testing
