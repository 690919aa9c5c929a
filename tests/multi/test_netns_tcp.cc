// Two "hosts" on one machine: two network namespaces joined by a veth pair,
// each with its own host identity (LANES_HOSTID). Ranks in different
// namespaces must talk TCP over the veth; ranks in the same one use shm.
//
// Needs CAP_NET_ADMIN and iproute2; skipped (with the reason) otherwise. All
// traffic stays on the veth pair inside the namespaces this test creates.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "core/plan_record.h"
#include "tests/common/scoped_env.h"
#include "tests/multi/data.h"
#include "tests/multi/harness.h"
#include "tests/multi/veth_namespaces.h"

namespace lanes::test {
namespace {

// A temporary directory removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "lanes-netns-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The collectives every rank runs once it is inside its "host"; `allReducePlan`:
// what the all-reduce must have run on ("": anything).
void exchangeAcrossHosts(int rank, int n, const lanesUniqueId& id,
                         const std::string& allReducePlan) {
  CommGuard comm(initComm(rank, n, id));
  lanesComm_t c = comm.get();
  constexpr uint32_t kSalt = 3;

  constexpr size_t kReduceCount = 100003;
  std::vector<float> in(kReduceCount), out(kReduceCount);
  fillReductionInput(lanesFloat32, Reduction::Sum, rank, n, in.data(), kReduceCount, 0, kSalt);
  RANK_CHECK_LANES(
      lanesAllReduce(in.data(), out.data(), kReduceCount, lanesFloat32, lanesSum, c, nullptr), c);
  std::string problem =
      checkReductionOutput(lanesFloat32, Reduction::Sum, n, out.data(), kReduceCount, 0, kSalt);
  RANK_CHECK(problem.empty(), "all-reduce: %s", problem.c_str());
  const std::string ran = lastPlanOf(c);
  RANK_CHECK(allReducePlan.empty() || ran == allReducePlan, "the all-reduce ran on %s, not %s",
             ran.c_str(), allReducePlan.c_str());

  constexpr size_t kGatherBytes = 40000;
  GuardedBuffer gSend(kGatherBytes), gRecv(kGatherBytes * n);
  fillPattern(gSend.data(), kGatherBytes, rank, 0, kSalt);
  RANK_CHECK_LANES(lanesAllGather(gSend.data(), gRecv.data(), kGatherBytes, lanesUint8, c, nullptr),
                   c);
  for (int r = 0; r < n; ++r) {
    problem = checkPattern(gRecv.data() + r * kGatherBytes, kGatherBytes, r, 0, kSalt);
    RANK_CHECK(problem.empty(), "all-gather block of rank %d: %s", r, problem.c_str());
  }

  constexpr size_t kBlockBytes = 1u << 20;
  GuardedBuffer aSend(kBlockBytes * n), aRecv(kBlockBytes * n);
  for (int p = 0; p < n; ++p)
    fillPattern(aSend.data() + p * kBlockBytes, kBlockBytes, rank, p, kSalt);
  RANK_CHECK_LANES(
      lanesAlltoAll(aSend.data(), aRecv.data(), kBlockBytes / 4, lanesInt32, c, nullptr), c);
  for (int p = 0; p < n; ++p) {
    problem = checkPattern(aRecv.data() + p * kBlockBytes, kBlockBytes, p, rank, kSalt);
    RANK_CHECK(problem.empty(), "all-to-all block from rank %d: %s", p, problem.c_str());
  }
}

std::string readLogs(const std::string& dir) {
  std::string all;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::ifstream f(entry.path());
    std::stringstream s;
    s << f.rdbuf();
    all += s.str();
  }
  return all;
}

// Lines saying "<transport>: connected <peers> peers" (the INFO line each
// rank logs per transport after connecting).
int countConnected(const std::string& log, const std::string& transport, int peers) {
  const std::string needle = strprintf("%s: connected %d peer", transport.c_str(), peers);
  int found = 0;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);)
    if (line.find(needle) != std::string::npos) ++found;
  return found;
}

// `allReducePlan`: LANES_ALGO for every rank, and what its all-reduce must run on.
void runTwoHosts(int ranksPerHost, const std::string& allReducePlan = "") {
  VethNamespaces net("t");
  std::string why;
  if (!net.create(&why)) GTEST_SKIP() << why;
  TempDir logs;
  ASSERT_FALSE(logs.path().empty()) << "mkdtemp failed";

  // Set before the first library call here so the log config read then is
  // the one every forked rank inherits.
  const std::string logFile = logs.path() + "/lanes.%h.%p.log";
  ScopedEnv ifname("LANES_SOCKET_IFNAME", "veth");
  ScopedEnv debug("LANES_DEBUG", "INFO");
  ScopedEnv debugFile("LANES_DEBUG_FILE", logFile);

  // The root listener must live in namespace A (address 10.201.x.1): create
  // the id on a thread that entered A; the root thread it starts inherits it.
  lanesUniqueId id;
  lanesResult_t res = lanesInternalError;
  std::string enterError;
  std::thread([&] {
    enterError = enterNetworkNamespace(net.nsA);
    if (enterError.empty()) res = lanesGetUniqueId(&id);
  }).join();
  ASSERT_EQ(enterError, "");
  ASSERT_EQ(res, lanesSuccess) << lanesGetLastError(nullptr);

  const int n = 2 * ranksPerHost;
  RunOptions options;
  options.env = {
      {"LANES_SOCKET_IFNAME", "veth"}, {"LANES_DEBUG", "INFO"}, {"LANES_DEBUG_FILE", logFile}};
  if (!allReducePlan.empty()) options.env.emplace_back("LANES_ALGO", allReducePlan);
  std::vector<std::string> before = listLanesShm();
  {
    ForkedRanks ranks;
    ranks.start(
        n, id,
        [&net, ranksPerHost, allReducePlan](int rank, int nranks, const lanesUniqueId& rid) {
          const bool onA = rank < ranksPerHost;
          std::string err = enterNetworkNamespace(onA ? net.nsA : net.nsB);
          RANK_CHECK(err.empty(), "%s", err.c_str());
          ::setenv("LANES_HOSTID", onA ? "lanes-test-host-a" : "lanes-test-host-b", 1);
          exchangeAcrossHosts(rank, nranks, rid, allReducePlan);
        },
        options);
    for (const auto& o : ranks.wait())
      EXPECT_TRUE(o.finished && o.exited && o.exitCode == 0) << o.describe();
  }
  expectNoShmLeaks(before, "the two-host run");

  const std::string log = readLogs(logs.path());
  // Every rank reaches the other host's ranks over tcp and its own host's
  // ranks over shm; the root listened inside namespace A.
  EXPECT_EQ(countConnected(log, "tcp", ranksPerHost), n)
      << "expected each of the " << n << " ranks to log \"tcp: connected " << ranksPerHost
      << " peers\"; INFO log:\n"
      << log;
  if (ranksPerHost > 1) {
    EXPECT_EQ(countConnected(log, "shm", ranksPerHost - 1), n)
        << "expected each rank to log \"shm: connected " << ranksPerHost - 1
        << " peers\"; INFO log:\n"
        << log;
  }
  EXPECT_NE(log.find("root started at " + net.addrA + ":"), std::string::npos)
      << "the bootstrap root did not listen on " << net.addrA << " in namespace A:\n"
      << log;
}

TEST(NetnsTcp, TwoHostsOneRankEach) { runTwoHosts(1); }
TEST(NetnsTcp, TwoHostsTwoRanksEach) { runTwoHosts(2); }
// The hierarchical all-reduce: shared memory within each namespace, TCP over
// the veth between them (the other collectives: the planner's choice).
TEST(NetnsTcp, TwoHostsTwoRanksEachHierarchical) { runTwoHosts(2, "hierarchical"); }
// Halving-doubling: its exchanges cross the veth at distance 2 and stay in
// each namespace's shared memory at distance 1.
TEST(NetnsTcp, TwoHostsTwoRanksEachHalvingDoubling) { runTwoHosts(2, "halving_doubling"); }

}  // namespace
}  // namespace lanes::test
