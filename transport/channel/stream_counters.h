// Counter writes and waits in a stream, as the staged channels use them
// (stage_channel.h): the counters live in registered, mapped host memory; a
// stream writes one once its earlier work is done, or waits until one reaches
// a value. The executor supplies the implementation (exec/cuda/stream_memops.h:
// the driver's stream memory operations, or one-thread kernels from kernels/,
// a folder of this layer that transport/ does not include).
#pragma once

#include <cstdint>

#include "base/status.h"
#include "lanes/lanes.h"  // cudaStream_t

namespace lanes {

class StreamCounters {
 public:
  // Writes `value` to `hostFlag` once the stream's earlier work is done.
  virtual Status write(cudaStream_t stream, volatile uint32_t* hostFlag, uint32_t value) const = 0;
  // Holds the stream until (int32_t)(*hostFlag - value) >= 0.
  virtual Status waitGeq(cudaStream_t stream, volatile uint32_t* hostFlag,
                         uint32_t value) const = 0;

 protected:
  ~StreamCounters() = default;
};

}  // namespace lanes
