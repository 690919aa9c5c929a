// Errors that name the real cause (issue 16, item 4): ranks started with
// different rank counts are all told so at once; a bootstrap that gives up
// names LANES_BOOTSTRAP_TIMEOUT; a rank that never called a collective is
// named ahead of a rank that died meanwhile; a stopped (SIGSTOP) rank is
// named first by every survivor, within LANES_TIMEOUT + 1 s.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "base/socket.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

lanesComm_t initWithTimeout(int rank, int n, const lanesUniqueId& id, int timeout) {
  lanesConfig_t config = LANES_CONFIG_INITIALIZER;
  config.timeoutSeconds = timeout;
  lanesComm_t comm = nullptr;
  RANK_CHECK_LANES(lanesCommInitRankConfig(&comm, n, id, rank, &config), nullptr);
  return comm;
}

// The first rank other than `self` a sentence names ("rank 3 ..."): the
// one a reader takes for the cause.
int firstOtherRank(const std::string& text, int self) {
  static const std::regex kRank("rank (\\d+)");
  for (std::sregex_iterator it(text.begin(), text.end(), kRank), end; it != end; ++it) {
    int r = std::stoi((*it)[1].str());
    if (r != self) return r;
  }
  return -1;
}

// A loopback port nobody listens on (taken, then released).
uint16_t freePort() {
  SocketAddress addr;
  EXPECT_TRUE(SocketAddress::parse("127.0.0.1:0", &addr).isOk());
  Socket s;
  EXPECT_TRUE(Socket::listen(&addr, 1, &s).isOk());
  SocketAddress bound;
  EXPECT_TRUE(s.localAddress(&bound).isOk());
  return bound.port();
}

// "rank A was started with X ranks, rank B with Y", X != Y, on every rank.
void expectSizeMismatchSentence(lanesResult_t res, double took, int rank) {
  const std::string msg = lanesGetLastError(nullptr);
  RANK_CHECK(res == lanesInvalidUsage, "init returned %d (%s), expected lanesInvalidUsage: %s",
             static_cast<int>(res), lanesGetErrorString(res), msg.c_str());
  std::smatch m;
  static const std::regex kSentence(
      "rank (\\d+) was started with (\\d+) ranks, rank (\\d+) with (\\d+)");
  RANK_CHECK(std::regex_search(msg, m, kSentence) && m[2].str() != m[4].str(),
             "rank %d was not told that the ranks disagree on the rank count: %s", rank,
             msg.c_str());
  // Well before the 30 s bootstrap timeout: the root tells everyone at once.
  RANK_CHECK(took < 15, "rank %d heard of the mismatch only after %.1f s", rank, took);
}

// Under a launcher: LANES_WORLD_SIZE says 2 on rank 0 and 3 on ranks 1 and
// 2. The root lives in rank 0's process, so every rank stays until all have
// checked: a rank that comes after that process exited finds no root.
TEST(RootCause, DifferentWorldSizesAreNamedOnEveryRank) {
  SharedCounter reported;
  RunOptions options;
  options.env = {{"LANES_ROOT_ADDR", "127.0.0.1:" + std::to_string(freePort())},
                 {"LANES_JOB_ID", "root-cause-" + std::to_string(::getpid())},
                 {"LANES_BOOTSTRAP_TIMEOUT", "30"},
                 {"LANES_TIMEOUT", "30"}};
  runForked(
      3,
      [&reported](int rank, int n, const lanesUniqueId&) {
        ::setenv("LANES_RANK", std::to_string(rank).c_str(), 1);
        ::setenv("LANES_WORLD_SIZE", rank == 0 ? "2" : "3", 1);
        lanesComm_t comm = nullptr;
        auto start = Clock::now();
        lanesResult_t res = lanesCommInitFromEnv(&comm, nullptr);
        expectSizeMismatchSentence(res, since(start), rank);
        reported.arrive();
        RANK_CHECK(reported.waitFor(n, 60), "the other ranks never reported");
      },
      options);
}

// With one unique id: rank 1 passes nranks 3, rank 0 passes 2.
TEST(RootCause, DifferentRankCountsWithOneIdAreNamedOnEveryRank) {
  RunOptions options;
  options.env = {{"LANES_BOOTSTRAP_TIMEOUT", "30"}, {"LANES_TIMEOUT", "30"}};
  runForked(
      2,
      [](int rank, int, const lanesUniqueId& id) {
        lanesComm_t comm = nullptr;
        auto start = Clock::now();
        lanesResult_t res = lanesCommInitRank(&comm, rank == 1 ? 3 : 2, id, rank);
        expectSizeMismatchSentence(res, since(start), rank);
      },
      options);
}

void expectBootstrapTimeout(lanesResult_t res, double took, const char* what) {
  const std::string msg = lanesGetLastError(nullptr);
  RANK_CHECK(res == lanesTimeout, "%s: init returned %d (%s): %s", what, static_cast<int>(res),
             lanesGetErrorString(res), msg.c_str());
  RANK_CHECK(msg.find("LANES_BOOTSTRAP_TIMEOUT") != std::string::npos &&
                 msg.find("LANES_TIMEOUT") == std::string::npos,
             "%s: the message must name LANES_BOOTSTRAP_TIMEOUT, not LANES_TIMEOUT: %s", what,
             msg.c_str());
  RANK_CHECK(took < 2 + 10, "%s: the 2 s bootstrap timeout took %.1f s", what, took);
}

// Rank 1 never starts: rank 0 waits for the rank table in vain; then it
// joins an id whose root does not exist. LANES_TIMEOUT (1 s) is not the
// limit that expires.
TEST(RootCause, BootstrapTimeoutNamesItsVariable) {
  UniqueIdData dead;
  SocketAddress nowhere;
  ASSERT_TRUE(SocketAddress::parse("127.0.0.1:" + std::to_string(freePort()), &nowhere).isOk());
  ASSERT_TRUE(wire::setRootAddress(nowhere, &dead).isOk());
  lanesUniqueId deadId;
  ASSERT_TRUE(encodeUniqueId(dead, &deadId).isOk());
  RunOptions options;
  options.env = {{"LANES_BOOTSTRAP_TIMEOUT", "2"}, {"LANES_TIMEOUT", "1"}};
  runForked(
      2,
      [deadId](int rank, int n, const lanesUniqueId& id) {
        if (rank == 1) return;  // never joins
        lanesComm_t comm = nullptr;
        auto start = Clock::now();
        lanesResult_t res = lanesCommInitRank(&comm, n, id, rank);
        expectBootstrapTimeout(res, since(start), "waiting for the rank table");
        start = Clock::now();
        res = lanesCommInitRank(&comm, n, deadId, rank);
        expectBootstrapTimeout(res, since(start), "reaching a root that is not there");
      },
      options);
}

constexpr size_t kCount = 1024;

// Ranks 0, 1 and 3 wait in allreduce #1, which rank 2 never calls; after
// 2 s rank 3 is killed. The survivors name rank 2 first, and rank 3 too.
TEST(RootCause, MissingRankNamedWhenAnotherRankDies) {
  constexpr int kSkipper = 2, kVictim = 3;
  std::vector<std::string> before = listLanesShm();
  SharedCounter inCall, done;
  {
    ForkedRanks ranks;
    ranks.start(4, [&](int rank, int n, const lanesUniqueId& id) {
      CommGuard comm(initWithTimeout(rank, n, id, 30));
      std::vector<float> buf(kCount, 1.0f);
      RANK_CHECK_LANES(lanesAllReduce(buf.data(), buf.data(), kCount, lanesFloat32, lanesSum,
                                      comm.get(), nullptr),
                       comm.get());
      if (rank == kSkipper) {
        RANK_CHECK(done.waitFor(2, 60), "the waiting ranks never reported");
        return;
      }
      std::thread killer;
      if (rank == kVictim)
        killer = std::thread([&inCall] {
          (void)inCall.waitFor(3, 60);
          std::this_thread::sleep_for(std::chrono::seconds(2));
          ::kill(::getpid(), SIGKILL);
        });
      inCall.arrive();
      auto start = Clock::now();
      lanesResult_t res = lanesAllReduce(buf.data(), buf.data(), kCount, lanesFloat32, lanesSum,
                                         comm.get(), nullptr);
      double took = since(start);
      RANK_CHECK(rank != kVictim, "the victim's all-reduce returned %d", static_cast<int>(res));
      const std::string msg = lanesGetLastError(comm.get());
      RANK_CHECK(res == lanesRemoteError, "allreduce #1 returned %d (%s): %s",
                 static_cast<int>(res), lanesGetErrorString(res), msg.c_str());
      RANK_CHECK(firstOtherRank(msg, rank) == kSkipper,
                 "rank %d does not name rank 2, which never called, first: %s", rank, msg.c_str());
      RANK_CHECK(msg.find("never called it") != std::string::npos &&
                     msg.find("rank 3 ") != std::string::npos,
                 "rank %d does not say that rank 2 never called and rank 3 died: %s", rank,
                 msg.c_str());
      RANK_CHECK(took < 2 + 15, "the failure took %.1f s", took);
      done.arrive();
      RANK_CHECK(done.waitFor(2, 60), "the other waiting rank never reported");
    });
    for (const RankOutcome& o : ranks.wait()) {
      if (o.rank == kVictim)
        EXPECT_TRUE(o.finished && !o.exited && o.signal == SIGKILL) << o.describe();
      else
        EXPECT_TRUE(o.finished && o.exited && o.exitCode == 0) << o.describe();
    }
  }
  expectNoShmLeaks(before, "the run with a rank that never called");
}

// Rank 2 is stopped (SIGSTOP) in a loop of all-reduces. Every survivor
// fails within LANES_TIMEOUT + 1 s and names rank 2 first, though the ranks
// it waits for directly may be healthy ones blocked behind rank 2.
TEST(RootCause, StoppedRankIsNamedFirstByEverySurvivor) {
  constexpr int kTimeout = 4, kStopped = 2, kRanks = 4;
  std::vector<std::string> before = listLanesShm();
  SharedCounter running, done;
  {
    ForkedRanks ranks;
    ranks.start(kRanks, [&](int rank, int n, const lanesUniqueId& id) {
      CommGuard comm(initWithTimeout(rank, n, id, kTimeout));
      std::vector<float> buf(64 * 1024, 1.0f);
      for (int i = 0;; ++i) {
        auto start = Clock::now();
        lanesResult_t res = lanesAllReduce(buf.data(), buf.data(), buf.size(), lanesFloat32,
                                           lanesMax, comm.get(), nullptr);
        double took = since(start);
        if (res == lanesSuccess) {
          if (i == 0) running.arrive();
          continue;
        }
        const std::string msg = lanesGetLastError(comm.get());
        RANK_CHECK(rank != kStopped, "the stopped rank failed first: %s", msg.c_str());
        RANK_CHECK(res == lanesTimeout, "all-reduce %d returned %d (%s): %s", i,
                   static_cast<int>(res), lanesGetErrorString(res), msg.c_str());
        RANK_CHECK(took <= kTimeout + 1.0, "rank %d noticed the stall after %.2f s: %s", rank, took,
                   msg.c_str());
        RANK_CHECK(firstOtherRank(msg, rank) == kStopped,
                   "rank %d does not name the stopped rank 2 first: %s", rank, msg.c_str());
        done.arrive();
        RANK_CHECK(done.waitFor(kRanks - 1, 60), "the other survivors never reported");
        return;
      }
    });
    ASSERT_TRUE(running.waitFor(kRanks, 60)) << "the ranks never got going";
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ranks.kill(kStopped, SIGSTOP);
    EXPECT_TRUE(done.waitFor(kRanks - 1, 60)) << "the survivors never reported";
    ranks.kill(kStopped, SIGKILL);
    for (const RankOutcome& o : ranks.wait()) {
      if (o.rank == kStopped)
        EXPECT_TRUE(o.finished && !o.exited && o.signal == SIGKILL) << o.describe();
      else
        EXPECT_TRUE(o.finished && o.exited && o.exitCode == 0) << o.describe();
    }
  }
  expectNoShmLeaks(before, "the run with a stopped rank");
}

}  // namespace
}  // namespace lanes::test
