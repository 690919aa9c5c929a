// A group's device requests may sit on several streams. Every path runs the
// group on one of them: the others join it first (it waits for the work
// already on each) and wait for it after, so the group completes on all of
// its streams, as in NCCL.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "base/status.h"
#include "exec/request.h"

namespace lanes {

// The requests' streams other than `stream`, each once, in request order.
std::vector<cudaStream_t> otherStreams(const std::vector<Request>& requests, cudaStream_t stream);
// `to` waits for the work on `from` so far (through an event released once done).
Status streamWaits(cudaStream_t to, cudaStream_t from);
// `stream` waits for each of `others`.
Status joinStreams(cudaStream_t stream, const std::vector<cudaStream_t>& others);
// Each of `others` waits for `stream`.
Status forkStreams(cudaStream_t stream, const std::vector<cudaStream_t>& others);

}  // namespace lanes
