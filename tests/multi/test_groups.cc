// Group semantics across ranks: operations between lanesGroupStart and
// lanesGroupEnd are issued together, so a rank may post all its sends before
// any receive without deadlocking, and several collectives can share a group.
#include <gtest/gtest.h>

#include <vector>

#include "tests/multi/data.h"
#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

// All-to-all written as grouped point-to-point: every send posted before any
// receive, 3 MiB per message, far beyond any transport buffering. Without
// group semantics this deadlocks (and the library timeout turns it into a
// failure).
void groupedAlltoAll(int rank, int n, const lanesUniqueId& id) {
  CommGuard comm(initComm(rank, n, id));
  constexpr size_t kBytes = 3u << 20;
  constexpr size_t kCount = kBytes / sizeof(float);
  constexpr uint32_t kSalt = 99;
  GuardedBuffer send(kBytes * n), recv(kBytes * n);
  for (int p = 0; p < n; ++p) fillPattern(send.data() + p * kBytes, kBytes, rank, p, kSalt);
  for (int round = 0; round < 2; ++round) {
    RANK_CHECK_LANES(lanesGroupStart(), comm.get());
    for (int i = 0; i < n; ++i) {
      int p = (rank + i) % n;  // stagger so every rank starts with a different peer
      RANK_CHECK_LANES(
          lanesSend(send.data() + p * kBytes, kCount, lanesFloat32, p, comm.get(), nullptr),
          comm.get());
    }
    for (int i = 0; i < n; ++i) {
      int p = (rank + n - i) % n;
      RANK_CHECK_LANES(
          lanesRecv(recv.data() + p * kBytes, kCount, lanesFloat32, p, comm.get(), nullptr),
          comm.get());
    }
    RANK_CHECK_LANES(lanesGroupEnd(), comm.get());
    for (int p = 0; p < n; ++p) {
      std::string problem = checkPattern(recv.data() + p * kBytes, kBytes, p, rank, kSalt);
      RANK_CHECK(problem.empty(), "round %d, block from rank %d: %s", round, p, problem.c_str());
    }
    RANK_CHECK(recv.checkGuards().empty(), "%s", recv.checkGuards().c_str());
  }
}

TEST(Groups, AlltoAllAsGroupedSendRecvProcs) { runForked(4, groupedAlltoAll); }
TEST(Groups, AlltoAllAsGroupedSendRecvThreads) { runThreads(3, groupedAlltoAll); }

// Several collectives (two on the same buffers' communicator, different
// kinds and sizes) in one group complete, each with its own correct result.
void collectivesInOneGroup(int rank, int n, const lanesUniqueId& id) {
  CommGuard comm(initComm(rank, n, id));
  constexpr size_t kReduceCount = 4097;
  constexpr size_t kGatherCount = 1000;
  constexpr size_t kBcastBytes = 1u << 20;
  constexpr uint32_t kSalt = 5;
  const int bcastRoot = n - 1;

  std::vector<float> a(kReduceCount), aOut(kReduceCount);
  fillReductionInput(lanesFloat32, Reduction::Sum, rank, n, a.data(), kReduceCount, 0, kSalt);
  std::vector<int32_t> b(kReduceCount);
  fillReductionInput(lanesInt32, Reduction::Max, rank, n, b.data(), kReduceCount, 0, kSalt + 1);
  GuardedBuffer gSend(kGatherCount * 8), gRecv(kGatherCount * 8 * n);
  fillPattern(gSend.data(), gSend.bytes(), rank, 0, kSalt);
  GuardedBuffer bc(kBcastBytes);
  if (rank == bcastRoot) fillPattern(bc.data(), kBcastBytes, bcastRoot, 1, kSalt);

  lanesComm_t c = comm.get();
  RANK_CHECK_LANES(lanesGroupStart(), c);
  RANK_CHECK_LANES(
      lanesAllReduce(a.data(), aOut.data(), kReduceCount, lanesFloat32, lanesSum, c, nullptr), c);
  RANK_CHECK_LANES(
      lanesAllReduce(b.data(), b.data(), kReduceCount, lanesInt32, lanesMax, c, nullptr), c);
  RANK_CHECK_LANES(
      lanesAllGather(gSend.data(), gRecv.data(), kGatherCount, lanesFloat64, c, nullptr), c);
  RANK_CHECK_LANES(
      lanesBroadcast(bc.data(), bc.data(), kBcastBytes, lanesUint8, bcastRoot, c, nullptr), c);
  RANK_CHECK_LANES(lanesGroupEnd(), c);

  std::string problem =
      checkReductionOutput(lanesFloat32, Reduction::Sum, n, aOut.data(), kReduceCount, 0, kSalt);
  RANK_CHECK(problem.empty(), "float32 sum all-reduce: %s", problem.c_str());
  problem =
      checkReductionOutput(lanesInt32, Reduction::Max, n, b.data(), kReduceCount, 0, kSalt + 1);
  RANK_CHECK(problem.empty(), "in-place int32 max all-reduce: %s", problem.c_str());
  for (int r = 0; r < n; ++r) {
    problem = checkPattern(gRecv.data() + r * gSend.bytes(), gSend.bytes(), r, 0, kSalt);
    RANK_CHECK(problem.empty(), "all-gather block of rank %d: %s", r, problem.c_str());
  }
  problem = checkPattern(bc.data(), kBcastBytes, bcastRoot, 1, kSalt);
  RANK_CHECK(problem.empty(), "in-place broadcast: %s", problem.c_str());
}

TEST(Groups, SeveralCollectivesInOneGroupProcs) { runForked(3, collectivesInOneGroup); }
TEST(Groups, SeveralCollectivesInOneGroupThreads) { runThreads(2, collectivesInOneGroup); }

// Nested groups: the inner lanesGroupEnd must not issue the send on its own
// (8 MiB, too big to sit in a transport buffer while the peer also sends).
TEST(Groups, NestedGroupsComplete) {
  runForked(2, [](int rank, int n, const lanesUniqueId& id) {
    CommGuard comm(initComm(rank, n, id));
    lanesComm_t c = comm.get();
    const int peer = 1 - rank;
    std::vector<int64_t> out(1 << 20, rank + 10), in(1 << 20, -1);
    RANK_CHECK_LANES(lanesGroupStart(), c);
    RANK_CHECK_LANES(lanesGroupStart(), c);
    RANK_CHECK_LANES(lanesSend(out.data(), out.size(), lanesInt64, peer, c, nullptr), c);
    RANK_CHECK_LANES(lanesGroupEnd(), c);
    RANK_CHECK_LANES(lanesRecv(in.data(), in.size(), lanesInt64, peer, c, nullptr), c);
    RANK_CHECK_LANES(lanesGroupEnd(), c);
    for (size_t i = 0; i < in.size(); ++i)
      RANK_CHECK(in[i] == peer + 10, "element %zu: got %lld, expected %d", i,
                 static_cast<long long>(in[i]), peer + 10);
  });
}

}  // namespace
}  // namespace lanes::test
