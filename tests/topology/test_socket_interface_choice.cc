// The socket transport's interface choice (core/socket_interface_choice.h) on
// a fixture box with a NIC under each CPU socket's PCIe switches: each GPU
// gets the interface nearest it; interfaces outside the PCI tree and ranks
// without a GPU leave the transport's default (the first candidate).
#include <netinet/in.h>

#include "core/socket_interface_choice.h"
#include "fixture_util.h"

namespace lanes::topo::testing {
namespace {

Topology box() {
  Topology t = loadFixture("two_switches_per_socket_8gpu.json");
  for (size_t g = 0; g < t.gpus.size(); ++g) t.gpus[g].cudaIndex = static_cast<int>(g);
  t.nics[0].netdev = "ens1f0";  // mlx5_0, under socket 0
  t.nics[1].netdev = "ens9f0";  // mlx5_1, under socket 1
  return t;
}

InterfaceAddress iface(const std::string& name, const std::string& address) {
  InterfaceAddress i;
  i.name = name;
  EXPECT_TRUE(SocketAddress::parse(address, &i.address).isOk()) << address;
  return i;
}

std::string choose(const std::vector<InterfaceAddress>& ifs, const Topology& t, int gpu,
                   int family = AF_INET) {
  const InterfaceChoice c = nearestInterface(ifs, family, t, gpu);
  return c.name.empty() ? "default" : c.name + " " + pathName(c.distance);
}

TEST(SocketInterfaceChoice, EachGpuGetsTheInterfaceNearestIt) {
  const Topology t = box();
  ASSERT_EQ(t.nics.size(), 2u);
  const std::vector<InterfaceAddress> ifs = {iface("br0", "10.0.0.1"), iface("ens1f0", "10.1.0.1"),
                                             iface("ens9f0", "10.2.0.1")};
  EXPECT_EQ(choose(ifs, t, 0), "ens1f0 PIX");
  EXPECT_EQ(choose(ifs, t, 3), "ens1f0 NODE");  // against SYS
  EXPECT_EQ(choose(ifs, t, 4), "ens9f0 PIX");
  EXPECT_EQ(choose(ifs, t, 7), "ens9f0 NODE");
  // Listed the other way round, the nearest still wins.
  EXPECT_EQ(choose({ifs[2], ifs[1]}, t, 0), "ens1f0 PIX");
  // Only the far one: it is still in the tree, so it is taken over a bridge.
  EXPECT_EQ(choose({ifs[0], ifs[2]}, t, 0), "ens9f0 SYS");
}

TEST(SocketInterfaceChoice, OutsideTheTreeOrWithoutAGpuTheDefaultStays) {
  const Topology t = box();
  const std::vector<InterfaceAddress> virtualOnly = {iface("br0", "10.0.0.1"),
                                                     iface("veth3", "10.0.1.1")};
  EXPECT_EQ(choose(virtualOnly, t, 0), "default");
  const std::vector<InterfaceAddress> ifs = {iface("ens9f0", "10.2.0.1"),
                                             iface("ens1f0", "10.1.0.1")};
  EXPECT_EQ(choose(ifs, t, -1), "default");  // no GPU
  EXPECT_EQ(choose(ifs, t, 42), "default");  // a GPU the model does not hold
  // Only interfaces with an address of the communicator's family count.
  EXPECT_EQ(choose({iface("ens1f0", "fd00::1"), ifs[0]}, t, 0), "ens9f0 SYS");
  EXPECT_EQ(choose({iface("ens1f0", "fd00::1"), ifs[0]}, t, 0, AF_INET6), "ens1f0 PIX");
}

}  // namespace
}  // namespace lanes::topo::testing
