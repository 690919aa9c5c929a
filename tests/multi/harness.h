// Multi-rank test harness: runs one test body on N ranks, either as forked
// processes or as threads of this process, under a watchdog, and brings each
// rank's failure back to gtest as "rank R: what went wrong".
//
// Inside a rank body use RANK_CHECK / RANK_CHECK_LANES, not gtest macros:
// gtest state does not cross fork. In a forked rank a failed check writes its
// message to the parent over a pipe and _exit(1)s; in a thread rank it throws
// (caught by the runner), and the other ranks then fail on the library's own
// timeout (LANES_TIMEOUT, which the harness sets small).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "lanes/lanes.h"
#include "tests/multi/text.h"

namespace lanes::test {

// Library timeout the harness gives ranks (seconds): LANES_TIMEOUT is set to
// this before the first library call unless the user already set it.
int rankTimeoutSeconds();
// Watchdog per run: LANES_TEST_WATCHDOG seconds, default 120.
double watchdogSeconds();
// LANES_TEST_FULL=1 runs the full test matrix instead of the CI sample.
bool fullMatrix();

// Fails the calling rank with `message` (see the file comment). Outside a
// rank (the gtest thread) it prints and aborts: use gtest macros there.
[[noreturn]] void rankFail(const char* file, int line, const std::string& message);
// Rank number of the calling rank body, -1 outside one.
int currentRank();

#define RANK_CHECK(cond, ...)                                                   \
  do {                                                                          \
    if (!(cond))                                                                \
      ::lanes::test::rankFail(                                                  \
          __FILE__, __LINE__,                                                   \
          "check failed: " #cond ": " + ::lanes::test::strprintf(__VA_ARGS__)); \
  } while (0)

// Checks that a Lanes call succeeded; the message carries the result code and
// lanesGetLastError(comm).
#define RANK_CHECK_LANES(expr, comm)                                                           \
  do {                                                                                         \
    lanesResult_t rank_check_res_ = (expr);                                                    \
    if (rank_check_res_ != lanesSuccess)                                                       \
      ::lanes::test::rankFail(__FILE__, __LINE__,                                              \
                              ::lanes::test::describeFailure(#expr, rank_check_res_, (comm))); \
  } while (0)

std::string describeFailure(const char* expr, lanesResult_t res, lanesComm_t comm);

using RankBody = std::function<void(int rank, int nranks, const lanesUniqueId& id)>;

struct RunOptions {
  double watchdogSeconds = ::lanes::test::watchdogSeconds();
  // Extra environment for forked ranks, set in the child before the body.
  std::vector<std::pair<std::string, std::string>> env;
  // Fail the test if /dev/shm/lanes-* entries created during the run are
  // still there afterwards and mapped by no process.
  bool checkShmLeaks = true;
  // ForkedRanks: runs in this process after the forks, with the ranks' id,
  // before the ranks receive it. Work that keeps threads of this process busy
  // (strangers keeping the bootstrap root logging) belongs here, not before
  // start(): a child forked while such a thread holds a lock (the
  // allocator's, under ASan) hangs.
  std::function<void(const lanesUniqueId&)> beforeRanksStart;
};

// What became of one forked rank.
struct RankOutcome {
  int rank = -1;
  pid_t pid = -1;
  bool finished = false;  // exited or was killed before the watchdog fired
  bool exited = false;    // exited normally (exitCode valid)
  int exitCode = -1;
  int signal = 0;       // terminating signal when !exited
  std::string message;  // what the rank wrote to its failure pipe
  std::string describe() const;
};

// N forked ranks; the lower-level interface for tests that kill ranks. The
// destructor SIGKILLs and reaps whatever still runs.
class ForkedRanks {
 public:
  ForkedRanks() = default;
  ~ForkedRanks();
  ForkedRanks(const ForkedRanks&) = delete;
  ForkedRanks& operator=(const ForkedRanks&) = delete;

  // Calls lanesGetUniqueId here (the bootstrap root lives in this process),
  // then forks `nranks` children that run `body`.
  void start(int nranks, RankBody body, const RunOptions& options = {});
  // As start(), with an id the caller made.
  void start(int nranks, const lanesUniqueId& id, RankBody body, const RunOptions& options = {});
  pid_t pid(int rank) const { return children_.at(rank).pid; }
  void kill(int rank, int sig);
  // Waits for every rank until the watchdog deadline; ranks still running
  // then are SIGKILLed and reported unfinished.
  std::vector<RankOutcome> wait();

 private:
  void startWith(int nranks, const lanesUniqueId* givenId, RankBody body,
                 const RunOptions& options);
  struct Child {
    pid_t pid = -1;
    int pipeFd = -1;
    RankOutcome outcome;
  };
  void drainPipe(Child& child);
  void closePipes();
  std::vector<Child> children_;
  double watchdogSeconds_ = 120;
};

// Runs `body` on `nranks` forked ranks and adds a gtest failure per rank that
// did not exit 0, plus one naming the ranks still running at the deadline.
void runForked(int nranks, const RankBody& body, const RunOptions& options = {});
// Runs `body` on `nranks` threads of this process. A hang past the watchdog
// aborts the whole test binary (a hung thread cannot be recovered), naming
// the ranks that had not finished. Keep thread runs short.
void runThreads(int nranks, const RankBody& body, const RunOptions& options = {});

enum class RankMode { Process, Thread };
const char* rankModeName(RankMode mode);
// gtest prints parameters with this (instead of raw bytes).
void PrintTo(RankMode mode, std::ostream* os);
void runRanks(RankMode mode, int nranks, const RankBody& body, const RunOptions& options = {});

// Aborts the process with `what` if not disarmed (destroyed) within `seconds`.
// For thread-mode tests outside runThreads.
class Watchdog {
 public:
  Watchdog(double seconds, std::string what);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A counter in memory shared with forked ranks (create it before the fork):
// lets ranks agree that all of them passed a point without using the library,
// e.g. before a victim rank kills itself.
class SharedCounter {
 public:
  SharedCounter();
  ~SharedCounter();
  SharedCounter(const SharedCounter&) = delete;
  SharedCounter& operator=(const SharedCounter&) = delete;
  void arrive();
  // Polls until the count reaches `count`; false after `seconds`.
  bool waitFor(int count, double seconds) const;

 private:
  std::atomic<int>* value_ = nullptr;
};

// Communicator for one rank with the harness timeout (config.timeoutSeconds).
lanesComm_t initComm(int rank, int nranks, const lanesUniqueId& id);

// Destroys the communicator at scope exit (a body that fails in a forked rank
// _exit()s without running it: the OS reclaims the process).
class CommGuard {
 public:
  explicit CommGuard(lanesComm_t comm = nullptr) : comm_(comm) {}
  ~CommGuard() {
    if (comm_ != nullptr) lanesCommDestroy(comm_);
  }
  CommGuard(const CommGuard&) = delete;
  CommGuard& operator=(const CommGuard&) = delete;
  lanesComm_t get() const { return comm_; }
  // Gives up ownership (after the test destroyed or aborted it itself).
  lanesComm_t release() {
    lanesComm_t c = comm_;
    comm_ = nullptr;
    return c;
  }

 private:
  lanesComm_t comm_;
};

// /dev/shm entries named lanes-*.
std::vector<std::string> listLanesShm();
// Adds a gtest failure (and removes the segments) if lanes-* entries that were
// not in `before` are still there and mapped by no process.
void expectNoShmLeaks(const std::vector<std::string>& before, const char* what);

// A child command run to completion under a deadline, in its own process
// group (killed as a group on expiry). Output is stdout+stderr together.
struct CommandResult {
  bool started = false;
  bool timedOut = false;
  bool exited = false;
  int exitCode = -1;
  int signal = 0;
  std::string output;
  std::string describe() const;
};
CommandResult runCommand(const std::vector<std::string>& argv,
                         const std::vector<std::pair<std::string, std::string>>& env,
                         double deadlineSeconds);

// Slots of int64 in memory shared with forked ranks (create before the
// fork): timestamps and flags a fault test collects from every rank.
class SharedSlots {
 public:
  explicit SharedSlots(int count);
  ~SharedSlots();
  SharedSlots(const SharedSlots&) = delete;
  SharedSlots& operator=(const SharedSlots&) = delete;
  std::atomic<int64_t>& operator[](int i) const { return values_[i]; }
  int size() const { return count_; }

 private:
  std::atomic<int64_t>* values_ = nullptr;
  int count_ = 0;
};

// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the machine,
// so a fault time taken in one rank compares with a return time in another.
int64_t monotonicNs();
// Descriptors this process holds open (entries of /proc/self/fd, less the
// one used to read it).
int countOpenFds();
// How often each fault scenario runs: LANES_FAULT_REPEAT, else `ciDefault`.
int faultRepeat(int ciDefault);

// FNV-1a over bytes; for comparing outputs across ranks.
uint64_t hashBytes(const void* data, size_t bytes, uint64_t seed = 1469598103934665603ull);

}  // namespace lanes::test
