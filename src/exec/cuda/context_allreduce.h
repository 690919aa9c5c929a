// Small device all-reduces among ranks that share one CUDA context: every
// rank of the communicator is a thread of this process on the same GPU.
//
// Their buffers are all addressable from one kernel, so nothing needs to
// leave the GPU, and no stream needs to wait for a peer: the ranks meet on
// the host (exec/rank_meeting.h), and the last to arrive enqueues the whole
// call on its own stream, after every rank's input event (recorded by each
// rank on its stream at its arrival): the reduction into its output, a copy
// into each other rank's output, and each other rank's own done event, which
// that rank then makes its stream wait for (from its own thread, so that
// cudaStreamPerThread means what it means to the caller; and events are only
// ever destroyed by their owner). Every dependency
// points back in enqueue order, so streams sharing the context's hardware
// queues cannot deadlock (the LL kernel, which spins for its peers, can: it
// stays off for thread ranks). The cost: a call returns once every rank has
// made it. All ranks get the same bits (one reduction). PreMulSum scales
// each rank's input by that rank's own scalar, as NCCL does.
//
// Serves one all-reduce per batch of at most LANES_SHARED_CONTEXT_MAX_BYTES
// (default 256 KiB) with 2 to 8 ranks (one reduce pass); larger calls take
// the staged path, whose bound the copy engines set.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "exec/comm_view.h"
#include "exec/device_path.h"
#include "exec/rank_meeting.h"
#include "exec/request.h"

namespace lanes {

class ContextAllReduce final : public DeviceContext {
 public:
  static constexpr size_t kDefaultMaxBytes = SelectionConfig().sharedContextMaxBytes;

  // Makes the path where it applies (at init; events only, no collective
  // step: the ranks are all in this process). *out stays null elsewhere.
  static Status create(CommView comm, std::unique_ptr<ContextAllReduce>* out);
  ~ContextAllReduce() override;

  Status drain(Deadline) override { return Status::ok(); }
  // Returns once every rank's part is on its stream, or with the error all
  // ranks got.
  Status enqueue(const Request& r, cudaStream_t stream);
  size_t maxBytes() const { return maxBytes_; }
  // Calls this rank made through the path (tests read where a call went).
  uint64_t calls() const { return calls_; }

 private:
  struct Offer;
  explicit ContextAllReduce(CommView comm) : comm_(comm) {}
  // Run by the last arrival (`mine`, on its `stream`), for all.
  Status enqueueForAll(const std::vector<const void*>& offers, const Offer& mine,
                       cudaStream_t stream);
  // Its waits for the inputs, the reduction and the copies.
  static Status reduceForAll(const std::vector<const Offer*>& offers, const Offer& mine,
                             bool sameScalar, cudaStream_t stream);

  CommView comm_;
  size_t maxBytes_ = kDefaultMaxBytes;
  std::shared_ptr<RankMeeting> meeting_;
  cudaEvent_t ready_ = nullptr;  // recorded on this rank's stream at its arrival
  cudaEvent_t done_ = nullptr;   // recorded by the actor once this rank's output is written
  size_t hookIndex_ = SIZE_MAX;  // our failure hook (CommView::addFailureHook)
  uint64_t calls_ = 0;
};

}  // namespace lanes
