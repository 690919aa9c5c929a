// StageChannel: what the staged device collectives (src/exec/cuda/staged_*.cc)
// see of the memory they move bytes through, for the ranks of one host:
//   - slots: rank r's input slot k, an owner's result slot k, and slot k of
//     the pair (sender, receiver) for send/recv, each pipeline chunk's bytes
//     copied in and out of them by the ranks' streams;
//   - counters: per rank ready, reduced and consumed, per pair sent and
//     acked, in the host-staging arena's flags page whatever memory holds the
//     slots; a stream posts one once its earlier work is done, or awaits one;
//   - the end: what must stay allocated because a peer or a stream may still
//     touch it.
// Two implementations: host staging, every slot in the shared arena
// (transport/hoststage/host_stage_channel.cc), and P2P, the slots in each
// rank's GPU memory reached over CUDA IPC (transport/p2p/p2p_stage_channel.cc).
// The channel owns the arena (and the IPC block); the choreographies above it
// decide which copies go where and when.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"
#include "lanes/lanes.h"  // cudaStream_t
#include "transport/channel/stream_counters.h"
#include "transport/channel/submit_ledger.h"
#include "transport/hoststage/arena.h"

namespace lanes {

class IpcSlots;

// One counter: where it is, its line in the flags page (the submit ledger's
// index), and the rank whose streams write it.
struct StageCounter {
  volatile uint32_t* flag = nullptr;
  size_t line = 0;
  int writer = -1;
};

// What a channel needs of the communicator it serves.
struct StageChannelContext {
  int rank = 0;
  std::string who;                             // "rank 2 of 4 (name)", for errors
  double timeoutSeconds = 0;                   // bounds every host-side wait (LANES_TIMEOUT)
  const std::atomic<bool>* aborted = nullptr;  // set by lanesCommAbort
  std::function<Status()> checkAbort;          // what a waiting call returns now, or OK
  const StreamCounters* counters = nullptr;    // the writes and waits in streams
  // Shared with this communicator's other ranks in this process (null when
  // there are none), and per rank whether it is one of them.
  std::shared_ptr<SubmitLedger> ledger;
  std::vector<bool> inProcess;
};

// How this rank's work ended (StageChannel::release).
struct StageChannelEnd {
  bool drained = false;    // every batch this rank enqueued has finished
  bool failed = false;     // the communicator failed
  uint32_t lastChunk = 0;  // the collectives' last chunk this rank issued
  // Per sender: the pair chunks this rank took out (empty without pair slots).
  const std::vector<uint64_t>* received = nullptr;
};

class StageChannel {
 public:
  virtual ~StageChannel() = default;
  StageChannel(const StageChannel&) = delete;
  StageChannel& operator=(const StageChannel&) = delete;

  // Slot sizes and counts, the same on every rank.
  const StageArenaLayout& layout() const { return arena_->layout(); }

  // Slots. Rank `rank`'s input slot; `owner`'s part of a result slot (with a
  // shared result slot, owner p's segment sits at its offset in the one
  // slot); slot `slot` of the pair (sender, receiver).
  virtual std::byte* inputSlot(int rank, int slot) const = 0;
  virtual std::byte* resultSlot(int owner, int slot) const = 0;
  virtual std::byte* pairSlot(int sender, int receiver, int slot) const = 0;
  // Whether a reduction's pieces are staged in their reader's input slot, its
  // "inbox": writer p puts its piece for rank s at p x stride in s's slot,
  // and s uploads them in two copies. Else each rank's slot holds its own
  // pieces, and the reader copies from every peer's slot.
  virtual bool inbox() const = 0;
  // Whether every owner's reduced segment goes into one result slot, side by
  // side (a rank then brings up all but its own in two copies), or each into
  // its owner's slot.
  virtual bool sharedResultSlot() const = 0;
  // Whether the slots are in GPU memory reached over P2P (else the host arena).
  virtual bool slotsInGpuMemory() const = 0;
  // Whether the send/recv pair slots are in GPU memory (the receivers').
  bool pairSlotsInGpuMemory() const { return layout().pairs() > 0 && !layout().pairHostData; }
  // How this rank reaches `peer`'s slots, for the log.
  virtual std::string route(int peer) const = 0;

  // Counters: `rank`'s ready / reduced / consumed, and the pair (sender,
  // receiver)'s sent (the sender writes it) and acked (the receiver does).
  StageCounter counter(StageFlag f, int rank) const;
  StageCounter pairCounter(PairFlag f, int sender, int receiver) const;
  // The counter's value now (host side).
  static uint32_t read(const StageCounter& c) { return __atomic_load_n(c.flag, __ATOMIC_ACQUIRE); }
  // Every counter hand-off goes through these two: `value` written to `c`
  // once the stream's earlier work is done, and the stream held until `c`
  // reaches `value`. With other ranks of the communicator in this process, a
  // wait for one of their counters is enqueued only after they enqueued the
  // write (submit_ledger.h): this blocks the calling thread until then.
  Status post(cudaStream_t stream, const StageCounter& c, uint32_t value) const;
  Status await(cudaStream_t stream, const StageCounter& c, uint32_t value) const;
  // await's first half alone: returns once the write of `value` is issued
  // (by a rank of this process: on its stream, or handed to its host
  // reducer and noted with noteIssued), without a wait in any stream.
  Status awaitIssued(const StageCounter& c, uint32_t value) const;
  // Notes that `value` of `c` will be written without a stream (this rank's
  // host reducer raises it), for the waits of this process's other ranks.
  void noteIssued(const StageCounter& c, uint32_t value) const {
    if (context_.ledger) context_.ledger->post(c.line, value);
  }
  // Stores `value` into every counter of every rank and pair (failure: lets
  // each parked stream wait pass). Any thread, any time while the channel lives.
  void poisonAll(uint32_t value) const;
  // The ledger shared with this process's other ranks (null: none).
  const std::shared_ptr<SubmitLedger>& ledger() const { return context_.ledger; }

  // At destruction, after the streams drained or were given up on: keeps
  // allocated what a peer or a stream may still touch (and says so), so the
  // channel's destruction frees only memory nobody uses.
  virtual void release(const StageChannelEnd& end) = 0;

 protected:
  // `arena` is owned by the implementation, which destroys it after its own
  // memory (and keeps this folder free of the arena's CUDA code, so the
  // ledger builds without CUDA).
  StageChannel(StageArena* arena, StageChannelContext context);
  const StageChannelContext& context() const { return context_; }
  // Whether every rank has consumed chunk `lastChunk`, i.e. no peer still
  // reads this rank's slots (bounded by `deadline` and an abort).
  bool peersConsumed(uint32_t lastChunk, Deadline deadline) const;
  // Whether every sender's count of chunks sent to this rank equals what this
  // rank received (no sender still writes its pair slots).
  bool sendersFinished(const std::vector<uint64_t>& received) const;
  // A stream may still use the arena: keep it mapped and pinned for good.
  void leakArena();

 private:
  StageArena* arena_;
  StageChannelContext context_;
};

// The host-staged channel: every slot in the shared arena.
std::unique_ptr<StageChannel> makeHostStageChannel(std::unique_ptr<StageArena> arena,
                                                   StageChannelContext context);

// Bytes of the GPU block each rank of a P2P channel exports: its K input and
// K result slots, then with `pairSlots` the pair slots of every sender to it.
size_t p2pStageBlockBytes(const StageArenaLayout& layout, bool pairSlots);
// The P2P channel: the slots in `slots` (blocks of p2pStageBlockBytes), the
// pair slots there too unless the layout keeps them in host memory; the
// counters in `arena`.
std::unique_ptr<StageChannel> makeP2pStageChannel(std::unique_ptr<StageArena> arena,
                                                  std::unique_ptr<IpcSlots> slots,
                                                  StageChannelContext context);

}  // namespace lanes
