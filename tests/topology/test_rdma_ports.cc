// RDMA ports read from a sysfs tree written here (the layout of
// /sys/class/infiniband), LANES_IB_HCA's syntax and the GID choice. Real
// soft-RoCE ports are checked in the guest (tests/rdma/lanes_topo_rdma.sh).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "topology/rdma_ports.h"

namespace lanes::topo {
namespace {

namespace fs = std::filesystem;

class FakeSysfs {
 public:
  FakeSysfs() {
    root_ = fs::temp_directory_path() /
            ("lanes-rdma-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
             "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~FakeSysfs() { fs::remove_all(root_); }
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;
  std::string root() const { return root_.string(); }
  void put(const std::string& rel, const std::string& text) const {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  // A port with its state, link layer and rate; gids added separately.
  void port(const std::string& dev, int n, const std::string& state, const std::string& layer,
            const std::string& rate = "100 Gb/sec (4X EDR)") const {
    const std::string p = dev + "/ports/" + std::to_string(n) + "/";
    put(p + "state", state);
    put(p + "link_layer", layer);
    put(p + "rate", rate);
  }
  void gid(const std::string& dev, int n, int index, const std::string& address,
           const std::string& type, const std::string& netdev) const {
    const std::string p = dev + "/ports/" + std::to_string(n) + "/";
    put(p + "gids/" + std::to_string(index), address);
    if (!type.empty()) put(p + "gid_attrs/types/" + std::to_string(index), type);
    if (!netdev.empty()) put(p + "gid_attrs/ndevs/" + std::to_string(index), netdev);
  }

 private:
  fs::path root_;
};

constexpr const char* kZero = "0000:0000:0000:0000:0000:0000:0000:0000";
constexpr const char* kLinkLocal = "fe80:0000:0000:0000:9452:b4ff:fedf:b6fb";
constexpr const char* kIpv4 = "0000:0000:0000:0000:0000:ffff:0a4d:0001";  // 10.77.0.1

TEST(RdmaPorts, ReadsPortsAndTheSetGidsInOrder) {
  FakeSysfs sys;
  sys.port("rxe0", 1, "4: ACTIVE", "Ethernet", "100 Gb/sec (4X EDR)");
  sys.gid("rxe0", 1, 0, kLinkLocal, "IB/RoCE v1", "veth0");
  sys.gid("rxe0", 1, 1, kLinkLocal, "RoCE v2", "veth0");
  sys.gid("rxe0", 1, 2, kIpv4, "IB/RoCE v1", "veth0");
  sys.gid("rxe0", 1, 3, kIpv4, "RoCE v2", "veth0");
  sys.gid("rxe0", 1, 10, kZero, "", "");  // unset entries are skipped
  sys.port("mlx5_0", 1, "1: DOWN", "InfiniBand", "10 Gb/sec (4X SDR)");
  sys.gid("mlx5_0", 1, 0, kLinkLocal, "", "");
  sys.port("mlx5_0", 2, "4: ACTIVE", "InfiniBand");

  const std::vector<RdmaPort> ports = readRdmaPorts(sys.root());
  ASSERT_EQ(ports.size(), 3u);
  EXPECT_EQ(ports[0].device, "mlx5_0");
  EXPECT_EQ(ports[0].port, 1);
  EXPECT_EQ(ports[0].state, "DOWN");
  EXPECT_FALSE(ports[0].active());
  EXPECT_FALSE(ports[0].roce());
  EXPECT_EQ(ports[1].port, 2);
  EXPECT_TRUE(ports[1].active());
  const RdmaPort& rxe = ports[2];
  EXPECT_EQ(rxe.device, "rxe0");
  EXPECT_TRUE(rxe.roce());
  EXPECT_EQ(rxe.rate, "100 Gb/sec (4X EDR)");
  ASSERT_EQ(rxe.gids.size(), 4u);
  EXPECT_EQ(rxe.gids[3].index, 3);
  EXPECT_EQ(rxe.gids[3].type, "RoCE v2");
  EXPECT_EQ(rxe.gids[3].netdev, "veth0");
  EXPECT_TRUE(rxe.gids[3].ipv4());
  EXPECT_EQ(rxe.gids[3].text(), "::ffff:10.77.0.1");
  EXPECT_FALSE(rxe.gids[1].ipv4());
  EXPECT_EQ(rxe.gids[1].text(), kLinkLocal);
}

TEST(RdmaPorts, NoDeviceDirectoryIsNoPort) {
  EXPECT_TRUE(readRdmaPorts("/nonexistent/lanes/infiniband").empty());
  const std::string text = formatRdmaPorts({}, "", -1, "loaded (libibverbs.so.1)");
  EXPECT_NE(text.find("none (no device in /sys/class/infiniband)"), std::string::npos) << text;
  EXPECT_NE(text.find("  libibverbs: loaded (libibverbs.so.1)"), std::string::npos) << text;
}

TEST(RdmaPorts, HcaSpecFollowsNcclSyntax) {
  EXPECT_TRUE(hcaSelects("", "mlx5_0", 1));
  EXPECT_TRUE(hcaSelects("mlx5", "mlx5_1", 2));  // prefix, every port
  EXPECT_FALSE(hcaSelects("mlx5", "rxe0", 1));
  EXPECT_TRUE(hcaSelects("mlx5_0:1,mlx5_1", "mlx5_0", 1));
  EXPECT_FALSE(hcaSelects("mlx5_0:1,mlx5_1", "mlx5_0", 2));  // only port 1 of mlx5_0
  EXPECT_TRUE(hcaSelects("mlx5_0:1,mlx5_1", "mlx5_1", 2));
  EXPECT_TRUE(hcaSelects("mlx5_1", "mlx5_10", 1));    // a prefix ...
  EXPECT_FALSE(hcaSelects("=mlx5_1", "mlx5_10", 1));  // ... unless exact
  EXPECT_TRUE(hcaSelects("=mlx5_1", "mlx5_1", 1));
  EXPECT_FALSE(hcaSelects("^mlx5_0", "mlx5_0", 1));  // excluded
  EXPECT_TRUE(hcaSelects("^mlx5_0", "mlx5_1", 1));
  EXPECT_TRUE(hcaSelects("^mlx5_0:2", "mlx5_0", 1));  // only its port 2 excluded
  EXPECT_FALSE(hcaSelects("^=rxe0", "rxe0", 1));
  EXPECT_TRUE(hcaSelects("^=rxe0", "rxe01", 1));
  // NCCL's edge cases: a list without names matches every port ...
  EXPECT_TRUE(hcaSelects("=", "mlx5_0", 1));
  EXPECT_TRUE(hcaSelects(",", "mlx5_0", 1));
  EXPECT_FALSE(hcaSelects("^", "mlx5_0", 1));         // ... so "^" alone leaves out all
  EXPECT_TRUE(hcaSelects(":1,mlx5_1", "mlx5_1", 2));  // a nameless item is skipped
  EXPECT_FALSE(hcaSelects(":1,mlx5_1", "rxe0", 1));
  EXPECT_FALSE(hcaSelects("mlx5_0:0", "mlx5_0", 1));  // port 0, or none given: no port
  EXPECT_FALSE(hcaSelects("mlx5_0:", "mlx5_0", 1));
  EXPECT_FALSE(hcaSelects("mlx5_0:x", "mlx5_0", 1));
  EXPECT_TRUE(hcaSelects("mlx5_0:1:2", "mlx5_0", 1));  // the port after the first colon
}

TEST(RdmaPorts, RoceTakesTheIpv4RoceV2GidUnlessForced) {
  RdmaPort roce;
  roce.linkLayer = "Ethernet";
  roce.gids = {{0, kLinkLocal, "IB/RoCE v1", "eth0"},
               {1, kLinkLocal, "RoCE v2", "eth0"},
               {2, kIpv4, "IB/RoCE v1", "eth0"},
               {3, kIpv4, "RoCE v2", "eth0"}};
  EXPECT_EQ(chooseGid(roce, -1), 3);
  EXPECT_EQ(chooseGid(roce, 2), 2);   // LANES_IB_GID_INDEX
  EXPECT_EQ(chooseGid(roce, 7), -1);  // ... where the entry is set
  roce.gids.pop_back();
  EXPECT_EQ(chooseGid(roce, -1), 1);  // a RoCE v2 GID without IPv4
  roce.gids = {{0, kLinkLocal, "IB/RoCE v1", "eth0"}};
  EXPECT_EQ(chooseGid(roce, -1), -1);  // RoCE v1 only: none usable by default
  RdmaPort ib;
  ib.linkLayer = "InfiniBand";
  EXPECT_EQ(chooseGid(ib, -1), 0);
}

TEST(RdmaPorts, ReportSaysWhichPortIsUsedAndWhyNot) {
  RdmaPort rxe{"rxe0",
               1,
               "ACTIVE",
               "Ethernet",
               "100 Gb/sec (4X EDR)",
               {{1, kLinkLocal, "RoCE v2", "veth0"}, {3, kIpv4, "RoCE v2", "veth0"}}};
  RdmaPort down{"mlx5_0", 1, "DOWN", "InfiniBand", "", {}};
  RdmaPort v1{"mlx5_1", 1, "ACTIVE", "Ethernet", "", {{0, kLinkLocal, "IB/RoCE v1", "eth1"}}};
  const std::string text = formatRdmaPorts({rxe, down, v1}, "", -1, "not found");
  EXPECT_NE(text.find("rxe0:1  ACTIVE, RoCE (Ethernet), 100 Gb/sec (4X EDR)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("GID 3: ::ffff:10.77.0.1, RoCE v2, veth0  <- used"), std::string::npos)
      << text;
  EXPECT_NE(text.find("usable, GID index 3"), std::string::npos) << text;
  EXPECT_NE(text.find("not used: the port is not ACTIVE"), std::string::npos) << text;
  EXPECT_NE(text.find("not used: no RoCE v2 GID"), std::string::npos) << text;
  const std::string excluded = formatRdmaPorts({rxe}, "^rxe", -1, "x");
  EXPECT_NE(excluded.find("RDMA ports (LANES_IB_HCA=^rxe)"), std::string::npos) << excluded;
  EXPECT_NE(excluded.find("not used: LANES_IB_HCA leaves it out"), std::string::npos) << excluded;
  const std::string forced = formatRdmaPorts({rxe}, "", 1, "x");
  EXPECT_NE(forced.find("usable, GID index 1 (LANES_IB_GID_INDEX)"), std::string::npos) << forced;
  const std::string unset = formatRdmaPorts({rxe}, "", 5, "x");
  EXPECT_NE(unset.find("not used: GID index 5 (LANES_IB_GID_INDEX) is not set on this port"),
            std::string::npos)
      << unset;
}

}  // namespace
}  // namespace lanes::topo
