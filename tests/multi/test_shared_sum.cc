// Host summation of host buffers (exec/arena_sum.h, LANES_ALGO=shared_sum):
// every rank's input copied into the communicator's shared arena, each rank
// summing its segment there. Real processes and threads, 2, 3, 5 and 8 ranks,
// every datatype and reduction, odd counts and zero, in place and not, and
// counts of many chunks (slots reused); every rank's all-reduce output
// bit-identical; the plan each call ran read back (all-gather is not served:
// it runs elsewhere). A group of all-reduces on several lanes shares the
// arena in call order. The arena leaves nothing in /dev/shm (the harness
// checks). A rank killed mid-call: tests/multi/test_fault_injection.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/sanitizers.h"
#include "core/plan_record.h"
#include "tests/common/scoped_env.h"
#include "tests/multi/harness.h"
#include "tests/multi/reduction_matrix.h"

namespace lanes::test {
namespace {

void checkSharedSum(lanesComm_t c, const char* what) {
  if (std::string(what) == "all-gather") return;
  const std::string ran = lastPlanOf(c);
  RANK_CHECK(ran == "shared_sum", "%s ran on \"%s\", expected \"shared_sum\"", what, ran.c_str());
}

const std::vector<size_t> kCounts = {0, 1, 7, 1025, 100003};

// ThreadSanitizer takes minutes over the summing of 70-100 thousand elements
// of every type and op on thread ranks sharing two cores, so only the counts
// of one chunk run there; ManyChunksOnThreeThreads covers slot reuse.
std::vector<size_t> countsForThisBuild(std::vector<size_t> counts) {
  if (kUnderThreadSanitizer) std::erase_if(counts, [](size_t c) { return c > 4096; });
  return counts;
}

void runMatrix(RankMode mode, int n, const std::vector<size_t>& allCounts) {
  ScopedEnv algo("LANES_ALGO", "shared_sum");
  const std::vector<size_t> counts = countsForThisBuild(allCounts);
  runRanks(mode, n, [&](int rank, int nranks, const lanesUniqueId& id) {
    CommGuard comm(initComm(rank, nranks, id));
    runReductionMatrix(comm.get(), rank, nranks, counts, checkSharedSum);
  });
}

TEST(SharedSum, TwoProcesses) { runMatrix(RankMode::Process, 2, kCounts); }
TEST(SharedSum, ThreeThreads) { runMatrix(RankMode::Thread, 3, kCounts); }
TEST(SharedSum, FiveProcesses) { runMatrix(RankMode::Process, 5, {0, 1, 1025, 100003}); }
TEST(SharedSum, EightThreads) { runMatrix(RankMode::Thread, 8, {1, 1025, 70001}); }

// Calls of many chunks of float32 through the arena's slots, in place and
// not, all-reduce and reduce-scatter: each element is the exact integer sum.
void runManyChunks(RankMode mode, size_t count) {
  ScopedEnv algo("LANES_ALGO", "shared_sum");
  runRanks(mode, 3, [count](int rank, int n, const lanesUniqueId& id) {
    CommGuard comm(initComm(rank, n, id));
    for (bool inPlace : {false, true}) {
      std::vector<float> send(count * n), recv(count * n, -1.0f);
      for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>((i % 1000) + rank);
      float* in = inPlace ? recv.data() : send.data();
      if (inPlace) recv = send;
      RANK_CHECK_LANES(
          lanesAllReduce(in, recv.data(), count, lanesFloat32, lanesSum, comm.get(), nullptr),
          comm.get());
      for (size_t i = 0; i < count; ++i)
        RANK_CHECK(recv[i] == static_cast<float>(n * (i % 1000) + n * (n - 1) / 2),
                   "all-reduce %s: element %zu is %g", inPlace ? "in place" : "out of place", i,
                   double(recv[i]));
      if (inPlace) recv = send;
      float* out = inPlace ? recv.data() + rank * count : recv.data();
      RANK_CHECK_LANES(
          lanesReduceScatter(in, out, count, lanesFloat32, lanesSum, comm.get(), nullptr),
          comm.get());
      for (size_t i = 0; i < count; ++i) {
        const size_t at = rank * count + i;
        RANK_CHECK(out[i] == static_cast<float>(n * (at % 1000) + n * (n - 1) / 2),
                   "reduce-scatter %s: element %zu is %g", inPlace ? "in place" : "out of place", i,
                   double(out[i]));
      }
      RANK_CHECK(lastPlanOf(comm.get()) == "shared_sum", "ran on %s",
                 lastPlanOf(comm.get()).c_str());
    }
  });
}

// 20 MiB: about 80 chunks of 256 KiB through the arena's 8 slots.
TEST(SharedSum, ManyChunksReuseTheSlots) {
  runManyChunks(RankMode::Process, (size_t{5} << 20) + 3);
}

// 3 MiB: 13 chunks through the 8 slots, on threads, where ThreadSanitizer
// watches the hand-offs.
TEST(SharedSum, ManyChunksOnThreeThreads) {
  runManyChunks(RankMode::Thread, (size_t{3} << 18) + 3);
}

// Four all-reduces in one group spread over three collective lanes run at
// once, each rank's chunks taking the arena in call order: every result right.
TEST(SharedSum, GroupedCallsOnSeveralLanesShareTheArena) {
  ScopedEnv algo("LANES_ALGO", "shared_sum");
  ScopedEnv lanes("LANES_NLANES", "4");
  runForked(3, [](int rank, int n, const lanesUniqueId& id) {
    CommGuard comm(initComm(rank, n, id));
    const std::vector<size_t> counts = {(size_t{1} << 20) + 3, 17, (size_t{3} << 19), 4096};
    std::vector<std::vector<int32_t>> bufs;
    for (size_t count : counts) bufs.emplace_back(count, rank + 1);
    RANK_CHECK_LANES(lanesGroupStart(), comm.get());
    for (auto& b : bufs)
      RANK_CHECK_LANES(
          lanesAllReduce(b.data(), b.data(), b.size(), lanesInt32, lanesSum, comm.get(), nullptr),
          comm.get());
    RANK_CHECK_LANES(lanesGroupEnd(), comm.get());
    const int32_t want = n * (n + 1) / 2;
    for (size_t k = 0; k < bufs.size(); ++k)
      for (size_t i = 0; i < bufs[k].size(); ++i)
        RANK_CHECK(bufs[k][i] == want, "call %zu element %zu is %d, expected %d", k, i, bufs[k][i],
                   want);
    RANK_CHECK(lastPlanOf(comm.get()) == "shared_sum", "the group ran on %s",
               lastPlanOf(comm.get()).c_str());
  });
}

}  // namespace
}  // namespace lanes::test
