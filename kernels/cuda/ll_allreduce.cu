// The LL collective kernel (interface and protocol: ll_allreduce.h; host side:
// src/exec/cuda/ll_allreduce.cc; picture: docs/gpu_data_path.md, "Small messages").
//
// A grid of up to LlAllReduceArgs::maxBlocks blocks of kThreads threads,
// sized to the call (llGridBlocks: kLlLinesPerBlock lines a block to post or
// their worth to read, llReadWork; one block for the smallest calls).
// Zero-copy reads of host memory are latency bound: more blocks keep more of
// them in flight.
//  1. thread 0 of each block takes the sequence number and the sticky failure
//     flag from device memory (no PCIe read); after a failed call the kernel
//     touches nothing (the ranks are out of step);
//  2. the grid writes this rank's lines into this rank's slot of parity
//     seq & 1 (a reduce-scatter: every block of its input, in block order; a
//     broadcast's non-root: one line, no payload); a reducing rank's block
//     posts the lines of its own tiles (in place, it overwrites them with
//     results), the others a grid-strided share;
//  3. tile by tile, tiles dealt to the blocks in turn (a tile: as many lines
//     as fit, for all ranks, in 32 KiB of shared memory, or a block's share
//     if less): this rank's lines go to shared memory from the input, every
//     peer's lines (a reduce-scatter: those of this rank's block) from its
//     slot once both flags equal seq; each thread polls up to kBatch lines at
//     once so their PCIe reads overlap;
//  4. each line is reduced over ranks 0..n-1 in order with reduce_ops.cuh's
//     arithmetic (the same as reduce.cu), Avg divided once, and stored to recv;
//  5. the last block to finish advances the sequence number for the next call.
// All-gather and a broadcast's non-roots skip step 4: every line read is
// stored at once where it belongs in recv. A reduce's non-roots and a
// broadcast's root read no data: they wait for one line of every peer.
//
// Slot reuse needs no extra wait: a rank writes slot p for call s+2 only after
// its call s+1 finished, which needed a line of every peer's call s+1, which a
// peer writes only after its own call s finished reading slot p (every block
// of it: the grid ends before the next call starts). Calls of one rank never
// overlap (one stream, or the host chains them with an event).
//
// Every block of every rank sharing a GPU must be resident at once (a block
// spins until its peers' lines come): the host caps the grid at the GPU's
// multiprocessors over the ranks sharing it (one block always fits on one).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "base/datatype.h"
#include "kernels/cuda/ll_allreduce.h"
#include "kernels/cuda/ll_lines.cuh"
#include "kernels/cuda/reduce_ops.cuh"

namespace lanes::cuda {
namespace {

using namespace ll;

constexpr int kThreads = 512;
constexpr int kTileWords = 4096;  // 32 KiB: one 8-byte payload per (rank, line) of a tile
constexpr int kBatch = 4;         // peer lines one thread has in flight
// A rank posting fewer lines than this fences them out before it reads: so
// few stores lingered in the GPU's write path until later traffic pushed them
// out (2 processes under MPS on the H200: all-reduces of 2-11 KiB took about
// 21 us instead of 10); more lines push themselves out, and the fence would
// only delay the reads (64 KiB: +20%). A broadcast between two ranks does not
// fence: its root then has one reader, and the fence only delayed the call
// (2 processes under MPS, 2-8 KiB: on an H100 7.8-10.7 us without it against
// 8.3-13.6 with it, faster in 11 of 12 interleaved pairs; on the H200 1-4 KiB
// 6.8-7.4 against 7.5-7.6). With 8 processes on the H200 the fenced broadcast
// was the faster (4-16 KiB: 26.7-29.5 us against 28.1-31.5).
constexpr size_t kFenceBelowLines = 1536;

template <class S>
struct Args {
  const unsigned char* send;
  unsigned char* recv;
  size_t bytes;  // one block: what a peer's lines bring (a reduce-scatter's input holds nranks)
  unsigned char* slots;
  size_t slotBytes;
  LlDeviceState* state;
  LlControl* control;
  unsigned long long timeoutNs;
  int rank;
  int nranks;
  int root;
  LlCollective coll;
  Fn fn;        // the combining op (Avg and PreMulSum: Sum)
  bool premul;  // scale this rank's input by `scalar`
  bool avg;     // divide the result by nranks
  S scalar;
};

template <class S>
union Line {
  uint64_t u;
  S e[kLlLinePayload / sizeof(S)];
};

// Payload line i of the input block at `block` (PreMulSum: already scaled).
template <class S>
__device__ __forceinline__ uint64_t inputLine(const Args<S>& a, const unsigned char* block,
                                              size_t i) {
  Line<S> l;
  l.u = loadBytes(block, a.bytes, i);
  if (a.premul) {
#pragma unroll
    for (int e = 0; e < static_cast<int>(kLlLinePayload / sizeof(S)); ++e)
      l.e[e] = Num<S>::mul(l.e[e], a.scalar);
  }
  return l.u;
}

template <class S>
__device__ __forceinline__ void storeOutput(const Args<S>& a, size_t i, uint64_t v) {
  storeBytes(a.recv, a.bytes, i, v);
}

// Where rank r's lines go in a gathering rank's output: its block of an
// all-gather's, or the whole of a broadcast's.
template <class S>
__device__ __forceinline__ unsigned char* gatheredBlock(const Args<S>& a, int r) {
  return a.coll == LlCollective::AllGather ? a.recv + static_cast<size_t>(r) * a.bytes : a.recv;
}

// Ranks 0..n-1 of tile column j, combined left to right with F.
template <class S, Fn F>
__device__ __forceinline__ Line<S> combineColumn(int nranks, const uint64_t* tile, int tileLines,
                                                 int j) {
  constexpr int kElems = kLlLinePayload / sizeof(S);
  Line<S> acc;
  acc.u = tile[j];
  for (int q = 1; q < nranks; ++q) {
    Line<S> in;
    in.u = tile[q * tileLines + j];
#pragma unroll
    for (int e = 0; e < kElems; ++e) acc.e[e] = combine<S, F>(acc.e[e], in.e[e]);
  }
  return acc;
}

// The op is a run-time (block-uniform) choice: one kernel per datatype keeps
// the build short; a branch per line costs nothing next to a PCIe read.
template <class S>
__device__ __forceinline__ uint64_t reduceColumn(const Args<S>& a, const uint64_t* tile,
                                                 int tileLines, int j) {
  Line<S> acc;
  switch (a.fn) {
    case Fn::Prod:
      acc = combineColumn<S, Fn::Prod>(a.nranks, tile, tileLines, j);
      break;
    case Fn::Max:
      acc = combineColumn<S, Fn::Max>(a.nranks, tile, tileLines, j);
      break;
    case Fn::Min:
      acc = combineColumn<S, Fn::Min>(a.nranks, tile, tileLines, j);
      break;
    default:
      acc = combineColumn<S, Fn::Sum>(a.nranks, tile, tileLines, j);
      break;
  }
  if (a.avg && a.nranks > 1) {
#pragma unroll
    for (int e = 0; e < static_cast<int>(kLlLinePayload / sizeof(S)); ++e)
      acc.e[e] = Num<S>::div(acc.e[e], a.nranks);
  }
  return acc.u;
}

template <class S>
__global__ void __launch_bounds__(kThreads, 1) llAllReduceKernel(const Args<S> a) {
  __shared__ uint64_t tile[kTileWords];
  __shared__ unsigned long long sSeq, sDeadline;
  __shared__ int sFailed;
  __shared__ bool sRefresh;
  volatile LlControl* vc = a.control;
  const int tid = static_cast<int>(threadIdx.x);
  const int nthreads = static_cast<int>(blockDim.x);
  const int block = static_cast<int>(blockIdx.x);
  const int nblocks = static_cast<int>(gridDim.x);
  // This thread's place in grid-strided loops.
  const size_t gtid = static_cast<size_t>(block) * nthreads + tid;
  const size_t gthreads = static_cast<size_t>(nblocks) * nthreads;

  if (tid == 0) {
    beginCall(a.state, vc, a.timeoutNs, &sSeq, &sDeadline, &sFailed);
    // This parity's slot was last rewritten whole too long ago (or never).
    sRefresh = sSeq < 2 || sSeq - a.state->llRefreshed[sSeq & 1] > kRefreshMask;
  }
  __syncthreads();
  const unsigned long long seq = sSeq;
  const int parity = static_cast<int>(seq & 1);
  const uint32_t flag = static_cast<uint32_t>(seq);
  const size_t nlines = (a.bytes + kLlLinePayload - 1) / kLlLinePayload;
  const bool scatter = a.coll == LlCollective::ReduceScatter;
  const bool reducing = rankReduces(a.coll, a.rank, a.root);
  const bool gathering = rankGathers(a.coll, a.rank, a.root);
  // This rank's own block of the input (a reduce-scatter's: block `rank`).
  const unsigned char* own = a.send + (scatter ? static_cast<size_t>(a.rank) * a.bytes : 0);

  if (!sFailed && a.nranks == 1) {
    for (size_t i = gtid; i < nlines; i += gthreads) storeOutput(a, i, inputLine(a, own, i));
  } else if (!sFailed) {
    auto slotOf = [&](int r) {
      return reinterpret_cast<uint4*>(a.slots +
                                      (2 * static_cast<size_t>(r) + parity) * a.slotBytes);
    };
    // Tiles: dealt to the blocks in turn; a gathering rank needs no shared
    // memory, so its tile is a block's share.
    const size_t share = (nlines + nblocks - 1) / nblocks;
    const size_t tileCap = static_cast<size_t>(kTileWords / a.nranks);
    const int tileLines = static_cast<int>(gathering || share < tileCap ? share : tileCap);
    const size_t firstTile = static_cast<size_t>(block) * tileLines;
    const size_t tileStride = static_cast<size_t>(nblocks) * tileLines;

    // 2. Post my lines (and, on a refresh call, the rest of the slot too). A
    // reducing block posts the lines of its own tiles: in place, it writes
    // their results over the input after its barrier below, and no other
    // block may read an input line that one has overwritten.
    const bool silent = a.coll == LlCollective::Broadcast && a.rank != a.root;
    const size_t postLines = silent ? 1 : scatter ? nlines * a.nranks : nlines;
    uint4* mine = slotOf(a.rank);
    auto post = [&](size_t i) {
      const uint64_t v = silent    ? 0
                         : scatter ? inputLine(a, a.send + i / nlines * a.bytes, i % nlines)
                                   : inputLine(a, a.send, i);
      storeLine(mine + i, v, flag);
    };
    if (reducing) {
      const size_t copies = scatter ? static_cast<size_t>(a.nranks) : 1;  // blocks of the input
      for (size_t t0 = firstTile; t0 < nlines; t0 += tileStride) {
        const size_t left = nlines - t0;
        const size_t tl = left < static_cast<size_t>(tileLines) ? left : tileLines;
        for (size_t k = tid; k < copies * tl; k += nthreads) post(k / tl * nlines + t0 + k % tl);
      }
    } else {
      for (size_t i = gtid; i < postLines; i += gthreads) post(i);
    }
    if (sRefresh) {
      const size_t slotLines = a.slotBytes / kLlLineBytes;
      for (size_t i = postLines + gtid; i < slotLines; i += gthreads) storeLine(mine + i, 0, flag);
    }
    if (a.coll == LlCollective::Broadcast && a.rank == a.root)
      for (size_t i = gtid; i < nlines; i += gthreads) storeOutput(a, i, inputLine(a, own, i));

    const bool twoRankBroadcast = a.coll == LlCollective::Broadcast && a.nranks == 2;
    if (!silent && !twoRankBroadcast && postLines < kFenceBelowLines) __threadfence_system();

    // 3-4. Tile by tile: gather the lines read, then reduce them. A gathering
    // rank stores each line where it belongs at once. The lines read: every
    // peer's (a reduce-scatter: of my block), or a broadcast's root's alone.
    const bool fromRoot = a.coll == LlCollective::Broadcast;
    const int readPeers = fromRoot ? 1 : a.nranks - 1;
    const size_t readFrom = scatter ? static_cast<size_t>(a.rank) * nlines : 0;
    for (size_t t0 = firstTile; (reducing || gathering) && t0 < nlines; t0 += tileStride) {
      const size_t left = nlines - t0;
      const int tl = left < static_cast<size_t>(tileLines) ? static_cast<int>(left) : tileLines;
      for (int j = tid; j < tl && !fromRoot; j += nthreads) {
        if (gathering)
          storeBytes(gatheredBlock(a, a.rank), a.bytes, t0 + j, inputLine(a, own, t0 + j));
        else
          tile[a.rank * tileLines + j] = inputLine(a, own, t0 + j);
      }
      const int pairs = readPeers * tl;  // (peer, line) pairs of this tile
      for (int base = tid; base < pairs; base += nthreads * kBatch) {
        const uint4* src[kBatch];
        int col[kBatch];
        int peer[kBatch];
        bool need[kBatch];
#pragma unroll
        for (int k = 0; k < kBatch; ++k) {
          const int p = base + k * nthreads;
          need[k] = p < pairs;
          const int other = need[k] ? p / tl : 0;
          const int j = need[k] ? p % tl : 0;
          peer[k] = fromRoot ? a.root : other < a.rank ? other : other + 1;
          src[k] = slotOf(peer[k]) + readFrom + t0 + j;
          col[k] = j;
        }
        unsigned polls = 0;
        bool gaveUp = false;
        for (;;) {
          uint4 v[kBatch];
#pragma unroll
          for (int k = 0; k < kBatch; ++k)
            if (need[k]) v[k] = loadLine(src[k]);  // issued together: the reads overlap
          int waitingFor = -1;
#pragma unroll
          for (int k = 0; k < kBatch; ++k) {
            if (!need[k]) continue;
            if (lineHas(v[k], flag)) {
              const uint64_t got = linePayload(v[k]);
              if (gathering)
                storeBytes(gatheredBlock(a, peer[k]), a.bytes, t0 + col[k], got);
              else
                tile[peer[k] * tileLines + col[k]] = got;
              need[k] = false;
            } else if (waitingFor < 0) {
              waitingFor = peer[k];
            }
          }
          if (waitingFor < 0) break;
          if (giveUp(a.state, a.control, &sFailed, sDeadline, &polls, waitingFor, seq)) {
            gaveUp = true;
            break;
          }
        }
        if (gaveUp) break;
      }
      __syncthreads();
      if (sFailed) break;  // read after the barrier: every thread leaves together
      if (reducing) {
        for (int j = tid; j < tl; j += nthreads)
          storeOutput(a, t0 + j, reduceColumn<S>(a, tile, tileLines, j));
      }
      __syncthreads();  // the tile is refilled next
    }

    // Every rank reads a line of every peer in every call (slot reuse rests on
    // it): here those of the peers whose data it did not read above.
    const bool readAll = reducing || a.coll == LlCollective::AllGather;
    const int peer = tid;
    const bool readRoot = gathering && fromRoot && peer == a.root;  // a broadcast's non-root
    if (!sFailed && block == 0 && !readAll && !readRoot && peer < a.nranks && peer != a.rank) {
      const uint4* line = slotOf(peer);
      unsigned polls = 0;
      for (;;) {
        const uint4 v = loadLine(line);
        if (lineHas(v, flag)) break;
        if (giveUp(a.state, a.control, &sFailed, sDeadline, &polls, peer, seq)) break;
      }
    }
  }

  // 5. The last block out advances the sequence number (and notes a refresh).
  __syncthreads();
  endCall(a.state, vc, seq, sRefresh ? &a.state->llRefreshed[seq & 1] : nullptr);
}

template <class S>
int launchTyped(const LlAllReduceArgs& in, Fn fn, bool premul, bool avg, cudaStream_t stream) {
  Args<S> a{};
  a.send = static_cast<const unsigned char*>(in.send);
  a.recv = static_cast<unsigned char*>(in.recv);
  a.bytes = in.count * sizeof(S);
  a.slots = static_cast<unsigned char*>(in.slots);
  a.slotBytes = in.slotBytes;
  a.state = in.state;
  a.control = in.control;
  a.timeoutNs = in.timeoutNs;
  a.rank = in.rank;
  a.nranks = in.nranks;
  a.root = in.root;
  a.coll = in.coll;
  a.fn = fn;
  a.premul = premul;
  a.avg = avg;
  if (premul) a.scalar = Num<S>::fromScalar(in.premulScalar);
  const bool readsPeers = !(in.coll == LlCollective::Reduce && in.rank != in.root) &&
                          !(in.coll == LlCollective::Broadcast && in.rank == in.root);
  const int blocks = llGridBlocks(in.coll, a.bytes, in.nranks, readsPeers, in.maxBlocks);
  llAllReduceKernel<S><<<blocks, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

template <class S>
int dispatchOp(const LlAllReduceArgs& a, cudaStream_t stream) {
  // The lines this rank posts must fit its slot.
  const size_t posted = llPostedLines(a.coll, a.count * sizeof(S), a.nranks);
  if (a.nranks > 1 && posted > a.slotBytes / kLlLineBytes) return cudaErrorInvalidValue;
  OpPlan op;
  if (!planOp(a.op, a.premulScalar, &op)) return cudaErrorInvalidValue;
  return launchTyped<S>(a, op.fn, op.premul, op.avg, stream);
}

template <class S>
int residentTyped(int* perSm) {
  int n = 0;
  const int rc =
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, llAllReduceKernel<S>, kThreads, 0);
  if (rc == cudaSuccess) *perSm = std::min(*perSm, n);
  return rc;
}

template <class S>
int preloadTyped() {
  cudaFuncAttributes attr{};
  return cudaFuncGetAttributes(&attr, llAllReduceKernel<S>);
}

}  // namespace

int preloadLlKernels() {
  return forEachElementType([](auto tag) { return preloadTyped<typename decltype(tag)::type>(); });
}

int llResidentBlocksPerSm(int* out) {
  int perSm = 1 << 20;
  const int rc = forEachElementType(
      [&](auto tag) { return residentTyped<typename decltype(tag)::type>(&perSm); });
  *out = rc == cudaSuccess ? perSm : 1;
  return rc;
}

int prepareLlArgs(LlAllReduceArgs* a) {
  const bool moves = a->coll == LlCollective::AllGather || a->coll == LlCollective::Broadcast;
  if (moves) {  // bytes move unchanged: one byte-wise kernel serves every type
    if (datatypeSize(a->type) == 0) return cudaErrorInvalidValue;
    a->count *= datatypeSize(a->type);
    a->type = lanesUint8;
    a->op = RedOpKind::Sum;
  }
  if (a->nranks < 1 || a->nranks > kLlMaxRanks || a->rank < 0 || a->rank >= a->nranks)
    return cudaErrorInvalidValue;
  const bool rooted = a->coll == LlCollective::Broadcast || a->coll == LlCollective::Reduce;
  if (rooted && (a->root < 0 || a->root >= a->nranks)) return cudaErrorInvalidValue;
  const bool readsSend = a->coll != LlCollective::Broadcast || a->rank == a->root;
  const bool writesRecv = a->coll != LlCollective::Reduce || a->rank == a->root;
  if ((readsSend && a->send == nullptr) || (writesRecv && a->recv == nullptr) ||
      a->state == nullptr || a->control == nullptr || a->maxBlocks < 1)
    return cudaErrorInvalidValue;
  if (a->nranks > 1 && a->slots == nullptr) return cudaErrorInvalidValue;
  return cudaSuccess;
}

int launchLlAllReduce(const LlAllReduceArgs& in, cudaStream_t stream) {
  if (in.count == 0) return cudaSuccess;
  LlAllReduceArgs a = in;
  if (const int rc = prepareLlArgs(&a); rc != cudaSuccess) return rc;
  if (a.nranks > 1 && a.slotBytes % kLlLineBytes != 0) return cudaErrorInvalidValue;
  return withElementType(
      a.type, [&](auto tag) { return dispatchOp<typename decltype(tag)::type>(a, stream); });
}

}  // namespace lanes::cuda
