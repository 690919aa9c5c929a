// `nvidia-smi topo -m` as users paste it: all-SYS and NVLink-only boxes,
// NIC columns of older drivers, markdown tables, a -p2p matrix after it, and
// the edits and cuts the importer must refuse with a line or pair named.
#include <string>

#include "fixture_util.h"
#include "topology/import_nvidia_smi.h"
#include "topology/nvidia_smi_matrix.h"

namespace lanes::topo::testing {
namespace {

Topology importOk(const std::string& name) {
  Topology t;
  Status s = importNvidiaSmiFile(fixture(name), &t);
  EXPECT_TRUE(s.isOk()) << name << ": " << s.message();
  return t;
}

std::string importError(const std::string& name) {
  Topology t;
  Status s = importNvidiaSmiFile(fixture(name), &t);
  EXPECT_FALSE(s.isOk()) << name;
  return s.message();
}

std::string parseError(const std::string& text) {
  Topology t;
  Status s = parseNvidiaSmiTopo(text, &t);
  EXPECT_FALSE(s.isOk()) << text;
  return s.message();
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(TopoNvidiaSmiInputs, AllSysDualSocketGroupsByNumaAffinity) {
  Topology t = importOk("nvidia_smi_8x4090_all_sys.txt");
  ASSERT_EQ(t.gpus.size(), 8u);
  EXPECT_EQ(t.packageCount(), 2);
  EXPECT_EQ(t.numaCount(), 2);
  for (int g = 0; g < 8; ++g) EXPECT_EQ(t.gpus[g].numa, g < 4 ? 0 : 1) << "GPU" << g;
  EXPECT_EQ(t.gpus[3].cpus, "0-23,48-71");
  EXPECT_EQ(t.gpus[4].cpus, "24-47,72-95");
  EXPECT_EQ(t.packageOf(t.gpus[0].node), t.packageOf(t.gpus[3].node));
  EXPECT_NE(t.packageOf(t.gpus[3].node), t.packageOf(t.gpus[4].node));
  EXPECT_EQ(gpuPath(t, 0, 4), PathClass::Sys);
}

TEST(TopoNvidiaSmiInputs, NvlinkOnlyOneSocketIsOneNode) {
  Topology t = importOk("nvidia_smi_2x3090_nvlink.txt");
  ASSERT_EQ(t.gpus.size(), 2u);
  EXPECT_EQ(t.packageCount(), 1);
  EXPECT_EQ(t.numaCount(), 1);
  EXPECT_EQ(t.gpus[0].numa, 0);
  EXPECT_EQ(t.gpus[1].numa, 0);
  EXPECT_EQ(matrix(t), (std::vector<std::string>{"X NV4", "NV4 X"}));
}

TEST(TopoNvidiaSmiInputs, NvlinkOnlyDualSocketSplitsByNumaAffinity) {
  Topology t = importOk("nvidia_smi_4gpu_nvlink_dual_socket.txt");
  ASSERT_EQ(t.gpus.size(), 4u);
  EXPECT_EQ(t.packageCount(), 2);
  EXPECT_EQ(t.numaCount(), 2);
  EXPECT_EQ(t.gpus[1].numa, 0);
  EXPECT_EQ(t.gpus[2].numa, 1);
  EXPECT_EQ(t.gpus[2].cpus, "20-39,60-79");
  EXPECT_EQ(matrix(t)[0], "X NV2 NV2 NV2");
}

TEST(TopoNvidiaSmiInputs, Mlx5ColumnsAreNics) {
  Topology t = importOk("nvidia_smi_mlx5_columns.txt");
  ASSERT_EQ(t.gpus.size(), 4u);
  ASSERT_EQ(t.nics.size(), 2u);
  EXPECT_EQ(t.nics[0].name, "mlx5_0");
  EXPECT_EQ(t.nics[1].name, "mlx5_1");
  EXPECT_EQ(t.numaCount(), 2);
  EXPECT_EQ(t.packageCount(), 2);
  EXPECT_EQ(t.gpus[0].numa, 0);
  EXPECT_EQ(t.gpus[0].cpus, "0-15");
  EXPECT_EQ(t.gpus[2].numa, 1);
  EXPECT_EQ(t.gpus[2].cpus, "16-31");
  EXPECT_EQ(t.nics[1].numa, 1);
  EXPECT_EQ(matrix(t)[0], "X NODE SYS SYS PIX SYS");
  EXPECT_EQ(matrix(t)[3], "SYS SYS NODE X SYS NODE");
}

TEST(TopoNvidiaSmiInputs, PathClassWhereCpuAffinityBelongsIsAnError) {
  // The header lost its NIC column: the NIC's cell lands in CPU Affinity.
  const std::string text =
      "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
      "GPU0\t X \tSYS\tSYS\t0\n"
      "GPU1\tSYS\t X \tSYS\t1\n";
  std::string e = parseError(text);
  EXPECT_TRUE(has(e, "line 2, row GPU0, column CPU Affinity: \"SYS\" is not a CPU list")) << e;
  EXPECT_TRUE(has(e, "the header on line 1 lists fewer devices than the rows have")) << e;
}

TEST(TopoNvidiaSmiInputs, MarkdownTableReads) {
  Topology t = importOk("nvidia_smi_markdown_table.md");
  ASSERT_EQ(t.gpus.size(), 2u);
  EXPECT_EQ(matrix(t), (std::vector<std::string>{"X PHB", "PHB X"}));
  EXPECT_EQ(t.numaCount(), 1);
  EXPECT_EQ(t.gpus[1].cpus, "0-31");
}

TEST(TopoNvidiaSmiInputs, StopsAtTheFirstMatrixBeforeP2p) {
  Topology t = importOk("nvidia_smi_then_p2p.txt");
  ASSERT_EQ(t.gpus.size(), 4u);
  EXPECT_EQ(matrix(t)[0], "X PIX SYS SYS");
  EXPECT_EQ(t.gpus[3].numa, 1);
  EXPECT_EQ(t.numaCount(), 2);
}

TEST(TopoNvidiaSmiInputs, P2pMatrixAloneIsRefusedByName) {
  std::string e = parseError(
      " \tGPU0\tGPU1\t\n GPU0\tX\tOK\t\n GPU1\tOK\tX\t\n\nLegend:\n\n  X    = Self\n"
      "  OK   = Status Ok\n");
  EXPECT_TRUE(has(e, "this is the output of `nvidia-smi topo -p2p`")) << e;
  EXPECT_TRUE(has(e, "run `nvidia-smi topo -m`")) << e;
}

TEST(TopoNvidiaSmiInputs, AsymmetricMatrixNamesThePair) {
  std::string e = importError("nvidia_smi_asymmetric.txt");
  EXPECT_TRUE(has(e,
                  "nvidia_smi_asymmetric.txt: GPU0->GPU1 is PIX (line 2) but GPU1->GPU0 is SYS "
                  "(line 3)"))
      << e;
}

TEST(TopoNvidiaSmiInputs, TruncatedRowNamesTheLine) {
  std::string e = importError("nvidia_smi_truncated_row.txt");
  EXPECT_TRUE(has(e,
                  "line 5: row GPU3 has 5 cells, fewer than the 7 columns of the header on "
                  "line 1; the line looks cut off"))
      << e;
}

TEST(TopoNvidiaSmiInputs, MissingRowsAndBadCellsSayWhere) {
  std::string e =
      parseError("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tPHB\t0-7\t0\n\nLegend:\n");
  EXPECT_TRUE(has(e, "the matrix ends on line 2 without the rows of GPU1")) << e;
  e = parseError("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tPHX\t0-7\nGPU1\tPHB\t X \t0-7\n");
  EXPECT_TRUE(has(e, "line 2, row GPU0, column GPU1: \"PHX\" is not a path class")) << e;
  e = parseError(
      "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tPHB\t0-7\tzero\n"
      "GPU1\tPHB\t X \t0-7\t0\n");
  EXPECT_TRUE(has(e, "line 2, row GPU0, column NUMA Affinity: \"zero\"")) << e;
}

TEST(TopoNvidiaSmiInputs, SpacesInsteadOfTabsRead) {
  Topology t;
  Status s = parseNvidiaSmiTopo(
      "        GPU0    GPU1    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID\n"
      "GPU0     X      SYS     NODE    0-7     0               N/A\n"
      "GPU1    SYS      X      SYS     8-15    1               N/A\n"
      "NIC0    NODE    SYS      X\n\nNIC Legend:\n\n  NIC0: mlx5_2\n",
      &t);
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0].name, "mlx5_2");
  EXPECT_EQ(t.nics[0].numa, 0);
  EXPECT_EQ(t.gpus[1].numa, 1);
  EXPECT_EQ(t.numaCount(), 2);
}

TEST(TopoNvidiaSmiInputs, CpuListGrammar) {
  EXPECT_TRUE(isCpuList("0-15,32-47"));
  EXPECT_TRUE(isCpuList("7"));
  EXPECT_FALSE(isCpuList("SYS"));
  EXPECT_FALSE(isCpuList("0-"));
  EXPECT_FALSE(isCpuList("0-15,"));
  EXPECT_FALSE(isCpuList("15-0"));
}

TEST(TopoNvidiaSmiInputs, CliExitsNonZeroNamingTheFile) {
  int rc = -1;
  std::string out = run("--import-nvidia-smi " + fixture("nvidia_smi_truncated_row.txt"), &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_TRUE(has(out, "lanes-topo: ")) << out;
  EXPECT_TRUE(has(out, "nvidia_smi_truncated_row.txt: line 5: row GPU3")) << out;
}

}  // namespace
}  // namespace lanes::topo::testing
