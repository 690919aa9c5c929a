// Fault injection, each scenario repeated with a random delay before the
// fault (LANES_FAULT_REPEAT runs, default 3): a rank SIGKILLed before, during
// and after a collective; a peer's TCP connections reset; a peer silently
// stalled (its link taken down in a network namespace); a peer that never
// joins the bootstrap; lanesCommAbort while a call waits; destroy while a call
// is in flight. Every surviving rank must fail within the timeout + a margin
// with the peer named, hold no more descriptors than before its first
// communicator, and then build a new communicator in the same process whose
// all-reduce is right. /dev/shm must be clean after each run. The worst
// detection time per scenario is printed ("[fault] ...") and recorded as a
// test property.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "tests/common/scoped_env.h"
#include "tests/multi/harness.h"
#include "tests/multi/veth_namespaces.h"

namespace lanes::test {
namespace {

constexpr int kRanks = 3;
constexpr int kVictim = 2;
constexpr int kTimeoutSeconds = 3;     // LANES_TIMEOUT of these runs
constexpr double kMarginSeconds = 10;  // a loaded 2-core machine
constexpr size_t kCount = 1u << 20;    // floats per all-reduce (4 MiB)
// How long a victim that stays alive waits for the survivors to finish (a
// survivor that fails exits at once and never says so).
constexpr double kVictimWaitSeconds = 40;

// Shared slots: when the fault happened, and per rank when its failing call
// started and returned (monotonic ns, 0 = not yet).
constexpr int kFaultAt = 0;
int callAt(int rank) { return 1 + rank; }
int returnAt(int rank) { return 1 + kRanks + rank; }
constexpr int kSlots = 1 + 2 * kRanks;

double seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

void sleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

[[noreturn]] void dieNow() {
  ::kill(::getpid(), SIGKILL);
  for (;;) ::pause();
}

// What one run of a scenario shares between the test and its ranks.
struct RunState {
  SharedSlots slots{kSlots};
  SharedCounter ready;     // ranks past set-up (warm-up done)
  SharedCounter finished;  // survivors done with their checks
  SharedCounter aborted;   // the victim's lanesCommAbort returned
  lanesUniqueId first{};   // the communicator that fails
  lanesUniqueId second{};  // the one built afterwards
  int delayMs = 0;         // random delay before the fault
};

void waitForFault(const RunState& s) {
  for (int i = 0; i < 60000 && s.slots[kFaultAt].load() == 0; ++i) sleepMs(1);
}

// A survivor's failed call: the right code, `peer` named, and in time.
void expectPeerFailure(lanesResult_t res, lanesComm_t comm, int peer, const RunState& s, int rank,
                       double limitSeconds, const char* what) {
  s.slots[returnAt(rank)] = monotonicNs();
  const char* message = lanesGetLastError(comm);
  RANK_CHECK(res == lanesRemoteError || res == lanesTimeout,
             "%s returned %d (%s), expected lanesRemoteError or lanesTimeout: %s", what,
             static_cast<int>(res), lanesGetErrorString(res), message);
  // "rank 2", or in the root's list of missing ones "(ranks 2)".
  std::string name = strprintf("rank %d", peer), listed = strprintf("ranks %d", peer);
  RANK_CHECK(std::strstr(message, name.c_str()) != nullptr ||
                 std::strstr(message, listed.c_str()) != nullptr,
             "%s failed without naming %s: \"%s\"", what, name.c_str(), message);
  int64_t from = std::max(s.slots[kFaultAt].load(), s.slots[callAt(rank)].load());
  double took = seconds(s.slots[returnAt(rank)].load() - from);
  RANK_CHECK(took <= limitSeconds + kMarginSeconds,
             "%s took %.2f s to fail, more than %.0f s + %.0f s margin", what, took, limitSeconds,
             kMarginSeconds);
}

// Loops all-reduces until one fails; returns its result. rank 'ready' is
// announced after the first success.
lanesResult_t loopUntilFailure(lanesComm_t comm, int rank, const RunState& s, bool* announced) {
  std::vector<float> buf(kCount, 1.0f);
  for (int i = 0; i < 1000000; ++i) {
    s.slots[callAt(rank)] = monotonicNs();
    lanesResult_t res =
        lanesAllReduce(buf.data(), buf.data(), buf.size(), lanesFloat32, lanesMax, comm, nullptr);
    if (res != lanesSuccess) return res;
    if (!*announced) {
      *announced = true;
      const_cast<SharedCounter&>(s.ready).arrive();
    }
  }
  rankFail(__FILE__, __LINE__, "a million all-reduces succeeded although a peer failed");
}

// The same process builds a new communicator from `id` and checks an
// all-reduce on it, then checks that no descriptor outlived both
// communicators. Ranks `members` (old numbering) take part, in order.
void recover(int rank, const std::vector<int>& members, const lanesUniqueId& id, int fdsBefore) {
  const int newRank =
      static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  const int n = static_cast<int>(members.size());
  {
    CommGuard fresh(initComm(newRank, n, id));
    std::vector<int32_t> mine(4099, rank + 1), total(4099, -1);
    RANK_CHECK_LANES(lanesAllReduce(mine.data(), total.data(), mine.size(), lanesInt32, lanesSum,
                                    fresh.get(), nullptr),
                     fresh.get());
    int32_t expected = 0;
    for (int m : members) expected += m + 1;
    for (size_t i = 0; i < total.size(); ++i)
      RANK_CHECK(total[i] == expected, "new communicator: element %zu is %d, expected %d", i,
                 total[i], expected);
  }
  int fds = countOpenFds();
  RANK_CHECK(fds <= fdsBefore,
             "%d descriptors open after both communicators are gone, %d before the first: the "
             "library leaked %d",
             fds, fdsBefore, fds - fdsBefore);
}

const std::vector<int> kSurvivors = {0, 1};
const std::vector<int> kEveryone = {0, 1, 2};

struct RunSetup {
  RunOptions options;
  int killedRank = -1;  // expected to die of SIGKILL
  double limitSeconds = kTimeoutSeconds;
  std::vector<int> measured = kSurvivors;  // ranks whose detection time counts
  // Makes the ids (default: here, so the root lives in this process).
  std::function<bool(RunState&)> makeIds;
  // Runs in the test process after the ranks started (e.g. cuts a link).
  std::function<void(RunState&)> inject;
};

// One run: forks the ranks, checks their outcomes and /dev/shm, and returns
// the detection time (the slowest measured rank), or -1 on failure.
double runOnce(const RankBody& body, RunState& state, const RunSetup& setup) {
  std::vector<std::string> shmBefore = listLanesShm();
  double worst = -1;
  {
    ForkedRanks ranks;
    RunOptions options = setup.options;
    options.checkShmLeaks = false;
    ranks.start(kRanks, state.first, body, options);
    if (setup.inject) setup.inject(state);
    bool ok = true;
    for (const auto& o : ranks.wait()) {
      if (o.rank == setup.killedRank) {
        ok &= o.finished && !o.exited && o.signal == SIGKILL;
        EXPECT_TRUE(o.finished && !o.exited && o.signal == SIGKILL)
            << "the victim should have died of SIGKILL: " << o.describe();
      } else {
        ok &= o.finished && o.exited && o.exitCode == 0;
        EXPECT_TRUE(o.finished && o.exited && o.exitCode == 0) << o.describe();
      }
    }
    if (ok) {
      for (int r : setup.measured) {
        int64_t from = std::max(state.slots[kFaultAt].load(), state.slots[callAt(r)].load());
        worst = std::max(worst, seconds(state.slots[returnAt(r)].load() - from));
      }
    }
  }
  expectNoShmLeaks(shmBefore, "the fault-injection run");
  return worst;
}

// Runs a scenario faultRepeat() times with fresh random delays and reports
// the worst detection time.
void repeatScenario(const char* name, int maxDelayMs,
                    const std::function<RankBody(RunState&)>& makeBody, RunSetup setup) {
  const int runs = faultRepeat(3);
  std::random_device seedSource;
  std::mt19937 rng(seedSource());
  double worst = 0;
  for (int i = 0; i < runs && !::testing::Test::HasFailure(); ++i) {
    RunState state;
    state.delayMs = std::uniform_int_distribution<int>(0, maxDelayMs)(rng);
    if (setup.makeIds) {
      if (!setup.makeIds(state)) return;
    } else {
      ASSERT_EQ(lanesGetUniqueId(&state.first), lanesSuccess) << lanesGetLastError(nullptr);
      ASSERT_EQ(lanesGetUniqueId(&state.second), lanesSuccess) << lanesGetLastError(nullptr);
    }
    double t = runOnce(makeBody(state), state, setup);
    EXPECT_GE(t, 0) << name << " run " << i << " (delay " << state.delayMs << " ms) failed";
    worst = std::max(worst, t);
  }
  if (::testing::Test::HasFailure()) return;
  std::printf("[fault] %s: %d runs, worst detection %.2f s\n", name, runs, worst);
  std::fflush(stdout);
  ::testing::Test::RecordProperty("runs", runs);
  ::testing::Test::RecordProperty("worst_detection_s", strprintf("%.3f", worst));
}

RunSetup defaultSetup() {
  RunSetup setup;
  setup.options.env = {{"LANES_TIMEOUT", std::to_string(kTimeoutSeconds)}};
  return setup;
}

TEST(FaultInjection, SigkillBeforeCollective) {
  RunSetup setup = defaultSetup();
  setup.killedRank = kVictim;
  repeatScenario(
      "sigkill-before", 300,
      [](RunState& s) -> RankBody {
        return [&s](int rank, int n, const lanesUniqueId& id) {
          const int fds = countOpenFds();
          CommGuard comm(initComm(rank, n, id));
          s.ready.arrive();
          if (rank == kVictim) {
            RANK_CHECK(s.ready.waitFor(n, 60), "the other ranks never arrived");
            sleepMs(s.delayMs);
            s.slots[kFaultAt] = monotonicNs();
            dieNow();
          }
          std::vector<float> buf(kCount, 1.0f);
          s.slots[callAt(rank)] = monotonicNs();
          lanesResult_t res = lanesAllReduce(buf.data(), buf.data(), buf.size(), lanesFloat32,
                                             lanesSum, comm.get(), nullptr);
          expectPeerFailure(res, comm.get(), kVictim, s, rank, kTimeoutSeconds, "all-reduce");
          lanesCommAbort(comm.release());
          recover(rank, kSurvivors, s.second, fds);
        };
      },
      setup);
}

// The victim dies at a random moment while every rank loops over all-reduces.
void sigkillDuring(const char* name, RunSetup setup) {
  setup.killedRank = kVictim;
  repeatScenario(
      name, 500,
      [](RunState& s) -> RankBody {
        return [&s](int rank, int n, const lanesUniqueId& id) {
          const int fds = countOpenFds();
          CommGuard comm(initComm(rank, n, id));
          std::thread killer;
          if (rank == kVictim) {
            killer = std::thread([&s, n] {
              RANK_CHECK(s.ready.waitFor(n, 60), "the ranks never warmed up");
              sleepMs(s.delayMs);
              s.slots[kFaultAt] = monotonicNs();
              dieNow();
            });
          }
          bool announced = false;
          lanesResult_t res = loopUntilFailure(comm.get(), rank, s, &announced);
          RANK_CHECK(rank != kVictim, "the victim's own all-reduce failed first: %s",
                     lanesGetLastError(comm.get()));
          expectPeerFailure(res, comm.get(), kVictim, s, rank, kTimeoutSeconds, "all-reduce");
          lanesCommAbort(comm.release());
          recover(rank, kSurvivors, s.second, fds);
        };
      },
      setup);
}

TEST(FaultInjection, SigkillDuringCollectives) { sigkillDuring("sigkill-during", defaultSetup()); }

// The same through host summation's shared arena (exec/arena_sum.h): the
// survivors poll its counters, and the dead rank's never move again.
TEST(FaultInjection, SigkillDuringSharedSumCollectives) {
  RunSetup setup = defaultSetup();
  setup.options.env.push_back({"LANES_ALGO", "shared_sum"});
  sigkillDuring("sigkill-during-shared-sum", setup);
}

TEST(FaultInjection, SigkillAfterCollective) {
  RunSetup setup = defaultSetup();
  setup.killedRank = kVictim;
  repeatScenario(
      "sigkill-after", 300,
      [](RunState& s) -> RankBody {
        return [&s](int rank, int n, const lanesUniqueId& id) {
          const int fds = countOpenFds();
          CommGuard comm(initComm(rank, n, id));
          int32_t one = 1, sum = 0;
          RANK_CHECK_LANES(lanesAllReduce(&one, &sum, 1, lanesInt32, lanesSum, comm.get(), nullptr),
                           comm.get());
          RANK_CHECK(sum == n, "warm-up all-reduce gave %d, expected %d", sum, n);
          s.ready.arrive();
          if (rank == kVictim) {
            RANK_CHECK(s.ready.waitFor(n, 60), "the other ranks never arrived");
            sleepMs(s.delayMs);
            s.slots[kFaultAt] = monotonicNs();
            dieNow();
          }
          // The survivors come back only after the victim is gone.
          waitForFault(s);
          sleepMs(s.delayMs / 2);
          std::vector<float> buf(kCount, 1.0f);
          s.slots[callAt(rank)] = monotonicNs();
          lanesResult_t res = lanesAllReduce(buf.data(), buf.data(), buf.size(), lanesFloat32,
                                             lanesSum, comm.get(), nullptr);
          expectPeerFailure(res, comm.get(), kVictim, s, rank, kTimeoutSeconds, "all-reduce");
          lanesCommAbort(comm.release());
          recover(rank, kSurvivors, s.second, fds);
        };
      },
      setup);
}

// Resets every TCP connection of this process (RST to the peer) without
// ending it: SO_LINGER 0, then the descriptor is swapped for /dev/null, so
// the library's threads keep a valid descriptor that reads end-of-file.
int resetAllTcpConnections() {
  int devNull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devNull < 0) return 0;
  int reset = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    int type = 0, listening = 0, domain = 0;
    socklen_t len = sizeof(int);
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    len = sizeof(int);
    if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 ||
        (domain != AF_INET && domain != AF_INET6))
      continue;
    len = sizeof(int);
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening) continue;
    linger abortive{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abortive, sizeof(abortive));
    if (::dup3(devNull, fd, O_CLOEXEC) == fd) ++reset;
  }
  ::close(devNull);
  return reset;
}

TEST(FaultInjection, TcpConnectionReset) {
  RunSetup setup = defaultSetup();
  setup.options.env.push_back({"LANES_SHM_DISABLE", "1"});
  repeatScenario(
      "tcp-reset", 500,
      [](RunState& s) -> RankBody {
        return [&s](int rank, int n, const lanesUniqueId& id) {
          const int fds = countOpenFds();
          lanesComm_t comm = initComm(rank, n, id);
          std::thread resetter;
          if (rank == kVictim) {
            resetter = std::thread([&s, n] {
              RANK_CHECK(s.ready.waitFor(n, 60), "the ranks never warmed up");
              sleepMs(s.delayMs);
              s.slots[kFaultAt] = monotonicNs();
              int count = resetAllTcpConnections();
              RANK_CHECK(count > 0, "rank 2 had no TCP connection to reset");
            });
          }
          bool announced = false;
          lanesResult_t res = loopUntilFailure(comm, rank, s, &announced);
          if (rank == kVictim) {
            // Its own connections are gone; it stays alive (the survivors
            // must learn of the reset from the network, not from an exit)
            // until they are done, then leaves without touching them.
            resetter.join();
            (void)s.finished.waitFor(2, kVictimWaitSeconds);  // they report their own failures
            _exit(0);
          }
          expectPeerFailure(res, comm, kVictim, s, rank, kTimeoutSeconds, "all-reduce");
          lanesCommAbort(comm);
          recover(rank, kSurvivors, s.second, fds);
          s.finished.arrive();
        };
      },
      setup);
}

// Ranks 0 and 1 on "host" A, rank 2 on B; B's link goes down mid-loop, so
// nothing (no FIN, no RST) tells the survivors: only LANES_TIMEOUT can.
TEST(FaultInjection, TcpPeerSilentlyStalled) {
  VethNamespaces net("st");
  std::string why;
  if (!net.create(&why)) GTEST_SKIP() << why;
  RunSetup setup = defaultSetup();
  setup.options.env.push_back({"LANES_SOCKET_IFNAME", "veth"});
  // The ids (and their root listeners) live in namespace A.
  setup.makeIds = [&net](RunState& s) {
    // The previous run left the link down: A's end has no carrier until B's
    // end is up again, and the roots must listen on it, not on loopback.
    std::string upWhy;
    EXPECT_TRUE(net.setLinkB(true, &upWhy)) << upWhy;
    ScopedEnv ifname("LANES_SOCKET_IFNAME", "veth");
    std::string err;
    lanesResult_t r1 = lanesInternalError, r2 = lanesInternalError;
    std::thread([&] {
      err = enterNetworkNamespace(net.nsA);
      for (int i = 0; i < 50 && err.empty() && r1 != lanesSuccess; ++i) {
        if (i > 0) sleepMs(100);
        r1 = lanesGetUniqueId(&s.first);
      }
      if (r1 == lanesSuccess) r2 = lanesGetUniqueId(&s.second);
    }).join();
    EXPECT_EQ(err, "");
    EXPECT_EQ(r1, lanesSuccess) << lanesGetLastError(nullptr);
    EXPECT_EQ(r2, lanesSuccess) << lanesGetLastError(nullptr);
    return err.empty() && r1 == lanesSuccess && r2 == lanesSuccess;
  };
  setup.inject = [&net](RunState& s) {
    if (!s.ready.waitFor(kRanks, 60)) return;  // the ranks report why
    sleepMs(s.delayMs);
    s.slots[kFaultAt] = monotonicNs();
    std::string downWhy;
    EXPECT_TRUE(net.setLinkB(false, &downWhy)) << downWhy;
  };
  repeatScenario(
      "tcp-stall", 500,
      [&net](RunState& s) -> RankBody {
        return [&s, &net](int rank, int n, const lanesUniqueId& id) {
          const bool onA = rank != kVictim;
          std::string err = enterNetworkNamespace(onA ? net.nsA : net.nsB);
          RANK_CHECK(err.empty(), "%s", err.c_str());
          ::setenv("LANES_HOSTID", onA ? "lanes-fault-host-a" : "lanes-fault-host-b", 1);
          const int fds = countOpenFds();
          lanesComm_t comm = initComm(rank, n, id);
          bool announced = false;
          lanesResult_t res = loopUntilFailure(comm, rank, s, &announced);
          if (rank == kVictim) {
            // Cut off: it fails too, but nothing it says can reach A.
            (void)s.finished.waitFor(2, kVictimWaitSeconds);  // they report their own failures
            _exit(0);
          }
          expectPeerFailure(res, comm, kVictim, s, rank, kTimeoutSeconds, "all-reduce");
          lanesCommAbort(comm);
          recover(rank, kSurvivors, s.second, fds);
          s.finished.arrive();
        };
      },
      setup);
}

// Only the root knows who is missing: it names them when its own bootstrap
// timeout (counted from the id's creation, here 3 s) expires, so the joining
// ranks wait a little longer (5 s) to hear it.
TEST(FaultInjection, PeerNeverJoinsBootstrap) {
  RunSetup setup = defaultSetup();
  constexpr int kJoinTimeout = kTimeoutSeconds + 2;
  setup.options.env.push_back({"LANES_BOOTSTRAP_TIMEOUT", std::to_string(kJoinTimeout)});
  setup.makeIds = [](RunState& s) {
    lanesResult_t r1, r2;
    {
      ScopedEnv rootTimeout("LANES_BOOTSTRAP_TIMEOUT", std::to_string(kTimeoutSeconds));
      r1 = lanesGetUniqueId(&s.first);
    }
    r2 = lanesGetUniqueId(&s.second);
    EXPECT_EQ(r1, lanesSuccess) << lanesGetLastError(nullptr);
    EXPECT_EQ(r2, lanesSuccess) << lanesGetLastError(nullptr);
    return r1 == lanesSuccess && r2 == lanesSuccess;
  };
  repeatScenario(
      "never-joins", 300,
      [](RunState& s) -> RankBody {
        return [&s](int rank, int n, const lanesUniqueId& id) {
          if (rank == kVictim) {
            (void)s.finished.waitFor(2, kVictimWaitSeconds);  // they report their own failures
            return;
          }
          const int fds = countOpenFds();
          sleepMs(rank == 0 ? s.delayMs : 0);
          lanesConfig_t config = LANES_CONFIG_INITIALIZER;
          config.timeoutSeconds = kJoinTimeout;
          lanesComm_t comm = nullptr;
          s.slots[callAt(rank)] = monotonicNs();
          lanesResult_t res = lanesCommInitRankConfig(&comm, n, id, rank, &config);
          RANK_CHECK(comm == nullptr || res != lanesSuccess, "init succeeded without rank 2");
          expectPeerFailure(res, nullptr, kVictim, s, rank, kJoinTimeout, "init");
          recover(rank, kSurvivors, s.second, fds);
          s.finished.arrive();
        };
      },
      setup);
}

// Rank 2 waits in an all-reduce nobody else joins; another of its threads
// aborts. Its call must return, and the others must learn that rank 2 left.
TEST(FaultInjection, AbortDuringWait) {
  RunSetup setup = defaultSetup();
  setup.options.env = {{"LANES_TIMEOUT", "60"}};  // only the abort can end the wait
  setup.limitSeconds = 0;
  setup.measured = kEveryone;
  repeatScenario(
      "abort-during", 500,
      [](RunState& s) -> RankBody {
        return [&s](int rank, int n, const lanesUniqueId& id) {
          const int fds = countOpenFds();
          lanesComm_t comm = initComm(rank, n, id);
          if (rank == kVictim) {
            std::thread aborter([&s, comm] {
              sleepMs(100 + s.delayMs);
              s.slots[kFaultAt] = monotonicNs();
              lanesCommAbort(comm);
              s.aborted.arrive();
            });
            std::vector<float> buf(kCount, 1.0f);
            s.slots[callAt(rank)] = monotonicNs();
            lanesResult_t res = lanesAllReduce(buf.data(), buf.data(), buf.size(), lanesFloat32,
                                               lanesSum, comm, nullptr);
            s.slots[returnAt(rank)] = monotonicNs();
            aborter.join();
            RANK_CHECK(res != lanesSuccess, "the all-reduce succeeded without its peers");
            double took = seconds(s.slots[returnAt(rank)] - s.slots[kFaultAt]);
            RANK_CHECK(took <= kMarginSeconds, "the abort released the wait only after %.2f s",
                       took);
          } else {
            // Called once the abort is done: between the fault's time stamp
            // and the abort, the victim's all-reduce could still complete
            // with theirs.
            waitForFault(s);
            RANK_CHECK(s.aborted.waitFor(1, 60), "rank 2's lanesCommAbort never returned");
            std::vector<float> buf(kCount, 1.0f);
            s.slots[callAt(rank)] = monotonicNs();
            lanesResult_t res = lanesAllReduce(buf.data(), buf.data(), buf.size(), lanesFloat32,
                                               lanesSum, comm, nullptr);
            expectPeerFailure(res, comm, kVictim, s, rank, 0, "all-reduce");
            lanesCommAbort(comm);
          }
          recover(rank, kEveryone, s.second, fds);
        };
      },
      setup);
}

// Rank 2 destroys its communicator from a second thread while its main
// thread is inside an all-reduce: no crash, the call and the destroy return,
// the others learn that rank 2 left.
// The victim destroys its communicator (an orderly goodbye, no failure
// notice) while the others wait in an all-reduce that needs it.
void destroyInFlight(const char* name, RunSetup setup) {
  repeatScenario(
      name, 500,
      [](RunState& s) -> RankBody {
        return [&s](int rank, int n, const lanesUniqueId& id) {
          const int fds = countOpenFds();
          lanesComm_t comm = initComm(rank, n, id);
          std::thread destroyer;
          lanesResult_t destroyed = lanesInternalError;
          std::string destroyError;
          if (rank == kVictim) {
            // (Checks stay on the rank's own thread: RANK_CHECK reports from there.)
            destroyer = std::thread([&s, comm, n, &destroyed, &destroyError] {
              if (!s.ready.waitFor(n, 60)) return;
              sleepMs(s.delayMs);
              s.slots[kFaultAt] = monotonicNs();
              destroyed = lanesCommDestroy(comm);
              destroyError = lanesGetLastError(nullptr);
            });
          }
          bool announced = false;
          lanesResult_t res = loopUntilFailure(comm, rank, s, &announced);
          if (rank == kVictim) {
            destroyer.join();
            RANK_CHECK(destroyed == lanesSuccess, "destroy returned %d: %s",
                       static_cast<int>(destroyed), destroyError.c_str());
            RANK_CHECK(res == lanesInvalidArgument,
                       "a call on the destroyed communicator returned %d (%s), expected "
                       "lanesInvalidArgument",
                       static_cast<int>(res), lanesGetErrorString(res));
          } else {
            expectPeerFailure(res, comm, kVictim, s, rank, kTimeoutSeconds, "all-reduce");
            lanesCommAbort(comm);
          }
          recover(rank, kEveryone, s.second, fds);
        };
      },
      setup);
}

TEST(FaultInjection, DestroyWithOperationInFlight) {
  destroyInFlight("destroy-in-flight", defaultSetup());
}

// The same in host summation's shared arena: the survivors wait on counters,
// not a connection, and learn of the departure from the bootstrap.
TEST(FaultInjection, DestroyWithSharedSumInFlight) {
  RunSetup setup = defaultSetup();
  setup.options.env.push_back({"LANES_ALGO", "shared_sum"});
  destroyInFlight("destroy-in-flight-shared-sum", setup);
}

// The opposite of a fault: a rank that finishes its last collective and
// destroys its communicator at once closes its TCP sockets in order. Its
// peer, still reading the tail of the data on another socket, must not take
// one socket's end of file for a failure (it did: the striped data behind it
// was lost).
TEST(FaultInjection, OrderlyCloseRightAfterCollectiveIsNoFault) {
  RunOptions options;
  options.env = {{"LANES_SHM_DISABLE", "1"}, {"LANES_TIMEOUT", "10"}};
  for (int i = 0; i < faultRepeat(3) * 5 && !::testing::Test::HasFailure(); ++i) {
    runForked(
        2,
        [](int rank, int n, const lanesUniqueId& id) {
          CommGuard comm(initComm(rank, n, id));
          std::vector<int32_t> mine(4099, rank + 1), total(4099, -1);
          RANK_CHECK_LANES(lanesAllReduce(mine.data(), total.data(), mine.size(), lanesInt32,
                                          lanesSum, comm.get(), nullptr),
                           comm.get());
          RANK_CHECK(total[4098] == 3, "all-reduce gave %d, expected 3", total[4098]);
        },
        options);
  }
}

}  // namespace
}  // namespace lanes::test
