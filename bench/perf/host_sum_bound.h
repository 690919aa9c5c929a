// The bound of host summation (src/exec/cuda/staged_host_sum.cc) for N ranks
// whose GPU is the calling thread's: its three parts run at once with no
// dependency between them, as a pipeline at its best would overlap them:
// the N downloads and the N uploads of `bytes` each through that GPU's link,
// and `threads` CPU threads summing N host buffers of `bytes` into one.
#pragma once

#include <cstddef>

#include "base/status.h"

namespace lanes::perf {

struct HostSumBound {
  double seconds = 0;      // all three parts, from the first start to the last end
  double linkSeconds = 0;  // the downloads and uploads alone (while the sum runs)
  double sumSeconds = 0;   // the summation alone (while the copies run)
};

// Allocates N device and 2N + 1 host buffers of `bytes`: call it only while no
// collective of this process is in flight.
Status measureHostSumBound(int nranks, size_t bytes, int threads, HostSumBound* out);

}  // namespace lanes::perf
