// lanes-topo's own text: --help describes every flag its usage line lists,
// --help and --version say which optional pieces this build has,
// --import-hwloc in a build without hwloc says how to get it, and --plan
// prints the path registry's choices.
#include <sys/wait.h>

#include <cstdio>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

#include "fixture_util.h"
#include "lanes/lanes.h"
#include "tests/common/scoped_env.h"
#include "topology/discovery.h"

namespace lanes::topo::testing {
namespace {

// Every line of the build's pieces, as --help and --version end.
void expectBuildPieces(const std::string& out) {
  if (hwlocAvailable())
    EXPECT_NE(out.find("\n  hwloc "), std::string::npos) << out;
  else
    EXPECT_NE(out.find("\n  hwloc: not found, so the topology comes from sysfs and "
                       "--import-hwloc is off (Debian: apt install libhwloc-dev pkg-config, "
                       "then re-run cmake)"),
              std::string::npos)
        << out;
  EXPECT_NE(out.find("\n  CUDA"), std::string::npos) << out;
  EXPECT_NE(out.find("\n  MPI"), std::string::npos) << out;
  EXPECT_NE(out.find("\n  NVML: libnvidia-ml.so.1 "), std::string::npos) << out;
}

TEST(LanesTopoCli, HelpDescribesEveryFlagItLists) {
  int rc = -1;
  const std::string out = run("--help", &rc);
  EXPECT_EQ(rc, 0) << out;
  // The usage lines: up to the first description.
  const std::string usage = out.substr(0, out.find("\n  ("));
  std::set<std::string> flags;
  const std::regex flag("-(-[a-z-]+|h)\\b");
  for (std::sregex_iterator it(usage.begin(), usage.end(), flag), end; it != end; ++it)
    flags.insert(it->str());
  EXPECT_GE(flags.size(), 9u) << usage;
  std::istringstream lines(out.substr(usage.size()));
  std::set<std::string> described;
  for (std::string line; std::getline(lines, line);) {
    // "  --json   print ..." or "  -h, --help   this text"
    std::smatch m;
    std::string rest = line;
    while (std::regex_search(rest, m, std::regex("^ *(-(-[a-z-]+|h))(,| [A-Z]+)? "))) {
      described.insert(m[1].str());
      rest = m.suffix().str();
    }
  }
  for (const std::string& f : flags)
    EXPECT_TRUE(described.count(f)) << f << " is listed but not described:\n" << out;
  expectBuildPieces(out.substr(out.find("This build:")));
}

TEST(LanesTopoCli, VersionSaysWhatTheBuildHas) {
  int rc = -1;
  const std::string out = run("--version", &rc);
  EXPECT_EQ(rc, 0) << out;
  const std::string version = std::to_string(LANES_MAJOR) + "." + std::to_string(LANES_MINOR) +
                              "." + std::to_string(LANES_PATCH);
  EXPECT_EQ(out.rfind("lanes-topo (Lanes " + version + ")\n", 0), 0u) << out;
  expectBuildPieces(out);
}

TEST(LanesTopoCli, ImportHwlocWithoutHwlocSaysHowToGetIt) {
  if (hwlocAvailable()) GTEST_SKIP() << "built with hwloc: --import-hwloc works";
  int rc = -1;
  const std::string out = run("--import-hwloc " + fixture("h200_single.xml"), &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("lanes-topo: --import-hwloc needs hwloc, and this build has none. Install "
                     "it (Debian/Ubuntu: apt install libhwloc-dev pkg-config), then re-run cmake "
                     "and rebuild Lanes"),
            std::string::npos)
      << out;
}

// The row of `coll` in the table under `heading`, split into its cells.
std::vector<std::string> planRow(const std::string& out, const std::string& heading,
                                 const std::string& coll) {
  const size_t table = out.find(heading);
  if (table == std::string::npos) return {};
  std::istringstream lines(out.substr(table));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> cells;
    for (std::string w; words >> w;) cells.push_back(w);
    if (!cells.empty() && cells[0] == coll) return cells;
  }
  return {};
}

TEST(LanesTopoCli, PlanPrintsTheRegistrysChoiceForTheModel) {
  int rc = -1;
  const std::string cmd = "--load " + fixture("switch_4x4090.json") + " --plan";
  std::string out = run(cmd, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("# Path choice for 4 ranks as processes of this host"), std::string::npos)
      << out;
  // 8 B, 64 KiB, 1 MiB, 256 MiB per rank: up to 64 KiB the LL kernel's one
  // launch and no hand-offs; from 1 MiB host summation's few hand-offs, one
  // copy each way over each link and less host memory traffic than the
  // staged pipeline's win (assumed inputs).
  EXPECT_EQ(planRow(out, "# Device buffers", "allreduce"),
            (std::vector<std::string>{"allreduce", "ll", "ll", "host_sum", "host_sum"}))
      << out;
  // A reduce up to 64 KiB takes the LL kernel (one launch, a PCIe write and
  // read); at 1 MiB the simple kernel (a flag per chunk, the payload across
  // PCIe once); at 256 MiB, past its slots, the proxy's chain.
  EXPECT_EQ(planRow(out, "# Device buffers", "reduce"),
            (std::vector<std::string>{"reduce", "ll", "ll", "simple", "proxy/chain"}))
      << out;
  // Host buffers. At 8 B, with assumed inputs (a later step costs a hop),
  // host summation's two hand-offs through counters cost what recursive
  // doubling's two rounds do, and recursive doubling copies fewer bytes. At
  // 64 KiB host summation's one sum of each segment against recursive
  // doubling's two of the whole buffer; at 1 MiB the ring, whose sends and
  // receives run on both ends' cores at once where host summation copies in
  // and out on its own; at 256 MiB, where memory bounds them all, host
  // summation's fewer passes over it.
  EXPECT_EQ(planRow(out, "# Host buffers", "allreduce"),
            (std::vector<std::string>{"allreduce", "recursive_doubling", "shared_sum", "ring",
                                      "shared_sum"}))
      << out;
  // Six ranks on four GPUs share GPUs (time slices: these are processes, not
  // under MPS): no LL, the proxy below 256 KiB (running whichever host
  // algorithm the host model picks), host summation from 1 MiB (its hand-offs
  // between the processes wait for fewer switches than the staged path's).
  out = run("-n 6 " + cmd, &rc);
  ASSERT_EQ(rc, 0) << out;
  const std::vector<std::string> shared = planRow(out, "# Device buffers", "allreduce");
  ASSERT_EQ(shared.size(), 5u) << out;
  EXPECT_EQ(shared[1].rfind("proxy/", 0), 0u) << out;
  EXPECT_EQ(shared[2].rfind("proxy/", 0), 0u) << out;
  EXPECT_EQ(shared[3], "host_sum") << out;
  EXPECT_EQ(shared[4], "host_sum") << out;
  out = run("-n 0 " + cmd, &rc);
  EXPECT_EQ(rc, 2) << out;
}

// --hosts spreads the ranks over hosts like the model's machine, TCP between
// them: device calls take the proxy, and a large all-reduce over hosts that
// hold as many ranks each the hierarchical plan (2 hosts x 4 GPUs).
TEST(LanesTopoCli, PlanAcrossHostsTakesTheHierarchicalAllReduce) {
  int rc = -1;
  const std::string model = " --topology " + fixture("switch_4x4090.json");
  std::string out = run("--plan --hosts 2 --collective allreduce" + model, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("# Path choice for 8 ranks as processes of 2 hosts like this"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\n128 MiB\n  host:   hierarchical "), std::string::npos) << out;
  EXPECT_NE(out.find("\n  device: proxy "), std::string::npos) << out;
  EXPECT_EQ(out.find("\n  device: staged "), std::string::npos) << out;

  out = run("--plan --json --ranks 8 --hosts 2 --collective allreduce" + model, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"hosts\": 2"), std::string::npos) << out;
  EXPECT_NE(out.find("{\"algo\": \"hierarchical\""), std::string::npos) << out;
  // Hosts of unequal rank counts: no hierarchical candidate.
  out = run("--plan --json --ranks 6 --hosts 4 --collective allreduce" + model, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out.find("{\"algo\": \"hierarchical\""), std::string::npos) << out;

  out = run("--plan --ranks 2 --hosts 3" + model, &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("leaves hosts without ranks"), std::string::npos) << out;
  out = run("--plan --threads --hosts 2" + model, &rc);
  EXPECT_EQ(rc, 2) << out;
  out = run("--hosts 2" + model, &rc);
  EXPECT_EQ(rc, 2) << out;
}

// A dual-socket model: rank r by GPU r % 8, four on each package, so the
// host algorithms see two packages of four ranks and a hierarchical
// candidate that crosses the packages' link once; with the shared arena left
// out it takes the large all-reduces.
TEST(LanesTopoCli, PlanOnTwoPackagesOffersTheHierarchicalAllReduce) {
  int rc = -1;
  const std::string out = run("--plan --json --ranks 8 --collective allreduce --topology " +
                                  fixture("dual_socket_8x4090.json"),
                              &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("{\"algo\": \"hierarchical\""), std::string::npos) << out;
  lanes::test::ScopedEnv noArena("LANES_ALGO", "^shared_sum");
  const std::string text = run(
      "--plan --ranks 8 --collective allreduce --topology " + fixture("dual_socket_8x4090.json"),
      &rc);
  ASSERT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("\n128 MiB\n  host:   hierarchical "), std::string::npos) << text;
  // Six ranks put four on one package and two on the other: no candidate.
  const std::string six = run("--plan --json --ranks 6 --collective allreduce --topology " +
                                  fixture("dual_socket_8x4090.json"),
                              &rc);
  EXPECT_EQ(six.find("{\"algo\": \"hierarchical\""), std::string::npos) << six;
}

// --topology reads any of the three formats; --collective explains each size;
// --json gives every candidate's predicted time.
TEST(LanesTopoCli, PlanForOneCollectiveExplainsAndPrintsJson) {
  int rc = -1;
  std::string out = run(
      "--plan --ranks 4 --collective all_reduce --topology " + fixture("dual_socket_8x4090.json"),
      &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("# Cost model inputs (assumed: lanes-topo --probe measures them)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\n8 B\n  host:   recursive_doubling "), std::string::npos) << out;
  EXPECT_NE(out.find("(latency 100%); next shared_sum "), std::string::npos) << out;
  EXPECT_NE(out.find("\n  device: ll 11.5 us (latency 100%); next simple "), std::string::npos)
      << out;
  EXPECT_NE(out.find("\n1 GiB\n  host:   shared_sum "), std::string::npos) << out;
  EXPECT_NE(out.find("\n  device: host_sum "), std::string::npos) << out;

  out = run("--plan --json --ranks 4 --collective allreduce --topology " +
                fixture("nvidia_smi_dual_8x4090.txt"),
            &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out.rfind("{\"format\": \"lanes-plan-1\", \"nranks\": 4", 0), 0u) << out;
  EXPECT_NE(out.find("{\"collective\": \"allreduce\", \"size\": 8, \"chosen\": "
                     "\"recursive_doubling\", \"candidates\": [{\"algo\": "
                     "\"recursive_doubling\", \"allowed\": true, \"predicted_us\": "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\"size\": 1073741824, \"chosen\": \"shared_sum\""), std::string::npos) << out;
  EXPECT_EQ(out.find("\"collective\": \"broadcast\""), std::string::npos) << out;
  // The device rows: every eligible path with its terms, and the choice.
  EXPECT_NE(out.find("], \"device\": [\n  {\"collective\": \"allreduce\", \"size\": 8, "
                     "\"chosen\": \"ll\", \"candidates\": [{\"path\": \"ll\", \"allowed\": true, "
                     "\"predicted_us\": "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\"size\": 1073741824, \"chosen\": \"host_sum\""), std::string::npos) << out;

  // Thread ranks on one GPU: the shared-context path for small all-reduces,
  // never the proxy where the staged path serves.
  out = run("--plan --json --threads --ranks 4 --collective allreduce --topology " +
                fixture("h200_single.json"),
            &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"launch\": \"threads\""), std::string::npos) << out;
  const size_t device = out.find("\"device\": [");
  ASSERT_NE(device, std::string::npos) << out;
  EXPECT_NE(out.find("\"size\": 8, \"chosen\": \"shared_context\"", device), std::string::npos)
      << out;
  EXPECT_NE(out.find("\"size\": 2097152, \"chosen\": \"staged\"", device), std::string::npos)
      << out;
  EXPECT_EQ(out.find("\"chosen\": \"proxy\"", device), std::string::npos) << out;

  out = run("--plan --collective allsum", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--collective allsum is not a collective"), std::string::npos) << out;
  out = run("--ranks 4", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--ranks, --hosts, --threads, --mps and --collective go with --plan"),
            std::string::npos)
      << out;
}

}  // namespace
// The report of this machine says which interface the socket transport
// would listen on: LANES_SOCKET_IFNAME's first match where it is set.
TEST(LanesTopoCli, ReportNamesTheTcpInterface) {
  ::unsetenv("LANES_SOCKET_IFNAME");
  int rc = -1;
  const std::string out = run("--no-nvml", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\nTCP interfaces (LANES_SOCKET_IFNAME unset):\n  candidates: "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  socket transport, ranks of other hosts reached from:\n"), std::string::npos)
      << out;
  ::setenv("LANES_SOCKET_IFNAME", "=lo", 1);
  const std::string lo = run("--no-nvml", &rc);
  ::unsetenv("LANES_SOCKET_IFNAME");
  EXPECT_EQ(rc, 0) << lo;
  EXPECT_NE(lo.find("TCP interfaces (LANES_SOCKET_IFNAME==lo):\n  candidates: lo (127.0.0.1)"),
            std::string::npos)
      << lo;
  EXPECT_NE(lo.find(": lo (the first LANES_SOCKET_IFNAME selects)\n"), std::string::npos) << lo;
}

}  // namespace lanes::topo::testing
