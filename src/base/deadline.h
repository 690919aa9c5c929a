// Deadline: every wait in Lanes is bounded by one of these.
#pragma once

#include <algorithm>
#include <chrono>

namespace lanes {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline after(double seconds) {
    // Past ~30 years (e.g. LANES_TIMEOUT=1e10 meaning "forever"), or NaN, is
    // never: converting it to nanoseconds would overflow (undefined behaviour).
    if (!(seconds < 1e9)) return never();
    return Deadline(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(std::max(seconds, -1e9))));
  }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  bool expired() const { return Clock::now() >= at_; }
  // Milliseconds left, clamped to [0, INT_MAX/2] for poll().
  int remainingMs() const;
  Clock::time_point at() const { return at_; }

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

// Spin, then yield, then sleep: waiting ranks must not starve each other when
// there are more ranks than cores (the test machine has 2).
class Backoff {
 public:
  // `spinLimit`: busy-wait iterations before yielding the core. Long spins
  // win when every rank has a core; when ranks outnumber cores, spinning
  // steals the time slice the awaited peer needs, so callers pass a small one.
  explicit Backoff(unsigned spinLimit = 64) : spinLimit_(spinLimit) {}
  void pause();
  void reset() { spins_ = 0; }

 private:
  unsigned spins_ = 0;
  unsigned spinLimit_;
};

// Spin budget for ranks of this process: LANES_SPIN_ITERATIONS when set, else
// long when `busyThreads` (the threads that move this host's bytes at once:
// its ranks' engines and their TCP workers) fit on the online cores and short
// when they do not; shorter still there when `pollingSyscalls` (a wait's
// every iteration reads sockets: its spin is a string of system calls).
unsigned spinLimitFor(int busyThreads, bool pollingSyscalls = false);
// The threads that move a host's bytes at once: each of its `localRanks`
// ranks' engine, and the TCP workers (`socketThreads` per peer) of the
// peers a step talks to at once (a ring's two, among `tcpPeers`) of the
// ranks at the host's edge (a ring orders ranks by host: two of them).
int threadsMovingBytes(int localRanks, int tcpPeers, int socketThreads);

}  // namespace lanes
