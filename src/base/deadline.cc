#include "base/deadline.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "base/env.h"

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
  if (spins_ < spinLimit_) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
    return;
  }
  if (spins_ < spinLimit_ + 2048) {
    sched_yield();
    return;
  }
  timespec ts{0, 20000};  // 20 us: long waits cost little CPU, short ones stay fast
  nanosleep(&ts, nullptr);
}

int threadsMovingBytes(int localRanks, int tcpPeers, int socketThreads) {
  return localRanks + std::min(localRanks, 2) * std::min(tcpPeers, 2) * socketThreads;
}

unsigned spinLimitFor(int busyThreads, bool pollingSyscalls) {
  // -1 (unset): chosen by the cores below.
  static const int64_t configured = envInt("LANES_SPIN_ITERATIONS", -1, 0, UINT_MAX);
  if (configured >= 0) return static_cast<unsigned>(configured);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (busyThreads <= cores) return 4000u;
  // 64 rounds of socket reads hold the core the awaited peer needs: 4
  // namespace hosts on 2 cores took about a tenth longer per 1-16 MiB
  // all-reduce with them than with 8 (bench/results/tcp_netns/halving_doubling).
  return pollingSyscalls ? 8u : 64u;
}

}  // namespace lanes
