// What one GPU's copy engines move, measured in the same run as the
// collectives they bound: cudaMemcpyAsync between pinned host memory and the
// device, each way alone and both ways at once, and device-to-device.
#pragma once

#include <cstddef>

#include "base/status.h"

namespace lanes::perf {

struct CopyBounds {
  double h2d = 0;      // GB/s (1e9 bytes/s), host -> device alone
  double d2h = 0;      // device -> host alone
  double bothH2d = 0;  // host -> device while device -> host runs on another stream
  double bothD2h = 0;  // device -> host while host -> device runs
  double d2dCopy = 0;  // device -> device, bytes copied per second (memory traffic is 2x)
};

// The default transfer: large enough that launch costs vanish.
inline constexpr size_t kBoundBytes = size_t{256} << 20;

// Measures the calling thread's current GPU. Allocates and frees device and
// pinned memory: call it only while no collective of this process is in
// flight (cudaFree waits for every stream of the GPU).
Status measureCopyBounds(size_t bytes, CopyBounds* out);

}  // namespace lanes::perf
