// The small-message ("LL", low-latency) collective kernel: one block on the
// caller's stream does the whole collective through mapped host memory, so a
// call costs one kernel launch plus a PCIe write and a PCIe read. It serves
// all-reduce, all-gather, reduce-scatter, broadcast and reduce.
//
// Protocol (NCCL's LL idea, through host memory because GPU peer-to-peer is
// off on PCIe boxes). Every rank owns two slots (picked by the call's
// sequence number's parity) of 16-byte lines {data0, flag, data1, flag}:
// 8 bytes of payload, each 4-byte half next to a copy of the flag, written
// with one 16-byte volatile store. A reader accepts a line only when both
// flags equal the call's sequence number, so a line it accepts carries that
// call's data: no fence or separate ready flag is needed, and the data and
// the "ready" signal cross PCIe in the same transaction.
//
// One call: read the sequence number from device memory (so a CUDA Graph
// replay takes a fresh one), write my lines into my slot (my input; for a
// reduce-scatter every block of it; for a broadcast's non-roots one line
// that only says "I am in this call"), read the peers' lines the collective
// needs, reduce them in rank order (identical bits on every rank; Avg
// divides by nranks) or store them, write recv. Every rank reads at least
// one line of every peer in every call: that is what makes slot reuse safe
// whatever the collectives and roots of consecutive calls (ll_allreduce.cu).
// Waits are bounded: a host-set abort word and a timeout end them, leaving an
// error in the host-mapped control block.
//
// Plain C++ interface (no CUDA headers needed by callers).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/datatype.h"
#include "lanes/lanes.h"

namespace lanes::cuda {

inline constexpr size_t kLlLineBytes = 16;   // one line in a slot
inline constexpr size_t kLlLinePayload = 8;  // payload bytes in one line
inline constexpr int kLlMaxRanks = 64;       // the kernel's shared-memory tile needs >= 1 line/rank

// Bytes of one slot for payloads up to maxBytes (whole lines, 128-byte multiple).
inline size_t llSlotBytes(size_t maxBytes) {
  size_t lines = (maxBytes + kLlLinePayload - 1) / kLlLinePayload;
  return (lines * kLlLineBytes + 127) / 128 * 128;
}

// What a kernel leaves in LlControl::error.
enum LlError : uint32_t {
  kLlOk = 0,
  kLlAborted = 1,   // the host set `abort` (communicator failed, aborted or destroyed)
  kLlTimedOut = 2,  // a peer's lines did not arrive within the timeout
  // The send/recv kernel (ll_pairs.h); LlControl::seq is then the message's
  // number between the two ranks.
  kLlSendTimedOut = 3,     // the receiver did not read the message kLlPairDepth before
  kLlReceiveTimedOut = 4,  // the sender's message did not arrive
  kSimpleTimedOut = 5,     // the simple kernel (simple_collective.h): a peer's chunk did not arrive
};

// One rank's control block, in host memory mapped into the device (the kernel
// gets its device pointer). The host writes `abort`; the kernel writes the rest.
struct alignas(64) LlControl {
  uint32_t abort;  // host -> kernel: non-zero makes every waiting kernel give up
  uint32_t error;  // kernel -> host: LlError of the first failed call (sticky)
  uint32_t peer;   // the rank that was waited for when error was set
  uint32_t pad;
  uint64_t seq;      // sequence number of the failed call
  uint64_t entered;  // sequence number of the last call that started
  uint64_t exited;   // sequence number of the last call that finished
  // The same for the send/recv kernel (ll_pairs.h), which counts its launches.
  uint64_t pairEntered;
  uint64_t pairExited;
};

// One rank's state in device memory (read at every call without crossing PCIe).
struct LlDeviceState {
  unsigned long long seq;   // the last sequence number used
  unsigned int failed;      // a call of this rank gave up: later LL calls and sends do nothing
  unsigned int blocksDone;  // blocks of the running call that finished
  // Per slot parity: the sequence number of the LL call that last rewrote
  // the whole slot (ll_lines.cuh, kRefreshMask).
  unsigned long long llRefreshed[2];
  // The send/recv kernel's (ll_pairs.h): messages sent to and received from
  // each peer, the receiver's acknowledgement last seen per peer, launches.
  unsigned long long sent[kLlMaxRanks];
  unsigned long long received[kLlMaxRanks];
  unsigned long long ackSeen[kLlMaxRanks];
  unsigned long long pairLaunches;
  unsigned int pairBlocksDone;
  unsigned int pairSendsDone;  // sending blocks of the running launch that read all their input
};

// Which collective a call is. Counts and buffers as in lanes.h: `count` is
// the per-rank block of an all-gather or reduce-scatter.
enum class LlCollective : uint8_t { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce };

struct LlAllReduceArgs {
  LlCollective coll = LlCollective::AllReduce;
  const void* send = nullptr;  // device memory; unused (may be null) on a broadcast's non-roots
  // Device memory; may equal send (an all-gather's send may be recv's block
  // of this rank, a reduce-scatter's recv send's). Unused (may be null) on a
  // reduce's non-roots.
  void* recv = nullptr;
  // Elements; this rank's input (count, or nranks * count for a
  // reduce-scatter) must fit the slot's payload.
  size_t count = 0;
  lanesDataType_t type = lanesFloat32;
  RedOpKind op = RedOpKind::Sum;  // the reductions' (all-gather and broadcast: ignored)
  double premulScalar = 1.0;      // PreMulSum: this rank's scalar (scales this rank's input)
  int root = 0;                   // broadcast and reduce
  int rank = 0;
  int nranks = 1;
  // Device pointer of the slots: rank r's slot of parity p starts at
  // slots + (2 * r + p) * slotBytes. Unused with one rank.
  void* slots = nullptr;
  size_t slotBytes = 0;
  LlDeviceState* state = nullptr;    // device memory, zeroed before the first call
  LlControl* control = nullptr;      // device pointer of this rank's control block
  unsigned long long timeoutNs = 0;  // per wait; 0 = the kernel's default (300 s)
  // The most blocks the call may use: every block of every rank sharing this
  // GPU must be resident at once (src/exec/cuda/ll_allreduce.cc sets it).
  int maxBlocks = 1;
};

// Lines a block posts, or their worth of reads (llReadWork): below this one
// block's zero-copy reads keep up in an all-reduce (H200, 2 and 8 processes
// under MPS: bench/results/ll_grid_h200).
inline constexpr size_t kLlLinesPerBlock = 4096;
// Blocks polling host memory at once, over all the ranks (LL runs on one
// host): more made every call slower on one GPU (2 processes: an all-reduce of
// 128 KiB took 31 us on 4 blocks each, 79 on 8, 418 on 32; 8 processes: a
// broadcast's readers were fastest on one block each). Whether the bound is each
// GPU's link or the host's is not measured: the share is per host, so a box of
// 8 GPUs, a rank on each, runs one block a rank, as before the grid.
inline constexpr int kLlPollingBlocksPerHost = 8;

// Lines a rank posts in one call (its payload in whole lines; a
// reduce-scatter posts every rank's block).
inline size_t llPostedLines(LlCollective coll, size_t bytes, int nranks) {
  const size_t lines = (bytes + kLlLinePayload - 1) / kLlLinePayload;
  return coll == LlCollective::ReduceScatter ? lines * static_cast<size_t>(nranks) : lines;
}

// A reading rank's work in posted lines' worth. An all-gather's block reads
// half an all-reduce's lines, and a reduce's root, the only reader, takes a
// block per kLlLinesPerBlock / 4 lines of payload where it has fewer than 4
// peers. Measured, 2 processes under MPS on an H100
// (bench/results/ll_grid_h100): an all-gather of 128 KiB took 19.6 us at 4096
// lines a block, 17.6 at 2048; a reduce of 32 KiB 17.7 us on one block, 12.4
// on four (16 KiB: 11.1 on one, 12.4 on two). All-reduces of 32-64 KiB were
// slower and erratic on more blocks, and 8 processes' reduces of 8-16 KiB
// slower on fewer blocks than lines x 7. Rank counts of 3 to 7 are unmeasured.
inline size_t llReadWork(LlCollective coll, size_t lines, size_t peers) {
  switch (coll) {
    case LlCollective::Reduce:
      return lines * (peers < 4 ? 4 : peers);
    case LlCollective::AllGather:
      return lines * peers * 2;
    default:
      return lines * peers;
  }
}

// The grid of one call: enough blocks that each has about kLlLinesPerBlock
// lines to post or their worth to read (llReadWork), within maxBlocks and this
// rank's share of kLlPollingBlocksPerHost (a reduce's root is the only reader;
// in the other collectives every rank reads). `bytes` is a peer's payload (a
// reduce-scatter's block); `readsPeers`: whether this rank reads its peers'
// data (a reduce's non-roots and a broadcast's root read one line of each, and
// only post).
inline int llGridBlocks(LlCollective coll, size_t bytes, int nranks, bool readsPeers,
                        int maxBlocks) {
  const size_t lines = (bytes + kLlLinePayload - 1) / kLlLinePayload;
  const size_t peers = coll == LlCollective::Broadcast ? 1 : static_cast<size_t>(nranks - 1);
  size_t work = readsPeers && nranks > 1 ? llReadWork(coll, lines, peers) : 0;
  const size_t posted = llPostedLines(coll, bytes, nranks);
  if (posted > work) work = posted;
  size_t blocks = (work + kLlLinesPerBlock - 1) / kLlLinesPerBlock;
  const int pollers = coll == LlCollective::Reduce || nranks < 1 ? 1 : nranks;
  const int pollShare = kLlPollingBlocksPerHost / pollers;
  const int cap = maxBlocks < pollShare ? maxBlocks : pollShare;
  if (blocks > static_cast<size_t>(cap)) blocks = static_cast<size_t>(cap);
  return blocks < 1 ? 1 : static_cast<int>(blocks);
}

// Blocks of the LL kernel one multiprocessor holds at once (the fewest over
// the kernel's element types). Returns a cudaError_t as int; *out is 1 on error.
int llResidentBlocksPerSm(int* out);

// Checks a call's arguments for the LL family's collective kernels (this one
// and simple_collective.h) and folds an all-gather's or broadcast's count
// into bytes (they move bytes unchanged: one byte-wise kernel serves every
// type). Returns cudaErrorInvalidValue (1) for bad arguments, else 0.
int prepareLlArgs(LlAllReduceArgs* a);

// Enqueues one LL collective on `stream`. Returns a cudaError_t as int: 0
// when launched, cudaErrorInvalidValue (1) for bad arguments, else the launch
// error. count == 0 enqueues nothing.
int launchLlAllReduce(const LlAllReduceArgs& args, cudaStream_t stream);

// Loads every LL kernel now (see preloadReduceKernels in reduce.h: a lazily
// loaded kernel's first launch may wait for the whole context).
int preloadLlKernels();

}  // namespace lanes::cuda
