// Where a rank's buffers live: host memory, or device memory of one GPU with
// host mirrors the data check fills and reads. The CUDA half (memory_cuda.cc)
// is compiled only when the build has the CUDA data path (LANES_PERF_CUDA);
// without it the device functions report that. CUDA-free header, so the
// driver and the unit tests never include CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "base/status.h"
#include "lanes/lanes.h"

namespace lanes::perf {

// Whether this build has --memory device (the CUDA data path was built).
bool deviceMemoryBuilt();
// CUDA devices this process sees; 0 without CUDA, driver or GPU.
int visibleGpus();
// Makes `gpu` the calling thread's device (every rank thread calls it).
Status selectGpu(int gpu);
// "[0000:1b:00.0] NVIDIA H200", as nccl-tests' "Using devices" lines show a GPU.
std::string gpuLabel(int gpu);
// The streams of several ranks of one process share a GPU's hardware queues
// (docs/gpu_data_path.md): where a process holds several ranks, ask for 32
// before the first CUDA call. A process of one rank keeps CUDA's default: under
// MPS the clients of a GPU share one pool of queues, and 32 each leave room for
// only a few of them. A value the user set is kept.
void requestDeviceConnections(int ranksInProcess);

class RankMemory {
 public:
  virtual ~RankMemory() = default;
  // The buffers handed to the library.
  uint8_t* send() const { return send_; }
  uint8_t* recv() const { return recv_; }
  // Host memory the data check writes inputs to and reads results from; the
  // same buffers as send()/recv() on host memory.
  uint8_t* hostSend() const { return hostSend_; }
  uint8_t* hostRecv() const { return hostRecv_; }
  bool onDevice() const { return onDevice_; }
  // The stream collectives are enqueued on (nullptr on host memory).
  virtual cudaStream_t stream() const { return nullptr; }

  // Mirrors -> buffers (the first bytes of each), finished when it returns.
  virtual Status upload(size_t sendBytes, size_t recvBytes) { return Status::ok(); }
  // Buffer recv -> mirror, finished when it returns.
  virtual Status download(size_t recvBytes) { return Status::ok(); }
  // Copies within this rank's buffers, ordered on stream() (hypercube's own
  // block).
  virtual Status copy(void* dst, const void* src, size_t bytes) {
    std::memmove(dst, src, bytes);
    return Status::ok();
  }
  // Waits until everything enqueued on stream() has finished.
  virtual Status wait() { return Status::ok(); }

  // CUDA Graph mode (-G): capture what is enqueued between begin and end,
  // then launch it. endCapture(false) discards (a call failed under capture).
  virtual Status beginCapture() { return unsupported(); }
  virtual Status endCapture(bool keep) { return unsupported(); }
  virtual Status launchGraph() { return unsupported(); }

 protected:
  static Status unsupported() { return invalidUsage("CUDA Graph mode (-G) needs --memory device"); }
  uint8_t* send_ = nullptr;
  uint8_t* recv_ = nullptr;
  uint8_t* hostSend_ = nullptr;
  uint8_t* hostRecv_ = nullptr;
  bool onDevice_ = false;
};

// Page-aligned, zeroed host buffers.
Status makeHostMemory(size_t sendBytes, size_t recvBytes, std::unique_ptr<RankMemory>* out);
// cudaMalloc'd buffers on the calling thread's current GPU, pinned mirrors,
// and a non-blocking stream of this rank's own; with nullStream (-y 1) the
// legacy default stream (stream() is nullptr) instead.
Status makeDeviceMemory(size_t sendBytes, size_t recvBytes, std::unique_ptr<RankMemory>* out,
                        bool nullStream = false);

}  // namespace lanes::perf
