// A non-blocking stream for one piece of setup work (a memset, a probe),
// destroyed at scope exit once its work has run. Streams never used in the
// critical path live only for a moment: every stream of a process takes one of
// the context's hardware queues in turn, and fewer long-lived streams mean
// fewer ranks sharing a queue.
#pragma once

#include <cuda_runtime.h>

namespace lanes {

class TempStream {
 public:
  TempStream() { err_ = cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking); }
  ~TempStream() {
    if (err_ == cudaSuccess) cudaStreamDestroy(s_);  // deferred until its work ran
  }
  TempStream(const TempStream&) = delete;
  TempStream& operator=(const TempStream&) = delete;
  cudaError_t error() const { return err_; }
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
  cudaError_t err_;
};

}  // namespace lanes
