// Supervisor: starts the ranks as direct children, forwards their output and
// the launcher's signals, and decides when and how the job ends.
//
// One thread, one poll loop over a signalfd (SIGCHLD, SIGINT, SIGTERM,
// SIGHUP) and two pipes per rank. When a rank fails the others get a grace
// period to fail by themselves (Lanes spreads the news of a dead peer), then
// SIGTERM, then SIGKILL; the summary says which ranks needed which.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"
#include "tools/lanes_run_env.h"
#include "tools/lanes_run_lines.h"
#include "tools/lanes_run_options.h"

namespace lanes::run {

// Owns a file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();

 private:
  int fd_ = -1;
};

// "SIGKILL" for 9; "signal 77" for numbers without a name.
std::string signalName(int sig);

class Supervisor {
 public:
  explicit Supervisor(RunOptions options);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Runs the job to the end; returns lanes-run's exit code.
  int run();

 private:
  struct Child;
  Status setUpSignals();
  // *execErrno: nonzero when the program was forked but exec failed.
  Status spawn(Child& child, const JobEnv& job, int* execErrno);
  void loop();
  void handleSignals();
  void reapChildren();
  void onExit(Child& child, int waitStatus);
  void readOutput(Child& child, bool errStream);
  void checkDeadlines();
  // Asks the ranks still running, whose Lanes handles SIGUSR1, for their
  // flight-recorder dumps before they are terminated (why: the reason given).
  void askForDumps(const std::string& why);
  void terminateRunning();  // SIGTERM, then SIGKILL after kKillAfterTermSeconds
  void signalRunning(int sig, bool byUs);
  int runningCount() const;
  std::string runningList() const;
  void say(const std::string& line) const;  // "lanes-run: ..." on stderr
  int exitCode() const;
  void summarize() const;

  RunOptions options_;
  std::string program_;  // options_.command[0] resolved to a path (lanes_run_program.h)
  std::vector<std::unique_ptr<Child>> children_;
  UniqueFd signalFd_;
  sigset_t savedMask_{};  // restored in each child before exec

  int firstFailedRank_ = -1;
  int firstFailureCode_ = 0;
  Clock::time_point firstFailureAt_{};
  bool timedOut_ = false;
  int interruptSignal_ = 0;
  Deadline runDeadline_ = Deadline::never();
  Deadline graceDeadline_ = Deadline::never();
  Deadline killDeadline_ = Deadline::never();
  Deadline drainDeadline_ = Deadline::never();
  Deadline termDeadline_ = Deadline::never();  // SIGTERM after the dumps' time
  bool dumpsAsked_ = false;
  bool termSent_ = false;
  bool killSent_ = false;
};

}  // namespace lanes::run
