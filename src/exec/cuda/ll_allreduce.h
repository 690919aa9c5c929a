// Small-message device collectives (all-reduce, all-gather, reduce-scatter,
// broadcast, reduce) and sends and receives: one LL kernel
// (kernels/cuda/ll_allreduce.h) on the caller's stream, data and flags in
// mapped host memory (a HostArena), for calls of at most LANES_LL_MAX_BYTES per
// rank (default 256 KiB, the planner choosing within it) when every rank of the communicator is on
// this host (several may share one GPU, as threads or processes). No host thread in the path, no
// copy engine, no stream memory operation: the latency is one kernel launch plus a PCIe round trip.
// The sequence number lives in device memory, so a captured CUDA Graph replays correctly (each
// replay takes the next one). Sends and receives of at most pairMaxBytes() ride the pair slots of
// the same arena (kernels/cuda/ll_pairs.h; enqueuePairs in ll_pairs.cc), and the same
// collectives up to simpleMaxBytes() (LANES_SIMPLE_MAX_BYTES) its simple slots, a flag per chunk
// (kernels/cuda/simple_collective.h; enqueueSimple in simple_collective.cc).
//
// Failure handling: the communicator's failure hook sets the abort word every
// waiting kernel polls; a kernel that waits past the communicator's timeout
// leaves an error in the control block, which a monitor thread (50 ms) and the
// next call turn into a communicator failure (lanesCommGetAsyncError).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "exec/comm_view.h"
#include "exec/device_path.h"
#include "exec/request.h"
#include "kernels/cuda/ll_allreduce.h"
#include "transport/hoststage/host_arena.h"

namespace lanes {

class LlAllReduce final : public DeviceContext {
 public:
  // LANES_LL_MAX_BYTES is clamped to this; larger calls never look at LL.
  static constexpr size_t kHardMaxBytes = SelectionConfig::kLlHardMaxBytes;
  static constexpr size_t kDefaultMaxBytes = SelectionConfig().llMaxBytes;

  // Sets LL up where it can serve the rank set (at most kLlMaxRanks, every
  // rank on this host), collectively, at init (exec/device_path.h). Which
  // calls it then serves is the registry's choice (planner/registry.cc).
  static Status setUp(CommView comm);
  ~LlAllReduce() override;

  // Nothing runs on the host: stream order alone orders LL calls.
  Status drain(Deadline) override { return Status::ok(); }

  // Enqueues the call on `stream` and returns without waiting.
  Status enqueue(const Request& r, cudaStream_t stream);
  // Enqueues the call on the simple kernel (simple_collective.cc).
  Status enqueueSimple(const Request& r, cudaStream_t stream);
  // Enqueues a group's sends and receives that the registry gave the pair
  // slots (ll_pairs.cc), in the order the user made them.
  Status enqueuePairs(const std::vector<Request>& pairs, cudaStream_t stream);
  bool enabled() const { return enabled_; }
  // Whether LL serves collectives: every rank allows it (LANES_PROTO); the
  // arena may be set up for the pair slots or the simple kernel alone.
  bool collectivesEnabled() const { return enabled_ && llCollectives_; }
  size_t maxBytes() const { return maxBytes_; }
  // The pair slots: whether the ranks agreed on them, and the largest message.
  bool pairsEnabled() const { return enabled_ && pairMaxBytes_ > 0; }
  size_t pairMaxBytes() const { return pairMaxBytes_; }
  // The simple slots: whether the ranks agreed on them, and the most bytes a rank posts.
  bool simpleEnabled() const { return enabled_ && simpleMaxBytes_ > 0; }
  size_t simpleMaxBytes() const { return simpleMaxBytes_; }
  // Calls of collective `c` enqueued on the simple kernel (for tests: which path ran).
  uint64_t simpleCallsOf(CollType c) const { return simpleCalls_[static_cast<size_t>(c)]; }
  // Sends and receives enqueued on the pair slots (for tests: which path ran).
  uint64_t pairMessages() const { return pairMessages_; }
  // Calls of collective `c` enqueued on this rank (for tests: which path ran).
  uint64_t callsOf(CollType c) const { return calls_[static_cast<size_t>(c)]; }

 private:
  explicit LlAllReduce(CommView comm) : comm_(comm) {}
  // Collective (one rank: local). A non-OK status means the communicator
  // failed (the ranks could not agree).
  Status setup();
  Status createLocalResources();
  // The shared arena for the slots as agreed (collective); *fatal: the
  // communicator failed.
  Status createArena(Deadline deadline, bool* fatal);
  void releaseLocalResources();
  // An error a kernel left in the control block becomes the communicator's.
  Status checkKernels();
  // Orders a launch on `stream` after this rank's previous LL launch (they
  // share the slots and counters); *capturing: inside a CUDA Graph capture.
  Status orderAfterLast(cudaStream_t stream, bool* capturing);
  // A collective's kernel arguments, on the LL slots (the simple kernel swaps them).
  cuda::LlAllReduceArgs argsOf(const Request& r) const;
  // After a launch: what the next one orders after, or the failure it caused.
  Status noteLaunch(int rc, cudaStream_t stream, bool capturing, const char* what);
  unsigned long long kernelTimeoutNs() const;
  void setAbort();
  // Whether every LL kernel this rank launched has finished, waiting until `deadline`.
  bool waitIdle(Deadline deadline);
  void monitor();

  CommView comm_;
  bool enabled_ = false;
  bool llCollectives_ = true;
  size_t maxBytes_ = 0;
  size_t slotBytes_ = 0;
  int maxBlocks_ = 1;        // the grid's cap (cuda::LlAllReduceArgs::maxBlocks)
  size_t pairMaxBytes_ = 0;  // 0: no pair slots
  size_t pairRegion_ = 0;    // where the pair slots start in the arena
  int pairMaxStreams_ = 1;   // the send/recv kernel's blocks per launch
  uint64_t pairMessages_ = 0;
  size_t simpleMaxBytes_ = 0;  // 0: no simple slots
  size_t simpleRegion_ = 0;    // where the simple slots start in the arena
  size_t simpleSlotBytes_ = 0;
  size_t simpleFlagBytes_ = 0;
  int simpleMaxBlocks_ = 2;  // the simple kernel's grid cap
  std::array<uint64_t, kCollTypeCount> simpleCalls_{};
  std::unique_ptr<HostArena> arena_;          // null with one rank
  cuda::LlControl* control_ = nullptr;        // host pointer (cudaHostAlloc, mapped)
  cuda::LlControl* controlDevice_ = nullptr;  // the same, as the GPU addresses it
  cuda::LlDeviceState* state_ = nullptr;      // device memory: sequence number, failed
  // Device memory after the state: in-place sends' inputs, copied aside so
  // that their receives need not wait for them (ll_pairs.cc).
  static constexpr size_t kStateBytes = (sizeof(cuda::LlDeviceState) + 255) / 256 * 256;
  static constexpr size_t kPairScratchBytes = size_t{1} << 20;
  unsigned char* pairScratch_ = nullptr;
  cudaEvent_t last_ = nullptr;                    // after the last eager launch
  cudaStream_t lastStream_ = nullptr;             // where last_ was recorded
  size_t hookIndex_ = SIZE_MAX;                   // our failure hook (CommView::addFailureHook)
  std::array<uint64_t, kCollTypeCount> calls_{};  // by CollType

  std::mutex monitorMutex_;
  std::condition_variable monitorWake_;
  bool stop_ = false;
  std::thread monitor_;
};

}  // namespace lanes
