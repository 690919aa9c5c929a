// The hierarchical all-reduce, all-gather and reduce-scatter across hosts
// (algorithms/hierarchical.cc) with real processes: "hosts" made by
// LANES_HOSTID (ranks of different hosts talk TCP over loopback, ranks of
// one host shared memory), in blocks and interleaved with rank order. Every
// datatype and reduction, odd counts and zero, in place and not, forced with
// LANES_ALGO=hierarchical, checked against the test's own arithmetic and
// patterns (tests/multi/data.h): each rank's gathers and reduce-scatters, an
// all-reduce's values on one rank per call, every rank's all-reduce output
// bit-identical; the plan each call ran is read back. Where hosts
// hold different numbers of ranks, a forced hierarchical plan falls back to
// one that runs. tests/multi/test_netns_tcp.cc runs it between network
// namespaces.
#include <gtest/gtest.h>
#include <sched.h>

#include <string>
#include <vector>

#include "core/plan_record.h"
#include "tests/common/scoped_env.h"
#include "tests/multi/data.h"
#include "tests/multi/harness.h"
#include "tests/multi/reduction_matrix.h"

namespace lanes::test {
namespace {

// What the last call ran on, against `plan` ("": anything but the
// hierarchical plan).
PlanCheck planIs(const std::string& plan) {
  return [plan](lanesComm_t c, const char* what) {
    const std::string ran = lastPlanOf(c);
    RANK_CHECK(plan.empty() ? ran != "hierarchical" : ran == plan,
               "%s ran on \"%s\", expected \"%s\"", what, ran.c_str(),
               plan.empty() ? "not hierarchical" : plan.c_str());
  };
}

// `hostOf(rank)` names each rank's host; every rank runs the matrix.
void runOnHosts(int n, std::string (*hostOf)(int), const std::string& plan,
                const std::vector<size_t>& counts) {
  ScopedEnv algo("LANES_ALGO", "hierarchical");
  runForked(n, [&](int rank, int nranks, const lanesUniqueId& id) {
    ::setenv("LANES_HOSTID", hostOf(rank).c_str(), 1);
    CommGuard comm(initComm(rank, nranks, id));
    runReductionMatrix(comm.get(), rank, nranks, counts, planIs(plan));
  });
}

const std::vector<size_t> kCounts = {0, 1, 7, 1025, 100003};

TEST(Hierarchical, TwoHostsOfTwoRanks) {
  runOnHosts(
      4, [](int r) { return std::string(r < 2 ? "lanes-hier-a" : "lanes-hier-b"); }, "hierarchical",
      kCounts);
}

// Hosts interleaved with rank order: host a holds ranks 0, 2, 4, host b 1, 3, 5.
TEST(Hierarchical, TwoHostsOfThreeRanksInterleaved) {
  runOnHosts(6, [](int r) { return std::string(r % 2 == 0 ? "lanes-hier-a" : "lanes-hier-b"); },
             "hierarchical", {0, 1, 7, 100003});
}

TEST(Hierarchical, ThreeHostsOfTwoRanks) {
  runOnHosts(6, [](int r) { return "lanes-hier-" + std::to_string(r / 2); }, "hierarchical",
             {0, 1, 7, 100003});
}

// One host whose CPUs sit on two packages (a model of two packages of one
// CPU each, LANES_TOPO_FILE; each rank pinned to its CPU before init): the
// hierarchical plans group the ranks by package and cross the packages'
// link once, through shared memory. Needs two CPUs.
TEST(Hierarchical, TwoPackagesOfTwoRanksOnOneHost) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  if (!CPU_ISSET(0, &allowed) || !CPU_ISSET(1, &allowed))
    GTEST_SKIP() << "needs CPUs 0 and 1 to pin the ranks to two packages";
  ScopedEnv algo("LANES_ALGO", "hierarchical");
  ScopedEnv model("LANES_TOPO_FILE",
                  std::string(LANES_TOPO_FIXTURES) + "/two_packages_two_cpus.json");
  runForked(4, [](int rank, int nranks, const lanesUniqueId& id) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(rank / 2, &one);
    RANK_CHECK(sched_setaffinity(0, sizeof(one), &one) == 0, "cannot run on CPU %d", rank / 2);
    CommGuard comm(initComm(rank, nranks, id));
    runReductionMatrix(comm.get(), rank, nranks, {0, 1, 7, 1025, 100003}, planIs("hierarchical"));
  });
}

// Two ranks on one host and one on another: LANES_ALGO names nothing that
// serves, so the planner's cheapest runs.
TEST(Hierarchical, UnevenHostsFallBackToAPlanThatRuns) {
  runOnHosts(3, [](int r) { return std::string(r < 2 ? "lanes-hier-a" : "lanes-hier-b"); }, "",
             {1025, 100003});
}

}  // namespace
}  // namespace lanes::test
