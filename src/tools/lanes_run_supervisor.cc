#include "tools/lanes_run_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "tools/lanes_run_program.h"

extern char** environ;

namespace lanes::run {

void UniqueFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string signalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev != nullptr) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

struct Supervisor::Child {
  // Rank 0's stdout goes out as is, so a perf tool's table (printed by rank
  // 0 alone) reads exactly like nccl-tests' under mpirun; every other stream
  // keeps its "[rank] " so warnings and errors say where they came from.
  Child(int r, bool prefix)
      : rank(r), outFwd(r, STDOUT_FILENO, prefix && r != 0), errFwd(r, STDERR_FILENO, prefix) {}
  int rank;
  pid_t pid = -1;
  bool running = false;
  bool signalledByUs = false;  // got our SIGTERM/SIGKILL (grace over or timeout)
  int waitStatus = 0;
  Clock::time_point exitedAt{};
  UniqueFd out, err;
  LineForwarder outFwd, errFwd;
};

namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};
constexpr double kKillAfterTermSeconds = 5;
// What ranks get to write their flight-recorder dumps after SIGUSR1.
constexpr double kDumpSeconds = 2;
constexpr double kDrainSeconds = 2;  // output still arriving after the last exit (grandchildren)

Deadline after(double seconds) { return Deadline::after(seconds); }

std::string statusText(int waitStatus) {
  if (WIFEXITED(waitStatus)) return "exited with status " + std::to_string(WEXITSTATUS(waitStatus));
  if (WIFSIGNALED(waitStatus)) return "was killed by signal " + signalName(WTERMSIG(waitStatus));
  return "stopped in an unexpected way (wait status " + std::to_string(waitStatus) + ")";
}

bool failed(int waitStatus) { return !WIFEXITED(waitStatus) || WEXITSTATUS(waitStatus) != 0; }

int codeOf(int waitStatus) {
  if (WIFEXITED(waitStatus)) return WEXITSTATUS(waitStatus);
  if (WIFSIGNALED(waitStatus)) return 128 + WTERMSIG(waitStatus);
  return 1;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), s < 10 ? "%.2f s" : "%.0f s", s);
  return buf;
}

}  // namespace

Supervisor::Supervisor(RunOptions options) : options_(std::move(options)) {
  for (int r = 0; r < options_.nranks; ++r) {
    children_.push_back(std::make_unique<Child>(r, options_.prefix));
  }
}

Supervisor::~Supervisor() {
  // Never leave ranks behind, whatever path got us here.
  for (auto& c : children_) {
    if (c->running) {
      ::kill(c->pid, SIGKILL);
      ::waitpid(c->pid, nullptr, 0);
    }
  }
  if (signalFd_.valid()) ::sigprocmask(SIG_SETMASK, &savedMask_, nullptr);
}

void Supervisor::say(const std::string& line) const {
  std::string text = "lanes-run: " + line + "\n";
  writeAll(STDERR_FILENO, text.data(), text.size());
}

Status Supervisor::setUpSignals() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  for (int s : kForwarded) sigaddset(&mask, s);
  if (::sigprocmask(SIG_BLOCK, &mask, &savedMask_) != 0) {
    return systemError("lanes-run could not block signals: " + errnoText(errno));
  }
  int fd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) return systemError("lanes-run could not create a signalfd: " + errnoText(errno));
  signalFd_ = UniqueFd(fd);
  // A reader that goes away (| head) must not kill the launcher mid-job.
  ::signal(SIGPIPE, SIG_IGN);
  return Status::ok();
}

Status Supervisor::spawn(Child& child, const JobEnv& job, int* execErrno) {
  *execErrno = 0;
  // Everything the child needs is built before fork: after fork it only
  // calls async-signal-safe functions.
  auto overrides = rankEnv(job, child.rank, options_.nranks);
  std::vector<std::string> envStrings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (auto& [n, v] : overrides) replaced = replaced || n == name;
    if (!replaced) envStrings.push_back(std::move(entry));
  }
  for (auto& [n, v] : overrides) envStrings.push_back(n + "=" + v);
  std::vector<char*> envp;
  for (auto& s : envStrings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (auto& a : options_.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  int outPipe[2], errPipe[2];
  if (::pipe2(outPipe, O_CLOEXEC) != 0) {
    return systemError("lanes-run could not create a pipe for rank " + std::to_string(child.rank) +
                       ": " + errnoText(errno));
  }
  UniqueFd outRead(outPipe[0]), outWrite(outPipe[1]);
  if (::pipe2(errPipe, O_CLOEXEC) != 0) {
    return systemError("lanes-run could not create a pipe for rank " + std::to_string(child.rank) +
                       ": " + errnoText(errno));
  }
  UniqueFd errRead(errPipe[0]), errWrite(errPipe[1]);
  // exec's errno comes back here; a successful exec closes it (O_CLOEXEC), so
  // the failure is reported once by lanes-run, not by every rank.
  int execPipe[2];
  if (::pipe2(execPipe, O_CLOEXEC) != 0) {
    return systemError("lanes-run could not create a pipe for rank " + std::to_string(child.rank) +
                       ": " + errnoText(errno));
  }
  UniqueFd execRead(execPipe[0]), execWrite(execPipe[1]);
  int devNull = child.rank == 0 ? -1 : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  UniqueFd nullFd(devNull);
  pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) {
    return systemError("lanes-run could not fork rank " + std::to_string(child.rank) + ": " +
                       errnoText(errno) + "; check the process limit (ulimit -u).");
  }
  if (pid == 0) {
    // Child. Dies with the launcher, so a SIGKILLed lanes-run leaves no orphans.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(outWrite.get(), STDOUT_FILENO);
    ::dup2(errWrite.get(), STDERR_FILENO);
    if (nullFd.valid()) ::dup2(nullFd.get(), STDIN_FILENO);  // only rank 0 reads stdin
    ::signal(SIGPIPE, SIG_DFL);
    ::sigprocmask(SIG_SETMASK, &savedMask_, nullptr);
    ::execve(program_.c_str(), argv.data(), envp.data());
    int err = errno;
    writeAll(execWrite.get(), reinterpret_cast<const char*>(&err), sizeof(err));
    ::_exit(127);
  }
  execWrite.reset();
  int err = 0;
  ssize_t got = 0;
  do {
    got = ::read(execRead.get(), &err, sizeof(err));
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof(err))) {
    ::waitpid(pid, nullptr, 0);
    *execErrno = err;
    // The file was there a moment ago, so ENOENT names its #! interpreter
    // or its ELF loader.
    std::string why =
        err == ENOENT ? "its #! interpreter or ELF loader is missing" : errnoText(err);
    const std::string& name = options_.command[0];
    return systemError("could not start " + name + (name == program_ ? "" : " (" + program_ + ")") +
                       ": " + why);
  }
  child.pid = pid;
  child.running = true;
  child.out = std::move(outRead);
  child.err = std::move(errRead);
  ::fcntl(child.out.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(child.err.get(), F_SETFL, O_NONBLOCK);
  return Status::ok();
}

int Supervisor::runningCount() const {
  int n = 0;
  for (auto& c : children_) n += c->running ? 1 : 0;
  return n;
}

std::string Supervisor::runningList() const {
  std::string s;
  for (auto& c : children_) {
    if (!c->running) continue;
    if (!s.empty()) s += ", ";
    s += std::to_string(c->rank);
  }
  return s;
}

void Supervisor::signalRunning(int sig, bool byUs) {
  for (auto& c : children_) {
    if (!c->running) continue;
    ::kill(c->pid, sig);
    c->signalledByUs = c->signalledByUs || byUs;
  }
}

void Supervisor::onExit(Child& child, int waitStatus) {
  child.running = false;
  child.waitStatus = waitStatus;
  child.exitedAt = Clock::now();
  if (!failed(waitStatus)) return;
  say("rank " + std::to_string(child.rank) + " " + statusText(waitStatus));
  // A failure counts as the job's cause only before we started ending it.
  if (firstFailedRank_ >= 0 || timedOut_ || child.signalledByUs) return;
  firstFailedRank_ = child.rank;
  firstFailureCode_ = codeOf(waitStatus);
  firstFailureAt_ = child.exitedAt;
  int left = runningCount();
  if (left > 0 && !interruptSignal_) {
    say("giving the other " + std::to_string(left) + " rank(s) up to " +
        seconds(options_.graceSeconds) +
        " (LANES_RUN_GRACE) to detect the failure and exit by themselves");
  }
  if (graceDeadline_.at() == Clock::time_point::max())
    graceDeadline_ = after(options_.graceSeconds);
}

void Supervisor::reapChildren() {
  while (true) {
    int st = 0;
    pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid <= 0) break;
    for (auto& c : children_) {
      if (c->pid == pid && c->running) onExit(*c, st);
    }
  }
  if (runningCount() == 0 && drainDeadline_.at() == Clock::time_point::max()) {
    drainDeadline_ = after(kDrainSeconds);
  }
}

void Supervisor::handleSignals() {
  signalfd_siginfo info;
  while (::read(signalFd_.get(), &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) continue;  // reaped below, whichever child it was
    if (runningCount() == 0) continue;
    say("forwarding " + signalName(sig) + " to rank(s) " + runningList());
    interruptSignal_ = sig;
    signalRunning(sig, /*byUs=*/false);
    if (graceDeadline_.at() == Clock::time_point::max()) {
      graceDeadline_ = after(options_.graceSeconds);
    }
  }
  reapChildren();
}

void Supervisor::readOutput(Child& child, bool errStream) {
  UniqueFd& fd = errStream ? child.err : child.out;
  LineForwarder& fwd = errStream ? child.errFwd : child.outFwd;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n > 0) {
      fwd.feed(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    fwd.finish();  // EOF or error: this stream is done
    fd.reset();
    return;
  }
}

namespace {

// Whether `pid` catches SIGUSR1 (/proc's SigCgt mask): Lanes' flight
// recorder does; a process that does not would die of it.
bool catchesSigusr1(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    const unsigned long long mask = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (mask >> (SIGUSR1 - 1)) & 1;
  }
  return false;
}

}  // namespace

void Supervisor::askForDumps(const std::string& why) {
  std::string asked;
  for (auto& c : children_) {
    if (!c->running || !catchesSigusr1(c->pid)) continue;
    ::kill(c->pid, SIGUSR1);
    asked += (asked.empty() ? "" : ", ") + std::to_string(c->rank);
  }
  dumpsAsked_ = true;
  if (asked.empty()) {
    say(why + "; sending SIGTERM");
    terminateRunning();
    return;
  }
  const char* prefix = std::getenv("LANES_FLIGHT_RECORDER_FILE");
  say(why + "; asking rank(s) " + asked + " for their flight-recorder dumps (SIGUSR1), then " +
      "SIGTERM in " + seconds(kDumpSeconds) + ". Read them with: lanes-flight " +
      (prefix != nullptr && *prefix != '\0' ? prefix : "/tmp/lanes-flight"));
  termDeadline_ = after(kDumpSeconds);
}

void Supervisor::terminateRunning() {
  signalRunning(SIGTERM, /*byUs=*/true);
  termSent_ = true;
  killDeadline_ = after(kKillAfterTermSeconds);
}

void Supervisor::checkDeadlines() {
  int left = runningCount();
  if (left > 0 && !timedOut_ && runDeadline_.expired()) {
    timedOut_ = true;
    askForDumps("--timeout of " + seconds(options_.timeoutSeconds) + " reached with rank(s) " +
                runningList() + " still running");
  }
  if (left > 0 && !termSent_ && !dumpsAsked_ && graceDeadline_.expired()) {
    if (firstFailedRank_ >= 0) {
      askForDumps("rank(s) " + runningList() + " still running " + seconds(options_.graceSeconds) +
                  " after rank " + std::to_string(firstFailedRank_) +
                  " failed (they did not detect it)");
    } else {
      // The user interrupted the job: no dumps asked for, as they asked to stop.
      say("rank(s) " + runningList() + " still running " + seconds(options_.graceSeconds) +
          " after " + signalName(interruptSignal_) + "; sending SIGTERM");
      dumpsAsked_ = true;
      terminateRunning();
    }
  }
  if (runningCount() > 0 && !termSent_ && termDeadline_.expired()) terminateRunning();
  if (runningCount() > 0 && !killSent_ && killDeadline_.expired()) {
    say("rank(s) " + runningList() + " ignored SIGTERM for " + seconds(kKillAfterTermSeconds) +
        "; sending SIGKILL");
    signalRunning(SIGKILL, /*byUs=*/true);
    killSent_ = true;
  }
}

void Supervisor::loop() {
  while (true) {
    bool anyOpen = false;
    for (auto& c : children_) anyOpen = anyOpen || c->out.valid() || c->err.valid();
    if (runningCount() == 0 && (!anyOpen || drainDeadline_.expired())) break;

    std::vector<pollfd> fds;
    std::vector<std::pair<Child*, bool>> owners;  // (child, isErr) per pipe entry
    fds.push_back({signalFd_.get(), POLLIN, 0});
    for (auto& c : children_) {
      if (c->out.valid()) {
        fds.push_back({c->out.get(), POLLIN, 0});
        owners.emplace_back(c.get(), false);
      }
      if (c->err.valid()) {
        fds.push_back({c->err.get(), POLLIN, 0});
        owners.emplace_back(c.get(), true);
      }
    }
    int waitMs = runDeadline_.remainingMs();
    for (const Deadline& d : {graceDeadline_, termDeadline_, killDeadline_, drainDeadline_}) {
      waitMs = std::min(waitMs, d.remainingMs());
    }
    int ready = ::poll(fds.data(), fds.size(), std::max(waitMs, 0));
    if (ready < 0 && errno != EINTR) {
      say("poll failed: " + errnoText(errno) + "; terminating the job");
      signalRunning(SIGKILL, /*byUs=*/true);
      break;
    }
    if (ready > 0) {
      if (fds[0].revents != 0) handleSignals();
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents != 0) readOutput(*owners[i - 1].first, owners[i - 1].second);
      }
    }
    checkDeadlines();
  }
  // Grandchildren may hold a pipe open past the drain period: flush and let go.
  for (auto& c : children_) {
    c->outFwd.finish();
    c->errFwd.finish();
    c->out.reset();
    c->err.reset();
  }
}

void Supervisor::summarize() const {
  if (firstFailedRank_ < 0 || interruptSignal_ != 0) return;  // the user ended it, not a fault
  std::string selfExited, terminated;
  double latest = 0;
  for (auto& c : children_) {
    if (c->rank == firstFailedRank_) continue;
    std::string& list = c->signalledByUs ? terminated : selfExited;
    if (!list.empty()) list += ", ";
    list += std::to_string(c->rank);
    if (!c->signalledByUs) {
      latest =
          std::max(latest, std::chrono::duration<double>(c->exitedAt - firstFailureAt_).count());
    }
  }
  if (!selfExited.empty()) {
    say("after rank " + std::to_string(firstFailedRank_) + " failed, rank(s) " + selfExited +
        " exited by themselves within " + seconds(std::max(latest, 0.0)));
  }
  if (!terminated.empty()) {
    say("after rank " + std::to_string(firstFailedRank_) + " failed, rank(s) " + terminated +
        " had to be terminated by lanes-run");
  }
}

int Supervisor::exitCode() const {
  if (firstFailedRank_ >= 0) return firstFailureCode_ == 0 ? 1 : firstFailureCode_;
  if (timedOut_) return 124;
  for (auto& c : children_) {
    if (failed(c->waitStatus)) return codeOf(c->waitStatus);
  }
  if (interruptSignal_) return 128 + interruptSignal_;
  return 0;
}

int Supervisor::run() {
  int notRunnable = 0;
  Status st = resolveProgram(options_.command[0], std::getenv("PATH"), &program_, &notRunnable);
  if (!st.isOk()) {
    say(st.message());
    return notRunnable;
  }
  JobEnv job;
  st = makeJobEnv(&job);
  if (st.isOk()) st = setUpSignals();
  if (!st.isOk()) {
    say(st.message());
    return 1;
  }
  if (options_.timeoutSeconds > 0) runDeadline_ = after(options_.timeoutSeconds);
  int execErrno = 0;
  for (auto& c : children_) {
    st = spawn(*c, job, &execErrno);
    if (!st.isOk()) {
      say(st.message() + (c->rank > 0 ? "; stopping the ranks already started" : ""));
      signalRunning(SIGKILL, /*byUs=*/true);
      break;
    }
  }
  loop();
  if (execErrno != 0) return execErrno == ENOENT ? 127 : 126;  // the shell's codes
  summarize();
  return st.isOk() ? exitCode() : 1;
}

}  // namespace lanes::run
