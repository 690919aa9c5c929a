// Device-buffer collectives through the host-staged transport, when every
// rank of the communicator is on this host (several may share one GPU): the
// all-reduce (staged_allreduce.cc); all-gather, broadcast and reduce-scatter
// on the same slots and counters (staged_gather_scatter.cc); send/recv
// through pair slots (staged_sendrecv.cc); setup, agreement and teardown
// (staged_setup.cc). No CPU thread is in the path: the ranks' own streams
// move the bytes with the copy engines and order themselves by counters in
// shared host memory (cuStreamWriteValue32 / cuStreamWaitValue32). Where the
// slots are, host arena or GPU memory over P2P, is the channel's business
// (transport/channel/stage_channel.h); the choreographies here ask it. Per
// chunk g (slot g % K, the chunk cut into nranks segments, segment r owned by
// rank r; with an inbox, rank s's input slot holds every rank p's piece of
// segment s at p's place):
//   A (down):   wait every rank's `consumed` >= g-K; D2H each peer p's segment
//               of my input into p's inbox (no inbox: my chunk into my own
//               slot); ready[me] = g.
//   B1 (upload): wait every peer's `ready` >= g; H2D my inbox into scratch in
//               two copies (no inbox: my segment of each peer's slot), two
//               halves by chunk parity.
//   B2 (reduce): one reduce kernel (sources in rank order) writes my segment
//               of recvbuf; D2H it into the result slot; reduced[me] = g.
//   C (up):     wait every peer's `reduced` >= g; H2D the other segments of
//               the result slot into recvbuf; consumed[me] = g.
// A, B1, B2 and C are four internal streams (stage_streams.h; thread ranks of
// one GPU with host slots share one set), so chunk g+1 goes down and is
// uploaded while chunk g is reduced and chunk g-1 comes up; no stream carries
// copies of both directions but B2, whose one result copy follows its
// kernel. Every segment is reduced once, by its owner, so every rank gets the
// same bits. docs/gpu_data_path.md has the picture, the bytes on PCIe, and
// the failure handling.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/comm_view.h"
#include "exec/cuda/stage_streams.h"
#include "exec/cuda/staged_watchdog.h"
#include "exec/cuda/stream_memops.h"
#include "exec/device_path.h"
#include "exec/host_reducer.h"
#include "exec/request.h"
#include "transport/channel/stage_channel.h"

namespace lanes {

class StagedCollectives final : public DeviceContext {
 public:
  // Sets the path up where it can serve the rank set (every rank on this
  // host; not thread ranks beside other processes' ranks), collectively, at
  // init (exec/device_path.h). Which calls it then serves, collectives and
  // the pairs' sends and receives, is the registry's choice
  // (planner/registry.cc).
  static Status setUp(CommView comm);
  ~StagedCollectives() override;

  // Enqueues the batch on `stream` (requests on other streams of the group
  // join it) and returns without waiting. `hostSum`: its all-reduces and
  // reduce-scatter are summed by CPU threads (staged_host_sum.cc).
  Status enqueue(std::vector<Request>& requests, cudaStream_t stream, bool hostSum = false);
  // The staged path never touches the host engine's connections, so host
  // calls need not wait for it.
  Status drain(Deadline) override { return Status::ok(); }
  bool servesGatherScatter() const { return gatherScatter_; }
  // Chunks this rank has put on its streams so far (the tests read where a
  // call went from it).
  uint64_t chunksIssued() const { return chunksIssued_; }
  // Send/recv chunks this rank has put on its streams so far.
  uint64_t pairChunksIssued() const { return pairChunksIssued_; }
  // Batches of at most this many bytes take the proxy (0: none).
  size_t proxyUpToBytes() const { return proxyUpToBytes_; }
  // Whether the ranks agreed to use the path (false: the proxy serves all).
  bool enabled() const { return enabled_; }
  // Whether the slots are in GPU memory reached over P2P (else: the host arena).
  bool usesP2p() const { return channel_ && channel_->slotsInGpuMemory(); }
  // Whether the ranks agreed on send/recv pair slots, and whether they are
  // in GPU memory too (LANES_PROTO naming p2p_pairs, where the slots are).
  bool hasPairSlots() const { return enabled_ && !pairSent_.empty(); }
  bool pairsUseP2p() const { return channel_ && channel_->pairSlotsInGpuMemory(); }
  // Whether this rank's stages run on the stream set its communicator's
  // thread ranks on this GPU share (LANES_STAGE_SHARED_STREAMS).
  bool sharesStreams() const { return sharedStreams_ != nullptr; }
  // Why the slots are not in GPU memory ("" when they are).
  const std::string& p2pWhy() const { return p2pWhy_; }
  // Reducer threads per rank of host summation, the same on every rank.
  int hostSumThreads() const { return hostSumThreads_; }
  // Chunks this rank's reducer has summed so far (the tests read where a call went from it).
  uint64_t hostSumChunks() const { return reducer_ ? reducer_->finished() : 0; }

 private:
  explicit StagedCollectives(CommView comm) : comm_(comm) {}

  // staged_setup.cc. Collective: agrees with every rank whether to use the
  // path; a non-OK status means the communicator failed (the ranks could not
  // agree).
  Status setup();
  Status createLocalResources();
  // Points down_, upload_, reduce_ and up_ at `set`.
  void useStreams(const StageStreams& set);
  // After the slots are placed: thread ranks of one GPU move to their shared
  // set of streams (LANES_STAGE_SHARED_STREAMS); `p2pSlots`: the slots are in
  // GPU memory.
  Status shareStreamsIfWanted(bool p2pSlots);
  // The channel over `arena` and, where P2P holds the slots, `p2p`; its
  // counter hand-offs ordered by the ledger of this process's ranks.
  std::unique_ptr<StageChannel> makeChannel(std::unique_ptr<StageArena> arena,
                                            std::unique_ptr<IpcSlots> p2p) const;
  void releaseLocalResources();

  // staged_collectives.cc: what the choreographies share.
  Status enqueueOne(const Request& r, bool hostSum);
  // The next chunk of the communicator's sequence (the same on every rank),
  // noted to the watchdog, and the wait (on `stream`) until every rank has
  // consumed the chunk that last used its slot.
  struct Chunk {
    uint64_t issued = 0;
    uint32_t g = 0;
    int slot = 0;
  };
  Chunk nextChunk();
  Status waitSlotFree(cudaStream_t stream, const Chunk& c) const;
  Status reduceSegment(void* dst, const std::vector<const void*>& srcs, size_t count,
                       const Request& r, cudaStream_t stream);
  // Stage B1 of a reduction on upload_: the peers' pieces for this rank,
  // `bytes` each, into `scratch` `stride` apart (peer p at p, or p - 1 past
  // me), each once its writer's ready counter reached g; sets srcs[p]. From
  // the inbox, or (no inbox) from `offsetInPeerSlot` in each peer's slot.
  Status uploadPieces(int slot, uint32_t g, size_t stride, size_t bytes, size_t offsetInPeerSlot,
                      std::byte* scratch, std::vector<const void*>* srcs) const;

  // The choreographies, one file each: staged_allreduce.cc,
  // staged_gather_scatter.cc, and staged_sendrecv.cc (a group's sends on
  // down_ and receives on up_ through the pair slots; sets the batch's stall
  // report).
  Status enqueueAllReduce(const Request& r);
  Status enqueueAllGather(const Request& r);
  Status enqueueBroadcast(const Request& r);
  Status enqueueReduceScatter(const Request& r);
  Status enqueuePairs(const std::vector<Request>& requests, StagedWatchdog::Batch* batch);
  // staged_host_sum.cc: the chunks summed on the host by reducer_ (made at
  // the first such call).
  Status enqueueHostSumAllReduce(const Request& r);
  Status enqueueHostSumReduceScatter(const Request& r);
  // Hands chunk `c`'s sum of `count` elements at `offset` bytes of every
  // rank's input slot to the reducer, into `offset` of the result slot; with
  // a wire format the slots hold its frames.
  Status pushHostSum(const Request& r, const Chunk& c, size_t offset, size_t count,
                     WireFormat wire);
  // The format r's bytes cross PCIe in: the communicator's LANES_WIRE for
  // float32 sums (Sum, Avg, PreMulSum), else native.
  WireFormat hostSumWire(const Request& r) const;
  // Where C uploads a chunk's frames before decoding them.
  std::byte* upWireScratch() const { return wireScratch_ + wireScratchHalf_; }

  CommView comm_;
  bool enabled_ = false;
  const StreamMemops* memops_ = nullptr;
  // The slots and counters (null until set up, or when the proxy serves all);
  // declared before the watchdog, which reads its counters, so it outlives it.
  std::unique_ptr<StageChannel> channel_;
  std::unique_ptr<StagedWatchdog> watchdog_;
  size_t hookIndex_ = SIZE_MAX;  // our failure hook (CommView::addFailureHook)
  // The internal streams: this rank's own set, or the set its communicator's
  // thread ranks on this GPU share (stage_streams.h); the handles below are its.
  std::unique_ptr<StageStreams> ownStreams_;
  std::shared_ptr<SharedStageStreams> sharedStreams_;
  cudaStream_t down_ = nullptr, reduce_ = nullptr, up_ = nullptr;
  cudaStream_t upload_ = nullptr;
  // Re-recorded per chunk; reduceDone_ per scratch half (chunk parity).
  cudaEvent_t downDone_ = nullptr, uploadDone_ = nullptr, reduceDone_[2] = {nullptr, nullptr};
  void* scratch_ = nullptr;  // 2 halves x scratchSegments_ segments on the GPU
  // A compressed wire (LANES_WIRE): the GPU memory A encodes a chunk into
  // (first half) and C uploads its frames into (second half); null without.
  std::byte* wireScratch_ = nullptr;
  size_t wireScratchHalf_ = 0;
  size_t scratchStride_ = 0;
  size_t scratchSegments_ = 0;
  uint64_t chunksIssued_ = 0;  // advances identically on every rank
  // Per peer: chunks sent to it and received from it through the pair slots
  // (each pair's two ends advance alike); empty without pair slots.
  std::vector<uint64_t> pairSent_, pairReceived_;
  uint64_t pairChunksIssued_ = 0;
  // Batches of at most this many bytes go to the proxy: processes share a GPU
  // (LANES_SHARED_GPU_PROXY_BYTES, the smallest among the ranks); else 0.
  size_t proxyUpToBytes_ = 0;
  // No rank set LANES_STAGED_COLLECTIVES=0: all-gather, broadcast and
  // reduce-scatter take the path too (else the proxy).
  bool gatherScatter_ = false;
  std::string p2pWhy_;
  int hostSumThreads_ = 1;
  // Declared after the channel: destroyed first, its threads read the slots.
  std::unique_ptr<HostReducer> reducer_;
};

}  // namespace lanes
