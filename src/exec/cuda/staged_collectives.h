// Device-buffer collectives through the host-staged transport, when every
// rank of the communicator is on this host (several may share one GPU): the
// all-reduce below (staged_collectives.cc); all-gather, broadcast and
// reduce-scatter on the same slots and counters (staged_gather_scatter.cc). No CPU
// thread is in the path: the ranks' own streams move the bytes with the copy
// engines and order themselves by counters in shared host memory
// (cuStreamWriteValue32 / cuStreamWaitValue32). Per chunk g (slot g % K, the
// chunk cut into nranks segments, segment r owned by rank r; with host slots
// rank s's input slot is its inbox, holding every rank p's piece of segment s
// at p's place):
//   A (down):   wait every rank's `consumed` >= g-K; D2H each peer p's segment
//               of my input into p's inbox (P2P: my chunk into my own slot);
//               ready[me] = g.
//   B1 (upload): wait every peer's `ready` >= g; H2D my inbox into scratch in
//               two copies (P2P: my segment of each peer's slot), two halves
//               by chunk parity.
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

#include "core/request.h"
#include "exec/cuda/stage_streams.h"
#include "exec/cuda/staged_watchdog.h"
#include "exec/cuda/stream_memops.h"
#include "exec/device_path.h"
#include "exec/submit_ledger.h"
#include "transport/hoststage/arena.h"
#include "transport/p2p/ipc_slots.h"

namespace lanes {

class StagedCollectives final : public DeviceContext {
 public:
  // Whether the staged path serves this batch of device requests: all
  // all-reduces, or one all-gather/broadcast/reduce-scatter unless a rank
  // set LANES_STAGED_COLLECTIVES=0; every rank on this host; the path not
  // disabled (LANES_STAGED_DISABLE=1) and set up on every rank; not a small
  // batch between processes sharing a GPU (LANES_SHARED_GPU_PROXY_BYTES). The
  // decision is identical on all ranks. The first eligible call sets the path
  // up, collectively. *out is null when the batch must go to the proxy.
  static Status route(lanesComm* comm, const std::vector<Request>& requests,
                      StagedCollectives** out);
  // Moves the sends and receives of `requests` that the staged path serves
  // into *pairs (and sets *out): device send/recv with another rank of this
  // host, once the path is set up with pair slots, larger than the shared-GPU
  // proxy size. The decision depends on the request alone, so both ends of a
  // pair take the same path. The rest stay for the other paths.
  static Status routePairs(lanesComm* comm, std::vector<Request>& requests,
                           std::vector<Request>* pairs, StagedCollectives** out);
  ~StagedCollectives() override;

  // Enqueues the batch on `stream` (requests on other streams of the group
  // join it) and returns without waiting.
  Status enqueue(std::vector<Request>& requests, cudaStream_t stream);
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
  bool usesP2p() const { return p2p_ != nullptr; }
  // Whether the send/recv pair slots are in GPU memory too.
  bool pairsUseP2p() const {
    return arena_ && arena_->layout().pairs() > 0 && !arena_->layout().pairHostData;
  }
  // Whether this rank's stages run on the stream set its communicator's
  // thread ranks on this GPU share (LANES_STAGE_SHARED_STREAMS).
  bool sharesStreams() const { return sharedStreams_ != nullptr; }
  // Why the slots are not in GPU memory ("" when they are).
  const std::string& p2pWhy() const { return p2pWhy_; }

 private:
  explicit StagedCollectives(lanesComm* comm) : comm_(comm) {}
  // Collective: agrees with every rank whether to use the path; a non-OK
  // status means the communicator failed (the ranks could not agree).
  Status setup();
  Status createLocalResources();
  // Points down_, upload_, reduce_ and up_ at `set`.
  void useStreams(const StageStreams& set);
  // After the slots are placed: thread ranks of one GPU move to their shared
  // set of streams (LANES_STAGE_SHARED_STREAMS).
  Status shareStreamsIfWanted();
  Status enqueueOne(const Request& r);
  Status enqueueAllReduce(const Request& r);
  // staged_gather_scatter.cc: the same slots, counters and streams, other
  // choreographies (see there).
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
  // Every counter hand-off goes through these two: `value` written to `flag`
  // once the stream's earlier work is done, and the stream held until
  // `flag` (which rank `writer` writes) reaches `value`. With other ranks of
  // the communicator in this process, a wait for one of their counters is
  // enqueued only after they enqueued the write (submit_ledger.h).
  Status postCounter(cudaStream_t stream, volatile uint32_t* flag, uint32_t value) const;
  Status awaitCounter(cudaStream_t stream, volatile uint32_t* flag, uint32_t value,
                      int writer) const;
  // The counter's line in the arena's flags page (the ledger's index).
  size_t counterLine(volatile uint32_t* flag) const;
  // staged_sendrecv.cc: a group's sends (on down_) and receives (on up_)
  // through the pair slots; sets the batch's stall report.
  Status enqueuePairs(const std::vector<Request>& requests, StagedWatchdog::Batch* batch);
  Status enqueueAllGather(const Request& r);
  Status enqueueBroadcast(const Request& r);
  Status enqueueReduceScatter(const Request& r);
  Status reduceSegment(void* dst, const std::vector<const void*>& srcs, size_t count,
                       const Request& r, cudaStream_t stream);
  // Whether a reduction's pieces are staged in their reader's input slot, its
  // "inbox" (host arena): writer p puts its piece for rank s at p x stride in
  // s's slot, and s uploads them in two copies. Else (P2P) each rank's slot
  // holds its own pieces, and the reader copies from every peer's GPU.
  bool inbox() const { return !p2p_; }
  // Stage B1 of a reduction on upload_: the peers' pieces for this rank,
  // `bytes` each, into `scratch` `stride` apart (peer p at p, or p - 1 past
  // me), each once its writer's ready counter reached g; sets srcs[p]. From
  // the inbox, or (P2P) from `offsetInPeerSlot` in each peer's slot.
  Status uploadPieces(int slot, uint32_t g, size_t stride, size_t bytes, size_t offsetInPeerSlot,
                      std::byte* scratch, std::vector<const void*>* srcs) const;
  void releaseLocalResources();
  // Where rank `rank`'s input slot and `owner`'s part of a result slot are:
  // the shared host arena, or GPU memory reached over P2P (transport/p2p).
  std::byte* inputSlot(int rank, int slot) const;
  std::byte* resultSlot(int owner, int slot) const;
  // Slot `slot` of the pair (sender, receiver): the host arena, or the
  // receiver's GPU memory (LANES_STAGE_PAIR_P2P with P2P slots).
  std::byte* pairSlot(int sender, int receiver, int slot) const;
  // P2P only: whether every peer has consumed every chunk this rank issued,
  // i.e. no peer still reads this rank's GPU slots (bounded by `deadline`).
  bool peersDone(Deadline deadline) const;
  // P2P pair slots only: whether every sender's count of chunks sent to this
  // rank equals what this rank received (no sender still writes its block).
  bool sendersDone() const;

  lanesComm* comm_;
  bool enabled_ = false;
  const StreamMemops* memops_ = nullptr;
  std::unique_ptr<StageArena> arena_;
  std::unique_ptr<IpcSlots> p2p_;  // null: the slots are in the host arena
  std::unique_ptr<StagedWatchdog> watchdog_;
  // Shared with this communicator's other ranks in this process (null when
  // there are none); per rank, whether it is one of them.
  std::shared_ptr<SubmitLedger> ledger_;
  std::vector<bool> inProcess_;
  size_t hookIndex_ = SIZE_MAX;  // our entry in comm_->onFailure
  // The internal streams: this rank's own set, or the set its communicator's
  // thread ranks on this GPU share (stage_streams.h); the handles below are its.
  std::unique_ptr<StageStreams> ownStreams_;
  std::shared_ptr<SharedStageStreams> sharedStreams_;
  cudaStream_t down_ = nullptr, reduce_ = nullptr, up_ = nullptr;
  cudaStream_t upload_ = nullptr;  // its own stream, or reduce_ (LANES_STAGE_OWN_UPLOAD_STREAM=0)
  // Re-recorded per chunk; reduceDone_ per scratch half (chunk parity).
  cudaEvent_t downDone_ = nullptr, uploadDone_ = nullptr, reduceDone_[2] = {nullptr, nullptr};
  void* scratch_ = nullptr;  // 2 halves x scratchSegments_ segments on the GPU
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
};

}  // namespace lanes
