// The hierarchical all-reduce, all-gather and reduce-scatter across hosts
// (algorithms/hierarchical.cc) with real processes: "hosts" made by
// LANES_HOSTID (ranks of different hosts talk TCP over loopback, ranks of
// one host shared memory), in blocks and interleaved with rank order. Every
// datatype and reduction, odd counts and zero, in place and not, forced with
// LANES_ALGO=hierarchical, each rank checked against the test's own
// arithmetic and patterns (tests/multi/data.h) and every rank's all-reduce
// output bit-identical; the plan each call ran is read back. Where hosts
// hold different numbers of ranks, a forced hierarchical plan falls back to
// one that runs. tests/multi/test_netns_tcp.cc runs it between network
// namespaces.
#include <gtest/gtest.h>

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

// Two ranks on one host and one on another: LANES_ALGO names nothing that
// serves, so the planner's cheapest runs.
TEST(Hierarchical, UnevenHostsFallBackToAPlanThatRuns) {
  runOnHosts(3, [](int r) { return std::string(r < 2 ? "lanes-hier-a" : "lanes-hier-b"); }, "",
             {1025, 100003});
}

}  // namespace
}  // namespace lanes::test
