// cuStreamWriteValue32 / cuStreamWaitValue32 reached through the runtime's
// driver entry points, so liblanes links no libcuda and loads without a driver.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"

namespace lanes {

class StreamMemops {
 public:
  // The process-wide table; an error if the driver lacks the entry points.
  static Status get(const StreamMemops** out);
  // Writes `value` to `hostFlag` (registered, mapped host memory) once the
  // stream's earlier work is done.
  Status write(cudaStream_t stream, volatile uint32_t* hostFlag, uint32_t value) const;
  // Holds the stream until (int32_t)(*hostFlag - value) >= 0.
  Status waitGeq(cudaStream_t stream, volatile uint32_t* hostFlag, uint32_t value) const;

 private:
  using Fn = int (*)(void* stream, unsigned long long addr, uint32_t value, unsigned flags);
  Fn write_ = nullptr;
  Fn wait_ = nullptr;
};

}  // namespace lanes
