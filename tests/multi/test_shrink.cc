// NCCL 2.28's elastic calls: lanesCommShrink (survivors form a new
// communicator, also after a rank died) and lanesCommRevoke (stop this rank's
// use of a communicator without failing it).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Long enough that only the call under test, not a timeout, can end a wait.
const std::pair<std::string, std::string> kLongTimeout{"LANES_TIMEOUT", "90"};
constexpr double kPromptSeconds = 10;  // "at once", on a loaded 2-core machine

void expectFailure(lanesResult_t got, lanesResult_t want, lanesComm_t comm, const char* what,
                   const char* needle) {
  const char* message = lanesGetLastError(comm);
  RANK_CHECK(got == want, "%s returned %d (%s), expected %d (%s); last error: %s", what,
             static_cast<int>(got), lanesGetErrorString(got), static_cast<int>(want),
             lanesGetErrorString(want), message);
  RANK_CHECK(std::strstr(message, needle) != nullptr, "%s: the error does not say \"%s\": %s", what,
             needle, message);
}

// `comm` holds `members` (old ranks, in new-rank order) and reduces over them.
void checkMembers(lanesComm_t comm, int oldRank, const std::vector<int>& members) {
  int count = -1, rank = -1;
  RANK_CHECK_LANES(lanesCommCount(comm, &count), comm);
  RANK_CHECK_LANES(lanesCommUserRank(comm, &rank), comm);
  RANK_CHECK(count == static_cast<int>(members.size()),
             "new communicator has %d ranks, expected %zu", count, members.size());
  RANK_CHECK(rank >= 0 && rank < count && members[rank] == oldRank,
             "old rank %d got new rank %d, which is not its place in the survivors", oldRank, rank);
  constexpr size_t kCount = 10007;
  std::vector<int32_t> mine(kCount), sum(kCount, -1);
  for (size_t i = 0; i < kCount; ++i) mine[i] = (oldRank + 1) * static_cast<int32_t>(i % 13 + 1);
  RANK_CHECK_LANES(
      lanesAllReduce(mine.data(), sum.data(), kCount, lanesInt32, lanesSum, comm, nullptr), comm);
  int32_t weight = 0;
  for (int m : members) weight += m + 1;
  for (size_t i = 0; i < kCount; ++i)
    RANK_CHECK(sum[i] == weight * static_cast<int32_t>(i % 13 + 1),
               "all-reduce on the new communicator: element %zu is %d, expected %d", i, sum[i],
               weight * static_cast<int32_t>(i % 13 + 1));
}

// Ranks in `excluded` only destroy the parent; the others shrink it and check the result.
void shrinkHealthy(int nranks, std::vector<int> excluded) {
  runForked(nranks, [excluded](int rank, int n, const lanesUniqueId& id) {
    CommGuard parent(initComm(rank, n, id));
    std::vector<int> survivors;
    for (int r = 0; r < n; ++r)
      if (std::find(excluded.begin(), excluded.end(), r) == excluded.end()) survivors.push_back(r);
    if (std::find(survivors.begin(), survivors.end(), rank) == survivors.end()) return;
    std::vector<int> list = excluded;
    lanesComm_t raw = nullptr;
    RANK_CHECK_LANES(lanesCommShrink(parent.get(), list.data(), static_cast<int>(list.size()), &raw,
                                     nullptr, LANES_SHRINK_DEFAULT),
                     parent.get());
    CommGuard shrunk(raw);
    RANK_CHECK(raw != nullptr, "lanesCommShrink succeeded but returned no communicator");
    checkMembers(raw, rank, survivors);
  });
}

TEST(Shrink, ExcludesTwoOfFour) { shrinkHealthy(4, {1, 2}); }

// Old rank 1 is the lowest survivor: it hands out the new id.
TEST(Shrink, ThreeRanksExcludingRankZero) { shrinkHealthy(3, {0}); }

TEST(Shrink, ToOneSurvivor) { shrinkHealthy(3, {2, 0}); }

TEST(Shrink, ArgumentErrors) {
  runForked(2, [](int rank, int n, const lanesUniqueId& id) {
    CommGuard parent(initComm(rank, n, id));
    lanesComm_t c = parent.get();
    lanesComm_t out = nullptr;
    int other = 1 - rank;
    expectFailure(lanesCommShrink(nullptr, &other, 1, &out, nullptr, 0), lanesInvalidArgument,
                  nullptr, "shrink of a NULL comm", "comm is NULL");
    expectFailure(lanesCommShrink(c, &other, 1, nullptr, nullptr, 0), lanesInvalidArgument, c,
                  "NULL newcomm", "newcomm is NULL");
    expectFailure(lanesCommShrink(c, nullptr, 1, &out, nullptr, 0), lanesInvalidArgument, c,
                  "NULL list", "excludeRanksList is NULL but excludeRanksCount is 1");
    expectFailure(lanesCommShrink(c, &other, -1, &out, nullptr, 0), lanesInvalidArgument, c,
                  "negative count", "excludeRanksCount is -1");
    int outside[] = {other, 2};
    expectFailure(lanesCommShrink(c, outside, 2, &out, nullptr, 0), lanesInvalidArgument, c,
                  "rank 2 of 2", "excludeRanksList[1] is 2, outside 0..1");
    int negative = -3;
    expectFailure(lanesCommShrink(c, &negative, 1, &out, nullptr, 0), lanesInvalidArgument, c,
                  "rank -3", "excludeRanksList[0] is -3");
    int twice[] = {other, other};
    expectFailure(lanesCommShrink(c, twice, 2, &out, nullptr, 0), lanesInvalidArgument, c,
                  "a duplicate", "appears more than once");
    int everyone[] = {0, 1};
    expectFailure(lanesCommShrink(c, everyone, 2, &out, nullptr, 0), lanesInvalidArgument, c,
                  "excluding everyone", "at least one must remain");
    expectFailure(lanesCommShrink(c, &rank, 1, &out, nullptr, 0), lanesInvalidArgument, c,
                  "excluding the caller",
                  strprintf("rank %d is in excludeRanksList; excluded ranks must not call "
                            "lanesCommShrink",
                            rank)
                      .c_str());
    expectFailure(lanesCommShrink(c, &other, 1, &out, nullptr, 2), lanesInvalidArgument, c,
                  "shrinkFlags 2", "shrinkFlags is 2");
    lanesConfig_t bad = LANES_CONFIG_INITIALIZER;
    bad.magic = 0;
    expectFailure(lanesCommShrink(c, &other, 1, &out, &bad, 0), lanesInvalidArgument, c,
                  "an uninitialised config", "LANES_CONFIG_INITIALIZER");
    expectFailure(lanesCommShrink(c, nullptr, 0, &out, nullptr, 0), lanesInvalidArgument, c,
                  "an empty list", "excludeRanksCount is 0");
    RANK_CHECK(out == nullptr, "a refused shrink set *newcomm");

    // Nothing of the refusals is left behind: the parent still works.
    int64_t value = rank + 1, sum = -1;
    RANK_CHECK_LANES(lanesAllReduce(&value, &sum, 1, lanesInt64, lanesSum, c, nullptr), c);
    RANK_CHECK(sum == 3, "all-reduce after refused shrinks gave %lld", static_cast<long long>(sum));
  });
}

constexpr int kRanks = 4;
constexpr int kVictim = 2;

[[noreturn]] void dieNow() {
  ::kill(::getpid(), SIGKILL);
  for (;;) ::pause();
}

// Rank 2 is SIGKILLed while the others loop on all-reduces; each survivor
// sees its all-reduce fail naming rank 2, then shrinks it away with `flags`.
void shrinkAfterKill(int flags) {
  std::vector<std::string> before = listLanesShm();
  {
    ForkedRanks ranks;
    ranks.start(kRanks, [flags](int rank, int n, const lanesUniqueId& id) {
      CommGuard parent(initComm(rank, n, id));
      std::vector<float> buf(1 << 20, 1.0f);
      std::atomic<bool> started{false};
      std::thread killer;
      if (rank == kVictim) {
        killer = std::thread([&started] {
          while (!started.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          dieNow();
        });
      }
      lanesResult_t res = lanesSuccess;
      for (int i = 0; i < 100000 && res == lanesSuccess; ++i) {
        res = lanesAllReduce(buf.data(), buf.data(), buf.size(), lanesFloat32, lanesMax,
                             parent.get(), nullptr);
        started = true;
      }
      RANK_CHECK(rank != kVictim, "the victim's own all-reduce failed first: %s",
                 lanesGetLastError(parent.get()));
      expectFailure(res, lanesRemoteError, parent.get(), "all-reduce while rank 2 dies", "rank 2");

      int excluded = kVictim;
      lanesComm_t raw = nullptr;
      auto start = Clock::now();
      RANK_CHECK_LANES(lanesCommShrink(parent.get(), &excluded, 1, &raw, nullptr, flags),
                       parent.get());
      CommGuard shrunk(raw);
      RANK_CHECK(since(start) < kPromptSeconds, "lanesCommShrink took %.1f s", since(start));
      checkMembers(raw, rank, {0, 1, 3});
      // The parent keeps its root cause.
      int32_t one = 1, sum = 0;
      expectFailure(lanesAllReduce(&one, &sum, 1, lanesInt32, lanesSum, parent.get(), nullptr),
                    lanesRemoteError, parent.get(), "all-reduce on the parent after the shrink",
                    "rank 2");
    });
    std::vector<RankOutcome> outcomes = ranks.wait();
    ASSERT_EQ(outcomes.size(), static_cast<size_t>(kRanks));
    for (const RankOutcome& o : outcomes) {
      if (o.rank == kVictim)
        EXPECT_TRUE(o.finished && !o.exited && o.signal == SIGKILL) << o.describe();
      else
        EXPECT_TRUE(o.finished && o.exited && o.exitCode == 0) << o.describe();
    }
  }
  expectNoShmLeaks(before, "the shrink after a killed rank");
}

TEST(Shrink, AfterRankKilledWithAbortFlag) { shrinkAfterKill(LANES_SHRINK_ABORT); }

TEST(Shrink, AfterRankKilledWithDefaultFlag) { shrinkAfterKill(LANES_SHRINK_DEFAULT); }

// LANES_SHRINK_ABORT releases this rank's receive that waits on the parent
// (its peer never sends; only rank 0 passes the flag), and leaves the parent
// refusing further work.
TEST(Shrink, AbortFlagReleasesPendingRecv) {
  RunOptions options;
  options.env = {kLongTimeout};
  runForked(
      3,
      [](int rank, int n, const lanesUniqueId& id) {
        CommGuard parent(initComm(rank, n, id));
        if (rank == 2) return;
        std::atomic<bool> waiting{false};
        lanesResult_t recvResult = lanesSuccess;
        double recvSeconds = 0;
        std::thread receiver;
        if (rank == 0) {
          receiver = std::thread([&] {
            std::vector<float> buf(1024);
            waiting = true;
            auto start = Clock::now();
            recvResult = lanesRecv(buf.data(), buf.size(), lanesFloat32, 1, parent.get(), nullptr);
            recvSeconds = since(start);
          });
          while (!waiting.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
        int excluded = 2;
        lanesComm_t raw = nullptr;
        RANK_CHECK_LANES(lanesCommShrink(parent.get(), &excluded, 1, &raw, nullptr,
                                         rank == 0 ? LANES_SHRINK_ABORT : LANES_SHRINK_DEFAULT),
                         parent.get());
        CommGuard shrunk(raw);
        if (rank == 0) {
          receiver.join();
          RANK_CHECK(recvResult != lanesSuccess, "the receive succeeded though nobody sent");
          RANK_CHECK(recvSeconds < kPromptSeconds, "the receive returned after %.1f s",
                     recvSeconds);
          int32_t one = 1, sum = 0;
          expectFailure(lanesAllReduce(&one, &sum, 1, lanesInt32, lanesSum, parent.get(), nullptr),
                        lanesInvalidUsage, parent.get(), "all-reduce on the aborted parent",
                        "LANES_SHRINK_ABORT");
        }
        checkMembers(raw, rank, {0, 1});
      },
      options);
}

// The survivor that should hand out the new id is dead: the others hear of
// it from the bootstrap at once, not at the timeout.
TEST(Shrink, DeadIdSenderIsNamedPromptly) {
  std::vector<std::string> before = listLanesShm();
  {
    SharedCounter ready;
    RunOptions options;
    options.env = {kLongTimeout};
    ForkedRanks ranks;
    ranks.start(
        4,
        [&ready](int rank, int n, const lanesUniqueId& id) {
          CommGuard parent(initComm(rank, n, id));
          ready.arrive();
          if (rank == 0) {
            RANK_CHECK(ready.waitFor(n, 60), "the other ranks never arrived");
            dieNow();
          }
          int excluded = 3;  // leaves; rank 0, which is not excluded, hands out the id
          if (rank == excluded) return;
          lanesComm_t raw = nullptr;
          auto start = Clock::now();
          lanesResult_t res = lanesCommShrink(parent.get(), &excluded, 1, &raw, nullptr, 0);
          expectFailure(res, lanesRemoteError, parent.get(), "shrink without rank 0", "rank 0");
          RANK_CHECK(since(start) < kPromptSeconds, "the shrink failed only after %.1f s",
                     since(start));
          RANK_CHECK(raw == nullptr, "a failed shrink returned a communicator");
        },
        options);
    for (const RankOutcome& o : ranks.wait()) {
      if (o.rank == 0)
        EXPECT_TRUE(o.finished && !o.exited && o.signal == SIGKILL) << o.describe();
      else
        EXPECT_TRUE(o.finished && o.exited && o.exitCode == 0) << o.describe();
    }
  }
  expectNoShmLeaks(before, "the shrink with a dead id sender");
}

// Rank 0 excludes ranks 2 and 3, rank 1 only rank 3: rank 0 hands out the id
// to rank 1 either way, and rank 1 learns from it that they disagree. Rank 0
// then fails on its (short) bootstrap timeout.
TEST(Shrink, DifferentExcludeListsAreReported) {
  RunOptions options;
  options.env = {{"LANES_TIMEOUT", "3"}, {"LANES_BOOTSTRAP_TIMEOUT", "5"}};
  runForked(
      4,
      [](int rank, int n, const lanesUniqueId& id) {
        CommGuard parent(initComm(rank, n, id));
        if (rank >= 2) return;
        int excluded[] = {3, 2};
        lanesComm_t raw = nullptr;
        lanesResult_t res =
            lanesCommShrink(parent.get(), excluded, rank == 0 ? 2 : 1, &raw, nullptr, 0);
        CommGuard shrunk(raw);
        if (rank == 1)
          expectFailure(res, lanesInvalidUsage, parent.get(), "shrink with another list",
                        "different communicators");
        else
          RANK_CHECK(res != lanesSuccess, "rank 0 formed a communicator rank 1 never joined");
      },
      options);
}

// A receive whose sender never sends is woken by lanesCommRevoke from another
// thread; the revoked communicator refuses collectives without having failed,
// and can still be split and shrunk.
TEST(Revoke, WakesBlockedRecvThenSplitAndShrinkWork) {
  RunOptions options;
  options.env = {kLongTimeout};
  // Ranks 1 and 2 revoke only after rank 0 did: their closed connections
  // would otherwise end rank 0's receive before its own revoke could.
  SharedCounter rank0Revoked;
  runForked(
      3,
      [&rank0Revoked](int rank, int n, const lanesUniqueId& id) {
        CommGuard comm(initComm(rank, n, id));
        lanesComm_t c = comm.get();
        if (rank != 0) RANK_CHECK(rank0Revoked.waitFor(1, 60), "rank 0 never revoked");
        if (rank == 0) {
          std::atomic<bool> waiting{false};
          lanesResult_t res = lanesSuccess;
          double took = 0;
          std::thread receiver([&] {
            std::vector<float> buf(1024);
            waiting = true;
            auto start = Clock::now();
            res = lanesRecv(buf.data(), buf.size(), lanesFloat32, 2, c, nullptr);
            took = since(start);
          });
          while (!waiting.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          RANK_CHECK_LANES(lanesCommRevoke(c, 0), c);
          receiver.join();
          rank0Revoked.arrive();
          RANK_CHECK(res != lanesSuccess, "the receive succeeded though nobody sent");
          RANK_CHECK(took < kPromptSeconds, "the revoked receive returned after %.1f s", took);
          RANK_CHECK(std::strstr(lanesGetLastError(c), "revoked") != nullptr,
                     "the receive did not end because of the revoke: %s", lanesGetLastError(c));
        }
        RANK_CHECK_LANES(lanesCommRevoke(c, 0), c);  // rank 0: a second time
        int32_t one = 1, sum = 0;
        expectFailure(lanesAllReduce(&one, &sum, 1, lanesInt32, lanesSum, c, nullptr),
                      lanesInvalidUsage, c, "all-reduce after revoke", "revoked");
        lanesResult_t async = lanesInternalError;
        RANK_CHECK_LANES(lanesCommGetAsyncError(c, &async), c);
        RANK_CHECK(async == lanesSuccess, "lanesCommGetAsyncError is %d (%s) after a revoke",
                   static_cast<int>(async), lanesGetErrorString(async));

        lanesComm_t raw = nullptr;
        RANK_CHECK_LANES(lanesCommSplit(c, 0, rank, &raw, nullptr), c);
        {
          CommGuard split(raw);
          checkMembers(raw, rank, {0, 1, 2});
        }
        if (rank == 1) return;
        int excluded = 1;
        RANK_CHECK_LANES(lanesCommShrink(c, &excluded, 1, &raw, nullptr, 0), c);
        CommGuard shrunk(raw);
        checkMembers(raw, rank, {0, 2});
      },
      options);
}

TEST(Revoke, NonZeroFlagsRefused) {
  runForked(2, [](int rank, int n, const lanesUniqueId& id) {
    CommGuard comm(initComm(rank, n, id));
    expectFailure(lanesCommRevoke(comm.get(), 1), lanesInvalidArgument, comm.get(), "revokeFlags 1",
                  "revokeFlags is 1");
    expectFailure(lanesCommRevoke(nullptr, 0), lanesInvalidArgument, nullptr, "revoke of NULL",
                  "comm is NULL");
    // Refused means not revoked.
    int32_t one = 1, sum = 0;
    RANK_CHECK_LANES(lanesAllReduce(&one, &sum, 1, lanesInt32, lanesSum, comm.get(), nullptr),
                     comm.get());
    RANK_CHECK(sum == n, "all-reduce gave %d, expected %d", sum, n);
  });
}

}  // namespace
}  // namespace lanes::test
