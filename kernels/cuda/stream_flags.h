// One-thread kernels that stand in for cuStreamWaitValue32 /
// cuStreamWriteValue32 where the driver does not provide them (or refuses
// them: CUDA_ERROR_NOT_SUPPORTED), or where LANES_STREAM_MEMOPS=kernel asks
// for them. The flag is a 32-bit counter in mapped host memory, passed as the
// GPU's address of it. Each returns a cudaError_t as int (0: enqueued).
#pragma once

#include <cstdint>

#include "lanes/lanes.h"

namespace lanes::cuda {

// Holds the stream until (int32_t)(*flag - value) >= 0, polling the flag
// with a short sleep between reads; then a system-wide fence, so work after
// it sees what the writer published before the flag.
int launchWaitFlagGeq(const volatile uint32_t* flag, uint32_t value, cudaStream_t stream);

// Once the stream's earlier work is done: a system-wide fence, then *flag =
// value, so whoever sees the value also sees everything written before it.
int launchWriteFlag(volatile uint32_t* flag, uint32_t value, cudaStream_t stream);

// Loads both kernels now (lazy module loading would load them inside a call,
// where loading may wait for streams parked on peers; see reduce.h).
int preloadFlagKernels();

}  // namespace lanes::cuda
