// Counter writes and waits in a stream: cuStreamWriteValue32 /
// cuStreamWaitValue32 reached through the runtime's driver entry points (so
// liblanes links no libcuda and loads without a driver), or one-thread
// kernels (kernels/cuda/stream_flags.h) where the driver lacks or refuses
// them. LANES_STREAM_MEMOPS: auto (default), driver, kernel. The two ways are
// interchangeable per operation: the counters live in host memory and mean
// the same either way, so ranks need not agree. The staged channels take it
// as their StreamCounters (transport/channel/stream_counters.h).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstdint>

#include "base/status.h"
#include "transport/channel/stream_counters.h"

namespace lanes {

class StreamMemops final : public StreamCounters {
 public:
  // The process-wide table; an error only when LANES_STREAM_MEMOPS=driver and
  // the driver lacks the entry points, or the variable is not understood.
  static Status get(const StreamMemops** out);
  // Writes `value` to `hostFlag` (registered, mapped host memory) once the
  // stream's earlier work is done.
  Status write(cudaStream_t stream, volatile uint32_t* hostFlag, uint32_t value) const override;
  // Holds the stream until (int32_t)(*hostFlag - value) >= 0.
  Status waitGeq(cudaStream_t stream, volatile uint32_t* hostFlag, uint32_t value) const override;
  // Whether the driver's memory operations are in use (else the kernels).
  bool usesDriver() const { return driver_.load(std::memory_order_relaxed); }

 private:
  using Fn = int (*)(void* stream, unsigned long long addr, uint32_t value, unsigned flags);
  // A driver call refused with CUDA_ERROR_NOT_SUPPORTED switches the process
  // to the kernels (that operation included).
  bool refused(int result) const;
  // The device's address of `hostFlag`: the host address itself on devices
  // that map registered host memory at the CPU's addresses (the driver's
  // lookup costs a call per counter, several per staged chunk), else the
  // driver's lookup.
  Status deviceAddress(volatile uint32_t* hostFlag, unsigned long long* out) const;

  static constexpr int kCachedDevices = 64;
  Fn write_ = nullptr;
  Fn wait_ = nullptr;
  mutable std::atomic<bool> driver_{false};
  // Per device ordinal: 0 not asked yet, 1 same addresses, -1 look up.
  mutable std::array<std::atomic<int8_t>, kCachedDevices> sameAddress_{};
};

}  // namespace lanes
