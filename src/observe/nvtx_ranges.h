// NVTX ranges of Lanes' work, in the domain "Lanes", so Nsight Systems shows
// each call and its stages beside the program's own kernels (and projects
// the ranges onto the GPU work enqueued inside them). Built over the CUDA
// toolkit's header-only NVTX 3; a no-op without it. Nothing is pushed, and
// no message is built, unless an NVTX tool is attached
// (NVTX_INJECTION64_PATH, which nsys sets): off costs one branch.
#pragma once

#include <cstdint>
#include <string>

namespace lanes {

// Whether a tool was attached when the process started.
bool nvtxAttached();
// A range pushed on the calling thread (false, and nothing pushed, unless a
// tool is attached) and popped; for ranges that outlive a scope.
bool nvtxPushRange(const char* message, uint64_t payload);
void nvtxPopRange();

// One range on the calling thread: pushed by push(), popped by pop() or at
// the end of its scope. Ranges nest per thread, as NVTX's push/pop do.
class NvtxRange {
 public:
  NvtxRange() = default;
  // `message` names the work; `payload` (bytes, usually) goes with it.
  NvtxRange(const char* message, uint64_t payload) { push(message, payload); }
  ~NvtxRange() { pop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
  void push(const char* message, uint64_t payload) {
    if (!pushed_) pushed_ = nvtxPushRange(message, payload);
  }
  void push(const std::string& message, uint64_t payload) { push(message.c_str(), payload); }
  void pop() {
    if (pushed_) nvtxPopRange();
    pushed_ = false;
  }

 private:
  bool pushed_ = false;
};

}  // namespace lanes
