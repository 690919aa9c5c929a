// Device send/recv in LL lines (ll_allreduce.h's {data0, flag, data1, flag}
// format) through mapped host memory: one kernel per group on the caller's
// stream, no copy engine, no stream memory operation, no host thread.
//
// Every ordered pair of ranks (sender s, receiver r) owns kLlPairDepth slots
// in the LL arena. Message m from s to r (m = 1, 2, ... in the order the
// sends and receives are made, as in NCCL) goes to slot m % kLlPairDepth, its
// lines flagged with m: the receiver accepts a line once both flags equal m.
// After reading a message the receiver stores m in the pair's
// acknowledgement word; a sender reuses a slot only once the acknowledgement
// says the message kLlPairDepth before is read. Both counters live in device
// memory, so a CUDA Graph replay takes fresh message numbers.
//
// A launch runs one block per stream of messages, (direction, peer): a block
// handles its stream's messages in order, so several messages to one peer in
// one group pass through the slots as the receiver's block frees them. Every
// block of every rank sharing a GPU must be resident at once (a receiving
// block spins): the host caps the streams per launch (LlAllReduce).
//
// Plain C++ interface (no CUDA headers needed by callers).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/ll_allreduce.h"

namespace lanes::cuda {

// Slots per ordered pair: messages a sender may have unread before it waits.
inline constexpr int kLlPairDepth = 4;
// The largest message the pair slots carry: one block reads at most this
// many lines per message (as many as one block of an all-reduce reads).
inline constexpr size_t kLlPairMaxBytes = size_t{64} << 10;
// Streams of one launch: a send and a receive stream per peer at most.
inline constexpr int kLlPairMaxStreams = 2 * (kLlMaxRanks - 1);
// Messages one launch carries: a group's LL messages are one launch (a
// stream split over launches could wait for acknowledgements its peer gives
// only in a later launch), and the caller refuses groups with more.
inline constexpr int kLlPairMaxMessages = 2048;

// One send or receive of a group.
struct LlPairMessage {
  bool send = false;
  int peer = 0;
  const void* buf = nullptr;  // device memory: a send's input or a receive's output
  size_t bytes = 0;
};

struct LlPairArgs {
  int rank = 0;
  int nranks = 2;
  // Device pointers into the LL arena: the pair slots (pair (s, r)'s slot k at
  // slots + ((s * nranks + r) * kLlPairDepth + k) * slotBytes) and the
  // acknowledgement words (pair (s, r)'s at acks + (s * nranks + r) * 64).
  void* slots = nullptr;
  size_t slotBytes = 0;
  void* acks = nullptr;
  LlDeviceState* state = nullptr;  // the collectives' device state (ll_allreduce.h)
  LlControl* control = nullptr;    // device pointer of this rank's control block
  unsigned long long timeoutNs = 0;
  int maxStreams = 1;  // streams one launch may run (resident blocks per rank)
};

// Bytes of the pair slots and acknowledgement words for `nranks` ranks and
// messages of at most `maxBytes`.
size_t llPairSlotBytes(size_t maxBytes);
size_t llPairRegionBytes(int nranks, size_t maxBytes);
// Offset of the acknowledgement words within the region.
size_t llPairAckOffset(int nranks, size_t maxBytes);

// Blocks of the send/recv kernel one multiprocessor holds at once. Returns a
// cudaError_t as int; *out is 1 on error.
int llPairResidentBlocksPerSm(int* out);

// Enqueues `messages` (in the order the user made them) on `stream` in one
// launch: at most args.maxStreams streams and kLlPairMaxMessages messages.
// sendsBeforeReceives (a receive's output overlaps a send's input): the
// receiving blocks write nothing before every sending block has read all its
// input (a send that then waits for a slot waits for receives that wait for
// it: the caller copies such inputs aside first). Messages of zero bytes are
// skipped (both ends skip them alike). Returns a cudaError_t as int:
// cudaErrorInvalidValue for bad arguments or too many messages, else the
// launch error.
int launchLlPairs(const LlPairArgs& args, const LlPairMessage* messages, size_t count,
                  bool sendsBeforeReceives, cudaStream_t stream);

int preloadLlPairKernels();

}  // namespace lanes::cuda
