// Host memory bandwidth as the shm transport loads it: memcpy between two
// buffers of one rank, timed while every rank of the run does the same, so
// the per-host sum is the aggregate a host-memory collective can reach.
#pragma once

#include <cstddef>

#include "base/status.h"

namespace lanes::perf {

// Small enough for a 2-core CI box; large enough to leave the caches.
inline constexpr size_t kHostCopyBytes = size_t{64} << 20;

// Bytes copied per second / 1e9 (memory traffic is 2x: a read and a write).
Status measureHostCopy(size_t bytes, double* gbps);

}  // namespace lanes::perf
