#include "tests/multi/harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <new>
#include <set>
#include <thread>

#include "tests/multi/id_pipe.h"

namespace lanes::test {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Children must fail on the library's timeout well before the watchdog fires,
// so a library hang shows as an error naming the op, not as a kill. Set before
// main() so that no library call can read the defaults first.
struct EnvDefaults {
  EnvDefaults() {
    setenv("LANES_TIMEOUT", "20", 0);
    setenv("LANES_BOOTSTRAP_TIMEOUT", "40", 0);
  }
};
const EnvDefaults kEnvDefaults;

// Which rank (if any) the calling thread runs, and how it reports failure.
struct RankContext {
  int rank = -1;
  RankMode mode = RankMode::Process;
  int pipeFd = -1;  // forked ranks: write end of the failure pipe
};
thread_local RankContext t_context;

struct RankFailure {
  std::string message;
};

double secondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

void writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// A forked rank's last words: to the parent over the pipe, and to stderr so
// the message also shows when the pipe is gone.
[[noreturn]] void childExit(const std::string& message) {
  std::string line = strprintf("rank %d: %s\n", t_context.rank, message.c_str());
  if (t_context.pipeFd >= 0) writeAll(t_context.pipeFd, line);
  writeAll(STDERR_FILENO, line);
  _exit(1);
}

void runChildBody(const RankBody& body, int rank, int nranks, const lanesUniqueId& id) {
  try {
    body(rank, nranks, id);
  } catch (const std::exception& e) {
    childExit(strprintf("exception: %s", e.what()));
  } catch (...) {
    childExit("unknown exception");
  }
}

bool mappedByAnyProcess(const std::string& shmName) {
  const std::string needle = "/dev/shm/" + shmName;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return false;
  bool found = false;
  while (dirent* e = readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream maps(std::string("/proc/") + e->d_name + "/maps");
    std::string line;
    while (std::getline(maps, line)) {
      if (line.find(needle) != std::string::npos) {
        found = true;
        break;
      }
    }
    if (found) break;
  }
  closedir(proc);
  return found;
}

// Whether a live process holds a flock on the segment: its creator does
// while it holds it, including while it is still being built (no mapping yet).
bool lockedByAnyProcess(const std::string& shmName) {
  const std::string path = "/dev/shm/" + shmName;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  const bool locked = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // drops the probe's lock, if it got one
  return locked;
}

// Reports (and removes, so later tests start clean) lanes-* segments created
// since `before` that outlived the run. Segments another test running at the
// same time still maps or locks are not ours to judge; nor is one that goes
// within a few seconds (a finished sender leaves its rings' name to a
// receiver still in the call, which removes it once it maps them).
}  // namespace

void expectNoShmLeaks(const std::vector<std::string>& before, const char* what) {
  std::set<std::string> old(before.begin(), before.end());
  auto fresh = [&] {
    std::vector<std::string> out;
    for (const auto& n : listLanesShm())
      if (!old.count(n) && !mappedByAnyProcess(n) && !lockedByAnyProcess(n)) out.push_back(n);
    return out;
  };
  std::vector<std::string> leaked = fresh();
  for (int i = 0; i < 50 && !leaked.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    leaked = fresh();
  }
  if (leaked.empty()) return;
  std::string names;
  for (const auto& n : leaked) {
    names += " /dev/shm/" + n;
    std::string path = "/dev/shm/" + n;
    ::unlink(path.c_str());
  }
  ADD_FAILURE() << what << " left shared-memory segments behind (removed now):" << names;
}

int rankTimeoutSeconds() {
  const char* v = std::getenv("LANES_TIMEOUT");
  int t = v != nullptr ? std::atoi(v) : 0;
  return t > 0 ? t : 20;
}

double watchdogSeconds() {
  const char* v = std::getenv("LANES_TEST_WATCHDOG");
  double t = v != nullptr ? std::atof(v) : 0;
  return t > 0 ? t : 120;
}

bool fullMatrix() {
  const char* v = std::getenv("LANES_TEST_FULL");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

int currentRank() { return t_context.rank; }

void rankFail(const char* file, int line, const std::string& message) {
  const char* base = std::strrchr(file, '/');
  std::string text = strprintf("%s:%d: %s", base ? base + 1 : file, line, message.c_str());
  if (t_context.rank < 0) {
    std::fprintf(stderr, "rankFail outside a rank body: %s\n", text.c_str());
    std::abort();
  }
  if (t_context.mode == RankMode::Process) childExit(text);
  throw RankFailure{text};
}

std::string describeFailure(const char* expr, lanesResult_t res, lanesComm_t comm) {
  return strprintf("%s returned %d (%s): %s", expr, static_cast<int>(res), lanesGetErrorString(res),
                   lanesGetLastError(comm));
}

std::string RankOutcome::describe() const {
  std::string how;
  if (!finished) {
    how = "had not finished at the watchdog deadline (killed)";
  } else if (exited) {
    how = strprintf("exited with code %d", exitCode);
  } else {
    how = strprintf("was killed by signal %d (%s)", signal, strsignal(signal));
  }
  std::string text = strprintf("rank %d (pid %d) %s", rank, static_cast<int>(pid), how.c_str());
  if (!message.empty()) text += ": " + message;
  return text;
}

ForkedRanks::~ForkedRanks() {
  for (auto& c : children_) {
    if (c.pid > 0 && !c.outcome.finished) {
      ::kill(c.pid, SIGKILL);
      ::waitpid(c.pid, nullptr, 0);
    }
  }
  closePipes();
}

void ForkedRanks::closePipes() {
  for (auto& c : children_) {
    if (c.pipeFd >= 0) ::close(c.pipeFd);
    c.pipeFd = -1;
  }
}

void ForkedRanks::start(int nranks, RankBody body, const RunOptions& options) {
  startWith(nranks, nullptr, std::move(body), options);
}

void ForkedRanks::start(int nranks, const lanesUniqueId& id, RankBody body,
                        const RunOptions& options) {
  startWith(nranks, &id, std::move(body), options);
}

void ForkedRanks::startWith(int nranks, const lanesUniqueId* givenId, RankBody body,
                            const RunOptions& options) {
  watchdogSeconds_ = options.watchdogSeconds;
  std::vector<int> writeEnds;
  children_.resize(nranks);
  for (int r = 0; r < nranks; ++r) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe2: " << std::strerror(errno);
      return;
    }
    children_[r].pipeFd = fds[0];
    children_[r].outcome.rank = r;
    writeEnds.push_back(fds[1]);
  }
  // Ranks start once every fork is done, with an id made after them (IdPipe).
  IdPipe go;
  std::string error;
  if (!go.open(&error)) {
    ADD_FAILURE() << error;
    return;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      ADD_FAILURE() << "fork for rank " << r << ": " << std::strerror(errno);
      for (int q = r; q < nranks; ++q) ::close(children_[q].pipeFd);
      children_.resize(r);
      break;
    }
    if (pid == 0) {
      // Die with the test binary rather than linger as an orphan.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) _exit(2);
      for (int q = 0; q < nranks; ++q) {
        ::close(children_[q].pipeFd);
        if (q != r) ::close(writeEnds[q]);
      }
      lanesUniqueId id;
      if (!go.receive(&id)) _exit(3);  // the parent could not make an id (it reports that)
      t_context = RankContext{r, RankMode::Process, writeEnds[r]};
      for (const auto& [k, v] : options.env) ::setenv(k.c_str(), v.c_str(), 1);
      runChildBody(body, r, nranks, id);
      _exit(0);
    }
    children_[r].pid = pid;
    children_[r].outcome.pid = pid;
  }
  lanesUniqueId id{};
  bool haveId = givenId != nullptr;
  if (haveId) {
    id = *givenId;
  } else {
    lanesResult_t res = lanesGetUniqueId(&id);
    haveId = res == lanesSuccess;
    if (!haveId) ADD_FAILURE() << describeFailure("lanesGetUniqueId(&id)", res, nullptr);
  }
  if (haveId && options.beforeRanksStart) options.beforeRanksStart(id);
  if (!go.send(haveId ? &id : nullptr, children_.size()))
    ADD_FAILURE() << "write to the ranks' start pipe: " << std::strerror(errno);
  for (int fd : writeEnds) ::close(fd);
  for (auto& c : children_) ::fcntl(c.pipeFd, F_SETFL, O_NONBLOCK);
}

void ForkedRanks::kill(int rank, int sig) { ::kill(children_.at(rank).pid, sig); }

void ForkedRanks::drainPipe(Child& child) {
  if (child.pipeFd < 0) return;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(child.pipeFd, buf, sizeof buf);
    if (n > 0) {
      child.outcome.message.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return;
  }
}

std::vector<RankOutcome> ForkedRanks::wait() {
  auto start = SteadyClock::now();
  for (;;) {
    bool allDone = true;
    for (auto& c : children_) {
      drainPipe(c);
      if (c.outcome.finished) continue;
      int status = 0;
      pid_t got = ::waitpid(c.pid, &status, WNOHANG);
      if (got == c.pid) {
        c.outcome.finished = true;
        c.outcome.exited = WIFEXITED(status);
        c.outcome.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        c.outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      } else {
        allDone = false;
      }
    }
    if (allDone) break;
    if (secondsSince(start) > watchdogSeconds_) {
      for (auto& c : children_) {
        if (c.outcome.finished) continue;
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, nullptr, 0);
        c.outcome.signal = SIGKILL;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::vector<RankOutcome> out;
  for (auto& c : children_) {
    drainPipe(c);
    while (!c.outcome.message.empty() && c.outcome.message.back() == '\n')
      c.outcome.message.pop_back();
    out.push_back(c.outcome);
    // Reaped (or killed and reaped): nothing left for the destructor to kill.
    c.outcome.finished = true;
  }
  closePipes();
  return out;
}

void runForked(int nranks, const RankBody& body, const RunOptions& options) {
  std::vector<std::string> before = listLanesShm();
  {
    ForkedRanks ranks;
    ranks.start(nranks, body, options);
    std::vector<RankOutcome> outcomes = ranks.wait();
    std::string unfinished;
    for (const auto& o : outcomes) {
      if (!o.finished) {
        unfinished += strprintf(" %d", o.rank);
      } else if (!o.exited || o.exitCode != 0) {
        ADD_FAILURE() << o.describe();
      }
    }
    if (!unfinished.empty())
      ADD_FAILURE() << "watchdog: after " << options.watchdogSeconds
                    << " s these ranks had not finished and were killed:" << unfinished;
  }
  if (options.checkShmLeaks) expectNoShmLeaks(before, "the forked run");
}

void runThreads(int nranks, const RankBody& body, const RunOptions& options) {
  std::vector<std::string> before = listLanesShm();
  lanesUniqueId id;
  lanesResult_t res = lanesGetUniqueId(&id);
  ASSERT_EQ(res, lanesSuccess) << describeFailure("lanesGetUniqueId(&id)", res, nullptr);

  std::mutex mu;
  std::condition_variable cv;
  std::vector<bool> done(nranks, false);
  std::vector<std::string> failures(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      t_context = RankContext{r, RankMode::Thread, -1};
      std::string failure;
      try {
        body(r, nranks, id);
      } catch (const RankFailure& f) {
        failure = f.message;
      } catch (const std::exception& e) {
        failure = strprintf("exception: %s", e.what());
      }
      std::lock_guard<std::mutex> lock(mu);
      done[r] = true;
      failures[r] = failure;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    auto deadline =
        SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                 std::chrono::duration<double>(options.watchdogSeconds));
    bool ok = cv.wait_until(lock, deadline, [&] {
      return std::all_of(done.begin(), done.end(), [](bool d) { return d; });
    });
    if (!ok) {
      std::string unfinished;
      for (int r = 0; r < nranks; ++r)
        if (!done[r]) unfinished += strprintf(" %d", r);
      std::fprintf(stderr,
                   "watchdog: after %.0f s these thread ranks had not finished:%s; a hung "
                   "thread cannot be recovered, aborting the test binary\n",
                   options.watchdogSeconds, unfinished.c_str());
      std::abort();
    }
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r)
    if (!failures[r].empty()) ADD_FAILURE() << "rank " << r << " (thread): " << failures[r];
  if (options.checkShmLeaks) expectNoShmLeaks(before, "the threaded run");
}

const char* rankModeName(RankMode mode) { return mode == RankMode::Process ? "Procs" : "Threads"; }

void PrintTo(RankMode mode, std::ostream* os) { *os << rankModeName(mode); }

void runRanks(RankMode mode, int nranks, const RankBody& body, const RunOptions& options) {
  if (mode == RankMode::Process) {
    runForked(nranks, body, options);
  } else {
    runThreads(nranks, body, options);
  }
}

struct Watchdog::State {
  std::mutex mu;
  std::condition_variable cv;
  bool disarmed = false;
  std::thread thread;
};

Watchdog::Watchdog(double seconds, std::string what) : state_(std::make_unique<State>()) {
  State* s = state_.get();
  s->thread = std::thread([s, seconds, what = std::move(what)] {
    std::unique_lock<std::mutex> lock(s->mu);
    auto deadline = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                             std::chrono::duration<double>(seconds));
    if (!s->cv.wait_until(lock, deadline, [s] { return s->disarmed; })) {
      std::fprintf(stderr, "watchdog: %s did not finish within %.0f s; aborting\n", what.c_str(),
                   seconds);
      std::abort();
    }
  });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->disarmed = true;
  }
  state_->cv.notify_all();
  state_->thread.join();
}

SharedCounter::SharedCounter() {
  void* p = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "SharedCounter: mmap: %s\n", std::strerror(errno));
    std::abort();
  }
  value_ = new (p) std::atomic<int>(0);
}

SharedCounter::~SharedCounter() { munmap(value_, sizeof(std::atomic<int>)); }

void SharedCounter::arrive() { value_->fetch_add(1); }

bool SharedCounter::waitFor(int count, double seconds) const {
  auto start = SteadyClock::now();
  while (value_->load() < count) {
    if (secondsSince(start) > seconds) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

lanesComm_t initComm(int rank, int nranks, const lanesUniqueId& id) {
  lanesConfig_t config = LANES_CONFIG_INITIALIZER;
  config.timeoutSeconds = rankTimeoutSeconds();
  lanesComm_t comm = nullptr;
  RANK_CHECK_LANES(lanesCommInitRankConfig(&comm, nranks, id, rank, &config), nullptr);
  RANK_CHECK(comm != nullptr, "init succeeded but returned a NULL communicator");
  return comm;
}

std::vector<std::string> listLanesShm() {
  std::vector<std::string> out;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return out;
  while (dirent* e = readdir(dir)) {
    if (std::strncmp(e->d_name, "lanes-", 6) == 0) out.emplace_back(e->d_name);
  }
  closedir(dir);
  return out;
}

std::string CommandResult::describe() const {
  if (!started) return "command did not start";
  std::string how = timedOut ? "timed out (process group killed)"
                    : exited ? strprintf("exited with code %d", exitCode)
                             : strprintf("killed by signal %d", signal);
  return how + "; output:\n" + output;
}

CommandResult runCommand(const std::vector<std::string>& argv,
                         const std::vector<std::pair<std::string, std::string>>& env,
                         double deadlineSeconds) {
  CommandResult result;
  int fds[2];
  if (argv.empty() || ::pipe2(fds, O_CLOEXEC) != 0) return result;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return result;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    ::execvp(args[0], args.data());
    std::string msg = strprintf("exec %s: %s\n", args[0], std::strerror(errno));
    writeAll(STDERR_FILENO, msg);
    _exit(127);
  }
  ::setpgid(pid, pid);  // also here: no race with the child's own call
  ::close(fds[1]);
  result.started = true;
  auto start = SteadyClock::now();
  bool eof = false;
  bool reaped = false;
  SteadyClock::time_point reapedAt{};
  char buf[8192];
  while (!(eof && reaped)) {
    double elapsed = secondsSince(start);
    // After the main process exits, give stragglers in its group 5 s to
    // close the output; then they are killed.
    bool stragglersLate = reaped && secondsSince(reapedAt) > 5;
    if (elapsed > deadlineSeconds || stragglersLate) {
      if (!reaped) result.timedOut = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (!eof && ::poll(&p, 1, 20) > 0) {
      ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n > 0) {
        result.output.append(buf, static_cast<size_t>(n));
      } else if (n == 0) {
        eof = true;
      }
    } else if (eof) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!reaped) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        reaped = true;
        reapedAt = SteadyClock::now();
        result.exited = WIFEXITED(status);
        result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      }
    }
  }
  if (!reaped) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    result.exited = false;
    result.signal = SIGKILL;
  }
  ::kill(-pid, SIGKILL);  // nothing of the group outlives the test
  ::close(fds[0]);
  return result;
}

SharedSlots::SharedSlots(int count) : count_(count) {
  void* p = mmap(nullptr, sizeof(std::atomic<int64_t>) * static_cast<size_t>(count),
                 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "SharedSlots: mmap: %s\n", std::strerror(errno));
    std::abort();
  }
  values_ = static_cast<std::atomic<int64_t>*>(p);
  for (int i = 0; i < count; ++i) new (&values_[i]) std::atomic<int64_t>(0);
}

SharedSlots::~SharedSlots() {
  munmap(values_, sizeof(std::atomic<int64_t>) * static_cast<size_t>(count_));
}

int64_t monotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

int countOpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(dir))
    if (e->d_name[0] != '.') ++n;
  closedir(dir);
  return n - 1;  // the directory's own descriptor
}

int faultRepeat(int ciDefault) {
  const char* v = std::getenv("LANES_FAULT_REPEAT");
  int n = v != nullptr ? std::atoi(v) : 0;
  return n > 0 ? n : ciDefault;
}

uint64_t hashBytes(const void* data, size_t bytes, uint64_t seed) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace lanes::test
