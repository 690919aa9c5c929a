// The rule of src/core/env.h: a LANES_* value that is unparsable or out of
// range warns once, naming the variable, the value and the value used; the
// log's own variables (read under the log lock) follow it too. Also what the
// log says around it: the error strings' LANES_DEBUG hint only where that
// level is off, the version line once per process, a host rank's NUMA node.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "base/env.h"
#include "base/log.h"
#include "base/nccl_env.h"
#include "core/comm.h"
#include "core/comm_topology.h"
#include "core/init.h"
#include "exec/comm_config.h"
#include "lanes/lanes.h"
#include "tests/common/log_file.h"
#include "tests/common/scoped_env.h"
#include "topology/model.h"

namespace lanes {
namespace {

using test::ScopedEnv;

// The log of one case in a file (LANES_DEBUG_FILE), at `level`, every subsystem.
class LogCapture : public test::LogFile {
 public:
  explicit LogCapture(const char* level = "WARN")
      : level_("LANES_DEBUG", level), subsys_("LANES_DEBUG_SUBSYS", std::nullopt) {
    logReloadConfig();
  }

 private:
  ScopedEnv level_, subsys_;
};

TEST(EnvWarnings, IntegerOutOfRangeWarnsOnceWithTheBoundUsed) {
  LogCapture log;
  ScopedEnv v("LANES_TEST_INT", "1");
  EXPECT_EQ(envInt("LANES_TEST_INT", 4, 2, 64), 2);
  EXPECT_EQ(envInt("LANES_TEST_INT", 4, 2, 64), 2);
  EXPECT_EQ(log.count("WARN LANES_TEST_INT=1 is below its minimum 2; using 2"), 1u) << log.text();
  ScopedEnv high("LANES_TEST_INT", "65");
  EXPECT_EQ(envInt("LANES_TEST_INT", 4, 2, 64), 64);
  EXPECT_EQ(log.count("LANES_TEST_INT=65 is above its maximum 64; using 64"), 1u) << log.text();
  ScopedEnv bad("LANES_TEST_INT", "four");
  EXPECT_EQ(envInt("LANES_TEST_INT", 4, 2, 64), 4);
  EXPECT_EQ(envInt("LANES_TEST_INT", 4, 2, 64), 4);
  EXPECT_EQ(log.count("LANES_TEST_INT=four is not an integer; using 4"), 1u) << log.text();
}

TEST(EnvWarnings, SizesBoolsAndTimeoutsSayWhatWasUsed) {
  LogCapture log;
  {
    ScopedEnv v("LANES_TEST_SIZE", "1M");
    EXPECT_EQ(envSize("LANES_TEST_SIZE", 16 << 10, 0, 256 << 10), 256u << 10);
    EXPECT_EQ(log.count("LANES_TEST_SIZE=1M is above its maximum 256K; using 256K"), 1u);
  }
  {
    ScopedEnv v("LANES_TEST_SIZE", "lots");
    EXPECT_EQ(envSize("LANES_TEST_SIZE", 16 << 10), 16u << 10);
    EXPECT_EQ(log.count("LANES_TEST_SIZE=lots is not a size (bytes, or with a K, M, G suffix); "
                        "using 16K"),
              1u);
  }
  {
    ScopedEnv v("LANES_TEST_BOOL", "maybe");
    EXPECT_TRUE(envBool("LANES_TEST_BOOL", true));
    EXPECT_EQ(log.count("LANES_TEST_BOOL=maybe is not a boolean (1/0, true/false, yes/no, "
                        "on/off); using 1"),
              1u);
    ScopedEnv upper("LANES_TEST_BOOL", "Yes");
    EXPECT_TRUE(envBool("LANES_TEST_BOOL", false));
  }
  {
    ScopedEnv v("LANES_TIMEOUT", "0");
    EXPECT_EQ(defaultTimeoutSeconds(), 300.0);
    EXPECT_EQ(log.count("LANES_TIMEOUT=0 is not a positive number of seconds; using 300"), 1u);
    ScopedEnv soon("LANES_TIMEOUT", "soon");
    EXPECT_EQ(defaultTimeoutSeconds(), 300.0);
    EXPECT_EQ(log.count("LANES_TIMEOUT=soon is not a non-negative number; using 300"), 1u);
  }
  EXPECT_EQ(log.count(" WARN "), 5u) << log.text();  // nothing twice, nothing for "Yes"
}

TEST(EnvWarnings, ValueFromAnNcclTwinSaysSo) {
  LogCapture log;
  ScopedEnv mine("LANES_SOCKET_NTHREADS", std::nullopt);
  ScopedEnv twin("NCCL_SOCKET_NTHREADS", "99");
  setNcclEnvironmentForTest(true);
  EXPECT_EQ(envInt("LANES_SOCKET_NTHREADS", 2, 1, 16), 16);
  setNcclEnvironmentForTest(false);
  EXPECT_EQ(log.count("LANES_SOCKET_NTHREADS=99 (its NCCL_* twin's value) is above its maximum "
                      "16; using 16"),
            1u)
      << log.text();
}

TEST(EnvWarnings, SocketMoverTakesItsThreeNamesAndWarnsOfOthers) {
  LogCapture log;
  const std::pair<const char*, SocketMover> names[] = {{"engine", SocketMover::Engine},
                                                       {"workers", SocketMover::Workers},
                                                       {"auto", SocketMover::Auto}};
  for (const auto& [name, mover] : names) {
    ScopedEnv v("LANES_SOCKET_MOVER", name);
    EXPECT_EQ(CommConfig::fromEnv().transport.socketMover, mover) << name;
  }
  EXPECT_EQ(log.count(" WARN "), 0u) << log.text();
  ScopedEnv bad("LANES_SOCKET_MOVER", "threads");
  EXPECT_EQ(CommConfig::fromEnv().transport.socketMover, SocketMover::Auto);
  EXPECT_EQ(log.count("LANES_SOCKET_MOVER=threads is not auto, engine or workers; using auto"), 1u)
      << log.text();
}

TEST(EnvWarnings, UnknownDebugLevelWarnsAndWarnIsUsed) {
  LogCapture log("LOUD");
  logReloadConfig();  // a second read of the same value: still one warning
  EXPECT_TRUE(logLevelOn(LogLevel::Warn));
  EXPECT_FALSE(logLevelOn(LogLevel::Info));
  EXPECT_EQ(log.count("LANES_DEBUG=LOUD is not NONE, WARN, INFO or TRACE; using WARN"), 1u)
      << log.text();
}

TEST(EnvWarnings, UnknownSubsystemWarnsEvenWhereTheListHidesEnv) {
  LogCapture log;
  ScopedEnv subsys("LANES_DEBUG_SUBSYS", "INIT,BOGUS");
  logReloadConfig();
  EXPECT_EQ(log.count("LANES_DEBUG_SUBSYS=INIT,BOGUS names BOGUS, not a subsystem (INIT, "
                      "BOOTSTRAP, TRANSPORT, COLL, PLAN, TOPO, ENV, ALL); using INIT"),
            1u)
      << log.text();
}

TEST(EnvWarnings, UnwritableDebugFileWarnsOnStderr) {
  std::string err;
  {
    ScopedEnv level("LANES_DEBUG", "WARN");
    ScopedEnv file("LANES_DEBUG_FILE", "/nonexistent-dir/lanes.log");
    ::testing::internal::CaptureStderr();
    logReloadConfig();
    logReloadConfig();
    err = ::testing::internal::GetCapturedStderr();
  }
  logReloadConfig();
  const std::string want =
      "WARN LANES_DEBUG_FILE=/nonexistent-dir/lanes.log cannot be opened for appending (No such "
      "file or directory (errno 2)); using stderr";
  EXPECT_NE(err.find(want), std::string::npos) << err;
  EXPECT_EQ(err.find(want), err.rfind(want)) << err;  // once
}

TEST(EnvWarnings, TooFewLanesWarnOnceAtCommunicatorCreation) {
  LogCapture log;
  ScopedEnv lanes("LANES_NLANES", "1");
  for (int i = 0; i < 2; ++i) {
    lanesComm_t comm = nullptr;
    ASSERT_EQ(lanesCommInitAll(&comm, 1, nullptr), lanesSuccess) << lanesGetLastError(nullptr);
    EXPECT_EQ(lanesCommDestroy(comm), lanesSuccess);
  }
  EXPECT_EQ(log.count("LANES_NLANES=1 is below its minimum 2; using 2"), 1u) << log.text();
}

TEST(ErrorStrings, HintAtLanesDebugOnlyWhereThatLevelIsOff) {
  {
    ScopedEnv level("LANES_DEBUG", "NONE");
    logReloadConfig();
    EXPECT_STREQ(lanesGetErrorString(lanesInvalidArgument),
                 "invalid argument (run with LANES_DEBUG=WARN for details)");
    EXPECT_STREQ(lanesGetErrorString(lanesInvalidUsage),
                 "invalid usage (run with LANES_DEBUG=WARN for details)");
  }
  {
    ScopedEnv level("LANES_DEBUG", std::nullopt);  // WARN, the default
    logReloadConfig();
    EXPECT_STREQ(lanesGetErrorString(lanesInvalidArgument), "invalid argument");
    EXPECT_STREQ(lanesGetErrorString(lanesInvalidUsage), "invalid usage");
    EXPECT_STREQ(lanesGetErrorString(lanesSystemError),
                 "unhandled system error (run with LANES_DEBUG=INFO for details)");
  }
  {
    ScopedEnv level("LANES_DEBUG", "INFO");
    logReloadConfig();
    EXPECT_STREQ(lanesGetErrorString(lanesSystemError), "unhandled system error");
    EXPECT_STREQ(lanesGetErrorString(lanesUnhandledCudaError), "unhandled cuda error");
  }
  logReloadConfig();
}

std::string versionLine() {
  return "Lanes version " + std::to_string(LANES_MAJOR) + "." + std::to_string(LANES_MINOR) + "." +
         std::to_string(LANES_PATCH) + " (";
}

TEST(InitLog, VersionOncePerProcessAtInfo) {
  setVersionLoggedForTest(false);
  {
    LogCapture quiet("WARN");  // not printed, so not used up
    lanesComm_t comm = nullptr;
    ASSERT_EQ(lanesCommInitAll(&comm, 1, nullptr), lanesSuccess) << lanesGetLastError(nullptr);
    EXPECT_EQ(lanesCommDestroy(comm), lanesSuccess);
    EXPECT_EQ(quiet.count(versionLine()), 0u);
  }
  LogCapture log("INFO");
  for (int i = 0; i < 2; ++i) {
    lanesComm_t comm = nullptr;
    ASSERT_EQ(lanesCommInitAll(&comm, 1, nullptr), lanesSuccess) << lanesGetLastError(nullptr);
    EXPECT_EQ(lanesCommDestroy(comm), lanesSuccess);
  }
  EXPECT_EQ(log.count("INFO " + versionLine()), 1u) << log.text();
}

TEST(InitLog, QuietScopeMutesThisThreadsInfoButNotWarnNorOtherThreads) {
  LogCapture log("INFO");
  {
    const ScopedQuietLog quiet;
    LANES_INFO(Init, 0, "muted line");
    LANES_WARN(Init, 0, "warned line");
    std::thread([] { LANES_INFO(Init, 0, "another thread's line"); }).join();
  }
  LANES_INFO(Init, 0, "line after the scope");
  EXPECT_EQ(log.count("muted line"), 0u) << log.text();
  EXPECT_EQ(log.count("warned line"), 1u) << log.text();
  EXPECT_EQ(log.count("another thread's line"), 1u) << log.text();
  EXPECT_EQ(log.count("line after the scope"), 1u) << log.text();
}

// The machine probe's thread ranks: settings made in code over the
// environment, host-only, and quiet at INFO when asked.
TEST(InitLog, ThreadRanksTakeSettingsInCodeAndMayBeQuiet) {
  const ScopedEnv shm("LANES_SHM_DISABLE", "0");  // what the code's setting overrides
  for (const bool quiet : {true, false}) {
    LogCapture log("INFO");
    CommOptions options;
    options.quietLog = quiet;
    options.adjustConfig = [](CommConfig& c) { c.transport.shmDisabled = true; };
    lanesComm_t comms[2] = {nullptr, nullptr};
    const Status s = initThreadRanks({-1, -1}, options, comms);
    ASSERT_TRUE(s.isOk()) << s.message();
    for (lanesComm_t c : comms) {
      EXPECT_TRUE(c->config.transport.shmDisabled);
      EXPECT_EQ(c->cudaDev, -1);
    }
    float v[2] = {1, 2};
    std::thread peer([&] {
      EXPECT_EQ(lanesAllReduce(v, v, 1, lanesFloat32, lanesSum, comms[1], nullptr), lanesSuccess);
    });
    float w[2] = {3, 4};
    EXPECT_EQ(lanesAllReduce(w, w, 1, lanesFloat32, lanesSum, comms[0], nullptr), lanesSuccess);
    peer.join();
    EXPECT_EQ(w[0], 4.0f);
    for (lanesComm_t c : comms) EXPECT_EQ(lanesCommDestroy(c), lanesSuccess);
    // Every communicator logs its cost model's inputs at INFO (subsystem PLAN).
    EXPECT_EQ(log.count("cost model inputs") == 0, quiet) << log.text();
  }
}

TEST(InitLog, HostRankShowsTheNumaNodeOfItsCpus) {
  const topo::Topology& t = processTopology();
  if (t.numaCount() == 0) GTEST_SKIP() << "the topology lists no NUMA node";
  LogCapture log("INFO");
  lanesComm_t comm = nullptr;
  ASSERT_EQ(lanesCommInitAll(&comm, 1, nullptr), lanesSuccess) << lanesGetLastError(nullptr);
  EXPECT_EQ(lanesCommDestroy(comm), lanesSuccess);
  const std::string text = log.text();
  if (text.find("rank 0: GPU -1 ") == std::string::npos) GTEST_SKIP() << "rank 0 has a GPU";
  EXPECT_EQ(text.find("GPU -1 bus - NUMA -1"), std::string::npos) << text;
  if (t.numaCount() == 1) {  // the node lanes-topo lists
    for (const topo::Node& n : t.nodes) {
      if (n.kind != topo::NodeKind::Numa) continue;
      EXPECT_NE(text.find("rank 0: GPU -1 bus - NUMA " + std::to_string(n.osIndex) + " "),
                std::string::npos)
          << text;
    }
  }
}

// Two nodes, CPUs 0-3 and 4-7, as hwloc and sysfs discovery name them.
topo::Topology twoNodes() {
  topo::Topology t;
  t.addNode(topo::NodeKind::Machine, -1);
  for (int os : {0, 1}) {
    int p = t.addNode(topo::NodeKind::Package, 0);
    t.nodes[p].osIndex = os;
    int n = t.addNode(topo::NodeKind::Numa, p);
    t.nodes[n].osIndex = os;
    t.nodes[n].name = os == 0 ? "0-3" : "4,5-7";
  }
  return t;
}

int numaOs(const topo::Topology& t, int node) { return node < 0 ? -1 : t.nodes[node].osIndex; }

TEST(InitLog, HostNumaNodeFromAffinityThenCurrentCpu) {
  const topo::Topology t = twoNodes();
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(5, &set);
  CPU_SET(6, &set);
  EXPECT_EQ(numaOs(t, hostNumaNode(t, &set, 0)), 1);  // bound to node 1: the mask decides
  for (int cpu = 0; cpu < 8; ++cpu) CPU_SET(cpu, &set);
  EXPECT_EQ(numaOs(t, hostNumaNode(t, &set, 2)), 0);  // unbound: where it runs
  EXPECT_EQ(numaOs(t, hostNumaNode(t, nullptr, 7)), 1);
  EXPECT_EQ(hostNumaNode(t, nullptr, -1), -1);
  EXPECT_EQ(t.packageOf(hostNumaNode(t, nullptr, 7)), 1);

  topo::Topology one;
  one.addNode(topo::NodeKind::Machine, -1);
  int n = one.addNode(topo::NodeKind::Numa, 0);
  one.nodes[n].osIndex = 0;
  EXPECT_EQ(numaOs(one, hostNumaNode(one, nullptr, -1)), 0);  // the only node, CPUs unnamed

  EXPECT_TRUE(inCpuList("0-3,8,10-11", 10));
  EXPECT_TRUE(inCpuList("0-3,8,10-11", 8));
  EXPECT_FALSE(inCpuList("0-3,8,10-11", 9));
  EXPECT_FALSE(inCpuList("", 0));
}

// The proxy thread of a GPU goes to its NUMA node's CPUs, within what the
// process may use, and stays unpinned where that narrows nothing or leaves
// nothing.
TEST(InitLog, GpuLocalCpusNarrowWithinTheAffinity) {
  cpu_set_t allowed, out;
  CPU_ZERO(&allowed);
  for (int cpu = 0; cpu < 8; ++cpu) CPU_SET(cpu, &allowed);
  ASSERT_TRUE(narrowCpus("0-3,12", allowed, &out));
  EXPECT_EQ(CPU_COUNT(&out), 4);
  EXPECT_TRUE(CPU_ISSET(3, &out));
  EXPECT_FALSE(CPU_ISSET(4, &out));
  EXPECT_FALSE(CPU_ISSET(12, &out));                // outside the process's mask
  EXPECT_FALSE(narrowCpus("0-15", allowed, &out));  // every allowed CPU is local
  EXPECT_FALSE(narrowCpus("8-15", allowed, &out));  // none of them is
}

}  // namespace
}  // namespace lanes
