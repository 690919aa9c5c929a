// Waits for GPU work with a limit. cudaEventSynchronize and
// cudaStreamSynchronize never return on a hung GPU or behind a stream that
// waits on a host counter nobody writes; these poll, and past the limit
// return a timeout that names what did not finish.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "base/cuda_check.h"
#include "base/deadline.h"

namespace lanes {

// Until `event` completed (its error, if the GPU reported one), or a timeout
// naming `what` after `seconds`.
inline Status waitEventFor(cudaEvent_t event, double seconds, const char* what) {
  const Deadline deadline = Deadline::after(seconds);
  Backoff backoff;
  for (;;) {
    const cudaError_t q = cudaEventQuery(event);
    if (q != cudaErrorNotReady) return cudaStatus(q, what);
    if (deadline.expired()) {
      char limit[32];
      std::snprintf(limit, sizeof(limit), "%.0f s", seconds);
      return timeoutError(std::string(what) + " did not finish on the GPU within " + limit +
                          ": a hung GPU, a copy that never ends, or a stream waiting on a "
                          "counter nobody writes");
    }
    backoff.pause();
  }
}

// Until the work enqueued on `stream` so far completed, as waitEventFor. The
// stream's device must be current (the event is recorded on it).
inline Status waitStreamFor(cudaStream_t stream, double seconds, const char* what) {
  cudaEvent_t done = nullptr;
  LANES_CUDA_RETURN(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  Status s = cudaStatus(cudaEventRecord(done, stream), "cudaEventRecord");
  if (s) s = waitEventFor(done, seconds, what);
  cudaEventDestroy(done);  // deferred by CUDA until the event completes
  return s;
}

}  // namespace lanes
