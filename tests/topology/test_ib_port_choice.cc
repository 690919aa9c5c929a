// The verbs transport's port choice (core/ib_port_choice.h) on a fixture box
// with two NICs, one under each CPU socket's PCIe switches: each GPU gets
// the NIC nearest it, LANES_IB_HCA and port state narrow the choice, RoCE
// ports need a usable GID, and every refusal says why.
#include "core/ib_port_choice.h"
#include "fixture_util.h"

namespace lanes::topo::testing {
namespace {

RdmaPort port(const std::string& device, const std::string& state = "ACTIVE",
              const std::string& linkLayer = "InfiniBand") {
  RdmaPort p;
  p.device = device;
  p.port = 1;
  p.state = state;
  p.linkLayer = linkLayer;
  return p;
}

Topology box() {
  Topology t = loadFixture("two_switches_per_socket_8gpu.json");
  for (size_t g = 0; g < t.gpus.size(); ++g) t.gpus[g].cudaIndex = static_cast<int>(g);
  return t;
}

std::string choose(const std::vector<RdmaPort>& ports, const Topology& t, int gpu,
                   const std::string& hca = "") {
  IbConfig ib;
  ib.hca = hca;
  chooseIbPort(ports, t, gpu, &ib);
  return ib.device.empty() ? "none: " + ib.unavailable : ib.device + ":" + std::to_string(ib.port);
}

TEST(IbPortChoice, EachGpuGetsTheNicNearestIt) {
  const Topology t = box();
  ASSERT_EQ(t.nics.size(), 2u);
  const std::vector<RdmaPort> ports = {port("mlx5_0"), port("mlx5_1")};
  EXPECT_EQ(choose(ports, t, 0), "mlx5_0:1");  // PIX
  EXPECT_EQ(choose(ports, t, 3), "mlx5_0:1");  // NODE against SYS
  EXPECT_EQ(choose(ports, t, 4), "mlx5_1:1");
  EXPECT_EQ(choose(ports, t, 7), "mlx5_1:1");
  // Listed the other way round, the nearest still wins.
  EXPECT_EQ(choose({port("mlx5_1"), port("mlx5_0")}, t, 0), "mlx5_0:1");
  // Without a GPU, or one the model does not hold: the first listed.
  EXPECT_EQ(choose(ports, t, -1), "mlx5_0:1");
  EXPECT_EQ(choose({port("mlx5_1"), port("mlx5_0")}, t, 42), "mlx5_1:1");
}

TEST(IbPortChoice, HcaListAndPortStateNarrowTheChoice) {
  const Topology t = box();
  EXPECT_EQ(choose({port("mlx5_0"), port("mlx5_1", "DOWN")}, t, 7), "mlx5_0:1");
  EXPECT_EQ(choose({port("mlx5_0"), port("mlx5_1")}, t, 7, "mlx5_0"), "mlx5_0:1");
  EXPECT_EQ(choose({port("mlx5_0"), port("mlx5_1")}, t, 0, "^mlx5_0"), "mlx5_1:1");
  const std::string none = choose({port("mlx5_0"), port("mlx5_1")}, t, 0, "=mlx5");
  EXPECT_NE(none.find("none: no active RDMA port that LANES_IB_HCA==mlx5 selects"),
            std::string::npos)
      << none;
  EXPECT_NE(choose({}, t, 0).find("no RDMA ports"), std::string::npos);
}

TEST(IbPortChoice, RocePortsNeedAUsableGid) {
  const Topology t = box();
  RdmaPort bare = port("mlx5_0", "ACTIVE", "Ethernet");
  RdmaPort addressed = port("mlx5_1", "ACTIVE", "Ethernet");
  addressed.gids.push_back(
      RdmaGid{0, "fe80:0000:0000:0000:0000:0000:0000:0001", "IB/RoCE v1", "eth1"});
  addressed.gids.push_back(
      RdmaGid{3, "0000:0000:0000:0000:0000:ffff:0a00:0002", "RoCE v2", "eth1"});
  IbConfig ib;
  chooseIbPort({bare, addressed}, t, 0, &ib);
  EXPECT_EQ(ib.device, "mlx5_1");  // the nearer port has no RoCE v2 GID
  EXPECT_EQ(ib.gidIndex, 3);
  IbConfig forced;
  forced.forcedGid = 0;
  chooseIbPort({bare, addressed}, t, 0, &forced);
  EXPECT_EQ(forced.gidIndex, 0);
  IbConfig infiniband;
  chooseIbPort({port("mlx5_0")}, t, 0, &infiniband);
  EXPECT_EQ(infiniband.gidIndex, -1);  // addressed by LID
  IbConfig off;
  off.disabled = true;
  chooseIbPort({port("mlx5_0")}, t, 0, &off);
  EXPECT_EQ(off.device, "");
  EXPECT_EQ(off.unavailable, "LANES_IB_DISABLE is set");
}

}  // namespace
}  // namespace lanes::topo::testing
