#include "core/deadline.h"

#include <sched.h>
#include <time.h>

#include <climits>

namespace lanes {

int Deadline::remainingMs() const {
  if (at_ == Clock::time_point::max()) return INT_MAX / 2;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
  if (left <= 0) return 0;
  if (left > INT_MAX / 2) return INT_MAX / 2;
  return static_cast<int>(left);
}

void Backoff::pause() {
  ++spins_;
  if (spins_ < 64) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
    return;
  }
  if (spins_ < 2048) {
    sched_yield();
    return;
  }
  timespec ts{0, 20000};  // 20 us: long waits cost little CPU, short ones stay fast
  nanosleep(&ts, nullptr);
}

}  // namespace lanes
