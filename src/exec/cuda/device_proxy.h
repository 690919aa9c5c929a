// Device buffers through the host path: the caller's stream copies the input
// down to pinned staging (copy engine), raises a start flag, and waits on a
// done flag; a proxy thread per communicator sees the start flag, runs the
// collective on the staged bytes with the host engine (any transport, any
// datatype and op), and raises the done flag; the stream then copies the
// result up. The caller never blocks and no SM is used.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "exec/comm_view.h"
#include "exec/cuda/pinned_pool.h"
#include "exec/cuda/stream_memops.h"
#include "exec/device_path.h"
#include "exec/request.h"

namespace lanes {

class DeviceProxy final : public DeviceContext {
 public:
  // The communicator's proxy, created on first use.
  static Status of(CommView comm, DeviceProxy** out);
  ~DeviceProxy() override;

  Status enqueue(std::vector<Request>& requests, cudaStream_t stream);
  // Pins staging up front (LANES_PROXY_PREPIN_BYTES, default 16 MiB in 4 blocks).
  Status prewarm();
  // Waits until every batch enqueued so far has run on the host (a
  // host-memory call on the same communicator must come after them).
  Status drain(Deadline deadline) override;

 private:
  struct Batch {
    uint32_t seq = 0;
    std::vector<Request> staged;  // the requests, pointing at staging
    std::vector<PinnedPool::Block> blocks;
    cudaEvent_t finished = nullptr;  // after the result copies: staging reusable
  };

  DeviceProxy(CommView comm, const StreamMemops* memops);
  Status init();
  void run();
  void reclaim(bool wait);
  void waitForStart(const Batch& batch);

  CommView comm_;
  const StreamMemops* memops_;
  PinnedPool pool_;
  // flags_[0]: start (written by streams), flags_[16]: done (written here).
  volatile uint32_t* flags_ = nullptr;
  uint32_t nextSeq_ = 0;
  // Recorded after the previous batch's start flag: batches issued on
  // different streams still raise their flags in issue order.
  cudaEvent_t lastStarted_ = nullptr;
  bool running_ = false;  // the proxy thread is executing a batch

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable drained_;
  std::deque<Batch> queue_;
  std::deque<Batch> finished_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace lanes
