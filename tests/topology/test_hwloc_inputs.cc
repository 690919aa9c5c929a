// hwloc XML as other machines export it: under a cgroup that disallows NUMA
// nodes, with hwloc's NVLinkBandwidth matrix, from a newer hwloc, or not
// hwloc's at all; and what a build without hwloc says.
#include <string>

#include "fixture_util.h"
#include "topology/discovery.h"
#include "topology/hwloc_xml_check.h"
#include "topology/report.h"

namespace lanes::topo::testing {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(TopoHwlocInputs, DisallowedNumaNodesKeepTheirGpus) {
  if (!hwlocAvailable()) GTEST_SKIP() << "built without hwloc";
  Topology t;
  Status s = importHwlocXml(fixture("hwloc_disallowed_numa.xml"), &t);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(t.packageCount(), 2);
  EXPECT_EQ(t.numaCount(), 2);
  ASSERT_EQ(t.gpus.size(), 2u);
  EXPECT_EQ(t.gpus[0].numa, 0);
  EXPECT_EQ(t.gpus[1].numa, 1);
  EXPECT_EQ(t.gpus[1].busId, "0000:b1:00.0");
  EXPECT_EQ(t.gpus[1].cpus, "2-3");
  EXPECT_EQ(gpuPath(t, 0, 1), PathClass::Sys);
}

TEST(TopoHwlocInputs, NvlinkBandwidthMatrixIsRead) {
  if (!hwlocAvailable()) GTEST_SKIP() << "built without hwloc";
  Topology t;
  Status s = importHwlocXml(fixture("hwloc_nvlink_bandwidth.xml"), &t);
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_EQ(t.gpus.size(), 2u);
  ASSERT_EQ(t.nvlinkGbps.size(), 2u);
  EXPECT_DOUBLE_EQ(t.nvlinkGbps[0][1], 112.5);
  EXPECT_DOUBLE_EQ(t.nvlinkGbps[1][0], 112.5);
  EXPECT_DOUBLE_EQ(t.nvlinkGbps[0][0], 0);
  EXPECT_TRUE(has(formatReport(t), "  NVLink to GPU1 112.5 GB/s\n")) << formatReport(t);
  // The JSON form keeps it.
  std::string text = toJson(t).dump();
  EXPECT_TRUE(has(text, "\"nvlink_gbps\"")) << text;
  Json j;
  std::string error;
  ASSERT_TRUE(Json::parse(text, &j, &error)) << error;
  Topology back;
  ASSERT_TRUE(fromJson(j, &back).isOk());
  EXPECT_DOUBLE_EQ(back.nvlinkGbps[1][0], 112.5);
  EXPECT_EQ(toJson(back).dump(), text);
  EXPECT_EQ(back.nodes[3].busId, "0000:20");  // a host bridge's domain:bus stays as it is
  EXPECT_EQ(normalizeBusId("0000:20"), "0000:20");
}

TEST(TopoHwlocInputs, JsonWithoutNvlinkStaysAsItWas) {
  Topology t = loadFixture("switch_4x4090.json");
  EXPECT_FALSE(has(toJson(t).dump(), "nvlink_gbps"));
  ASSERT_EQ(t.nvlinkGbps.size(), t.gpus.size());
}

TEST(TopoHwlocInputs, NewerFormatSaysSo) {
  Status s = checkHwlocXmlFile(fixture("hwloc_format_3.xml"), "2.9.0");
  ASSERT_FALSE(s.isOk());
  EXPECT_TRUE(has(s.message(), "hwloc could not parse " + fixture("hwloc_format_3.xml") +
                                   ": the file is hwloc XML format 3.0, which comes from a newer "
                                   "hwloc than this build's (hwloc 2.9.0 here"))
      << s.message();
  EXPECT_TRUE(has(s.message(), "`lstopo --of xml FILE.xml`")) << s.message();
  EXPECT_TRUE(checkHwlocXmlFile(fixture("h200_single.xml"), "2.9.0").isOk());
  EXPECT_TRUE(checkHwlocXmlFile(fixture("hwloc_format_3.xml"), "3.0.0").isOk());
}

TEST(TopoHwlocInputs, NotHwlocXmlSaysSo) {
  Status s = checkHwlocXmlFile(fixture("nvidia_smi_mlx5_columns.txt"), "2.9.0");
  ASSERT_FALSE(s.isOk());
  EXPECT_TRUE(has(s.message(),
                  "nvidia_smi_mlx5_columns.txt is not hwloc XML (it has no "
                  "<topology> element)"))
      << s.message();
  const std::string cut = ::testing::TempDir() + "/lanes_cut_topology.xml";
  std::string whole;
  ASSERT_TRUE(readTextFile(fixture("h200_single.xml"), &whole).isOk());
  ASSERT_TRUE(writeTextFile(cut, whole.substr(0, whole.size() / 2)).isOk());
  s = checkHwlocXmlFile(cut, "2.9.0");
  EXPECT_TRUE(has(s.message(), cut + " ends before </topology>: the file is cut off"))
      << s.message();
  bool hasTopology = false;
  EXPECT_EQ(hwlocXmlFormat("<topology version='2.0'>", &hasTopology), "2.0");
  EXPECT_TRUE(hasTopology);
  EXPECT_EQ(hwlocXmlFormat("<topology>", &hasTopology), "");
  EXPECT_TRUE(hasTopology);
}

TEST(TopoHwlocInputs, CliNamesTheNewerFormat) {
  if (!hwlocAvailable()) GTEST_SKIP() << "built without hwloc: the CLI says that instead";
  int rc = -1;
  std::string out = run("--import-hwloc " + fixture("hwloc_format_3.xml"), &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_TRUE(has(out, "lanes-topo: hwloc could not parse ")) << out;
  EXPECT_TRUE(has(out, "hwloc XML format 3.0, which comes from a newer hwloc")) << out;
  EXPECT_FALSE(has(out, "errno")) << out;
}

// Live discovery leaves out hwloc's display and OpenCL components: where
// their plugins are installed (Debian's libhwloc-plugins, as on CI) every
// rank would ask the OpenCL loader and X for devices Lanes never plans by.
// hwloc's own log (HWLOC_COMPONENTS_VERBOSE) lists the components it ran.
TEST(TopoHwlocInputs, LiveDiscoveryRunsNoDisplayOrOpenClComponent) {
  if (!hwlocAvailable()) GTEST_SKIP() << "built without hwloc";
  int rc = -1;
  const std::string out = run("--no-nvml", &rc, "HWLOC_COMPONENTS_VERBOSE=1");
  ASSERT_EQ(rc, 0) << out;
  const std::string key = "Final list of enabled discovery components: ";
  const size_t at = out.find(key);
  ASSERT_NE(at, std::string::npos) << out;
  const std::string list = out.substr(at + key.size(), out.find('\n', at) - at - key.size());
  EXPECT_TRUE(has(list, "linux(")) << list;
  EXPECT_FALSE(has(list, "opencl(")) << list;
  EXPECT_FALSE(has(list, "gl(")) << list;
}

TEST(TopoHwlocInputs, BuildWithoutHwlocSaysSoInTheReport) {
  if (hwlocAvailable()) GTEST_SKIP() << "built with hwloc";
  int rc = -1;
  std::string out = run("--no-nvml", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(has(out,
                  "  - hwloc: this build of Lanes has no hwloc, so the CPU/PCIe tree comes "
                  "from sysfs (Debian/Ubuntu: apt install libhwloc-dev pkg-config, then "
                  "re-run cmake and rebuild Lanes)"))
      << out;
  Topology t;
  Status s = importHwlocXml(fixture("h200_single.xml"), &t);
  ASSERT_FALSE(s.isOk());
  EXPECT_TRUE(has(s.message(), "this build of Lanes has no hwloc")) << s.message();
}

}  // namespace
}  // namespace lanes::topo::testing
