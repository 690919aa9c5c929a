// Hang diagnosis: a rank that skips a collective makes every waiting rank
// fail with lanesTimeout naming the operation, its number, the missing rank
// and what that rank last completed; LANES_CHECK_MISMATCH=1 turns mismatched
// calls (kind, count, datatype, send/recv sizes) into lanesInvalidUsage on
// every rank naming both calls, and leaves the communicator usable.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTimeout = 5;            // LANES_TIMEOUT of the hang tests (s)
constexpr double kMarginSeconds = 20;  // diagnosis + a loaded 2-core machine
constexpr size_t kCount = 1024;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

lanesComm_t initWithTimeout(int rank, int n, const lanesUniqueId& id, int timeout, int blocking) {
  lanesConfig_t config = LANES_CONFIG_INITIALIZER;
  config.timeoutSeconds = timeout;
  config.blocking = blocking;
  lanesComm_t comm = nullptr;
  lanesResult_t res = lanesCommInitRankConfig(&comm, n, id, rank, &config);
  // Non-blocking: the init runs in the background until GetAsyncError says so.
  if (blocking == 0 && res == lanesInProgress) {
    auto start = Clock::now();
    while (res == lanesInProgress && since(start) < kMarginSeconds) {
      RANK_CHECK_LANES(lanesCommGetAsyncError(comm, &res), comm);
      if (res == lanesInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  RANK_CHECK_LANES(res, comm);
  return comm;
}

void expectMentions(lanesComm_t comm, const std::string& what) {
  const char* msg = lanesGetLastError(comm);
  RANK_CHECK(msg != nullptr && std::strstr(msg, what.c_str()) != nullptr,
             "lanesGetLastError does not mention \"%s\": \"%s\"", what.c_str(), msg ? msg : "");
}

// Every rank runs allreduce #0; then `skipper` skips allreduce #1 and the
// others must time out with a diagnosis naming it. Nobody tears down before
// all waiting ranks checked their error (an abort would be reported instead).
void skippedCollective(int n, int skipper, int blocking, size_t count, SharedCounter& done,
                       int rank, const lanesUniqueId& id) {
  CommGuard comm(initWithTimeout(rank, n, id, kTimeout, blocking));
  std::vector<float> buf(count, 1.0f);
  RANK_CHECK_LANES(
      lanesAllReduce(buf.data(), buf.data(), count, lanesFloat32, lanesSum, comm.get(), nullptr),
      comm.get());
  RANK_CHECK(buf[0] == static_cast<float>(n), "allreduce #0 gave %f", buf[0]);
  if (rank == skipper) {
    RANK_CHECK(done.waitFor(n - 1, 120), "the waiting ranks never reported");
    return;
  }
  auto start = Clock::now();
  lanesResult_t res =
      lanesAllReduce(buf.data(), buf.data(), count, lanesFloat32, lanesSum, comm.get(), nullptr);
  double took = since(start);
  RANK_CHECK(res == lanesTimeout, "allreduce #1 returned %d (%s), expected lanesTimeout: %s",
             static_cast<int>(res), lanesGetErrorString(res), lanesGetLastError(comm.get()));
  RANK_CHECK(took <= kTimeout + kMarginSeconds, "the timeout took %.1f s (LANES_TIMEOUT %d s)",
             took, kTimeout);
  expectMentions(comm.get(), strprintf("allreduce #1 (count %zu float32 sum)", count));
  expectMentions(comm.get(),
                 strprintf("rank %d (last completed #0, no operation running)", skipper));
  lanesResult_t async = lanesSuccess;
  RANK_CHECK_LANES(lanesCommGetAsyncError(comm.get(), &async), comm.get());
  RANK_CHECK(async == lanesTimeout, "lanesCommGetAsyncError gave %d, expected lanesTimeout",
             static_cast<int>(async));
  done.arrive();
  RANK_CHECK(done.waitFor(n - 1, 120), "the other waiting ranks never reported");
}

TEST(HangDiagnosis, SkippedCollectiveNamesTheMissingRank) {
  SharedCounter done;
  runForked(3, [&done](int rank, int n, const lanesUniqueId& id) {
    skippedCollective(n, /*skipper=*/2, /*blocking=*/1, kCount, done, rank, id);
  });
}

// Four ranks on a ring (128 KiB): most ranks wait on a neighbour that waits
// too, yet every one names the rank that skipped.
TEST(HangDiagnosis, SkippedRingCollectiveFourRanks) {
  SharedCounter done;
  runForked(4, [&done](int rank, int n, const lanesUniqueId& id) {
    skippedCollective(n, /*skipper=*/1, /*blocking=*/1, 32768, done, rank, id);
  });
}

TEST(HangDiagnosis, NonBlockingCommReportsAsyncTimeout) {
  SharedCounter done;
  runForked(2, [&done](int rank, int n, const lanesUniqueId& id) {
    skippedCollective(n, /*skipper=*/1, /*blocking=*/0, kCount, done, rank, id);
  });
}

// With the check on, the skipped collective is found in the signature
// exchange: the waiting ranks time out naming the rank that never sent one.
TEST(HangDiagnosis, SkippedCollectiveUnderMismatchCheck) {
  SharedCounter done;
  RunOptions options;
  options.env = {{"LANES_CHECK_MISMATCH", "1"}};
  runForked(
      3,
      [&done](int rank, int n, const lanesUniqueId& id) {
        CommGuard comm(initWithTimeout(rank, n, id, kTimeout, 1));
        std::vector<float> buf(kCount, 1.0f);
        RANK_CHECK_LANES(lanesAllReduce(buf.data(), buf.data(), kCount, lanesFloat32, lanesSum,
                                        comm.get(), nullptr),
                         comm.get());
        if (rank == 1) {
          RANK_CHECK(done.waitFor(n - 1, 120), "the waiting ranks never reported");
          return;
        }
        lanesResult_t res = lanesAllReduce(buf.data(), buf.data(), kCount, lanesFloat32, lanesSum,
                                           comm.get(), nullptr);
        RANK_CHECK(res == lanesTimeout, "returned %d, expected lanesTimeout: %s",
                   static_cast<int>(res), lanesGetLastError(comm.get()));
        expectMentions(comm.get(), "still waiting for rank 1 (last completed #0");
        done.arrive();
        RANK_CHECK(done.waitFor(n - 1, 120), "the other waiting ranks never reported");
      },
      options);
}

// Each rank issues `call(rank)`; all but `bystander` must fail with
// lanesInvalidUsage whose message contains every string of `expected`; then
// a matching all-reduce still works on the same communicator.
using Call = lanesResult_t (*)(int rank, lanesComm_t comm, std::vector<float>& buf);

void mismatch(int nranks, Call call, std::vector<std::string> expected, int bystander = -1) {
  RunOptions options;
  options.env = {{"LANES_CHECK_MISMATCH", "1"}};
  runForked(
      nranks,
      [call, expected, bystander](int rank, int n, const lanesUniqueId& id) {
        CommGuard comm(initWithTimeout(rank, n, id, 30, 1));
        std::vector<float> buf(kCount, 1.0f);
        if (rank != bystander) {
          lanesResult_t res = call(rank, comm.get(), buf);
          RANK_CHECK(res == lanesInvalidUsage, "returned %d (%s), expected lanesInvalidUsage: %s",
                     static_cast<int>(res), lanesGetErrorString(res),
                     lanesGetLastError(comm.get()));
          for (const std::string& e : expected) expectMentions(comm.get(), e);
        }
        std::fill(buf.begin(), buf.end(), 2.0f);
        RANK_CHECK_LANES(lanesAllReduce(buf.data(), buf.data(), kCount, lanesFloat32, lanesSum,
                                        comm.get(), nullptr),
                         comm.get());
        RANK_CHECK(buf[kCount - 1] == 2.0f * n, "the all-reduce after the mismatch gave %f",
                   buf[kCount - 1]);
      },
      options);
}

TEST(HangDiagnosis, MismatchAllReduceVsBroadcast) {
  mismatch(3,
           [](int rank, lanesComm_t comm, std::vector<float>& buf) {
             if (rank == 1)
               return lanesBroadcast(buf.data(), buf.data(), kCount, lanesInt32, 0, comm, nullptr);
             return lanesAllReduce(buf.data(), buf.data(), kCount, lanesFloat32, lanesSum, comm,
                                   nullptr);
           },
           {"collective #0", "rank 1 called broadcast(count 1024 int32 root 0)",
            "rank 0 called allreduce(count 1024 float32 sum)"});
}

TEST(HangDiagnosis, MismatchCount) {
  mismatch(3,
           [](int rank, lanesComm_t comm, std::vector<float>& buf) {
             size_t count = rank == 2 ? kCount / 2 : kCount;
             return lanesAllReduce(buf.data(), buf.data(), count, lanesFloat32, lanesSum, comm,
                                   nullptr);
           },
           {"rank 2 called allreduce(count 512 float32 sum)",
            "rank 0 called allreduce(count 1024 float32 sum)", "differ in count"});
}

TEST(HangDiagnosis, MismatchDatatype) {
  mismatch(2,
           [](int rank, lanesComm_t comm, std::vector<float>& buf) {
             lanesDataType_t type = rank == 1 ? lanesInt32 : lanesFloat32;
             return lanesAllReduce(buf.data(), buf.data(), kCount, type, lanesSum, comm, nullptr);
           },
           {"rank 1 called allreduce(count 1024 int32 sum)", "differ in datatype"});
}

// Rank 0 sends 1024 floats to rank 1, which receives 512: both fail naming
// both calls; rank 2 takes no part and runs nothing.
TEST(HangDiagnosis, MismatchSendRecvCount) {
  mismatch(
      3,
      [](int rank, lanesComm_t comm, std::vector<float>& buf) {
        if (rank == 0) return lanesSend(buf.data(), kCount, lanesFloat32, 1, comm, nullptr);
        return lanesRecv(buf.data(), kCount / 2, lanesFloat32, 0, comm, nullptr);
      },
      {"send(count 1024 float32 to rank 1)", "recv(count 512 float32 from rank 0)"},
      /*bystander=*/2);
}

// Matching calls (collectives of several kinds and a send/recv ring in a
// group) give correct results, with the check off and on.
void matchingCalls(int rank, int n, const lanesUniqueId& id) {
  CommGuard comm(initWithTimeout(rank, n, id, 30, 1));
  for (int round = 0; round < 3; ++round) {
    std::vector<float> buf(kCount, static_cast<float>(rank + 1));
    RANK_CHECK_LANES(
        lanesAllReduce(buf.data(), buf.data(), kCount, lanesFloat32, lanesSum, comm.get(), nullptr),
        comm.get());
    RANK_CHECK(buf[7] == n * (n + 1) / 2.0f, "allreduce gave %f", buf[7]);
    std::vector<int32_t> ints(kCount, rank == 1 ? 42 + round : -1);
    RANK_CHECK_LANES(
        lanesBroadcast(ints.data(), ints.data(), kCount, lanesInt32, 1, comm.get(), nullptr),
        comm.get());
    RANK_CHECK(ints[kCount - 1] == 42 + round, "broadcast gave %d", ints[kCount - 1]);
    std::vector<float> out(kCount, 0), in(kCount, 0);
    std::fill(out.begin(), out.end(), static_cast<float>(rank));
    RANK_CHECK_LANES(lanesGroupStart(), comm.get());
    RANK_CHECK_LANES(
        lanesSend(out.data(), kCount, lanesFloat32, (rank + 1) % n, comm.get(), nullptr),
        comm.get());
    RANK_CHECK_LANES(
        lanesRecv(in.data(), kCount, lanesFloat32, (rank + n - 1) % n, comm.get(), nullptr),
        comm.get());
    RANK_CHECK_LANES(lanesGroupEnd(), comm.get());
    RANK_CHECK(in[3] == static_cast<float>((rank + n - 1) % n), "ring send/recv gave %f", in[3]);
  }
}

TEST(HangDiagnosis, MatchingCallsWorkWithCheckOff) {
  RunOptions options;
  options.env = {{"LANES_CHECK_MISMATCH", "0"}};
  runForked(3, matchingCalls, options);
}

TEST(HangDiagnosis, MatchingCallsWorkWithCheckOn) {
  RunOptions options;
  options.env = {{"LANES_CHECK_MISMATCH", "1"}};
  runForked(3, matchingCalls, options);
}

}  // namespace
}  // namespace lanes::test
