// Live discovery on this machine with sources switched off, the sysfs
// readers, and the lanes-topo binary.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "fixture_util.h"
#include "topology/discovery.h"
#include "topology/sysfs_pci.h"

namespace lanes::topo::testing {
namespace {

TEST(TopoDiscovery, EverySourceOffStillGivesAMachine) {
  DiscoverOptions o;
  o.hwloc = o.sysfs = o.nvml = o.cuda = false;
  Topology t;
  ASSERT_TRUE(discover(o, &t).isOk());
  ASSERT_FALSE(t.nodes.empty());
  EXPECT_EQ(t.nodes[0].kind, NodeKind::Machine);
  EXPECT_EQ(t.missing.size(), 4u);  // each source says it is missing
}

TEST(TopoDiscovery, SysfsAloneFindsCpusAndNuma) {
  DiscoverOptions o;
  o.hwloc = false;
  o.nvml = false;
  Topology t;
  ASSERT_TRUE(discover(o, &t).isOk());
  EXPECT_GT(t.pus, 0);
  EXPECT_GE(t.numaCount(), 1);
  EXPECT_GE(t.packageCount(), 1);
}

TEST(TopoDiscovery, HwlocAndSysfsAgreeOnCpus) {
  if (!hwlocAvailable()) GTEST_SKIP() << "built without hwloc";
  Topology a, b;
  DiscoverOptions o;
  ASSERT_TRUE(discover(o, &a).isOk());
  o.hwloc = false;
  ASSERT_TRUE(discover(o, &b).isOk());
  EXPECT_EQ(a.pus, b.pus);
  EXPECT_EQ(a.numaCount(), b.numaCount());
  EXPECT_EQ(a.gpus.size(), b.gpus.size());
}

TEST(TopoDiscovery, MissingSysfsIsNoted) {
  DiscoverOptions o;
  o.hwloc = false;
  o.nvml = o.cuda = false;
  o.sysfsRoot = "/nonexistent-sysfs";
  Topology t;
  ASSERT_TRUE(discover(o, &t).isOk());
  bool noted = false;
  for (const auto& m : t.missing) noted = noted || m.find("sysfs") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(TopoSysfs, AcsControlFromConfigSpace) {
  std::vector<uint8_t> cfg(4096, 0);
  auto put32 = [&](size_t off, uint32_t v) {
    for (int i = 0; i < 4; ++i) cfg[off + i] = static_cast<uint8_t>(v >> (8 * i));
  };
  put32(0x100, 0x0001 | (1u << 16) | (0x148u << 20));  // AER, next at 0x148
  put32(0x148, 0x000d | (1u << 16));                   // ACS, last
  bool known = false;
  cfg[0x14e] = 0x1d;  // SV | RR | CR | UF
  EXPECT_TRUE(acsRedirectFromConfig(cfg, &known));
  EXPECT_TRUE(known);
  cfg[0x14e] = 0x01;  // source validation only
  EXPECT_FALSE(acsRedirectFromConfig(cfg, &known));
  EXPECT_TRUE(known);
  EXPECT_FALSE(acsRedirectFromConfig(std::vector<uint8_t>(64, 0), &known));  // non-root read
  EXPECT_FALSE(known);
}

TEST(TopoSysfs, SpeedsModesAndChipset) {
  EXPECT_EQ(pcieGenFromSpeed("32.0 GT/s PCIe"), 5);
  EXPECT_EQ(pcieGenFromSpeed("2.5 GT/s PCIe"), 1);
  EXPECT_EQ(pcieGenFromSpeed("Unknown"), 0);
  EXPECT_NEAR(pcieGbps(4, 16), 31.5, 0.1);
  EXPECT_EQ(iommuModeFromGroupType("DMA-FQ"), IommuMode::Translating);
  EXPECT_EQ(iommuModeFromGroupType("identity"), IommuMode::Passthrough);
  EXPECT_TRUE(isChipsetBridge(0x8086, 0x7a38, "0000:00:1c.0"));
  EXPECT_FALSE(isChipsetBridge(0x8086, 0xa70d, "0000:00:01.0"));
  EXPECT_TRUE(isChipsetBridge(0x1022, 0x43f4, "0000:02:00.0"));
  EXPECT_EQ(normalizeBusId("00000000:19:00.0"), "0000:19:00.0");
  EXPECT_EQ(normalizeBusId("19:00.0"), "0000:19:00.0");
}

TEST(LanesTopo, NoGpuMachineShowsCpusAndSaysNoGpu) {
  int rc = 0;
  std::string out = run("", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("NUMA node"), std::string::npos) << out;
  EXPECT_NE(out.find("cores"), std::string::npos) << out;
  if (out.find("GPU0") == std::string::npos) {
    EXPECT_NE(out.find("no GPU visible"), std::string::npos) << out;
  }
}

TEST(LanesTopo, FixturesPrintMatrixAndWarnings) {
  int rc = 0;
  std::string out = run("--load " + fixture("switch_4x4090.json"), &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("GPU0\t X \tPIX\tPIX\tPIX"), std::string::npos) << out;
  EXPECT_NE(out.find("[acs-redirect]"), std::string::npos) << out;
  EXPECT_NE(out.find("[iommu-translating]"), std::string::npos) << out;
  EXPECT_NE(out.find("[small-bar1]"), std::string::npos) << out;
  out = run("--load " + fixture("h200_single.json"), &rc);
  EXPECT_NE(out.find("Gen5 x16"), std::string::npos) << out;
  EXPECT_NE(out.find("NUMA node 0"), std::string::npos) << out;
  EXPECT_NE(out.find("Warnings: none"), std::string::npos) << out;
  out = run("--import-nvidia-smi " + fixture("nvidia_smi_dual_8x4090.txt"), &rc);
  EXPECT_NE(out.find("GPU4\tSYS\tSYS\tSYS\tSYS\t X \tNODE"), std::string::npos) << out;
  EXPECT_NE(out.find("[nic-numa]"), std::string::npos) << out;
  if (hwlocAvailable()) {
    out = run("--import-hwloc " + fixture("degraded_x4_chipset.xml"), &rc);
    EXPECT_NE(out.find("[chipset-lanes]"), std::string::npos) << out;
    EXPECT_NE(out.find("Gen4 x4 (max Gen4 x16)"), std::string::npos) << out;
  }
  out = run("--json --load " + fixture("consumer_2x4090_x8x8.json"), &rc);
  EXPECT_NE(out.find("\"lanes-topology-1\""), std::string::npos) << out;
  out = run("--load /nonexistent.json", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("cannot open"), std::string::npos) << out;
}

}  // namespace
}  // namespace lanes::topo::testing
