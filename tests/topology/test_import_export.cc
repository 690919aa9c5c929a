// JSON round trip, hwloc XML and nvidia-smi imports against the fixtures.
#include <unistd.h>

#include <cstdio>

#include "fixture_util.h"
#include "topology/discovery.h"
#include "topology/import_nvidia_smi.h"
#include "topology/report.h"

namespace lanes::topo::testing {
namespace {

const char* kBoxes[] = {"consumer_2x4090_x8x8",         "switch_4x4090",       "dual_socket_8x4090",
                        "two_switches_per_socket_8gpu", "degraded_x4_chipset", "h200_single"};

TEST(TopoImport, JsonRoundTripKeepsEverything) {
  for (const char* box : kBoxes) {
    Topology t = loadFixture(std::string(box) + ".json");
    GpuProbe probe;
    probe.gpu = 0;
    probe.h2d = 24.5;
    probe.d2h = 26.0;
    probe.bidir = 40.25;
    t.probes.gpus.push_back(probe);
    std::string text = toJson(t).dump();
    Json j;
    std::string error;
    ASSERT_TRUE(Json::parse(text, &j, &error)) << error;
    Topology back;
    ASSERT_TRUE(fromJson(j, &back).isOk());
    EXPECT_EQ(toJson(back).dump(), text) << box;
    EXPECT_EQ(matrix(back), matrix(t)) << box;
    EXPECT_EQ(back.probes.gpus[0].bidir, 40.25);
  }
}

TEST(TopoImport, JsonErrorsSayWhere) {
  Topology t;
  Json j;
  std::string error;
  EXPECT_FALSE(Json::parse("{\"a\": [1, 2", &j, &error));
  EXPECT_NE(error.find("byte"), std::string::npos);
  ASSERT_TRUE(Json::parse("{\"format\": \"other\"}", &j, &error));
  Status s = fromJson(j, &t);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("lanes-topology-1"), std::string::npos);
}

TEST(TopoImport, HwlocXmlMatchesJson) {
  if (!hwlocAvailable()) GTEST_SKIP() << "built without hwloc";
  for (const char* box : kBoxes) {
    Topology json = loadFixture(std::string(box) + ".json");
    Topology xml;
    Status s = importHwlocXml(fixture(std::string(box) + ".xml"), &xml);
    ASSERT_TRUE(s.isOk()) << box << ": " << s.message();
    EXPECT_EQ(matrix(xml), matrix(json)) << box;
    ASSERT_EQ(xml.gpus.size(), json.gpus.size());
    for (size_t g = 0; g < xml.gpus.size(); ++g) {
      EXPECT_EQ(xml.gpus[g].busId, json.gpus[g].busId) << box;
      EXPECT_EQ(xml.gpus[g].numa, json.gpus[g].numa) << box << " GPU" << g;
      EXPECT_EQ(xml.gpus[g].cpus, json.gpus[g].cpus) << box << " GPU" << g;
      EXPECT_EQ(xml.nodes[xml.gpus[g].node].link.curWidth,
                json.nodes[json.gpus[g].node].link.curWidth);
    }
    EXPECT_EQ(xml.cores, json.cores) << box;
  }
  Topology t;
  EXPECT_FALSE(importHwlocXml(fixture("no_such_file.xml"), &t).isOk());
}

TEST(TopoImport, NvidiaSmiDualSocket) {
  Topology t;
  Status s = importNvidiaSmiFile(fixture("nvidia_smi_dual_8x4090.txt"), &t);
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_EQ(t.gpus.size(), 8u);
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0].name, "mlx5_0");
  EXPECT_EQ(matrix(t)[0], "X NODE NODE NODE SYS SYS SYS SYS NODE");
  EXPECT_EQ(matrix(t)[7], "SYS SYS SYS SYS NODE NODE NODE X SYS");
  EXPECT_EQ(t.gpus[5].numa, 1);
  EXPECT_EQ(t.gpus[5].cpus, "32-63,96-127");
  EXPECT_EQ(countWarnings(t, WarningKind::NicNumaMismatch), 4);
}

TEST(TopoImport, NvidiaSmiSwitchesAndNvlink) {
  Topology t;
  Status s = importNvidiaSmiFile(fixture("nvidia_smi_4x_switch_nvlink.txt"), &t);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(matrix(t),
            (std::vector<std::string>{"X NV4 PXB PXB PIX PXB", "NV4 X PXB PXB PIX PXB",
                                      "PXB PXB X PIX PXB PIX", "PXB PXB PIX X PXB PIX"}));
}

TEST(TopoImport, NvidiaSmiReadsOwnMatrix) {
  for (const char* box : kBoxes) {
    Topology t = loadFixture(std::string(box) + ".json");
    Topology back;
    Status s = parseNvidiaSmiTopo(formatMatrix(t), &back);
    ASSERT_TRUE(s.isOk()) << box << ": " << s.message();
    EXPECT_EQ(matrix(back), matrix(t)) << box;
  }
}

TEST(TopoImport, NvidiaSmiRejectsOtherText) {
  Topology t;
  Status s = parseNvidiaSmiTopo("hello\nworld\n", &t);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("nvidia-smi topo -m"), std::string::npos);
}

}  // namespace
}  // namespace lanes::topo::testing
