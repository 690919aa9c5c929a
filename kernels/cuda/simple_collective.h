// The mid-size ("simple") collective kernel: all-reduce, all-gather,
// reduce-scatter, broadcast and reduce of 16 KiB to a few MiB per rank
// through mapped host memory, one launch on the caller's stream, no host
// thread and no copy engine in the path.
//
// Protocol (NCCL's Simple idea, through host memory because GPU peer-to-peer
// is off on PCIe boxes). Every rank owns two slots (by the call's sequence
// number's parity, shared with the LL kernel: ll_allreduce.h) of
// [flag words | data]. A call cuts each rank's payload into chunks of
// 64 KiB (kSimpleChunkBytes; a smaller payload is one chunk); writer blocks copy a
// chunk into the slot with plain 16-byte stores, fence them out and then set
// (and push out) the chunk's flag word to the sequence number; reader blocks wait on one
// thread per rank for the chunk's flags, then read the chunk's data from
// every rank they need with 16-byte loads (many in flight per thread),
// reduce them in rank order (the same bits on every rank) or store them.
// Writers and readers are different blocks, so a rank's writes of later
// chunks overlap its reads of earlier ones and the link carries both ways at
// once. Against LL (a flag in every 8 bytes, both crossing PCIe) the payload
// crosses once, for a second round trip per chunk.
//
// Slot reuse rests on the LL kernel's argument: every call reads a flag of
// every peer (a rank that reads no data waits for one flag of each), and the
// sequence number both kernels advance is one. Waits are bounded as LL's are
// and fail into the same control block (kSimpleTimedOut).
//
// Plain C++ interface (no CUDA headers needed by callers).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/ll_allreduce.h"

namespace lanes::cuda {

// A call's chunk: payloads up to 64 KiB go whole, larger ones in 64 KiB
// chunks (every rank cuts alike). Each chunk costs its writer two system
// fences and its reader a flag's round trip, and more chunks in flight did not
// hide that: on an H100 (2 processes under MPS, P2P off) chunks of a quarter
// of the payload took 1.1-1.5 times as long as whole ones at 8-64 KiB per
// rank, 4 KiB chunks 1.7-1.8 times as long at 1-2 MiB
// (bench/results/simple_chunks_h100).
inline constexpr size_t kSimpleChunkBytes = size_t{64} << 10;
inline constexpr size_t kSimpleVectorBytes = 16;  // one load or store

// Where block b of a reduce-scatter's posted input starts in the slot's data:
// b * simpleBlockStride(block bytes), so every block starts 16-byte aligned.
inline size_t simpleBlockStride(size_t bytes) {
  return (bytes + kSimpleVectorBytes - 1) / kSimpleVectorBytes * kSimpleVectorBytes;
}

// Data bytes a rank's posts span for a payload of `bytes` per rank (a
// reduce-scatter's block): a reduce-scatter's blocks sit at their index (its
// own, never posted, left empty), else its input.
inline size_t simplePostedBytes(LlCollective coll, size_t bytes, int nranks) {
  return coll == LlCollective::ReduceScatter
             ? simpleBlockStride(bytes) * static_cast<size_t>(nranks)
             : bytes;
}

// A slot for payloads up to maxBytes posted: its flag words (one per posted
// chunk, plus a partial chunk per reduce-scatter block),
// then the data, each a whole number of 4 KiB pages.
inline size_t simpleFlagBytes(size_t maxBytes, int nranks) {
  const size_t flags = maxBytes / kSimpleChunkBytes + static_cast<size_t>(nranks) + 1;
  return (flags * sizeof(uint64_t) + 4095) / 4096 * 4096;
}
inline size_t simpleSlotBytes(size_t maxBytes, int nranks) {
  return simpleFlagBytes(maxBytes, nranks) + (maxBytes + 4095) / 4096 * 4096;
}

// The simple slots of all ranks take at most this much of the LL arena:
// larger communicators get smaller calls (8 ranks: 4 MiB; 16: 2 MiB; 64: 512 KiB).
inline constexpr size_t kSimpleRegionBudget = size_t{96} << 20;
// Below this LL serves every call the simple kernel could: no simple slots.
inline constexpr size_t kSimpleMinBytes = size_t{64} << 10;

// The most bytes a rank posts on the simple slots for `n` ranks and
// LANES_SIMPLE_MAX_BYTES `maxBytes` (whole 4 KiB pages): 0 where the slots
// would not fit the budget at kSimpleMinBytes.
inline size_t simpleMaxBytesFor(int n, size_t maxBytes) {
  size_t bytes = maxBytes / 4096 * 4096;
  auto region = [n](size_t b) { return 2 * static_cast<size_t>(n) * simpleSlotBytes(b, n); };
  while (bytes >= kSimpleMinBytes && region(bytes) > kSimpleRegionBudget) bytes /= 2;
  return bytes >= kSimpleMinBytes ? bytes / 4096 * 4096 : 0;
}

// Blocks of the simple kernel one multiprocessor holds at once (the fewest
// over its element types). Returns a cudaError_t as int; *out is 1 on error.
int simpleResidentBlocksPerSm(int* out);

// Enqueues one simple collective on `stream`: `args` as for the LL kernel,
// with slots and slotBytes (simpleSlotBytes of maxBytes) naming this
// protocol's slots and `flagBytes` their flag words (simpleFlagBytes).
// maxBlocks must be at least 2 (a writer and a reader). Returns a cudaError_t
// as int: 0 when launched, cudaErrorInvalidValue (1) for bad arguments, else
// the launch error. count == 0 enqueues nothing.
int launchSimpleCollective(const LlAllReduceArgs& args, size_t flagBytes, cudaStream_t stream);

// Loads every simple kernel now (see preloadLlKernels).
int preloadSimpleKernels();

}  // namespace lanes::cuda
