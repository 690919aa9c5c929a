// Deadline: every wait in Lanes is bounded by one of these.
#pragma once

#include <chrono>

namespace lanes {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline after(double seconds) {
    return Deadline(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(seconds)));
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
  void pause();
  void reset() { spins_ = 0; }

 private:
  unsigned spins_ = 0;
};

}  // namespace lanes
