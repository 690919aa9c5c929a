// Owners of the CUDA resources the perf tools and their bounds allocate:
// deleters for std::unique_ptr, so every buffer, stream and event is freed on
// every return path. Include only where CUDA is built (LANES_PERF_CUDA).
#pragma once

#include <cuda_runtime.h>

#include <memory>

namespace lanes::perf {

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct PinnedFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
struct StreamDestroy {
  void operator()(CUstream_st* s) const { cudaStreamDestroy(s); }
};
struct EventDestroy {
  void operator()(CUevent_st* e) const { cudaEventDestroy(e); }
};
using Stream = std::unique_ptr<CUstream_st, StreamDestroy>;
using Event = std::unique_ptr<CUevent_st, EventDestroy>;

}  // namespace lanes::perf
